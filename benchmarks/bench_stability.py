"""
Ring stability and settling: the linear analysis and the simulated acceptance figures.

    .venv/bin/python benchmarks/bench_stability.py growth [--plot docs/images/ring_stability.png]
        largest growth rate of the linearised ring for N = 3..128, defaults vs reference gains
        (P = 0.01 and 0.05 s, vehicle tau 1.0 s and 1.5 s), and the plot
    .venv/bin/python benchmarks/bench_stability.py settle [--preset reference] [--agents ...]
        "E_gap < 0.05 for good" per N and seed (batch_sim, static target, 120 s, P = 0.05 s)
    .venv/bin/python benchmarks/bench_stability.py n10 [--preset reference]
        the same for N = 10 at P = 0.01 s, seeds 0-4, and the median
    .venv/bin/python benchmarks/bench_stability.py median --agents 10 32 100 [--engine ...]
        the same for each N at P = 0.01 s, seeds 0-4 (--seeds), and the median
    .venv/bin/python benchmarks/bench_stability.py distribution [--agents 8 10 32 64 100]
        "E_gap < 0.05 for good" from random starts over 20 seeds per N (--seeds; batch engine,
        static target, P = 0.01 s, 30 s runs: "never" = not within them): every seed's time,
        the median and the latest; with --agents, saved as stability_distribution_n<N>_...;
        the defaults fly the even-ring term (k_e_ring 0.4)
    .venv/bin/python benchmarks/bench_stability.py moving [--preset reference]
        moving target 5 m/s, failures 1/min (8 s), N = 10, 300 s: means over t >= 60 s, the
        share of time with an agent failed and E_gap then and otherwise, E_gap of the same
        run with no failure, how near working agents fly to failed agents' hovering vehicles,
        and how much of the vehicles' acceleration limit the working agents use (mean |a|,
        share of the time at 90 % of max_acc_xy or more)
    .venv/bin/python benchmarks/bench_stability.py ideal [--seeds 0 1 2 3 4]
        the moving target with failures (as moving, seed by seed) flown again by an idealised,
        centralised re-spacer through the same vehicle model: every working agent tracks a slot
        of an even ring, the slots re-dealt at each loss and return, the target's acceleration
        known; its mean E_gap and E_r over t >= 60 s next to the law's (a yardstick, not a
        bound)
    .venv/bin/python benchmarks/bench_stability.py ideal --re-spacer-radial law
        the same re-spacer with the law's radial term in place of its own: the radial part of
        each command is the law's (k_r, k_dr, target_lead on the target's acceleration as the
        law estimates it), the slots still tracked along the ring; written to
        stability_ideal_re_spacer_radial_law.json
    .venv/bin/python benchmarks/bench_stability.py turning [--engine vectorised per-agent batch]
        a target turning steadily (circle of 30 m at 3 and 5 m/s, 60 m at 5 m/s), N = 10,
        120 s, P = 0.01 s: mean E_r and E_gap over t >= 60 s, per engine and seed
    .venv/bin/python benchmarks/bench_stability.py distribution --k-e-ring 0
        the same without the even-ring term (saved as ..._k_e_ring_0)
    .venv/bin/python benchmarks/bench_stability.py settle|distribution|moving|hover --ring-ramp 0
        the same with the even-ring term whole at once, from the start and after each loss or
        return (saved as ..._ring_ramp_0)
    .venv/bin/python benchmarks/bench_stability.py distribution-plot \
        --plot docs/images/ring_settle.png
        the plot of both, from their results files (runs nothing)
    .venv/bin/python benchmarks/bench_stability.py settle|n10|median|moving|turning --d-safe 0
        the same with another safety distance (the default is on: 2 m, at most half the
        ring's spacing; --preset reference has none)
    .venv/bin/python benchmarks/bench_stability.py hover [--targets static random circle]
        the hovering-obstacle family: N = 10, P = 0.01 s, 120 s, seeds 0-2; 1, 2 or 3 agents
        fail for good at 20 s (each broadcasts its presence, its vehicle hovering where it
        stops, on the ring's path: failed_agents) while the target is static, moving
        (random, 5 m/s) or circling (30 m at 5 m/s): per scenario and seed the settle time,
        and once the survivors' ring has formed (the first E_gap < 0.05 after the failure)
        the mean E_gap and the share of time above 0.05; the closest approach of two vehicles
        (one at least flown) once apart (d_safe; batch engine, a scenario's seeds stepped
        together); with --obstacle-clearance or --k-gap-steer, the ring's bulge round them
        or the ring turned to meet them with gaps; with --max-acc-xy, vehicles of another
        acceleration limit (saved as ..._max_acc_xy_<v>)
    .venv/bin/python benchmarks/bench_stability.py moving|hover|growth|... --gain k_tau=1.0 \
        --gain k_omega_own=0.8
        the same with any controller gains changed (repeatable; each name and value checked as
        the controller checks them; saved as ..._k_tau_1_k_omega_own_0.8); growth analyses the
        changed gains at each of its control periods (those of --preset; the other preset's
        row keeps its own)
    .venv/bin/python benchmarks/bench_stability.py crossings
        closest approach in the crossing scenarios of test_separation_acceptance.py, with and
        without d_safe

Prints the figures and writes them to benchmarks/results/stability_<what>.json (with
``_reference``, ``_d_safe_<m>``, ``_target_lead_<s>``, ``_k_e_ring_<v>``, ``_ring_ramp_<s>``,
``_obstacle_clearance_<m>`` or ``_k_gap_steer_<v>`` when asked for those; ``--no-save``: print
only); nothing here asserts.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time

import numpy as np
from results import (add_gain_option, add_options, begin, checked_gains, gains_suffix,
                     LAW_CODE, RESULTS_DIR, save, table)

from soliton_encirclement_ros.analysis.report import summarise
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.gains import ControllerParams, PRESETS
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.stability import growth_curve, ring_growth_rate
from soliton_encirclement_ros.sim.batch_sim import simulate

NS = np.arange(3, 129)
TABLE_NS = (3, 5, 8, 10, 16, 20, 32, 48, 64, 100, 128)
SETTLE_NS = (3, 5, 8, 10, 16, 32, 64, 100)
DISTRIBUTION_NS = (8, 10, 32, 64, 100)
DISTRIBUTION_SEEDS = tuple(range(20))
DISTRIBUTION_DURATION = 30.0  # s: the targets are 12 s (N = 32) and 20 s (N = 100)
CONFIGS = ((0.01, 1.0), (0.05, 1.0), (0.05, 1.5))  # (control period, vehicle tau_xy)
TURNS = ((30.0, 3.0), (30.0, 5.0), (60.0, 5.0))  # (circle radius [m], target speed [m/s])
HOVER_TARGETS = ('static', 'random', 'circle')  # circle: 30 m at 5 m/s
HOVER_FAILED = (1, 2, 3)
HOVER = Scenario(agents=10, duration=120.0, control_period=0.01, target_speed=5.0,
                 target_period=1.0, fault_time=20.0)
MOVING = Scenario(agents=10, duration=300.0, control_period=0.01, target_motion='random',
                  target_speed=5.0, target_period=1.0, target_boundary=20.0,
                  failures_per_min=1.0, failure_off_time=8.0)


def growth(plot: str | None, changed: str = 'default') -> dict:
    """Return both presets' growth curves; the options' gains (OVERRIDES) change ``changed``'s."""
    def params(preset: str, period: float) -> ControllerParams:
        return ControllerParams.preset(preset, **{**(OVERRIDES if preset == changed else {}),
                                                  'control_period': period})

    # a preset whose gains the options changed is named so in the table
    label = {p: p + (' with the gains changed' if p == changed and OVERRIDES else '')
             for p in ('default', 'reference')}
    curves = {}
    for preset in ('default', 'reference'):
        for period, tau in CONFIGS:
            curves[preset, period, tau] = growth_curve(NS, params(preset, period), tau)
    print('Largest growth rate [1/s] of the linearised ring (< 0: every mode decays); '
          'mode k and frequency [rad/s] at P = 0.01 s, tau 1 s')
    print('| N | ' + ' | '.join(f'{label[p]} P={pe:g} tau={t:g}' for p, pe, t in curves)
          + ' | default k, f | reference k, f |')
    print('|---' * (len(curves) + 3) + '|')
    rows = []
    for n in TABLE_NS:
        worst = [ring_growth_rate(n, params(p, 0.01)) for p in ('default', 'reference')]
        print(f'| {n} | ' + ' | '.join(f'{c[n - 3]:+.3f}' for c in curves.values()) + ' | '
              + ' | '.join(f'{w.mode}, {w.frequency:.2f}' for w in worst) + ' |')
        rows.append([n, *(f'{c[n - 3]:+.3f}' for c in curves.values()),
                     *(f'{w.mode}, {w.frequency:.2f}' for w in worst)])
    results = {'growth': table(
        ['N', *(f'{label[p]}, P = {pe:g} s, tau {t:g} s' for p, pe, t in curves),
         f'{label["default"]}: mode k, f [rad/s]', f'{label["reference"]}: mode k, f [rad/s]'],
        rows)}
    for key, curve in curves.items():
        unstable = NS[curve >= 0.0]
        print(f'{key}: max {curve.max():+.4f}/s; unstable from N = '
              f'{unstable.min() if unstable.size else "-"}')
    if plot:
        from matplotlib.figure import Figure
        fig = Figure(figsize=(7, 4), dpi=100)
        ax = fig.add_subplot()
        styles = {'default': '-', 'reference': '--'}
        colours = {c: f'C{i}' for i, c in enumerate(CONFIGS)}
        for (preset, period, tau), curve in curves.items():
            ax.plot(NS, curve, styles[preset], color=colours[period, tau],
                    label=f'{label[preset]}, P={period:g} s, tau={tau:g} s')
        ax.axhline(0.0, color='k', lw=0.8)
        ax.set_xscale('log')
        ax.set_xticks(TABLE_NS, [str(n) for n in TABLE_NS])
        ax.set_xlabel('agents N')
        ax.set_ylabel('largest growth rate [1/s]')
        ax.set_ylim(-0.45, 0.8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize='small')
        ax.set_title('Linearised evenly spaced ring (> 0: the ring never settles)')
        fig.tight_layout()
        fig.savefig(plot)
        print(f'plot: {plot}')
    return results


