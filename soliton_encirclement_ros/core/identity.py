"""
Duplicate agent ids: one ``agent_id`` heard from two incarnations at once (pure, no rclpy).

Every agent draws a random incarnation number when its process starts and broadcasts it with
each state. A listener that hears one id from two incarnations within its liveness window knows
that two vehicles were started with the same id (a restarted agent is not a duplicate: its old
incarnation has expired by the time the new one speaks).
"""
from __future__ import annotations

import random
from typing import Optional

INCARNATION_MAX = 2 ** 31  # exactly representable in the float64 wire format


def new_incarnation() -> int:
    """
    Return a random incarnation number in [1, 2**31), from the OS.

    Never seeded, never repeated.
    """
    return random.SystemRandom().randrange(1, INCARNATION_MAX)


class DuplicateIds:
    """Tracks incarnations per id; :meth:`observe` reports each duplicate episode once."""

    def __init__(self, window: float) -> None:
        self.window = float(window)
        self._heard: dict[int, dict[int, float]] = {}  # id -> {incarnation: last heard}
        self._active: set[int] = set()

    def observe(self, agent_id: int, incarnation: int, now: float) -> Optional[list[int]]:
        """Record a state; return the live incarnations when a duplicate episode starts."""
        heard = self._heard.setdefault(int(agent_id), {})
        heard[int(incarnation)] = float(now)
        for other, last in list(heard.items()):
            if now - last > self.window:
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
