"""
The swarm graph with one OS process per node, as ``ros2 launch`` starts it.

Each node of ``graph.build_graph`` runs its own console script with the plan's ``--ros-args``,
in a process group of its own (a terminal Ctrl-C reaches only this runner, which then stops the
nodes in order); the swarm mobility node publishes ``/clock`` (``clock_source='mobility'``) once
every node subscribes to it. The nodes hear only one another: each joins the run's roster topic
(``ros_support.participants``, named in ``ROSTER_ENV``), and a message from a participant not
on it (another swarm in the domain) is dropped and counted. Each node also dies with this
process (``ros_support.lifeline``: SIGKILL when it ends, however it ends; what the nodes
streamed stays on disk, as a killed in-process run leaves it). This process only
watches the clock and the children (and counts what another graph publishes on the swarm
topics), optionally records a bag, and stops every node when the requested sim time has
passed, when it is asked to stop, or when any node dies: SIGINT (``metrics_node`` writes its
outputs on the way out), then SIGTERM and SIGKILL after a grace period. The grace period lasts
as long as a node says it is writing its outputs (``metrics_node`` touches a ``.writing`` marker
in its output directory every second while it writes; a node that is stopped or hung stops
touching it).
"""
from __future__ import annotations

import math
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Callable, Sequence

import rclpy
from rclpy.context import Context
from rclpy.executors import ShutdownException, SingleThreadedExecutor, TimeoutException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64MultiArray

from ros_support.lifeline import child_environment, die_with_parent
from ros_support.participants import (
    ForeignCount, guard_subscriptions, participant_of, Roster, ROSTER_ENV)
from ros_support.spin import STOP_BOUND_S
from ros_support.topics import publisher_node
from soliton_encirclement_ros.analysis.stream import marker_age, WRITING_MARKER
from soliton_encirclement_ros.bringup.graph import build_graph, NodeSpec, SwarmPlan
from soliton_encirclement_ros.interface import (
    AGENT_ODOM_TOPIC, AGENT_STATES_TOPIC, BEST_EFFORT, CLOCK_TOPIC, swarm_qos, TARGET_ODOM_TOPIC,
    TARGET_STATE_TOPIC)
from soliton_encirclement_ros.sim.domain import GraphWatch, new_roster_topic
from soliton_encirclement_ros.sim.executables import find_executable

STARTUP_TIMEOUT = 60.0   # wall s for the first /clock message
# Wall s a node gets to exit after SIGINT, then after SIGTERM: longer than a node's own bound on
# its teardown, so that a node whose rmw teardown hangs ends itself before it is called stuck.
STOP_TIMEOUT = STOP_BOUND_S + 2.0
STALL_TIMEOUT = 30.0     # wall s without clock progress before giving up
WRITING_FRESH = 10.0     # wall s since its last touch for a writing marker to count
WRITE_TIMEOUT = 1800.0   # wall s a writing node gets at most after SIGINT
SPIN_TIMEOUT = 0.05      # wall s the watch loop waits for a first message
DRAIN_BUDGET = 0.5       # wall s the watch loop runs ready callbacks before its checks
DISCOVERY_PERIOD = 0.5   # wall s between two looks for new topics (the bag's, the live view's)
DRAIN_TIMEOUT = 10.0     # wall s the bag gets at most, once the nodes stopped, for what is queued
# Wall s the clock waits for every node to say that its writers are matched with the bag's
# readers (``Roster.call``); then it starts all the same, and says which nodes did not answer.
ANSWER_WAIT = 10.0


def executable_path(spec: NodeSpec) -> str:
    """Return the node's console script (see :func:`find_executable`)."""
    return find_executable(spec.executable, spec.package)


