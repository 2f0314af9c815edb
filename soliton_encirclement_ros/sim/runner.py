"""
swarm_sim: run the swarm graph of ``graph.build_graph`` on a simulated clock.

In-process (default): every node of the plan lives in this process, on one executor, talking
over real DDS (so ``ros2 topic echo`` or a recorder elsewhere on the machine sees every
topic). The runner owns ``/clock`` and steps it in lock-step: it advances the clock by one
mobility step only after every callback due at the current time has run, so a seed fully
determines the run. ``--processes`` starts each node as its own process instead, exactly as
``ros2 launch`` would, with the swarm mobility node publishing the clock.
"""
from __future__ import annotations

import argparse
from contextlib import contextmanager
import gc
import json
import math
import os
from pathlib import Path
import shutil
import sys
import time
from typing import NamedTuple

from ros_support.signals import EXIT_INTERRUPTED, Interrupted, StopRequest
from ros_support.validation import broken_rule, domain_id_problem, number, OneLineParser
from soliton_encirclement_ros.analysis.outputs import (
    FIGURE_FORMATS, new_dir_problem, output_dir_problem)
from soliton_encirclement_ros.analysis.report import (
    clear_previous_outputs, FIGURES, INTERRUPTED_AT, interrupted_params, interrupted_text,
    separation_note)
from soliton_encirclement_ros.bringup.graph import (
    agent_controllers, build_graph, precedence_notes, separation_notes, SwarmPlan)
from soliton_encirclement_ros.core.area import outside_starts, outside_starts_text
from soliton_encirclement_ros.core.engines import ENGINE_CHOICES
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, settled_text
from soliton_encirclement_ros.interface import DOMAIN_IDS
from soliton_encirclement_ros.sim.options import (
    add_scenario_options, given_settings, scenario_from_args)
from soliton_encirclement_ros.sim.sizes import engine_note, size_note, size_problem

DEFAULT_FOXGLOVE_PORT = 8765   # live.relay.DEFAULT_PORT (not imported: it needs rclpy)
DEFAULT_FOXGLOVE_HOST = '127.0.0.1'
# Exit status: 0 done (also when stopped by SIGINT/SIGTERM during the run: what was gathered
# is written); 1 a node failed or the run stalled (what was gathered is kept); 2 refused
# before starting; 3 outputs incomplete (summary.json recomputed from the CSVs, a write that
# failed); 130 stopped before the run started (nothing was run).
EXIT_FAILED, EXIT_REFUSED, EXIT_INCOMPLETE = 1, 2, 3
NODES = 'nodes'  # --engine: one agent_node per agent; the others are core.engines'
# The cyclic collector's first threshold during a run (Python's default: 700 allocations). The
# control tick and the figures make many short-lived containers: at 700, a 20 s run of N = 10
# (--engine auto) collects ~360 times (0.18 CPU-s), at this ~65 times (0.07 CPU-s). What
# reference counting frees never waits for the collector; cyclic garbage waits a little longer.
GC_THRESHOLD = 20_000
# Sim s without a metrics row (or 10 metrics periods, if longer) that summary.json's
# ``unmeasured`` and a warning name: on a machine too slow for the real-time factor asked, the
# nodes of a --processes run fall behind the clock, which runs on.
UNMEASURED_GAP = 1.0
UNMEASURED_LISTED = 20  # spans kept in summary.json (``count`` and ``seconds`` cover them all)
GRAPH_ENGINES = (NODES, *ENGINE_CHOICES)


