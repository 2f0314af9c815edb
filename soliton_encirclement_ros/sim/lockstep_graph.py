"""
What every in-process graph shares: its rclpy context, the lock-step, ``/clock``, the taps.

``inprocess.InProcessGraph`` (one node per agent) and ``engine_graph.EngineGraph`` (the swarm as
arrays in one node) both step their nodes in lock-step on a simulated clock
(``sim.lockstep.LockStep``): after each clock step the executor runs until the graph is quiescent
before the clock moves on. The runner's own node publishes ``/clock`` for tools outside. This
module imports none of the node classes: a run with ``--engine`` builds none of them.
"""
from __future__ import annotations

import time
from typing import Callable

import rclpy
from rclpy.context import Context
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.signals import SignalHandlerOptions
from rosgraph_msgs.msg import Clock

from ros_support.publishing import Publishing
from ros_support.topics import CLOCK_TOPIC
from soliton_encirclement_ros.sim.domain import GraphWatch
from soliton_encirclement_ros.sim.lockstep import LockStep

CLOCK_PUBLISH_PERIOD_NS = 10_000_000  # /clock for tools outside the process (100 Hz sim time)
MATCH_TIMEOUT = 20.0         # s to wait for every in-graph publisher to see its subscribers
STALL_TIMEOUT = 10.0         # s of wall time without reaching quiescence before giving up
RECORDER_DISCOVERY_PERIOD_NS = 1_000_000_000


