"""
Every command the docs show for the project's own executables runs as written.

The pages (README.md and docs/**/*.md: fenced code blocks and inline code) are read for the
command lines of this package's executables (the ``console_scripts`` of setup.py, also after
``ros2 run soliton_encirclement_ros``), ``bash scripts/NAME.sh``, ``python
benchmarks/NAME.py`` and ``ros2 launch soliton_encirclement_ros NAME.launch.py``. Each is
parsed by the executable's own argument parser (the one its ``main`` builds, as the CLI
reference page gets it: docs/hooks/generated.py), a script or benchmark must exist, a
benchmark's options are parsed by its own parser, and a launch file must declare every
``name:=value`` argument. Placeholders in capitals (``BAG``, ``OUT``, ``FLEET_FILE``, ``N``)
stand for any value. A refused option or a missing required argument fails naming the page
and its line.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
from pathlib import Path
import re
import shlex
import sys

import pytest

from ros_support import parsers

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = 'soliton_encirclement_ros'
FENCE = re.compile(r'^\s*(```|~~~)')
INLINE = re.compile(r'(?<!`)`([^`\n]+(?:\n[^`\n]+)?)`(?!`)')
# A value that stands for any: BAG, OUT, FLEET_FILE, N, <bag>, ...
PLACEHOLDER = re.compile(r'[A-Z][A-Z0-9_]*|<[^<>]+>|\.\.\.|\$\{?[A-Za-z_]+\}?')
SEPARATORS = {'&&', '||', ';', '|', '&'}


class Refused(Exception):
    """A parser's error, raised instead of exiting."""


def cli_executables() -> tuple[str, ...]:
    """Return the executables with options of their own (the CLI page's list)."""
    source = (ROOT / 'docs' / 'hooks' / 'generated.py').read_text()
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], 'id', '') == \
                'CLI_EXECUTABLES':
            return tuple(ast.literal_eval(node.value))
    raise AssertionError('docs/hooks/generated.py has no CLI_EXECUTABLES')


def console_scripts() -> set[str]:
    from ros_support.entry import EXECUTABLES
    return set(EXECUTABLES)


def _placeholder(text: str) -> bool:
    return bool(PLACEHOLDER.fullmatch(text))


