"""
MkDocs hook: the parts of the site that come from the code and the benchmarks, made at build time.

A page asks for them with an HTML comment on a line of its own (or, for one value, inline):

- ``<!-- cli: swarm_sim -->``: every option of that executable, read from its own argparse
  parser (the one its ``main`` builds), grouped as ``--help`` groups them;
- ``<!-- settings: soliton_encirclement_ros.core.scenario:Scenario -->``: the table of a
  settings dataclass's fields (description, unit, default, range), as the parameter tables;
- ``<!-- results: NAME KEY -->``: the table ``KEY`` of ``benchmarks/results/NAME.json`` (an
  object with ``columns`` and ``rows``), with a line naming the file it comes from;
- ``<!-- result: NAME KEY -->`` inside a sentence: one value of that file.

A page that shows a benchmark's figures ends with where they come from: the file, the command
that wrote it, the package version, the date, the machine and its load. A missing file, table,
value or executable fails the build (``mkdocs build --strict`` as much as without), so a figure
cannot outlive the file it comes from. ``CHANGELOG.md`` at the top of the repository is served
as the page ``changelog.md``; the API pages show the docstrings' Sphinx roles (``:func:``) as
the code they name.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
from pathlib import Path
import re

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

from ros_support import parsers

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / 'CHANGELOG.md'
# benchmarks/results.py says where a benchmark's figures live and reads them back, once.
_spec = importlib.util.spec_from_file_location('benchmark_results',
                                               ROOT / 'benchmarks' / 'results.py')
benchmark_results = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(benchmark_results)

# The executables with options of their own, each documented on the CLI page; the others are
# ROS nodes, configured by their parameters (the parameter tables). A new executable must be
# put in one of the two, so that it cannot go undocumented.
CLI_EXECUTABLES = ('swarm_sim', 'batch_sim', 'sweep_sim', 'analyze_run', 'fit_mobility',
                   'fleet', 'px4_sitl_rehearsal', 'run_recorder')
NODE_EXECUTABLES = ('mobility_node', 'swarm_mobility_node', 'agent_node', 'target_node',
                    'metrics_node', 'px4_bridge_node', 'live_view', 'fleet_node')

# Sphinx roles in the docstrings (:func:`name`), which the API pages show as the code alone.
SPHINX_ROLE = re.compile(r':(?:func|class|meth|attr|data|mod|obj|exc):(?=<code>)')
DIRECTIVE = re.compile(r'^<!-- (?P<kind>cli|settings|results): (?P<args>[^>]*?) -->$', re.M)
INLINE = re.compile(r'<!-- result: (?P<args>[^>]*?) -->')
NEGATIVE_ZERO = re.compile(r'-0(\.0*)?')


def executable_parser(name: str) -> argparse.ArgumentParser:
    """Return the argument parser executable ``name`` builds, without running it."""
    try:
        return parsers.executable_parser(name)
    except LookupError as error:
        raise PluginError(f'cli: {error}') from None


def check_executables() -> None:
    """Fail when an executable is neither a documented CLI nor a node."""
    from ros_support.entry import EXECUTABLES
    unknown = sorted(set(EXECUTABLES) - set(CLI_EXECUTABLES) - set(NODE_EXECUTABLES))
    if unknown:
        raise PluginError(f'executables not documented: {", ".join(unknown)}: add each to '
                          'docs/hooks/generated.py CLI_EXECUTABLES (and a <!-- cli: NAME --> '
                          'on docs/reference/cli.md) or NODE_EXECUTABLES')


def _cell(text: str) -> str:
    return ' '.join(str(text).split()).replace('|', '\\|')


def _prose(text: str) -> str:
    """Return help text for a table cell: one line, ``|`` and ``<``, ``>`` shown as typed."""
    return _cell(text).replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')


def _option_rows(parser: argparse.ArgumentParser, actions) -> list[str]:
    formatter = parser._get_formatter()
    rows = []
    for action in actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            name = ', '.join(f'`{option}`' for option in action.option_strings)
        else:
            name = f'`{action.metavar or action.dest}`'
        value = ''
        if action.nargs != 0 and action.option_strings:
            if action.choices is not None and not isinstance(action,
                                                             argparse._SubParsersAction):
                value = ' \\| '.join(f'`{choice}`' for choice in action.choices)
            else:
                value = f'`{formatter._format_args(action, action.dest.upper())}`'
        help_text = formatter._expand_help(action) if action.help else ''
        rows.append(f'| {name} | {value} | {_prose(help_text)} |')
    return rows


def render_parser(parser: argparse.ArgumentParser, level: int = 3) -> str:
    """Return the Markdown of a parser: usage, description, its options by group, subcommands."""
    out = ['```text', parser.format_usage().strip().removeprefix('usage: '), '```', '']
    if parser.description:
        out += [parser.description.strip(), '']
    subcommands = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS]
        subcommands += [a for a in actions if isinstance(a, argparse._SubParsersAction)]
        rows = _option_rows(parser, [a for a in actions
                                     if not isinstance(a, argparse._SubParsersAction)])
        if not rows:
            continue
        title = {'options': 'Options', 'optional arguments': 'Options',
                 'positional arguments': 'Arguments'}.get(group.title, group.title)
        out += [f'**{title}**' + (f': {group.description}' if group.description else ''), '',
                '| option | value | what it does |', '|---|---|---|', *rows, '']
    for action in subcommands:
        for choice, sub in action.choices.items():
            out += [f'{"#" * level} `{parser.prog} {choice}`', '', render_parser(sub, level + 1)]
    if parser.epilog:
        out += ['```text', parser.epilog.strip(), '```', '']
    return '\n'.join(out)


def render_settings(target: str) -> str:
    """Return the field table of the settings dataclass ``module:Class``."""
    from ros_support.ros_parameters import markdown_table, specs_of
    module, _, name = target.partition(':')
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise PluginError(f'settings: cannot find {target}: {error}') from None
    if not dataclasses.is_dataclass(cls):
        raise PluginError(f'settings: {target} is not a dataclass')
    table = markdown_table(specs_of(cls))
    return table.replace('| parameter |', '| name |', 1)


def load_results(name: str) -> dict:
    """Return ``benchmarks/results/NAME.json`` (as ``benchmarks/results.py`` writes it)."""
    try:
        record = benchmark_results.load_results(name)
    except FileNotFoundError:
        raise PluginError(f'results: no benchmarks/results/{name}.json: run the benchmark that '
                          'writes it') from None
    missing = {'command', 'version', 'measured', 'machine', 'load', 'results'} - set(record)
    if missing:
        raise PluginError(f'results: benchmarks/results/{name}.json lacks '
                          f'{", ".join(sorted(missing))}')
    return record


def _lookup(record: dict, name: str, key: str):
    value = record['results']
    for part in key.split('.'):
        if not isinstance(value, dict) or part not in value:
            raise PluginError(f'results: benchmarks/results/{name}.json has no {key!r}')
        value = value[part]
    return value


def _value(value) -> str:
    """Return a results value as shown: a float in its shortest form, never a negative zero."""
    if isinstance(value, float):
        value += 0.0  # -0.0 is 0.0
        return f'{value:g}' if abs(value) >= 1e4 or (value and abs(value) < 1e-3) else str(value)
    if isinstance(value, str) and NEGATIVE_ZERO.fullmatch(value):  # a table's '-0.00'
        return value[1:]
    return '' if value is None else str(value)


def render_table(name: str, key: str, record: dict) -> str:
    """Return table ``key`` of results ``name`` and the line that names its file."""
    table = _lookup(record, name, key)
    if not isinstance(table, dict) or 'columns' not in table or 'rows' not in table:
        raise PluginError(f'results: {key!r} of benchmarks/results/{name}.json is not a table '
                          '(columns and rows)')
    columns = table['columns']
    out = ['| ' + ' | '.join(_cell(c) for c in columns) + ' |',
           '|' + '---|' * len(columns)]
    for row in table['rows']:
        if len(row) != len(columns):
            raise PluginError(f'results: a row of {key!r} in benchmarks/results/{name}.json has '
                              f'{len(row)} cells for {len(columns)} columns')
        out.append('| ' + ' | '.join(_cell(_value(v)) for v in row) + ' |')
    return '\n'.join(out) + f'\n\n*Figures from `benchmarks/results/{name}.json`.*\n'


def age_text(record: dict) -> str:
    """Return the commit and age line of a record; fail the build for an uncommitted tree."""
    try:
        return benchmark_results.age_text(record)
    except ValueError as error:
        raise PluginError(f'results: {error}') from None


def provenance(name: str, record: dict) -> str:
    """Return one list item: the file, its commit and age, command, version, date, machine."""
    machine = record['machine']
    where = f'{machine.get("cpus", "?")} cores, {machine.get("cpu", "unknown CPU")}'
    return (f'- `benchmarks/results/{name}.json`: measured on {age_text(record)}, package '
            f'version {record["version"]}, on {record["measured"][:10]} on {where}, '
            f'{record["load"]}; command `{record["command"]}`.')


def on_config(config):
    """Check, once per build, that every executable is documented."""
    check_executables()
    return config


def on_files(files, config):
    """Serve the repository's CHANGELOG.md as the page changelog.md."""
    files.append(File.generated(config, 'changelog.md', content=CHANGELOG.read_text()))
    return files