class LockStepGraph:
    """
    What every in-process graph shares: its rclpy context, the lock-step, ``/clock``, the taps.

    A subclass calls :meth:`_open_context`, makes its nodes and the ``swarm_sim`` node
    (``clock_node``: it publishes ``/clock`` and holds the bag recorder and the live relay), then
    :meth:`_start_lock_step`. ``run`` steps the clock.
    """

    nodes: list[Node]
    clock_node: Node
    turn_period_ns = 0  # the lock-step's executor turns: every instant

    def _open_context(self) -> None:
        self.context = Context()
        # The runner owns SIGINT/SIGTERM (ros_support.spin.StopRequest): an interrupt
        # never surfaces inside a node's callback.
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.nodes = []
        self.recorder = None
        self.live = None  # the Foxglove relay of --foxglove
        self._next_clock_publish_ns = 0
        self._next_discovery_ns = 0

    def _make_clock_node(self) -> Node:
        self.clock_node = Node('swarm_sim', context=self.context,
                               parameter_overrides=[Parameter('use_sim_time', value=True)])
        self._clock_pub = self.clock_node.create_publisher(Clock, CLOCK_TOPIC, 10)
        self._publish_clock = Publishing(self.clock_node.get_logger())  # drops a refused one
        return self.clock_node

    def _start_lock_step(self, scenario, record: str, storage: str,
                         live: tuple[str, int] | None) -> None:
        """Put every node on one executor under the lock-step; add the bag and the live view."""
        self.executor = EventsExecutor(context=self.context)
        # Direct delivery (no DDS between the graph's own nodes) unless a bag is recorded
        # or the live view serves the run here: both take serialised messages from DDS.
        # Made before the nodes join the executor, which then never sees the timers the
        # lock-step calls.
        self.lockstep = LockStep(self.executor, [self.clock_node, *self.nodes],
                                 STALL_TIMEOUT, direct=not record and live is None,
                                 turn_period_ns=self.turn_period_ns)
        self.lockstep.after_delivery.extend(self._after_delivery())
        for node in [self.clock_node, *self.nodes]:
            self.executor.add_node(node)
        self.lockstep.wait_for_matching(MATCH_TIMEOUT)
        if record:
            from soliton_encirclement_ros.provenance import bag_custom_data
            from soliton_encirclement_ros.recording.recorder import BagRecorder
            self.recorder = BagRecorder(
                self.clock_node, record, storage=storage,
                custom_data=bag_custom_data('swarm_sim', scenario.as_dict()))
            self.recorder.discover()
            self.lockstep.wait_for_matching(MATCH_TIMEOUT)
        if live is not None:
            # Its subscriptions are in the graph (counted by the lock-step like the
            # recorder's); it only forwards bytes, so the run's results do not change.
            from soliton_encirclement_ros.live.relay import FoxgloveRelay
            self.live = FoxgloveRelay(self.clock_node, host=live[0], port=live[1])
            self.live.discover()
            self.lockstep.wait_for_matching(MATCH_TIMEOUT)
        self.lockstep.instrument()

    def _after_delivery(self) -> list[Callable[[], None]]:
        """Return what the lock-step calls once an instant's messages are delivered (direct)."""
        return []

    def _before_drain(self) -> None:
        """Do what this graph does itself at an instant, before its nodes' timers run."""

    def _next_due_ns(self) -> int:
        """Return the sim time of the next instant something is due."""
        return self.lockstep.next_due_ns()

    @property
    def sim_time_ns(self) -> int:
        return self.lockstep.now_ns

    @property
    def sim_time(self) -> float:
        return self.sim_time_ns * 1e-9

    def step(self) -> None:
        """
        Set every node's clock to the current sim time and run everything due.

        /clock is published every CLOCK_PUBLISH_PERIOD_NS for tools outside.
        """
        clock = self.lockstep.set_time(self.sim_time_ns)
        if self.sim_time_ns >= self._next_clock_publish_ns:
            self._publish_clock(self._clock_pub, clock)
            self._next_clock_publish_ns += CLOCK_PUBLISH_PERIOD_NS
        self._before_drain()
        self.lockstep.drain()
        if self.live is not None:
            self.live.tick()
        if self.sim_time_ns >= self._next_discovery_ns:
            self._next_discovery_ns += RECORDER_DISCOVERY_PERIOD_NS
            added = [tap.discover() for tap in (self.recorder, self.live) if tap is not None]
            if any(added):
                self.lockstep.instrument()

    def run(self, duration: float, real_time_factor: float = 0.0,
            on_progress: Callable[[int], None] = lambda sim_time_ns: None,
            should_stop: Callable[[], bool] = lambda: False,
            watch: GraphWatch | None = None) -> None:
        """
        Advance the clock to ``duration`` s (or until ``should_stop()``).

        ``real_time_factor`` 0 runs unpaced. ``watch`` looks at the graph for another swarm as
        the run goes (``sim.domain.GraphWatch``).
        """
        end_ns = round(duration * 1e9)
        wall_start = time.perf_counter()
        start_ns = self.sim_time_ns
        self.step()
        while self.sim_time_ns < end_ns and not should_stop():
            self.lockstep.now_ns = min(self._next_due_ns(), end_ns)
            self.step()
            if real_time_factor > 0:
                ahead = (self.sim_time_ns - start_ns) * 1e-9 / real_time_factor - (
                    time.perf_counter() - wall_start)
                if ahead > 0:
                    time.sleep(ahead)
            on_progress(self.sim_time_ns)
            if watch is not None:
                watch.look(self.clock_node, self.sim_time)

    def write_failures(self) -> list[str]:
        """Return what could not be written during the run (a full disk), one line each."""
        return [self.recorder.failure] if self.recorder is not None and \
            self.recorder.failure else []

    def close(self) -> None:
        """Close the bag, destroy the nodes and the context; safe to call twice."""
        if getattr(self, '_closed', False):
            return
        self._closed = True
        if self.recorder is not None:
            self.recorder.close()
        if self.live is not None:
            self.live.close()
        if hasattr(self, 'lockstep'):
            self.lockstep.close_timers()
        for node in getattr(self, 'nodes', []) + (
            [self.clock_node] if hasattr(self, 'clock_node') else []
        ):
            node.destroy_node()
        self.nodes = []
        if hasattr(self, 'clock_node'):
            del self.clock_node
        if hasattr(self, 'executor'):
            self.executor.shutdown()
        rclpy.try_shutdown(context=self.context)
        # Only now does the DDS participant leave the domain: until then, another graph started
        # by this process would still see this one's publishers.
        self.context.destroy()
