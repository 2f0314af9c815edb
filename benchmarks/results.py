"""
Where a benchmark's figures live: ``benchmarks/results/<name>.json``, one file per benchmark.

The documentation renders its figures from these files, so that a figure and the command that
measured it never drift apart. Each file holds::

    {"benchmark": "separation",            # the name, also the file's stem
     "command": ".venv/bin/python benchmarks/bench_separation.py --quick",
     "version": "0.1.0", "commit": "<sha>[-dirty]",
     "measured": "2026-11-26T10:00:00+00:00",
     "machine": {"cpus": 2, "cpu": "...", "python": "3.11.7", "platform": "..."},
     "load": "idle",                       # or what else ran (e.g. "both cores busy")
     "results": {...}}                     # the benchmark's own figures (JSON values)

:func:`write_results` writes it; :func:`load_results` reads it back. A benchmark adds
:func:`add_options` (``--no-save``: print only; ``--load TEXT``: what else ran) and ends with
:func:`save`, which records the 1-minute load average unless told what ran. Its figures are
tables, :func:`table` (``columns`` and ``rows``), and single values; the docs build renders
them (``docs/hooks/generated.py``).
"""
from __future__ import annotations

import datetime
import json
import os
from pathlib import Path
import platform
import shlex
import sys
from typing import Any

from soliton_encirclement_ros.provenance import code_identity

RESULTS_DIR = Path(__file__).resolve().parent / 'results'


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


def add_options(parser) -> None:
    """Add ``--no-save`` and ``--load`` to a benchmark's argument parser."""
    parser.add_argument('--no-save', action='store_true',
                        help='print the figures only; do not write benchmarks/results/')
    parser.add_argument('--load', default=None, metavar='TEXT',
                        help='what else ran meanwhile, recorded with the figures (default: '
                        'the 1-minute load average at the start and the end)')


def load_average() -> float:
    """Return the 1-minute load average now (take it before a benchmark starts)."""
    return os.getloadavg()[0]


def save(args, name: str, results: dict[str, Any], load_before: float) -> Path | None:
    """Write ``results`` as ``name`` unless ``--no-save``; say where; return the path."""
    if args.no_save:
        return None
    load = args.load or (f'1-minute load average {load_before:.1f} at the start, '
                         f'{load_average():.1f} at the end')
    path = write_results(name, results, load=load)
    print(f'figures written to {path}', flush=True)
    return path


def write_results(name: str, results: dict[str, Any], load: str = 'idle',
                  command: str | None = None, directory: Path | None = None) -> Path:
    """Write ``results`` as ``<directory>/<name>.json`` with where and how they were measured."""
    directory = RESULTS_DIR if directory is None else Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    identity = code_identity()
    record = {'benchmark': name, 'command': command or command_line(),
              'version': identity['version'], 'commit': identity['commit'],
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
