"""
ROS-free batch simulator: target, velocity mobility and every agent's controller, lock-step.

Timing (the ROS graph mirrors it): the mobility model steps every ``sim_dt`` (0.01 s). Every
control period P, each working agent broadcasts its state, then computes its command from
what it received at earlier ticks (broadcasts are delivered on the next tick, or after
``delay``, and each may be lost with probability ``loss``) and from its own current odometry.
The target broadcasts every P too. Metrics are taken every metrics period over the working
agents, per-agent telemetry every telemetry period.

The controller engines are ``core.engines.ENGINES`` (``per-agent``: the agent node's own
``controller.control_step`` per agent; ``vectorised``: arrays over agents when every receiver
hears the same broadcasts; ``batch``: the sweep's receiver x sender engine for one run).
``auto`` picks the fastest that is exact (``core.engines.choose_engine``): the batch one up to
16 agents where its step runs compiled, else the vectorised one where exact, else per-agent.

metrics.csv and agents.csv are streamed into ``--out`` from the first tick
(``report.RunTables``, as ``swarm_sim --engine`` streams them): a killed run keeps them, beside
a summary.json that says it did not finish, until the run's own summary replaces it.

    batch_sim --agents 10 --duration 120 --seed 0 --control-period 0.01 \
        --target-motion static --failures-per-min 0 --loss 0 --delay 0 --out runs/static10
"""
from __future__ import annotations

import argparse
from contextlib import nullcontext
import math
import sys
import time

import numpy as np

from ros_support.signals import EXIT_INTERRUPTED, Interrupted, StopRequest
from ros_support.validation import OneLineParser
from soliton_encirclement_ros.analysis.outputs import FIGURE_FORMATS, output_dir_problem
from soliton_encirclement_ros.analysis.report import (
    interrupted_params, OutputsIncomplete, RunResult, RunTables, separation_note,
    tick_agent_rows, write_run_outputs)
from soliton_encirclement_ros.core.area import outside_starts, outside_starts_text
from soliton_encirclement_ros.core.engines import choose_engine, ENGINE_CHOICES
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.swarm_run import SwarmRun
from soliton_encirclement_ros.sim.options import add_scenario_options, scenario_from_args
from soliton_encirclement_ros.sim.sizes import batch_size_problem, size_note

EXIT_INCOMPLETE = 3  # some outputs could not be written (one line says which)
TRAJECTORY_AGENTS_MAX = 50  # trajectories.png shows the target and at most this many agents


def simulate(scenario: Scenario, engine: str = 'auto',
             stop: StopRequest | None = None, tables: RunTables | None = None) -> RunResult:
    """
    Run ``scenario`` and return its metrics, telemetry and trajectories.

    With ``stop``: its request cuts the build short (:class:`Interrupted`), and the run inside
    the control tick it comes in (a tick of a big swarm takes minutes), returning what was
    simulated until the last whole tick (``sim_time`` says how far).
    With ``tables``: every tick's rows are streamed there too, from the first tick (a killed
    run leaves them on disk); they are closed when this returns, and ``tables.failures()``
    says what a full disk cut short.
    """
    guard = stop.raising if stop is not None else nullcontext
    with guard():
        run = SwarmRun(scenario, engine)
    try:
        return _run(scenario, run, guard, tables)
    finally:
        if tables is not None:
            tables.close()


def run_params(scenario: Scenario, engine: str) -> dict:
    """Return a run's ``params`` for summary.json: the scenario's, the engine, outside starts."""
    params = {**scenario.as_dict(), 'engine': engine}
    if scenario.area is not None:  # who started outside: no settle time is theirs
        params['outside_start'] = outside_starts(scenario.area, scenario.start_positions(),
                                                 agent_names(scenario.agent_ids()))
    return params


def _run(scenario: Scenario, run: SwarmRun, guard, tables) -> RunResult:
    n, ids = run.n, run.ids
    traced = min(n, TRAJECTORY_AGENTS_MAX)
    metrics_rows, agent_rows, trace_rows = [], [], []
    wall_start = time.perf_counter()
    done, interrupted = 0, False  # the last tick simulated; whether the run was stopped
    for k in range(run.ticks + 1):
        try:
            with guard():  # a request raises here, at once or inside the tick
                tick = run.tick()
        except Interrupted:
            interrupted = True
            break
        done = k
        rows = tick_agent_rows(tick, ids) if tick.telemetry else None
        if tables is not None:
            tables.add(tick, ids, rows)
        if tick.metrics is not None:
            metrics_rows.append((tick.now, *tick.metrics))
        if tick.telemetry:
            agent_rows.append(rows)
            trace_rows.append(np.vstack((run.bodies.position[:traced, :2],
                                         run.bodies.position[n, :2])).ravel())
        if k == run.ticks:
            break
        run.advance()  # O(N): a request now raises on entering the next tick
    wall = time.perf_counter() - wall_start

    period = scenario.control_period
    trace = np.array(trace_rows).reshape(len(trace_rows), traced + 1, 2)
    times = np.arange(len(trace_rows)) * run.telemetry_every * period
    names = [f'uav{i}' for i in ids[:traced]] + ['target']
    trajectories = {name: np.column_stack((times, trace[:, j])) for j, name in enumerate(names)}
    sim_time = round(done * period, 9)
    params = {**run_params(scenario, run.engine),
              **interrupted_params(sim_time if interrupted else None)}
    return RunResult(np.array(metrics_rows).reshape(-1, 1 + len(METRIC_NAMES)),
                     np.vstack(agent_rows) if agent_rows else np.empty((0, 4)),
                     params, trajectories,
                     sim_time / wall if wall > 0 else math.inf, sim_time, wall,
                     run.bodies.position.copy(),
                     run.area_margin if scenario.area is not None else math.nan)


