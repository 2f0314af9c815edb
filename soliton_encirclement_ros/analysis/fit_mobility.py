"""
``fit_mobility``: identify the velocity model's limits from a recorded flight.

    fit_mobility BAG --out DIR [--vehicles uav1,uav2] [--axes xy,z] [--from T0 --to T1]

Reads a rosbag2 (MCAP or sqlite3) with, per vehicle, the commanded velocity and the odometry:
this package's ``/<name>/cmd_vel`` (Twist or TwistStamped, world ENU) and ``/<name>/odom``
(Odometry, twist in the body frame), or a PX4 flight's ``[/<ns>]/fmu/in/trajectory_setpoint``
and ``[/<ns>]/fmu/out/vehicle_odometry`` (NED, read with the bridge's frame conversions; their
message definitions come from the bag, so no px4_msgs is needed). Times are the bag's log times
(a constant latency ends up in the fitted delay). The fit itself is
:mod:`velocity_mobility_ros.core.fit`: per vehicle and, with several, pooled.

Writes into DIR: ``mobility_fit.yaml`` (the identified limits, for ``mobility_node
--params-file``, ``swarm_sim --params-file`` and, as ``vehicle:`` overrides, ``--scenario`` of
``batch_sim``/``swarm_sim`` or a sweep's ``scenario:``), ``fit.json``, ``fit_report.png``
(measured against simulated velocity before and after the fit, with residuals), and prints a
one-screen summary. A damaged part of the bag is dropped, never fitted (``analysis.bag_reader``).
Exit status: 0 done, 1 unusable input (one line), 2 bad command line, 3 a truncated or corrupt
bag whose intact part was fitted (one line says what was dropped, and where), 130 stopped by
SIGINT or SIGTERM (one line).
"""
from __future__ import annotations

import argparse
from pathlib import Path
import re
import sys

import numpy as np

from ros_support.signals import EXIT_INTERRUPTED, Interrupted, StopRequest
from ros_support.validation import number, OneLineParser
from velocity_mobility_ros.core.fit import (
    AXES, COVERAGE_Z, DEFAULT_HOLDOUT, DELAY, fit, FitError, FitResult, Flight, PARAM_NAMES,
    predict, UNITS)
from velocity_mobility_ros.core.vehicle import VehicleParams

EXIT_ERROR = 1
EXIT_PARTIAL = 3  # a truncated or corrupt bag: its intact part was fitted
YAML_FILE, JSON_FILE, REPORT_FILE = 'mobility_fit.yaml', 'fit.json', 'fit_report.png'
ROS_CMD = re.compile(r'^/(?P<name>.+)/cmd_vel$')
ROS_ODOM = re.compile(r'^/(?P<name>.+)/odom$')
PX4_CMD = re.compile(r'^(?:/(?P<name>.+))?/fmu/in/trajectory_setpoint(?:_v\d+)?$')
PX4_ODOM = re.compile(r'^(?:/(?P<name>.+))?/fmu/out/vehicle_odometry(?:_v\d+)?$')
TWIST_TYPES = ('geometry_msgs/msg/Twist', 'geometry_msgs/msg/TwistStamped')
ODOM_TYPE = 'nav_msgs/msg/Odometry'
PX4_CMD_TYPE = 'px4_msgs/msg/TrajectorySetpoint'
PX4_ODOM_TYPE = 'px4_msgs/msg/VehicleOdometry'
PX4_VEHICLE = 'px4'  # the name of a PX4 vehicle without a namespace (/fmu/...)
# Nodes of mobility_fit.yaml: mobility_node, swarm_sim's swarm mobility node, and the agents
# (their command clamp is the vehicle's speed limit, as Scenario.controller_params has it).
MOBILITY_NODES = ('/**/mobility', '/swarm_mobility')
AGENT_NODE = '/**/agent'
AGENT_PARAMS = ('max_speed_xy', 'max_speed_z')


