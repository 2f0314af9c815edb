"""
What one receiver hears from each sender: loss, age and the sender's clock offset (no rclpy).

An agent records the swarm states it takes in, a control tick's at a time: the sender's id,
incarnation and ``seq``, the sender's stamp, when each reached this receiver (``raw``, this
receiver's clock) and when a control tick could use it (``arrival``: ``raw`` plus any emulated
delay). The figures, over the last ``window`` seconds, are what the agent's 1 Hz
``/diagnostics`` reports per sender:

- ``heard`` and ``lost``: states taken in, and the gaps in ``seq`` between consecutive ones of
  one incarnation (a new incarnation is a restart, not a loss). Emulated loss (``core.comms``)
  shows here; the recorder of a bag, which drops nothing, does not see it.
- ``age``: ``arrival - stamp`` (mean and max): transport, emulated delay and the clock offset
  together, what a control tick sees.
- ``offset``: the sender's clock minus this receiver's, from the lowest ``raw - stamp`` of
  each period (the fastest delivery carries the least transport delay), the median over the
  window's periods. It errs by about the shortest latency: well under a millisecond on a LAN,
  a tick in a lock-stepped simulation.

Clock offsets matter because the stamps do: a state stamped ahead of the receiver by more than
``max_future_stamp`` is rejected (``core.controller.future_stamp_reason``). Liveness is judged
by receive time, so it does not depend on the offset. An agent warns, naming the sender, when
an offset passes ``max_clock_offset``, which must stay below ``max_future_stamp``.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Optional

import numpy as np

from ros_support.number_text import fixed

OFFSET_PERCENTILE = 5.0  # % of raw - stamp taken as the transport-free delivery


@dataclass(frozen=True)
class LinkFigures:
    """One sender's figures as heard by one receiver over the window (times in s)."""

    sender: int
    heard: int
    lost: int
    restarts: int      # new incarnations seen
    age_mean: float
    age_max: float
    offset: float      # the sender's clock minus this receiver's
    last_heard: float  # arrival time of the newest state taken in

    @property
    def loss(self) -> float:
        """Return the share of the sender's states that did not arrive (0 when none expected)."""
        expected = self.heard + self.lost
        return self.lost / expected if expected else 0.0

    def text(self) -> str:
        """One line for a diagnostics value: every figure, named."""
        return (f'heard={self.heard} lost={self.lost} loss={self.loss:.4f} '
                f'restarts={self.restarts} age_mean={self.age_mean:.4f} '
                f'age_max={self.age_max:.4f} offset={fixed(self.offset, 4, sign=True)}')


def parse_link_text(text: str) -> dict[str, float]:
    """Return the figures of a :meth:`LinkFigures.text` line as name -> number."""
    return {name: float(value) for name, value in
            (item.split('=', 1) for item in text.split())}


_SUMS = ('heard', 'lost', 'restarts', 'age_sum')
# Calls to LinkMonitor.record kept before they are taken in together: few, for the memory (at
# N = 100 each holds five arrays of 99 states per agent), enough to cost little per call.
PENDING_RECORDS = 16


