"""
The vectorised engine's ``d_safe`` term compiled (numba): ``law.separation_velocity`` of rows.

At N = 1,000 the ``d_safe`` term over each agent's vehicles within reach was two thirds of the
vectorised tick in numpy (``law.stopping_gap``, ``law._take_out``: dozens of passes over
(rows, columns) arrays). :func:`separation_velocity` takes the same arguments as
``law.separation_velocity`` and returns the same values, bit for bit, from one pass over each
row's columns: the operations of ``law._separation_one`` (the float path, itself equal to the
array path) in the order of ``law._separation_arrays``, with the array path's two rules over
the whole call kept: a column's approach is taken out of every row where that column is near
in any row (a share of 0 elsewhere, which changes a zero's sign or an infinity, nothing else),
and the columns of none (NaN rows) add their zeros to the pushes' sum.
``test/unit/core/test_kernels_wide.py`` checks it against ``law`` on random and degenerate rows.

Only arrays of rows with ``v_law`` (what ``law.encirclement_step`` passes) are compiled;
anything else is ``law.separation_velocity`` itself. Before the term, each agent's vehicles
within reach (``spatial.obstacles_within_reach_shared``: a k-d tree's candidate pairs, each
tested with its own bound, gathered into the law's columns) are found on a grid, tested and
gathered compiled too, where no vehicle is silent (:func:`obstacles_within_reach`;
``test_kernels_wide`` compares the dicts byte for byte).

Imported through ``swarm.compiled_wide`` (numba on first use, its cache where
:mod:`core.compiled` puts it, ``SOLITON_COMPILED=0``: none). The scalar helpers are
:mod:`core.kernels`' (the batch engine's copy of the same float path). numba's on-disk cache
goes where :func:`core.compiled.cache_dir` puts it (set by :mod:`core.kernels`, imported
first): a directory named after every source the kernels read, so a change to those helpers
or to ``core.law``'s constants compiles afresh.
"""
from __future__ import annotations

import math

import numba
import numpy as np

from soliton_encirclement_ros.core import law
from soliton_encirclement_ros.core.kernels import (
    _ahead_one, _clip, _gap_one, _heading_one, _maximum, _minimum, _obstacle_reach,
    _offset_one, _way_one)
from soliton_encirclement_ros.core.law import (
    CONTINGENCY_SHARE, DENOMINATOR_EPS, SEPARATION_PASSES, SEPARATION_YIELD)

_JIT = {'cache': True, 'nogil': True, 'error_model': 'numpy'}
_FLOAT_MAX = np.finfo(float).max


@numba.njit(**_JIT)
def _nan_to_num(x):
    """np.nan_to_num of one float: NaN 0, infinities the largest finite floats."""
    if x != x:
        return 0.0
    if x == math.inf:
        return _FLOAT_MAX
    if x == -math.inf:
        return -_FLOAT_MAX
    return x


