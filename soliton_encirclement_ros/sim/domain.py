"""
Another swarm already running in this ROS domain: ``swarm_sim`` looks for one before it starts.

Two graphs in one domain hear each other's ``/clock``, agent states and target: duplicate ids,
mixed metrics, a lock-step that cannot tell whose messages it is waiting for. A publisher on
one of ``SWARM_TOPICS`` that exists before this run starts belongs to someone else. The launch
files look too (:func:`launch_problem`, called by ``bringup.launch_support``) when they start
a swarm of their own; a launch of one vehicle's nodes joins the swarm of its domain.

Looking alone has a race: two swarms started together both look before either publishes, and
both start. So a swarm **announces itself before it looks** (:class:`Claim`: a publisher on a
roster topic of its own, ``/_swarm_run_<start ns>_<pid>_<nonce>``, kept until the run ends),
and refuses a domain where another run has announced itself earlier (the tie broken by start
time, then pid and nonce: the same order on both sides) or is already running (its roster has
more than the announcement). The run's own nodes join that roster (``ros_support.participants``:
``swarm_sim --processes`` children hear only its members).
"""
from __future__ import annotations

import atexit
import math
import os
import secrets
import time
from typing import Iterable, Iterator

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Empty

from ros_support import distro
from ros_support.topics import publisher_node
from soliton_encirclement_ros.interface import (
    AGENT_STATES_TOPIC, CLOCK_TOPIC, DOMAIN_IDS, TARGET_STATE_TOPIC)

SWARM_TOPICS = (CLOCK_TOPIC, AGENT_STATES_TOPIC, TARGET_STATE_TOPIC)
ROSTER_PREFIX = '/_swarm_run_'  # a run's roster topic: the prefix, then its order (Claim)
# Wall s to hear from the participants already in the domain, at least: past Fast DDS's
# participant announcement period (3 s), so one lost announcement or answer is made up by
# the next periodic one (2 s missed an intruder once, at load, in CI).
DISCOVERY_WAIT = 3.5
BEACON_FACTOR = 3.0    # ... and this many times what our own claim took to be discovered
MAX_DISCOVERY_WAIT = 10.0
# The nodes a swarm has one of: a launch that starts one of them starts a swarm of its own.
SWARM_WIDE_EXECUTABLES = frozenset({'target_node', 'metrics_node', 'swarm_mobility_node'})
SWARM_SIM_REMEDY = '--domain-id N (or ROS_DOMAIN_ID=N), e.g. --domain-id {free}'
LAUNCH_REMEDY = 'ROS_DOMAIN_ID=N, e.g. ROS_DOMAIN_ID={free} ros2 launch ...'


def new_roster_topic() -> tuple[str, tuple[int, int, str]]:
    """Return a roster topic for a run starting now, and its order (start ns, pid, nonce)."""
    order = (time.time_ns(), os.getpid(), secrets.token_hex(4))
    return f'{ROSTER_PREFIX}{order[0]}_{order[1]}_{order[2]}', order


def roster_order(topic: str) -> tuple[int, int, str] | None:
    """Return ``(start ns, pid, nonce)`` of a run's roster topic; None for another topic."""
    if not topic.startswith(ROSTER_PREFIX):
        return None
    parts = topic[len(ROSTER_PREFIX):].split('_')
    if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    return int(parts[0]), int(parts[1]), parts[2]


