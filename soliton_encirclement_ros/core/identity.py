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

import numpy as np

INCARNATION_MAX = 2 ** 31  # exactly representable in the float64 wire format
# The incarnation of a presence that a PX4 bridge announces for its silent agent's vehicle: no
# agent process is ever started with it (new_incarnation), so it is no duplicate of the agent.
BRIDGE_INCARNATION = 0
EPISODE_MARGIN = 5.0       # [s] silence beyond the window that ends a duplicate episode


def new_incarnation() -> int:
    """
    Return a random incarnation number in [1, 2**31), from the OS.

    Never seeded, never repeated.
    """
    return random.SystemRandom().randrange(1, INCARNATION_MAX)


class DuplicateIds:
    """
    Tracks incarnations per id; :meth:`observe` reports each duplicate episode once.

    An id heard from one incarnation only (the usual case) is kept in sorted arrays, so that
    :meth:`observe_many` takes an instant's states in one numpy pass; an id heard from more
    than one, or in an episode, in a mapping judged state by state.
    """

    def __init__(self, window: float, margin: float = EPISODE_MARGIN) -> None:
        self.window = float(window)
        self.margin = float(margin)
        self._ids = np.empty(0, dtype=np.int64)   # ids heard from one incarnation, sorted
        self._inc = np.empty(0, dtype=np.int64)   # ... that incarnation
        self._last = np.empty(0)                  # ... when last heard
        self._heard: dict[int, dict[int, float]] = {}  # the others: {incarnation: last heard}
        self._active: set[int] = set()

    def _single(self, agent_id: int) -> int:
        """Index of ``agent_id`` in the one-incarnation arrays, or -1."""
        at = int(np.searchsorted(self._ids, agent_id))
        return at if at < self._ids.size and self._ids[at] == agent_id else -1

    def observe(self, agent_id: int, incarnation: int, now: float) -> Optional[list[int]]:
        """
        Record a state; return the live incarnations when a duplicate episode starts.

        An episode starts when two incarnations are heard within the window, and ends when all
        but one have been silent for the window plus the margin.
        """
        agent_id, incarnation = int(agent_id), int(incarnation)
        if incarnation == BRIDGE_INCARNATION:  # a bridge speaking for its silent agent
            return None
        at = self._single(agent_id)
        if at >= 0:
            if self._inc[at] == incarnation:  # the usual case: one sender, heard again
                self._last[at] = float(now)
                return None
            self._heard[agent_id] = {int(self._inc[at]): float(self._last[at])}
            self._ids, self._inc, self._last = (np.delete(a, at) for a in
                                                (self._ids, self._inc, self._last))
        heard = self._heard.setdefault(agent_id, {})
        heard[incarnation] = float(now)
        keep = self.window + self.margin if agent_id in self._active else self.window
        for other, last in list(heard.items()):
            if now - last > keep:
                del heard[other]
        if len(heard) < 2:
            self._active.discard(agent_id)
            del self._heard[agent_id]  # one incarnation again: back to the arrays
            (only, last), = heard.items()
            at = int(np.searchsorted(self._ids, agent_id))
            self._ids = np.insert(self._ids, at, agent_id)
            self._inc = np.insert(self._inc, at, only)
            self._last = np.insert(self._last, at, last)
            return None
        if agent_id in self._active:
            return None
        self._active.add(agent_id)
        return sorted(heard)

    def observe_many(self, agent_ids, incarnations, now: float) -> list[tuple[int, list[int]]]:
        """
        :meth:`observe` of states heard together at ``now`` (arrays, in arrival order).

        Returns (id, live incarnations) of each duplicate episode that starts. The states of
        ids heard from their one known incarnation take one numpy pass; the rest are observed
        one by one, in order.
        """
        agent_ids = np.asarray(agent_ids, dtype=np.int64)
        incarnations = np.asarray(incarnations, dtype=np.int64)
        bridge = incarnations == BRIDGE_INCARNATION  # a bridge speaking for its silent agent
        if bridge.any():
            agent_ids, incarnations = agent_ids[~bridge], incarnations[~bridge]
        if self._ids.size:
            at = np.minimum(np.searchsorted(self._ids, agent_ids), self._ids.size - 1)
            usual = (self._ids[at] == agent_ids) & (self._inc[at] == incarnations)
            self._last[at[usual]] = float(now)
            if usual.all():
                return []
            rest = np.flatnonzero(~usual)
        else:
            rest = np.arange(agent_ids.size)
        rest = self._add_new(agent_ids, incarnations, rest, now)
        started = []
        for k in rest:
            duplicate = self.observe(agent_ids[k], incarnations[k], now)
            if duplicate is not None:
                started.append((int(agent_ids[k]), duplicate))
        return started

    def _add_new(self, agent_ids, incarnations, rest, now: float) -> np.ndarray:
        """Add the ids of ``rest`` heard for the first time, once each; return the others."""
        ids = agent_ids[rest]
        at = np.minimum(np.searchsorted(self._ids, ids), max(self._ids.size - 1, 0))
        new = ~(self._ids[at] == ids) if self._ids.size else np.ones(ids.size, dtype=bool)
        new &= np.array([int(i) not in self._heard for i in ids], dtype=bool) \
            if self._heard else True
        values, counts = np.unique(ids, return_counts=True)
        new &= np.isin(ids, values[counts == 1])
        if not new.any():
            return rest
        merged = np.concatenate((self._ids, ids[new]))
        order = np.argsort(merged, kind='stable')
        self._ids = merged[order]
        self._inc = np.concatenate((self._inc, incarnations[rest][new]))[order]
        self._last = np.concatenate((self._last, np.full(int(new.sum()), float(now))))[order]
        return rest[~new]

    @property
    def duplicated(self) -> frozenset[int]:
        """Ids in a duplicate episode now."""
        return frozenset(self._active)


def id_from_namespace(namespace: str) -> int:
    """Return the agent id a namespace implies: its last segment's digits (``/uav3``: 3)."""
    digits = ''.join(ch for ch in namespace.rsplit('/', 1)[-1] if ch.isdigit())
    if not digits:
        raise ValueError(f'agent_id is 0 and namespace {namespace!r} has no digits to derive '
                         'it from')
    return int(digits)
