"""
What a swarm size costs: memory and CPU time per control tick, per engine and graph mode.

    .venv/bin/python benchmarks/bench_sizes.py

Runs ``batch_sim`` (each engine) and ``swarm_sim`` (the node graph in one process, and
``--processes``) as processes at a few small sizes and fits, per mode,

    peak memory [bytes]       = base + per_agent * N + per_pair * N^2
    CPU time per tick [s]     = tick_per_agent * N + tick_per_pair * N^2

(the time per tick from two run lengths, so the start-up drops out; ``--processes``: the
process tree's summed memory, linear in N, and its CPU). ``sim.sizes`` estimates a run from
these figures before it builds anything, and refuses a size that cannot fit in memory; its
``COSTS`` are this file's ``benchmarks/results/sizes.json`` (a unit test keeps them equal).
Prints the fit; nothing here asserts on timing.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

import numpy as np
from results import add_options, begin, save, table  # benchmarks/results.py, beside this

CONTROL_PERIOD = 0.05
# mode -> (command prefix after the executable, sizes, the two durations [sim s])
MODES = {
    'vectorised': (['batch_sim', '--engine', 'vectorised', '--no-plots'], (200, 400, 800),
                   (1.0, 3.0)),
    'per-agent': (['batch_sim', '--engine', 'per-agent', '--no-plots'], (25, 50, 100),
                  (1.0, 3.0)),
    'batch': (['batch_sim', '--engine', 'batch', '--no-plots'], (50, 100, 200), (1.0, 3.0)),
    'nodes': (['swarm_sim', '--no-progress', '--no-plots'], (10, 40, 80), (2.0, 4.0)),
    'processes': (['swarm_sim', '--no-progress', '--no-plots', '--processes',
                   '--real-time-factor', '4'], (3, 6), (4.0, 8.0)),
}


def tree_rss(root: int) -> int:
    """Return the summed resident memory of ``root`` and its descendants [bytes] (Linux)."""
    parents, rss = {}, {}
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / 'status').read_text()
            except OSError:
                continue
            fields = dict(line.split(':', 1) for line in status.splitlines() if ':' in line)
            parents[int(entry.name)] = int(fields.get('PPid', '0'))
            rss[int(entry.name)] = int(fields.get('VmRSS', '0 kB').split()[0]) * 1024
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    return sum(rss.get(pid, 0) for pid in tree)


def measure(command: list[str]) -> tuple[float, int]:
    """
    Run ``command``; return (CPU s of it and the children it reaped, peak memory [bytes]).

    The peak is the process's own (``ru_maxrss``), or, sampled every 0.2 s, its process
    tree's summed resident memory when that is more (``--processes``).
    """
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, tree_rss(process.pid))
        time.sleep(0.2)  # sampling the memory of a process tree while it runs
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode(errors='replace')
    process.stderr.close()
    if process.returncode != 0:
        raise RuntimeError(f'{" ".join(command)} exited {process.returncode}: {error[-500:]}')
    return usage.ru_utime + usage.ru_stime, max(peak, usage.ru_maxrss * 1024)


def run(mode: str, agents: int, duration: float, out: Path) -> tuple[float, int]:
    prefix, _, _ = MODES[mode]
    executable = Path(sys.executable).with_name(prefix[0])
    return measure([str(executable), *prefix[1:], '--agents', str(agents), '--duration',
                    str(duration), '--control-period', str(CONTROL_PERIOD), '--out',
                    str(out / f'{mode}-{agents}-{duration:g}')])


def fit(mode: str, out: Path) -> dict:
    _, sizes, (short, long) = MODES[mode]
    rows = []
    for n in sizes:
        cpu_short, _ = run(mode, n, short, out)
        cpu_long, rss = run(mode, n, long, out)
        per_tick = max(0.0, (cpu_long - cpu_short) / ((long - short) / CONTROL_PERIOD))
        rows.append((n, rss, per_tick))
        print(f'{mode:>10} N={n:<4} peak {rss / 2**20:7.1f} MiB, '
              f'{per_tick * 1e3:8.3f} ms CPU per tick', flush=True)
    n = np.array([r[0] for r in rows], dtype=float)
    memory = np.array([r[1] for r in rows])
    if mode == 'processes':  # the runner, and a process per node: linear in N
        per_agent, base = np.polyfit(n, memory, 1)
        return {'base': float(base), 'per_agent': float(per_agent), 'per_pair': 0.0,
                'tick_per_agent': float(np.mean([r[2] / r[0] for r in rows])),
                'tick_per_pair': 0.0, 'sizes': [int(v) for v in n]}
    ticks = np.array([r[2] for r in rows])
    base, per_agent, per_pair = np.linalg.lstsq(np.column_stack((np.ones_like(n), n, n * n)),
                                                memory, rcond=None)[0]
    tick_per_agent, tick_per_pair = np.linalg.lstsq(np.column_stack((n, n * n)), ticks,
                                                    rcond=None)[0]
    return {'base': float(max(base, memory.min() / 2)), 'per_agent': float(max(per_agent, 0.0)),
            'per_pair': float(max(per_pair, 0.0)),
            'tick_per_agent': float(max(tick_per_agent, 0.0)),
            'tick_per_pair': float(max(tick_per_pair, 0.0)), 'sizes': [int(v) for v in n]}


LABELS = {
    'vectorised': 'engine `vectorised` (`auto` without loss or simulated faults)',
    'per-agent': 'engine `per-agent`', 'batch': 'engine `batch`',
    'nodes': '`swarm_sim` node graph, one process', 'processes': '`swarm_sim --processes`'}


def quantity(value: float, unit: str) -> str:
    """Return ``value`` in ``unit`` with an SI prefix and two significant figures (no exponent)."""
    for factor, prefix in ((1e6, 'M'), (1e3, 'k'), (1.0, ''), (1e-3, 'm'), (1e-6, 'µ'),
                           (1e-9, 'n')):
        if abs(value) >= factor or factor == 1e-9:
            scaled = float(f'{value / factor:.2g}')
            return f'{scaled:g} {prefix}{unit}'
    return f'{value:g} {unit}'


def formula(terms: list[tuple[float, str]], unit: str) -> str:
    """Return 'a + b × N + c × N²' of the non-zero terms."""
    return ' + '.join(quantity(value, unit) + suffix for value, suffix in terms if value > 0)


def costs_table(results: dict) -> dict:
    """Return the fits as the docs show them: memory and CPU time per tick, per way of running."""
    rows = []
    for mode, fit_of in results.items():
        rows.append([LABELS[mode],
                     formula([(fit_of['base'], ''), (fit_of['per_agent'], ' × N'),
                              (fit_of['per_pair'], ' × N²')], 'B'),
                     formula([(fit_of['tick_per_agent'], ' × N'),
                              (fit_of['tick_per_pair'], ' × N²')], 's')])
    return table(['way of running', 'memory', 'CPU time per control tick'], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--modes', nargs='+', choices=tuple(MODES), default=list(MODES))
    add_options(parser)
    args = parser.parse_args()
    load_before = begin(args)
    with tempfile.TemporaryDirectory(prefix='bench_sizes_') as directory:
        results = {mode: fit(mode, Path(directory)) for mode in args.modes}
    for mode, figures in results.items():
        print(f'{mode}: ' + ', '.join(f'{k}={v:.4g}' for k, v in figures.items()
                                      if k != 'sizes'))
    save(args, 'sizes', {**results, 'costs': costs_table(results)}, load_before)


if __name__ == '__main__':
    main()
