"""
Duplicate agent ids: one ``agent_id`` heard from two incarnations at once (pure, no rclpy).

Every agent draws a random incarnation number when its process starts and broadcasts it with
each state. A listener that hears one id from two incarnations within its liveness window knows
that two vehicles were started with the same id (a restarted agent is not a duplicate: its old
incarnation has expired by the time the new one speaks).

An episode ends only when all but one incarnation have been silent for the liveness window plus
``EPISODE_MARGIN``: on a loaded machine one of the two may go quiet for longer than the window
now and then, and that must not end the episode and report it again at the next message.
"""
from __future__ import annotations

import random
from typing import Optional

INCARNATION_MAX = 2 ** 31  # exactly representable in the float64 wire format
EPISODE_MARGIN = 5.0       # [s] silence beyond the window that ends a duplicate episode


def new_incarnation() -> int:
    """
    Return a random incarnation number in [1, 2**31), from the OS.

    Never seeded, never repeated.
    """
    return random.SystemRandom().randrange(1, INCARNATION_MAX)


class DuplicateIds:
    """Tracks incarnations per id; :meth:`observe` reports each duplicate episode once."""

    def __init__(self, window: float, margin: float = EPISODE_MARGIN) -> None:
        self.window = float(window)
        self.margin = float(margin)
        self._heard: dict[int, dict[int, float]] = {}  # id -> {incarnation: last heard}
        self._active: set[int] = set()

    def observe(self, agent_id: int, incarnation: int, now: float) -> Optional[list[int]]:
        """
        Record a state; return the live incarnations when a duplicate episode starts.

        An episode starts when two incarnations are heard within the window, and ends when all
        but one have been silent for the window plus the margin.
        """
        heard = self._heard.get(agent_id)
        if (heard is not None and len(heard) == 1 and incarnation in heard
                and agent_id not in self._active):  # the usual case: one sender, heard again
            heard[incarnation] = float(now)
            return None
        agent_id = int(agent_id)
        heard = self._heard.setdefault(agent_id, {})
        heard[int(incarnation)] = float(now)
        keep = self.window + self.margin if agent_id in self._active else self.window
        for other, last in list(heard.items()):
            if now - last > keep:
                del heard[other]
        if len(heard) < 2:
            self._active.discard(agent_id)
            return None
        if agent_id in self._active:
            return None
        self._active.add(agent_id)
        return sorted(heard)

    @property
    def duplicated(self) -> frozenset[int]:
        """Ids in a duplicate episode now."""
        return frozenset(self._active)