OVERRIDES = {}  # --d-safe, --target-lead, --k-e-ring, --ring-ramp, ...: over the preset's
VEHICLE = {}  # --max-acc-xy (moving, hover): over the vehicle model's defaults


def gains(preset: str) -> dict:
    """Return the controller overrides of a run: the preset's gains and the options'."""
    return {**PRESETS[preset], **OVERRIDES}


def _settle(scenario: Scenario) -> tuple[float | None, dict]:
    summary = summarise(simulate(scenario).metrics)
    return summary['settle_time']['E_gap'], summary


def settle(preset: str, agents, seeds, period: float) -> dict:
    print(f'preset {preset}, P = {period:g} s, 120 s: "E_gap < 0.05 for good" [s] '
          '(never = not settled), closest approach d_min [m]')
    print('| N | ' + ' | '.join(f'seed {s}' for s in seeds) + ' | max | min d_min |')
    print('|---' * (len(seeds) + 3) + '|')
    rows = []
    for n in agents:
        times, closest = [], []
        for seed in seeds:
            t, summary = _settle(Scenario(agents=n, seed=seed, control_period=period,
                                          controller=gains(preset)))
            times.append(t)
            closest.append(summary['closest']['d_min'])
        worst = 'never' if None in times else f'{max(times):.2f}'
        cells = ['never' if t is None else f'{t:.2f}' for t in times]
        print(f'| {n} | ' + ' | '.join(cells) + f' | {worst} | {min(closest):.2f} |',
              flush=True)
        rows.append([n, *cells, worst, round(min(closest), 2)])
    return {'period': period, 'settle': table(
        ['N', *(f'seed {s} [s]' for s in seeds), 'latest [s]', 'closest approach [m]'], rows)}