class ProcessGraph:
    """
    One process per node of a plan, in process groups of their own, with their logs.

    ``roster``: the run's roster topic (``sim.domain.Claim.topic``); a new one by default.
    """

    def __init__(self, plan: SwarmPlan, record: str = '', storage: str = 'mcap',
                 live: tuple[str, int] | None = None, roster: str = '') -> None:
        self._log_dir = Path(tempfile.mkdtemp(prefix='swarm_sim_logs_'))
        self.processes: list[tuple[NodeSpec, subprocess.Popen, Path]] = []
        self.sim_time_ns = 0
        self.writing_markers = (
            [Path(plan.metrics_output_dir) / WRITING_MARKER] if plan.metrics_output_dir else [])
        self.roster_topic = roster or new_roster_topic()[0]
        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = Node('swarm_sim_monitor', context=self.context,
                         parameter_overrides=[Parameter('use_sim_time', value=True)])
        # Only the run's own nodes count: another graph in the domain publishes /clock and
        # swarm states too (heard here to be counted, dropped by every node of the run).
        self.roster = Roster(self.node, self.roster_topic)
        self.foreign_count = ForeignCount(self.node, self._warn_foreign)
        self.node.create_subscription(Clock, CLOCK_TOPIC, self._on_clock, 10)
        for topic in (AGENT_STATES_TOPIC, TARGET_STATE_TOPIC):  # any QoS the plan uses
            self.node.create_subscription(Float64MultiArray, topic, lambda data: None,
                                          swarm_qos(BEST_EFFORT, topic), raw=True)
        self._guarded = guard_subscriptions(self.node, self.roster, self.foreign_count)
        self.roster.mark_ready()  # the monitor listens to /clock from now on
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.live = None
        if live is not None:  # first: a port in use stops the start before the bag exists
            from soliton_encirclement_ros.live.relay import FoxgloveRelay
            self.live = FoxgloveRelay(self.node, host=live[0], port=live[1])
        self.recorder = None
        self.recorder_failure = ''  # kept once the recorder is closed
        # The clock waits for this process (its monitor node) and, when it records, for the
        # bag: a node that joins once every topic of the run is recorded, its writers and the
        # recorder's readers matched on both sides (:meth:`_bag_records`), so that the bag holds
        # the run from its first instant.
        self._bag_topics = [*(f'/{name}/{AGENT_ODOM_TOPIC}' for name in plan.names),
                            TARGET_ODOM_TOPIC, AGENT_STATES_TOPIC]
        self._bag_ready = None
        self._called_at: float | None = None  # when the roster was asked (Roster.call)
        # The nodes answer a call until their simulated clock starts (answer_calls).
        self._nodes_answer = plan.use_sim_time
        if record:
            from soliton_encirclement_ros.provenance import bag_custom_data
            from soliton_encirclement_ros.recording.recorder import BagRecorder
            self.recorder = BagRecorder(
                self.node, record, storage=storage,
                custom_data=bag_custom_data('swarm_sim --processes', plan.scenario.as_dict()))
        try:
            self._start(plan)
        except BaseException:
            self.close()
            raise

    def _start(self, plan: SwarmPlan) -> None:
        environment = {**child_environment(), ROSTER_ENV: self.roster_topic}
        preexec = die_with_parent(signal.SIGKILL)  # at once: an orphan writes nothing more
        for spec in build_graph(plan, clock_listeners=1 + (self.recorder is not None)):
            log = self._log_dir / f'{spec.full_name.strip("/").replace("/", "_")}.log'
            with open(log, 'w') as handle:
                process = subprocess.Popen(
                    [executable_path(spec), *spec.ros_args()],
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env=environment,
                    preexec_fn=preexec,
                )
            self.processes.append((spec, process, log))

    def _on_clock(self, msg: Clock) -> None:  # the run's own /clock only (guarded)
        self.sim_time_ns = Time.from_msg(msg.clock).nanoseconds

    def _warn_foreign(self, topic: str, who: str) -> None:
        self.node.get_logger().warning(
            f'ignoring {topic} from {who}: not a node of this run (another graph in this ROS '
            'domain?); every node of the run ignores it too')

    @property
    def foreign(self) -> dict[str, int]:
        """Return the messages another graph published on the swarm topics, per topic."""
        return dict(self.foreign_count.counts)

    @property
    def sim_time(self) -> float:
        return self.sim_time_ns * 1e-9

    def _check_children(self) -> None:
        for spec, process, log in self.processes:
            if process.poll() is not None:
                raise ChildFailed(
                    f'{spec.full_name} exited with code {process.returncode}: {_last_line(log)}'
                )

    def run(self, duration: float,
            on_progress: Callable[[int], None] = lambda sim_time_ns: None,
            should_stop: Callable[[], bool] = lambda: False,
            watch: GraphWatch | None = None) -> None:
        """Run to ``duration`` s of sim time; ``watch``: as ``LockStepGraph.run``'s."""
        end_ns = round(duration * 1e9)
        last_progress = (time.monotonic(), 0)
        started = time.monotonic()
        discovered = -math.inf
        while self.sim_time_ns < end_ns and not should_stop():
            self._spin_ready()
            self._check_children()
            if time.monotonic() - discovered > DISCOVERY_PERIOD:
                discovered = time.monotonic()
                if self.recorder is not None:
                    self.recorder.discover()
                if self.live is not None:
                    self.live.discover()
            if watch is not None:
                watch.look(self.node, self.sim_time)
            if self.recorder is not None and self._bag_ready is None:
                self._bag_listens()
            if self.live is not None:
                self.live.tick()
            if len(list(self.node.subscriptions)) != self._guarded:  # the bag's, the live view's
                self._guarded = guard_subscriptions(self.node, self.roster, self.foreign_count)
            now = time.monotonic()
            if self.sim_time_ns > last_progress[1]:
                last_progress = (now, self.sim_time_ns)
            elif self.sim_time_ns == 0 and now - started > STARTUP_TIMEOUT:
                raise ChildFailed(
                    f'no /clock within {STARTUP_TIMEOUT:.0f} s of starting the nodes'
                )
            elif self.sim_time_ns > 0 and now - last_progress[0] > STALL_TIMEOUT:
                raise ChildFailed(f'/clock stalled at {self.sim_time:.2f} s')
            on_progress(self.sim_time_ns)

    def _bag_listens(self) -> None:
        """Once the bag holds the run from its first instant (or has stopped), start the clock."""
        if self._bag_ready is not None or not (self.recorder.closed or self._bag_records()):
            return
        if self._nodes_answer:
            # the nodes publish on their simulated clock, which starts now: from each
            # publisher's first message on, whatever does not reach the bag is said
            self.recorder.expect_first_messages()
        self._bag_ready = Node('swarm_sim_recording', context=self.context,
                               parameter_overrides=[Parameter('use_sim_time', value=True)])
        self.executor.add_node(self._bag_ready)  # its time source: the /clock listener

    def _bag_records(self) -> bool:
        """
        Say whether every topic of the run is recorded from its first message.

        Every node is built (its topics are in the graph); the recorder's readers are matched
        with every writer it sees (the readers' side, ``BagRecorder.records``); and every node
        has answered the roster's call (the writers' side: a writer matches a reader when its
        own participant hears of it, which under load came late, and what it wrote before was
        lost for the bag; a node answers once it also hears the clock, which came late too, and
        it published nothing until then). A node that has not answered ``ANSWER_WAIT`` after the
        call is named in a warning, and the clock starts all the same.
        """
        if len(self.roster.ready) <= len(self.processes):  # this process and every node
            return False
        topics = [name for name, _ in self.node.get_topic_names_and_types()]
        if not self.recorder.records([*self._bag_topics, *topics]):
            return False
        if not self._nodes_answer:
            return True
        if self._called_at is None:
            self.roster.call()  # after the recorder's readers: it covers them
            self._called_at = time.monotonic()
            return False
        answered = self.roster.answered
        if len(answered) >= len(self.processes):
            return True
        if time.monotonic() - self._called_at < ANSWER_WAIT:
            return False
        silent = ', '.join(sorted(
            name for name, participant in self._participants().items()
            if participant not in answered)) or 'some nodes'
        self.node.get_logger().warning(
            f'starting the clock although {silent} did not say within {ANSWER_WAIT:g} s that '
            "their writers are matched with the bag's readers: the bag may miss the first "
            'instants of their topics')
        return True

    def _participants(self) -> dict[str, bytes]:
        """Return the participant of each node of the run, by its full name, as read now."""
        names = {spec.full_name for spec, _, _ in self.processes}
        found = {}
        for topic, _ in self.node.get_topic_names_and_types():
            for info in self.node.get_publishers_info_by_topic(topic):
                if publisher_node(info) in names:
                    found[publisher_node(info)] = participant_of(info.endpoint_gid)
        return found

    def _spin_ready(self) -> None:
        """
        Run every callback that is ready (waiting ``SPIN_TIMEOUT`` for the first), for a while.

        One callback per turn of the watch loop kept the bag at a few messages per topic and
        second (the nodes publish hundreds): the rest fell out of the subscriptions' queues,
        unrecorded and unsaid. ``DRAIN_BUDGET`` bounds a turn so that the checks still run.
        """
        deadline = time.monotonic() + DRAIN_BUDGET
        timeout = SPIN_TIMEOUT
        while True:
            try:
                handler, _, _ = self.executor.wait_for_ready_callbacks(timeout_sec=timeout)
            except (TimeoutException, ShutdownException):
                return
            handler()
            if handler.exception() is not None:
                raise handler.exception()
            if time.monotonic() > deadline:
                return
            timeout = 0.0

    def write_failures(self) -> list[str]:
        """
        Return what this process could not write, one line each.

        The bag on a full disk, or the messages the bag misses because this process did not
        keep up with the nodes (counted from their publication sequence numbers).
        """
        return [self.recorder_failure] if self.recorder_failure else []

    def writing(self) -> bool:
        """Whether a node says that it is writing its outputs (a fresh writing marker)."""
        ages = [marker_age(path) for path in self.writing_markers]
        return any(age is not None and age < WRITING_FRESH for age in ages)

    def close(self) -> str:
        """
        Stop every node (SIGINT, then SIGTERM, then SIGKILL), close the bag.

        Returns what went wrong ('' if every node stopped on SIGINT). Safe to call twice.
        """
        if getattr(self, '_closed', False):
            return ''
        self._closed = True
        failure = stop_processes(
            [(spec.full_name, process, log) for spec, process, log in self.processes],
            writing=self.writing)
        if self.recorder is not None:  # what the nodes sent before they stopped, still queued
            from soliton_encirclement_ros.recording.recorder import drain
            drain(self.executor, DRAIN_TIMEOUT, SPIN_TIMEOUT)
        # The executor first: a spin_once that timed out can leave its wait set holding the
        # node's handles, and destroying a publisher then waits for them forever.
        self.executor.shutdown()
        if self.recorder is not None:
            self.recorder.close()
            self.recorder_failure = '; '.join(filter(None, [self.recorder.failure,
                                                            self.recorder.missed_line]))
            self.recorder = None
        if getattr(self, 'live', None) is not None:
            self.live.close()
            self.live = None
        if getattr(self, '_bag_ready', None) is not None:
            self._bag_ready.destroy_node()
            self._bag_ready = None
        if getattr(self, 'node', None) is not None:
            self.node.destroy_node()
            self.node = None
        rclpy.try_shutdown(context=self.context)
        self.context.destroy()  # the participant leaves the domain now, not at garbage collection
        if not failure:
            shutil.rmtree(self._log_dir, ignore_errors=True)
        return failure


