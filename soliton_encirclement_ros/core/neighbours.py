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


def arrived_late(stamp, rx_time, max_future_stamp: float):
    """
    Return where a state stamped ``stamp`` arrived at ``rx_time``, over max_future_stamp late.

    The mirror of a stamp ahead of the receiver (``controller.ahead_as_presence``): such a
    state comes from a clock behind the receiver's (the receiver's clock stepped ahead) or over
    a link that slow; its stamp cannot tell its age, and the receiver ages it from its arrival
    (keeps ``rx_time`` as its stamp). Before, an agent whose clock stepped 2 s ahead counted
    every other state 2 s old, carried each vehicle ``t_safe`` ahead along its velocity
    instead of the link's delay, and flew into one (0.24 d_safe in the separation benchmark).
    """
    return np.asarray(rx_time - np.asarray(stamp, dtype=float)) > max_future_stamp


def is_fresh(rx_time, now: float, timeout: float):
    """:func:`is_alive` by :func:`known_age`: what a control tick may act on."""
    if isinstance(rx_time, float) and isinstance(now, float):  # known_age's, inline (hot)
        age = now - rx_time
        return (age if age >= -TIME_EPS else math.inf) <= timeout
    return known_age(rx_time, now) <= timeout


def ring_candidates(visible, theta, theta_self, own_ids, ids):
    """
    Ring-order candidates of M agents among K others: (pred, succ) as column indices.

    The one neighbour selection of every engine (the node's per-agent path is M = 1).
    ``visible`` (M, K) says which of the K others each row may use (its own column excluded);
    ``theta`` (M, K) or (K,) their angles about the target (any value where not visible);
    ``theta_self`` and ``own_ids`` (M,); ``ids`` (K,), in any order. The ring is every visible
    entry and self sorted by (theta, id): the successor is the entry after self, the
    predecessor the one before, cyclically; with one other agent it is both, and
    ``NO_NEIGHBOUR`` marks a row that sees none. Angles are compared as they are (no
    differences, which could round two distinct angles into a tie).
    """
    visible = np.asarray(visible, dtype=bool)
    theta = np.broadcast_to(np.asarray(theta, dtype=float), visible.shape)
    ids = np.asarray(ids, dtype=np.int64)
    own_ids = np.asarray(own_ids, dtype=np.int64)
    own = np.asarray(theta_self, dtype=float)[:, None]
    some = visible.any(axis=1)
    if not some.any():
        none = np.full(visible.shape[0], NO_NEIGHBOUR, dtype=np.int64)
        return none, none.copy()
    after = visible & ((theta > own) | ((theta == own) & (ids > own_ids[:, None])))
    before = visible & ~after
    # The successor is the first entry after self, else (wrapping) the first of all; the
    # predecessor the last before self, else the last of all. Equal angles follow the ids.
    succ = _first(np.where(after.any(axis=1, keepdims=True), after, visible), theta, ids)
    pred = _last(np.where(before.any(axis=1, keepdims=True), before, visible), theta, ids)
    return (np.where(some, pred, NO_NEIGHBOUR).astype(np.int64),
            np.where(some, succ, NO_NEIGHBOUR).astype(np.int64))


_BIG = np.iinfo(np.int64).max


def _first(pool, theta, ids):
    """Column of the smallest (theta, id) in each row's ``pool``."""
    lowest = np.where(pool, theta, np.inf).min(axis=1, keepdims=True)
    return np.argmin(np.where(pool & (theta == lowest), ids, _BIG), axis=1)


def _last(pool, theta, ids):
    """Column of the largest (theta, id) in each row's ``pool``."""
    highest = np.where(pool, theta, -np.inf).max(axis=1, keepdims=True)
    return np.argmax(np.where(pool & (theta == highest), ids, -_BIG), axis=1)


