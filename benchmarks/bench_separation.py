"""
Separation over adversarial starts: does d_safe keep every two agents apart.

    .venv/bin/python benchmarks/bench_separation.py              # the full grid (3,240 runs)
    .venv/bin/python benchmarks/bench_separation.py --quick      # one seed, 30 s runs
    .venv/bin/python benchmarks/bench_separation.py --d-safe 0   # the same starts, no d_safe
    .venv/bin/python benchmarks/bench_separation.py --failures 0 --ns 24,32,48,64 \
        --placements coincident,cluster,collinear --workers 2    # a subset of the grid

The grid, run through ``sweep_sim``'s engine (``batch_engine.simulate_runs``, runs of one shape
stepped together, every core): N = 3 to 64; starts random about the circle (the reference
placement), collinear with the target (PX4's SITL spawn line, 1 m apart), coincident, and
clustered within 1 m; failures 0, 4 or 20 per minute (8 s outages: at 20, agents fail while
the swarm still disperses); loss and delay 0, 0.1 (0.1 s) or 0.2 (0.2 s); static, moving
(random, 5 m/s) and turning (a 30 m circle at 5 m/s) targets; seeds 0..2; 60 s at P = 0.05 s.
The d_safe flown is the controller's default (``--d-safe``, at most half the ring's spacing:
the radius keeps that above ``d_safe``).
The radius is max(20 m, N d_safe / pi), so that the even ring's spacing is at least twice
``d_safe``.

Per run it takes the closest approach of two live agents, horizontally, at any time
(``d_min``, which a start may put below ``d_safe``), and after the two were once farther than
``d_safe`` apart (``after``). A close approach is ``after < 0.5 d_safe``; the goal is none.
Every pair of vehicles of which at least one agent works counts: a failed agent's vehicle
brakes to a hover and broadcasts its presence, so the working ones must keep clear of it, and
its failure and return is no new start. A pair of two failed agents' vehicles does not count
(neither has a controller; where they drifted is a new start for the one that comes back):
``batch_engine.SeparationTracker``.
Prints figures only (CPU seconds, distributions, counts, the worst runs); nothing here asserts.
"""
from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import itertools
import math
import os
import time

import numpy as np

from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.sweep import chunks, Run

NS = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
PLACEMENTS = ('reference', 'collinear', 'coincident', 'cluster')
FAILURES = (0.0, 4.0, 20.0)
IMPAIRMENTS = ((0.0, 0.0), (0.1, 0.1), (0.2, 0.2))  # (loss, delay [s])
TARGETS = ('static', 'random', 'circle')  # circle: turning, 30 m at 5 m/s
CIRCLE_RADIUS = 30.0


def grid(d_safe: float, seeds, duration: float, ns=NS, placements=PLACEMENTS,
         failures_axis=FAILURES, impairments=IMPAIRMENTS, targets=TARGETS) -> list[Run]:
    """Every run of the benchmark (or of the subset of the axes given), as sweep runs."""
    runs = []
    for n, placement, failures, (loss, delay), target in itertools.product(
            ns, placements, failures_axis, impairments, targets):
        point = {'agents': n, 'placement': placement, 'failures_per_min': failures,
                 'loss': loss, 'delay': delay, 'target_motion': target}
        for seed in seeds:
            scenario = Scenario(
                agents=n, radius=max(20.0, n * max(d_safe, 2.0) / math.pi), seed=seed,
                duration=duration, control_period=0.05, placement=placement,
                failures_per_min=failures, failure_off_time=8.0, loss=loss, delay=delay,
                target_motion=target, target_speed=5.0,
                target_boundary=CIRCLE_RADIUS if target == 'circle' else 20.0,
                controller={'d_safe': d_safe})
            runs.append(Run(point, seed, scenario))
    return runs


def run_chunk(scenarios: list[Scenario], apart: float) -> tuple[list, list, list, float]:
    """(after, overall, final E_gap) of each run of one chunk, and the chunk's CPU seconds."""
    cpu = time.process_time()
    result = simulate_runs(scenarios, apart=apart)
    sep = result.separation
    e_gap = [float(m[-1, 5]) for m in result.metrics]
    return sep.after.tolist(), sep.overall.tolist(), e_gap, time.process_time() - cpu


