"""
The velocity commands of N vehicles between arrivals and simulation steps (pure, no rclpy).

A command takes effect from the first step after the instant it arrived: a step at time t uses
the commands that arrived strictly before t, so a step never depends on whether a command of
the same instant was delivered before it. The last valid command stays in force until a newer
one, or until ``cmd_timeout`` without a valid one, when it becomes zero (the vehicle brakes to a
hover) until commands resume.

A step earlier than the one before means the clock stepped back (a simulator reset, a looped
bag): a command heard after the new time was heard on the old clock, its age cannot be known,
and it is dropped at once as a timeout would drop it.
"""
from __future__ import annotations

import numpy as np


class CommandBuffer:
    """The commands in force (``linear``, ``angular``: (N, 3)), the newest ones and the timeout."""

    def __init__(self, n: int) -> None:
        self.linear = np.zeros((n, 3))      # in force (the cmd_frame's frame)
        self.angular = np.zeros((n, 3))
        self._next_linear = np.zeros((n, 3))  # the newest, in force from the next step
        self._next_angular = np.zeros((n, 3))
        self._next_time_ns = np.zeros(n, dtype=np.int64)
        self._has_next = np.zeros(n, dtype=bool)
        self._time_ns = np.zeros(n, dtype=np.int64)  # arrival of the newest valid command
        self._live = np.zeros(n, dtype=bool)     # a command in force, subject to the timeout
        self.timed_out = np.zeros(n, dtype=bool)  # zeroed by the timeout, not yet resumed
        self.rejected = np.zeros(n, dtype=np.uint32)  # non-finite commands per vehicle
        self._last_step_ns: int | None = None
        self.stepped_back_ns = 0  # how far the clock stepped back at the last advance (0: not)

    @property
    def newest_linear(self) -> np.ndarray:
        """Return the newest valid linear commands (N, 3) (in force from the next step)."""
        return np.where(self._has_next[:, None], self._next_linear, self.linear)

    def receive(self, index: int, linear, angular, now_ns: int) -> bool:
        """Take vehicle ``index``'s valid command at ``now_ns``; True if it ends a timeout."""
        if self._has_next[index] and self._next_time_ns[index] < now_ns:
            self._promote(index)
        self._next_linear[index] = linear
        self._next_angular[index] = angular
        self._time_ns[index] = self._next_time_ns[index] = now_ns
        self._has_next[index] = True
        self._live[index] = True
        resumed = bool(self.timed_out[index])
        self.timed_out[index] = False
        return resumed

    def reject(self, index: int) -> int:
        """Count a non-finite command of vehicle ``index``; return its count so far."""
        self.rejected[index] += 1
        return int(self.rejected[index])

    def advance(self, t_ns: int, timeout_ns: int) -> np.ndarray:
        """
        Prepare the step at ``t_ns``: commands that arrived before it take effect.

        Returns the vehicles whose commands just expired (no valid one for more than
        ``timeout_ns``; 0 = never), now zero until one arrives. When ``t_ns`` is earlier than
        the previous step (``stepped_back_ns`` then says by how much), the commands heard after
        ``t_ns`` expire too, whatever ``timeout_ns``.
        """
        previous, self._last_step_ns = self._last_step_ns, t_ns
        self.stepped_back_ns = 0 if previous is None or t_ns >= previous else previous - t_ns
        self._promote(self._has_next & (self._next_time_ns < t_ns))
        if not self._live.any() or (timeout_ns <= 0 and not self.stepped_back_ns):
            return np.empty(0, dtype=np.int64)
        dropped = self._time_ns > t_ns if self.stepped_back_ns else np.zeros_like(self._live)
        if timeout_ns > 0:
            dropped |= t_ns - self._time_ns > timeout_ns
        expired = np.flatnonzero(self._live & dropped)
        self.linear[expired] = 0.0
        self.angular[expired] = 0.0
        self._has_next[expired] = False
        self._live[expired] = False
        self.timed_out[expired] = True
        return expired

    def _promote(self, due) -> None:
        self.linear[due] = self._next_linear[due]
        self.angular[due] = self._next_angular[due]
        self._has_next[due] = False
