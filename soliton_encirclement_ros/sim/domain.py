"""
Another swarm already running in this ROS domain: ``swarm_sim`` looks for one before it starts.

Two graphs in one domain hear each other's ``/clock``, agent states and target: duplicate ids,
mixed metrics, a lock-step that cannot tell whose messages it is waiting for. A publisher on
one of ``SWARM_TOPICS`` that exists before this run starts belongs to someone else.
"""
from __future__ import annotations

import os
import time

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from soliton_encirclement_ros.interface import (
    AGENT_STATES_TOPIC, CLOCK_TOPIC, DOMAIN_IDS, TARGET_STATE_TOPIC)

SWARM_TOPICS = (CLOCK_TOPIC, AGENT_STATES_TOPIC, TARGET_STATE_TOPIC)
DISCOVERY_WAIT = 1.0   # wall s to hear from the participants already in the domain
UNKNOWN_NODE = '_NODE_NAME_UNKNOWN_'  # what the graph says until a node's name is discovered


def other_swarm(wait: float = DISCOVERY_WAIT) -> str | None:
    """
    Return '<node> publishes <topic>' for a publisher of ``SWARM_TOPICS`` in this domain, or None.

    Returns as soon as one is discovered with its node name; None after ``wait`` s of silence.
    """
    context = Context()
    rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = None
    try:
        node = Node('swarm_sim_domain_check', context=context)
        deadline = time.monotonic() + wait
        unnamed = None
        while True:
            for topic in SWARM_TOPICS:
                for info in node.get_publishers_info_by_topic(topic):
                    if info.node_name == UNKNOWN_NODE:
                        unnamed = f'a node not yet named publishes {topic}'
                        continue
                    name = '/'.join((info.node_namespace.rstrip('/'), info.node_name))
                    return f'{name} publishes {topic}'
            if time.monotonic() > deadline:
                return unnamed
            time.sleep(0.02)
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
        context.destroy()


def domain_id() -> int:
    """Return the ROS domain this process joins (``ROS_DOMAIN_ID``, 0 when unset)."""
    try:
        return int(os.environ.get('ROS_DOMAIN_ID') or 0)
    except ValueError:
        return 0


def other_swarm_problem(wait: float = DISCOVERY_WAIT) -> str | None:
    """One line saying which other swarm runs in this domain and how to choose another; or None."""
    found = other_swarm(wait)
    if found is None:
        return None
    here = domain_id()
    free = here + 1 if here < DOMAIN_IDS[1] else DOMAIN_IDS[0] + 1
    return (f'another swarm is running in ROS domain {here}: {found}; run this one in another '
            f'domain with --domain-id N (or ROS_DOMAIN_ID=N), e.g. --domain-id {free}')