def n10(preset: str) -> dict:
    times = []
    for seed in range(5):
        t, _ = _settle(Scenario(agents=10, seed=seed, control_period=0.01,
                                controller=gains(preset)))
        times.append(float('inf') if t is None else t)
        print(f'N = 10, P = 0.01 s, preset {preset}, seed {seed}: E_gap < 0.05 from {t} s',
              flush=True)
    print(f'median over seeds 0-4: {statistics.median(times):.2f} s')
    return {'n10': table(['seed 0', 'seed 1', 'seed 2', 'seed 3', 'seed 4', 'median'],
                         [[*(f'{t:.2f} s' for t in times),
                           f'{statistics.median(times):.2f} s']])}


def median(preset: str, agents, seeds, engine: str) -> dict:
    rows = []
    for n in agents:
        times = []
        for seed in seeds:
            start = time.process_time()
            summary = summarise(simulate(Scenario(agents=n, seed=seed, control_period=0.01,
                                                  controller=gains(preset)), engine).metrics)
            t = summary['settle_time']['E_gap']
            times.append(math.inf if t is None else t)
            print(f'N = {n}, P = 0.01 s, preset {preset}, {engine}, seed {seed}: E_gap < 0.05 '
                  f'from {t} s, closest approach {summary["closest"]["d_min"]:.2f} m '
                  f'({time.process_time() - start:.0f} CPU-s)', flush=True)
        print(f'N = {n}: median over seeds {",".join(map(str, seeds))}: '
              f'{statistics.median(times):.2f} s', flush=True)
        rows.append([n, *(f'{t:.2f}' for t in times), f'{statistics.median(times):.2f}'])
    return {'median': table(['N', *(f'seed {s} [s]' for s in seeds), 'median [s]'], rows)}


def _within(seconds: float) -> str:
    """Return a settle time of ``distribution``, or that it was not within the runs."""
    return f'{seconds:.2f}' if math.isfinite(seconds) else f'not within {DISTRIBUTION_DURATION:g}'


def distribution(preset: str, agents, seeds) -> dict:
    """Settle times from random starts, every seed of each N in one batch_sim batch."""
    print(f'preset {preset}, batch engine, static target, P = 0.01 s, '
          f'{DISTRIBUTION_DURATION:g} s runs: "E_gap < 0.05 for good" [s] over seeds '
          f'{seeds[0]}-{seeds[-1]} ({len(seeds)})')
    print('| N | median [s] | latest [s] | never settled | CPU [s] |')
    print('|---|---|---|---|---|')
    rows, times = [], {}
    for n in agents:
        start = time.process_time()
        result = simulate_runs([Scenario(agents=n, seed=seed, control_period=0.01,
                                         duration=DISTRIBUTION_DURATION,
                                         controller=gains(preset)) for seed in seeds])
        settled = [summarise(m)['settle_time']['E_gap'] for m in result.metrics]
        finite = [math.inf if t is None else t for t in settled]
        times[str(n)] = [None if t is None else round(t, 2) for t in settled]
        cpu = time.process_time() - start
        row = [n, _within(statistics.median(finite)), _within(max(finite)),
               sum(t is None for t in settled), round(cpu)]
        print('| ' + ' | '.join(map(str, row)) + ' |', flush=True)
        rows.append(row)
    return {'duration': DISTRIBUTION_DURATION, 'seeds': list(seeds), 'times': times,
            'distribution': table(['N', 'median [s]', 'latest [s]', 'never settled',
                                   'CPU [s]'], rows)}