def parse_args(argv=None) -> argparse.Namespace:
    parser = OneLineParser(
        prog='swarm_sim',
        description='Simulate N UAVs encircling a target through a real ROS 2 graph. The '
        'scenario options are those of batch_sim, so a --scenario file runs unchanged in both.',
    )
    add_scenario_options(parser)
    ros = parser.add_argument_group('ROS graph', 'how the scenario is run')
    ros.add_argument('--real-time-factor', type=number(0), default=0.0,
                     help='sim seconds per wall second; 0 = as fast as possible (default)')
    ros.add_argument('--odom-rate', type=number(0, strict=True), default=None,
                     help='odometry rate [Hz] (default 50)')
    ros.add_argument('--names', default='',
                     help='comma-separated agent names (default uav1..uavN)')
    ros.add_argument('--params-file', action='append', default=[],
                     help='ROS 2 parameter YAML applied to every node (repeatable); it '
                     'wins over the defaults, an option or --scenario field wins over it (one '
                     'line says so)')
    ros.add_argument('--processes', action='store_true',
                     help='one process per node, as ros2 launch does')
    ros.add_argument('--engine', choices=GRAPH_ENGINES, default=NODES,
                     help='nodes (default): one agent_node per agent, the controller that '
                     "flies; auto, per-agent, vectorised or batch: every agent's controller in "
                     "one node, as arrays (batch_sim's engines; auto: the fastest exact one), "
                     "publishing the observers' topics only (no per-agent nodes, parameters, "
                     'services or cmd_vel): for large swarms')
    ros.add_argument('--domain-id', type=number(integer=True, check=_domain_id), default=None,
                     metavar='N', help='ROS domain of the graph (sets ROS_DOMAIN_ID; default: '
                     'ROS_DOMAIN_ID or 0); swarm_sim refuses a domain where another swarm runs')
    parser.add_argument('--out', default='runs/latest',
                        help='output directory (default runs/latest)')
    parser.add_argument('--record', default='', metavar='BAG',
                        help='record a rosbag2 into this new directory')
    parser.add_argument('--storage', default='mcap', choices=('mcap', 'sqlite3'),
                        help='bag storage')
    parser.add_argument('--format', choices=FIGURE_FORMATS, default='png',
                        help='figure format: png, or vector pdf/svg for papers '
                        '(default %(default)s)')
    parser.add_argument('--no-plots', action='store_true',
                        help='write the CSVs and summary.json only, no figures (as batch_sim '
                        'and sweep_sim; matplotlib is not loaded)')
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    live = parser.add_argument_group(
        'live view', 'watch the run in Foxglove (needs foxglove-sdk: the live extra)')
    live.add_argument('--foxglove', nargs='?', const=DEFAULT_FOXGLOVE_PORT, default=None,
                      type=number(integer=True, check=_port), metavar='PORT',
                      help='serve the swarm topics on a Foxglove WebSocket server on PORT '
                      f'(default {DEFAULT_FOXGLOVE_PORT}; 0: any free port)')
    live.add_argument('--foxglove-host', default=DEFAULT_FOXGLOVE_HOST, metavar='HOST',
                      help='address the server binds to (default %(default)s: this machine '
                      'only; 0.0.0.0: every interface, anyone on the network can watch; it '
                      'offers no command)')
    return parser.parse_args(argv)


def _port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f'--foxglove port must be in 0..65535, got {value}')
    return value


def _domain_id(value: int) -> int:
    rule = broken_rule(value, *DOMAIN_IDS)
    if rule:
        raise ValueError(f'domain_id {rule}, got {value}')
    return value


def plan_from_args(args: argparse.Namespace, scenario=None) -> SwarmPlan:
    """Return the plan the options describe (``scenario``: theirs, when read already)."""
    names = tuple(n.strip() for n in args.names.split(',') if n.strip())
    scenario = scenario_from_args(args) if scenario is None else scenario
    given = given_settings(args, 'swarm_sim')
    if args.odom_rate is not None:
        given['odom_rate'] = 'swarm_sim option --odom-rate'
    return SwarmPlan(
        scenario=scenario, names=names,
        params_files=tuple(os.path.abspath(p) for p in args.params_file),
        clock_source='mobility' if args.processes else 'runner',
        real_time_factor=(args.real_time_factor or 1.0) if args.processes else 0.0,
        given=given, figure_format=args.format, plots=not args.no_plots,
        **({} if args.odom_rate is None else {'odom_rate': args.odom_rate}))


def _size_mode(args: argparse.Namespace, scenario) -> str:
    """Return how the run is made, as ``sim.sizes.COSTS`` names it (the engine auto picks)."""
    if args.processes:
        return 'processes'
    if args.engine == NODES:
        return 'nodes'
    from soliton_encirclement_ros.core.engines import choose_engine
    try:
        return choose_engine(scenario, args.engine)
    except ValueError:  # engine_problem says why, in one line
        return 'per-agent'


def write_run_area(area, out_dir: Path) -> Path:
    """Write the run's safety area (world ENU) into ``out_dir``; return its absolute path."""
    from soliton_encirclement_ros.core.area import write_area_file
    out_dir.mkdir(parents=True, exist_ok=True)
    path = (out_dir / 'safety_area.yaml').absolute()
    write_area_file(area, path)
    return path


def remove_run_area(plan: SwarmPlan, args: argparse.Namespace) -> None:
    """
    Remove what :func:`write_run_area` wrote for a run that then did not start.

    Its ``safety_area.yaml``, and ``--out`` itself if this run made it and it is empty: a run
    refused at start-up leaves ``--out`` as it found it.
    """
    out_dir = Path(args.out)
    if plan.safety_area_file:
        path = Path(plan.safety_area_file)
        if path == (out_dir / 'safety_area.yaml').absolute():
            path.unlink(missing_ok=True)
    if getattr(args, 'out_made', False):
        try:
            out_dir.rmdir()
        except OSError:  # not empty (or gone): what is there is not this run's to remove
            pass


