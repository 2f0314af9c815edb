"""
``fleet``: fly a fleet from one place (a fleet file, :mod:`.fleet_file`).

    fleet check FILE            pre-flight over the live graph: one table, exit 1 on any failure
    fleet engage FILE           only after a passing check: every bridge's ~/engage at once
    fleet land FILE             every bridge's ~/land at once, each confirmed by PX4
    fleet launch-commands FILE  the exact ros2 launch line for each companion computer

Run it on any machine of the fleet's ROS network (same ``ROS_DOMAIN_ID``). ``fleet_node`` offers
the same actions as services (and through the live view, in Foxglove). Exit status: 0 all
passed, 1 a check or a vehicle failed, 2 a bad fleet file or usage; a SIGINT or SIGTERM ends it
with 0 after one line (the bridges go on with what they were asked).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from ros_support.signals import StopRequest
from soliton_encirclement_ros.fleet.fleet_file import launch_commands, load_fleet

ANSWER_TIMEOUT = 60.0  # s for every bridge to answer an engage or land (PX4 confirms first)


def parser() -> argparse.ArgumentParser:
    """Return the ``fleet`` argument parser."""
    p = argparse.ArgumentParser(prog='fleet', description=__doc__.split('\n\n')[0].strip())
    sub = p.add_subparsers(dest='action', required=True, metavar='ACTION')
    for action, text in (('check', 'pre-flight over the live graph; exit 1 on any failure'),
                         ('engage', 'check, then engage every vehicle at once'),
                         ('land', 'land every vehicle at once, each confirmed by PX4'),
                         ('launch-commands', 'print the ros2 launch line of every companion')):
        one = sub.add_parser(action, help=text, description=text)
        one.add_argument('fleet_file', metavar='FILE', help='fleet file (YAML)')
        if action in ('check', 'engage'):
            one.add_argument('--wait', type=float, default=8.0, metavar='S',
                             help='listen this long at most for every vehicle and its link '
                             'figures before judging (default 8)')
            one.add_argument('--stale', type=float, default=3.0, metavar='S',
                             help='a status or odometry older than this counts as unheard '
                             '(default 3)')
        if action in ('engage', 'land'):
            one.add_argument('--timeout', type=float, default=ANSWER_TIMEOUT, metavar='S',
                             help='wait this long for every bridge to answer (default 60)')
    return p


def main(argv=None) -> int:
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
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    from soliton_encirclement_ros.fleet.checks import render
    from soliton_encirclement_ros.fleet.live import FleetOperator, outcome_lines

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
            spin_until(lambda: operator.heard_all() and operator.links_known(), args.wait)
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
        # engage (after a passing check) or land: every bridge at once, each answer PX4's
        spin_until(lambda: all(c.service_is_ready() for c in operator.clients(args.action)),
                   min(args.timeout, 10.0))
        calls = operator.call(args.action)
        pending = [c for c in calls.values() if not isinstance(c, str)]
        spin_until(lambda: all(c.done() for c in pending), args.timeout)
        if stop.requested:
            print(f'fleet: interrupted; the {args.action} requests already sent go on in the '
                  'bridges', file=sys.stderr)
            return 0
        ok, lines = outcome_lines(args.action, calls, f' within {args.timeout:g} s')
        print('\n'.join(lines))
        return 0 if ok else 1
    finally:
        StopRequest.ignore_from_now()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