INTERVAL_NOTE = (
    f'parameters.*.interval = value -+ ({COVERAGE_Z:g} std + systematic): std is robust to '
    'residuals correlated in time (Newey-West over 2 s of scores), systematic the model '
    'mismatch (half a step for the delay, 2 % of the value otherwise); it covered the truth '
    'on independent continuous-time flights (docs/analyse/fit-mobility.md). std_white is the old '
    'white-noise standard deviation, far too small.')


class InputError(ValueError):
    """A recording that cannot be fitted; the message is one line."""


def _topic_pairs(topics: dict[str, str]) -> dict[str, tuple[str, str, str]]:
    """Vehicle name -> (command topic, odometry topic, 'ros' | 'px4')."""
    pairs = {}
    for kind, cmd_re, odom_re, cmd_types, odom_type in (
            ('ros', ROS_CMD, ROS_ODOM, TWIST_TYPES, ODOM_TYPE),
            ('px4', PX4_CMD, PX4_ODOM, (PX4_CMD_TYPE,), PX4_ODOM_TYPE)):
        cmds = {(m.group('name') or PX4_VEHICLE): topic for topic, typ in topics.items()
                if (m := cmd_re.match(topic)) and typ in cmd_types}
        odoms = {(m.group('name') or PX4_VEHICLE): topic for topic, typ in topics.items()
                 if (m := odom_re.match(topic)) and typ == odom_type}
        for name in sorted(set(cmds) & set(odoms)):
            pairs[name] = (cmds[name], odoms[name], kind)
    return pairs


def read_flights(bag_path, vehicles=None) -> tuple[dict[str, Flight], dict]:
    """
    Every vehicle's :class:`Flight` in the bag (times in s from its first message read).

    Raises :class:`InputError` (one line) for a bag without a command topic or odometry.
    """
    from soliton_encirclement_ros.analysis.bag_reader import Bag
    from soliton_encirclement_ros.analysis.bag_scan import implausible

    with Bag(bag_path) as bag:
        pairs = _topic_pairs(bag.topics)
        if not pairs:
            has_cmd = [t for t in bag.topics
                       if ROS_CMD.match(t) or PX4_CMD.match(t)]
            what = ('no odometry topic for ' + ', '.join(has_cmd) if has_cmd else
                    'no command topic')
            raise InputError(
                f'{bag_path}: {what} (need /<name>/cmd_vel Twist with /<name>/odom Odometry, '
                'or /fmu/in/trajectory_setpoint with /fmu/out/vehicle_odometry); topics: '
                + (', '.join(sorted(bag.topics)) or 'none'))
        if vehicles:
            missing = [v for v in vehicles if v not in pairs]
            if missing:
                raise InputError(f'--vehicles: {", ".join(missing)} not in {bag_path} '
                                 f'(vehicles with commands and odometry: {", ".join(pairs)})')
            pairs = {v: pairs[v] for v in vehicles}
        data = {name: ([], [], [], []) for name in pairs}
        by_topic = {}
        for name, (cmd, odom, kind) in pairs.items():
            by_topic[cmd] = (name, 'cmd', kind)
            by_topic[odom] = (name, 'odom', kind)
        skipped = {}
        first_ns = None
        for topic, t_ns, msg in bag.messages(by_topic):
            first_ns = t_ns if first_ns is None else min(first_ns, t_ns)
            name, what, kind = by_topic[topic]
            try:
                v = _velocity(msg, what, kind)
            except ValueError:
                v = None
            if v is None or not np.all(np.isfinite(v)):
                skipped[topic] = skipped.get(topic, 0) + 1
                continue
            if implausible(v):  # a damaged message that still decoded
                bag.set_aside(topic, t_ns, 'implausible')
                continue
            slot = 0 if what == 'cmd' else 2
            data[name][slot].append(t_ns)
            data[name][slot + 1].append(v)
        info = {'topics': {n: {'command': p[0], 'odometry': p[1], 'kind': p[2]}
                           for n, p in pairs.items()},
                'skipped_messages': skipped, 'truncated': bag.truncated, 'corrupt': bag.corrupt,
                'metadata_damaged': bag.metadata_damaged}
    flights = {}
    for name, (cmd_ns, cmd_v, odom_ns, odom_v) in data.items():
        if not cmd_ns or not odom_ns:
            raise InputError(f'{bag_path}: {name} has {len(cmd_ns)} usable command and '
                             f'{len(odom_ns)} usable odometry messages: nothing to fit')
        flights[name] = Flight(name, _seconds(cmd_ns, first_ns), np.array(cmd_v, dtype=float),
                               _seconds(odom_ns, first_ns), np.array(odom_v, dtype=float))
    return flights, info