def on_page_markdown(markdown, page, config, files):
    """Expand the directives of one page and list where its figures come from."""
    used = {}

    def results(name: str) -> dict:
        if name not in used:
            used[name] = load_results(name)
        return used[name]

    def directive(match: re.Match) -> str:
        kind, args = match.group('kind'), match.group('args').split()
        if kind == 'cli':
            return '\n'.join(render_parser(executable_parser(name)) for name in args)
        if kind == 'settings':
            return '\n'.join(render_settings(target) for target in args)
        if len(args) != 2:
            raise PluginError(f'{page.file.src_uri}: results takes NAME KEY, got {args}')
        return render_table(args[0], args[1], results(args[0]))

    def inline(match: re.Match) -> str:
        args = match.group('args').split()
        if len(args) != 2:
            raise PluginError(f'{page.file.src_uri}: result takes NAME KEY, got {args}')
        return _value(_lookup(results(args[0]), args[0], args[1]))

    markdown = DIRECTIVE.sub(directive, markdown)
    markdown = INLINE.sub(inline, markdown)
    if used:
        markdown += ('\n\n---\n\n**Where the figures on this page come from** (the file a '
                     'benchmark wrote, and how):\n\n'
                     + '\n'.join(provenance(name, record) for name, record in used.items())
                     + '\n')
    return markdown


def on_page_content(html, page, config, files):
    """Show the docstrings' Sphinx roles (:func:`name`) as the code they name."""
    return SPHINX_ROLE.sub('', html)
