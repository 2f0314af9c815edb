"""
Sweep throughput: runs stepped together (``sweep_sim``) against one ``batch_sim`` per run.

    .venv/bin/python benchmarks/bench_sweep.py            # the documented scenario (~15 min)
    .venv/bin/python benchmarks/bench_sweep.py --quick    # a smoke test, NOT that scenario

By default it measures the documented scenario (N = 10, 120 s runs, P = 0.01 s). ``--quick``
(20 s runs) says so on every line it prints: there the one-off start-up of each ``batch_sim``
process dominates, and the ratio is several times the real one.

With ``--original-python`` and ``--original-dir`` (the original experiment, as
bench_original.py sets it up) it first measures ``sweep_sim`` against the original side by side,
in this one run: the ``sweep_sim`` command itself (N = 10, 60 s runs, control period 0.01 s,
static target, seeds 0..99, ``--workers 2 --no-plots``) and the original's ``main.py`` at the same
scenario (bench_original.py's ``equal`` preset, 60 s), alternating which goes first, CPU seconds
of each process tree (every worker included), agent-sim-seconds per CPU-second each. A first
short ``sweep_sim`` before the rounds fills numba's kernel cache if it is cold (a one-off per
install; its CPU-s are printed and saved apart):

    .venv/bin/python benchmarks/bench_sweep.py --n10-only --original-python \
        $ORIGINAL_VENV/bin/python --original-dir $ORIGINAL_SRC

Cases: static target, N = 10, 120 s, control period 0.01 s, seeds 0..199, as ``sweep_sim``
runs them (chunks of one shape, one process, CPU time of the work); the same figure for
``batch_sim`` started as a process per run (a few seeds, CPU time of the child including start-up
and its outputs, as a shell loop pays it); their ratio; the wall time 1000 such runs would take
on this machine's cores. ``batch_sim`` is measured with its plots and with ``--no-plots`` (what
a sweep writes: tables only). Then N = 100 (50 runs) and N = 1000 (5 runs), and how the cost of a
chunk grows with the runs in it. Throughput is agent-simulated-seconds per CPU-second. Prints
figures and writes them to benchmarks/results/sweep.json (``--no-save``: print only); nothing
here asserts.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import bench_original
from results import add_options, begin, command_line, save, table

from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.executables import find_executable
from soliton_encirclement_ros.sim.sweep import chunks, Run, run_chunk


def sweep_throughput(agents: int, duration: float, runs: int, workers: int = 1) -> tuple:
    """Return (agent-s per CPU-s, CPU s, chunks) of ``runs`` seeds through the sweep's chunks."""
    base = Scenario(agents=agents, duration=duration, control_period=0.01)
    todo = [Run({}, seed, base.with_changes(seed=seed)) for seed in range(runs)]
    work = chunks(todo, workers)
    cpu = time.process_time()
    for chunk in work:
        rows = run_chunk([r.scenario.to_mapping() for r in chunk])
        assert not any(row['error'] for row in rows), rows
    cpu = time.process_time() - cpu
    return agents * duration * runs / cpu, cpu, len(work)


