"""
The vectorised engine's all-pairs work, done by sorting and a k-d tree: the same values.

In the vectorised engine (``swarm.SwarmControllers``) every agent holds the same table of
broadcasts and uses all of it but its own entry. Three things each agent computes from that
table compared every agent with every other (M x N pairs a tick: a million at N = 1,000):
its ring neighbours (``neighbours.select_neighbours_shared``, a sort), its offset from the
even ring (:func:`ring_offset_shared`) and the vehicles within reach of its ``d_safe`` term
(:func:`obstacles_within_reach_shared`, a k-d tree). Each function here returns exactly what
the all-pairs function of ``core.law`` returns on the shared table (bit for bit: the same
elementwise operations on the same values, the same sums in the same order), in O(N log N)
time and without M x N arrays, except the even-ring offset's sum, which is one pass over
rows of N kept in blocks of :data:`BLOCK` values. ``test/unit/core/test_spatial.py`` checks
each against ``core.law`` on random and degenerate tables.
"""
from __future__ import annotations

import math

import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    crowded, obstacle_reach, ring_offset, ring_offset_gate, silent_obstacles,
    silent_obstacles_within_reach, silent_track, uncertainty_discs)
from soliton_encirclement_ros.core.neighbours import sorted_ring
from velocity_mobility_ros.core.geometry import TWO_PI

# Values in one block of rows of an M x N pass: 512 kB, a few at once (in cache: 2x faster).
BLOCK = 1 << 16
# Below this many columns the engines keep ``core.law``'s all-pairs functions (no tree to build).
SHARED_COLUMNS = 64
# The reach of the candidates' search is widened by this share (and 1 mm) over the largest
# bound, so that no rounding of the tree's distances loses a vehicle the exact test keeps.
SEARCH_SLACK = 1e-6


def but_own(mask, own_cols):
    """
    Return whether any row sees a column of ``mask`` (N,) other than its own ``own_cols`` (M,).

    ``np.any(mask[None, :] & (column != own_cols[:, None]))`` without the M x N array: rows
    have distinct own columns, so with two rows or more every column is another's.
    """
    mask = np.asarray(mask, dtype=bool)
    own_cols = np.asarray(own_cols, dtype=np.int64)
    if own_cols.size == 1 and own_cols[0] >= 0:
        mask = mask.copy()
        mask[own_cols[0]] = False
    return bool(own_cols.size and mask.any())


def crowded_shared(own_position, kept, position, own_cols, bound):
    """
    Return ``law.crowded`` of each row (M,) over one shared table, without the M x N array.

    ``kept`` (N,) the vehicles counted, at ``position`` (N, 3), but each row's own column
    ``own_cols`` (M,); ``bound`` (M,) each row's ``d_safe``. Up to :data:`SHARED_COLUMNS`
    counted, ``law.crowded`` itself in blocks of rows; beyond, only the pairs a k-d tree finds
    within the widest bound, compared as ``law.crowded`` compares them (the same answer: a NaN
    position is never nearer, so none enters the tree).
    """
    own = np.asarray(own_position, dtype=float)
    own_cols = np.asarray(own_cols, dtype=np.int64)
    bound = np.broadcast_to(np.asarray(bound, dtype=float), own_cols.shape)
    out = np.zeros(own_cols.size, dtype=bool)
    cols = np.flatnonzero(np.asarray(kept, dtype=bool)
                          & np.isfinite(position[:, 0]) & np.isfinite(position[:, 1]))
    if cols.size <= SHARED_COLUMNS:
        for block in _row_blocks(own_cols.size, cols.size):
            out[block] = crowded(own[block], position[cols],
                                 cols[None, :] != own_cols[block, None], bound[block])
        return out
    rows = np.flatnonzero(np.isfinite(own[:, 0]) & np.isfinite(own[:, 1]) & (bound > 0.0))
    if rows.size == 0:
        return out
    i, j, _ = _pairs_within(own[rows, :2], position[cols, :2],
                            _widened(float(bound[rows].max())))
    i, j = rows[i], cols[j]
    keep = j != own_cols[i]
    i, j = i[keep], j[keep]
    dx = position[j, 0] - own[i, 0]
    dy = position[j, 1] - own[i, 1]
    out[i[dx * dx + dy * dy < bound[i] * bound[i]]] = True
    return out