def distribution_plot(plot: str) -> None:
    """Plot the settle times of ``distribution`` with (the defaults) and without the term."""
    from matplotlib.figure import Figure
    labels = ('without the even-ring term (k_e_ring 0)',
              'defaults: with the even-ring term (k_e_ring 0.4)')
    times, commits = ({}, {}), set()
    for stem in ('n8_10_32', 'n64_100', 'n8_10_32_k_e_ring_0', 'n64_100_k_e_ring_0'):
        record = json.loads((RESULTS_DIR / f'stability_distribution_{stem}.json').read_text())
        commits.add(record['commit'][:7])
        times['k_e_ring' not in stem].update(record['results']['times'])
    ns = sorted({int(n) for variant in times for n in variant})
    fig = Figure(figsize=(7, 4), dpi=100)
    ax = fig.add_subplot()
    for k in (1, 0):
        shift = (0.5 - k) * 0.35
        for i, n in enumerate(ns):
            seeds = times[k].get(str(n))
            if not seeds:
                continue
            y = [DISTRIBUTION_DURATION if t is None else t for t in seeds]
            x = i + shift + np.linspace(-0.08, 0.08, len(y))
            ax.plot(x, y, 'o', ms=3, color=f'C{k}', alpha=0.6,
                    label=f'{labels[k]}' if i == 0 else None)
            ax.plot([i + shift - 0.15, i + shift + 0.15], [statistics.median(y)] * 2, '-',
                    color=f'C{k}', lw=2)
    ax.axhline(DISTRIBUTION_DURATION, color='k', lw=0.8, ls=':')
    ax.set_xticks(range(len(ns)), [f'N = {n}' for n in ns])
    ax.set_ylabel('E_gap < 0.05 for good [s]')
    ax.set_ylim(0.0, DISTRIBUTION_DURATION + 2.0)
    ax.grid(True, axis='y', alpha=0.3)
    ax.legend(fontsize='small', loc='upper left')
    ax.set_title('Settle time from random starts, per seed (bar: median; dotted: the end of '
                 f'the run, not settled)\nmeasured on {", ".join(sorted(commits))}',
                 fontsize='small')
    fig.tight_layout()
    fig.savefig(plot)
    print(f'plot: {plot}')


def turning(preset: str, seeds, engines) -> dict:
    print('| engine | circle radius [m] | target speed [m/s] | turn rate [rad/s] | seed | '
          'E_r | E_gap | min d_min [m] |')
    print('|---|---|---|---|---|---|---|---|')
    rows = []
    for engine in engines:
        for (radius, speed), seed in itertools.product(TURNS, seeds):
            scenario = Scenario(agents=10, seed=seed, duration=120.0, control_period=0.01,
                                target_motion='circle', target_speed=speed,
                                target_boundary=radius, controller=gains(preset))
            metrics = simulate(scenario, engine).metrics
            late = metrics[metrics[:, 0] >= 60.0]
            print(f'| {engine} | {radius:g} | {speed:g} | {speed / radius:.3f} | {seed} | '
                  f'{np.nanmean(late[:, 1]):.4f} | {np.nanmean(late[:, 5]):.4f} | '
                  f'{np.nanmin(metrics[:, 6]):.2f} |', flush=True)
            rows.append([engine, radius, speed, round(speed / radius, 3), seed,
                         round(float(np.nanmean(late[:, 1])), 4),
                         round(float(np.nanmean(late[:, 5])), 4),
                         round(float(np.nanmin(metrics[:, 6])), 2)])
    return {'turning': table(['engine', 'circle radius [m]', 'target speed [m/s]',
                              'turn rate [rad/s]', 'seed', 'E_r', 'E_gap',
                              'closest approach [m]'], rows)}


def moving(preset: str, seeds, engine: str = 'auto') -> dict:
    means, rows = [], []
    limit = MOVING.with_changes(vehicle=VEHICLE).vehicle_params().max_acc_xy
    for seed in seeds:
        start = time.perf_counter()
        cpu = time.process_time()
        scenario = MOVING.with_changes(seed=seed, controller=gains(preset), vehicle=VEHICLE)
        result = simulate(scenario, engine)
        metrics = result.metrics
        late = metrics[metrics[:, 0] >= 60.0]
        e_r, e_gap = np.nanmean(late[:, 1]), np.nanmean(late[:, 5])
        d_min = np.nanmin(metrics[:, 6])
        mean_acc, at_limit = _acceleration(result, limit)
        words, out, otherwise = _failed_share(result)
        # The control: the same run (seed, target's path) with no agent failing.
        bare = simulate(scenario.with_changes(failures_per_min=0.0), engine).metrics
        no_failures = np.nanmean(bare[bare[:, 0] >= 60.0, 5])
        means.append((e_r, e_gap, out, otherwise, no_failures))
        print(f'moving target, preset {preset}, seed {seed}: mean over t >= 60 s E_r = {e_r:.4f}, '
              f'E_gap = {e_gap:.4f}; min d_min = {d_min:.2f} m; mean horizontal acceleration of '
              f'the working agents {mean_acc:.2f} m/s^2, at 90 % of the {limit:g} m/s^2 '
              f'limit or more {at_limit:.0%} of the time '
              f'({time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu:.0f} CPU-s)'
              f'; {words}; the same run without failures: E_gap {no_failures:.4f}', flush=True)
        rows.append([seed, round(float(e_r), 4), round(float(e_gap), 4), round(out, 4),
                     round(otherwise, 4), round(float(no_failures), 4), round(float(d_min), 2),
                     round(mean_acc, 2), round(at_limit, 3)])
    medians = [statistics.median(m[k] for m in means) for k in range(5)]
    print(f'median of seeds: E_r = {medians[0]:.4f} (goal <= 0.065), E_gap = {medians[1]:.4f} '
          '(goal <= 0.12)')
    rows.append(['median', *(round(float(m), 4) for m in medians), '', '', ''])
    return {'engine': engine, 'max_acc_xy': limit, 'moving': table(
        ['seed', 'mean E_r', 'mean E_gap', 'E_gap with an agent out', 'E_gap otherwise',
         'E_gap, the same run without failures', 'closest approach [m]',
         'mean |a| of working agents [m/s²]', 'share of time at ≥ 90 % of max_acc_xy'], rows)}