def plan_summary(plan: SwarmPlan, args: argparse.Namespace,
                 interrupted_at: float | None = None) -> dict:
    """
    Return the run's parameters for summary.json: the scenario's, then the graph's.

    ``interrupted_at``: the sim time [s] a stopped run had reached (``report.INTERRUPTED_AT``).
    """
    outside = ({} if plan.scenario.area is None else {'outside_start': outside_starts(
        plan.scenario.area, plan.initial_positions(), list(plan.names))})
    return {
        **plan.scenario.as_dict(),
        **flown_summary(plan),
        **outside,
        'names': list(plan.names),
        'odom_rate': plan.odom_rate,
        'params_files': list(plan.params_files),
        'mode': 'processes' if args.processes else 'in-process',
        'engine': args.engine,
        **interrupted_params(interrupted_at),
    }


def flown_summary(plan: SwarmPlan) -> dict:
    """
    Return what the agents fly, after the params files, for summary.json.

    ``d_safe_flown`` the least ``d_safe`` any agent flies on the full ring, and
    ``d_safe_flown_by_agent`` each one's; ``controller`` the agents' gains when they all fly
    the same (a params file may set them), else the scenario's.
    """
    gains = agent_controllers(plan)
    n = plan.num_agents
    flown = {name: float(params.safety_distance(n)) for name, params in gains.items()}
    out = {'d_safe_flown': min(flown.values()), 'd_safe_flown_by_agent': flown}
    shared = {json.dumps(params.as_dict(), sort_keys=True) for params in gains.values()}
    if len(shared) == 1:
        out['controller'] = next(iter(gains.values())).as_dict()
    return out


def engine_problem(args: argparse.Namespace, plan: SwarmPlan) -> str:
    """Return why ``--engine`` (nodes too) cannot run with the other options (one line), or ''."""
    if args.engine == NODES:
        if plan.scenario.simulated_faults:
            return ('silent_failures, failed_agents, reset_jump and clock_step are simulated by '
                    'the engines: '
                    'add --engine auto (or run batch_sim); the node graph has real processes '
                    'to kill and clocks to step')
        return ''
    from soliton_encirclement_ros.core.engines import choose_engine
    given = {'--processes': args.processes, '--params-file': bool(args.params_file),
             '--odom-rate': args.odom_rate is not None}
    why = {'--processes': 'runs every agent in one node of this process',
           '--params-file': 'has no agent nodes to take --params-file (give the values as '
                            'options or in --scenario)',
           '--odom-rate': 'publishes every odometry once a control period'}
    for option, clash in given.items():
        if clash:
            return (f'--engine {args.engine} {why[option]}: drop {option}, or run the node '
                    'graph (--engine nodes)')
    try:
        choose_engine(plan.scenario, args.engine)
    except ValueError as error:
        return f'--engine: {error}'
    return ''


def _number(value, digits: int = 4, unit: str = '', none: str = 'n/a') -> str:
    """Format a metric for the summary table; None or NaN (nothing measured) prints ``none``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return none
    return f'{value:.{digits}f}{unit}'


def print_summary(summary: dict, out_dir: Path, stream=None) -> None:
    """Print the run's summary table to ``stream`` (None: ``sys.stdout`` as it is now)."""
    stream = sys.stdout if stream is None else stream
    rows = [('metric', 'final', 'mean')] + [
        (name, _number(summary['final'].get(name)), _number(summary['mean'].get(name)))
        for name in METRIC_NAMES]
    for row in rows:
        print(f'  {row[0]:<8}{row[1]:>10}{row[2]:>10}', file=stream)
    settle = summary.get('settle_time') or {}
    outside = (summary.get('params') or {}).get('outside_start') or []
    if outside:
        print(f'  settled: not reported: {", ".join(outside)} started outside the safety area '
              'and held', file=stream)
    else:
        print('  settled: ' + ', '.join(settled_text(name, settle.get(name))
                                        for name in ('E_gap', 'E_r')), file=stream)
    closest = summary.get('closest') or {}
    print(f'  closest approach: d_min {_number(closest.get("d_min"), 3, " m")} at '
          f'{_number(closest.get("time"), 2, " s")}', file=stream)
    print(f'  {separation_note(summary.get("params") or {})}', file=stream)
    print(f'  real-time factor {_number(summary.get("real_time_factor"), 2)}; outputs in '
          f'{out_dir}', file=stream)
    stopped = interrupted_text(summary.get('params') or {})
    if stopped:
        print(f'  {stopped}', file=stream)