def select_neighbours(visible, theta, theta_self, own_ids, ids, cur_pred, cur_succ,
                      hysteresis):
    """
    (pred, succ) columns of M agents: :func:`ring_candidates`, then :func:`apply_hysteresis`.

    ``hysteresis`` [rad]: one for all, or (M,) one per agent
    (:meth:`ControllerParams.neighbour_hysteresis`).

    ``cur_pred``/``cur_succ`` (M,) are the current neighbours' columns (``NO_NEIGHBOUR`` if
    none); a current neighbour that is not visible any more is replaced by the candidate.
    Gaps follow the ring order (:func:`gap_to_pred`, :func:`gap_to_succ`).
    """
    visible = np.asarray(visible, dtype=bool)
    theta = np.broadcast_to(np.asarray(theta, dtype=float), visible.shape)
    ids = np.asarray(ids, dtype=np.int64)
    theta_self = np.asarray(theta_self, dtype=float)
    rows = np.arange(visible.shape[0])
    cand_pred, cand_succ = ring_candidates(visible, theta, theta_self, own_ids, ids)

    def gap(gap_fn, col):
        col = np.asarray(col, dtype=np.int64)
        at = np.maximum(col, 0)
        if visible.shape[1] == 0:
            return np.full(col.shape, np.nan)
        ok = (col != NO_NEIGHBOUR) & visible[rows, at]
        return np.where(ok, gap_fn(theta_self, np.where(ok, theta[rows, at], 0.0), own_ids,
                                   ids[at]), np.nan)

    return apply_hysteresis(
        cand_pred, cand_succ, gap(gap_to_pred, cand_pred), gap(gap_to_succ, cand_succ),
        cur_pred, cur_succ, gap(gap_to_pred, cur_pred), gap(gap_to_succ, cur_succ), hysteresis)


def select_neighbours_one(theta_self: float, own_id: int, ids, thetas, cur_pred, cur_succ,
                          hysteresis: float):
    """
    :func:`select_neighbours` for one agent (M = 1) in plain Python, by ids.

    ``ids``/``thetas`` the other live agents and their finite angles (lists of int and
    float), ``cur_pred``/``cur_succ`` the current neighbours' ids or None. The same choice,
    tie-breaks and gaps as the array version. Returns (pred, succ) ids, None when alone.
    """
    if not ids:
        return None, None
    ring = list(zip(thetas, ids))
    after = [e for e in ring if e[0] > theta_self or (e[0] == theta_self and e[1] > own_id)]
    before = [e for e in ring if not (e[0] > theta_self
                                      or (e[0] == theta_self and e[1] > own_id))]
    cand_succ = min(after or ring)
    cand_pred = max(before or ring)
    theta_of = dict(zip(ids, thetas))
    return _with_hysteresis_one(
        theta_self, own_id, cand_pred, cand_succ,
        None if cur_pred not in theta_of else (theta_of[cur_pred], cur_pred),
        None if cur_succ not in theta_of else (theta_of[cur_succ], cur_succ), hysteresis)


def _with_hysteresis_one(theta_self, own_id, cand_pred, cand_succ, cur_pred, cur_succ,
                         hysteresis):
    """
    :func:`apply_hysteresis` of one agent in floats: (pred, succ) ids.

    ``cand_*`` and ``cur_*`` are (theta, id) of the candidates and of the current neighbours
    (None when a current one is not live).
    """
    crossed = cand_pred[1] != cand_succ[1] and (
        (cur_succ is not None and cand_pred[1] == cur_succ[1])
        or (cur_pred is not None and cand_succ[1] == cur_pred[1]))
    pred, succ = cand_pred[1], cand_succ[1]
    if not crossed and cur_pred is not None and not (
            _gap_pred_one(theta_self, cand_pred[0], own_id, cand_pred[1])
            < _gap_pred_one(theta_self, cur_pred[0], own_id, cur_pred[1]) - hysteresis):
        pred = cur_pred[1]
    if not crossed and cur_succ is not None and not (
            _gap_succ_one(theta_self, cand_succ[0], own_id, cand_succ[1])
            < _gap_succ_one(theta_self, cur_succ[0], own_id, cur_succ[1]) - hysteresis):
        succ = cur_succ[1]
    return pred, succ


# Up to this many others ring_choice runs select_neighbours_one in Python, which costs less
# than its numpy passes there (3.6 against 17.5 µs with 9 others, 15.4 against 17.3 with 99;
# with 127 the passes win).
FLOAT_RING = 100


