"""
``fleet``: fly a fleet from one place (a fleet file, :mod:`.fleet_file`).

    fleet check FILE            pre-flight over the live graph: one table, exit 1 on any failure
    fleet engage FILE           only after a passing check: every bridge's ~/engage at once
    fleet land FILE             every bridge's ~/land at once; done when PX4 reports each
                                vehicle landed and disarmed
    fleet hold FILE             the operator's stop: every vehicle into PX4's Hold at once
    fleet console FILE          the operator's standing console: each vehicle's state live,
                                and h hold (at once), e engage, l land, c check, q quit
    fleet launch-commands FILE  the exact ros2 launch line for each companion computer

Run it on any machine of the fleet's ROS network (same ``ROS_DOMAIN_ID``). ``fleet_node`` offers
the same actions as services (and through the live view, in Foxglove). Each vehicle's verdict
comes from what its bridge reports (its status), the service's answer being a hint
(:class:`~.live.FleetAction`); a line per vehicle as it is decided. Each one-shot command starts
ROS and discovers the fleet anew, and says in one line how long that took; ``fleet console``
(:mod:`.console`) does it once and then acts the moment a key is pressed. Exit status: 0 all
passed (the console: quit), 1 a check or a vehicle failed, 2 a bad fleet file or usage; a
SIGINT or SIGTERM ends it with 0 after one line (the bridges go on with what they were asked).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from ros_support.signals import StopRequest
from ros_support.validation import number, OneLineParser
from soliton_encirclement_ros.fleet.fleet_file import launch_commands, load_fleet

ANSWER_TIMEOUT = 60.0  # s for every vehicle to confirm an engage, a landing or a hold


def parser() -> argparse.ArgumentParser:
    """Return the ``fleet`` argument parser."""
    p = OneLineParser(prog='fleet', description=__doc__.split('\n\n')[0].strip(),
                      epilog=__doc__.split('\n\n', 1)[1].strip('\n'),
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest='action', required=True, metavar='ACTION')
    for action, text in (('check', 'pre-flight over the live graph; exit 1 on any failure'),
                         ('engage', 'check, then engage every vehicle at once'),
                         ('land', 'land every vehicle at once; done when PX4 reports each '
                          'landed and disarmed'),
                         ('hold', "stop: every vehicle into PX4's Hold mode at once"),
                         ('console', "the operator's standing console: each vehicle's state "
                          'live; h hold at once, e engage, l land (each confirmed with y), c '
                          'check, q quit'),
                         ('launch-commands', 'print the ros2 launch line of every companion')):
        one = sub.add_parser(action, help=text, description=text)
        one.add_argument('fleet_file', metavar='FILE', help='fleet file (YAML)')
        if action in ('check', 'engage', 'console'):
            one.add_argument('--wait', type=number(0), default=8.0, metavar='S',
                             help='listen this long at most for every vehicle and its link '
                             'figures before judging (default 8)' if action != 'console' else
                             'name the vehicles and services not found this long after the '
                             'start (default 8)')
            one.add_argument('--stale', type=number(0, strict=True), default=3.0, metavar='S',
                             help='a status or odometry older than this counts as unheard '
                             '(default 3)')
        if action in ('engage', 'land', 'hold', 'console'):
            one.add_argument('--timeout', type=number(0, strict=True), default=ANSWER_TIMEOUT,
                             metavar='S',
                             help='wait this long for every vehicle to confirm (default 60)')
        if action == 'console':
            one.add_argument('--plain', action='store_true',
                             help='plain lines (state changes out, one command per line in) '
                             'even on a terminal; the default without one')
    return p


def discovery_line(started: float, complete: bool, what: str) -> str:
    """Return the one line that says how long this command's discovery of the fleet took."""
    return (f'fleet: discovery {"took" if complete else "incomplete after"} '
            f'{time.monotonic() - started:.1f} s since the command started ({what}); '
            '`fleet console` discovers the fleet once and acts at once')


def main(argv=None) -> int:
    started = time.monotonic()
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    try:
        fleet = load_fleet(args.fleet_file)
    except ValueError as error:
        print(f'fleet: error: {error}', file=sys.stderr)
        return 2
    if args.action == 'launch-commands':
        for host, name, command in launch_commands(fleet):
            print(f'# {name} on {host or "its companion computer"}')
            print(command)
        if fleet.safety_area:
            print(f'# every companion needs the safety area at {fleet.safety_area}')
        return 0
    stop = StopRequest('fleet').install()
    if args.action == 'console':
        from soliton_encirclement_ros.fleet import console
        try:
            return console.run(args, fleet, stop, started)
        finally:
            StopRequest.ignore_from_now()
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    from soliton_encirclement_ros.fleet.checks import render
    from soliton_encirclement_ros.fleet.live import FleetAction, FleetOperator

    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f'fleet_cli_{os.getpid()}')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    operator = FleetOperator(node, fleet)

    def spin_until(condition, seconds) -> bool:
        deadline = time.monotonic() + seconds
        while not condition() and not stop.requested and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        return condition()

    try:
        if args.action in ('check', 'engage'):
            heard = spin_until(lambda: operator.heard_all() and operator.links_known()
                               and operator.positions_known(), args.wait)
            print(discovery_line(started, heard, 'every vehicle, its link figures and its '
                                 'odometry heard' if heard else
                                 f'not all heard within --wait {args.wait:g} s'), flush=True)
            if stop.requested:
                print('fleet: interrupted before the check ended', file=sys.stderr)
                return 0
            report = operator.check(args.stale)
            print(render(report))
            if args.action == 'check' or not report.passed:
                if not report.passed and args.action == 'engage':
                    print('fleet: engage refused: the pre-flight check failed; nothing was '
                          'engaged', file=sys.stderr)
                return 0 if report.passed else 1
        # engage (after a passing check), land or hold: every bridge at once; each vehicle's
        # verdict from what it reports, printed as it is decided
        action = FleetAction(operator, args.action, discover=min(args.timeout, 10.0))

        # engage says it after the check; land and hold once every bridge is called
        said = {'discovery': args.action == 'engage'}

        def decided():
            for line in action.update():
                print(line, flush=True)
            if action.all_called and not said['discovery']:
                said['discovery'] = True
                print(discovery_line(started, True, f"every bridge's ~/{args.action} found "
                                     'and called'), flush=True)
            return action.done
        spin_until(decided, args.timeout)
        if not said['discovery']:
            print(discovery_line(started, False, f'{len(action.called_at)} of '
                                 f"{len(fleet.vehicles)} bridges' ~/{args.action} found"),
                  flush=True)
        if stop.requested:
            print(f'fleet: interrupted; the {args.action} requests already sent go on in the '
                  'bridges', file=sys.stderr)
            return 0
        for line in action.finish(f' within {args.timeout:g} s'):
            print(line)
        return 0 if action.ok else 1
    finally:
        StopRequest.ignore_from_now()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