def agent_names(ids) -> list[str]:
    """Return the agents' names, ``uav<id>``, as the outputs call them."""
    return [f'uav{i}' for i in ids]


def settle_note(params) -> str:
    """Return ``'; '`` and why no settle time is reported, or ``''`` (every start inside)."""
    out = params.get('outside_start') or []
    if not out:
        return ''
    return (f'; no settle time: {len(out)} agent{"s" if len(out) > 1 else ""} started outside '
            'the safety area and held')


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog='batch_sim', description='ROS-free soliton encirclement simulator (same controller '
        'code as agent_node). The scenario options are those of swarm_sim.')
    add_scenario_options(parser)
    parser.add_argument('--engine', choices=ENGINE_CHOICES, default='auto',
                        help='controller engine (default auto: the fastest that is exact)')
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--no-plots', action='store_true',
                        help='write the CSVs and summary.json only, no PNG plots (what sweeps '
                        'do; saves most of the fixed cost of a short run)')
    parser.add_argument('--format', choices=FIGURE_FORMATS, default='png',
                        help='figure format: png, or vector pdf/svg for papers '
                             '(default %(default)s)')
    return parser


def main(argv=None) -> int:
    stop = StopRequest('batch_sim').install()
    try:
        return _main(argv, stop)
    except Interrupted:
        print('batch_sim: interrupted before the first step; nothing was run or written',
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        stop.ignore_from_now()


def _main(argv, stop: StopRequest) -> int:
    parser = build_parser()
    with stop.raising():
        args = parser.parse_args(argv)
        try:
            scenario = scenario_from_args(args)
            engine = choose_engine(scenario, args.engine)
            problem = (output_dir_problem(args.out, '--out')  # and a size that cannot fit
                       or batch_size_problem(scenario, engine))
            if problem:
                raise ValueError(problem)
        except ValueError as exc:  # bad input: one line, before any simulation
            print(f'batch_sim: error: {exc}', file=sys.stderr)
            return 2
        outside = outside_starts_text(scenario.area, scenario.start_positions(),
                                      agent_names(scenario.agent_ids()))
        if outside:
            print(f'batch_sim: warning: {outside}', file=sys.stderr)
        note = size_note(scenario, engine, telemetry_in_memory=True)
        if note:  # a big run: what it will take, before it is built
            print(f'batch_sim: {note}', file=sys.stderr, flush=True)
    # metrics.csv and agents.csv stream into --out from the first tick (a killed run keeps
    # them, beside a summary.json that says it did not finish)
    tables = RunTables(args.out, run_params(scenario, engine))
    result = simulate(scenario, args.engine, stop, tables)
    interrupted = stop.requested
    if interrupted:
        print(f'batch_sim: interrupted at t={result.sim_time:g} s of {scenario.duration:g} s; '
              f'writing what was simulated into {args.out}', file=sys.stderr, flush=True)
    stop.writing = True  # a second signal only says "writing outputs, please wait"
    streamed = tuple(tables.failures())  # what a full disk cut short while the run went
    try:
        summary = write_run_outputs(args.out, result, plots=not args.no_plots, fmt=args.format,
                                    incomplete=streamed, streamed=tables.opened)
        problem = '; '.join(streamed)
    except OutputsIncomplete as error:  # a full or read-only disk
        summary, problem = error.summary, error.problem
    final = ', '.join(f'{k}={v:.4g}' for k, v in summary['final'].items())
    print(f'batch_sim: {scenario.agents} agents, {result.sim_time:g} s simulated in '
          f'{result.wall_time:.2f} s ({result.real_time_factor:.1f}x real time, '
          f'{result.params["engine"]}); final {final}{settle_note(result.params)}; '
          f'{separation_note(result.params)}; '
          f'outputs in {args.out}')
    if problem:
        print(f'batch_sim: error: outputs incomplete in {args.out}: {problem}', file=sys.stderr)
        return EXIT_INCOMPLETE
    return EXIT_INTERRUPTED if interrupted else 0


if __name__ == '__main__':
    sys.exit(main())