def stop_processes(processes: Sequence[tuple[str, subprocess.Popen, Path]],
                   stop_timeout: float = STOP_TIMEOUT,
                   writing: Callable[[], bool] = lambda: False,
                   write_timeout: float = WRITE_TIMEOUT, stream=sys.stderr) -> str:
    """
    Stop ``(name, process, log)``: SIGINT, then SIGTERM, then SIGKILL, each after a grace period.

    The SIGINT grace period (``stop_timeout``) runs from the last moment ``writing()`` held, up
    to ``write_timeout`` (a node writing its outputs ignores SIGTERM and must not be killed),
    and this is said once on ``stream``. Returns what went wrong, '' if every process exited
    on SIGINT.
    """
    failure = ''
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        running = [(name, process, log) for name, process, log in processes
                   if process.poll() is None]
        if not running:
            break
        if signum != signal.SIGINT:
            failure = failure or (f'{running[0][0]} did not stop on SIGINT within '
                                  f'{stop_timeout:g} s; log (with its stacks): {running[0][2]}')
        if signum == signal.SIGTERM:
            dump_stacks([(process, log) for _, process, log in running])
        for _, process, _ in running:
            process.send_signal(signum)
        start = grace_from = time.monotonic()
        said = False
        while True:
            alive = [(name, process) for name, process, _ in running if process.poll() is None]
            if not alive:
                break
            now = time.monotonic()
            if signum == signal.SIGINT and now - start < write_timeout and writing():
                grace_from = now  # the grace period restarts while a node is writing
                if now - start > stop_timeout and not said:
                    print(f'swarm_sim: waiting for {", ".join(n for n, _ in alive)} to finish '
                          'writing outputs', file=stream, flush=True)
                    said = True
            if now - grace_from > stop_timeout:
                break
            try:
                alive[0][1].wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
    return failure


def dump_stacks(processes: Sequence[tuple[subprocess.Popen, Path]],
                settle: float = 1.0) -> None:
    """
    Ask each ``(process, log)`` for its threads' Python stacks (SIGUSR1, see ``StopRequest``).

    Returns once every log has grown (the dump is written) or its process has exited, or after
    ``settle`` s, before the caller signals again.
    """
    sizes = {}
    for process, log in processes:
        if process.poll() is None:
            sizes[log] = _size(log)
            process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + settle
    waiting = [(process, log) for process, log in processes if log in sizes]
    while waiting and time.monotonic() < deadline:
        waiting = [(process, log) for process, log in waiting
                   if process.poll() is None and _size(log) <= sizes[log]]
        if waiting:
            time.sleep(0.02)  # polling the logs, bounded by the deadline


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ChildFailed(RuntimeError):
    """A node process died or the clock did not advance."""


def _last_line(log: Path) -> str:
    lines = [line for line in log.read_text(errors='replace').splitlines() if line.strip()]
    return lines[-1] if lines else '(no output)'
