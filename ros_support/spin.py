"""
The one entry-point helper of every node executable: init, build, spin, clean shutdown.

SIGINT and SIGTERM only set a flag (``signals.StopRequest``); the main loop notices it between
executor turns, so an interrupt never surfaces inside a callback as a traceback, and shutdown
work (writing outputs, closing a bag) runs while the node and its logger are still valid. rclpy
is initialised without its own signal handlers for the same reason. A second signal while the
outputs are being written only prints "writing outputs, please wait".
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
import sys
from typing import Callable, Iterable, Sequence

import rclpy
from rclpy.exceptions import InvalidParameterTypeException, ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ros_support.entry import EXIT_LIMIT_S
from ros_support.participants import (
    answer_calls, ForeignCount, guard_subscriptions, Roster, ROSTER_ENV)
from ros_support.ros_parameters import declared_names, given_names, parameters_help
from ros_support.signals import give_up_after, StopRequest
from ros_support.validation import read_yaml, unknown_parameters

SPIN_SLICE_S = 0.2  # how soon the main loop notices a stop request
# How long each step of tearing down rclpy (the executor, then the node and context) may take
# once the outputs are written: an rmw call that never returns (seen in destroy_node on a loaded
# host) must not leave a process that ignores SIGINT and SIGTERM.
TEARDOWN_LIMIT_S = 4.0
# Past the limit by this much, faulthandler's watchdog (a thread that needs no GIL) dumps every
# thread's stack and exits 1: for an rmw call that blocks while holding the GIL (a lock inversion
# with a middleware thread that waits for it), where the limit's own Python timer cannot run.
TEARDOWN_BACKSTOP_S = 1.0
# The longest a node takes to exit once asked (not counting writing its outputs): the executor's
# and the node's teardown, then the interpreter's exit (``ros_support.entry``). What a supervisor
# waits before it escalates to SIGTERM.
STOP_BOUND_S = (SPIN_SLICE_S + 2 * (TEARDOWN_LIMIT_S + TEARDOWN_BACKSTOP_S) + EXIT_LIMIT_S
                + TEARDOWN_BACKSTOP_S)
# Parameters every node has without declaring them in its spec table.


def params_file_problem(args: Iterable[str]) -> str | None:
    """
    One line naming a ``--params-file`` of ``args`` that is missing or not YAML, else None.

    rcl parses these files inside ``rclpy.init`` and answers a bad one with a long traceback;
    checking them first gives the user the file and the YAML error instead. Only the syntax is
    checked (``yaml.compose``): rcl accepts tags such as launch_ros's ``!!python/tuple``.
    """
    args = list(args)
    for flag, path in zip(args, args[1:]):
        if flag != '--params-file':
            continue
        try:
            read_yaml(path, 'params file', syntax_only=True)
        except ValueError as error:
            return str(error)
    return None


def unknown_overrides(node: Node) -> list[str]:
    """
    Return one warning per parameter given to ``node`` (YAML or ``-p``) that it never declared.

    The policy of :func:`ros_support.validation.unknown_parameters`, for a node that does not
    know its graph: a ``/**`` file is shared, so a parameter a sibling declares lands here too.
    The graphs this package starts (``swarm_sim``, the launch files) refuse a parameter no node
    of theirs declares before anything starts; a node started alone warns.
    """
    name = node.get_fully_qualified_name()
    return [f'unknown parameter {phrase}: not a parameter of this node, ignored'
            for phrase in unknown_parameters({name: given_names(node)}, declared_names(node))]


def configuration_error(error: Exception) -> str:
    """
    Return the one-line message of a bad configuration.

    The error is a ValueError or rclpy's ParameterException.
    """
    if isinstance(error, InvalidParameterTypeException):
        param = error.args[0] if error.args else None
        name = getattr(param, 'name', '?')
        got = getattr(getattr(param, 'type_', None), 'name', '?').lower()
        expected = str(error.args[1]).lower() if len(error.args) > 1 else '?'
        value = getattr(param, 'value', '?')
        return f'parameter {name!r}: expected {expected}, got {got} ({value!r})'
    return str(error)


def help_requested(argv: Sequence[str]) -> bool:
    """
    Whether ``argv`` asks for ``-h``/``--help`` outside its ``--ros-args ... [--]`` sections.

    Read as rcl splits them, without parsing the ROS arguments (a bad params file is reported
    by the start-up, not here).
    """
    in_ros_args = False
    for arg in argv[1:]:
        if arg == '--ros-args':
            in_ros_args = True
        elif arg == '--' and in_ros_args:
            in_ros_args = False
        elif not in_ros_args and arg in ('-h', '--help'):
            return True
    return False


def node_help(prog: str, node_class: Callable[..., Node]) -> str:
    """
    Return the ``--help`` of a node executable: usage, what it does, its parameters.

    What it does is the first paragraph of the node's module docstring; its parameters are the
    module's ``PARAMETERS`` (the specs it declares, as the parameter tables give them).
    """
    module = sys.modules[getattr(node_class, 'func', node_class).__module__]
    doc = (module.__doc__ or '').strip().split('\n\n')[0].replace('``', '')
    specs = getattr(module, 'PARAMETERS', ())
    return (f'usage: {prog} [-h] [--ros-args [-r __ns:=/NAMESPACE] [-p NAME:=VALUE ...] '
            '[--params-file FILE]]\n\n'
            f'{doc}\n\n'
            'parameters (set with --ros-args -p NAME:=VALUE or --params-file FILE):\n'
            f'{parameters_help(specs)}')


def announce_membership() -> Roster | None:
    """
    Join the graph named by ``ROSTER_ENV`` (first thing: before the node), or None without it.

    A node started alone (by a launch file, by hand) is on no roster and hears every publisher
    of its topics, as ROS nodes do.
    """
    topic = os.environ.get(ROSTER_ENV)
    return Roster.announce(topic) if topic else None


def guard_node(node: Node, roster: Roster | None) -> Callable[[], None]:
    """
    Let ``node`` hear only ``roster``'s members; return what to call now and then.

    The call guards the subscriptions the node adds later. Without a roster nothing changes.
    """
    if roster is None:
        return lambda: None
    roster.serve(node)

    def warn(topic: str, who: str) -> None:
        node.get_logger().warning(
            f'ignoring {topic} from {who}: not a node of this graph (another graph in this ROS '
            'domain?)')
    foreign = ForeignCount(node, warn)
    guarded = [guard_subscriptions(node, roster, foreign)]

    def guard() -> None:
        if len(list(node.subscriptions)) != guarded[0]:
            guarded[0] = guard_subscriptions(node, roster, foreign)
    return guard


def spin_node(node_class: Callable[..., Node], args: list[str] | None = None,
              on_shutdown: Callable[[Node], None] | None = None,
              executor_class: Callable[[], object] = EventsExecutor) -> None:
    """
    rclpy.init, spin one ``node_class`` until SIGINT/SIGTERM, clean up.

    A bad configuration (a params file that is not YAML, a ValueError or a rejected parameter)
    prints one line naming it and exits 1; ``-h``/``--help`` prints :func:`node_help` and
    returns, starting nothing. ``on_shutdown(node)`` runs before the node is
    destroyed (e.g. to write outputs). The EventsExecutor drives ROS-time timers from /clock as
    the SingleThreadedExecutor does, at a lower CPU cost (see benchmarks/).
    """
    name = getattr(node_class, '__name__', None) or getattr(
        getattr(node_class, 'func', None), '__name__', 'node')  # a class or a partial of one
    stop = StopRequest(name).install()
    argv = sys.argv if args is None else args
    if help_requested(argv):
        print(node_help(Path(argv[0]).name if argv else name, node_class), end='')
        return
    problem = params_file_problem(argv)
    if problem:
        print(f'{name}: {problem}', file=sys.stderr)
        raise SystemExit(1)
    rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    node = roster = None
    executor = executor_class()
    try:
        roster = announce_membership()
        try:
            node = node_class()
        except (ValueError, ParameterException) as error:
            print(f'{name}: invalid configuration: {configuration_error(error)}', file=sys.stderr)
            raise SystemExit(1) from None
        for line in unknown_overrides(node):
            node.get_logger().warning(line)
        guard = guard_node(node, roster)
        answer = answer_calls(node, roster)  # a recorder's: are this node's writers matched?
        executor.add_node(node)
        if roster is not None:  # built and about to spin: its graph's clock may count it now
            roster.mark_ready()
        while not stop.requested and rclpy.ok():
            executor.spin_once(timeout_sec=SPIN_SLICE_S)
            guard()
            answer()
    except ExternalShutdownException:
        pass
    finally:
        stop.writing = True
        with exit_if_stuck(name, 'the executor'):
            executor.shutdown()
        if node is not None and on_shutdown is not None:
            on_shutdown(node)
        with exit_if_stuck(name, 'destroy_node'):
            if node is not None:
                node.destroy_node()
            if roster is not None:
                roster.destroy_node()
            rclpy.try_shutdown()
            executor = None  # its destructor (a C++ executor's joins its threads) bounded too
        stop.ignore_from_now()


@contextlib.contextmanager
def exit_if_stuck(name: str, what: str, limit: float | None = None):
    """
    Run the block; if it has not returned after ``limit`` s, say so in one line and exit 0.

    ``limit`` None: :data:`TEARDOWN_LIMIT_S`. A block that holds the GIL while it hangs keeps
    that line from being printed: :data:`TEARDOWN_BACKSTOP_S` later, faulthandler's watchdog
    dumps every thread's stack to stderr and exits 1.

    For the teardown after a stop request, once nothing is left to write: the process was asked
    to stop, and stops.
    """
    limit = TEARDOWN_LIMIT_S if limit is None else limit
    cancel = give_up_after(limit, f'{name}: {what} did not return within {limit:g} s of the stop '
                           'request; exiting without it', 0, TEARDOWN_BACKSTOP_S)
    try:
        yield
    finally:
        cancel()
