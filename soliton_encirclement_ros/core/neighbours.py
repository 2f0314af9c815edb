"""
Ring neighbour selection about the target: ring order, hysteresis, liveness.

The ring is every live agent, self included, sorted by (theta, id); the predecessor is the
previous entry and the successor the next. With exactly one other agent it is both. Ids are
ints; ``NO_NEIGHBOUR`` (-1) marks "none" in arrays.
"""
from __future__ import annotations

import math

import numpy as np

from soliton_encirclement_ros.core.comms import TIME_EPS
from velocity_mobility_ros.core.geometry import TWO_PI, wrap_2pi

NO_NEIGHBOUR = -1


def is_alive(rx_time, now: float, timeout: float):
    """Return True where a state received at ``rx_time`` is still live at ``now``."""
    if isinstance(rx_time, float) and isinstance(now, float):  # one entry: no arrays
        return now - rx_time <= timeout
    return np.asarray(now - np.asarray(rx_time, dtype=float)) <= timeout


def known_age(rx_time, now: float):
    """
    Age(s) at ``now`` of what was received at ``rx_time``; infinite if received after ``now``.

    Received after ``now`` (beyond the float tolerance ``TIME_EPS`` with which a channel
    delivers what is due) means the clock stepped back (a simulator reset, a looped bag):
    nothing known about its age can be trusted.
    """
    if isinstance(rx_time, float) and isinstance(now, float):  # one entry: no arrays
        age = now - rx_time
        return age if age >= -TIME_EPS else math.inf
    age = np.asarray(now - np.asarray(rx_time, dtype=float))
    return np.where(age >= -TIME_EPS, age, np.inf)


def is_fresh(rx_time, now: float, timeout: float):
    """:func:`is_alive` by :func:`known_age`: what a control tick may act on."""
    return known_age(rx_time, now) <= timeout


def ring_neighbours(own_id: int, own_theta: float, ids, thetas) -> tuple[int, int]:
    """
    (pred, succ) of one agent among the other live agents ``ids`` at angles ``thetas``.

    ``ids`` must not contain ``own_id``. Returns ``(NO_NEIGHBOUR, NO_NEIGHBOUR)`` when alone.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return NO_NEIGHBOUR, NO_NEIGHBOUR
    ring_ids = np.append(ids, own_id)
    ring_thetas = np.append(np.asarray(thetas, dtype=float), own_theta)
    order = np.lexsort((ring_ids, ring_thetas))
    sorted_ids = ring_ids[order]
    k = int(np.flatnonzero(sorted_ids == own_id)[0])
    n = sorted_ids.size
    return int(sorted_ids[(k - 1) % n]), int(sorted_ids[(k + 1) % n])


def ring_neighbours_shared(own_ids, own_thetas, ids, thetas):
    """
    Vectorised :func:`ring_neighbours` for many agents sharing one set of live states.

    ``own_ids``/``own_thetas`` (N,) are the agents asking (current odometry); ``ids``/``thetas``
    (M,) the live states they all see, which may include each asker's own (older) state: it is
    skipped. Returns (pred, succ) int arrays (N,), equal to calling :func:`ring_neighbours`
    per agent with its own entry removed.
    """
    own_ids = np.asarray(own_ids, dtype=np.int64)
    own_thetas = np.asarray(own_thetas, dtype=float)
    ids = np.asarray(ids, dtype=np.int64)
    thetas = np.asarray(thetas, dtype=float)
    pred = np.full(own_ids.shape, NO_NEIGHBOUR, dtype=np.int64)
    succ = pred.copy()
    m = ids.size
    if m == 0:
        return pred, succ
    order = np.lexsort((ids, thetas))
    s_ids, s_thetas = ids[order], thetas[order]
    # Position of each asker in the sorted (theta, id) list: entries strictly before it.
    pos = np.searchsorted(s_thetas, own_thetas, side='left')
    ties = np.flatnonzero(np.searchsorted(s_thetas, own_thetas, side='right') > pos)
    for i in ties:  # equal angles: order by id (rare; exact only)
        same = s_thetas == own_thetas[i]
        pos[i] += np.count_nonzero(same & (s_ids < own_ids[i]))
    has_own = np.isin(own_ids, ids)
    others = m - has_own
    s_next = s_ids[pos % m]
    s_next2 = s_ids[(pos + 1) % m]
    s_prev = s_ids[(pos - 1) % m]
    s_prev2 = s_ids[(pos - 2) % m]
    succ_all = np.where(s_next == own_ids, s_next2, s_next)
    pred_all = np.where(s_prev == own_ids, s_prev2, s_prev)
    ok = others > 0
    pred[ok] = pred_all[ok]
    succ[ok] = succ_all[ok]
    return pred, succ


def apply_hysteresis(cand_pred, cand_succ, cand_gap_pred, cand_gap_succ,
                     cur_pred, cur_succ, cur_gap_pred, cur_gap_succ, hysteresis: float):
    """
    Keep the current neighbours unless the candidates are closer by more than ``hysteresis``.

    Elementwise over any shape. ``cur_gap_*`` is NaN where the current neighbour is missing
    or not live: then the candidate is taken. The candidates are also taken on both sides when
    predecessor and successor swapped ("crossed"). Returns (pred, succ).
    """
    cand_pred, cand_succ = np.asarray(cand_pred), np.asarray(cand_succ)
    cur_pred, cur_succ = np.asarray(cur_pred), np.asarray(cur_succ)
    crossed = ((cand_pred != cand_succ)
               & (((cand_pred == cur_succ) & (cur_succ != NO_NEIGHBOUR))
                  | ((cand_succ == cur_pred) & (cur_pred != NO_NEIGHBOUR))))
    keep_pred = (~crossed & (cand_pred != NO_NEIGHBOUR) & np.isfinite(cur_gap_pred)
                 & ~(np.asarray(cand_gap_pred) < np.asarray(cur_gap_pred) - hysteresis))
    keep_succ = (~crossed & (cand_succ != NO_NEIGHBOUR) & np.isfinite(cur_gap_succ)
                 & ~(np.asarray(cand_gap_succ) < np.asarray(cur_gap_succ) - hysteresis))
    return np.where(keep_pred, cur_pred, cand_pred), np.where(keep_succ, cur_succ, cand_succ)


def gap_to_pred(own_theta, pred_theta, own_id=None, pred_id=None):
    """
    Angular gap back to the predecessor, wrap2pi(theta_i - theta_pred), in [0, 2 pi].

    With the ids, an exact tie of angles follows the ring order (theta, id), so that agents
    on one bearing (a start on one line, or at one point) see a ring and spread out: the gap
    is 0 when the predecessor's id is lower (it is just behind) and the whole circle, 2 pi,
    when it is higher (it is the ring's last entry, all the way round). Without the tie-break
    every such agent would see two zero gaps, no spacing error, and fly to one point.
    """
    gap = wrap_2pi(np.asarray(own_theta) - pred_theta)
    if own_id is None:
        return gap
    return np.where((gap == 0.0) & (np.asarray(pred_id) > own_id), TWO_PI, gap)


def gap_to_succ(own_theta, succ_theta, own_id=None, succ_id=None):
    """
    Angular gap forward to the successor, wrap2pi(theta_succ - theta_i), in [0, 2 pi].

    An exact tie of angles follows the ring order as in :func:`gap_to_pred`: 0 when the
    successor's id is higher, 2 pi when it is lower.
    """
    gap = wrap_2pi(np.asarray(succ_theta) - own_theta)
    if own_id is None:
        return gap
    return np.where((gap == 0.0) & (np.asarray(succ_id) < own_id), TWO_PI, gap)