def main(argv=None) -> int:
    # A stop before the run starts (the plan, the domain check, the graph's start) ends here in
    # one line, exit 130: nothing was run. Once the run is under way it writes what it gathered.
    stop = StopRequest('swarm_sim').install()
    thresholds = gc.get_threshold()
    gc.set_threshold(GC_THRESHOLD, *thresholds[1:])
    try:
        with stop.raising():
            args = parse_args(argv)
            if args.domain_id is not None:  # before any rclpy.init; --processes children too
                os.environ['ROS_DOMAIN_ID'] = str(args.domain_id)
            problem = domain_id_problem(os.environ.get('ROS_DOMAIN_ID'))
            if problem:  # rcl would answer it with a traceback, or take it silently
                print(f'swarm_sim: error: {problem}', file=sys.stderr)
                return EXIT_REFUSED
            prepared = _prepare(args)
        if isinstance(prepared, int):
            return prepared
        plan, claim = prepared
        try:
            status = _run(args, plan, claim.topic, stop)  # its start is under stop.raising()
        except Interrupted:
            remove_run_area(plan, args)  # stopped before it started: nothing of it is left
            raise
        finally:
            claim.close()  # the run has left the domain
        if status == EXIT_REFUSED:  # the graph refused to start: nothing of it is left
            remove_run_area(plan, args)
        return status
    except Interrupted:
        print('swarm_sim: interrupted before the run started; nothing was run', file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        stop.ignore_from_now()
        gc.set_threshold(*thresholds)  # a caller in this process keeps its own


def _prepare(args: argparse.Namespace):
    """
    Return the run's plan and its claim of the ROS domain, or the exit status of a refusal.

    A refusal is one line on stderr. The claim (``sim.domain.Claim``) is this run's
    announcement in its domain, made before the domain check looks: the caller closes it.
    """
    try:
        scenario = scenario_from_args(args)
        problem = size_problem(scenario, _size_mode(args, scenario))
        if problem:  # before anything of N agents is made: a size that cannot fit in memory
            raise ValueError(problem)
        plan = plan_from_args(args, scenario)
        specs = build_graph(plan)
        notes = precedence_notes(specs) + separation_notes(plan, specs)  # a bad file: one line
    except ValueError as error:
        print(f'swarm_sim: error: {error}', file=sys.stderr)
        return EXIT_REFUSED
    for note in notes:
        print(f'swarm_sim: {note}', file=sys.stderr)
    outside = outside_starts_text(plan.scenario.area, plan.initial_positions(), list(plan.names))
    if outside:
        print(f'swarm_sim: warning: {outside}', file=sys.stderr)
    out_dir = Path(args.out)
    problem = engine_problem(args, plan) or output_dir_problem(out_dir, '--out')
    if problem:
        print(f'swarm_sim: error: {problem}', file=sys.stderr)
        return EXIT_REFUSED
    problem = args.record and new_dir_problem(args.record, '--record')
    if problem:  # a bag that exists, or a place it cannot be written: before the run
        print(f'swarm_sim: error: {problem}', file=sys.stderr)
        return EXIT_REFUSED
    if args.foxglove is not None:
        try:
            import foxglove  # noqa: F401 - only to say now, in one line, that it is missing
        except ImportError:
            print('swarm_sim: error: --foxglove needs foxglove-sdk: pip install foxglove-sdk '
                  "(or the live extra: pip install -e '.[live]')", file=sys.stderr)
            return EXIT_REFUSED
    mode = _size_mode(args, plan.scenario)
    for note in (size_note(plan.scenario, mode), engine_note(plan.scenario, mode)):
        if note:  # accepted, and big or slow: what it will take, before it is built
            print(f'swarm_sim: {note}', file=sys.stderr, flush=True)
    from soliton_encirclement_ros.sim.domain import claim_domain
    claim, problem = claim_domain()
    if problem:
        print(f'swarm_sim: error: {problem}', file=sys.stderr)
        return EXIT_REFUSED
    try:
        claim.mark_running()
        args.out_made = not out_dir.exists()  # remove_run_area removes what this run made
        if plan.scenario.area is not None:  # the nodes read it from a file: the run's own copy
            plan = plan.with_changes(safety_area_file=str(write_run_area(plan.scenario.area,
                                                                         out_dir)))
    except BaseException:
        claim.close()
        raise
    return plan, claim


def _run(args: argparse.Namespace, plan: SwarmPlan, roster: str, stop: StopRequest) -> int:
    """Run ``plan`` (its nodes on the ``roster`` topic), print its summary; the exit status."""
    out_dir = Path(args.out)
    run = run_processes if args.processes else run_in_process
    try:
        summary, failure, incomplete, foreign, beside = run(plan, args, out_dir, stop, roster)
    except StartupError as error:
        print(f'swarm_sim: error: {error}', file=sys.stderr)
        return EXIT_REFUSED
    if summary is not None:
        print_summary(summary, out_dir)
        if summary.get('unmeasured'):
            print(f'swarm_sim: warning: {unmeasured_text(summary, args.real_time_factor or 1.0)}',
                  file=sys.stderr)
    if foreign:
        print(f'swarm_sim: error: {foreign_line(foreign)}', file=sys.stderr)
    if beside.found:
        print(f'swarm_sim: error: {beside_line(beside)}', file=sys.stderr)
    if failure:
        print(f'swarm_sim: error: {failure}' + (f' (outputs gathered so far in {out_dir})'
                                                if summary is not None else ''), file=sys.stderr)
    if incomplete:
        print(f'swarm_sim: error: outputs incomplete in {out_dir}: {incomplete}',
              file=sys.stderr)
    if incomplete or foreign or beside.found:
        return EXIT_INCOMPLETE
    if failure:
        return EXIT_FAILED
    if summary is None:
        print('swarm_sim: no metrics were produced (did the run start?)', file=sys.stderr)
        return EXIT_FAILED
    return 0


def mixed_summary(beside) -> dict:
    """
    Return what summary.json says of another swarm seen running beside this one, or {}.

    ``beside``: the run's ``sim.domain.GraphWatch``. When it found one, the outputs mix both
    graphs' messages: ``mixed_with`` names that swarm (``swarm``), when it was seen (``seen_at``,
    the sim time [s]) and the ROS domain they shared (``domain``), so that the outputs never
    read as this run's alone.
    """
    if not beside.found:
        return {}
    from soliton_encirclement_ros.sim.domain import domain_id
    return {'mixed_with': {'swarm': beside.found, 'seen_at': round(beside.at, 3),
                           'domain': domain_id()}}


def beside_line(beside) -> str:
    """
    Say in one line that another swarm ran beside this one, its messages not told apart.

    ``beside``: the run's ``sim.domain.GraphWatch``, which found it.
    """
    from ros_support import distro
    from soliton_encirclement_ros.sim.domain import domain_id
    return (f'another graph published in ROS domain {domain_id()} during this run: '
            f'{beside.found} (seen at t={beside.at:.1f} s), and rclpy on '
            f'{distro.current().name} does not say which graph sent a message, so the outputs '
            "mix both graphs' messages; run each swarm in a domain of its own (--domain-id N)")


def foreign_line(foreign: dict[str, tuple[int, str]]) -> str:
    """
    Say in one line that another graph published on this run's topics during it.

    ``foreign`` maps a topic to (messages dropped, the node that sent the first one).
    """
    from soliton_encirclement_ros.sim.domain import domain_id
    count = sum(n for n, _ in foreign.values())
    topics = ', '.join(f'{topic} from {who}' for topic, (_, who) in sorted(foreign.items()))
    return (f'another graph published in ROS domain {domain_id()} during this run: {count} '
            f'message(s) on {topics}, all ignored (the outputs are those of this run); run each '
            'swarm in a domain of its own (--domain-id N)')


@contextmanager
def progress_bar(duration: float, enabled: bool):
    """Return a progress callback taking the sim time in ns: a tqdm bar on stderr, or nothing."""
    if not enabled:
        yield lambda sim_time_ns: None
        return
    from tqdm import tqdm
    bar = tqdm(total=round(duration), unit='sim s', file=sys.stderr, dynamic_ncols=True,
               bar_format='{l_bar}{bar}| {n:.0f}/{total:.0f} sim s [{elapsed}<{remaining}]')
    try:
        yield lambda sim_time_ns: bar.update(sim_time_ns // 1_000_000_000 - bar.n)
    finally:
        bar.close()


class StartupError(Exception):
    """The graph could not start: bad parameters or a node refusing its configuration."""


def _interrupted(stop: StopRequest, graph, duration: float) -> float | None:
    """
    Return the sim time [s] a run stopped before ``duration`` reached, or None (it ran whole).

    Says so on stderr, and marks the bag being recorded (``report.INTERRUPTED_AT`` in its
    ``custom_data``), before the graph closes it.
    """
    sim_time = graph.sim_time
    if not stop.requested or sim_time >= duration:
        return None
    print(f'\nswarm_sim: interrupted at t={sim_time:g} s of {duration:g} s, writing what was '
          'gathered', file=sys.stderr)
    recorder = getattr(graph, 'recorder', None)
    if recorder is not None:
        recorder.set_custom_data(INTERRUPTED_AT, f'{sim_time:g}')
    return sim_time


def run_in_process(plan: SwarmPlan, args: argparse.Namespace, out_dir: Path, stop: StopRequest,
                   roster: str = ''):
    """
    Run in this process; returns (summary, failure, incomplete, foreign, beside).

    ``summary`` is None when nothing was measured; ``failure`` and ``incomplete`` are '' when
    all went well.

    ``foreign`` maps each topic on which another graph published to (messages, first sender):
    the lock-step dropped them. ``roster``: the run's claim topic (the graph is one
    participant); ``beside``: the ``sim.domain.GraphWatch`` that looked for another swarm
    running beside this one during the run, where rclpy cannot tell its messages apart.

    metrics_node streams metrics.csv and agents.csv into ``out_dir`` as the run goes (a killed
    run leaves them there); summary.json and the plots are added at the end, from those files
    (``report.write_streamed_outputs``: the memory this takes does not grow with the run).
    ``incomplete`` names every write that failed (a full disk: the streams, the bag, the
    figures); the run itself went on to its end.
    """
    from soliton_encirclement_ros.analysis.report import (
        OutputsIncomplete, write_streamed_outputs)
    from soliton_encirclement_ros.sim.lockstep import LockStepStalled

    from soliton_encirclement_ros.sim.domain import GraphWatch

    plan = plan.with_changes(metrics_output_dir=str(out_dir.absolute()))
    beside = GraphWatch(roster)
    try:
        with stop.raising():
            graph = _in_process_graph(plan, args, out_dir)
    except ValueError as error:  # the live view's LiveViewUnavailable too
        raise StartupError(str(error)) from None
    clear_previous_outputs(out_dir)  # metrics_node creates its files with its first row
    _say_live(graph.live)
    wall_start = time.perf_counter()
    failure = ''
    try:
        with progress_bar(plan.scenario.duration, not args.no_progress) as on_progress:
            graph.run(plan.scenario.duration, args.real_time_factor, on_progress,
                      should_stop=lambda: stop.requested, watch=beside)
    except LockStepStalled as error:
        failure = str(error)
    finally:
        stop.writing = True
        interrupted_at = _interrupted(stop, graph, plan.scenario.duration)
        wall = time.perf_counter() - wall_start
        sim_time = graph.sim_time
        trajectories = graph.trajectories()  # bounded; the tables are on disk
        radius = graph.radius  # the agents' (metrics_node says when it is not R)
        engine = getattr(graph, 'engine', NODES)  # the one auto chose
        area_margin = getattr(graph, 'area_margin', None)
        foreign = _foreign(graph.lockstep.foreign_count)
        graph.close()  # metrics.csv and agents.csv are closed: whole rows
        failed = tuple(graph.write_failures())  # the streams' and the bag's, after closing
    try:
        summary = write_streamed_outputs(
            out_dir, {**plan_summary(plan, args, interrupted_at), 'radius': radius,
                      'engine': engine},
            trajectories, sim_time / wall if wall > 0 else None, plots=not args.no_plots,
            fmt=args.format, area_margin=area_margin, incomplete=failed,
            extra=mixed_summary(beside))
    except OutputsIncomplete as error:
        return error.summary, failure, error.problem, foreign, beside
    return summary, failure, '', foreign, beside


def _foreign(count) -> dict[str, tuple[int, str]]:
    """Return ``{topic: (messages, first sender)}`` of a ``participants.ForeignCount``."""
    if count is None:
        return {}
    return {topic: (n, count.senders.get(topic, '?')) for topic, n in count.counts.items()}


def _in_process_graph(plan: SwarmPlan, args: argparse.Namespace, out_dir: Path):
    """Return the in-process graph of ``plan``: its nodes, or one node of ``--engine``'s arrays."""
    if args.engine == NODES:
        from soliton_encirclement_ros.sim.inprocess import InProcessGraph
        return InProcessGraph(plan, record=args.record, storage=args.storage, live=_live(args))
    from soliton_encirclement_ros.sim.engine_graph import EngineGraph
    return EngineGraph(plan, args.engine, out_dir, record=args.record, storage=args.storage,
                       live=_live(args))


def _live(args: argparse.Namespace) -> tuple[str, int] | None:
    return None if args.foxglove is None else (args.foxglove_host, args.foxglove)


def _say_live(relay) -> None:
    if relay is not None:
        print(f'swarm_sim: live view on {relay.url} ({len(relay.topics)} topics): in Foxglove, '
              'Open connection > Foxglove WebSocket; layout config/foxglove_layout.json',
              file=sys.stderr, flush=True)


def run_processes(plan: SwarmPlan, args: argparse.Namespace, out_dir: Path, stop: StopRequest,
                  roster: str = ''):
    """
    One process per node; returns (summary, failure naming the node, incomplete, foreign, beside).

    ``summary`` is None when nothing was measured; ``failure`` and ``incomplete`` are ''
    when all went well. metrics_node streams into ``out_dir`` from the start (a killed run
    leaves its rows there); what it did not finish is completed at the end (see
    :func:`_collect_process_outputs`); ``incomplete`` says what is missing. The nodes join the
    ``roster`` topic and hear only its members; ``foreign``: what another graph sent on the
    swarm topics (as :func:`run_in_process`'s), dropped; ``beside``: as :func:`run_in_process`'s.
    """
    from soliton_encirclement_ros.sim.domain import GraphWatch
    from soliton_encirclement_ros.sim.inprocess import check_plan
    from soliton_encirclement_ros.sim.processes import ChildFailed, ProcessGraph

    try:
        with stop.raising():
            check_plan(plan)
    except ValueError as error:
        raise StartupError(str(error)) from None
    plan = plan.with_changes(metrics_output_dir=str(out_dir.absolute()))
    failure = ''
    clear_previous_outputs(out_dir)  # the plan was checked: the run starts now
    try:
        with stop.raising():
            graph = ProcessGraph(plan, record=args.record, storage=args.storage,
                                 live=_live(args), roster=roster)
    except (OSError, ValueError) as error:  # the live view's LiveViewUnavailable too
        raise StartupError(str(error)) from None
    _say_live(graph.live)
    beside = GraphWatch(graph.roster_topic)
    wall_start = time.perf_counter()
    try:
        with progress_bar(plan.scenario.duration, not args.no_progress) as on_progress:
            graph.run(plan.scenario.duration, on_progress, should_stop=lambda: stop.requested,
                      watch=beside)
    except ChildFailed as error:
        failure = str(error)
    finally:
        stop.writing = True
        interrupted_at = _interrupted(stop, graph, plan.scenario.duration)
        wall = time.perf_counter() - wall_start
        sim_time = graph.sim_time
        closing = graph.close()  # always: every node stops, the bag is closed
        failure = failure or closing
        summary, incomplete = _collect_process_outputs(  # whatever happened
            out_dir, plan, args,
            RunTiming(sim_time / wall if wall > 0 else None, sim_time, wall, interrupted_at),
            mixed_summary(beside))
        incomplete = '; '.join(filter(None, [*graph.write_failures(), incomplete]))
    return summary, failure, incomplete, _foreign(graph.foreign_count), beside


class RunTiming(NamedTuple):
    real_time_factor: float | None
    sim_time: float
    wall_time: float
    interrupted_at: float | None = None  # the sim time [s] a stopped run reached


def _collect_process_outputs(written: Path, plan: SwarmPlan, args: argparse.Namespace,
                             timing: RunTiming, mixed: dict | None = None):
    """
    Complete what metrics_node wrote into ``written`` (``--out``) with the run's parameters.

    Returns (summary or None, what is incomplete or ''). The streamed metrics.csv and agents.csv
    stay whatever happened. If metrics_node did not write summary.json (killed, stopped,
    too slow), it and the plots are recomputed from those CSVs by the code metrics_node uses
    (``report.write_streamed_outputs``); trajectories.png, drawn from positions the CSVs do not
    hold, is then missing. summary.json keeps the radius metrics_node measured against.
    With ``--no-plots``, metrics_node draws none (``plots`` false). summary.json names the
    spans the streamed metrics.csv misses (:func:`_unmeasured`) and holds ``mixed``, what
    :func:`mixed_summary` returned.
    """
    from soliton_encirclement_ros.analysis.outputs import replace_text, write_problem
    from soliton_encirclement_ros.analysis.report import (
        json_text, OutputsIncomplete, write_streamed_outputs)
    from soliton_encirclement_ros.analysis.stream import last_row, WRITING_MARKER
    if not written.is_dir():
        return None, ''
    # What a write cut short leaves behind: the marker and the staging directories.
    (written / WRITING_MARKER).unlink(missing_ok=True)
    for staging in written.glob('.outputs-*'):
        shutil.rmtree(staging, ignore_errors=True)
    summary, incomplete = None, []
    unmeasured, problem = _unmeasured(written, plan, timing)  # into summary.json's one write
    extra = {**({'unmeasured': unmeasured} if unmeasured else {}), **(mixed or {})}
    if (written / 'summary.json').exists():
        summary = json.loads((written / 'summary.json').read_text())
        incomplete += summary.get('outputs_incomplete') or []  # what metrics_node said
        summary['real_time_factor'] = timing.real_time_factor
        measured = (summary.get('params') or {}).get('radius')
        summary['params'] = {**plan_summary(plan, args, timing.interrupted_at),
                             **({} if measured is None else {'radius': measured})}
        summary.update(extra)
        try:
            replace_text(written / 'summary.json', json_text(summary))
        except OSError as error:  # metrics_node's summary.json stays as it wrote it
            incomplete.append(write_problem('summary.json not completed with the parameters '
                                            'of the run', error))
        missing = [] if args.no_plots else [
            name for name in (f'{figure}.{args.format}' for figure in FIGURES)
            if not (written / name).exists()]
        if missing:
            incomplete.append(f'figures missing: {", ".join(missing)} (metrics_node could not '
                              'write them: see its log line)')
    elif (written / 'metrics.csv').exists():
        try:
            params = plan_summary(plan, args, timing.interrupted_at)
            summary = write_streamed_outputs(written, params, None, timing.real_time_factor,
                                             plots=not args.no_plots, fmt=args.format,
                                             extra=extra)
        except OutputsIncomplete as error:
            summary = error.summary
            incomplete.append(f'metrics_node did not write its outputs, nor could they be '
                              f'recomputed: {error.problem}')
        else:
            if summary is not None:
                last = last_row(written / 'metrics.csv', len(METRIC_NAMES) + 1)
                recomputed = ('summary.json was' if args.no_plots
                              else 'summary.json and the plots were')
                incomplete.append(
                    f'metrics_node did not write its outputs; {recomputed} recomputed from the '
                    f'streamed metrics.csv (up to t={last[0]:.2f} s)'
                    + ('' if args.no_plots else ', trajectories.png is missing'))
    if summary is not None and problem:
        incomplete.append(problem)
    if args.no_plots:  # what a metrics_node that draws them anyway left
        remove_figures(written)
    return summary, '; '.join(incomplete)


def _unmeasured(written: Path, plan: SwarmPlan, timing: RunTiming) -> tuple[dict | None, str]:
    """
    Return the spans of the run the streamed metrics.csv misses (summary.json's ``unmeasured``).

    metrics_node writes a row every metrics period in which it hears the target and an agent,
    on its clock: a node starved of CPU falls behind the clock, which runs on, and measures
    nothing meanwhile. Returns (``{spans, count, seconds}``, or None when no span is missed or
    there is no metrics.csv; what could not be read, or '').
    """
    from soliton_encirclement_ros.analysis.stream import unmeasured_spans
    if not (written / 'metrics.csv').exists():
        return None, ''
    scenario = plan.scenario
    reached = timing.sim_time if timing.interrupted_at is None else timing.interrupted_at
    longest = max(UNMEASURED_GAP, 10 * (scenario.metrics_period or scenario.control_period))
    try:
        spans = unmeasured_spans(written / 'metrics.csv', len(METRIC_NAMES) + 1,
                                 min(scenario.duration, reached), longest)
    except (OSError, ValueError) as error:
        return None, ('summary.json does not say which spans the metrics miss: metrics.csv '
                      f'could not be read ({getattr(error, "strerror", None) or error})')
    if not spans:
        return None, ''
    return {'spans': [[round(start, 3), round(end, 3)]
                      for start, end in spans[:UNMEASURED_LISTED]],
            'count': len(spans), 'seconds': round(sum(end - start for start, end in spans), 3)}, ''


def unmeasured_text(summary: dict, asked: float) -> str:
    """Say which spans of the run the metrics miss (``summary['unmeasured']``), and why."""
    gaps = summary['unmeasured']
    listed = ', '.join(f'{start:.2f}-{end:.2f} s' for start, end in gaps['spans'][:3])
    more = f' and {gaps["count"] - 3} more' if gaps['count'] > 3 else ''
    text = (f'the metrics miss t={listed}{more} ({gaps["seconds"]:.2f} s in all, summary.json '
            "'unmeasured'): metrics_node heard no clock, no target or no agent there")
    reached = summary.get('real_time_factor')
    if reached is not None and reached < 0.9 * asked:
        text += (f'; the run kept a real-time factor of {reached:.2f} of the {asked:g} asked: '
                 'a lower --real-time-factor lets the nodes keep up')
    return text


def remove_figures(out_dir: Path) -> None:
    """Remove the figures of a run from ``out_dir`` (what metrics_node drew, --no-plots)."""
    for name in FIGURES:
        for fmt in FIGURE_FORMATS:
            (out_dir / f'{name}.{fmt}').unlink(missing_ok=True)


if __name__ == '__main__':
    sys.exit(main())