IDEAL_GAINS = (3.0, 3.0)  # 1/s^2, 1/s: the idealised re-spacer's slot tracking (kp, kd)


def ideal(preset: str, seeds, radial: str = 'slot') -> dict:
    """
    Fly the moving target with failures again by an idealised, centralised re-spacer.

    Per seed the product's run (batch engine, the preset's gains and the options') gives the
    target's path and which agents work when; the same ring is then flown again by agents that
    know everything at once: each working agent tracks a slot of an even ring about the target
    (R = 20 m), the slots re-dealt at every loss and return (the ring's order kept, turned so
    that the agents move least), with the target's true acceleration fed forward,
    a = a_target + kp (slot - p) + kd (v_target - v), flown through the same vehicle model
    (lag, acceleration, jerk limits: the command v + tau_xy a). A failed agent's vehicle is
    commanded to a stop and comes back from where it stopped. No law that hears only its neighbours
    has more to go on, so its mean E_gap is a yardstick for the law's, not a bound.

    ``radial`` 'law': the radial part of each command is the law's instead (``law.radial_velocity``
    plus the radial part of ``law.target_lead``), the target's acceleration (fed forward along
    the ring, and in the lead) the law's estimate of it (``estimate_acceleration``): what the
    re-spacer keeps then is not owed to its radial loop.
    """
    from soliton_encirclement_ros.core.swarm_run import SwarmRun
    from velocity_mobility_ros.core.model import step, VehicleState
    from soliton_encirclement_ros.core.metrics import compute_metrics
    from soliton_encirclement_ros.core import law as control_law
    from soliton_encirclement_ros.core.geometry import polar_frame
    from soliton_encirclement_ros.core.target_estimate import estimate_acceleration
    kp, kd = IDEAL_GAINS
    rows, laws, bests, law_radii, best_radii = [], [], [], [], []
    print('| seed | the law: mean E_gap | the idealised re-spacer: mean E_gap | '
          'its mean commanded |a| [m/s²] | the law: mean E_r | the re-spacer: mean E_r |')
    print('|---|---|---|---|---|---|')
    for seed in seeds:
        scenario = MOVING.with_changes(seed=seed, controller=gains(preset), vehicle=VEHICLE)
        run = SwarmRun(scenario, 'batch')
        n, period = scenario.agents, scenario.control_period
        target, live, law, law_r = [], [], [], []
        for k in range(run.ticks + 1):
            tick = run.tick()
            target.append(run.bodies.position[n, :2].copy())
            live.append(tick.live.copy())
            law.append(tick.metrics[4] if tick.metrics is not None else np.nan)
            law_r.append(tick.metrics[0] if tick.metrics is not None else np.nan)
            if k == run.ticks:
                break
            run.advance()
        target, live, law, law_r = (np.array(target), np.array(live), np.array(law),
                                    np.array(law_r))
        t = np.arange(len(target)) * period
        t_vel = np.gradient(target, period, axis=0)
        t_acc = np.gradient(t_vel, period, axis=0)
        vehicle, params = scenario.vehicle_params(), scenario.controller_params()
        lag, steps = vehicle.tau_xy, round(period / vehicle.sim_dt)
        slots = 2.0 * np.pi * np.arange(n) / n
        start = target[0] + scenario.radius * np.c_[np.cos(slots), np.sin(slots)]
        bodies = VehicleState.at_rest(np.c_[start, np.zeros(n)])
        bodies.velocity[:, :2] = t_vel[0]  # a formed ring flying with the target
        e_gap, e_r, pushed, working = np.empty(len(t)), np.empty(len(t)), [], None
        estimate = None  # radial 'law': the law's estimate of the target's acceleration
        for k in range(len(t)):
            p, v = bodies.position[:, :2], bodies.velocity[:, :2]
            theta = np.arctan2(p[:, 1] - target[k, 1], p[:, 0] - target[k, 0])
            on = live[k]
            m = int(on.sum())
            if m:
                formed = compute_metrics(bodies.position[on], bodies.velocity[on], target[k],
                                         t_vel[k], scenario.radius)
                e_gap[k] = formed.E_gap if m >= 2 else np.nan
                e_r[k] = formed.E_r
            else:
                e_gap[k] = e_r[k] = np.nan
            if working is None or (on != working).any():  # deal the slots again
                order = np.flatnonzero(on)[np.argsort(np.mod(theta[on], 2.0 * np.pi))]
                even = 2.0 * np.pi * np.arange(m) / m
                turn = np.angle(np.mean(np.exp(1j * (theta[order] - even))))
                slots[order] = even + turn
                working = on.copy()
            slot = target[k] + scenario.radius * np.c_[np.cos(slots), np.sin(slots)]
            if radial == 'law':  # the law's estimate of the target's acceleration
                estimate = estimate_acceleration(estimate, t[k],
                                                 np.r_[t_vel[k], 0.0])
                fed = estimate.acceleration[:2]
            else:
                fed = t_acc[k]
            a = fed + kp * (slot - p) + kd * (t_vel[k] - v)
            size = np.linalg.norm(a, axis=1, keepdims=True)
            a = np.where(size > vehicle.max_acc_xy, a * vehicle.max_acc_xy / size, a)
            pushed.append(np.linalg.norm(a[on], axis=1).mean())
            command = np.zeros((n, 3))
            flown = v + lag * a
            if radial == 'law':  # the radial part the law's: its PD and its target lead
                r, e_r_hat, _ = polar_frame(p, target[k])
                lead = control_law.target_lead(np.r_[t_vel[k], 0.0],
                                               estimate.acceleration, params)[:2]
                flown += (np.sum((lead - flown) * e_r_hat, axis=1)[:, None] * e_r_hat
                          + control_law.radial_velocity(r, e_r_hat, v, t_vel[k], params))
            command[:, :2] = np.where(on[:, None], flown, 0.0)
            for _ in range(steps):
                bodies = step(bodies, command, vehicle)
        late = (t >= 60.0) & ~np.isnan(law)  # the law's metric samples
        laws.append(float(np.nanmean(law[late])))
        bests.append(float(np.nanmean(e_gap[late])))
        law_radii.append(float(np.nanmean(law_r[late])))
        best_radii.append(float(np.nanmean(e_r[late])))
        acc = float(np.mean(np.array(pushed)[t >= 60.0]))
        print(f'| {seed} | {laws[-1]:.4f} | {bests[-1]:.4f} | {acc:.2f} | {law_radii[-1]:.4f} | '
              f'{best_radii[-1]:.4f} |', flush=True)
        rows.append([seed, round(laws[-1], 4), round(bests[-1], 4), round(acc, 2),
                     round(law_radii[-1], 4), round(best_radii[-1], 4)])
    rows.append(['median', round(statistics.median(laws), 4), round(statistics.median(bests), 4),
                 '', round(statistics.median(law_radii), 4),
                 round(statistics.median(best_radii), 4)])
    return {'ideal_gains': list(IDEAL_GAINS), 're_spacer_radial': radial, 'ideal': table(
        ['seed', 'the law: mean E_gap', 'the idealised re-spacer: mean E_gap',
         'its mean commanded |a| [m/s²]', 'the law: mean E_r', 'the re-spacer: mean E_r'],
        rows)}


