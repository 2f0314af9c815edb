"""
Communication impairments for experiments: seeded packet loss and delay, applied on receive.

A receiver owns one :class:`ImpairedChannel`. Each incoming message is passed to
``receive(msg, rx_time)``: it is dropped with probability ``loss``, otherwise it becomes
available ``delay`` s later. Messages that arrive together as one batch (an instant's swarm
states as arrays) go to ``receive_many``: the same draw per message, in order, and the
survivors stay one batch. ``due(now)`` hands back, in arrival order, the messages whose
arrival time is at or before ``now`` with that arrival time (used as their receive time).
With the defaults (no loss, no delay) a message is due as soon as it is received.
"""
from __future__ import annotations

from collections import deque
from typing import Any, Optional

import numpy as np

from ros_support.validation import bounded, broken_rule
from soliton_encirclement_ros.core.faults import seed_sequence

COMMS_STREAM = 2  # RNG stream id of the loss draws (see faults.seed_sequence)
TIME_EPS = 1e-9   # arrival times within this of ``now`` count as arrived


class ImpairedChannel:
    """Seeded loss + fixed delay on one receiver's incoming messages."""

    def __init__(self, loss: float = 0.0, delay: float = 0.0, seed: Optional[int] = None,
                 agent_id: int = 0):
        self.loss = check_loss(loss)
        self.delay = bounded('delay', delay, 0.0)
        self._rng = np.random.default_rng(seed_sequence(seed, agent_id, COMMS_STREAM))
        self._pending: deque[tuple[float, Any]] = deque()

    def receive(self, msg: Any, rx_time: float) -> None:
        """Offer a message that arrived at ``rx_time``; it may be dropped or delayed."""
        if self.loss > 0.0 and self._rng.random() < self.loss:
            return
        self._pending.append((float(rx_time) + self.delay, msg))

    def receive_many(self, msgs: Any, rx_time: float) -> None:
        """
        Offer a batch of messages that arrived together at ``rx_time``, in order.

        ``msgs`` has ``len`` and is indexed by a boolean mask (``core.controller.AgentStates``).
        Each message is dropped as by :meth:`receive` (the same random draws, one per message,
        in order); the survivors become due together, as one batch.
        """
        count = len(msgs)
        if count == 0:
            return
        if self.loss > 0.0:
            kept = ~(self._rng.random(count) < self.loss)
            if not kept.all():
                if not kept.any():
                    return
                msgs = msgs[kept]
        self._pending.append((float(rx_time) + self.delay, msgs))

    def due(self, now: float) -> list[tuple[Any, float]]:
        """Pop the (msg, arrival time) pairs that have arrived by ``now``, oldest first."""
        out = []
        while self._pending and self._pending[0][0] <= now + TIME_EPS:
            arrival, msg = self._pending.popleft()
            out.append((msg, arrival))
        return out


def check_loss(loss: float) -> float:
    """
    Return ``loss`` if it is a probability of dropping a message in [0, 1).

    Else ``ValueError``: 1 would silence every link, not simulate a lossy one.
    """
    if isinstance(loss, bool) or not isinstance(loss, (int, float)) or broken_rule(
            float(loss), 0.0, 1.0, high_strict=True):
        raise ValueError(f'loss must be a probability in [0, 1), got {loss!r}')
    return float(loss)