def _seconds(ns: list[int], origin: int) -> np.ndarray:
    order = np.argsort(np.asarray(ns, dtype=np.int64), kind='stable')
    return (np.asarray(ns, dtype=np.int64)[order] - origin) * 1e-9


def _velocity(msg, what: str, kind: str):
    """World ENU velocity (3,) of one message, or None."""
    from transforms3d.quaternions import quat2mat

    if kind == 'ros':
        if what == 'cmd':
            twist = getattr(msg, 'twist', msg)  # TwistStamped or Twist
            return np.array([twist.linear.x, twist.linear.y, twist.linear.z], dtype=float)
        q = msg.pose.pose.orientation
        lin = msg.twist.twist.linear
        body = np.array([lin.x, lin.y, lin.z], dtype=float)
        quat = np.array([q.w, q.x, q.y, q.z], dtype=float)
        if not np.isfinite(quat).all() or np.linalg.norm(quat) < 1e-6:
            return None
        return quat2mat(quat / np.linalg.norm(quat)) @ body  # twist is in the body frame
    from soliton_encirclement_ros.px4.frames import ned_to_enu, vehicle_odometry_to_enu
    if what == 'cmd':
        return ned_to_enu(np.asarray(msg.velocity, dtype=float))
    odom = vehicle_odometry_to_enu(int(msg.pose_frame), msg.position, msg.q,
                                   int(msg.velocity_frame), msg.velocity, msg.angular_velocity)
    return quat2mat(odom.orientation) @ odom.linear_velocity


def fit_all(flights: dict[str, Flight], axes, start: VehicleParams,
            holdout: float) -> tuple[dict[str, FitResult], FitResult | None, dict[str, str]]:
    """Each vehicle's fit, the pooled one (two or more vehicles fitted), and vehicles skipped."""
    per_vehicle, skipped = {}, {}
    for name, flight in flights.items():
        try:
            per_vehicle[name] = fit([flight], axes, start=start, holdout=holdout)
        except FitError as err:
            skipped[name] = str(err)
    if not per_vehicle:
        raise InputError('; '.join(skipped.values()))
    pooled = None
    if len(per_vehicle) > 1:
        pooled = fit([flights[n] for n in per_vehicle], axes, start=start, holdout=holdout)
    return per_vehicle, pooled, skipped


