"""
Separation over adversarial starts and faults: does d_safe keep every two agents apart.

    .venv/bin/python benchmarks/bench_separation.py --workers 2     # the full grid
    .venv/bin/python benchmarks/bench_separation.py --quick         # one seed, 30 s runs
    .venv/bin/python benchmarks/bench_separation.py --d-safe 0      # the same starts, no d_safe
    .venv/bin/python benchmarks/bench_separation.py --quick --gain k_tau=1  # other gains
    .venv/bin/python benchmarks/bench_separation.py --quick --control-period 0.01
    .venv/bin/python benchmarks/bench_separation.py --faults silent,clock --ns 24,32,48,64 \
        --placements coincident,cluster --workers 2                 # a subset of the grid

The grid, run through ``sweep_sim``'s engine (``batch_engine.simulate_runs``, runs of one shape
stepped together, every core): N = 3 to 64; starts random about the circle (the reference
placement), collinear with the target (PX4's SITL spawn line, 1 m apart), coincident, and
clustered within 1 m; static, moving (random, 5 m/s) and turning (a 30 m circle at 5 m/s)
targets; seeds 0..2; 60 s at P = 0.05 s (``--control-period``: another control period, named
in the results file: ``separation_control_period_0.01``). One axis of faults (``--faults``):

- ``none``: the announced failures only: failures 0, 4 or 20 per minute (8 s outages, each
  failed agent broadcasting its vehicle's presence); loss and delay 0, 0.1 (0.1 s) or 0.2
  (0.2 s);
- ``silent``: agent processes killed (N/8 of them, at least one): silent from then, their
  vehicles holding where they stop (``core.faults.SimulatedFaults``);
- ``hovering``: agents failed for good (N/8 of them, one to three): each broadcasts its
  vehicle's presence while it hovers where it stopped, on the ring's path;
- ``reset``, ``reset44``: one agent's estimator reset by 10 m or by 44.72 m (a ring of 4 at
  R = 20 m swallowed whole): its broadcast position jumps that far with that much uncertainty
  while its vehicle is held where it is;
- ``clock``: one companion's clock steps 2 s ahead: the others receive its states stamped
  beyond ``max_future_stamp``;
- ``edge``: a square safety area R + 10 m from the target's start, the agents starting on its
  edges and corners (on the stop line, ``margin`` inside, and on the boundary itself), the
  target at rest on a corner or moving along two edges through one.

The simulated faults (silent, hovering, reset, reset44, clock) strike at 10, 20 or 30 s
(seed 0, 1, 2): while a crowd still disperses, or once the ring has formed; they and ``edge``
run with failures 0 or 4 per minute and loss/delay 0 or 0.2/0.2 s. The d_safe flown is the
controller's default (``--d-safe``, at most half the ring's spacing: the radius keeps that above
``d_safe``). The radius is max(20 m, N d_safe / pi), so that the even ring's spacing is at
least twice ``d_safe``.

Per run it takes the closest approach of two agents, horizontally, at any time (``d_min``,
which a start may put below ``d_safe``), and after the two were once farther than ``d_safe``
apart (``after``). A close approach is ``after < 0.5 d_safe``; the goal is none. Every pair of
vehicles of which at least one agent works counts: a failed agent's vehicle brakes to a hover
and broadcasts its presence, a killed one's holds silent, so the working ones must keep clear
of both, and a failure and return is no new start. A pair of two vehicles neither of which
is flown by its agent (failed, killed, or held by its bridge after a reset) does not count
(neither has a controller that acts; where they drifted is a new start for the one that comes
back): ``batch_engine.SeparationTracker``. With a safety area, each run's
smallest clearance to it (negative: outside); the goal is none below -0.1 m.
Prints figures (CPU seconds, distributions, counts by axis and, over several seeds, by seed,
the worst runs) and writes them with
``benchmarks/results.py`` to ``benchmarks/results/separation.json`` (``--no-save``: not);
nothing here asserts.
"""
from __future__ import annotations