def _lenient(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` (and its subparsers) take a placeholder for any typed value."""
    class AnyChoice(list):

        def __contains__(self, item):
            return isinstance(item, str) and _placeholder(item) or list.__contains__(self, item)

    def error(message):
        raise Refused(f'{parser.prog}: error: {message}')
    parser.error = error
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _lenient(sub)
            continue
        if action.type is not None and callable(action.type):
            def typed(text, _type=action.type):
                return text if _placeholder(text) else _type(text)
            typed.__name__ = getattr(action.type, '__name__', 'type')
            action.type = typed
        if action.choices is not None:
            action.choices = AnyChoice(action.choices)
    return parser


def executable_parser(name: str) -> argparse.ArgumentParser:
    """Return the real parser of executable ``name`` (as the CLI page gets it), lenient."""
    return _lenient(parsers.executable_parser(name))


def benchmark_parser(path: Path) -> argparse.ArgumentParser | None:
    """Return the parser a benchmark's ``main`` builds, or None when it takes no options."""
    if 'argparse' not in path.read_text():
        return None
    spec = importlib.util.spec_from_file_location(f'docs_bench_{path.stem}', path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    parser = parsers.captured_parser(module.main)
    assert parser is not None, f'{path} parsed no arguments'
    return _lenient(parser)


def _dict_keys(node, scopes) -> set[str]:
    keys = set()
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values):
            if key is None:  # **OTHER
                keys |= _dict_keys(value, scopes)
            elif isinstance(key, ast.Constant) and isinstance(key.value, str):
                keys.add(key.value)
    elif isinstance(node, ast.Name):
        for scope in scopes:
            if node.id in scope:
                keys |= _dict_keys(scope[node.id], scopes)
                break
    return keys


def _assignments(tree) -> dict:
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
    return found


def launch_arguments(path: Path) -> set[str]:
    """Return the argument names a launch file declares (from its source: no launch needed)."""
    tree = ast.parse(path.read_text())
    scopes = [_assignments(tree)]
    for node in tree.body:  # the package modules it imports its argument tables from
        if isinstance(node, ast.ImportFrom) and (node.module or '').startswith(PACKAGE):
            source = ROOT / (node.module.replace('.', '/') + '.py')
            if source.exists():
                scopes.append(_assignments(ast.parse(source.read_text())))
    names = _dict_keys(scopes[0].get('ARGUMENTS', ast.Dict([], [])), scopes)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == \
                'DeclareLaunchArgument' and node.args and isinstance(node.args[0], ast.Constant):
            names.add(node.args[0].value)
    return names


def pages() -> list[Path]:
    return [ROOT / 'README.md', *sorted((ROOT / 'docs').rglob('*.md'))]


def _fenced_commands(lines: list[str]):
    """
    Yield (line number, text) of each shell line in the fenced blocks (continuations joined).

    A command line starts where its fence does: a line indented further is part of a drawing
    or a table in the block (or a continuation, joined to its line).
    """
    fence, pending, start = None, '', 0
    for number, line in enumerate(lines, 1):
        if FENCE.match(line):
            fence = None if fence is not None else len(line) - len(line.lstrip())
            pending = ''
            continue
        if fence is None:
            continue
        text = line.strip()
        if not pending:
            if len(line) - len(line.lstrip()) != fence:
                continue
            start = number
        if text.startswith('$ '):
            text = text[2:]
        if text.endswith('\\'):
            pending += text[:-1] + ' '
            continue
        yield start, pending + text
        pending = ''


def candidate_lines(path: Path):
    """Yield (line number, text, inline) of every piece of shell text on a page."""
    lines = path.read_text().splitlines()
    yield from ((number, text, False) for number, text in _fenced_commands(lines))
    prose, inside = [], False
    for line in lines:  # the prose alone, line for line (inline code may span a line break)
        if FENCE.match(line):
            inside = not inside
            prose.append('')
        else:
            prose.append('' if inside else line)
    text = '\n'.join(prose)
    for match in INLINE.finditer(text):
        yield text.count('\n', 0, match.start()) + 1, ' '.join(match.group(1).split()), True


def _words(text: str) -> list[str] | None:
    # a synopsis: [--option VALUE] is the option, <a b> one value, ... stands for more options
    text = re.sub(r'<[^<>\n]*>', 'VALUE', text)
    text = re.sub(r'(^|\s)\[(?=-)|(?<=[^\s\]])\](?=\s|$)', r'\1', text)
    text = re.sub(r'(^|\s)\.\.\.(?=\s|$)', r'\1', text)
    try:
        lexer = shlex.shlex(text, posix=True, punctuation_chars=';&|')
        lexer.whitespace_split = True
        lexer.commenters = '#'
        return list(lexer)
    except ValueError:  # an unclosed quote: not a command line
        return None


def _without_ros_arguments(args: list[str]) -> list[str]:
    """Drop ``--ros-args ... [--]``: rclpy takes them before the executable's parser runs."""
    if '--ros-args' not in args:
        return args
    start = args.index('--ros-args')
    end = args.index('--', start) + 1 if '--' in args[start:] else len(args)
    return args[:start] + args[end:]


def _simple_commands(words: list[str]):
    command = []
    for word in words:
        if word in SEPARATORS:
            if command:
                yield command
            command = []
        else:
            command.append(word)
    if command:
        yield command


def commands(path: Path):
    """
    Yield (line, kind, name, args, inline) of each command of the project's own on one page.

    ``inline``: it is inline code, which may be a fragment of a command (see :func:`problem`).
    """
    scripts = console_scripts()
    for number, text, inline in candidate_lines(path):
        words = _words(text)
        if not words:
            continue
        for command in _simple_commands(words):
            while command and re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*=.*', command[0]):
                command = command[1:]  # VAR=value before the command
            if command[:1] in (['sudo'], ['exec'], ['time']):
                command = command[1:]
            if command[:3] == ['ros2', 'run', PACKAGE]:
                command = command[3:]
            if command[:1] and command[0].startswith('.venv/bin/'):
                command = [command[0].removeprefix('.venv/bin/'), *command[1:]]
            if not command:
                continue
            head, args = command[0], _without_ros_arguments(command[1:])
            if inline and any(word.endswith(':') for word in args):
                continue  # a message the executable prints, quoted
            # inline code naming an executable alone is a mention, not a command line
            if head in scripts and (args or not inline):
                yield number, 'executable', head, args, inline
            elif head == 'bash' and args and args[0].startswith('scripts/'):
                yield number, 'script', args[0], args[1:], inline
            elif head in ('python', 'python3', '.venv/bin/python') and args and \
                    args[0].startswith('benchmarks/'):
                yield number, 'benchmark', args[0], args[1:], inline
            elif command[:3] == ['ros2', 'launch', PACKAGE] and len(command) > 3:
                yield number, 'launch', command[3], command[4:], inline


def _whole(parser: argparse.ArgumentParser, args: list[str]) -> bool:
    """Whether ``args`` reads as a whole command line: a positional argument after the command."""
    if not args or args[0].startswith('-'):
        return False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args[0] in action.choices:
            return _whole(action.choices[args[0]], args[1:])
    return True


# What a fragment of a command in a sentence may leave out (`fleet check`, `swarm_sim --record`)
FRAGMENT = re.compile(r'the following arguments are required|expected (one|at least one) argument')


def problem(kind: str, name: str, args: list[str], inline: bool = False) -> str | None:
    """
    Why this command would not run as written, or None.

    Inline code that gives no positional argument (``fleet check``, ``swarm_sim --record``)
    names a subcommand or an option in a sentence: its options must exist and its values be
    valid, but it may leave out the rest. Every other command line must parse whole.
    """
    if kind == 'executable':
        if name not in cli_executables():
            return None  # a node: configured by ROS parameters (the parameter tables' check)
        parser = executable_parser(name)
        try:
            parser.parse_args(args)
        except Refused as refused:
            if inline and not _whole(parser, args) and FRAGMENT.search(str(refused)):
                return None
            return str(refused)
        except SystemExit:  # --help
            return None
        return None
    if kind == 'script':
        script = ROOT / name
        if not script.exists():
            return f'no {name}'
        if name == 'scripts/docs.sh' and args and args[0] not in ('build', 'serve'):
            return f'{name} takes build or serve, got {args[0]!r}'
        if name == 'scripts/demo.sh' and args:  # its extra arguments go to swarm_sim
            return problem('executable', 'swarm_sim', args)
        if name == 'scripts/setup.sh' and args:
            return f'{name} takes no arguments, got {args}'
        return None
    if kind == 'benchmark':
        bench = ROOT / name
        if not bench.exists():
            return f'no {name}'
        parser = benchmark_parser(bench)
        if parser is None:
            return f'{name} takes no arguments, got {args}' if args else None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                parser.parse_args(args)
        except Refused as refused:
            return str(refused)
        except SystemExit:
            return None
        return None
    launch_file = ROOT / 'launch' / name
    if not launch_file.exists():
        return f'no launch file launch/{name}'
    declared = launch_arguments(launch_file)
    for arg in args:
        key, sep, _ = arg.partition(':=')
        if not sep:
            if arg.startswith('-'):
                continue  # ros2 launch's own options (--show-args)
            return f'{name}: {arg!r} is not name:=value'
        if key not in declared:
            return f'{name} declares no argument {key!r} (it has {", ".join(sorted(declared))})'
    return None


def all_commands():
    for path in pages():
        for number, kind, name, args, inline in commands(path):
            yield path.relative_to(ROOT), number, kind, name, args, inline


def test_the_pages_show_commands_of_every_kind():
    """The extraction finds what the pages show (so an empty scan cannot pass)."""
    found = list(all_commands())
    kinds = {kind for _, _, kind, _, _, _ in found}
    assert kinds == {'executable', 'script', 'benchmark', 'launch'}, kinds
    names = {name for _, _, kind, name, _, _ in found if kind == 'executable'}
    assert {'swarm_sim', 'analyze_run', 'batch_sim', 'fleet', 'fit_mobility'} <= names


def test_every_documented_command_parses():
    bad = []
    for page, number, kind, name, args, inline in all_commands():
        why = problem(kind, name, args, inline)
        if why:
            bad.append(f'{page}:{number}: {shlex.join([name, *args])}\n    {why}')
    assert not bad, 'commands on the pages that do not run as written:\n' + '\n'.join(bad)


@pytest.mark.parametrize('line, refused', [
    ('analyze_run runs/flight1 --out results --outdir x', 'unrecognized arguments: --outdir'),
    ('swarm_sim --agents many', '--agents'),
    ('batch_sim --out OUT --no-such-option', 'unrecognized arguments: --no-such-option'),
    ('fleet no-such-command', 'invalid choice'),
])
def test_a_wrong_command_is_caught(tmp_path, line, refused):
    """The check refuses what the executable refuses, naming the page and line."""
    page = tmp_path / 'page.md'
    page.write_text(f'# Page\n\n```bash\n{line}\n```\n')
    found = list(commands(page))
    assert len(found) == 1 and found[0][0] == 4, found
    why = problem(*found[0][1:])
    assert why and refused in why, why


def test_placeholders_stand_for_any_value(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('Run `swarm_sim --agents N --duration SECONDS --out OUT`, then '
                    '`analyze_run BAG --out DIR --format FMT`.\n')
    found = list(commands(page))
    assert [name for _, _, name, _, _ in found] == ['swarm_sim', 'analyze_run']
    assert [problem(*item[1:]) for item in found] == [None, None]


def test_a_launch_argument_the_file_does_not_declare_is_caught(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('```bash\nros2 launch soliton_encirclement_ros swarm_sim.launch.py '
                    'num_agents:=4 agents:=4\n```\n')
    (found,) = commands(page)
    why = problem(*found[1:])
    assert why and "'agents'" in why, why
    assert {'num_agents', 'log_level', 'safety_area'} <= launch_arguments(
        ROOT / 'launch' / 'swarm_sim.launch.py')
