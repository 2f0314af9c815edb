"""Topic discovery shared by the tools that follow a live graph (the recorder, the live view)."""
from __future__ import annotations

from collections.abc import Callable, Container, Iterator
import re

CLOCK_TOPIC = '/clock'  # simulated time (rosgraph_msgs/Clock), which a time source follows

# The node name rmw gives an endpoint until its node's graph information (a message of its
# own, on ros_discovery_info) has arrived; also that of a plain DDS writer of no ROS node.
UNKNOWN_NODE_NAME = '_NODE_NAME_UNKNOWN_'


def publisher_node(info) -> str | None:
    """Return ``/namespace/name`` of an endpoint's node (``TopicEndpointInfo``); None if not."""
    if info.node_name == UNKNOWN_NODE_NAME:
        return None
    return '/'.join((info.node_namespace.rstrip('/'), info.node_name))


def node_of_writer(gid: bytes, infos) -> str | None:
    """Return the node of the endpoint ``gid`` among ``infos``; None if not found or unnamed."""
    for info in infos:
        if bytes(info.endpoint_gid) == gid:
            return publisher_node(info)
    return None


def new_topics(node, pattern: re.Pattern, known: Container[str]) -> Iterator[tuple]:
    """
    Yield ``(topic, types, publishers)`` of each published topic matching ``pattern``.

    Topics in ``known`` (already followed, or skipped for good) and topics with no publisher
    yet (look again at the next discovery) are left out.
    """
    for topic, types in node.get_topic_names_and_types():
        if topic in known or not pattern.search(topic):
            continue
        publishers = node.get_publishers_info_by_topic(topic)
        if publishers:
            yield topic, types, publishers


def follow_new(node, pattern: re.Pattern, known: Container[str],
               follow: Callable[[str, list, list], bool]) -> list[str]:
    """Call ``follow(topic, types, publishers)`` on each of :func:`new_topics`; the followed."""
    return [topic for topic, types, publishers in new_topics(node, pattern, known)
            if follow(topic, types, publishers)]