class Claim:
    """
    This run's announcement in its ROS domain: a participant publishing on its roster topic.

    Made before the domain check looks (so another run starting now sees it) and kept until the
    run ends (:meth:`close`); the run's nodes join the same roster topic (:attr:`topic`).
    :meth:`mark_running` adds a second publisher: another run then knows this one is past its
    check, whatever their start times.
    """

    def __init__(self) -> None:
        self.topic, self.order = new_roster_topic()
        self.context = Context()
        rclpy.init(args=[], context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        try:
            self.node = Node('swarm_sim_claim', context=self.context)
            self._publishers = [self.node.create_publisher(Empty, self.topic, 1)]
        except BaseException:
            self.close()
            raise

    def mark_running(self) -> None:
        """Say that this run is past its check (a second publisher on the roster topic)."""
        if len(self._publishers) == 1:
            self._publishers.append(self.node.create_publisher(Empty, self.topic, 1))

    def close(self) -> None:
        """Leave the domain (safe to call twice)."""
        node, self.node = getattr(self, 'node', None), None
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self.context.destroy()


def other_swarm(wait: float = DISCOVERY_WAIT, claim: Claim | None = None) -> str | None:
    """
    Return who else runs a swarm in this domain (one phrase), or None.

    '<node> publishes <topic>' for a publisher of ``SWARM_TOPICS``, or 'the swarm started by
    process P announced itself ... before this one' for a run (``swarm_sim``, a launch) that
    claimed the domain earlier than ``claim``, or '... is running' for one past its check.
    Returns as soon as one is found; None after ``wait`` s of silence, or longer on a busy
    machine: the wait is at least ``BEACON_FACTOR`` times what the claim (a participant of our
    own) took to be discovered (at most ``MAX_DISCOVERY_WAIT``), since another swarm's
    participants take as long to be heard. Without ``claim`` one is made for the look and
    closed after it.
    """
    own = claim if claim is not None else Claim()
    context = Context()
    rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    try:
        node = Node('swarm_sim_domain_check', context=context)
        start = time.monotonic()
        deadline = start + MAX_DISCOVERY_WAIT
        unnamed = None
        heard_claim = False
        while True:
            for topic in SWARM_TOPICS:
                for info in node.get_publishers_info_by_topic(topic):
                    name = publisher_node(info)
                    if name is None:
                        unnamed = f'a node not yet named publishes {topic}'
                        continue
                    return f'{name} publishes {topic}'
            earlier = _earlier_run(node, own)
            if earlier:
                return earlier
            now = time.monotonic()
            if not heard_claim and node.count_publishers(own.topic):
                heard_claim = True
                deadline = min(deadline, start + max(wait, BEACON_FACTOR * (now - start)))
            if now > deadline:
                return unnamed
            time.sleep(0.02)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
        context.destroy()
        if claim is None:
            own.close()


def _other_runs(node: Node, own_topic: str) -> Iterator[tuple[tuple[int, int, str], int]]:
    """Yield ``(order, publishers)`` of every other run's roster topic with a publisher."""
    for topic, _ in node.get_topic_names_and_types():
        order = roster_order(topic)
        if order is None or topic == own_topic:
            continue
        publishers = node.count_publishers(topic)
        if publishers:
            yield order, publishers


def _running(order: tuple[int, int, str]) -> str:
    return f'the swarm started by process {order[1]} is running'


def _earlier_run(node: Node, own: Claim) -> str | None:
    """Return the phrase for another run that claimed this domain first or runs, or None."""
    for order, publishers in _other_runs(node, own.topic):
        if publishers > 1:
            return _running(order)
        if order < own.order:
            return (f'the swarm started by process {order[1]} announced itself '
                    f'{(own.order[0] - order[0]) * 1e-9:.2f} s before this one')
    return None


def running_beside(node: Node, own_topic: str) -> str | None:
    """Return the phrase for another run past its check (``Claim.mark_running``), or None."""
    for order, publishers in _other_runs(node, own_topic):
        if publishers > 1:
            return _running(order)
    return None


class GraphWatch:
    """
    Another swarm that runs beside this one in its domain, seen in the ROS graph during the run.

    Where rclpy names a message's publisher (Kilted), every node of a run drops another graph's
    messages (``ros_support.participants``) and the outputs stay the run's own. Where it does
    not (Jazzy), they cannot be told apart: a run that the domain check let start beside
    another (discovery slower than the check's wait, on a loaded machine) would mix both
    graphs' messages and end as if whole. There (``active``) the run looks at the graph every
    ``PERIOD`` wall seconds (:meth:`look`) for another run past its check, says so once (a
    warning of the node it looks with) and keeps the first it finds (:attr:`found`, at sim
    time :attr:`at`).
    """

    PERIOD = 0.5

    def __init__(self, own_topic: str, active: bool | None = None) -> None:
        self.own_topic = own_topic
        self.active = (not distro.current().message_info_names_publisher
                       if active is None else active)
        self.found = ''
        self.at = 0.0
        self._next = -math.inf

    def look(self, node: Node, sim_time: float) -> str:
        """Look at ``node``'s graph if due; return what was found so far ('' for nothing)."""
        if self.active and not self.found and time.monotonic() >= self._next:
            self._next = time.monotonic() + self.PERIOD
            phrase = running_beside(node, self.own_topic)
            if phrase:
                self.found, self.at = phrase, sim_time
                node.get_logger().warning(
                    f'another swarm runs in this ROS domain: {phrase}; rclpy here does not say '
                    "which graph sent a message, so this run's outputs mix both graphs' messages")
        return self.found


def domain_id() -> int:
    """Return the ROS domain this process joins (``ROS_DOMAIN_ID``, 0 when unset)."""
    try:
        return int(os.environ.get('ROS_DOMAIN_ID') or 0)
    except ValueError:
        return 0


def other_swarm_problem(wait: float = DISCOVERY_WAIT, remedy: str = SWARM_SIM_REMEDY,
                        claim: Claim | None = None) -> str | None:
    """
    One line saying which other swarm runs in this domain and how to choose another; or None.

    ``remedy`` says how to choose another domain (``{free}``: a domain id to suggest);
    ``claim``: this run's announcement (:func:`other_swarm`).
    """
    found = other_swarm(wait, claim)
    if found is None:
        return None
    here = domain_id()
    return (f'another swarm is running in ROS domain {here}: {found}; run this one in another '
            f'domain with {remedy.format(free=suggested_domain(here))}')


def suggested_domain(here: int) -> int:
    """Return the domain to suggest instead of ``here``: the next one, wrapping past the last."""
    return here + 1 if here < DOMAIN_IDS[1] else DOMAIN_IDS[0] + 1


def claim_domain(wait: float = DISCOVERY_WAIT, remedy: str = SWARM_SIM_REMEDY,
                 ) -> tuple[Claim | None, str | None]:
    """
    Announce this run, then look: ``(claim, None)``, or ``(None, one line)`` if refused.

    The caller keeps the claim until its run ends (``close``); a refused claim is closed here.
    """
    claim = Claim()
    try:
        problem = other_swarm_problem(wait, remedy, claim)
    except BaseException:
        claim.close()
        raise
    if problem:
        claim.close()
        return None, problem
    return claim, None


def starts_a_swarm(executables: Iterable[str]) -> bool:
    """Whether nodes of these executables form a swarm of their own (one has a swarm-wide node)."""
    return not SWARM_WIDE_EXECUTABLES.isdisjoint(executables)


def launch_problem(executables: Iterable[str], wait: float = DISCOVERY_WAIT,
                   hold: bool = False) -> str | None:
    """
    One line refusing a launch of these node executables into a busy domain; or None.

    The line of ``swarm_sim`` (:func:`other_swarm_problem`), the remedy with ``ROS_DOMAIN_ID``.
    Only a launch that starts a swarm of its own is checked (:func:`starts_a_swarm`): one
    vehicle's nodes (``agent.launch.py``, ``agent_px4.launch.py``) join the swarm of the domain.
    ``hold``: the launch process keeps its claim until it exits, so a swarm started later (before
    this one's nodes publish) sees it.
    """
    if not starts_a_swarm(executables):
        return None
    claim, problem = claim_domain(wait, LAUNCH_REMEDY)
    if claim is not None:
        if hold:
            claim.mark_running()
            atexit.register(claim.close)
        else:
            claim.close()
    return problem