def ring_choice(theta_self: float, own_id: int, ids: np.ndarray, thetas: np.ndarray,
                cur_pred, cur_succ, hysteresis: float) -> tuple[int, int]:
    """
    :func:`select_neighbours_one` over arrays: (pred, succ) as columns of ``ids``, -1 if none.

    ``ids`` (unique int64) and ``thetas`` (finite floats) the other live agents, ``cur_pred``
    and ``cur_succ`` the current neighbours' ids or None. Up to :data:`FLOAT_RING` others it is
    :func:`select_neighbours_one` itself; above, the candidates are found in one numpy pass and
    only they and the current neighbours become Python numbers: the same choice.
    """
    if ids.size == 0:
        return NO_NEIGHBOUR, NO_NEIGHBOUR
    if ids.size <= FLOAT_RING:
        listed = ids.tolist()
        pred, succ = select_neighbours_one(theta_self, own_id, listed, thetas.tolist(),
                                           cur_pred, cur_succ, hysteresis)
        return listed.index(pred), listed.index(succ)
    return _ring_choice_arrays(theta_self, own_id, ids, thetas, cur_pred, cur_succ, hysteresis)


def _ring_choice_arrays(theta_self, own_id, ids, thetas, cur_pred, cur_succ, hysteresis):
    """:func:`ring_choice` with the candidates found over arrays (many others)."""
    after = (thetas > theta_self) | ((thetas == theta_self) & (ids > own_id))
    later = np.flatnonzero(after)
    earlier = np.flatnonzero(~after)
    succ_col = _extreme(later if later.size else earlier, ids, thetas, lowest=True)
    pred_col = _extreme(earlier if earlier.size else later, ids, thetas, lowest=False)

    def current(agent_id):
        if agent_id is None:
            return None
        at = np.flatnonzero(ids == agent_id)
        return None if at.size == 0 else int(at[0])

    cur = [current(cur_pred), current(cur_succ)]
    entry = {c: (float(thetas[c]), int(ids[c])) for c in (pred_col, succ_col, *cur)
             if c is not None}
    pred, succ = _with_hysteresis_one(theta_self, own_id, entry[pred_col], entry[succ_col],
                                      None if cur[0] is None else entry[cur[0]],
                                      None if cur[1] is None else entry[cur[1]], hysteresis)
    column = {entry[c][1]: c for c in entry}
    return column[pred], column[succ]


def _extreme(pool: np.ndarray, ids: np.ndarray, thetas: np.ndarray, lowest: bool) -> int:
    """Column of the smallest (or largest) (theta, id) among the columns ``pool``."""
    theta = thetas[pool]
    tied = pool[theta == (theta.min() if lowest else theta.max())]
    if tied.size == 1:
        return int(tied[0])
    tied_ids = ids[tied]
    return int(tied[np.argmin(tied_ids) if lowest else np.argmax(tied_ids)])


def _gap_pred_one(own_theta: float, pred_theta: float, own_id: int, pred_id: int) -> float:
    """:func:`gap_to_pred` of floats (Python's float ``%`` is ``np.mod``)."""
    gap = (own_theta - pred_theta) % TWO_PI
    return TWO_PI if gap == 0.0 and pred_id > own_id else gap


def _gap_succ_one(own_theta: float, succ_theta: float, own_id: int, succ_id: int) -> float:
    """:func:`gap_to_succ` of floats."""
    gap = (succ_theta - own_theta) % TWO_PI
    return TWO_PI if gap == 0.0 and succ_id < own_id else gap


def ring_neighbours(own_id: int, own_theta: float, ids, thetas) -> tuple[int, int]:
    """
    (pred, succ) ids of one agent among the other live agents ``ids`` at angles ``thetas``.

    :func:`ring_candidates` for one row; ``ids`` must not contain ``own_id``. Returns
    ``(NO_NEIGHBOUR, NO_NEIGHBOUR)`` when alone.
    """
    ids = np.asarray(ids, dtype=np.int64)
    pred, succ = ring_candidates(np.ones((1, ids.size), dtype=bool), thetas, [own_theta],
                                 [own_id], ids)
    return tuple(NO_NEIGHBOUR if c == NO_NEIGHBOUR else int(ids[c]) for c in (pred[0], succ[0]))


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


def sorted_ring(entry, theta, ids):
    """
    Return the ``entry`` columns sorted by (theta, id): (columns, thetas, ids) in ring order.

    ``entry`` (K,) bool, ``theta`` (K,) angles, ``ids`` (K,) unique ints. Equal angles follow
    the ids, as :func:`ring_candidates` orders them.
    """
    cols = np.flatnonzero(np.asarray(entry, dtype=bool))
    theta_e = np.asarray(theta, dtype=float)[cols]
    ids_e = np.asarray(ids, dtype=np.int64)[cols]
    order = np.lexsort((ids_e, theta_e))
    return cols[order], theta_e[order], ids_e[order]