import argparse
import atexit
from concurrent.futures import as_completed, ProcessPoolExecutor
import itertools
import math
import os
from pathlib import Path
import shutil
import sys
import tempfile
import time

import numpy as np

from ros_support.number_text import fixed
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.sweep import chunks, Run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import (  # noqa: E402, I100 - beside this
    add_gain_option, add_options, begin, checked_gains, gains_suffix, LAW_CODE, save)

NS = (3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
PERIOD = 0.05  # s: the control period flown (--control-period)
PLACEMENTS = ('reference', 'collinear', 'coincident', 'cluster')
FAILURES = (0.0, 4.0, 20.0)
IMPAIRMENTS = ((0.0, 0.0), (0.1, 0.1), (0.2, 0.2))  # (loss, delay [s])
TARGETS = ('static', 'random', 'circle')  # circle: turning, 30 m at 5 m/s
CIRCLE_RADIUS = 30.0
# The fault axis: the announced failures only, then the simulated faults no agent announces
# (core.faults.SimulatedFaults), then the safety area's edges and corners.
FAULTS = ('none', 'silent', 'hovering', 'reset', 'reset44', 'clock', 'edge')
SIMULATED = {'silent': lambda n: {'silent_failures': max(1, n // 8)},
             'hovering': lambda n: {'failed_agents': min(3, max(1, n // 8))},
             'reset': lambda n: {'reset_jump': 10.0},
             'reset44': lambda n: {'reset_jump': 44.72},
             'clock': lambda n: {'clock_step': 2.0}}
FAULT_FAILURES = (0.0, 4.0)   # the failures and links the simulated faults and edges run with
FAULT_LINKS = (0, 2)          # indices into IMPAIRMENTS
EDGE_TARGETS = ('corner', 'edge')  # at rest on a corner, or along two edges through one
EDGE_ROOM = 10.0              # m: the area's half-side is R + this
OUTSIDE = -0.1                # m: a run whose clearance to its area fell below this is out


def radius_for(n: int, d_safe: float) -> float:
    """Return the benchmark's radius for N agents: the even spacing at least twice d_safe."""
    return max(20.0, n * max(d_safe, 2.0) / math.pi)


def edge_starts(n: int, half: float, margin: float, folder: Path) -> str:
    """
    Write N starts on the edges and corners of a square area, and return the file.

    The stop line (``margin`` inside) and the boundary take turns: its corners first, then
    points evenly along its perimeter.
    """
    path = folder / f'edge_starts_{n}.yaml'
    if path.exists():
        return str(path)
    points = []
    for k in range(n):
        side = half - (margin if k % 2 == 0 else 0.0)
        if k < 8:  # the corners of the stop line, then of the boundary
            corner = (k // 2) % 4
            points.append([side * (1 if corner in (0, 3) else -1),
                           side * (1 if corner in (0, 1) else -1)])
            continue
        along = (k - 8 + 0.5) / max(n - 8, 1) * 8.0 * side  # the perimeter, from (side, -side)
        edge, offset = divmod(along, 2.0 * side)
        x, y = [(side, -side + offset), (side - offset, side), (-side, side - offset),
                (-side + offset, -side)][int(edge) % 4]
        points.append([x, y])
    path.write_text('[' + ', '.join(f'[{x:.6f}, {y:.6f}]' for x, y in points) + ']\n')
    return str(path)


def grid(d_safe: float, seeds, duration: float, ns=NS, placements=PLACEMENTS,
         failures_axis=FAILURES, impairments=IMPAIRMENTS, targets=TARGETS, faults=FAULTS,
         folder: Path | None = None, gains: dict | None = None,
         control_period: float = PERIOD) -> list[Run]:
    """
    Every run of the benchmark (or of the subset of the axes given), as sweep runs.

    ``gains``: controller gains over the defaults (``--gain``), in every run, flown every
    ``control_period`` seconds.
    """
    runs = []

    def add(point, seeds, **fields):
        for seed in seeds:
            extra = dict(fields)
            if point['fault'] in SIMULATED:
                extra['fault_time'] = 10.0 + 10.0 * (seed % 3)
            scenario = Scenario(agents=point['agents'], seed=seed, duration=duration,
                                control_period=control_period,
                                failures_per_min=point['failures_per_min'],
                                failure_off_time=8.0, loss=point['loss'], delay=point['delay'],
                                controller={**(gains or {}), 'd_safe': d_safe}, **extra)
            runs.append(Run(point, seed, scenario))

    for fault in faults:
        if fault == 'none':
            axes = itertools.product(ns, placements, failures_axis, impairments, targets)
        elif fault in SIMULATED:
            axes = itertools.product(
                ns, placements, [f for f in failures_axis if f in FAULT_FAILURES],
                [impairments[k] for k in range(len(impairments))
                 if impairments[k] in [IMPAIRMENTS[i] for i in FAULT_LINKS]], targets)
        else:
            axes = []
        for n, placement, failures, (loss, delay), target in axes:
            point = {'fault': fault, 'agents': n, 'placement': placement,
                     'failures_per_min': failures, 'loss': loss, 'delay': delay,
                     'target_motion': target}
            add(point, seeds, radius=radius_for(n, d_safe), placement=placement,
                target_motion=target, target_speed=5.0,
                target_boundary=CIRCLE_RADIUS if target == 'circle' else 20.0,
                **SIMULATED.get(fault, lambda n: {})(n))
        if fault != 'edge':
            continue
        folder.mkdir(parents=True, exist_ok=True)
        for n, failures, (loss, delay), target in itertools.product(
                ns, [f for f in failures_axis if f in FAULT_FAILURES],
                [link for link in impairments if link in [IMPAIRMENTS[i] for i in FAULT_LINKS]],
                EDGE_TARGETS):
            radius = radius_for(n, d_safe)
            half = radius + EDGE_ROOM
            area = {'polygon': [[half, half], [-half, half], [-half, -half], [half, -half]],
                    'margin': 1.0}
            motion = ({'target_motion': 'waypoints', 'waypoints': ((half, half, 0.0),),
                       'target_speed': 5.0} if target == 'corner' else
                      {'target_motion': 'waypoints', 'target_speed': 5.0,
                       'waypoints': ((-half, -half, 0.0), (half, -half, 0.0),
                                     (half, half, 0.0))})
            point = {'fault': 'edge', 'agents': n, 'placement': 'edges and corners',
                     'failures_per_min': failures, 'loss': loss, 'delay': delay,
                     'target_motion': target}
            add(point, seeds, radius=radius, placement='file',
                placement_file=edge_starts(n, half, 1.0, folder), safety_area=area, **motion)
    return runs


def run_chunk(scenarios: list[Scenario], apart: float) -> tuple[list, list, list, list, float]:
    """(after, overall, final E_gap, area margin) of each run of a chunk, and its CPU seconds."""
    cpu = time.process_time()
    result = simulate_runs(scenarios, apart=apart)
    sep = result.separation
    e_gap = [float(m[-1, 5]) for m in result.metrics]
    margin = [float(m) for m in result.area_margin]
    return (sep.after.tolist(), sep.overall.tolist(), e_gap, margin,
            time.process_time() - cpu)


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


def figures(after: np.ndarray, overall: np.ndarray, margin: np.ndarray) -> dict:
    """Return the summary figures of some runs (distances over d_safe, margins in m)."""
    finite = after[np.isfinite(after)]
    out = {'runs': int(after.size), 'close_approaches': int((after < 0.5).sum()),
           'min_after': float(finite.min()) if finite.size else None,
           'p1_after': float(np.percentile(finite, 1)) if finite.size else None,
           'median_after': float(np.median(finite)) if finite.size else None,
           'min_d_min': float(overall[np.isfinite(overall)].min())
           if np.isfinite(overall).any() else None}
    measured = margin[np.isfinite(margin)]
    if measured.size:
        out['min_area_margin'] = float(measured.min())
        out['outside'] = int((measured < OUTSIDE).sum())
    return out


def number(value, digits=3) -> str:
    """Format a figure for the tables (None: n/a)."""
    return 'n/a' if value is None else fixed(value, digits)


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
    parser.add_argument('--faults', help=f'only these fault kinds ({",".join(FAULTS)})')
    parser.add_argument('--seeds', help='seeds, comma-separated (default 0,1,2; --quick 0)')
    parser.add_argument('--worst', type=int, default=12, help='how many worst runs to print')
    parser.add_argument('--control-period', type=float, default=PERIOD,
                        help=f'the control period flown [s] (default {PERIOD:g})')
    add_gain_option(parser)
    add_options(parser)
    parser.add_argument('--name', default='separation',
                        help='the results file: benchmarks/results/NAME.json (e.g. '
                        'separation_faults for a run of the fault axis alone; with --gain, '
                        'the changes are added to it: separation_k_tau_1)')
    args = parser.parse_args()
    gains = checked_gains(parser, args, others={'d_safe': args.d_safe},
                          refused={'d_safe': 'this benchmark takes it as --d-safe'})
    try:  # checked as every run's scenario checks it, before anything runs
        Scenario(control_period=args.control_period)
    except ValueError as error:
        parser.error(f'--control-period: {error}')
    saved_as = args.name + gains_suffix(gains)  # the results file
    if args.control_period != PERIOD:
        saved_as += gains_suffix({'control_period': args.control_period})
    load_before = begin(args)
    seeds = (0,) if args.quick else (0, 1, 2)
    if args.seeds:
        seeds = tuple(int(s) for s in args.seeds.split(','))
    links = subset(args.links, tuple(range(len(IMPAIRMENTS))), 'links', int)
    folder = Path(tempfile.mkdtemp(prefix='bench_separation_'))
    atexit.register(shutil.rmtree, folder, True)  # the runs' start files, gone with the run
    runs = grid(args.d_safe, seeds, 30.0 if args.quick else 60.0,
                ns=subset(args.ns, NS, 'ns', int),
                placements=subset(args.placements, PLACEMENTS, 'placements', str.strip),
                failures_axis=subset(args.failures, FAILURES, 'failures', float),
                impairments=tuple(IMPAIRMENTS[i] for i in links),
                targets=subset(args.targets, TARGETS, 'targets', str.strip),
                faults=subset(args.faults, FAULTS, 'faults', str.strip), folder=folder,
                gains=gains, control_period=args.control_period)
    apart = args.d_safe or 2.0  # without d_safe, measure against the default's 2 m
    work = chunks(runs, args.workers)
    print(f'{len(runs)} runs in {len(work)} chunks on {args.workers} worker(s), '
          f'd_safe = {args.d_safe:g} m, P = {args.control_period:g} s'
          + (f', gains {gains}' if gains else ''), flush=True)
    rows = []
    cpu = 0.0
    wall = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {pool.submit(run_chunk, [r.scenario for r in chunk], apart): chunk
                   for chunk in work}
        for done, future in enumerate(as_completed(futures), 1):
            chunk = futures[future]
            after, overall, e_gap, margin, chunk_cpu = future.result()
            cpu += chunk_cpu
            rows += list(zip(chunk, after, overall, e_gap, margin))
            run, closest = min(rows, key=lambda row: row[1])[:2]
            print(f'  {done}/{len(work)} chunks, {len(rows)} runs, closest after once apart '
                  f'{closest / apart:.3f} d_safe ({run.point}, seed {run.seed})', flush=True)
            for run, found, *_ in rows[-len(chunk):]:
                if found / apart < 0.5:
                    print(f'  close approach: {found / apart:.3f} d_safe, {run.point}, seed '
                          f'{run.seed}', flush=True)
    order = {id(run): k for k, run in enumerate(runs)}
    rows.sort(key=lambda row: order[id(row[0])])  # the grid's order, whatever finished first
    wall = time.perf_counter() - wall
    after = np.array([a for _, a, _, _, _ in rows]) / apart
    overall = np.array([o for _, _, o, _, _ in rows]) / apart
    e_gap = np.array([g for _, _, _, g, _ in rows])
    margin = np.array([m for *_, m in rows])
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
    measured = np.isfinite(margin)
    if measured.any():
        print(f'runs with a safety area: {int(measured.sum())}; smallest clearance to it '
              f'{margin[measured].min():.3f} m; runs outside by more than {-OUTSIDE:g} m: '
              f'{int((margin[measured] < OUTSIDE).sum())}')
    print(f'runs that end with E_gap < 0.05: {int((e_gap < 0.05).sum())} of {len(rows)} '
          '(failures and loss keep some rings moving at the end)')
    tables = {}
    keys = [('fault', 'faults'), ('placement', 'start'),
            ('failures_per_min', 'failures per minute'), ('target_motion', 'target'),
            ('agents', 'N')]
    if len(seeds) > 1:  # each seed's grid: how far its closest run is from the others'
        keys.append(('seed', 'seed'))
    for key, title in keys:
        print(f'\n| {title} | runs | min after / d_safe | close approaches | final E_gap < 0.05 '
              '| smallest area clearance [m] |')
        print('|---|---|---|---|---|---|')
        tables[key] = {}
        of = [run.seed if key == 'seed' else run.point[key] for run, *_ in rows]
        for value in dict.fromkeys(of):
            mask = np.array([v == value for v in of])
            found = figures(after[mask], overall[mask], margin[mask])
            tables[key][str(value)] = found
            print(f'| {value} | {mask.sum()} | {number(found["min_after"])} | '
                  f'{found["close_approaches"]} | {int((e_gap[mask] < 0.05).sum())} | '
                  f'{number(found.get("min_area_margin"))} |')
    print('\nworst runs (after / d_safe; rerun one with --seeds and the filters above):')
    worst = []
    for k in np.argsort(after)[:args.worst]:
        run = rows[k][0]
        worst.append({'after': float(after[k]), 'd_min': float(overall[k]), 'seed': run.seed,
                      'point': run.point})
        print(f'  {after[k]:.3f}  d_min {overall[k]:.3f}  seed {run.seed}  {run.point}')
    if args.no_save:
        return
    titles = dict(keys)
    columns = ['runs', 'closest after once apart / d_safe', 'close approaches (< 0.5 d_safe)',
               'smallest clearance to the area [m]', 'outside by more than 0.1 m']
    table_of = {f'by_{key}': {'columns': [titles[key]] + columns, 'rows': [
        [value, found['runs'], number(found['min_after']), found['close_approaches'],
         number(found.get('min_area_margin'), 2), found.get('outside', 'n/a')]
        for value, found in values.items()]} for key, values in tables.items()}
    everything = figures(after, overall, margin)
    table_of['overall'] = {'columns': columns, 'rows': [[
        everything['runs'], number(everything['min_after']), everything['close_approaches'],
        number(everything.get('min_area_margin'), 2), everything.get('outside', 'n/a')]]}
    save(args, saved_as, {
        **table_of, **({'gains': gains} if gains else {}),
        'd_safe': args.d_safe, 'control_period': args.control_period, 'seeds': list(seeds),
        'duration': 30.0 if args.quick else 60.0,
        'workers': args.workers, 'cpu_s': round(cpu, 1), 'wall_s': round(wall, 1),
        'close_approach': '< 0.5 d_safe after the two were once farther than d_safe apart',
        'outside': f'a clearance to the safety area below {OUTSIDE:g} m',
        'all': figures(after, overall, margin),
        'final_e_gap_below_0.05': int((e_gap < 0.05).sum()),
        'by': tables, 'worst': worst}, load_before, code=LAW_CODE)


if __name__ == '__main__':
    main()