def params_yaml(result: FitResult, source: str) -> str:
    """mobility_fit.yaml: the identified limits for every consumer (see the module doc)."""
    values = {n: result.estimates[n].value for n in PARAM_NAMES
              if n in result.estimates and result.estimates[n].identified}
    lines = [
        f'# The velocity model identified by fit_mobility from {source}',
        f'# ({"pooled fit of " if len(result.vehicles) > 1 else "fit of "}'
        f'{", ".join(result.vehicles)}; sim_dt {result.sim_dt:g} s).',
        '# Use as it is:',
        '#   mobility_node --ros-args --params-file mobility_fit.yaml',
        '#   swarm_sim --params-file mobility_fit.yaml ...',
        '#   batch_sim --scenario mobility_fit.yaml ...   (read as vehicle: overrides; also',
        "#   swarm_sim --scenario and a sweep spec's scenario:)",
    ]
    delay = result.estimates[DELAY]
    if delay.identified:
        lines.append(f'# Transport delay {delay.value:.3f} s, interval [{delay.low:.3f}, '
                     f'{delay.high:.3f}] s (the simulators have no command delay; not a '
                     'parameter).')
    for name, reason in result.unidentifiable().items():
        if name != DELAY:
            lines.append(f'# {name}: not identified ({reason}); the default stays.')
    body = '\n'.join(f'    {n}: {_yaml_float(v)}' for n, v in values.items())
    for node in MOBILITY_NODES:
        lines += [f'{node}:', '  ros__parameters:', body] if values else []
    agent = {n: v for n, v in values.items() if n in AGENT_PARAMS}
    if agent:
        lines += [f'{AGENT_NODE}:', '  ros__parameters:']
        lines += [f'    {n}: {_yaml_float(v)}' for n, v in agent.items()]
    if not values:
        lines.append('{}')
    return '\n'.join(lines) + '\n'


def _yaml_float(value: float) -> str:
    text = f'{value:.4g}'
    return text if any(c in text for c in '.e') else text + '.0'


def result_dict(result: FitResult) -> dict:
    def scores(part):
        return {k: vars(v) for k, v in part.items()}
    return {
        'vehicles': list(result.vehicles), 'axes': list(result.axes), 'sim_dt': result.sim_dt,
        'parameters': {n: {'value': e.value, 'std': e.std, 'unit': UNITS[n],
                           'identified': e.identified,
                           **({'interval': [e.low, e.high], 'std_white': e.std_white,
                               'systematic': e.systematic} if e.identified else {}),
                           **({'reason': e.reason} if e.reason else {})}
                       for n, e in result.estimates.items()},
        'interval': INTERVAL_NOTE,
        'before': {'parameters': {n: getattr(result.start_params, n) for n in PARAM_NAMES},
                   'delay': 0.0, **scores(result.before)},
        'after': scores(result.after), 'function_evaluations': result.iterations,
        'notes': list(result.notes),
    }


def summary_text(per_vehicle: dict[str, FitResult], pooled: FitResult | None,
                 skipped: dict[str, str], out: Path) -> str:
    """Return the one-screen summary: a table of parameters per fit, then the scores."""
    fits = dict(per_vehicle)
    if pooled is not None:
        fits['pooled'] = pooled
    names = [n for n in PARAM_NAMES + (DELAY,)
             if any(n in r.estimates for r in fits.values())]
    width = max(12, *(len(k) + 2 for k in fits))
    rows = [f'{"parameter":<16}' + ''.join(f'{k:>{width + 8}}' for k in fits)]
    for n in names:
        cells = []
        for r in fits.values():
            e = r.estimates.get(n)
            cells.append('-' if e is None else 'unidentified' if not e.identified
                         else f'{e.value:.3g} +- {e.half_width:.2g}')
        rows.append(f'{n + " [" + UNITS[n] + "]":<16}' + ''.join(f'{c:>{width + 8}}'
                                                                 for c in cells))
    for part in ('train', 'holdout'):
        for label, attr in (('before', 'before'), ('after', 'after')):
            cells = [f'{getattr(r, attr)[part].rmse:.3f} / {getattr(r, attr)[part].r2:.3f}'
                     for r in fits.values()]
            rows.append(f'{part + " " + label:<16}' + ''.join(f'{c:>{width + 8}}'
                                                              for c in cells))
    rows.append('(+-: the interval, COVERAGE_Z robust std + model mismatch; scores: velocity '
                'RMSE [m/s] / R^2; before = the starting parameters, no delay; holdout = the '
                'last part of each flight, not fitted)'.replace('COVERAGE_Z', f'{COVERAGE_Z:g}'))
    for r in fits.values():
        for note in r.notes:
            rows.append(f'note ({", ".join(r.vehicles)}): {note}')
    for name, why in skipped.items():
        rows.append(f'skipped: {why}')
    rows.append(f'outputs in {out}: {YAML_FILE}, {JSON_FILE}, {REPORT_FILE}')
    return '\n'.join(rows)