@numba.njit(**_JIT)
def _column(x0, y0, vx0, vy0, own_way, heading, ox, oy, ovx, ovy, age, has_age, margin,
            has_radius, reach, on, t_safe, a_safe, t_react, v_safe, v_uncertain):
    """
    law._separation_arrays of one row's column: (unit x, unit y, weight, pushed, closing, near).

    ``heading``: the way the law turns the agent to (``law._heading``), or ``own_way``.
    """
    if ox != ox or oy != oy:  # a NaN row (none there): what the array path makes of it
        return 0.0, 0.0, 0.0, 0.0, 0.0, False
    if has_age:
        age = _clip(age, 0.0, t_safe)
        ox, oy = ox + ovx * age, oy + ovy * age
    ux, uy, d, apart, closing, d_ahead = _ahead_one(
        x0, y0, vx0, vy0, ox, oy, ovx, ovy, margin, t_safe, a_safe)
    if t_react > 0.0:
        react = t_react + (age if has_age else 0.0)
        offx, offy = _offset_one(ovx, ovy, t_safe, a_safe)
        restx, resty = ox + offx, oy + offy
        gap, gx, gy = _gap_one(x0, y0, own_way, ox, oy, restx, resty, react, d)
        gap_law, lx, ly = _gap_one(x0, y0, heading, ox, oy, restx, resty, react, d)
        if gap_law < gap:
            gap, gx, gy = gap_law, lx, ly
        gap = gap - margin + (1.0 - CONTINGENCY_SHARE) * reach
        if gap < d_ahead:
            d_ahead, ux, uy = gap, gx, gy
            closing = _maximum(closing, 1.0)
            apart = apart or gap > DENOMINATOR_EPS
    near = apart and on and d_ahead < reach
    weight = v_safe * _minimum(1.0, 1.0 - d_ahead / reach) if near else 0.0
    pushed = weight
    if has_radius:
        if near:
            point = _maximum(v_safe * _minimum(1.0, 1.0 - (d_ahead + margin) / reach), 0.0)
            pushed = _minimum(weight, point + v_uncertain)
        else:
            pushed = 0.0
    return ux, uy, weight, pushed, closing, near


@numba.njit(**_JIT)
def _take_out(vx, vy, units, shares, near, active):
    """
    law._take_out of one row's ``(vx, vy)`` over the ``active`` columns (near in any row).

    A column not ``near`` in this row has a share of 0: it changes the velocity only where a
    component is a zero (its sign) or something is not finite (0 x inf), so it is skipped
    elsewhere.
    """
    for pass_ in range(SEPARATION_PASSES):
        for j in active:
            share = shares[j]
            if pass_ > 0:  # the later passes: only those whose approach goes entirely
                share = 1.0 if share >= 1.0 else 0.0
            ex, ey = units[j, 0], units[j, 1]
            if not near[j] and vx != 0.0 and vy != 0.0 and math.isfinite(vx + vy) \
                    and math.isfinite(ex + ey):
                continue
            toward = _minimum(vx * ex + (0.0 + vy * ey), 0.0)
            s = share * toward
            vx, vy = vx - s * ex, vy - s * ey
    return vx, vy


