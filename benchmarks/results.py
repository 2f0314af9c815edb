"""
Where a benchmark's figures live: ``benchmarks/results/<name>.json``, one file per benchmark.

The documentation renders its figures from these files, so that a figure and the command that
measured it never drift apart. Each file holds::

    {"benchmark": "separation",            # the name, also the file's stem
     "command": ".venv/bin/python benchmarks/bench_separation.py --quick",
     "version": "0.1.0", "commit": "<sha>",  # a commit: never an uncommitted tree
     "code": ["soliton_encirclement_ros/core", ...],  # the code the figures measure
     "measured": "2026-11-26T10:00:00+00:00",
     "machine": {"cpus": 2, "cpu": "...", "python": "3.11.7", "platform": "..."},
     "load": "1-minute load average 0.4 at the start, 1.9 at the end",
     "results": {...}}                     # the benchmark's own figures (JSON values)

:func:`write_results` writes it; :func:`load_results` reads it back. A benchmark adds
:func:`add_options` (``--no-save``: print only; ``--draft``: write to ``results/drafts/``) and
ends with :func:`save`. Its figures are tables, :func:`table` (``columns`` and ``rows``), and
single values; the docs build renders them (``docs/hooks/generated.py``) with the commit they
were measured on and how many commits to their ``code`` have landed since.

Figures are measured on committed code only: from a tree with uncommitted changes to tracked
files (or outside a git checkout) :func:`write_results` refuses in one line, unless the figures
are a draft, which goes to ``benchmarks/results/drafts/`` (not tracked, never rendered).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path
import platform
import shlex
import subprocess
import sys
from typing import Any

from soliton_encirclement_ros.provenance import code_identity, UNKNOWN

RESULTS_DIR = Path(__file__).resolve().parent / 'results'
DRAFTS_DIR = RESULTS_DIR / 'drafts'
# The code a figure measures unless its benchmark names less: the three packages.
PACKAGE_CODE = ('ros_support', 'soliton_encirclement_ros', 'velocity_mobility_ros')
# The controller and the vehicle model alone: what the quality figures (separation,
# stability) measure.
LAW_CODE = ('soliton_encirclement_ros/core', 'velocity_mobility_ros/core')


class UncommittedTree(SystemExit):
    """Raised (one line, as SystemExit) where figures would be saved from an uncommitted tree."""


def machine() -> dict[str, Any]:
    """Return what the figures depend on: cores, the CPU model, Python and the platform."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path('/proc/cpuinfo').read_text().splitlines():
            if line.startswith('model name'):
                cpu = line.split(':', 1)[1].strip()
                break
    except OSError:
        pass
    return {'cpus': os.cpu_count(), 'cpu': cpu, 'python': platform.python_version(),
            'platform': platform.platform(terse=True)}


def command_line(argv: list[str] | None = None) -> str:
    """Return the command that ran this benchmark, as a user would type it from the repo."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    try:
        script = script.relative_to(Path(__file__).resolve().parents[1])
    except ValueError:
        pass
    return shlex.join(['.venv/bin/python', str(script), *argv[1:]])


def table(columns: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    """Return a table of figures as the docs render it: a header and rows of cells."""
    return {'columns': list(columns), 'rows': [list(row) for row in rows]}


def gain_change(text: str) -> tuple:
    """Parse ``--gain NAME=VALUE`` (the value in YAML); the name and value are checked later."""
    import yaml
    name, sep, value = text.partition('=')
    if not sep or not name:
        raise argparse.ArgumentTypeError(f'expected NAME=VALUE (k_tau=1.0), got {text!r}')
    try:
        return name.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        raise argparse.ArgumentTypeError(f'{name}: {value!r} is not a YAML value') from None


def add_gain_option(parser) -> None:
    """Add ``--gain NAME=VALUE`` (repeatable): a controller gain over the preset's."""
    parser.add_argument('--gain', action='append', default=[], metavar='NAME=VALUE',
                        type=gain_change,
                        help="a controller gain over the preset's (repeatable; the value in "
                        'YAML: 1.0, true)')


def checked_gains(parser, args, preset: str = 'default', others: dict | None = None,
                  refused: dict | None = None) -> dict:
    """
    Return ``--gain``'s changes (the last value of a name counts), checked before anything runs.

    Checked together with ``others`` (the benchmark's own gain options) over ``preset`` as the
    controller checks them; a name in ``refused`` (name: why) or set by each run
    (``SCENARIO_SET``) is refused. A refusal is one line (``parser.error``).
    """
    from soliton_encirclement_ros.core.gains import ControllerParams
    from soliton_encirclement_ros.core.scenario import SCENARIO_SET
    changes = dict(args.gain)
    why = dict.fromkeys(SCENARIO_SET, 'each run sets it (its scenario and vehicle), not a gain')
    why.update(refused or {})
    for name in sorted(set(changes) & set(why)):
        parser.error(f'--gain {name}: {why[name]}')
    try:
        ControllerParams.preset(preset, **{**(others or {}), **changes})
    except ValueError as error:
        parser.error(str(error))
    return changes


def gains_suffix(changes: dict) -> str:
    """Return the results name's suffix for ``changes``: ``_k_tau_1_k_omega_own_0.8``."""
    return ''.join(f'_{name}_{value}' if isinstance(value, bool) else f'_{name}_{value:g}'
                   for name, value in changes.items())