def _acceleration(result, limit: float) -> tuple:
    """
    Return the working agents' mean horizontal acceleration and its share at ``limit``.

    Over t >= 60 s, from the trajectories (every 0.1 s): second differences of each agent's
    x, y, counted where the agent was live (in the telemetry) at all three samples; "at the
    limit" is at least 90 % of ``limit`` (the vehicle model's ``max_acc_xy``).
    """
    agents = result.agents
    values = []
    for i in np.unique(agents[:, 0]):
        track = result.trajectories[f'uav{int(i)}']
        t, xy = track[:, 0], track[:, 1:3]
        dt = np.diff(t)
        v = np.diff(xy, axis=0) / dt[:, None]
        a = np.diff(v, axis=0) / (0.5 * (dt[1:] + dt[:-1]))[:, None]
        live_at = np.isin(np.round(t, 6), np.round(agents[agents[:, 0] == i, 1], 6))
        keep = (t[1:-1] >= 60.0) & live_at[:-2] & live_at[1:-1] & live_at[2:]
        values.append(np.hypot(a[keep, 0], a[keep, 1]))
    values = np.concatenate(values)
    return float(values.mean()), float(np.mean(values >= 0.9 * limit))


def _failed_share(result) -> tuple:
    """
    Where E_gap comes from and how near working agents fly to failed ones' vehicles (t >= 60 s).

    From the telemetry (every 0.1 s, live agents only) and the trajectories: the share of the
    time with an agent failed, the mean E_gap then and otherwise, and how often (and how close)
    a working agent was within 2 m of a failed agent's hovering vehicle. Returns (those in
    words, the mean E_gap with an agent failed, the mean E_gap otherwise).
    """
    agents = result.agents
    times = np.unique(agents[:, 1])
    times = times[times >= 60.0]
    ids = np.unique(agents[:, 0])
    xy = np.stack([result.trajectories[f'uav{int(i)}'][:, 1:] for i in ids], axis=1)
    at = np.searchsorted(result.trajectories['target'][:, 0], times - 1e-9)
    rows = np.searchsorted(result.metrics[:, 0], times - 1e-9)
    failed, nearest = [], []
    for t, k in zip(times, at):
        live = np.isin(ids, agents[agents[:, 1] == t, 0])
        failed.append(not live.all())
        gap = xy[k, live][:, None] - xy[k, ~live][None]
        nearest.append(np.hypot(gap[..., 0], gap[..., 1]).min() if failed[-1] else np.inf)
    failed, nearest = np.array(failed), np.array(nearest)
    e_gap = result.metrics[rows, 5]
    out, otherwise = float(e_gap[failed].mean()), float(e_gap[~failed].mean())
    return (f'an agent failed {failed.mean():.0%} of the time, E_gap then {out:.3f}, else '
            f'{otherwise:.3f}; a working agent within 2 m of a failed vehicle '
            f'{np.mean(nearest < 2.0):.1%} of the time, closest {nearest.min():.2f} m',
            out, otherwise)