@numba.njit(**_JIT)
def separation_rows(position, velocity, others_position, others_velocity, v_law, others_age,
                    has_age, others_radius, has_radius, own_radius, d_safe, t_safe, a_safe,
                    t_react, v_safe, v_uncertain, out, kept, slide=False):
    """
    law._separation_arrays of M rows with ``v_law``: ``out`` (M, 2), its ``kept`` in ``kept``.

    ``kept`` (M, 2): ``v_law`` with its approach taken out. ``slide``: ``v_law`` is a
    ``law.slide`` (its way at its speed: ``law._heading``).

    ``position``, ``velocity``, ``v_law`` (M, 2); ``others_position``, ``others_velocity``
    (M, K, 2); ``others_age``, ``others_radius`` (M, K) (read where ``has_age`` /
    ``has_radius``); ``own_radius``, ``d_safe`` (M,).
    """
    m_rows, k_cols = others_position.shape[0], others_position.shape[1]
    units = np.empty((m_rows, k_cols, 2))
    weights = np.empty((m_rows, k_cols))
    pushes = np.empty((m_rows, k_cols))
    closings = np.empty((m_rows, k_cols))
    near = np.zeros((m_rows, k_cols), dtype=np.bool_)
    any_near = np.zeros(k_cols, dtype=np.bool_)
    for m in range(m_rows):
        x0, y0 = position[m, 0], position[m, 1]
        vx0, vy0 = velocity[m, 0], velocity[m, 1]
        on = d_safe[m] > 0.0
        reach = d_safe[m] if on else 1.0
        own_way = _way_one(vx0, vy0, t_safe, a_safe)
        heading = _heading_one(vx0, vy0, v_law[m, 0], v_law[m, 1], own_way, t_safe, a_safe,
                               slide)
        own = math.nan  # a slide's pass: the vehicles within reach at its own speed alone
        if slide:
            own = _obstacle_reach(np.hypot(vx0, vy0), 0.0, 0.0 + 0.0, d_safe[m], t_safe,
                                  a_safe, t_react)
        for k in range(k_cols):
            margin = 0.0
            if has_radius:
                margin = _nan_to_num(others_radius[m, k]) + own_radius[m]
            ox, oy = others_position[m, k, 0], others_position[m, k, 1]
            if slide and np.hypot(ox - x0, oy - y0) >= own:  # law._within_own_reach
                ox = oy = math.nan
            ux, uy, weight, pushed, closing, is_near = _column(
                x0, y0, vx0, vy0, own_way, heading, ox, oy,
                others_velocity[m, k, 0], others_velocity[m, k, 1],
                others_age[m, k], has_age, margin, has_radius, reach, on, t_safe, a_safe,
                t_react, v_safe, v_uncertain)
            units[m, k, 0], units[m, k, 1] = ux, uy
            weights[m, k], pushes[m, k], closings[m, k] = weight, pushed, closing
            if is_near:
                near[m, k] = any_near[k] = True
    active = np.flatnonzero(any_near)
    for m in range(m_rows):
        # np.sum(unit * pushed, axis=-2): in column order from the first
        px, py = 0.0, 0.0
        if k_cols:
            px, py = units[m, 0, 0] * pushes[m, 0], units[m, 0, 1] * pushes[m, 0]
        for k in range(1, k_cols):
            px, py = px + units[m, k, 0] * pushes[m, k], py + units[m, k, 1] * pushes[m, k]
        norm = np.hypot(px, py)
        scale = v_safe / (norm if norm > 0.0 else 1.0) if norm > v_safe else 1.0
        px, py = px * scale, py * scale
        for k in range(k_cols):  # yields (weights), the closing ones' (pushes)
            weights[m, k] = _minimum(1.0, SEPARATION_YIELD * weights[m, k] / v_safe)
            pushes[m, k] = weights[m, k] if closings[m, k] > 0.0 else 0.0
        lawx, lawy = v_law[m, 0], v_law[m, 1]
        px, py = _take_out(px, py, units[m], pushes[m], near[m], active)
        kx, ky = _take_out(lawx, lawy, units[m], weights[m], near[m], active)
        out[m, 0], out[m, 1] = (px + kx) - lawx, (py + ky) - lawy
        kept[m, 0], kept[m, 1] = kx, ky


def _writable(values, dtype=float):
    """
    Return ``values`` as a C-ordered, writable array (a copy only where it is not one).

    numba compiles (and caches) one kernel per argument type, and a read-only array (a
    broadcast view) is another type than a writable one: every argument is passed writable.
    """
    return np.require(values, dtype, ('C', 'W'))


def separation_velocity(position, velocity, others_position, others_velocity, params, v_law=None,
                        others_age=None, others_radius=None, own_radius=0.0, d_safe=None,
                        kept=False, slide=False):
    """
    ``law.separation_velocity``, compiled for arrays of rows (M, ...) with ``v_law``.

    The same arguments and values (``kept`` too); anything else (one agent, no ``v_law``, no
    safety distance) is ``law.separation_velocity`` itself.
    """
    position = np.asarray(position, dtype=float)
    reach = np.asarray(params.d_safe if d_safe is None else d_safe, dtype=float)
    if (others_position is None or v_law is None or position.ndim != 2
            or np.ndim(others_position) != 3 or not np.any(reach > 0.0)):
        return law.separation_velocity(position, velocity, others_position, others_velocity,
                                       params, v_law, others_age, others_radius, own_radius,
                                       d_safe, kept, slide)
    others = np.asarray(others_position, dtype=float)
    m, k = position.shape[0], others.shape[1]

    def rows(value, shape):
        return _writable(np.broadcast_to(np.asarray(value, dtype=float), shape))

    out, taken = np.empty((m, 2)), np.empty((m, 2))
    separation_rows(
        rows(position[:, :2], (m, 2)), rows(np.asarray(velocity, dtype=float)[..., :2], (m, 2)),
        rows(others[..., :2], (m, k, 2)),
        rows(np.asarray(others_velocity, dtype=float)[..., :2], (m, k, 2)),
        rows(np.asarray(v_law, dtype=float)[..., :2], (m, 2)),
        rows(0.0 if others_age is None else others_age, (m, k)), others_age is not None,
        rows(0.0 if others_radius is None else others_radius, (m, k)),
        others_radius is not None, rows(own_radius, (m,)), rows(reach, (m,)),
        float(params.t_safe), float(params.a_safe), float(params.t_react),
        float(params.v_safe), float(params.v_uncertain), out, taken, slide)
    return (out, taken) if kept else out