def _row_blocks(rows: int, columns: int):
    """Slices of at most :data:`BLOCK` values of an (rows, columns) pass."""
    step = max(1, BLOCK // max(columns, 1))
    return (slice(start, min(start + step, rows)) for start in range(0, rows, step))


def ring_offset_shared(theta_self, theta, entry, own_cols):
    """
    ``law.ring_offset(theta_self, theta, heard)`` with ``heard`` each row's shared entries.

    ``heard`` would be ``entry[None, :] & (column != own_cols[:, None])`` (M, N). The nearest
    member each way comes from the sorted ring; the sum of the angles ahead is ``law``'s own
    (the same values summed over the same rows of N, one block of rows at a time), with
    ``np.mod`` by 2 pi taken as the one addition it is for differences within (-2 pi, 2 pi).
    Angles outside [0, 2 pi) or not finite: ``law.ring_offset`` itself, by blocks of rows.
    """
    theta_self = np.asarray(theta_self, dtype=float)
    theta = np.asarray(theta, dtype=float)
    entry = np.asarray(entry, dtype=bool)
    own_cols = np.asarray(own_cols, dtype=np.int64)
    rows, n = theta_self.size, theta.size
    own_in = np.where(own_cols >= 0, entry[np.maximum(own_cols, 0)], False)
    s_cols, s_theta = sorted_ring(entry, theta, np.arange(n))[:2]
    if not (_in_turn(s_theta) and _in_turn(theta_self)):
        out = np.empty(rows)
        for block in _row_blocks(rows, n):
            heard = entry[None, :] & (np.arange(n) != own_cols[block, None])
            out[block] = ring_offset(theta_self[block], theta, heard)
        return out
    count = (np.count_nonzero(entry) - own_in).astype(float)
    near_ahead, near_behind = _nearest_each_way(s_cols, s_theta, theta_self, own_cols)
    total = np.empty(rows)
    outside = np.flatnonzero(~entry)
    for block in _row_blocks(rows, n):
        d = theta[None, :] - theta_self[block, None]
        ahead = (d < 0.0) * TWO_PI  # np.mod(d, 2 pi) for d in (-2 pi, 2 pi): d + 2 pi or d
        ahead += d
        if outside.size:
            ahead[:, outside] = 0.0
        own = own_cols[block]
        mine = own >= 0
        ahead[np.flatnonzero(mine), own[mine]] = 0.0
        total[block] = np.sum(ahead, axis=-1)
    offset = (total - math.pi * count) / (count + 1.0)
    offset = offset * ring_offset_gate(np.where(offset > 0.0, near_ahead, near_behind),
                                       count + 1.0)
    return np.where(np.isfinite(offset), offset, 0.0)


def _in_turn(angles) -> bool:
    """Return whether every angle lies in [0, 2 pi): their differences are within 2 pi."""
    return bool(np.all((angles >= 0.0) & (angles < TWO_PI)))


def _nearest_each_way(s_cols, s_theta, theta_self, own_cols):
    """
    Each row's smallest ``mod(theta_j - theta_self)`` and ``mod(theta_self - theta_j)``.

    Over the sorted ring's entries but the row's own column (inf: none). Ahead, the
    smallest is that of the first entry at or after the row's angle, or of the first of all
    (wrapping); behind, that of the last at or before it, or of the last of all: the
    differences grow with the angles, and rounding keeps that order.
    """
    m = s_cols.size
    at = np.full(int(max(s_cols.max(initial=-1), own_cols.max(initial=-1))) + 1, -1,
                 dtype=np.int64)
    at[s_cols] = np.arange(m)
    own = np.where(own_cols >= 0, at[np.maximum(own_cols, 0)], -1)
    ring = np.append(s_theta, np.nan)  # index m: none
    low = np.searchsorted(s_theta, theta_self, side='left')
    high = np.searchsorted(s_theta, theta_self, side='right')

    def value(index, valid, diff):
        with np.errstate(invalid='ignore'):
            got = np.mod(diff(ring[np.where(valid, index, m)]), TWO_PI)
        return np.where(valid, got, np.inf)

    def ahead_of(theta_j):
        return theta_j - theta_self

    def behind_of(theta_j):
        return theta_self - theta_j

    first = np.where(low == own, low + 1, low)
    wrap = np.where(own == 0, 1, 0)
    near_ahead = np.minimum(value(first, first < m, ahead_of),
                            value(wrap, wrap < low, ahead_of))
    last = np.where(high - 1 == own, high - 2, high - 1)
    wrap = np.where(own == m - 1, m - 2, m - 1)
    near_behind = np.minimum(value(last, last >= 0, behind_of),
                             value(wrap, wrap >= high, behind_of))
    return near_ahead, near_behind


def obstacles_within_reach_shared(own_position, own_velocity, d_safe, heard, silent, own_cols,
                                  position, velocity, age, presence,
                                  params: ControllerParams, silent_for=None, usable=None,
                                  compiled=None):
    """
    ``law.silent_obstacles_within_reach`` of M agents on the shared table, by a k-d tree.

    Row i's columns would be ``heard`` and ``silent`` (N,) but its own column ``own_cols[i]``;
    ``position``/``velocity`` (N, 3), ``age`` (N,) and ``presence`` (N,) or None as there;
    with silent vehicles their discs are ``law.uncertainty_discs(0, silent_for, usable)``
    (``silent_for`` (N,) s, ``usable`` (M,)), as the engine gives them. The candidates are
    the pairs within the largest bound of any pair (that of the fastest agent, vehicle,
    widest disc and ``d_safe``: the bound grows with each); each is then tested with the
    bound and distance of its own (``law.obstacle_reach``, ``np.hypot``: the same values),
    kept in column order and gathered as ``law`` gathers them. The same dict; below
    :data:`SHARED_COLUMNS` vehicles, or with a non-finite state, it is ``law``'s own call.
    ``compiled``: None, or ``core.kernels_wide.obstacles_within_reach``, which finds the
    candidates on a grid, tests and gathers them where no vehicle is silent (the same dict).
    """
    heard = np.asarray(heard, dtype=bool)
    silent = np.asarray(silent, dtype=bool) & ~heard
    own_cols = np.asarray(own_cols, dtype=np.int64)
    own = np.asarray(own_position, dtype=float)
    own_v = np.asarray(own_velocity, dtype=float)
    position = np.asarray(position, dtype=float)
    velocity = np.asarray(velocity, dtype=float)
    age = np.asarray(age, dtype=float)
    d_safe = np.broadcast_to(np.asarray(d_safe, dtype=float), own_cols.shape)
    rows, n = own_cols.size, heard.size
    counted = heard | silent
    at = position
    half = np.zeros(n)
    any_silent = but_own(silent, own_cols)
    if any_silent:
        track, half = silent_track(position, velocity, age, params)
        at = np.where(silent[:, None], track, position)
        half = np.where(silent, half, 0.0)
    speed_own = np.hypot(own_v[:, 0], own_v[:, 1])
    speed = np.hypot(velocity[:, 0], velocity[:, 1])
    finite = (np.all(np.isfinite(own[:, :2])) and np.all(np.isfinite(speed_own))
              and np.all(np.isfinite(d_safe))
              and np.all(np.isfinite(at[counted, :2])) and np.all(np.isfinite(speed[counted]))
              and np.all(np.isfinite(half[counted]))
              and (silent_for is None or np.all(np.isfinite(np.asarray(silent_for)[silent]))))
    if n <= SHARED_COLUMNS or not finite:
        return _all_pairs(own, own_v, d_safe, heard, silent, own_cols, position, velocity, age,
                          presence, params, silent_for, usable)
    cols = np.flatnonzero(counted)
    if rows == 0 or cols.size == 0:
        return {}
    # The largest bound of any pair, and every pair within it (a superset of those kept),
    # then those within the bounds of their row's agent and of their column's vehicle.
    since = None
    widest = np.zeros(n)  # each vehicle's widest disc, for any row
    if silent_for is not None:
        since = np.asarray(silent_for, dtype=float)
        widest = _discs(silent, since, np.max(usable, initial=0.0), params)
    widest = widest + half
    fastest, quickest = float(np.max(speed_own)), float(np.max(speed[cols]))
    reach = float(obstacle_reach(fastest, quickest, float(np.max(widest[cols])), params, 0.0,
                                 float(np.max(d_safe))))
    if not math.isfinite(reach):
        return _all_pairs(own, own_v, d_safe, heard, silent, own_cols, position, velocity, age,
                          presence, params, silent_for, usable)
    if compiled is not None and not any_silent and silent_for is None:
        return compiled(cols, _widened(reach), own_cols, own, speed_own, d_safe, position,
                        velocity, age, presence, params)
    i, j, apart = _pairs_within(own[:, :2], at[cols, :2], _widened(reach))
    j = cols[j]
    row_reach = obstacle_reach(speed_own, quickest, float(np.max(widest[cols])), params, 0.0,
                               d_safe)
    column_reach = obstacle_reach(fastest, speed, widest, params, 0.0, float(np.max(d_safe)))
    near = (apart <= _widened(np.minimum(row_reach[i], column_reach[j]))) & (j != own_cols[i])
    i, j = i[near], j[near]
    silent_pair = silent[j]
    disc = 0.0
    if silent_for is not None:  # (P, 1) against the rows' usable sizes (P,): (P, 1)
        disc = _discs(silent_pair[:, None], since[j][:, None], usable[i], params)[:, 0]
    if any_silent:
        disc = disc + np.where(silent_pair, half[j], 0.0)
    bound = obstacle_reach(speed_own[i], speed[j], disc, params, np.zeros(1), d_safe[i])
    distance = np.hypot(at[j, 0] - own[i, 0], at[j, 1] - own[i, 1])
    key = np.sort((i * n + j)[~(distance >= bound)])  # kept, by row then column
    if key.size == 0:
        return {}
    i, j = key // n, key % n
    counts = np.bincount(i, minlength=rows)
    width = max(int(counts.max()), 1)
    slot = np.arange(i.size) - (np.cumsum(counts) - counts)[i]
    take = np.full((rows, width), n, dtype=np.int64)  # n: the fill appended to each column
    take[i, slot] = j

    def gather(values, fill):
        values = np.asarray(values)
        return np.concatenate((values, np.full((1,) + values.shape[1:], fill,
                                               dtype=values.dtype)))[take]

    radius = None
    silent_g = gather(silent, False)
    if silent_for is not None:
        radius = np.where(take < n, _discs(silent_g, gather(since, 0.0), usable, params), 0.0)
    return silent_obstacles(gather(heard, False), silent_g, gather(position, np.nan),
                            gather(velocity, np.nan), gather(age, 0.0),
                            None if presence is None else gather(presence, False), params,
                            radius, None, own_position=own)


def _widened(reach):
    """Return ``reach`` with :data:`SEARCH_SLACK`: no rounding of a distance loses a pair."""
    return reach * (1.0 + SEARCH_SLACK) + 1e-3


def _discs(silent, since, usable, params):
    """Return the discs of silent vehicles as the engine gives them (law.uncertainty_discs)."""
    return uncertainty_discs(0.0, np.where(silent, since, 0.0), usable, params)


def _pairs_within(points, others, reach):
    """Return (i, j, distance): every pair of ``points`` (M, 2) and ``others`` within reach."""
    from scipy.spatial import cKDTree  # only large swarms pay for its import
    pairs = cKDTree(points).sparse_distance_matrix(cKDTree(others), reach,
                                                   output_type='ndarray')
    return pairs['i'].astype(np.int64), pairs['j'].astype(np.int64), pairs['v']


def _all_pairs(own, own_v, d_safe, heard, silent, own_cols, position, velocity, age, presence,
               params, silent_for, usable):
    """``law.silent_obstacles_within_reach`` on the M x N table itself (small or non-finite)."""
    usable_cols = np.arange(heard.size) != own_cols[:, None]
    live = heard & usable_cols
    silent_rows = silent & usable_cols
    radius = None
    if silent_for is not None:
        radius = _discs(silent_rows, silent_for, usable, params)
    return silent_obstacles_within_reach(own, own_v, d_safe, live, silent_rows, position,
                                         velocity, age, presence, params, radius)
