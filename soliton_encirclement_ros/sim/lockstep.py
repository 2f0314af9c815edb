"""
The lock-step core: rclpy nodes on one executor, run on a simulated clock one instant at a time.

``set_time`` sets every node's clock at once (one synchronous call, no /clock delivery per
node); ``drain`` then runs the executor until the graph is quiescent at that instant: every
timer due has fired and every message published inside the graph has reached each of its
in-graph subscriptions (publishes and deliveries are counted). ``swarm_sim``'s in-process graph
and the tests' ``Harness`` both step their nodes with it.

Only the graph's own messages count: a message whose publisher is outside the graph's DDS
participant (another swarm in the same ROS domain, ``ros2 topic pub``) is dropped, counted apart
in ``foreign`` and reported once per topic, so it can neither unbalance the count nor make the
run depend on something other than its seed. The senders are told apart by
``ros_support.participants``, as the nodes of ``swarm_sim --processes`` tell theirs.

``direct=True`` (``swarm_sim``'s in-process graph) takes DDS off the lock-step's own path: the
lock-step calls every due timer itself (the timers are taken from the executor) and hands each
message published in the graph straight to the graph's subscriptions of that topic and type,
once, after the instant's last timer callback. A message still goes to DDS when a subscription
outside the graph matches its publisher (``ros2 topic echo``, a recorder elsewhere; asked every
``OUTSIDE_CHECK_NS`` of sim time), and always on a transient-local publisher (late joiners get
the last value); one executor turn per instant serves services and reports foreign messages.
The graph's own messages coming back over DDS (while something outside listens) were delivered
already and are dropped. A subscriber gets the publisher's message object, not a copy: it must
not keep it (every node of the package converts what it hears at once). The tests' ``Harness``
keeps the DDS path (``direct=False``).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, qos_check_compatible, QoSCompatibility
from rclpy.subscription import Subscription
from rclpy.time import Time
from rclpy.time_source import TimeSource
from rosgraph_msgs.msg import Clock

from ros_support.participants import (
    ForeignCount, is_time_source, message_and_info, own_participant, sender)

QUEUE_WAIT = 0.0005          # s an executor turn may wait for an event still being posted
STALL_TIMEOUT = 10.0         # s of wall time without reaching quiescence before giving up
DEFAULT_STEP_NS = 10_000_000  # clock step when no timer is pending
# Sim ns between asking a publisher (direct mode) whether something outside the graph listens:
# a listener that joins is served from the next such instant on.
OUTSIDE_CHECK_NS = 100_000_000


class Audience:
    """
    Which of ``publishers`` have more than ``known`` subscriptions, as their indices.

    Asked again at most every ``OUTSIDE_CHECK_NS`` of sim time (a call is then a comparison):
    a listener that joins is served from the next such instant on.
    """

    def __init__(self, publishers, known: int = 0) -> None:
        self.publishers = list(publishers)
        self.known = known
        self._asked_ns = -OUTSIDE_CHECK_NS - 1
        self._heard: list[int] = []

    @property
    def publisher(self):
        """Return the first of the publishers, for an audience of one."""
        return self.publishers[0]

    def __call__(self, now_ns: int) -> list[int]:
        if not self._asked_ns <= now_ns < self._asked_ns + OUTSIDE_CHECK_NS:
            self._asked_ns = now_ns
            self._heard = [i for i, pub in enumerate(self.publishers)
                           if pub.get_subscription_count() > self.known]
        return self._heard


class LockStepStalled(RuntimeError):
    """The graph did not reach quiescence within the stall timeout."""


class LockStep:
    """
    Step ``nodes`` (all on ``executor``, all in one rclpy context) in lock-step on a sim clock.

    ``on_foreign(topic)`` is called the first time a message from outside the graph arrives on
    a topic (default: one warning from the first node).
    """

    def __init__(self, executor, nodes: Iterable[Node], stall_timeout: float = STALL_TIMEOUT,
                 on_foreign: Callable[[str], None] | None = None, direct: bool = False,
                 turn_period_ns: int = 0):
        self.executor = executor
        self.nodes = list(nodes)
        # Direct mode: sim ns between two executor turns (services, messages from outside);
        # 0: a turn every instant. A graph whose own nodes hear nothing over DDS may space them.
        self.turn_period_ns = turn_period_ns
        self._next_turn_ns = 0
        self.stall_timeout = stall_timeout
        self.now_ns = 0
        self.on_foreign = on_foreign or self._warn_foreign
        # Messages from outside the graph, dropped: per topic, with the first sender's node.
        self.foreign_count = ForeignCount(self.nodes[0], lambda topic, who: self.on_foreign(
            topic)) if self.nodes else None
        self._own_prefix = own_participant(self.nodes[0]) if self.nodes else None
        # Direct delivery needs to tell the graph's own messages coming back over DDS apart.
        self.direct = direct and self._own_prefix is not None
        self._queue: list = []         # (callbacks, message) published, not yet delivered
        self._originals: dict = {}     # subscription -> its callback before counting
        # Called once the queue is empty (direct mode), e.g. to hand out what was gathered.
        self.after_delivery: list[Callable[[], None]] = []
        self._taken = 0                # messages taken from DDS (own or foreign)
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
            if is_time_source(sub):
                node.destroy_subscription(sub)

    @property
    def foreign(self) -> dict[str, int]:
        """Return the messages from outside the graph, dropped, per topic."""
        return dict(self.foreign_count.counts) if self.foreign_count is not None else {}

    def _warn_foreign(self, topic: str) -> None:
        self.nodes[0].get_logger().warning(
            f'ignoring messages on {topic} from a publisher outside this graph (another swarm '
            'or tool publishing in this ROS domain?); they are not part of this run')

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

        Call again after a node adds publishers, subscriptions or timers (idempotent). In
        direct mode it routes each publisher to the graph's subscriptions of its topic instead
        and takes the timers from the executor.
        """
        self._subscribers = self.subscriber_counts()
        if self.direct:
            self._adopt_timers()
        else:
            self._timers = [timer for node in self.nodes for timer in node.timers]
        for timer in self._timers:
            if not getattr(timer.callback, 'counted', False):
                timer.callback = self._once_per_instant(timer)
        for node in self.nodes:
            for sub in node.subscriptions:
                if not getattr(sub.callback, 'counted', False):
                    self._count_deliveries(sub)
        in_graph: dict[str, list] = {}  # topic -> the graph's subscriptions direct mode calls
        if self.direct:
            for node in self.nodes:
                for sub in node.subscriptions:
                    if sub in self._originals:
                        in_graph.setdefault(sub.topic_name, []).append(sub)
        for node in self.nodes:
            for pub in node.publishers:
                if self.direct:
                    self._route(pub, in_graph.get(pub.topic_name, ()))
                elif not getattr(pub.publish, 'counted', False):
                    pub.publish = self._counted_publish(pub)

    def _adopt_timers(self) -> None:
        """
        Take the nodes' timers from the executor: the lock-step calls them (direct mode).

        A timer leaves its node's list (the executor only sees the nodes' lists), so
        ``destroy_node`` no longer destroys it: :meth:`close_timers` does.
        """
        for node in self.nodes:
            while node._timers:  # rclpy: a node's timers, as its executor sees them
                self._timers.append(node._timers.pop(0))

    def close_timers(self) -> None:
        """Destroy the timers taken from the nodes (direct mode); safe to call twice."""
        for timer in self._timers:
            try:
                timer.destroy()
            except Exception:  # noqa: B902 - already destroyed with its context
                pass
        self._timers = []

    def _route(self, pub, topic_subscriptions) -> None:
        """
        Wrap ``pub`` (direct mode): in-graph subscriptions get the message, DDS only if needed.

        The routes are those of the graph's subscriptions ``topic_subscriptions`` of ``pub``'s
        topic with its type and a compatible QoS, the ones DDS would deliver to; recomputed at
        every :meth:`instrument`.
        """
        routes = [self._originals[sub] for sub in topic_subscriptions
                  if sub.msg_type is pub.msg_type
                  and qos_check_compatible(pub.qos_profile, sub.qos_profile)[0]
                  != QoSCompatibility.ERROR]
        if getattr(pub.publish, 'counted', False):
            pub.publish.routes[:] = routes
            pub.publish.outside.known = len(routes)
            return
        publish = pub.publish
        latched = pub.qos_profile.durability == DurabilityPolicy.TRANSIENT_LOCAL
        queue = self._queue
        outside = Audience([pub], known=len(routes))  # subscriptions beyond the graph's

        def direct(msg):
            # Someone outside the graph listens (or a late joiner must get it): DDS too.
            if latched or outside(self.now_ns):
                publish(msg)
            if routes:
                queue.append((routes, msg))
        direct.counted = True
        direct.routes = routes
        direct.outside = outside
        pub.publish = direct

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

    def _count_deliveries(self, sub: Subscription) -> None:
        """
        Wrap ``sub``'s callback: count the graph's own messages, drop the others.

        The callback asks for the message info (the publisher's gid). rclpy's EventsExecutor
        hands such a callback one ``(msg, info)`` tuple, the other executors two arguments, so
        the wrapper takes both forms.
        """
        callback = sub.callback
        wants_info = sub._callback_type == Subscription.CallbackType.WithMessageInfo
        topic = sub.topic_name
        if not (wants_info or sub.raw):
            self._originals[sub] = callback  # what direct delivery calls

        prefix = self._own_prefix

        def deliver(msg, info):
            self._delivered += 1
            if wants_info:
                callback(msg, info)
            else:
                callback(msg)

        def counted(msg):  # nothing to tell the graph's messages from others' by
            deliver(msg, None)

        def counted_own(*args):
            msg, info = message_and_info(args)
            origin = sender(info)
            self._taken += 1
            if origin is None or origin == prefix:
                if self.direct:
                    return  # delivered directly when it was published
                self._delivered += 1
                if wants_info:
                    callback(msg, info)
                else:
                    callback(msg)
                return
            self.foreign_count.add(topic, info)

        wrapper = counted if prefix is None else counted_own
        wrapper.counted = True
        sub.callback = wrapper  # the setter calls it a message-only callback (one argument)
        if prefix is not None:
            sub._callback_type = Subscription.CallbackType.WithMessageInfo  # rclpy: no setter

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
        if self.direct:
            self._drain_direct()
            return
        deadline = time.monotonic() + self.stall_timeout
        while not self.quiescent():
            self.executor.spin_once(timeout_sec=QUEUE_WAIT)
            if time.monotonic() > deadline:
                raise LockStepStalled(f'lock-step stalled at t={self.now_ns * 1e-9:.2f} s: '
                                      f'{self.undelivered} message(s) undelivered')

    def _drain_direct(self) -> None:
        """
        Call each due timer once, then deliver what they published, then one executor turn.

        Delivering after the last timer makes the outcome independent of the timers' order: no
        timer callback sees a message of its own instant (as when every message arrives over
        DDS after the instant's timers).

        The turn (repeated while it takes messages) serves services and the messages from DDS,
        at most once every ``turn_period_ns``.
        """
        if any(node._timers for node in self.nodes):  # created since (a changed period)
            self.instrument()
        for timer in self._timers:
            wait = timer.time_until_next_call()
            if wait is None or wait > 0:
                continue
            try:
                with timer.handle:
                    timer.handle.call_timer()
            except Exception:  # noqa: B902 - cancelled or destroyed meanwhile: not due
                continue
            timer.callback()
        self._deliver()  # after every timer of the instant: none sees this instant's messages
        if self.now_ns < self._next_turn_ns:
            return
        self._next_turn_ns = self.now_ns + self.turn_period_ns
        while True:
            taken = self._taken
            self.executor.spin_once(timeout_sec=0)
            if self._queue:
                self._deliver()
            if self._taken == taken:
                break

    def _deliver(self) -> None:
        """Hand every queued message to its in-graph subscriptions, until none is left."""
        queue = self._queue
        while queue:
            batch = queue[:]
            del queue[:]
            for callbacks, msg in batch:
                for callback in callbacks:
                    callback(msg)
            if not queue:
                for hook in self.after_delivery:
                    hook()

    def next_due_ns(self) -> int:
        """Sim time of the earliest timer due next (``DEFAULT_STEP_NS`` ahead if none)."""
        waits = [t.time_until_next_call() for t in self._timers]
        return self.now_ns + max(
            1, min((w for w in waits if w is not None), default=DEFAULT_STEP_NS))