def add_options(parser) -> None:
    """Add ``--no-save`` and ``--draft`` to a benchmark's argument parser."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument('--no-save', action='store_true',
                       help='print the figures only; do not write benchmarks/results/')
    where.add_argument('--draft', action='store_true',
                       help='write the figures to benchmarks/results/drafts/ (not tracked, '
                       'never rendered): for a tree with uncommitted changes')


def load_average() -> float:
    """Return the 1-minute load average now (take it before a benchmark starts)."""
    return os.getloadavg()[0]


def load_text(load_before: float) -> str:
    """Return the load a benchmark ran under: the 1-minute load average before and now."""
    return (f'1-minute load average {load_before:.1f} at the start, '
            f'{load_average():.1f} at the end')


def measured_commit() -> str:
    """Return the commit of the code measured here (``-dirty``: changed, ``unknown``: no git)."""
    commit = code_identity()['commit']
    # a benchmark writes its figures (results files, and the plots of docs/images): those
    # measure nothing, so a tree changed only there is the commit measured
    changes = _git('status', '--porcelain', '--untracked-files=no', '--', '.',
                   ':!benchmarks/results', ':!docs/images').stdout.strip() \
        if commit.endswith('-dirty') else 'x'
    if not changes:
        commit = commit.removesuffix('-dirty')
    return commit


def check_committed(draft: bool = False) -> str:
    """Return the commit figures would be measured on; refuse an uncommitted tree (one line)."""
    commit = measured_commit()
    if draft or (commit != UNKNOWN and not commit.endswith('-dirty')):
        return commit
    raise UncommittedTree(
        'results: refusing to save figures measured on '
        + ('code outside a git checkout' if commit == UNKNOWN else
           f'a tree with uncommitted changes ({commit})')
        + ': commit first and measure again, or pass --draft (written to '
        'benchmarks/results/drafts/, never rendered)')


def save(args, name: str, results: dict[str, Any], load_before: float,
         code: tuple[str, ...] | None = None, command: str | None = None) -> Path | None:
    """Write ``results`` as ``name`` unless ``--no-save``; say where; return the path."""
    if args.no_save:
        return None
    draft = getattr(args, 'draft', False)
    path = write_results(name, results, load=load_text(load_before), command=command,
                         code=code, draft=draft)
    print(f'figures written to {path}' + (' (a draft: never rendered)' if draft else ''),
          flush=True)
    return path


def write_results(name: str, results: dict[str, Any], load: str, command: str | None = None,
                  directory: Path | None = None, code: tuple[str, ...] | None = None,
                  draft: bool = False) -> Path:
    """Write ``results`` as ``<directory>/<name>.json`` with where and how they were measured."""
    commit = check_committed(draft)
    if directory is None:
        directory = DRAFTS_DIR if draft else RESULTS_DIR
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    identity = code_identity()
    record = {'benchmark': name, 'command': command or command_line(),
              'version': identity['version'], 'commit': commit,
              'code': list(code or PACKAGE_CODE),
              'measured': datetime.datetime.now(datetime.timezone.utc).isoformat(
                  timespec='seconds'),
              'machine': machine(), 'load': load, 'results': results}
    path = directory / f'{name}.json'
    tmp = path.with_suffix('.json.tmp')
    tmp.write_text(json.dumps(record, indent=1, allow_nan=False) + '\n')
    tmp.replace(path)
    return path


def load_results(name: str, directory: Path | None = None) -> dict[str, Any]:
    """Return the record of ``name`` (``FileNotFoundError`` when it was never measured)."""
    directory = RESULTS_DIR if directory is None else Path(directory)
    return json.loads((directory / f'{name}.json').read_text())


def begin(args) -> float:
    """Refuse now (one line) what :func:`save` would refuse later; return the load average."""
    if not args.no_save:
        check_committed(getattr(args, 'draft', False))
    return load_average()


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(['git', '-C', str(RESULTS_DIR.parents[1]), *args],
                          capture_output=True, text=True, timeout=30)


def commits_since(commit: str, code) -> int | None:
    """Return how many commits to ``code`` (paths) came after ``commit``; None if unknown."""
    try:
        if _git('merge-base', '--is-ancestor', commit, 'HEAD').returncode:
            return None
        return int(_git('rev-list', '--count', f'{commit}..HEAD', '--', *code).stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def age_text(record: dict[str, Any]) -> str:
    """
    Return 'commit `abc1234` of `code` (N commits to it since)' for a results record.

    ``ValueError`` (one line) for figures from an uncommitted tree or no commit at all.
    """
    commit = record.get('commit') or UNKNOWN
    if commit == UNKNOWN or commit.endswith('-dirty'):
        raise ValueError(f'benchmarks/results/{record.get("benchmark")}.json was measured on '
                         + ('no commit' if commit == UNKNOWN else 'an uncommitted tree')
                         + ': measure it again on a commit')
    code = record.get('code') or PACKAGE_CODE
    where = ', '.join(f'`{path}`' for path in code)
    since = commits_since(commit, code)
    if since is None:
        return f'commit `{commit[:7]}` of {where} (not in this history: its age is unknown)'
    age = 'the code as it is now' if since == 0 else (
        f'{since} commit{"" if since == 1 else "s"} to it since')
    return f'commit `{commit[:7]}` of {where} ({age})'
