"""
The controller engines side by side: CPU seconds per simulated second, N = 10 to 512.

    .venv/bin/python benchmarks/bench_engines.py                  # N = 10 ... 512, 20 s runs
    .venv/bin/python benchmarks/bench_engines.py --agents 10 64 --duration 60
    .venv/bin/python benchmarks/bench_engines.py --agents 32 100 --control-period 0.01

Each registered engine (``core.engines.ENGINES``) that is exact on the scenario runs
``batch_sim``'s loop on a static target (control period P = 0.05 s unless
``--control-period``, radius max(20 m, 0.7 N)); the
per-agent reference only up to N = 64 (it is Python per agent and per message). Prints CPU
seconds of this process (stable on a shared machine) per engine and the ratio to the
vectorised engine, and writes them to benchmarks/results/engines.json (``--no-save``: print
only); nothing here asserts.
"""
from __future__ import annotations

import argparse
import resource

from results import add_options, begin, save, table

from soliton_encirclement_ros.core.engines import ENGINES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate

PER_AGENT_MAX = 64


def cpu_seconds() -> float:
    """Return this process's user + system CPU time [s]."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument('--agents', type=int, nargs='+', default=[10, 32, 64, 128, 256, 512])
    parser.add_argument('--duration', type=float, default=20.0)
    parser.add_argument('--control-period', type=float, default=0.05,
                        help="the controllers' period [s] (swarm_sim's default: 0.01)")
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    rows = []
    print(f'{"N":>5} ' + ' '.join(f'{name:>12}' for name in ENGINES)
          + '   CPU-s per sim-s; batch / vectorised')
    for n in args.agents:
        scenario = Scenario(agents=n, duration=args.duration, radius=max(20.0, 0.7 * n),
                            control_period=args.control_period)
        cost = {}
        for name, spec in ENGINES.items():
            if not spec.exact(scenario) or (name == 'per-agent' and n > PER_AGENT_MAX):
                continue
            start = cpu_seconds()
            simulate(scenario, name)
            cost[name] = (cpu_seconds() - start) / args.duration
        cells = ' '.join(f'{cost[name]:12.4f}' if name in cost else f'{"-":>12}'
                         for name in ENGINES)
        ratio = cost['batch'] / cost['vectorised']
        print(f'{n:5d} {cells}   {ratio:.2f}', flush=True)
        rows.append([n] + [round(cost[name], 4) if name in cost else '-' for name in ENGINES])
    save(args, 'engines', {
        'duration': args.duration, 'control_period': args.control_period,
        'cost': table(['N'] + [f'{name} [CPU-s per sim-s]' for name in ENGINES], rows)}, load)


if __name__ == '__main__':
    main()