class LinkMonitor:
    """
    The link figures of one receiver, per sender, over the last ``window`` s.

    States are taken in by :meth:`record` as arrays (one control tick's, or one message's);
    each call to :meth:`figures` closes a period (the caller's, 1 s for the agents) and answers
    over the periods of the window: counts and age summed, age max the largest, and the offset
    the median of the periods' lowest ``raw - stamp`` (each period's fastest delivery; the
    median ignores a period whose one state came early or late). Memory and cost do not grow
    with the message rate: a period keeps a handful of numbers per sender.
    """

    def __init__(self, window: float = 10.0) -> None:
        if not window > 0.0:
            raise ValueError(f'link window must be > 0 s, got {window!r}')
        self.window = float(window)
        self._slot: dict[int, int] = {}
        self._senders = np.empty(0, dtype=np.int64)
        self._known = np.empty(0, dtype=np.int64)       # the senders sorted ...
        self._known_slot = np.empty(0, dtype=np.int64)  # ... and their slots
        self._last_slots = None  # (senders, their slots, whether unique) of the last record
        self._last_seq = np.empty(0, dtype=np.int64)
        self._last_inc = np.empty(0, dtype=np.int64)
        self._last_heard = np.empty(0)
        self._open = self._new_period(0)
        self._closed: list[tuple[float, dict]] = []  # (end time, period) oldest first
        self._pending: list[tuple] = []  # recorded states not yet taken in (per call)

    @staticmethod
    def _new_period(size: int) -> dict:
        period = {name: np.zeros(size) for name in _SUMS}
        period['age_max'] = np.full(size, -np.inf)
        period['lag_min'] = np.full(size, np.inf)
        return period

    def _slots(self, sender) -> np.ndarray:
        ids = np.asarray(sender, dtype=np.int64)
        last = self._last_slots
        if last is not None and last[0].shape == ids.shape and (last[0] == ids).all():
            return last[1]  # the senders of the last call, in the same order (the usual case)
        slots = self._find_slots(ids)
        self._last_slots = (ids.copy(), slots, slots.size < 2 or np.bincount(slots).max() == 1)
        return slots

    def _find_slots(self, ids: np.ndarray) -> np.ndarray:
        if self._known.size:
            at = np.minimum(np.searchsorted(self._known, ids), self._known.size - 1)
            if (self._known[at] == ids).all():
                return self._known_slot[at]
        new = [int(i) for i in np.unique(ids) if int(i) not in self._slot]
        if new:
            for i in new:
                self._slot[i] = len(self._slot)
            grow = len(new)
            self._senders = np.concatenate([self._senders, np.array(new, dtype=np.int64)])
            self._last_seq = np.concatenate([self._last_seq, np.full(grow, -1, dtype=np.int64)])
            self._last_inc = np.concatenate([self._last_inc, np.zeros(grow, dtype=np.int64)])
            self._last_heard = np.concatenate([self._last_heard, np.full(grow, math.nan)])
            for name, column in self._open.items():
                self._open[name] = np.concatenate([column, self._new_period(grow)[name]])
            order = np.argsort(self._senders)
            self._known, self._known_slot = self._senders[order], order
        return np.array([self._slot[int(i)] for i in ids], dtype=np.int64)

    def deaf(self) -> None:
        """
        Stop counting gaps: this receiver hears nothing for a while (a failed agent).

        The next state of each sender starts a new run, so what was sent while this receiver
        was deaf counts neither as lost nor as a restart.
        """
        self._take_in()
        self._last_seq[:] = -1

    def record(self, sender, incarnation, seq, stamp, raw, arrival=None) -> None:
        """
        Take in states (arrays, or one state's numbers), in arrival order.

        ``raw`` is when each reached this receiver and ``arrival`` when a tick could use it
        (``raw`` plus an emulated delay; default ``raw``). A ``seq`` below 0 marks a state that
        was not taken in (a rejected stamp): it counts for the offset only.

        The states wait in a list until :meth:`figures` (or :meth:`deaf`, or
        :data:`PENDING_RECORDS` calls) takes them all in with one pass over arrays: a control
        tick's call costs an append, and the figures are those of taking each call in at once.
        """
        slot = self._slots(np.atleast_1d(sender))
        incarnation, seq, stamp, raw = (a if type(a) is np.ndarray and a.ndim == 1
                                        else np.atleast_1d(np.asarray(a)) for a in
                                        (incarnation, seq, stamp, raw))
        arrival = raw if arrival is None else np.atleast_1d(np.asarray(arrival, dtype=float))
        self._pending.append((slot, incarnation, seq, stamp, raw, arrival))
        if len(self._pending) >= PENDING_RECORDS:
            self._take_in()

    def _take_in(self) -> None:
        """Take the pending states into the open period, in the order they were recorded."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        if self._take_in_rows(pending):
            return
        slot, incarnation, seq, stamp, raw, arrival = (
            pending[0] if len(pending) == 1 else
            (np.concatenate(column) for column in zip(*pending)))
        period = self._open
        np.minimum.at(period['lag_min'], slot, raw - stamp)
        taken = seq >= 0
        if not taken.all():
            slot, incarnation, seq, stamp, arrival = (
                a[taken] for a in (slot, incarnation, seq, stamp, arrival))
        if slot.size == 0:
            return
        order = np.argsort(slot, kind='stable')  # by sender, arrival order within
        slot, incarnation, seq, stamp, arrival = (
            a[order] for a in (slot, incarnation, seq, stamp, arrival))
        first = np.ones(slot.size, dtype=bool)
        first[1:] = slot[1:] != slot[:-1]
        prev_seq = np.where(first, self._last_seq[slot], np.roll(seq, 1))
        prev_inc = np.where(first, self._last_inc[slot], np.roll(incarnation, 1))
        heard_before = prev_seq >= 0
        same = heard_before & (incarnation == prev_inc)
        step = seq - prev_seq
        np.add.at(period['lost'], slot, np.where(same & (step > 1), step - 1, 0))
        np.add.at(period['restarts'], slot, heard_before & ~same)
        np.add.at(period['heard'], slot, 1)
        age = arrival - stamp
        np.add.at(period['age_sum'], slot, age)  # one by one, in order: the sums of each call
        np.maximum.at(period['age_max'], slot, age)
        last = np.ones(slot.size, dtype=bool)
        last[:-1] = slot[1:] != slot[:-1]
        self._last_seq[slot[last]] = seq[last]
        self._last_inc[slot[last]] = incarnation[last]
        self._last_heard[slot[last]] = arrival[last]

    def _take_in_rows(self, pending: list) -> bool:
        """
        Take in calls that each heard every sender of one slot array once (the usual ticks).

        As a (calls, senders) matrix, without sorting: each call's states are judged against
        the call before, and the ages are summed call by call, as one call at a time would.
        False (nothing done) where the calls differ in senders, a sender is there twice or a
        state was not taken in.
        """
        slot = pending[0][0]
        if (len(pending) < 2 or any(call[0] is not slot for call in pending)
                or not self._unique_slots(slot)):
            return False
        incarnation, seq, stamp, raw, arrival = (
            np.array(column) for column in list(zip(*pending))[1:])
        if not (seq >= 0).all():
            return False
        period = self._open
        period['lag_min'][slot] = np.minimum(period['lag_min'][slot], (raw - stamp).min(axis=0))
        prev_seq = np.concatenate((self._last_seq[slot][None], seq[:-1]))
        prev_inc = np.concatenate((self._last_inc[slot][None], incarnation[:-1]))
        heard_before = prev_seq >= 0
        same = heard_before & (incarnation == prev_inc)
        step = seq - prev_seq
        period['lost'][slot] += np.where(same & (step > 1), step - 1, 0).sum(axis=0)
        period['restarts'][slot] += (heard_before & ~same).sum(axis=0)
        period['heard'][slot] += len(pending)
        age = arrival - stamp
        age_sum = period['age_sum'][slot]
        for row in age:  # one call after the other: the same sums
            age_sum = age_sum + row
        period['age_sum'][slot] = age_sum
        period['age_max'][slot] = np.maximum(period['age_max'][slot], age.max(axis=0))
        self._last_seq[slot] = seq[-1]
        self._last_inc[slot] = incarnation[-1]
        self._last_heard[slot] = arrival[-1]
        return True

    def _unique_slots(self, slot: np.ndarray) -> bool:
        """Whether no slot is in ``slot`` twice (kept with the last record's slots)."""
        last = self._last_slots
        if last is not None and last[1] is slot:
            return last[2]
        return slot.size < 2 or np.bincount(slot).max() == 1

    def figures(self, now: float) -> dict[int, LinkFigures]:
        """Close the period at ``now``; return each sender's figures over the window, by id."""
        self._take_in()
        self._closed.append((float(now), self._open))
        self._open = self._new_period(self._senders.size)
        self._closed = [(end, p) for end, p in self._closed if end > now - self.window]
        size = self._senders.size
        periods = [{name: np.concatenate([column, self._new_period(size - column.size)[name]])
                    for name, column in p.items()} for _, p in self._closed]
        sums = {name: np.sum([p[name] for p in periods], axis=0) for name in _SUMS}
        age_max = np.max([p['age_max'] for p in periods], axis=0)
        lags = np.array([p['lag_min'] for p in periods])
        offset, heard_at_all = _column_medians(np.where(np.isfinite(lags), lags, np.nan))
        out = {}
        for slot in np.flatnonzero(heard_at_all).tolist():  # the others: not within the window
            sender = int(self._senders[slot])
            heard = int(sums['heard'][slot])
            out[sender] = LinkFigures(
                sender, heard, int(sums['lost'][slot]), int(sums['restarts'][slot]),
                float(sums['age_sum'][slot] / heard) if heard else math.nan,
                float(age_max[slot]) if heard else math.nan,
                -float(offset[slot]), float(self._last_heard[slot]))
        return out


def _column_medians(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """
    Return each column's median of its numbers (NaN skipped) and whether it has any.

    ``np.nanmedian`` of each column, in one pass: the middle number, or the mean ``(a + b) / 2``
    of the middle two.
    """
    count = np.count_nonzero(~np.isnan(values), axis=0)
    ranked = np.sort(values, axis=0)  # NaN last
    columns = np.arange(values.shape[1])
    low = ranked[np.maximum((count - 1) // 2, 0), columns]
    high = ranked[np.maximum(count // 2, 0), columns] if values.shape[0] else low
    return np.where(count % 2 == 1, low, (low + high) / 2), count > 0


def offset_warning(receiver: int, figures: LinkFigures, limit: float,
                   sim_time: bool = False) -> Optional[str]:
    """
    Return the warning line of a sender whose offset passes ``limit``, or None.

    A sender *ahead* (its stamps later than this receiver's clock when they arrive) has a clock
    that runs ahead: no delay makes a state arrive before it was stamped. A sender *behind*
    may have a clock behind this one's, or its states may simply arrive late: a busy machine
    (the sender publishing late, this node taking them in late) or a slow link reads the same,
    and between processes that share one clock it can only be that lag. So a sender ahead is
    named a clock to synchronise (chrony or PTP), one behind is named lag first.

    ``sim_time``: the receiver runs on ``/clock`` (a simulation): there are no companion clocks
    to synchronise, the offset is a ``/clock`` that reaches the processes at different times.
    """
    if not abs(figures.offset) > limit:
        return None
    size = f'{abs(figures.offset):.3f} s'
    presence = ("states stamped more than max_future_stamp ahead are kept as their vehicle's "
                'presence only')
    if sim_time:
        side = 'ahead of' if figures.offset > 0 else 'behind'
        return (f'agent {receiver}: agent {figures.sender} stamps its states '
                f"{size} {side} this node's /clock (max_clock_offset "
                f'{limit:g} s): every node runs on /clock (use_sim_time), so one of them is '
                f'falling behind the clock publisher (a busy machine?); {presence}')
    if figures.offset > 0:
        return (f'agent {receiver}: the clock of agent {figures.sender} is {size} ahead of '
                f'this one (max_clock_offset {limit:g} s): synchronise the companion '
                f"computers' clocks (chrony or PTP); {presence}")
    return (f'agent {receiver}: the states of agent {figures.sender} arrive {size} after their '
            f'stamps even at their fastest (max_clock_offset {limit:g} s): lag, a busy machine '
            f'(the sender or this node) or a slow link; or, if the two run on different '
            f"computers, a clock behind this one's (chrony or PTP)")


def offset_summary(figures: LinkFigures) -> str:
    """Return a sender's offset for a status line: a clock ahead, or states that arrive late."""
    if figures.offset > 0:
        return f'clock of agent {figures.sender} off by {fixed(figures.offset, 3, sign=True)} s'
    return f'states of agent {figures.sender} {fixed(-figures.offset, 3)} s late (lag or clock)'