def subset(text: str, axis: tuple, name: str, parse) -> tuple:
    """Return the values of ``axis`` named in the comma-separated ``text`` (None: all)."""
    if text is None:
        return axis
    values = tuple(parse(v) for v in text.split(',') if v.strip())
    unknown = [v for v in values if v not in axis]
    if unknown or not values:
        raise SystemExit(f'--{name} {text}: each value must be one of '
                         f'{",".join(str(v) for v in axis)}')
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='one seed, 30 s runs')
    parser.add_argument('--d-safe', type=float, default=2.0, help='safety distance [m]')
    parser.add_argument('--workers', type=int, default=os.cpu_count() or 1)
    parser.add_argument('--ns', help='only these N, comma-separated (e.g. 24,32,48,64)')
    parser.add_argument('--placements', help='only these starts, comma-separated '
                        f'({",".join(PLACEMENTS)})')
    parser.add_argument('--failures', help='only these failures per minute, comma-separated '
                        f'({",".join(f"{f:g}" for f in FAILURES)})')
    parser.add_argument('--links', help='only these loss/delay pairs, comma-separated indices '
                        'into ' + ', '.join(f'{i}: {loss:g}/{delay:g} s'
                                            for i, (loss, delay) in enumerate(IMPAIRMENTS)))
    parser.add_argument('--targets', help=f'only these targets ({",".join(TARGETS)})')
    parser.add_argument('--seeds', help='seeds, comma-separated (default 0,1,2; --quick 0)')
    parser.add_argument('--worst', type=int, default=12, help='how many worst runs to print')
    args = parser.parse_args()
    seeds = (0,) if args.quick else (0, 1, 2)
    if args.seeds:
        seeds = tuple(int(s) for s in args.seeds.split(','))
    links = subset(args.links, tuple(range(len(IMPAIRMENTS))), 'links', int)
    runs = grid(args.d_safe, seeds, 30.0 if args.quick else 60.0,
                ns=subset(args.ns, NS, 'ns', int),
                placements=subset(args.placements, PLACEMENTS, 'placements', str.strip),
                failures_axis=subset(args.failures, FAILURES, 'failures', float),
                impairments=tuple(IMPAIRMENTS[i] for i in links),
                targets=subset(args.targets, TARGETS, 'targets', str.strip))
    apart = args.d_safe or 2.0  # without d_safe, measure against the default's 2 m
    work = chunks(runs, args.workers)
    print(f'{len(runs)} runs in {len(work)} chunks on {args.workers} worker(s), '
          f'd_safe = {args.d_safe:g} m')
    rows = []
    cpu = 0.0
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run_chunk, [r.scenario for r in chunk], apart): chunk
                   for chunk in work}
        for future, chunk in futures.items():
            after, overall, e_gap, chunk_cpu = future.result()
            cpu += chunk_cpu
            rows += [(run, a, o, g) for run, a, o, g in zip(chunk, after, overall, e_gap)]
    wall = time.perf_counter() - wall
    after = np.array([a for _, a, _, _ in rows]) / apart
    overall = np.array([o for _, _, o, _ in rows]) / apart
    e_gap = np.array([g for _, _, _, g in rows])
    close = after < 0.5
    print(f'CPU {cpu:.0f} s in the workers, wall {wall:.0f} s')
    print('\n| d / d_safe over runs | min | 1st percentile | median |')
    print('|---|---|---|---|')
    for name, values in (('closest approach at any time (d_min)', overall),
                         ('closest approach after once apart', after)):
        finite = values[np.isfinite(values)]
        print(f'| {name} | {finite.min():.3f} | {np.percentile(finite, 1):.3f} | '
              f'{np.median(finite):.3f} |')
    print(f'\nruns with two agents closer than 0.5 d_safe after they were once farther than '
          f'd_safe apart: {int(close.sum())} of {len(rows)}')
    print(f'runs that end with E_gap < 0.05: {int((e_gap < 0.05).sum())} of {len(rows)} '
          '(failures and loss keep some rings moving at the end)')
    for key, title in (('placement', 'start'), ('failures_per_min', 'failures per minute'),
                       ('target_motion', 'target')):
        print(f'\n| {title} | runs | min after / d_safe | close approaches | final E_gap < 0.05 |')
        print('|---|---|---|---|---|')
        for value in dict.fromkeys(run.point[key] for run, *_ in rows):
            mask = np.array([run.point[key] == value for run, *_ in rows])
            print(f'| {value} | {mask.sum()} | {after[mask].min():.3f} | '
                  f'{int(close[mask].sum())} | {int((e_gap[mask] < 0.05).sum())} |')
    print('\n| N | runs | min after / d_safe | close approaches, by loss/delay ' +
          ' / '.join(f'{loss:g}/{delay:g} s' for loss, delay in IMPAIRMENTS) + ' |')
    print('|---|---|---|---|')
    for n in dict.fromkeys(run.point['agents'] for run, *_ in rows):
        mask = np.array([run.point['agents'] == n for run, *_ in rows])
        by_link = [int(close[mask & np.array([(run.point['loss'], run.point['delay']) == link
                                              for run, *_ in rows])].sum())
                   for link in IMPAIRMENTS]
        print(f'| {n} | {mask.sum()} | {after[mask].min():.3f} | '
              + ' / '.join(map(str, by_link)) + ' |')
    print('\nworst runs (after / d_safe; rerun one with --seeds and the filters above):')
    for k in np.argsort(after)[:args.worst]:
        run = rows[k][0]
        print(f'  {after[k]:.3f}  d_min {overall[k]:.3f}  seed {run.seed}  {run.point}')


if __name__ == '__main__':
    main()