@numba.njit(**_JIT)
def grid_to_columns(cols, cell, own_cols, own_xy, speed_own, d_safe, position, velocity, age,
                    presence, has_presence, t_safe, a_safe, t_react, slack):
    """
    Return spatial.obstacles_within_reach_shared's columns, no vehicle silent, from a grid.

    The vehicles ``cols`` are put in square cells of side ``cell`` (more than the largest
    bound of any pair, with the search's slack); each row tests those in its cell and the
    eight around it with its own bound (``law.obstacle_reach`` with no disc; the distance
    ``np.hypot``), but its own column, and those beyond the row's largest bound with the
    ``slack`` (spatial's ``row_reach``): every vehicle within its bound, as the k-d tree's
    candidates give them. Returns the columns ``law.silent_obstacles`` makes of each row's
    vehicles in column order (every one heard): positions, velocities (M, K, 3), ages (M, K),
    K the most a row keeps, then (with ``has_presence``) as many columns of the presences'
    rest points; (M, 0, 3) when none is kept.
    """
    rows, n = own_cols.size, position.shape[0]
    x_low, y_low = math.inf, math.inf
    for m in range(rows):
        x_low, y_low = min(x_low, own_xy[m, 0]), min(y_low, own_xy[m, 1])
    for c in cols:
        x_low, y_low = min(x_low, position[c, 0]), min(y_low, position[c, 1])
    cx = np.empty(cols.size, dtype=np.int64)
    cy = np.empty(cols.size, dtype=np.int64)
    for p in range(cols.size):
        cx[p] = int((position[cols[p], 0] - x_low) // cell)
        cy[p] = int((position[cols[p], 1] - y_low) // cell)
    row_x = np.empty(rows, dtype=np.int64)
    row_y = np.empty(rows, dtype=np.int64)
    for m in range(rows):
        row_x[m] = int((own_xy[m, 0] - x_low) // cell)
        row_y[m] = int((own_xy[m, 1] - y_low) // cell)
    span = max(cy.max() if cols.size else 0, row_y.max() if rows else 0) + 2
    cell_key = cx * span + cy
    order = np.argsort(cell_key)
    sorted_key = cell_key[order]
    speed = np.empty(n)
    for c in cols:
        speed[c] = np.hypot(velocity[c, 0], velocity[c, 1])
    quickest = 0.0
    for c in cols:
        quickest = _maximum(quickest, speed[c])
    keys = np.empty(16, dtype=np.int64)
    kept = 0
    for m in range(rows):
        # the row's largest bound (its speed, the quickest vehicle), widened: none beyond
        reach = _obstacle_reach(speed_own[m], quickest, 0.0 + 0.0, d_safe[m], t_safe, a_safe,
                                t_react) * (1.0 + slack) + 1e-3
        reach2 = reach * reach if reach < cell else cell * cell
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                x, y = row_x[m] + dx, row_y[m] + dy
                if x < 0 or y < 0 or y >= span:
                    continue
                key = x * span + y
                low = np.searchsorted(sorted_key, key, side='left')
                high = np.searchsorted(sorted_key, key, side='right')
                for p in range(low, high):
                    c = cols[order[p]]
                    ex, ey = position[c, 0] - own_xy[m, 0], position[c, 1] - own_xy[m, 1]
                    if c == own_cols[m] or ex * ex + ey * ey > reach2:  # beyond any bound
                        continue
                    bound = _obstacle_reach(speed_own[m], speed[c], 0.0 + 0.0, d_safe[m],
                                            t_safe, a_safe, t_react)
                    distance = np.hypot(ex, ey)
                    if not distance >= bound:
                        if kept == keys.size:
                            keys = np.concatenate((keys, np.empty(keys.size, dtype=np.int64)))
                        keys[kept] = m * n + c
                        kept += 1
    return _columns(np.sort(keys[:kept]), rows, n, position, velocity, age, presence,
                    has_presence, t_safe, a_safe)


@numba.njit(**_JIT)
def _columns(keys, rows, n, position, velocity, age, presence, has_presence, t_safe, a_safe):
    """Gather the kept pairs ``keys`` (row x n + column, sorted) as law.silent_obstacles."""
    kept = keys.size
    counts = np.zeros(rows, dtype=np.int64)
    for p in range(kept):
        counts[keys[p] // n] += 1
    width = max(counts.max(), 1) if kept else 0
    blocks = 2 if has_presence else 1
    out_position = np.full((rows, blocks * width, 3), np.nan)
    out_velocity = np.full((rows, blocks * width, 3), np.nan)
    out_age = np.zeros((rows, blocks * width))
    slot = np.zeros(rows, dtype=np.int64)
    for p in range(kept):
        m, c = keys[p] // n, keys[p] % n
        s = slot[m]
        slot[m] += 1
        for axis in range(3):
            out_position[m, s, axis] = position[c, axis]
            out_velocity[m, s, axis] = velocity[c, axis]
        out_age[m, s] = age[c]
        if has_presence and presence[c]:  # its rest point: stopping_offset ahead, at rest
            offx, offy = _offset_one(velocity[c, 0], velocity[c, 1], t_safe, a_safe)
            rest = (position[c, 0] + offx, position[c, 1] + offy, position[c, 2] + 0.0)
            for axis in range(3):
                out_position[m, width + s, axis] = rest[axis]
                out_velocity[m, width + s, axis] = rest[axis] * 0.0
    return out_position, out_velocity, out_age


def obstacles_within_reach(cols, reach, own_cols, own_position, speed_own, d_safe, position,
                           velocity, age, presence, params):
    """
    ``spatial.obstacles_within_reach_shared``'s dict where no vehicle is silent, compiled.

    ``cols``: the vehicles counted (heard); ``reach``: the largest bound of any pair with the
    search's slack (spatial's); ``speed_own`` (M,) the rows' horizontal speeds; the rest as
    there. The same dict, bit for bit (:func:`grid_to_columns`, in place of the k-d tree);
    empty where no vehicle is kept.
    """
    from soliton_encirclement_ros.core.spatial import SEARCH_SLACK
    d_safe = _writable(np.broadcast_to(np.asarray(d_safe, dtype=float), np.shape(own_cols)))
    has_presence = presence is not None
    flags = np.zeros(len(velocity), dtype=bool) if presence is None else presence
    where, moving, since = grid_to_columns(
        _writable(cols, np.int64), float(reach) * 1.01, _writable(own_cols, np.int64),
        _writable(np.asarray(own_position)[:, :2]), _writable(speed_own), d_safe,
        _writable(position), _writable(velocity), _writable(age), _writable(flags, bool),
        has_presence, float(params.t_safe), float(params.a_safe), float(params.t_react),
        SEARCH_SLACK)
    if where.shape[1] == 0:
        return {}
    return {'others_position': where, 'others_velocity': moving, 'others_age': since}
