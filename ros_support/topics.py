"""Topic discovery shared by the tools that follow a live graph (the recorder, the live view)."""
from __future__ import annotations

from collections.abc import Callable, Container, Iterator
import re


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