def _formed_share(metrics, since: float) -> tuple:
    """Return (formed at, mean E_gap, share above 0.05) from the first E_gap < 0.05 after since."""
    t, e_gap = metrics[:, 0], metrics[:, 5]
    below = np.flatnonzero((t >= since) & (e_gap < 0.05))
    if below.size == 0:
        return None, float(np.nanmean(e_gap[t >= since])), 1.0
    late = e_gap[below[0]:]
    return float(t[below[0]]), float(np.nanmean(late)), float(np.mean(late > 0.05))


def hover(preset: str, seeds, targets) -> dict:
    from soliton_encirclement_ros.core.batch_engine import simulate_runs
    print('| target | failed | seed | settle [s] | formed again [s] | mean E_gap once formed | '
          'share E_gap > 0.05 | closest once apart [m] |')
    print('|---|---|---|---|---|---|---|---|')
    rows = []
    for target, failed in itertools.product(targets, HOVER_FAILED):
        scenario = HOVER.with_changes(
            target_motion=target, failed_agents=failed, controller=gains(preset),
            target_boundary=30.0 if target == 'circle' else 20.0, vehicle=VEHICLE)
        params = scenario.controller_params()
        apart = params.d_safe or 1.0
        start = time.process_time()
        result = simulate_runs([scenario.with_changes(seed=s) for s in seeds], apart=apart)
        for seed, metrics, after in zip(seeds, result.metrics, result.separation.after):
            summary = summarise(metrics)
            settle = summary['settle_time']['E_gap']
            formed, mean, share = _formed_share(metrics, scenario.fault_time)
            cells = [target, failed, seed, 'never' if settle is None else round(settle, 2),
                     'never' if formed is None else round(formed, 2), round(mean, 4),
                     round(share, 4), round(float(after), 2)]
            print('| ' + ' | '.join(map(str, cells)) + ' |', flush=True)
            rows.append(cells)
        print(f'({time.process_time() - start:.0f} CPU-s)', flush=True)
    worst_share = max(r[6] for r in rows)
    closest = min(r[7] for r in rows)
    print(f'worst share above 0.05 once formed: {worst_share:.1%} (goal <= 5 %); closest '
          f'approach once apart: {closest:.2f} m (goal >= 1 m)')
    return {'fault_time': HOVER.fault_time, 'hover': table(
        ['target', 'failed', 'seed', 'settle [s]', 'formed again [s]',
         'mean E_gap once formed', 'share E_gap > 0.05 once formed',
         'closest approach once apart [m]'], rows),
        'worst_share': round(worst_share, 4), 'closest': round(closest, 2)}


