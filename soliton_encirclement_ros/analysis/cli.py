"""
``analyze_run``: metrics, plots, trajectories, animation and summary of recorded runs.

    analyze_run BAG [BAG2] [--out DIR] [--agent-pattern REGEX] [--target-topic T] [--radius R]
                [--format png|pdf|svg] [--report] [--compare SIM_BAG] [--d-safe M]
                [--safety-area FILE]

One bag: outputs go into DIR (default: NAME_analysis beside the bag, runs/flight1_analysis for
runs/flight1). Two bags: each bag's outputs go into DIR/<bag name> (default DIR: beside the
first bag), and DIR/comparison.png overlays their metric curves. ``--report`` adds
DIR/report.html, one self-contained file: the run, the metrics summary, the link figures per
sender and per receiver, the vehicles' timeline, the safety margins and every figure
(analysis/flight.py). A recorded PX4 flight (its bridges' statuses on /diagnostics) is judged
over its engaged phase (``flight.engaged_phase``: final values, means and settle times; the
closest approach is the whole recording's); a simulation over the whole run. ``--compare
SIM_BAG`` analyses SIM_BAG as the second bag and also writes DIR/comparison.html, the two runs'
metrics, links and margins side by side. Exit status: 0 done, 1 unusable input (one line on
stderr: not a bag, no matching topic, a topic of another type), 2 bad command line, 3 a bag was
truncated or corrupt and only its intact part was analysed (or, cut or damaged before its first
message, nothing). A bag whose metadata alone is damaged, every message read, is analysed whole
with a warning saying so (exit 0). Agent states of a layout this version does not read are set
aside with a warning: the odometry alone gives every metric.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import sys

import numpy as np

from ros_support.signals import EXIT_INTERRUPTED, Interrupted, StopRequest
from ros_support.validation import number, OneLineParser
from soliton_encirclement_ros.analysis import flight_report, plots
from soliton_encirclement_ros.analysis.animation import animation_file, write_animation
from soliton_encirclement_ros.analysis.bag_reader import Bag, BagError, TruncatedBagError
from soliton_encirclement_ros.analysis.flight import BRIDGES, DEFAULT_D_SAFE, engaged_phases
from soliton_encirclement_ros.analysis.recompute import (
    agent_rows, DEFAULT_AGENT_PATTERN, DEFAULT_PERIOD, DEFAULT_RADIUS, DEFAULT_STATE_TIMEOUT,
    DEFAULT_TARGET_TOPIC, load_run, metric_times, recompute_metrics, RunDataError)
from soliton_encirclement_ros.analysis.report import (
    INTERRUPTED_AT, interrupted_params, OutputsIncomplete, RunResult, write_run_outputs)
from soliton_encirclement_ros.core.area import load_area_file
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, settled_text
from soliton_encirclement_ros.provenance import code_identity, describe

EXIT_ERROR, EXIT_TRUNCATED = 1, 3
MAX_FRAMES = 200


def analyse_bag(bag, out_dir: Path, *, agent_pattern: str = DEFAULT_AGENT_PATTERN,
                target_topic: str = DEFAULT_TARGET_TOPIC, radius: float = DEFAULT_RADIUS,
                period: float = DEFAULT_PERIOD, state_timeout: float = DEFAULT_STATE_TIMEOUT,
                max_frames: int = MAX_FRAMES, warn=lambda text: None, fmt: str = 'png'
                ) -> tuple[np.ndarray, dict, str | None]:
    """
    Write every output of one bag into ``out_dir``; return (metrics, summary, truncated).

    Times are seconds since the first message of the bag. ``warn`` gets each warning (a part
    of the bag set aside). Figures are ``fmt`` files (png, pdf or svg); the animation is an
    MP4 when ffmpeg is on the PATH, a GIF otherwise.
    """
    return _analyse(bag, out_dir, agent_pattern=agent_pattern, target_topic=target_topic,
                    radius=radius, period=period, state_timeout=state_timeout,
                    max_frames=max_frames, warn=warn, fmt=fmt)[:3]


def _analyse(bag, out_dir: Path, *, agent_pattern, target_topic, radius, period, state_timeout,
             max_frames, warn, fmt):
    """
    Do :func:`analyse_bag`; return its results and what the flight report reads on.

    Also the run read, its time origin (bag clock, s), its /diagnostics statuses (None: the bag
    has none) and the engaged phases judged (the first: summary.json's top level).
    """
    run = load_run(bag, agent_pattern, target_topic)
    origin = _make_relative(run)
    for text in run.warnings:
        warn(text)
    times = metric_times(run, period)
    metrics, live = recompute_metrics(run, times, radius, state_timeout)
    statuses = flight_report.read_statuses(bag, origin)
    phases = engaged_phases(statuses or [], float(times[0]), float(times[-1]))
    phase = phases[0]  # summary.json's top level; each is judged in its 'phases'
    trajectories = {name: np.column_stack((track.t, track.position[:, :2]))
                    for name, track in run.agents.items()}
    trajectories['target'] = np.column_stack((run.target.t, run.target.position[:, :2]))
    params = {
        'bag': str(bag), 'radius': radius, 'agent_pattern': agent_pattern,
        'target_topic': target_topic, 'metrics_period': period, 'state_timeout': state_timeout,
        'liveness_from_agent_states': run.states is not None, 'agents': list(run.agents),
        'agent_ids': run.agent_ids, 'truncated': run.truncated, 'corrupt': run.corrupt,
        'metadata_damaged': run.metadata_damaged, 'warnings': list(run.warnings),
        'bag_custom_data': run.custom_data,
        **_interruption(run.custom_data),
        'analysed_with': code_identity(),
    }
    result = RunResult(metrics, agent_rows(run), params, trajectories, judged=phase.as_dict(),
                       phases=[p.as_dict() for p in phases])
    summary = write_run_outputs(out_dir, result, fmt=fmt)
    if max_frames > 0:
        agent_xy = np.stack([_positions_or_nan(track, times) for track in run.agents.values()],
                            axis=1)
        name = animation_file()
        staging = out_dir / f'.{name}'
        ids = [run.agent_ids.get(agent, agent) for agent in run.agents]
        try:
            write_animation(staging, times, agent_xy, live, run.target.at(times)[0][:, :2],
                            radius, max_frames, labels=ids, title=plots.run_title(params))
            os.replace(staging, out_dir / name)
        finally:
            staging.unlink(missing_ok=True)
    return metrics, summary, run.truncated, run, origin, statuses, phases


def _interruption(custom_data: dict) -> dict:
    """Return ``{INTERRUPTED_AT: t}`` when the bag says its run was stopped at t [s], else {}."""
    try:
        return interrupted_params(float(custom_data[INTERRUPTED_AT]))
    except (KeyError, ValueError):
        return {}


def _make_relative(run) -> float:
    """Count the run's times from its first odometry or agent state (``load_run``'s rule)."""
    tables = [track.t for track in [*run.agents.values(), run.target] if len(track.t)]
    if run.states is not None and len(run.states):
        tables.append(run.states[:, 0])
    origin = float(min(t.min() for t in tables))
    for track in [*run.agents.values(), run.target]:
        track.t = track.t - origin
    if run.states is not None:
        run.states[:, 0] -= origin
    return origin


def main(argv: list[str] | None = None) -> int:
    stop = StopRequest('analyze_run').install()
    try:
        with stop.raising():
            return _main(argv)
    except Interrupted:
        print('analyze_run: interrupted; the outputs written so far are incomplete',
              file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        stop.ignore_from_now()


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    bags = list(args.bags)
    if args.compare is not None:
        if len(bags) != 1:
            parser.error(f'argument --compare: compares one BAG with SIM_BAG, got {len(bags)} '
                         'BAGs')
        bags.append(args.compare)
    area = None
    if args.safety_area is not None:
        try:
            area = load_area_file(args.safety_area)
        except (OSError, ValueError, TypeError, KeyError) as err:
            reason = ' '.join(str(getattr(err, 'strerror', None) or err).split())
            parser.error(f'argument --safety-area: {args.safety_area!r}: {reason}')
    flights = args.report or args.compare is not None
    out = Path(args.out) if args.out is not None else default_out(bags[0])
    labels = _labels(bags)
    runs, truncated, corrupt, reports = {}, [], [], {}
    try:
        for bag in bags:  # each is a readable bag before any is analysed (a wrong --compare)
            Bag(Path(bag)).close()
        for bag, label in zip(bags, labels):
            bag_out = out if len(bags) == 1 else out / label
            metrics, summary, cut, run, origin, statuses, phases = _analyse(
                Path(bag), bag_out, agent_pattern=args.agent_pattern,
                target_topic=args.target_topic, radius=args.radius, period=args.period,
                state_timeout=args.state_timeout, max_frames=args.max_frames,
                warn=lambda text: print(f'analyze_run: warning: {bag}: {text}', file=sys.stderr),
                fmt=args.format)
            runs[label] = metrics
            described = summary['params'].get('bag_custom_data')
            print(f'{bag}: recorded with ' + (describe(described) if described else
                                              'no description (custom_data) in the bag'))
            print(f'{bag}: outputs in {bag_out}; ' + _summary_line(summary))
            if cut:
                truncated.append(f'{bag}: {cut}')
            if run.corrupt:
                corrupt.append(f'{bag}: {run.corrupt}')
            if run.metadata_damaged:
                print(f'analyze_run: warning: {bag}: {run.metadata_damaged}', file=sys.stderr)
            stopped = flight_report.recorded_interruption(run.custom_data)
            if stopped:
                print(f'analyze_run: warning: {bag}: the recorded run was {stopped}',
                      file=sys.stderr)
            if flights:
                data = flight_report.flight_data(Path(bag), run, origin, d_safe=args.d_safe,
                                                 area=area, area_file=args.safety_area,
                                                 statuses=statuses, phase=phases[0],
                                                 phases=phases)
                if data.missing():
                    print(f'analyze_run: {data.missing()}', file=sys.stderr)
                reports[label] = (data, summary)
                if args.report:
                    report = flight_report.write_report(bag_out, data, summary, args.format)
                    print(f'{bag}: flight report {report}')
        if len(runs) > 1:
            comparison = out / plots.figure_name('comparison', args.format)
            plots.dashboard(comparison, runs, 'comparison: ' + ' vs '.join(runs))
            print(f'comparison: {comparison}')
            if reports:
                page = flight_report.write_comparison(out / flight_report.COMPARISON_FILE,
                                                      reports)
                print(f'comparison: {page}')
    except TruncatedBagError as err:  # cut before anything could be analysed
        print(f'analyze_run: error: {err}', file=sys.stderr)
        return EXIT_TRUNCATED
    except OutputsIncomplete as err:  # a full or read-only disk
        print(f'analyze_run: error: outputs incomplete in {out}: {err.problem}', file=sys.stderr)
        return EXIT_TRUNCATED
    except (BagError, RunDataError) as err:
        print(f'analyze_run: error: {err}', file=sys.stderr)
        return EXIT_ERROR
    except OSError as err:
        print(f'analyze_run: error: {err.strerror or err}: {err.filename or ""}', file=sys.stderr)
        return EXIT_ERROR
    for note in corrupt:
        print(f'analyze_run: warning: corrupt bag, damaged parts dropped, analysed the intact '
              f'data only ({note})', file=sys.stderr)
    for note in truncated:
        print(f'analyze_run: warning: truncated bag, analysed the readable part only ({note})',
              file=sys.stderr)
    return EXIT_TRUNCATED if truncated or corrupt else 0


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog='analyze_run', description=__doc__.split('\n')[0],
        epilog='Exit status: 0 done, 1 unusable input, 2 bad command line, '
               '3 truncated or corrupt bag analysed in part, 130 interrupted.')
    parser.add_argument('bags', nargs='+', metavar='BAG',
                        help='rosbag2 directory or .mcap/.db3 file; give two to compare')
    parser.add_argument('--out', metavar='DIR',
                        help='output directory (default: BAG_analysis next to the first bag, '
                             'e.g. runs/flight1_analysis for runs/flight1)')
    parser.add_argument('--agent-pattern', default=DEFAULT_AGENT_PATTERN,
                        help='regular expression for agent odometry topics '
                             '(default %(default)s; the target topic is excluded)')
    parser.add_argument('--target-topic', default=DEFAULT_TARGET_TOPIC,
                        help='target odometry topic (default %(default)s)')
    parser.add_argument('--radius', type=number(0, strict=True), default=DEFAULT_RADIUS,
                        help='desired encirclement radius R [m] (default %(default)s)')
    parser.add_argument('--period', type=number(0, strict=True), default=DEFAULT_PERIOD,
                        help='metrics time step [s] (default %(default)s)')
    parser.add_argument('--state-timeout', type=number(0, strict=True),
                        default=DEFAULT_STATE_TIMEOUT,
                        help='an agent whose last /swarm/agent_states message is older than '
                             'this [s] is failed (default %(default)s)')
    parser.add_argument('--max-frames', type=number(0, integer=True), default=MAX_FRAMES,
                        help='at most this many animation frames (3 sim-s per second of video '
                             'at 10 frames/s), 0 for no animation (default %(default)s)')
    parser.add_argument('--format', choices=plots.FORMATS, default='png',
                        help='figure format: png, or vector pdf/svg for papers '
                             '(default %(default)s)')
    parser.add_argument('--report', action='store_true',
                        help='also write DIR/report.html: one self-contained HTML file with '
                             'the run, metrics, link figures, vehicle timeline, safety margins '
                             'and figures')
    parser.add_argument('--compare', metavar='SIM_BAG',
                        help='a second bag (e.g. the simulation of this flight): both are '
                             'analysed and DIR/comparison.html puts their metrics, links and '
                             'margins side by side')
    parser.add_argument('--d-safe', type=number(0, strict=True), default=None,
                        help="separation for the safety margins [m] (default: the bag's "
                             f'scenario controller d_safe, else {DEFAULT_D_SAFE})')
    parser.add_argument('--safety-area', metavar='FILE',
                        help='safety area YAML (as swarm_sim --safety-area): the report lists '
                             "each agent's margin to it")
    return parser


def default_out(bag: str) -> Path:
    """Return the output directory when none is given: ``NAME_analysis`` beside the bag."""
    path = Path(bag)
    name = path.name if path.is_dir() else path.stem
    return path.parent / f'{name or path.resolve().name}_analysis'


def _labels(bags: list[str]) -> list[str]:
    names = [Path(bag).resolve().name for bag in bags]
    if len(set(names)) < len(names):
        names = [f'{i + 1}_{name}' for i, name in enumerate(names)]
    return names


def _positions_or_nan(track, times: np.ndarray) -> np.ndarray:
    position, _, valid = track.at(times)
    return np.where(valid[:, None], position[:, :2], np.nan)


def _summary_line(summary: dict) -> str:
    final = ', '.join(f'{name}={summary["final"][name]:.3g}' for name in METRIC_NAMES)
    settle = ', '.join(settled_text(name, t) for name, t in summary['settle_time'].items())
    closest = summary['closest']
    phase = summary.get('phase') or {}
    judged = f'judged {phase["text"]}; ' if phase.get('rule') == BRIDGES else ''
    phases = summary.get('phases') or []
    each = '' if len(phases) < 2 else '; ' + '; '.join(
        f'engaged phase {p["number"]} of {p["count"]} ({p["start"]:.2f}–{p["end"]:.2f} s): '
        + ', '.join(settled_text(name, t) for name, t in p['settle_time'].items())
        for p in phases)
    return (f'{judged}final {final}; {settle}; closest approach d_min={closest["d_min"]:.3g} m '
            f'at {closest["time"]:.2f} s{each}')


if __name__ == '__main__':
    sys.exit(main())
