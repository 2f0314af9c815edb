"""
Whose message is it: a graph's own DDS participants told apart from everyone else's (rclpy).

An endpoint's gid starts with the GUID prefix of its DDS participant (one per rclpy context), so
a subscription that asks for the message info knows which participant published each message.
A graph in one process (``swarm_sim``'s lock-step) has one participant, read from a probe
publisher (:func:`own_participant`); a graph spread over processes (``swarm_sim --processes``)
has a **roster**: every member publishes on one roster topic that no other graph uses, and the
publishers of that topic are the graph's participants (:class:`Roster`).

:func:`guard_subscriptions` wraps a node's subscriptions (its ``/clock`` one included) so that
only members' messages reach the callbacks; the others are dropped and counted per topic. A
process learns its graph's roster topic from ``ROSTER_ENV`` (``spin_node`` joins it), and its
parent process from ``PARENT_ENV`` (``lifeline``).

A member that makes readers once the others are up (``swarm_sim --processes``'s recorder) can
ask every member whether its writers are matched with them (:meth:`Roster.call`,
:meth:`Roster.answered`, :meth:`Roster.answer`). A reader matches a writer when its own
participant hears of the writer, the writer matches the reader when the writer's participant
hears of the reader: the two come apart (seen under load: a recorder listening to a writer
that still sent its samples to no one there, lost for a volatile reader). A participant
announces its endpoints in order over a reliable channel, and a participant that hears of a
reader matches its writers with it there and then: a member whose graph shows the call, a
subscription made after the readers, has matched every writer of its own with them. A node on
simulated time says so by publishing on the call's topic once its time source also hears a
``/clock`` writer: that match is the node's own participant hearing of another's writer, which
comes apart from the rest in the same way (seen on a loaded machine: a target that had answered
heard the clock only at 0.51 s, and published nothing before; a bag that held everything sent
still lacked the target's first half second).
"""
from __future__ import annotations

import os
import time
from typing import Callable
import weakref

from rclpy.node import Node
from rclpy.subscription import Subscription
from rclpy.time_source import TimeSource
from std_msgs.msg import Empty

from ros_support.topics import CLOCK_TOPIC, node_of_writer, publisher_node

# An endpoint's gid starts with the GUID prefix of its DDS participant (one per rclpy context).
PARTICIPANT_PREFIX_BYTES = 12
PREFIX_TIMEOUT = 5.0   # s for the graph to list its own probe publisher
ROSTER_ENV = 'SOLITON_ROSTER_TOPIC'  # the roster topic of the graph a child process is part of
READY_SUFFIX = '_ready'  # roster topic + this: the members whose node is built and spins
HEARD_SUFFIX = '_heard'  # roster topic + this: a call (subscription) and its answers (publishers)
# Wall s a publisher may be heard before its participant is seen on the roster: a member's
# roster publisher is discovered with its other endpoints; a participant still unknown after
# this is another graph's.
JOIN_GRACE = 5.0
REFRESH_PERIOD = 0.05  # wall s between two readings of the roster while a sender is unknown
_ROSTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # node -> the roster it is on


def participant_of(gid) -> bytes:
    """Return the participant (GUID prefix) of an endpoint gid (bytes or a list of ints)."""
    return bytes(gid[:PARTICIPANT_PREFIX_BYTES])


def own_participant(node: Node, timeout: float = PREFIX_TIMEOUT) -> bytes | None:
    """
    Return the participant of ``node``'s context, or None if the RMW does not tell.

    Read from the gid of a publisher on a topic no one else uses, created for that and
    destroyed again.
    """
    probe = node.create_publisher(Empty, f'/_participant_probe_{os.getpid()}_{id(node):x}', 1)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = node.get_publishers_info_by_topic(probe.topic_name)
            if found and len(found[0].endpoint_gid) >= PARTICIPANT_PREFIX_BYTES:
                return participant_of(found[0].endpoint_gid)
            time.sleep(0.005)
        return None
    finally:
        node.destroy_publisher(probe)


def message_and_info(args: tuple) -> tuple:
    """
    Return ``(msg, info)`` of a callback's arguments.

    rclpy's EventsExecutor hands a callback that asks for the message info one ``(msg, info)``
    tuple, the other executors two arguments.
    """
    return args[0] if len(args) == 1 else args


def sender(info) -> bytes | None:
    """Return the participant that published a message (its ``MessageInfo``), None if unknown."""
    gid = ((info or {}).get('publisher_gid') or {}).get('data')
    return participant_of(gid) if gid else None


def is_time_source(sub: Subscription) -> bool:
    """Whether ``sub`` is the ``/clock`` subscription of a node's own time source."""
    return isinstance(getattr(sub.callback, '__self__', None), TimeSource)