def write_report(path: Path, flights: dict[str, Flight], chosen: dict[str, FitResult],
                 start: VehicleParams, holdout: float) -> None:
    """Per vehicle: speed (xy) and vz measured, before and after, then the residuals."""
    from matplotlib.figure import Figure

    shown = list(chosen)[:4]
    fig = Figure(figsize=(11, 3.2 * len(shown) + 0.4), dpi=100)
    axes = fig.subplots(len(shown), 3, squeeze=False)
    for row, name in zip(axes, shown):
        result = chosen[name]
        delay = result.estimates[DELAY].value or 0.0
        before = predict(flights[name], start, 0.0, holdout)
        after = predict(flights[name], result.vehicle_params(), delay, holdout)
        t = before['t']
        split = t[before['holdout']][0] if before['holdout'].any() else None
        for ax, label, fn in ((row[0], 'horizontal speed [m/s]',
                               lambda v: np.hypot(v[:, 0], v[:, 1])),
                              (row[1], 'vz [m/s]', lambda v: v[:, 2])):
            ax.plot(t, fn(before['measured']), color='0.3', lw=1.0, label='measured')
            ax.plot(t, fn(before['simulated']), color='tab:red', lw=0.9, alpha=0.8,
                    label='before (start params)')
            ax.plot(t, fn(after['simulated']), color='tab:blue', lw=0.9, label='after (fit)')
            ax.set_ylabel(label)
            ax.set_title(f'{name}: {label.split(" [")[0]}', fontsize=9)
        res_b = np.linalg.norm(before['simulated'] - before['measured'], axis=1)
        res_a = np.linalg.norm(after['simulated'] - after['measured'], axis=1)
        row[2].plot(t, res_b, color='tab:red', lw=0.8, alpha=0.8, label='before')
        row[2].plot(t, res_a, color='tab:blue', lw=0.8, label='after')
        row[2].set_ylabel('|velocity error| [m/s]')
        row[2].set_title(f'{name}: residuals (held-out R^2 '
                         f'{result.before["holdout"].r2:.3f} -> '
                         f'{result.after["holdout"].r2:.3f})', fontsize=9)
        for ax in row:
            if split is not None:
                ax.axvline(split, color='k', ls=':', lw=0.8)
            ax.grid(alpha=0.3)
            ax.set_xlabel('time [s] (dotted: held-out part from here)')
        row[0].legend(fontsize=7, loc='upper right')
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    stop = StopRequest('fit_mobility').install()
    try:
        with stop.raising():
            return _main(argv, stop)
    except Interrupted:
        print('fit_mobility: interrupted; nothing was written', file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        stop.ignore_from_now()


def _main(argv: list[str] | None, stop: StopRequest) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.t_from is not None and args.t_to is not None and args.t_to <= args.t_from:
        parser.error(f'--to must be > --from ({args.t_from:g}), got {args.t_to:g}')
    from soliton_encirclement_ros.analysis.bag_reader import BagError
    from soliton_encirclement_ros.analysis.outputs import output_dir_problem
    from soliton_encirclement_ros.analysis.report import json_text

    out = Path(args.out)
    problem = output_dir_problem(out)
    if problem:
        print(f'fit_mobility: error: {problem}', file=sys.stderr)
        return 2
    start = VehicleParams()
    try:
        flights, info = read_flights(args.bag, args.vehicles)
        flights = {n: f.window(args.t_from, args.t_to) for n, f in flights.items()}
        per_vehicle, pooled, skipped = fit_all(flights, args.axes, start, args.holdout)
    except (BagError, InputError, FitError) as err:
        print(f'fit_mobility: error: {err}', file=sys.stderr)
        return EXIT_ERROR
    partial = [f'{what} bag, fitted its intact part only ({info[what]})'
               for what in ('corrupt', 'truncated') if info[what]]
    if info['metadata_damaged']:
        print(f'fit_mobility: warning: {info["metadata_damaged"]}', file=sys.stderr)
    for topic, count in info['skipped_messages'].items():
        print(f'fit_mobility: warning: {topic}: {count} message(s) without a finite velocity '
              'skipped', file=sys.stderr)
    chosen = pooled or next(iter(per_vehicle.values()))
    stop.writing = True  # from here a signal only says "writing outputs, please wait"
    out.mkdir(parents=True, exist_ok=True)
    (out / YAML_FILE).write_text(params_yaml(chosen, Path(args.bag).name))
    report = {
        'bag': str(args.bag), 'window': {'from': args.t_from, 'to': args.t_to},
        'holdout': args.holdout, 'axes': list(args.axes), **info,
        'vehicles': {n: result_dict(r) for n, r in per_vehicle.items()},
        'pooled': None if pooled is None else result_dict(pooled),
        'skipped': skipped, 'written': {'params_file': YAML_FILE,
                                        'from': 'pooled' if pooled else chosen.vehicles[0]},
    }
    (out / JSON_FILE).write_text(json_text(report))
    write_report(out / REPORT_FILE, flights, per_vehicle, start, args.holdout)
    print(summary_text(per_vehicle, pooled, skipped, out))
    if partial:  # last, where it is seen: the fit is of part of the flight
        print(f'fit_mobility: warning: {"; ".join(partial)}', file=sys.stderr)
        return EXIT_PARTIAL
    return 0


def _names(text: str) -> list[str]:
    names = [n.strip().strip('/') for n in text.split(',') if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f'must name at least one vehicle, got {text!r}')
    return names


def _axes(text: str) -> tuple[str, ...]:
    axes = [a.strip() for a in text.split(',') if a.strip()]
    bad = [a for a in axes if a not in AXES]
    if bad or not axes:
        raise argparse.ArgumentTypeError(f'must be xy, z or xy,z, got {text!r}')
    return tuple(a for a in AXES if a in axes)


def _holdout(value: float) -> float:
    if not 0.05 <= value <= 0.9:
        raise ValueError(f'holdout must be in [0.05, 0.9], got {value}')
    return value


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog='fit_mobility', description='Fit the velocity model (tau, acceleration and speed '
        'limits, a transport delay) to a recorded flight; write a parameters file the '
        'simulators take as it is.',
        epilog='Exit status: 0 done, 1 unusable input, 2 bad command line, 3 truncated or '
               'corrupt bag fitted in part, 130 interrupted.')
    parser.add_argument('bag', metavar='BAG', help='rosbag2 directory or .mcap/.db3 file')
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--vehicles', type=_names, default=None,
                        help='comma-separated vehicle names (default: every vehicle with '
                             f'commands and odometry; a PX4 without namespace is '
                             f'{PX4_VEHICLE!r})')
    parser.add_argument('--axes', type=_axes, default=AXES,
                        help='planes to fit: xy, z or xy,z (default); the others keep their '
                             'defaults')
    parser.add_argument('--from', dest='t_from', type=number(0), default=None, metavar='T0',
                        help='start of the part fitted [s from the first message read]')
    parser.add_argument('--to', dest='t_to', type=number(0, strict=True), default=None,
                        metavar='T1', help='end of the part fitted [s from the first message]')
    parser.add_argument('--holdout', type=number(check=_holdout), default=DEFAULT_HOLDOUT,
                        help='fraction of each flight held out (its end) and scored, not '
                             'fitted (default %(default)s)')
    return parser


if __name__ == '__main__':
    sys.exit(main())