def crossings() -> dict:
    from pathlib import Path
    import sys
    tests = Path(__file__).resolve().parents[1] / 'test'
    sys.path[:0] = [str(tests), str(tests / 'acceptance')]  # support/, the scenarios' module
    from test_separation_acceptance import CROSSINGS, PERIOD

    from support.swarm_loop import run_swarm
    print('| scenario | d_safe [m] | min d_min without d_safe [m] | with d_safe [m] (/ d_safe) '
          '| final E_gap, E_r with d_safe |')
    print('|---|---|---|---|---|')
    rows = []
    for name, (case, d_safe, _) in CROSSINGS.items():
        bare = run_swarm(params=ControllerParams(control_period=PERIOD, d_safe=0.0), **case)
        guarded = run_swarm(params=ControllerParams(control_period=PERIOD, d_safe=d_safe,
                                                    d_safe_share=0.0), **case)
        closest = float(np.nanmin(guarded.metrics[:, 5]))
        print(f'| {name} | {d_safe:g} | {np.nanmin(bare.metrics[:, 5]):.2f} | {closest:.2f} '
              f'({closest / d_safe:.2f}) | {guarded.metrics[-1, 4]:.1e}, '
              f'{guarded.metrics[-1, 0]:.1e} |', flush=True)
        rows.append([name, d_safe, round(float(np.nanmin(bare.metrics[:, 5])), 2),
                     f'{closest:.2f} ({closest / d_safe:.2f})',
                     f'{guarded.metrics[-1, 4]:.1e}, {guarded.metrics[-1, 0]:.1e}'])
    return {'crossings': table(['scenario', 'd_safe [m]', 'closest without d_safe [m]',
                                'closest with d_safe [m] (/ d_safe)',
                                'final E_gap, E_r with d_safe'], rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('what', choices=('growth', 'settle', 'n10', 'median', 'moving',
                                         'turning', 'crossings', 'distribution',
                                         'distribution-plot', 'hover', 'ideal'))
    parser.add_argument('--preset', choices=PRESETS, default='default')
    parser.add_argument('--plot', help='growth, distribution-plot: write the plot here')
    parser.add_argument('--agents', type=int, nargs='+', default=None,
                        help='N (default: 3 5 8 10 16 32 64 100; distribution: 8 10 32 64 100)')
    parser.add_argument('--seeds', type=int, nargs='+', default=None,
                        help='seeds (default: 0 1 2; distribution: 0-19)')
    parser.add_argument('--period', type=float, default=0.05)
    parser.add_argument('--targets', nargs='+', choices=HOVER_TARGETS,
                        default=list(HOVER_TARGETS), help='hover: the target motions')
    parser.add_argument('--d-safe', type=float, help="d_safe [m] (default: the controller's)")
    parser.add_argument('--k-e-ring', type=float,
                        help="k_e_ring [1/rad] (default: the controller's)")
    parser.add_argument('--ring-ramp', type=float,
                        help="ring_ramp [s] (default: the controller's; 0: the even-ring term "
                        'whole from the first tick and at once after each change of members)')
    parser.add_argument('--target-lead', type=float,
                        help="target_lead [s] (default: the controller's)")
    parser.add_argument('--obstacle-clearance', type=float,
                        help="obstacle_clearance [m] (default: the controller's; 0: the ring "
                        'keeps its radius round failed vehicles)')
    parser.add_argument('--k-gap-steer', type=float,
                        help="k_gap_steer [1/s] (default: the controller's; 0: the ring does "
                        'not turn its gaps to failed vehicles)')
    add_gain_option(parser)
    parser.add_argument('--max-acc-xy', type=float,
                        help="moving, hover, ideal: the vehicles' horizontal acceleration limit "
                        "[m/s^2] (default: the vehicle model's, 4)")
    parser.add_argument('--re-spacer-radial', choices=('slot', 'law'), default='slot',
                        help="ideal: the re-spacer's radial term: its own slot tracking (slot) "
                        "or the law's radial term and target lead (law)")
    parser.add_argument('--engine', nargs='+', default=None,
                        help='median, moving: one engine (default auto); turning: engines '
                        '(default vectorised per-agent batch)')
    add_options(parser)
    args = parser.parse_args()
    if args.what == 'distribution-plot':
        distribution_plot(args.plot or 'ring_settle.png')
        return
    load = begin(args)
    wide = args.what == 'distribution'
    if args.agents is None:
        args.agents = list(DISTRIBUTION_NS if wide else SETTLE_NS)
    if args.seeds is None:
        args.seeds = list(DISTRIBUTION_SEEDS if wide else (0, 1, 2))
    name = f'stability_{args.what}'
    if args.preset != 'default' and args.what not in ('growth', 'crossings'):
        name += f'_{args.preset}'
    if wide and args.agents != list(DISTRIBUTION_NS):
        name += '_n' + '_'.join(map(str, args.agents))
    for option in ('d_safe', 'target_lead', 'k_e_ring', 'ring_ramp', 'obstacle_clearance',
                   'k_gap_steer'):
        if getattr(args, option) is not None:
            OVERRIDES[option] = getattr(args, option)
            name += f'_{option}_{getattr(args, option):g}'
    changes = checked_gains(parser, args, args.preset, OVERRIDES)
    OVERRIDES.update(changes)
    name += gains_suffix(changes)
    if OVERRIDES and args.what == 'crossings':
        parser.error('crossings flies its own gains (those of the separation acceptance '
                     'tests): no gain option applies')
    if OVERRIDES and args.what == 'growth' and args.preset != 'default':
        name = name.replace('stability_growth', f'stability_growth_{args.preset}', 1)
    if args.re_spacer_radial != 'slot':
        if args.what != 'ideal':
            parser.error('--re-spacer-radial is for ideal only')
        name += f'_re_spacer_radial_{args.re_spacer_radial}'
    if args.max_acc_xy is not None:
        if args.what not in ('moving', 'hover', 'ideal'):
            parser.error('--max-acc-xy is for moving, hover and ideal only')
        VEHICLE['max_acc_xy'] = args.max_acc_xy
        name += f'_max_acc_xy_{args.max_acc_xy:g}'
    if args.what == 'growth':
        results = growth(args.plot, args.preset)
    elif args.what == 'settle':
        results = settle(args.preset, args.agents, args.seeds, args.period)
    elif args.what == 'n10':
        results = n10(args.preset)
    elif args.what == 'median':
        results = median(args.preset, args.agents, args.seeds, (args.engine or ['auto'])[0])
    elif args.what == 'turning':
        results = turning(args.preset, args.seeds,
                          args.engine or ['vectorised', 'per-agent', 'batch'])
    elif args.what == 'distribution':
        results = distribution(args.preset, args.agents, args.seeds)
    elif args.what == 'moving':
        results = moving(args.preset, args.seeds, (args.engine or ['auto'])[0])
    elif args.what == 'ideal':
        results = ideal(args.preset, args.seeds, args.re_spacer_radial)
    elif args.what == 'hover':
        results = hover(args.preset, args.seeds, args.targets)
    else:
        results = crossings()
    save(args, name, {'preset': args.preset, **OVERRIDES,
                      **({'vehicle': VEHICLE} if VEHICLE else {}), **results}, load,
         code=LAW_CODE)


if __name__ == '__main__':
    main()