class Roster:
    """
    The participants of one graph spread over processes: the publishers of its roster topic.

    ``Roster(node, topic)`` makes ``node``'s participant a member (a publisher on ``topic``).
    :meth:`verdict` tells a sender apart: a member (True), another graph's (False: still not a
    member ``JOIN_GRACE`` s after it was first heard), or not known yet (None).
    """

    def __init__(self, node: Node, topic: str) -> None:
        self.node = node
        self.topic = topic
        self._publisher = node.create_publisher(Empty, topic, 1)
        self._ready_publisher = None
        self._call = None  # the subscription of :meth:`call`
        self._answer = None  # the publisher of :meth:`answer`
        self.serve(node)
        self._members: set[bytes] = set()
        self._first_heard: dict[bytes, float] = {}
        self._read_at = -REFRESH_PERIOD

    @classmethod
    def announce(cls, topic: str) -> 'Roster':
        """
        Join ``topic``'s roster first thing in a process, before its node exists.

        From a hidden node of its own (no global arguments: ``__node`` remaps are the real
        node's), so the roster publisher is announced before the endpoints the node makes next:
        the other members know this participant before its first message reaches them.
        """
        member = Node(f'_roster_member_{os.getpid()}', use_global_arguments=False,
                      enable_rosout=False, start_parameter_services=False)
        return cls(member, topic)

    def serve(self, node: Node) -> None:
        """Make ``node`` (of this participant) count its graph by this roster."""
        _ROSTERS[node] = self

    @property
    def members(self) -> set[bytes]:
        """Return the participants on the roster, as read now."""
        self._read()
        return set(self._members)

    def mark_ready(self) -> None:
        """
        Say that this participant's node is built and spins (once; see :attr:`ready`).

        A member joins the roster before its node exists, and the node's time source subscribes
        ``/clock`` as the node is made, before the rest of its set-up: a clock that started
        there would run while the node still builds (seen: a target that first published
        0.68 s into a loaded run).
        """
        if self._ready_publisher is None:
            self._ready_publisher = self.node.create_publisher(Empty, self.topic + READY_SUFFIX,
                                                               1)

    @property
    def ready(self) -> set[bytes]:
        """Return the members whose node spins (:meth:`mark_ready`), as read now."""
        return {participant_of(info.endpoint_gid)
                for info in self.node.get_publishers_info_by_topic(self.topic + READY_SUFFIX)}

    def call(self) -> None:
        """
        Ask every member to say once its writers are matched with this member's readers (once).

        Call it after the readers are made: it covers those made before it (see the module's
        doc); :meth:`answered` says who has answered.
        """
        if self._call is None:
            self._call = self.node.create_subscription(Empty, self.topic + HEARD_SUFFIX,
                                                       lambda msg: None, 1)

    @property
    def answered(self) -> set[bytes]:
        """Return the members that have answered a :meth:`call`, as read now."""
        return {participant_of(info.endpoint_gid)
                for info in self.node.get_publishers_info_by_topic(self.topic + HEARD_SUFFIX)}

    def answer(self) -> bool:
        """
        Answer a member's :meth:`call` once this participant has heard of it; return whether done.

        Once answered, True without looking again.
        """
        if self._answer is None and self.node.count_subscribers(self.topic + HEARD_SUFFIX):
            self._answer = self.node.create_publisher(Empty, self.topic + HEARD_SUFFIX, 1)
        return self._answer is not None

    def _read(self) -> None:
        self._read_at = time.monotonic()
        self._members.update(participant_of(info.endpoint_gid)
                             for info in self.node.get_publishers_info_by_topic(self.topic))

    def verdict(self, participant: bytes | None) -> bool | None:
        """Whether ``participant`` (a sender, :func:`sender`) is a member; None: not known yet."""
        if participant is None or participant in self._members:
            return True  # an RMW that does not tell the sender: nothing to tell apart by
        now = time.monotonic()
        if now - self._read_at >= REFRESH_PERIOD:
            self._read()
            if participant in self._members:
                self._first_heard.pop(participant, None)
                return True
        first = self._first_heard.setdefault(participant, now)
        return False if now - first > JOIN_GRACE else None

    def close(self) -> None:
        self.node.destroy_publisher(self._publisher)
        if self._ready_publisher is not None:
            self.node.destroy_publisher(self._ready_publisher)
        if self._answer is not None:
            self.node.destroy_publisher(self._answer)
        if self._call is not None:
            self.node.destroy_subscription(self._call)

    def destroy_node(self) -> None:
        """Destroy the node of :meth:`announce`."""
        self.node.destroy_node()


