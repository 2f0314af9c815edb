"""
Time of one vectorised mobility step for N vehicles.

Prints figures and writes them to benchmarks/results/mobility_core.json (``--no-save``: print
only); asserts nothing.

    .venv/bin/python benchmarks/bench_mobility_core.py [--sizes 1 100 1000 10000]

Two configurations: the defaults (reference scenario: tau tracking, every extension off) and
every extension on (braking and jerk limits, 'velocity' heading with a yaw-acceleration limit).
"""
from __future__ import annotations

import argparse
import timeit

import numpy as np
from results import add_options, begin, save, table

from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

CONFIGS = {
    'defaults (reference)': VehicleParams(),
    'all extensions on': VehicleParams(max_dec_xy=6.0, max_dec_z=8.0, max_jerk_xy=20.0,
                                       max_jerk_z=30.0, heading_mode='velocity',
                                       max_yaw_acc=3.0),
}


def time_step(n: int, params: VehicleParams, repeats: int) -> float:
    """Best-of-``repeats`` time of one step in microseconds."""
    rng = np.random.default_rng(0)
    state = VehicleState.at_rest(rng.uniform(-100.0, 100.0, (n, 3)))
    v_des = rng.uniform(-12.0, 12.0, (n, 3))
    yaw_rate = rng.uniform(-1.0, 1.0, n)
    for _ in range(50):  # reach a moving state so every branch does real work
        state = step(state, v_des, params, yaw_rate)
    timer = timeit.Timer(lambda: step(state, v_des, params, yaw_rate))
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[1, 100, 1000, 10000])
    parser.add_argument('--repeats', type=int, default=5)
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    print(f'{"config":<22} {"N":>6} {"us/step":>10} {"ns/vehicle":>11}')
    rows = []
    for label, params in CONFIGS.items():
        row = [label]
        for n in args.sizes:
            micros = time_step(n, params, args.repeats)
            print(f'{label:<22} {n:>6} {micros:>10.1f} {1e3 * micros / n:>11.1f}', flush=True)
            row.append(round(micros, 1))
        rows.append(row)
    save(args, 'mobility_core', {'step': table(
        ['vehicle model'] + [f'N = {n} [µs]' for n in args.sizes], rows)}, load)


if __name__ == '__main__':
    main()