def batch_sim_throughput(agents: int, duration: float, seeds: int, *options: str) -> tuple:
    """Return (agent-s per CPU-s, CPU s per run) of one ``batch_sim`` process per run."""
    exe = find_executable('batch_sim')
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as out:
        for seed in range(seeds):
            subprocess.run([str(exe), '--agents', str(agents), '--duration', str(duration),
                            '--control-period', '0.01', '--seed', str(seed), '--out',
                            f'{out}/{seed}', *options], check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return agents * duration * seeds / cpu, cpu / seeds


SIDE_BY_SIDE = {'agents': 10, 'duration': 60.0, 'seeds': 100, 'workers': 2, 'rounds': 2}


def sweep_sim_process(out: Path, seeds: int = 0, duration: float = 0.0) -> float:
    """Run the side-by-side sweep with the ``sweep_sim`` command; return its tree's CPU-s."""
    case = SIDE_BY_SIDE
    out.mkdir()
    spec = out / 'spec.yaml'
    spec.write_text(f"scenario: {{agents: {case['agents']}, "
                    f"duration: {duration or case['duration']}, control_period: 0.01}}\n"
                    f"seeds: {seeds or case['seeds']}\n")
    before = bench_original.tree_cpu()
    done = subprocess.run([str(find_executable('sweep_sim')), str(spec), '--out',
                           str(out / 'runs'), '--workers', str(case['workers']), '--no-plots'],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          stdin=subprocess.DEVNULL, text=True)
    if done.returncode:
        raise SystemExit(f'sweep_sim failed ({done.returncode}):\n{done.stderr[-3000:]}')
    return bench_original.tree_cpu() - before


def versus_original(python: str, directory: str) -> dict:
    """Measure ``sweep_sim`` and the original side by side; print and return the figures."""
    case = SIDE_BY_SIDE
    bench_original.load_bench_swarm_sim(Path(__file__).resolve().parents[1]).compile_sources(
        python, Path(directory))
    print(f"sweep_sim (N = {case['agents']}, {case['duration']:g} s runs, P = 0.01 s, static "
          f"target, {case['seeds']} seeds, --workers {case['workers']}) against the original "
          f"(its main.py, equal preset, {case['duration']:g} s), CPU-s of each process tree")
    rates = {'original': [], 'sweep_sim': []}
    ratios = []
    with tempfile.TemporaryDirectory() as tmp:
        # Once per install, the first sweep's fork server compiles the batch engine's kernels
        # into numba's cache (core/compiled.py); a sweep after that loads them. Not counted
        # here: said apart, as a first run pays it.
        first = sweep_sim_process(Path(tmp) / 'first', seeds=2, duration=1.0)
        print(f'  first sweep_sim (2 runs of 1 s: start-up, and the one-off compile if the '
              f'kernel cache is cold): {first:.1f} CPU-s', flush=True)
        for round_ in range(case['rounds']):
            sides = ['original', 'sweep_sim'] if round_ % 2 == 0 else ['sweep_sim', 'original']
            paired = {}
            for side in sides:
                out = Path(tmp) / f'{side}_{round_}'
                load = os.getloadavg()[0]
                if side == 'original':
                    before = bench_original.tree_cpu()
                    result = bench_original.run_original(
                        python, directory, bench_original.EQUAL, True, case['duration'], out)
                    cpu = bench_original.tree_cpu() - before
                    agent_s = case['agents'] * result['sim']
                else:
                    cpu = sweep_sim_process(out)
                    agent_s = case['agents'] * case['duration'] * case['seeds']
                paired[side] = agent_s / cpu
                rates[side].append(paired[side])
                print(f'  {side:<10}{agent_s:>9,.0f} agent-s {cpu:>8.1f} CPU-s '
                      f'{paired[side]:>9,.1f} agent-s per CPU-s (load {load:.2f})', flush=True)
            ratios.append(paired['sweep_sim'] / paired['original'])
            print(f'  round {round_ + 1}: sweep_sim / original = {ratios[-1]:,.0f}x', flush=True)
    rows = [[round(statistics.median(rates['original']), 1),
             round(statistics.median(rates['sweep_sim'])),
             ', '.join(f'{r:,.0f}x' for r in ratios)]]
    return {'versus_original': table(['original: agent-s per CPU-s',
                                      'sweep_sim: agent-s per CPU-s',
                                      'sweep_sim / original, each round'], rows),
            'first_sweep_cpu_s': round(first, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--quick', action='store_true',
                        help='20 s runs instead of 120 s: a smoke test, not the documented '
                        'scenario (start-up dominates)')
    parser.add_argument('--n10-only', action='store_true',
                        help='only the N = 10 comparison (no N = 100/1000, no chunk sizes)')
    parser.add_argument('--original-python',
                        help="python of the original experiment's venv (bench_original.py): "
                        'measure sweep_sim against the original side by side first')
    parser.add_argument('--original-dir', help="the original's source tree (main.py)")
    add_options(parser)
    args = parser.parse_args()
    if bool(args.original_python) != bool(args.original_dir):
        parser.error('--original-python and --original-dir go together')
    load = begin(args)
    versus = versus_original(args.original_python, args.original_dir) \
        if args.original_python else None
    duration = 20.0 if args.quick else 120.0
    cores = os.cpu_count() or 1
    mark = '[QUICK: 20 s runs, not the documented scenario] ' if args.quick else ''
    print(f'{mark}static target, N=10, control period 0.01 s, {duration:g} s per run, '
          f'{cores} cores')
    sweep, cpu, n_chunks = sweep_throughput(10, duration, 200)
    print(f'{mark}N=10, 200 runs, sweep chunks ({n_chunks}): {sweep:,.0f} agent-s per CPU-s '
          f'({cpu:.1f} CPU s, {cpu / 200:.3f} CPU s per run)', flush=True)
    rows = [['sweep_sim chunks', round(sweep), round(cpu / 200, 3), '']]
    for label, options in (('', ()), (' --no-plots', ('--no-plots',))):
        single, per_run = batch_sim_throughput(10, duration, 3, *options)
        print(f'{mark}N=10, one batch_sim{label} process per run: {single:,.0f} agent-s per '
              f'CPU-s ({per_run:.2f} CPU s per run); sweep ratio {sweep / single:.1f}x',
              flush=True)
        rows.append([f'one batch_sim{label} process per run', round(single),
                     round(per_run, 2), f'{sweep / single:.1f}x'])
    projected = 1000 * cpu / 200 * (120.0 / duration) / cores
    print(f'{mark}1000 runs of 120 s on {cores} cores: about {projected / 60:.1f} min wall')
    results = {'quick': args.quick, 'run_length_s': duration,
               'minutes_for_1000_runs': round(projected / 60, 1),
               **(versus or {}),
               'n10': table(['N = 10, 200 runs', 'agent-s per CPU-s', 'CPU-s per run',
                             'the sweep is faster by'], rows)}
    if not args.n10_only:
        rows = []
        for agents, runs, dur in ((100, 50, duration / 4), (1000, 5, duration / 12)):
            rate, cpu, n_chunks = sweep_throughput(agents, dur, runs)
            print(f'{mark}N={agents}, {runs} runs of {dur:g} s ({n_chunks} chunks): '
                  f'{rate:,.0f} agent-s per CPU-s ({cpu:.1f} CPU s)', flush=True)
            rows.append([agents, runs, dur, round(rate)])
        results['large'] = table(['N', 'runs', 'run length [s]', 'agent-s per CPU-s'], rows)
        print(f'{mark}runs per chunk (N=10, 10 s runs): agent-s per CPU-s')
        rows = []
        for size in (1, 10, 50, 100, 200):
            base = Scenario(agents=10, duration=10.0, control_period=0.01)
            cpu = time.process_time()
            run_chunk([base.with_changes(seed=s).to_mapping() for s in range(size)])
            cpu = time.process_time() - cpu
            print(f'  {size:4d}: {10 * 10.0 * size / cpu:,.0f}', flush=True)
            rows.append([size, round(10 * 10.0 * size / cpu)])
        results['chunk'] = table(['runs in a chunk (N = 10, 10 s runs)',
                                  'agent-s per CPU-s'], rows)
    argv = list(sys.argv)
    for option, placeholder in (('--original-python', 'ORIGINAL_VENV/bin/python'),
                                ('--original-dir', 'ORIGINAL_SRC')):
        if option in argv[:-1]:
            argv[argv.index(option) + 1] = placeholder
    save(args, 'sweep', results, load, command=command_line(argv))


if __name__ == '__main__':
    main()
