"""
Another swarm already running in this ROS domain: ``swarm_sim`` looks for one before it starts.

Two graphs in one domain hear each other's ``/clock``, agent states and target: duplicate ids,
mixed metrics, a lock-step that cannot tell whose messages it is waiting for. A publisher on
one of ``SWARM_TOPICS`` that exists before this run starts belongs to someone else. The launch
files look too (:func:`launch_problem`, called by ``bringup.launch_support``) when they start
a swarm of their own; a launch of one vehicle's nodes joins the swarm of its domain.
"""
from __future__ import annotations

import os
import time
from typing import Iterable

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Empty

from ros_support.topics import publisher_node
from soliton_encirclement_ros.interface import (
    AGENT_STATES_TOPIC, CLOCK_TOPIC, DOMAIN_IDS, TARGET_STATE_TOPIC)

SWARM_TOPICS = (CLOCK_TOPIC, AGENT_STATES_TOPIC, TARGET_STATE_TOPIC)
# Wall s to hear from the participants already in the domain, at least: past Fast DDS's
# participant announcement period (3 s), so one lost announcement or answer is made up by
# the next periodic one (2 s missed an intruder once, at load, in CI).
DISCOVERY_WAIT = 3.5
BEACON_FACTOR = 3.0    # ... and this many times what our own beacon participant took
MAX_DISCOVERY_WAIT = 10.0
# The nodes a swarm has one of: a launch that starts one of them starts a swarm of its own.
SWARM_WIDE_EXECUTABLES = frozenset({'target_node', 'metrics_node', 'swarm_mobility_node'})
SWARM_SIM_REMEDY = '--domain-id N (or ROS_DOMAIN_ID=N), e.g. --domain-id {free}'
LAUNCH_REMEDY = 'ROS_DOMAIN_ID=N, e.g. ROS_DOMAIN_ID={free} ros2 launch ...'


def other_swarm(wait: float = DISCOVERY_WAIT) -> str | None:
    """
    Return '<node> publishes <topic>' for a publisher of ``SWARM_TOPICS`` in this domain, or None.

    Returns as soon as one is discovered with its node name; None after ``wait`` s of silence,
    or longer on a busy machine: a beacon participant of our own is discovered too, and the
    wait is at least ``BEACON_FACTOR`` times what that took (at most ``MAX_DISCOVERY_WAIT``),
    since another swarm's participants take as long to be heard as ours.
    """
    contexts = [Context(), Context()]
    for context in contexts:
        rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    nodes = []
    try:
        node = Node('swarm_sim_domain_check', context=contexts[0])
        beacon = Node('swarm_sim_domain_beacon', context=contexts[1])
        nodes += [node, beacon]
        beacon_topic = f'/_swarm_sim_domain_beacon_{os.getpid()}'
        beacon.create_publisher(Empty, beacon_topic, 1)
        start = time.monotonic()
        deadline = start + MAX_DISCOVERY_WAIT
        unnamed = None
        heard_beacon = False
        while True:
            for topic in SWARM_TOPICS:
                for info in node.get_publishers_info_by_topic(topic):
                    name = publisher_node(info)
                    if name is None:
                        unnamed = f'a node not yet named publishes {topic}'
                        continue
                    return f'{name} publishes {topic}'
            now = time.monotonic()
            if not heard_beacon and node.count_publishers(beacon_topic):
                heard_beacon = True
                deadline = min(deadline, start + max(wait, BEACON_FACTOR * (now - start)))
            if now > deadline:
                return unnamed
            time.sleep(0.02)
    finally:
        for node in nodes:
            node.destroy_node()
        for context in contexts:
            rclpy.try_shutdown(context=context)
            context.destroy()


def domain_id() -> int:
    """Return the ROS domain this process joins (``ROS_DOMAIN_ID``, 0 when unset)."""
    try:
        return int(os.environ.get('ROS_DOMAIN_ID') or 0)
    except ValueError:
        return 0


def other_swarm_problem(wait: float = DISCOVERY_WAIT, remedy: str = SWARM_SIM_REMEDY,
                        ) -> str | None:
    """
    One line saying which other swarm runs in this domain and how to choose another; or None.

    ``remedy`` says how to choose another domain (``{free}``: a domain id to suggest).
    """
    found = other_swarm(wait)
    if found is None:
        return None
    here = domain_id()
    free = here + 1 if here < DOMAIN_IDS[1] else DOMAIN_IDS[0] + 1
    return (f'another swarm is running in ROS domain {here}: {found}; run this one in another '
            f'domain with {remedy.format(free=free)}')


def starts_a_swarm(executables: Iterable[str]) -> bool:
    """Whether nodes of these executables form a swarm of their own (one has a swarm-wide node)."""
    return not SWARM_WIDE_EXECUTABLES.isdisjoint(executables)


def launch_problem(executables: Iterable[str], wait: float = DISCOVERY_WAIT) -> str | None:
    """
    One line refusing a launch of these node executables into a busy domain; or None.

    The line of ``swarm_sim`` (:func:`other_swarm_problem`), the remedy with ``ROS_DOMAIN_ID``.
    Only a launch that starts a swarm of its own is checked (:func:`starts_a_swarm`): one
    vehicle's nodes (``agent.launch.py``, ``agent_px4.launch.py``) join the swarm of the domain.
    """
    if not starts_a_swarm(executables):
        return None
    return other_swarm_problem(wait, LAUNCH_REMEDY)
