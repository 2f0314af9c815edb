"""
Batch simulator speed and the reference acceptance figures.

    .venv/bin/python benchmarks/bench_batch_sim.py speed        # sim-s per CPU-s
    .venv/bin/python benchmarks/bench_batch_sim.py speed --agents 1000 10000 --periods 0.05
    .venv/bin/python benchmarks/bench_batch_sim.py acceptance   # N=10, 32 static, moving target
        (with the reference gains, for parity; --preset default for the package defaults)

Prints the figures and writes them to benchmarks/results/batch_sim_speed.json or
batch_sim_acceptance.json (``--no-save``: print only); nothing here asserts on timing.
"""
from __future__ import annotations

import argparse
import time

from results import add_options, begin, save, table

from soliton_encirclement_ros.analysis.report import summarise
from soliton_encirclement_ros.core.gains import PRESETS
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate

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
    parser.add_argument('what', choices=('speed', 'acceptance'))
    parser.add_argument('--periods', type=float, nargs='+', default=[0.01, 0.05])
    parser.add_argument('--engines', nargs='+', default=['vectorised', 'per-agent'])
    parser.add_argument('--agents', type=int, nargs='+', choices=[n for n, _ in SPEED_CASES],
                        default=[n for n, _ in SPEED_CASES], help='speed: the swarm sizes run')
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--preset', choices=PRESETS, default='reference',
                        help='acceptance: controller gains (default reference)')
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    if args.what == 'speed':
        save(args, 'batch_sim_speed', speed(args.periods, args.engines, args.agents), load)
    else:
        save(args, 'batch_sim_acceptance', acceptance(args.seeds, args.preset), load)


if __name__ == '__main__':
    main()