def ring_positions(s_theta, s_ids, theta_self, own_ids):
    """
    Return how many entries of a sorted ring (:func:`sorted_ring`) come at or before each agent.

    An entry comes after an agent where its (theta, id) is greater than the agent's own
    (``theta_self``, ``own_ids``), exactly as :func:`ring_candidates` compares them (no
    differences); the agents are placed in the ring by one merged sort, O((K + M) log).
    """
    m = s_theta.size
    theta_self = np.asarray(theta_self, dtype=float)
    own_ids = np.asarray(own_ids, dtype=np.int64)
    kind = np.concatenate((np.zeros(m, dtype=np.int8), np.ones(theta_self.size, dtype=np.int8)))
    merged = np.lexsort((kind, np.concatenate((s_ids, own_ids)),
                         np.concatenate((s_theta, theta_self))))
    before = np.cumsum(kind[merged] == 0)  # entries at or before each place of the merge
    place = np.empty(merged.size, dtype=np.int64)
    place[merged] = np.arange(merged.size)
    return before[place[m:]]


def select_neighbours_shared(entry, theta, theta_self, own_ids, ids, own_cols, cur_pred,
                             cur_succ, hysteresis):
    """
    :func:`select_neighbours` where every row sees the same entries but its own column.

    ``visible`` would be ``entry[None, :] & (column != own_cols[:, None])`` (M, K): the
    vectorised engine's shared table, in which row i's own broadcast is column ``own_cols[i]``
    (-1: none). The ring is sorted once (O(K log K)) and each row placed in it by a merged
    sort instead of comparing all M x K pairs: the same candidates, ties and hysteresis, the
    same gaps (the same elementwise functions of the same values). With a non-finite angle
    it is :func:`select_neighbours` itself (a NaN compares unlike any sort).
    """
    entry = np.asarray(entry, dtype=bool)
    theta = np.asarray(theta, dtype=float)
    ids = np.asarray(ids, dtype=np.int64)
    theta_self = np.asarray(theta_self, dtype=float)
    own_ids = np.asarray(own_ids, dtype=np.int64)
    own_cols = np.asarray(own_cols, dtype=np.int64)
    s_cols, s_theta, s_ids = sorted_ring(entry, theta, ids)
    if not (np.all(np.isfinite(s_theta)) and np.all(np.isfinite(theta_self))):
        visible = entry[None, :] & (np.arange(ids.size) != own_cols[:, None])
        return select_neighbours(visible, theta, theta_self, own_ids, ids, cur_pred, cur_succ,
                                 hysteresis)
    m = s_cols.size
    at = np.full(ids.size, -1, dtype=np.int64)
    at[s_cols] = np.arange(m)
    own = np.where(own_cols >= 0, at[np.maximum(own_cols, 0)], -1)  # own place, -1: none
    place = ring_positions(s_theta, s_ids, theta_self, own_ids)
    # Successor: the first entry after self, else (wrapping) the first of all; predecessor:
    # the last at or before self, else the last of all; each skips the row's own column.
    succ = np.where(place == own, place + 1, place)
    succ = np.where(succ >= m, np.where(own == 0, 1, 0), succ)
    pred = np.where(place - 1 == own, place - 2, place - 1)
    pred = np.where(pred < 0, np.where(own == m - 1, m - 2, m - 1), pred)
    none = (m - (own >= 0) <= 0) | (succ >= m) | (pred < 0)
    ring = np.append(s_cols, NO_NEIGHBOUR)  # index m (or -1 clipped away): none
    cand_succ = np.where(none, NO_NEIGHBOUR, ring[np.clip(succ, 0, m)])
    cand_pred = np.where(none, NO_NEIGHBOUR, ring[np.clip(pred, 0, m)])

    def gap(gap_fn, col):
        col = np.asarray(col, dtype=np.int64)
        if ids.size == 0:
            return np.full(col.shape, np.nan)
        at = np.maximum(col, 0)
        ok = (col != NO_NEIGHBOUR) & entry[at] & (at != own_cols)
        return np.where(ok, gap_fn(theta_self, np.where(ok, theta[at], 0.0), own_ids, ids[at]),
                        np.nan)

    return apply_hysteresis(
        cand_pred, cand_succ, gap(gap_to_pred, cand_pred), gap(gap_to_succ, cand_succ),
        cur_pred, cur_succ, gap(gap_to_pred, cur_pred), gap(gap_to_succ, cur_succ), hysteresis)
