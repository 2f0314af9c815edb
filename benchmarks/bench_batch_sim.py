"""
Batch simulator speed and the reference acceptance figures.

    .venv/bin/python benchmarks/bench_batch_sim.py speed        # sim-s per CPU-s
    .venv/bin/python benchmarks/bench_batch_sim.py speed --agents 1000 10000 --periods 0.05
    .venv/bin/python benchmarks/bench_batch_sim.py acceptance   # N=10, 32 static, moving target
        (with the reference gains, for parity; --preset default for the package defaults)
    .venv/bin/python benchmarks/bench_batch_sim.py process      # the whole batch_sim process

``speed`` times ``simulate()`` inside this process (``time.process_time``): the build and the
loop, no start-up and no outputs. ``process`` runs the documented command as a user types it,

    batch_sim --agents 1000 --duration 10 --control-period 0.05 --out DIR

and takes the CPU seconds (user + sys) of its whole process tree (``getrusage(RUSAGE_CHILDREN)``
of this script around it: start-up, imports, numba's cache, the run, the CSVs, summary.json and
the eight figures), as ``/usr/bin/time`` reports them, with its default outputs and with
``--no-plots``, alternately, ``--rounds`` times (default 3). A first run (not counted; its
CPU seconds are saved as ``first_run_cpu_s``) fills numba's kernel cache where it is cold, as
after an install. Each run must exit 0 and leave every output it promises.

Prints the figures and writes them to benchmarks/results/batch_sim_speed.json,
batch_sim_acceptance.json or batch_sim_process.json (``--no-save``: print only); nothing here
asserts on timing.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import statistics
import subprocess
import tempfile
import time

from bench_original import tree_cpu
from results import add_options, begin, save, table

from soliton_encirclement_ros.analysis.plots import figure_name
from soliton_encirclement_ros.analysis.report import FIGURES, summarise
from soliton_encirclement_ros.core.gains import PRESETS
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate
from soliton_encirclement_ros.sim.executables import find_executable

# (agents, simulated seconds): N = 1,000 over batch_sim --duration 10, and N = 10,000
SPEED_CASES = ((10, 20.0), (100, 10.0), (1000, 10.0), (10000, 1.0))
ACCEPTANCE = {
    'static N=10, 120 s': (Scenario(agents=10), {'mean E_r': 0.003, 'mean E_gap': 0.035,
                                                 'mean G_max': 1.09}),
    'static N=32, 120 s': (Scenario(agents=32), {'final E_gap': 0.37, 'final G_max': 1.63}),
    'moving target N=10, failures 1/min, 300 s': (
        Scenario(agents=10, duration=300.0, target_motion='random', target_speed=5.0,
                 target_period=1.0, target_boundary=20.0, failures_per_min=1.0,
                 failure_off_time=8.0),
        {'mean E_r': 0.075, 'mean E_gap': 0.22}),
}


def speed(periods, engines, sizes) -> dict:
    print('| N | control period [s] | engine | sim-s per CPU-s |')
    print('|---|---|---|---|')
    rows = []
    for engine in engines:
        for period in periods:
            for agents, duration in SPEED_CASES:
                if agents not in sizes or (engine == 'per-agent' and agents > 100):
                    continue
                start = time.process_time()
                result = simulate(Scenario(agents=agents, duration=duration,
                                           control_period=period), engine)
                rate = duration / (time.process_time() - start)
                print(f'| {agents} | {period:g} | {result.params["engine"]} | {rate:.2f} |',
                      flush=True)
                rows.append([agents, period, result.params['engine'], round(rate, 2)])
    return {'speed': table(['N', 'control period [s]', 'engine', 'sim-s per CPU-s'], rows)}


# The documented command whose whole process is measured (its --out is added).
PROCESS_COMMAND = ('batch_sim', '--agents', '1000', '--duration', '10', '--control-period', '0.05')
PROCESS_SIM_S = 10.0
TABLES = ('metrics.csv', 'agents.csv', 'summary.json')


def process_run(out: Path, plots: bool) -> tuple[float, float, float]:
    """
    Run the documented command into ``out``; return its tree's CPU-s, its wall s and the load.

    Refuses (one line) a run that fails or leaves an output missing.
    """
    command = [str(find_executable(PROCESS_COMMAND[0])), *PROCESS_COMMAND[1:], '--out',
               str(out), *(() if plots else ('--no-plots',))]
    load = os.getloadavg()[0]
    before, wall = tree_cpu(), time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu, wall = tree_cpu() - before, time.perf_counter() - wall
    if done.returncode:
        raise SystemExit(f'batch_sim exited {done.returncode}: {done.stderr.strip()[-2000:]}')
    expected = [*TABLES, *((figure_name(name) for name in FIGURES) if plots else ())]
    missing = [name for name in expected if not (out / name).is_file()]
    if missing:
        raise SystemExit(f'batch_sim left no {", ".join(missing)} in {out}')
    return cpu, wall, load


def process(rounds: int) -> dict:
    """Whole-process CPU of the documented command, with and without plots, alternately."""
    with tempfile.TemporaryDirectory(prefix='bench_batch_sim-') as tmp:
        first, _, _ = process_run(Path(tmp) / 'first', plots=True)
        print(f'first run (fills a cold numba cache; not counted): {first:.2f} CPU-s', flush=True)
        print('| round | outputs | CPU-s (user + sys) | sim-s per CPU-s | wall s | load |')
        print('|---|---|---|---|---|---|')
        rows, rates = [], {True: [], False: []}
        for k in range(1, rounds + 1):
            for plots in ((True, False) if k % 2 else (False, True)):
                cpu, wall, load = process_run(Path(tmp) / f'{k}-{plots}', plots)
                outputs = 'default (plots)' if plots else '--no-plots'
                rates[plots].append(PROCESS_SIM_S / cpu)
                row = [k, outputs, round(cpu, 2), round(PROCESS_SIM_S / cpu, 2), round(wall, 1),
                       round(load, 1)]
                print('| ' + ' | '.join(str(cell) for cell in row) + ' |', flush=True)
                rows.append(row)
    summary = [[outputs, round(min(rates[plots]), 2), round(statistics.median(rates[plots]), 2),
                round(max(rates[plots]), 2)]
               for plots, outputs in ((True, 'default (plots)'), (False, '--no-plots'))]
    print('| outputs | sim-s per CPU-s: least | median | most |', *(
        '| ' + ' | '.join(str(cell) for cell in row) + ' |' for row in summary), sep='\n')
    return {'command': ' '.join([*PROCESS_COMMAND, '--out', 'DIR']),
            'first_run_cpu_s': round(first, 2),
            'runs': table(['round', 'outputs', 'CPU-s (user + sys)', 'sim-s per CPU-s',
                           'wall s', '1-minute load before'], rows),
            'process': table(['outputs', 'sim-s per CPU-s: least', 'median', 'most'], summary)}


def acceptance(seeds, preset: str) -> dict:
    rows = []
    for name, (scenario, limits) in ACCEPTANCE.items():
        for seed in seeds:
            summary = summarise(simulate(scenario.with_changes(
                seed=seed, controller=PRESETS[preset])).metrics)
            figures = []
            for key, limit in limits.items():
                kind, metric = key.split()
                value = summary[kind][metric]
                met = value <= limit
                figures.append(f'{key} = {value:.4f} (<= {limit}: {"pass" if met else "FAIL"})')
                rows.append([name, seed, key, f'≤ {limit}', round(value, 4),
                             'yes' if met else 'no'])
            print(f'{name}, seed {seed}: ' + '; '.join(figures), flush=True)
    return {'preset': preset, 'acceptance': table(
        ['scenario', 'seed', 'figure', 'required', 'measured', 'met'], rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('what', choices=('speed', 'acceptance', 'process'))
    parser.add_argument('--periods', type=float, nargs='+', default=[0.01, 0.05])
    parser.add_argument('--engines', nargs='+', default=['vectorised', 'per-agent'])
    parser.add_argument('--agents', type=int, nargs='+', choices=[n for n, _ in SPEED_CASES],
                        default=[n for n, _ in SPEED_CASES], help='speed: the swarm sizes run')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--preset', choices=PRESETS, default='reference',
                        help='acceptance: controller gains (default reference)')
    parser.add_argument('--rounds', type=int, default=3,
                        help='process: runs with and without plots, alternately (default 3)')
    add_options(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f'--rounds must be >= 1, got {args.rounds}')
    load = begin(args)
    if args.what == 'speed':
        save(args, 'batch_sim_speed', speed(args.periods, args.engines, args.agents), load)
    elif args.what == 'process':
        save(args, 'batch_sim_process', process(args.rounds), load)
    else:
        save(args, 'batch_sim_acceptance', acceptance(args.seeds, args.preset), load)


if __name__ == '__main__':
    main()
