"""
``run_recorder``.

Record the swarm's topics from a live graph into a rosbag2 (pip-only machines' ``ros2 bag record
-e``). Ctrl-C or SIGTERM closes the bag, keeping every message received: those its readers
already hold are written first.

    run_recorder -o runs/flight1 [-e REGEX] [-s mcap|sqlite3] [--ros-args -p discovery_period:=0.5]

The command-line options set the defaults of the read-only parameters ``output``,
``topics_regex`` and ``storage``; ``--ros-args -p`` overrides them as usual.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
import sys
import time

import rclpy
from rclpy.clock import Clock
from rclpy.exceptions import ParameterException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ros_support.ros_parameters import declare, parameters_help, specs_of
from ros_support.settings import check_fields, setting
from ros_support.signals import StopRequest
from ros_support.spin import configuration_error
from ros_support.validation import from_mapping, regular_expression
from soliton_encirclement_ros.analysis.outputs import new_dir_problem
from soliton_encirclement_ros.provenance import bag_custom_data
from soliton_encirclement_ros.recording.recorder import (
    BagRecorder, DEFAULT_TOPICS_REGEX, drain, STORAGE_PLUGINS)

SPIN_TIMEOUT = 0.1  # s between checks for a stop signal; after one, the quiet that ends a drain
DRAIN_LIMIT = 2.0  # s at most to write, after a stop, what the readers already hold
EXIT_INCOMPLETE = 3  # a write failed: the bag holds what was written before


@dataclass(frozen=True)
class RecorderSettings:
    """run_recorder's parameters (the command-line options give the first three's defaults)."""

    output: str = setting('', 'bag directory to create (must not exist)', read_only=True)
    topics_regex: str = setting(DEFAULT_TOPICS_REGEX, 'record topics whose name matches this '
                                'regular expression (re.search)', read_only=True)
    storage: str = setting('mcap', 'storage plugin', choices=tuple(sorted(STORAGE_PLUGINS)),
                           read_only=True)
    discovery_period: float = setting(1.0, 'time between topic discoveries (wall clock)', 's',
                                      0.05, 60.0, read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.output:
            raise ValueError("output must name a new bag directory, got ''")
        regular_expression('topics_regex', self.topics_regex)


PARAMETERS = tuple(specs_of(RecorderSettings))  # everything run_recorder declares


class RecorderNode(Node):
    """Owns a :class:`BagRecorder` and re-discovers topics every ``discovery_period``."""

    def __init__(self, output: str, topics_regex: str, storage: str):
        super().__init__('run_recorder')
        given = {'output': output, 'topics_regex': topics_regex, 'storage': storage}
        specs = [dataclasses.replace(spec, default=given.get(spec.name, spec.default))
                 for spec in PARAMETERS]
        settings = from_mapping(RecorderSettings, declare(self, specs))
        self.recorder = BagRecorder(self, settings.output, settings.topics_regex,
                                    settings.storage,
                                    custom_data=bag_custom_data('run_recorder'))
        self.recorder.discover()
        # Discovery runs on the wall clock: under use_sim_time it must not wait for /clock.
        self._discovery_timer = self.create_timer(settings.discovery_period,
                                                  self.recorder.discover, clock=Clock())
        self.get_logger().info(
            f'recording topics matching {settings.topics_regex!r} into {settings.output}')


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='run_recorder', description=__doc__.split('\n\n')[1].split('(')[0].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='parameters (set with --ros-args -p NAME:=VALUE; the options above give the first '
        f'three their defaults):\n{parameters_help(PARAMETERS)}')
    parser.add_argument('-o', '--output', default=time.strftime('run_%Y%m%d_%H%M%S'),
                        help='bag directory to create (default: run_<date>_<time>)')
    parser.add_argument('-e', '--regex', default=DEFAULT_TOPICS_REGEX,
                        help='record topics matching this regular expression')
    parser.add_argument('-s', '--storage', default='mcap', choices=sorted(STORAGE_PLUGINS))
    return parser.parse_args(argv)


def main(args=None) -> int:
    argv = sys.argv if args is None else args
    options = _arguments(rclpy.utilities.remove_ros_args(argv)[1:])
    # The handlers only set a flag: the message being written completes, then the bag is
    # closed while the node (and its logger) is still valid.
    stop = StopRequest('run_recorder').install()
    problem = new_dir_problem(_output(argv, options.output), 'output')
    if problem:  # before anything starts: no graph joined, nothing created
        print(f'run_recorder: error: {problem}', file=sys.stderr)
        return 1
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    try:
        node = RecorderNode(options.output, options.regex, options.storage)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        while not stop.requested and not node.recorder.failure:
            executor.spin_once(timeout_sec=SPIN_TIMEOUT)
        if not node.recorder.failure:  # what the readers already hold, before the bag closes
            drain(executor, DRAIN_LIMIT, SPIN_TIMEOUT)
    except (ValueError, FileExistsError, ParameterException) as err:
        print(f'run_recorder: error: {configuration_error(err)}', file=sys.stderr)
        return 1
    finally:
        stop.writing = True
        if node is not None:
            node.recorder.close()
            node.destroy_node()
        rclpy.try_shutdown()
        stop.ignore_from_now()
    if node.recorder.failure:  # logged in one line as it happened
        return EXIT_INCOMPLETE
    return 0


def _output(argv: list[str], default: str) -> str:
    """Return the bag directory: ``-p output:=...`` of the ROS arguments, else ``-o``'s."""
    ros = list(argv)
    for flag, value in zip(ros, ros[1:]):
        if flag in ('-p', '--param') and value.startswith('output:='):
            default = value.split(':=', 1)[1]
    return default


if __name__ == '__main__':
    sys.exit(main())