def listening_nodes(node: Node, publisher) -> int:
    """
    Return how many other nodes of ``node``'s own graph subscribe to ``publisher``'s topic.

    Nodes, not subscriptions: a node with ``use_sim_time`` subscribes ``/clock`` through its
    time source and may again on its own, and ``node``'s own subscriptions are not counted. All
    nodes for a node on no roster; on one, only the members' whose node is built and spins
    (:meth:`Roster.mark_ready`): a node that waits until its graph listens (the mobility node's
    ``clock_subscribers``) is neither started early by another graph's subscriptions nor by a
    member's time source while the rest of that node is still being made.
    """
    roster = _ROSTERS.get(node)
    members = None if roster is None else roster.ready
    own = node.get_fully_qualified_name()
    # A subscription whose node's name has not arrived yet is no node to count: counted as one
    # "unknown" node, it made a clock start early (while a member's name was late, the member
    # counted under its name and as that unknown node).
    return len({publisher_node(info)
                for info in node.get_subscriptions_info_by_topic(publisher.topic_name)
                if (members is None or participant_of(info.endpoint_gid) in members)}
               - {own, None})


def answer_calls(node: Node, roster: Roster | None) -> Callable[[], None]:
    """
    Return what ``node``'s spin loop calls now and then to answer a :meth:`Roster.call`.

    It answers once the node's ``/clock`` subscription is matched with a writer (the node will
    hear the clock from its first tick) and its participant has heard of the call (see the
    module's doc). It looks every ``REFRESH_PERIOD`` at most, and only until it has answered or
    the node's simulated clock has started (a call holds the start of a run; a node on wall
    time, or without a roster, never looks).
    """
    clock = node.get_clock()
    if roster is None or not clock.ros_time_is_active:
        return lambda: None
    looked_at = [-REFRESH_PERIOD]
    done = [False]

    def answer() -> None:
        now = time.monotonic()
        if done[0] or now - looked_at[0] < REFRESH_PERIOD:
            return
        looked_at[0] = now
        done[0] = (hears_clock(node) and roster.answer()) or clock.now().nanoseconds > 0
    return answer


def hears_clock(node: Node) -> bool:
    """Whether one of ``node``'s ``/clock`` subscriptions (its time source's) has a writer."""
    return any(sub.get_publisher_count() > 0 for sub in node.subscriptions
               if sub.topic_name == CLOCK_TOPIC)


class ForeignCount:
    """Messages dropped because another graph sent them: per topic, with the first sender named."""

    def __init__(self, node: Node, on_first: Callable[[str, str], None] | None = None) -> None:
        self.node = node
        self.counts: dict[str, int] = {}
        self.senders: dict[str, str] = {}  # topic -> '/node' of the first foreign publisher
        self.on_first = on_first

    def add(self, topic: str, info) -> None:
        self.counts[topic] = self.counts.get(topic, 0) + 1
        if self.counts[topic] == 1:
            self.senders[topic] = self._node_name(topic, info)
            if self.on_first is not None:
                self.on_first(topic, self.senders[topic])

    def _node_name(self, topic: str, info) -> str:
        gid = ((info or {}).get('publisher_gid') or {}).get('data')
        if not gid:
            return 'a publisher outside this graph'
        return node_of_writer(bytes(gid), self.node.get_publishers_info_by_topic(topic)) or \
            'a node not named yet'


def guard_subscriptions(node: Node, roster: Roster, foreign: ForeignCount) -> int:
    """
    Let only the roster's messages reach ``node``'s subscriptions; return how many are guarded.

    Each subscription not guarded yet (call again after the node adds some) asks for the
    message info, and its callback runs only for a member's message; another graph's is
    counted in ``foreign`` and dropped, and one from a sender not known yet is dropped (at a
    start, before discovery names it). A node's time source, too: its clock then follows only
    the graph's own ``/clock``.
    """
    guarded = 0
    for sub in node.subscriptions:
        if getattr(sub.callback, 'guarded', False):
            guarded += 1
            continue
        callback = sub.callback
        wants_info = sub._callback_type == Subscription.CallbackType.WithMessageInfo
        topic = sub.topic_name

        def guard(*args, _callback=callback, _wants_info=wants_info, _topic=topic):
            msg, info = message_and_info(args)
            verdict = roster.verdict(sender(info))
            if verdict:
                if _wants_info:
                    _callback(msg, info)
                else:
                    _callback(msg)
            elif verdict is False:
                foreign.add(_topic, info)
        guard.guarded = True
        sub.callback = guard  # the setter calls it a message-only callback (one argument)
        sub._callback_type = Subscription.CallbackType.WithMessageInfo  # rclpy: no setter
        guarded += 1
    return guarded
