"""
The lock-step core: rclpy nodes on one executor, run on a simulated clock one instant at a time.

``set_time`` sets every node's clock at once (one synchronous call, no /clock delivery per
node); ``drain`` then runs the executor until the graph is quiescent at that instant: every
timer due has fired and every message published inside the graph has reached each of its
in-graph subscriptions (publishes and deliveries are counted). ``swarm_sim``'s in-process graph
and the tests' ``Harness`` both step their nodes with it.
"""
from __future__ import annotations

import time
from typing import Iterable

from rclpy.node import Node
from rclpy.time import Time
from rclpy.time_source import TimeSource
from rosgraph_msgs.msg import Clock

QUEUE_WAIT = 0.0005          # s an executor turn may wait for an event still being posted
STALL_TIMEOUT = 10.0         # s of wall time without reaching quiescence before giving up
DEFAULT_STEP_NS = 10_000_000  # clock step when no timer is pending


class LockStep:
    """Step ``nodes`` (all on ``executor``) in lock-step on a simulated clock."""

    def __init__(self, executor, nodes: Iterable[Node], stall_timeout: float = STALL_TIMEOUT):
        self.executor = executor
        self.nodes = list(nodes)
        self.stall_timeout = stall_timeout
        self.now_ns = 0
        self._time_source = TimeSource()
        self._time_source.ros_time_is_active = True
        for node in self.nodes:
            self._time_source.attach_clock(node.get_clock())
            self._unsubscribe_clock(node)
        self._owed = self._delivered = 0
        self._subscribers: dict[str, int] = {}
        self._timers: list = []
        self.instrument()

    @staticmethod
    def _unsubscribe_clock(node: Node) -> None:
        """
        Drop the /clock subscription of ``node``'s own time source (``use_sim_time``).

        The lock-step sets every clock itself. That subscription (best effort, depth 1) would
        set the node's clock again when a /clock message is handled, which can be after the
        next ``set_time``: the node's clock would step back one instant, its timers fire twice
        at one time and the run stops being reproducible.
        """
        for sub in list(node.subscriptions):
            if isinstance(getattr(sub.callback, '__self__', None), TimeSource):
                node.destroy_subscription(sub)

    @property
    def undelivered(self) -> int:
        return self._owed - self._delivered

    def subscriber_counts(self) -> dict[str, int]:
        """Count the in-graph subscriptions per topic."""
        counts: dict[str, int] = {}
        for node in self.nodes:
            for sub in node.subscriptions:
                counts[sub.topic_name] = counts.get(sub.topic_name, 0) + 1
        return counts

    def wait_for_matching(self, timeout: float) -> None:
        """Block until every in-graph publisher sees all in-graph subscriptions of its topic."""
        subscribers = self.subscriber_counts()
        publishers = [pub for node in self.nodes for pub in node.publishers
                      if pub.topic_name in subscribers]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            waiting = [
                p for p in publishers if p.get_subscription_count() < subscribers[p.topic_name]
            ]
            if not waiting:
                return
            time.sleep(0.01)
        raise RuntimeError(f'DDS discovery incomplete after {timeout} s for '
                           f'{sorted({p.topic_name for p in waiting})}')

    def instrument(self) -> None:
        """
        Count in-graph deliveries: a publish owes a callback per matched in-graph subscription.

        Call again after a node adds publishers, subscriptions or timers (idempotent).
        """
        self._subscribers = self.subscriber_counts()
        self._timers = [timer for node in self.nodes for timer in node.timers]
        for timer in self._timers:
            if not getattr(timer.callback, 'counted', False):
                timer.callback = self._once_per_instant(timer)
        for node in self.nodes:
            for sub in node.subscriptions:
                if not getattr(sub.callback, 'counted', False):
                    sub.callback = self._counted_callback(sub.callback)
            for pub in node.publishers:
                if not getattr(pub.publish, 'counted', False):
                    pub.publish = self._counted_publish(pub)

    def _once_per_instant(self, timer):
        """
        Run ``timer``'s callback at most once per sim instant.

        rclpy's EventsExecutor can dispatch a timer twice at one instant; its second
        ``rcl_timer_call`` then moves the next call one period too far. The second dispatch is
        skipped and the timer reset (next call = now + period: the same phase).
        """
        callback, last = timer.callback, [None]

        def once():
            if last[0] == self.now_ns:
                timer.reset()
                return
            last[0] = self.now_ns
            callback()
        once.counted = True
        return once

    def _counted_callback(self, callback):
        def counted(msg):
            self._delivered += 1
            callback(msg)
        counted.counted = True
        return counted

    def _counted_publish(self, pub):
        publish = pub.publish

        def counted(msg):
            # A subscription that never matched (incompatible QoS) is owed nothing.
            in_graph = self._subscribers.get(pub.topic_name, 0)
            self._owed += min(in_graph, pub.get_subscription_count()) if in_graph else 0
            publish(msg)
        counted.counted = True
        return counted

    def quiescent(self) -> bool:
        """Every in-graph message handled and no timer due at the current time."""
        if self._delivered < self._owed:
            return False
        for timer in self._timers:
            remaining = timer.time_until_next_call()
            if remaining is not None and remaining <= 0:
                return False
        return True

    def set_time(self, now_ns: int) -> Clock:
        """Set every node's clock to ``now_ns``; return the /clock message of that time."""
        self.now_ns = now_ns
        clock = Clock(clock=Time(nanoseconds=now_ns).to_msg())
        self._time_source.clock_callback(clock)
        return clock

    def drain(self) -> None:
        """Run callbacks until the graph is quiescent at the current time."""
        deadline = time.monotonic() + self.stall_timeout
        while not self.quiescent():
            self.executor.spin_once(timeout_sec=QUEUE_WAIT)
            if time.monotonic() > deadline:
                raise RuntimeError(f'lock-step stalled at t={self.now_ns * 1e-9:.2f} s: '
                                   f'{self.undelivered} message(s) undelivered')

    def next_due_ns(self) -> int:
        """Sim time of the earliest timer due next (``DEFAULT_STEP_NS`` ahead if none)."""
        waits = [t.time_until_next_call() for t in self._timers]
        return self.now_ns + max(
            1, min((w for w in waits if w is not None), default=DEFAULT_STEP_NS))
