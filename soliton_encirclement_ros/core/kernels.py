"""
The batch engine's compiled tick (numba): broadcasts, neighbours, the law, metrics, vehicles.

Imported only through :mod:`core.compiled` (which decides where these kernels apply and falls
back to the numpy path elsewhere); importing this module compiles nothing until a kernel is
first called, and the compiled code is cached on disk (``cache=True``) so later processes load
it. Each block mirrors one function of ``core.law``, ``core.neighbours``, ``batch_engine``,
``core.target_estimate`` or ``velocity_mobility_ros.core.model``, named in its comment,
operation for operation in the order of the per-agent float path
(:func:`law.encirclement_step_one`), so that a row's result has the bits of the array path.
The transcendental functions the law needs (the angles about the target, ``g(u)``, the
estimate's low-pass share, the tables of ``d_safe``, hysteresis and damping per ring size)
are computed by numpy between the kernels and passed in: numpy's and the C library's may
differ in the last bit. The kernels write into buffers the caller keeps between ticks.

Parameters reach the kernels as one float array, ``LAW_FIELDS`` in order (see
:func:`compiled.law_vector`).
"""
from __future__ import annotations

import math
import os
import sys

import numba
import numpy as np

from soliton_encirclement_ros.core.compiled import cache_dir
from soliton_encirclement_ros.core.geometry import R_EPS
from soliton_encirclement_ros.core.law import (
    CONTINGENCY_SHARE, DENOMINATOR_EPS, RING_GATE_SHARE, SEPARATION_PASSES, SEPARATION_YIELD,
    SLIDE_GAIN)
from soliton_encirclement_ros.core.neighbours import NO_NEIGHBOUR
from velocity_mobility_ros.core.geometry import TWO_PI

# The law's parameters the kernel reads, in the order of the float array it takes.
LAW_FIELDS = ('k_r', 'k_dr', 'radius', 'c_coupling', 'beta_u', 'alpha_u', 'k_e_tau',
              'kappa_u_diff', 'k_u_steepen', 'kappa_u_disp', 'k_tau', 'r_min', 'k_omega_own',
              'target_lead', 'control_period', 'max_speed_xy', 'max_speed_z', 'altitude', 'k_z',
              'u_bound', 'omega_ref', 'altitude_hold', 'k_e_ring', 'ring_ramp', 'agent_timeout',
              'ring_fit', 't_safe', 'a_safe', 't_react', 'v_safe', 'ring_turn_acc',
              'ring_gains_from', 'ring_gains_full', 'ring_ramp_silent')
(K_R, K_DR, RADIUS, C_COUPLING, BETA_U, ALPHA_U, K_E_TAU, KAPPA_U_DIFF, K_U_STEEPEN,
 KAPPA_U_DISP, K_TAU, R_MIN, K_OMEGA_OWN, TARGET_LEAD, CONTROL_PERIOD, MAX_SPEED_XY,
 MAX_SPEED_Z, ALTITUDE, K_Z, U_BOUND, OMEGA_REF, ALTITUDE_HOLD, K_E_RING, RING_RAMP,
 AGENT_TIMEOUT, RING_FIT, T_SAFE, A_SAFE, T_REACT, V_SAFE, RING_TURN_ACC, RING_GAINS_FROM,
 RING_GAINS_FULL, RING_RAMP_SILENT) = range(len(LAW_FIELDS))
# Not ControllerParams fields: u_bound (law.u_bound), omega_ref (the scenario's),
# altitude_hold (1.0 or 0.0), agent_timeout (its property), ring_fit (1.0 where every lambda
# is 1: BatchControllers._ring_offset fits the even ring only then).

# Statuses of reach_inputs / control_rows.
DONE = 0
NUMPY_PATH = 1  # something the kernel does not cover: the caller runs the numpy path

# numba's cache under a directory named after every source the kernels are built from
# (compiled.cache_dir), set before any kernel is decorated: kernels_wide imports this module
# first, so its kernels go there too.
_CACHE = cache_dir()
if _CACHE is not None:
    numba.config.CACHE_DIR = _CACHE
    os.environ['NUMBA_CACHE_DIR'] = _CACHE  # worker processes choose the same
_JIT = {'cache': True, 'nogil': True, 'error_model': 'numpy'}
# The helpers control_rows calls once or more a row, inlined into their callers (numba's own
# inlining, of its IR: the same operations in the same order, so the same bits). Called as
# functions, each call that passes an array increfs and decrefs it (an atomic add through a
# call, a few each) where numba's reference-count pruning leaves them: a third of a row's time.
_INLINE = dict(_JIT, inline='always')


def _skip_blas_probe() -> None:
    """
    Load numba's numpy support without its BLAS probe: the kernels call no BLAS.

    ``numba.np.arraymath``, loaded with the first kernel, sets ``_HAVE_BLAS`` by importing
    ``scipy.linalg.cython_blas``, i.e. all of ``scipy.linalg``: about 0.3 CPU-s in every process
    that runs a kernel (each ``batch_sim``, a sweep's fork server), for ``np.dot`` and the like,
    which no kernel here uses. The probe is made to fail (numba then compiles no BLAS call: a
    kernel that made one would not compile) and ``scipy.linalg`` imports as usual afterwards.
    """
    name = 'scipy.linalg.cython_blas'
    if 'numba.np.arraymath' in sys.modules or name in sys.modules:
        return
    sys.modules[name] = None  # the import machinery's "not there"
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        del sys.modules[name]


_skip_blas_probe()  # before the first kernel loads numba's numpy support


@numba.njit(**_JIT)
def heard_rows(has, tab, rx, member, now, agent_timeout, entry):
    """
    ``heard`` and ``entry`` of ``BatchControllers._control`` (rows M x senders K), ring sizes.

    ``entry[m, k]``: ``has & (now - rx <= agent_timeout) & member``; returns the ring size
    of each row (its entries + 1). ``rx`` and ``member`` are read at row ``tab[m]``
    (:func:`prepare_rows`).
    """
    m_rows, k_cols = has.shape
    ring = np.empty(m_rows, dtype=np.int64)
    for m in range(m_rows):
        count = 0
        t = tab[m]
        for k in range(k_cols):
            e = has[m, k] and (now - rx[t, k] <= agent_timeout) and member[t, k]
            entry[m, k] = e
            if e:
                count += 1
        ring[m] = count + 1
    return ring


@numba.njit(**_JIT)
def reach_rows(active, has, tab, rx, now, agent_timeout, obstacle_memory, own_velocity,
               nb_velocity, speed, others, covered):
    """
    ``batch_engine.none_within_reach``'s speeds, row by row: ``speed``, ``others`` (M,).

    ``covered[m]``: an ``active`` row whose scan may be skipped if every vehicle it counts
    is far enough (``control_rows`` checks the distances): False where the scan must run
    whatever they are (a silent vehicle, none counted, a speed that is not finite).
    ``counted`` is ``heard | silent``, ``heard`` the states within ``agent_timeout`` and
    ``silent`` those within ``obstacle_memory``. The speeds are the square roots of the
    largest squares (numpy takes the largest ``hypot``): at most a last bit apart, far inside
    the millimetre by which ``law.obstacle_reach`` pads its bound.
    """
    m_rows, k_cols = has.shape
    for m in range(m_rows):
        covered[m] = False
        speed[m] = 0.0
        others[m] = 0.0
        if not active[m]:
            continue
        s2 = own_velocity[m, 0] * own_velocity[m, 0] + own_velocity[m, 1] * own_velocity[m, 1]
        if not math.isfinite(s2):
            continue
        others2 = 0.0
        counted = False
        fine = True
        t = tab[m]
        for k in range(k_cols):
            if not has[m, k]:
                continue
            age = now - rx[t, k]
            heard = age <= agent_timeout
            silent = age <= obstacle_memory
            if silent and not heard:
                fine = False
                break
            if heard or silent:
                counted = True
                vx, vy = nb_velocity[t, k, 0], nb_velocity[t, k, 1]
                o2 = vx * vx + vy * vy
                if not math.isfinite(o2):
                    fine = False
                    break
                if o2 > others2:
                    others2 = o2
        if fine and counted:
            covered[m] = True
            speed[m] = math.sqrt(s2)
            others[m] = math.sqrt(others2)


@numba.njit(**_INLINE)
def _nearest(m, has, tab, rx, now, obstacle_memory, own_position, nb_position):
    """
    Return the squared distance to the nearest vehicle row ``m`` counts, and more.

    Counted: ``has``, received at ``rx`` within ``obstacle_memory``. Returns ``(d2, nan,
    counted)``: the least squared distance of the finite ones (inf: none), whether one is
    NaN, whether any vehicle is counted. One pass over the row answers every bound's question
    (:func:`_nearer`).
    """
    ox, oy = own_position[m, 0], own_position[m, 1]
    t = tab[m]
    least = math.inf
    nan = counted = False
    for k in range(has.shape[1]):
        if has[m, k] and now - rx[t, k] <= obstacle_memory:
            counted = True
            dx = nb_position[t, k, 0] - ox
            dy = nb_position[t, k, 1] - oy
            d2 = dx * dx + dy * dy
            if d2 < least:
                least = d2
            elif d2 != d2:
                nan = True
    return least, nan, counted


@numba.njit(**_INLINE)
def _nearer(nearest, bound, nan_counts):
    """
    Whether a vehicle of :func:`_nearest`'s pass is nearer than ``bound``.

    Squared distances against the squared bound. A NaN distance or bound counts as nearer
    where ``nan_counts`` (``batch_engine.none_within_reach``'s test, which it fails: ``not``
    of this is that test), and as not nearer elsewhere (``law.crowded``).
    """
    least, nan, counted = nearest
    if not counted:
        return False
    bound2 = bound * bound
    if nan_counts:
        return nan or not least >= bound2
    return least < bound2


@numba.njit(**_INLINE)
def _mod_2pi(x):
    """
    ``np.mod(x, TWO_PI)`` (Python's ``%``) bit for bit, without ``fmod`` where |x| < 2 pi.

    There ``fmod`` returns ``x`` exactly, and the modulo is ``x + TWO_PI`` (x < 0) or
    ``x + 0.0`` (``x``; +0.0 of either zero): a select, not a branch on the sign, which the
    offsets of a ring take at random. Elsewhere (NaN included) ``%`` itself.
    """
    if -TWO_PI < x < TWO_PI:
        return x + (TWO_PI if x < 0.0 else 0.0)
    return x % TWO_PI


@numba.njit(**_INLINE)
def _no_presence(m, has, tab, rx_time, member, now, agent_timeout):
    """Whether row ``m`` hears no presence (a vehicle heard whose state is no ring member's)."""
    t = tab[m]
    for k in range(has.shape[1]):
        if has[m, k] and now - rx_time[t, k] <= agent_timeout and not member[t, k]:
            return False
    return True


@numba.njit(**_INLINE)
def _gap_to_pred(own_theta, pred_theta, own_id, pred_id):
    """neighbours.gap_to_pred of one row (ids break exact ties)."""
    gap = _mod_2pi(own_theta - pred_theta)
    if gap == 0.0 and pred_id > own_id:
        return TWO_PI
    return gap


@numba.njit(**_INLINE)
def _gap_to_succ(own_theta, succ_theta, own_id, succ_id):
    """neighbours.gap_to_succ of one row."""
    gap = _mod_2pi(succ_theta - own_theta)
    if gap == 0.0 and succ_id < own_id:
        return TWO_PI
    return gap


@numba.njit(**_INLINE)
def _kept(cur_gap, cand_gap, slack):
    """apply_hysteresis: keep the current neighbour unless the candidate is ``slack`` closer."""
    return math.isfinite(cur_gap) and not cand_gap < cur_gap - slack


@numba.njit(**_INLINE)
def _angular_rate(px, py, vx, vy, tx, ty, tvx, tvy):
    """geometry.angular_rate of one neighbour (NaN when missing or at the target)."""
    rx, ry = px - tx, py - ty
    r2 = rx * rx + ry * ry
    cross = rx * (vy - tvy) - ry * (vx - tvx)
    return cross / r2 if r2 >= R_EPS * R_EPS else math.nan


@numba.njit(**_INLINE)
def _numpy_block_sum(a, lo, n):
    """Return numpy's pairwise sum of ``a[lo:lo + n]``, n <= 128 (its blocks: no split)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(**_INLINE)
def _numpy_sum(a):
    """
    ``np.sum`` of ``a`` (K,) in numpy's order (its pairwise summation), bit for bit.

    numpy reduces a contiguous last axis so: below 8 terms in order; up to 128 in 8 running
    sums, combined pairwise, then the rest in order; beyond, the sum of two halves' sums (the
    first a multiple of 8 long). The halving runs on explicit stacks (numba's on-disk cache
    does not load recursive functions).
    """
    if a.size <= 128:
        return _numpy_block_sum(a, 0, a.size)
    todo_lo = np.empty(192, dtype=np.int64)  # depth <= 63: 3 entries a level at most
    todo_n = np.empty(192, dtype=np.int64)   # n, or -1: add the last two sums
    sums = np.empty(64)
    top, held = 1, 0
    todo_lo[0], todo_n[0] = 0, a.size
    while top:
        top -= 1
        lo, n = todo_lo[top], todo_n[top]
        if n < 0:
            held -= 1
            sums[held - 1] = sums[held - 1] + sums[held]
        elif n <= 128:
            sums[held] = _numpy_block_sum(a, lo, n)
            held += 1
        else:
            half = n // 2
            half -= half % 8
            todo_lo[top], todo_n[top] = 0, -1                  # then left + right
            todo_lo[top + 1], todo_n[top + 1] = lo + half, n - half
            todo_lo[top + 2], todo_n[top + 2] = lo, half       # the left half first
            top += 3
    return sums[0]


@numba.njit(**_INLINE)
def _ring_offset_row(entry, theta, m, theta_self, ahead):
    """
    law.ring_offset of row ``m`` (``heard`` = ``entry[m]``), gated by law.ring_offset_gate.

    ``ahead`` (K,): scratch. Its sum is numpy's (:func:`_numpy_sum` over every column, the
    members not heard as 0), the minima exact; a NaN angle heard propagates as numpy's.
    """
    k_cols = entry.shape[1]
    near_ahead = math.inf
    near_behind = math.inf
    count = 0
    for k in range(k_cols):
        if entry[m, k]:
            a = _mod_2pi(theta[m, k] - theta_self)        # np.mod(thetas - theta_self)
            b = _mod_2pi(theta_self - theta[m, k])        # np.mod(theta_self - thetas)
            if a != a or a < near_ahead:                    # np.min: a NaN stays
                near_ahead = a
            if b != b or b < near_behind:
                near_behind = b
            ahead[k] = a
            count += 1
        else:
            ahead[k] = 0.0
    n_heard = float(count)
    offset = (_numpy_sum(ahead) - math.pi * n_heard) / (n_heard + 1.0)
    # ring_offset_gate(where(offset > 0, near_ahead, near_behind), count + 1)
    gap = near_ahead if offset > 0.0 else near_behind
    weight = gap / (RING_GATE_SHARE * TWO_PI / (n_heard + 1.0))
    if not math.isfinite(weight):
        weight = 1.0
    weight = _clip(weight, 0.0, 1.0)
    offset = offset * weight
    return offset if math.isfinite(offset) else 0.0


@numba.njit(**_INLINE)
def _ring_ramp_row(m, ring_size, now, law, last_size, changed_at, last_tick, crowd):
    """
    law.ring_ramp of row ``m`` (its array form, ``now`` a float): the weight of the ring term.

    Updates the row's state as ``BatchControllers._control`` puts it: ``last_size`` (the ring
    size heard now), ``changed_at``, ``last_tick`` (``now``). A row the kernel steps counts no
    silent vehicle (:func:`reach_rows`; none without ``d_safe``): with ``ring_ramp_silent`` a
    change of size restarts the ramp only where ``crowd`` (:func:`_nearer`).
    """
    if (ring_size != last_size[m] and (law[RING_RAMP_SILENT] == 0.0 or crowd)) \
            or not now - last_tick[m] <= law[AGENT_TIMEOUT]:
        changed_at[m] = now
    last_size[m] = ring_size
    last_tick[m] = now
    if law[RING_RAMP] == 0.0:
        return 1.0
    weight = _clip((now - changed_at[m]) / law[RING_RAMP], 0.0, 1.0)
    return weight if math.isfinite(weight) else 0.0


@numba.njit(**_JIT)
def _minimum(a, b):
    """floats.minimum: ``np.minimum`` of two floats (NaN wins; the first of equal zeros)."""
    return a if a != a or a <= b else b


@numba.njit(**_JIT)
def _maximum(a, b):
    """floats.maximum: ``np.maximum`` of two floats (NaN wins; the first of equal zeros)."""
    return a if a != a or a >= b else b


@numba.njit(**_JIT)
def _stopping_distance(speed, lag, braking):
    """law.stopping_distance of one speed."""
    knee = braking * lag
    if braking > 0.0 and speed > knee:
        return (speed * speed - knee * knee) / (2.0 * braking) + knee * lag
    return speed * lag


@numba.njit(**_JIT)
def _offset_one(vx, vy, lag, braking):
    """law.offset_one: law.stopping_offset of one horizontal velocity."""
    vx = vx if math.isfinite(vx) else 0.0
    vy = vy if math.isfinite(vy) else 0.0
    speed = np.hypot(vx, vy)
    distance = _stopping_distance(speed, lag, braking)
    if speed > 0.0:
        return vx / speed * distance, vy / speed * distance
    return 0.0 * distance, 0.0 * distance


@numba.njit(**_JIT)
def _way_one(wx, wy, lag, braking):
    """law._way_one: a way, its stop offset and its braking unit (wx, wy, ox, oy, bx, by)."""
    offx, offy = _offset_one(wx, wy, lag, braking)
    speed = np.hypot(wx, wy)
    scale = speed if speed > DENOMINATOR_EPS else 1.0
    return wx, wy, offx, offy, -wx / scale, -wy / scale


@numba.njit(**_JIT)
def _obstacle_reach(v, v_o, margin, d, t_safe, a_safe, t_react):
    """law.obstacle_reach of one pair of speeds, ``margin`` the discs' radii summed."""
    stop_o = _stopping_distance(v_o, t_safe, a_safe)
    stop = _stopping_distance(v, t_safe, a_safe)
    closing = v + v_o
    brake = closing * closing / (2.0 * a_safe) if a_safe > 0.0 else 0.0
    own_brake = v * v / (2.0 * a_safe) if a_safe > 0.0 else 0.0
    reach = _maximum(d + margin + v_o * t_safe + t_safe * closing + brake,
                     d + margin + stop_o + t_safe * v + own_brake)
    if t_react > 0.0:
        reach = _maximum(reach, CONTINGENCY_SHARE * d + margin + v_o * t_safe + stop_o
                         + v * (t_react + t_safe) + stop)
    return reach * (1.0 + 1e-9) + 1e-3


@numba.njit(**_JIT)
def _heading_one(vx0, vy0, lawx, lawy, own_way, t_safe, a_safe, slide=False):
    """
    law._heading: the law's way ``(lawx, lawy)`` at the agent's speed (``own_way`` if none).

    ``slide``: at the larger of the agent's speed and the command's.
    """
    speed, commanded = np.hypot(vx0, vy0), np.hypot(lawx, lawy)
    if slide and commanded > speed:
        speed = commanded
    if commanded > DENOMINATOR_EPS:
        ratio = speed / commanded
        return _way_one(lawx * ratio, lawy * ratio, t_safe, a_safe)
    return own_way


@numba.njit(**_INLINE)
def _approaches(x0, y0, way, ox, oy):
    """Whether ``way`` heads toward the vehicle at (ox, oy): else _gap_one's gap is inf."""
    awayx, awayy = x0 - ox, y0 - oy
    return awayx * way[0] + (0.0 + awayy * way[1]) < 0.0


@numba.njit(**_JIT)
def _gap_one(x0, y0, way, ox, oy, restx, resty, react, d):
    """law._gap_one: law.stopping_gap of one way to one vehicle; (gap, unit x, unit y)."""
    wx, wy, offx, offy, bx, by = way
    px, py = wx * react + offx, wy * react + offy
    relx, rely = restx - x0, resty - y0
    length2 = px * px + (0.0 + py * py)
    along = (relx * px + (0.0 + rely * py)) / (length2 if length2 > 0.0 else 1.0)
    along = _clip(along, 0.0, 1.0)
    diffx, diffy = along * px - relx, along * py - rely
    gap = np.hypot(diffx, diffy)
    awayx, awayy = x0 - ox, y0 - oy
    if gap > DENOMINATOR_EPS:
        ux, uy = diffx / gap, diffy / gap
    else:
        scale = d if d > DENOMINATOR_EPS else 1.0
        ux, uy = awayx / scale, awayy / scale
    ux, uy = ux + bx, uy + by
    norm = np.hypot(ux, uy)
    if norm > DENOMINATOR_EPS:
        ux, uy = ux / norm, uy / norm
    else:
        ux, uy = bx, by
    if not _approaches(x0, y0, way, ox, oy):
        gap = math.inf
    return gap, ux, uy


@numba.njit(**_JIT)
def _take_out_one(vx, vy, units, shares, near, count):
    """law._take_out_one of ``(vx, vy)``: its approach to the ``near[:count]`` columns out."""
    for pass_ in range(SEPARATION_PASSES):
        for i in range(count):
            j = near[i]
            share = shares[j]
            if pass_ > 0:  # the later passes: only those whose approach goes entirely
                share = 1.0 if share >= 1.0 else 0.0
            ex, ey = units[j, 0], units[j, 1]
            toward = _minimum(vx * ex + (0.0 + vy * ey), 0.0)
            s = share * toward
            vx, vy = vx - s * ex, vy - s * ey
    return vx, vy


@numba.njit(**_INLINE)
def _separation_row(m, law, now, has, tab, rx_time, age_at_arrival, member, position, velocity,
                    nb_position, nb_velocity, lawx, lawy, reach, bound, units, weights, pushes,
                    closings, near, slide=False):
    """
    law._separation_one of row ``m`` (``d_safe`` = ``reach`` > 0), and its ``kept``.

    ``slide``: ``lawx, lawy`` is a ``law.slide`` (its way at its speed: ``law._heading``).

    Returns the (x, y) repulsion, then (x, y) ``lawx, lawy`` with the approach taken out.

    The row's columns as ``law.silent_obstacles`` gives them without silent vehicles (the
    caller's condition): each vehicle heard (``has``, within ``agent_timeout``) at its
    position and velocity, ``now - rx + age_at_arrival`` old, the others NaN rows (nothing);
    where the row hears a presence (no ``member``), the presences' rest points after them.
    No discs (radius 0 adds exactly nothing). ``units`` (2K, 2), ``weights``, ``pushes``,
    ``closings``, ``near`` (2K,): scratch.

    First the vehicles within ``bound`` (``law.obstacle_reach``: one beyond is near no
    way) alone: with none of them near, the term is exactly (0.0, 0.0) (nothing taken out,
    ``(push + v_law) - v_law`` of a zero push) and the command kept whole, else every column
    as the law takes them.
    """
    rests = not _no_presence(m, has, tab, rx_time, member, now, law[AGENT_TIMEOUT])
    own = math.nan  # a slide's pass: the vehicles within reach at its own speed alone
    if slide:
        # law.obstacle_reach(v, 0.0, 0.0, params, 0.0, d): the other at rest, no disc
        own = _obstacle_reach(np.hypot(velocity[m, 0], velocity[m, 1]), 0.0, 0.0 + 0.0, reach,
                              law[T_SAFE], law[A_SAFE], law[T_REACT])
    if not _any_near(m, law, now, has, tab, rx_time, age_at_arrival, member, rests, position,
                     velocity, nb_position, nb_velocity, lawx, lawy, reach, bound * bound,
                     slide, own):
        return 0.0, 0.0, lawx, lawy
    count = _separation_columns(m, law, now, has, tab, rx_time, age_at_arrival, member, rests,
                                position, velocity, nb_position, nb_velocity, lawx, lawy, reach,
                                math.nan, units, weights, pushes, closings, near, slide, own)
    n_cols = 2 * has.shape[1] if rests else has.shape[1]
    return _separation_sum(law, lawx, lawy, units[:n_cols], weights, pushes, closings, near,
                           count)


@numba.njit(**_JIT)
def _gap_only(x0, y0, way, ox, oy, restx, resty, react):
    """Return the gap of :func:`_gap_one`, operation for operation, without its unit."""
    wx, wy, offx, offy = way[0], way[1], way[2], way[3]
    px, py = wx * react + offx, wy * react + offy
    relx, rely = restx - x0, resty - y0
    length2 = px * px + (0.0 + py * py)
    along = (relx * px + (0.0 + rely * py)) / (length2 if length2 > 0.0 else 1.0)
    along = _clip(along, 0.0, 1.0)
    gap = np.hypot(along * px - relx, along * py - rely)
    if not _approaches(x0, y0, way, ox, oy):
        gap = math.inf
    return gap


@numba.njit(**_JIT)
def _ahead_one(x0, y0, vx0, vy0, ox, oy, ovx, ovy, margin, t_safe, a_safe):
    """
    ``law._separation_arrays``' distance ahead to one column, operation for operation.

    Returns (ux, uy, d, apart, closing, d_ahead): the unit away from the column (0 on top of
    it), the distance, whether apart, the closing speed (0 if not finite) and
    ``d - margin - t_safe closing - closing^2 / (2 a_safe)``.
    """
    awayx, awayy = x0 - ox, y0 - oy
    relx, rely = vx0 - ovx, vy0 - ovy
    d = np.hypot(awayx, awayy)
    apart = d > DENOMINATOR_EPS
    if apart:
        ux, uy = awayx / d, awayy / d
    else:
        ux = uy = 0.0
    closing = _maximum(-(relx * ux + (0.0 + rely * uy)), 0.0)
    closing = closing if math.isfinite(closing) else 0.0
    d_ahead = d - margin - t_safe * closing
    if a_safe > 0.0:
        d_ahead = d_ahead - closing * closing / (2.0 * a_safe)
    return ux, uy, d, apart, closing, d_ahead


@numba.njit(**_INLINE)
def _any_near(m, law, now, has, tab, rx_time, age_at_arrival, member, rests, position,
              velocity, nb_position, nb_velocity, lawx, lawy, reach, bound2, slide=False,
              own=math.nan):
    """
    Whether :func:`_separation_columns` with ``bound2`` would count a column near (count > 0).

    Its columns' ``d_ahead`` and ``apart``, operation for operation, without their units and
    weights, stopping at the first near one: one already near before its stopping gaps
    (which only lower ``d_ahead``) needs none of them.
    """
    t_safe, a_safe, t_react = law[T_SAFE], law[A_SAFE], law[T_REACT]
    x0, y0 = position[m, 0], position[m, 1]
    vx0, vy0 = velocity[m, 0], velocity[m, 1]
    own_way = _way_one(vx0, vy0, t_safe, a_safe)
    heading = own_way
    if t_react > 0.0:
        heading = _heading_one(vx0, vy0, lawx, lawy, own_way, t_safe, a_safe, slide)
    keep = (1.0 - CONTINGENCY_SHARE) * reach
    k_cols = has.shape[1]
    t = tab[m]
    for c in range(2 * k_cols if rests else k_cols):
        k = c % k_cols
        ox, oy = nb_position[t, k, 0], nb_position[t, k, 1]
        heard = has[m, k] and now - rx_time[t, k] <= law[AGENT_TIMEOUT]
        if not heard or (c >= k_cols and member[t, k]) or ox != ox or oy != oy \
                or (x0 - ox) * (x0 - ox) + (y0 - oy) * (y0 - oy) >= bound2:
            continue
        ovx, ovy = nb_velocity[t, k, 0], nb_velocity[t, k, 1]
        if c < k_cols:
            age = _clip(now - rx_time[t, k] + age_at_arrival, 0.0, t_safe)
        else:
            offx, offy = _offset_one(ovx, ovy, t_safe, a_safe)
            ox, oy = ox + offx, oy + offy
            ovx, ovy = ox * 0.0, oy * 0.0
            age = _clip(0.0, 0.0, t_safe)
        if slide and np.hypot(ox - x0, oy - y0) >= own:  # beyond reach at its own speed
            continue
        ox, oy = ox + ovx * age, oy + ovy * age
        ux, uy, d, apart, closing, d_ahead = _ahead_one(
            x0, y0, vx0, vy0, ox, oy, ovx, ovy, 0.0, t_safe, a_safe)
        if apart and d_ahead < reach:
            return True
        if not t_react > 0.0:
            continue
        # The stopping gaps. A way that does not approach the vehicle (_gap_only's last test,
        # taken first) has the gap inf whatever the rest: with neither approaching, inf + keep
        # lowers no d_ahead and the test above stands (about half a ring's columns: behind).
        own_in = _approaches(x0, y0, own_way, ox, oy)
        law_in = _approaches(x0, y0, heading, ox, oy)
        if own_in or law_in:
            react = t_react + age
            offx, offy = _offset_one(ovx, ovy, t_safe, a_safe)
            restx, resty = ox + offx, oy + offy
            gap = math.inf
            if own_in:
                gap = _gap_only(x0, y0, own_way, ox, oy, restx, resty, react)
            gap_law = math.inf
            if law_in:
                gap_law = _gap_only(x0, y0, heading, ox, oy, restx, resty, react)
            if gap_law < gap:
                gap = gap_law
            gap = gap - 0.0 + keep
            if gap < d_ahead:
                d_ahead = gap
                apart = apart or gap > DENOMINATOR_EPS
            if apart and d_ahead < reach:
                return True
    return False


@numba.njit(**_JIT)
def _separation_columns(m, law, now, has, tab, rx_time, age_at_arrival, member, rests,
                        position, velocity, nb_position, nb_velocity, lawx, lawy, reach, bound2,
                        units, weights, pushes, closings, near, slide=False, own=math.nan):
    """
    law._separation_one's loop over the columns of row ``m``; returns how many are near.

    The K vehicles, then (``rests``: the row hears a presence) the K rest points of the
    presences (``law.silent_obstacles``' second block: NaN rows but the presences'). A
    column whose vehicle is ``bound2`` (squared) or more away is left out (as a NaN row;
    NaN: none is).
    """
    t_safe, a_safe, t_react, v_safe = law[T_SAFE], law[A_SAFE], law[T_REACT], law[V_SAFE]
    x0, y0 = position[m, 0], position[m, 1]
    vx0, vy0 = velocity[m, 0], velocity[m, 1]
    own_way = _way_one(vx0, vy0, t_safe, a_safe)
    heading = own_way
    if t_react > 0.0:
        heading = _heading_one(vx0, vy0, lawx, lawy, own_way, t_safe, a_safe, slide)
    keep = (1.0 - CONTINGENCY_SHARE) * reach
    count = 0
    k_cols = has.shape[1]
    t = tab[m]
    for c in range(2 * k_cols if rests else k_cols):
        k = c % k_cols  # the sender: its vehicle (c < K), then its rest point (a presence)
        ox, oy = nb_position[t, k, 0], nb_position[t, k, 1]
        heard = has[m, k] and now - rx_time[t, k] <= law[AGENT_TIMEOUT]
        if not heard or (c >= k_cols and member[t, k]) or ox != ox or oy != oy \
                or (x0 - ox) * (x0 - ox) + (y0 - oy) * (y0 - oy) >= bound2:
            # a NaN row (none there), or left out
            units[c, 0] = units[c, 1] = 0.0
            weights[c] = pushes[c] = closings[c] = 0.0
            continue
        ovx, ovy = nb_velocity[t, k, 0], nb_velocity[t, k, 1]
        if c < k_cols:  # silent_obstacles' column: carried forward by its age
            age = _clip(now - rx_time[t, k] + age_at_arrival, 0.0, t_safe)
        else:  # its rest point (stopping_offset ahead), at rest (rest * 0.0), age 0
            offx, offy = _offset_one(ovx, ovy, t_safe, a_safe)
            ox, oy = ox + offx, oy + offy
            ovx, ovy = ox * 0.0, oy * 0.0
            age = _clip(0.0, 0.0, t_safe)
        if slide and np.hypot(ox - x0, oy - y0) >= own:  # beyond reach at its own speed
            units[c, 0] = units[c, 1] = 0.0
            weights[c] = pushes[c] = closings[c] = 0.0
            continue
        ox, oy = ox + ovx * age, oy + ovy * age
        ux, uy, d, apart, closing, d_ahead = _ahead_one(
            x0, y0, vx0, vy0, ox, oy, ovx, ovy, 0.0, t_safe, a_safe)
        if t_react > 0.0:
            react = t_react + age
            offx, offy = _offset_one(ovx, ovy, t_safe, a_safe)
            restx, resty = ox + offx, oy + offy
            gap, gx, gy = _gap_one(x0, y0, own_way, ox, oy, restx, resty, react, d)
            gap_law, lx, ly = _gap_one(x0, y0, heading, ox, oy, restx, resty, react, d)
            if gap_law < gap:
                gap, gx, gy = gap_law, lx, ly
            gap = gap - 0.0 + keep
            if gap < d_ahead:
                d_ahead, ux, uy = gap, gx, gy
                closing = _maximum(closing, 1.0)
                apart = apart or gap > DENOMINATOR_EPS
        is_near = apart and d_ahead < reach
        weight = v_safe * _minimum(1.0, 1.0 - d_ahead / reach) if is_near else 0.0
        units[c, 0], units[c, 1] = ux, uy
        weights[c] = weight
        pushes[c] = weight
        closings[c] = closing
        if is_near:
            near[count] = c
            count += 1
    return count


@numba.njit(**_JIT)
def _separation_sum(law, lawx, lawy, units, weights, pushes, closings, near, count):
    """
    law._separation_one after its loop: the pushes summed and bounded, the approach out.

    Returns the repulsion (x, y), then the law's command with its approach out (x, y).
    """
    v_safe = law[V_SAFE]
    k_cols = units.shape[0]
    # np.sum(units * pushes[:, None], axis=-2): in column order from the first
    px, py = units[0, 0] * pushes[0], units[0, 1] * pushes[0]
    for k in range(1, k_cols):
        px, py = px + units[k, 0] * pushes[k], py + units[k, 1] * pushes[k]
    norm = np.hypot(px, py)
    scale = v_safe / (norm if norm > 0.0 else 1.0) if norm > v_safe else 1.0
    px, py = px * scale, py * scale
    for k in range(k_cols):  # yields (weights), closing_yields (pushes' scratch)
        weights[k] = _minimum(1.0, SEPARATION_YIELD * weights[k] / v_safe)
        pushes[k] = weights[k] if closings[k] > 0.0 else 0.0
    px, py = _take_out_one(px, py, units, pushes, near, count)
    kx, ky = _take_out_one(lawx, lawy, units, weights, near, count)
    return (px + kx) - lawx, (py + ky) - lawy, kx, ky


@numba.njit(**_JIT)
def control_rows(law, active, check_reach, bound, obstacle_memory, now, has, tab, rx_time,
                 entry,
                 ring, theta, theta_self, own_col, ids, lambdas, position, velocity, nb_position,
                 nb_velocity, nb_u, nb_u_ss, target_position, target_velocity,
                 target_acceleration, u, g_u, prev_cmd, pred, succ, hysteresis, damping,
                 ring_size, ring_changed, ring_tick, separate, d_safe, member, age_at_arrival,
                 u_ss_out, cmd_out, done, ring_law, ring_damping, ring_fade):
    """
    Neighbour selection and ``law.encirclement_step`` of every row.

    Rows M, of which the ``active`` ones (a live target) with every vehicle they count
    (``has``, received at ``rx_time`` within ``obstacle_memory``) at least ``bound`` (M,)
    away are stepped and marked in ``done`` (M,) (``check_reach`` False: d_safe off, every
    active row). With ``separate``, an active row with a vehicle within reach is stepped too,
    its ``d_safe`` term compiled (:func:`_separation_row`, ``d_safe`` (by ring size) the
    distance it flies, states ``age_at_arrival`` old on arrival, a vehicle heard that is no
    ``member`` a presence). ``entry``
    (M, K) the ring members each row hears, ``ring`` (M,) its ring size, ``theta`` (M, K)
    their angles (read where ``entry``), ``theta_self`` (M,),
    ``own_col`` (M,) each row's own column, ``ids``/``lambdas`` (K,); states (M, 3) and
    (M, K, 3); ``g_u`` (M,) ``law.limiter(u)``; ``hysteresis``/``damping`` tables by ring
    size (``neighbour_hysteresis``; ``damping`` (sizes, 2): ``omega_damping_gain`` and its
    ``implicit_decay``). With ``law``'s ``ring_gains_from`` set, a row's step is also taken at
    ``ring_law``'s gains (``ControllerParams.ring_gains``; ``k_tau``, ``k_e_tau``,
    ``k_omega_own``, ``ring_turn_acc``) and ``ring_damping``'s, and the two are blended by
    ``law.ring_gain_share`` as ``law.encirclement_step`` blends them (``ring_fade`` by ring
    size: ``law.ring_size_share``): only one step taken where the share is 0 or 1. Updates
    ``u``, ``pred``, ``succ``, ``prev_cmd`` and the ring term's ramp state ``ring_size``,
    ``ring_changed``, ``ring_tick`` (M,) in place and writes ``u_ss_out`` (M,), ``cmd_out`` (M,
    3). The tables of what each row heard (``rx_time``, ``member``, ``nb_*``) are read at row
    ``tab[m]``: the row's own (``tab[m] == m``), or its run's where every receiver of a run
    holds the same
    (:func:`exchange_states`' shared tables). Returns how many rows it stepped (``done``).
    """
    k_r, k_dr, radius = law[K_R], law[K_DR], law[RADIUS]
    r_min, omega_ref = law[R_MIN], law[OMEGA_REF]
    k_cols = entry.shape[1]
    ahead = np.empty(k_cols)  # _ring_offset_row's scratch, then _separation_row's
    units, weights = np.empty((2 * k_cols, 2)), np.empty(2 * k_cols)
    pushes, closings = np.empty(2 * k_cols), np.empty(2 * k_cols)
    near = np.empty(2 * k_cols, dtype=np.int64)
    stepped = 0
    for m in range(entry.shape[0]):
        done[m] = False
        if not active[m]:
            continue
        t = tab[m]
        # one pass over what the row counts answers the reach and both crowd tests
        nearest = (_nearest(m, has, tab, rx_time, now, obstacle_memory, position, nb_position)
                   if check_reach else (math.inf, False, False))
        in_reach = check_reach and _nearer(nearest, bound[m], True)
        if in_reach and not separate:
            continue  # the d_safe term acts as the numpy path's scan finds it
        done[m] = True
        stepped += 1
        own_id = ids[own_col[m]]
        ts = theta_self[m]
        # select_neighbours: ring_candidates, then apply_hysteresis. Written out here: inlined
        # from a function, each array it takes costs two atomic reference counts a row.
        # ring_candidates: the first (theta, id) after self, else the first of all; the last
        # before self, else the last of all.
        cur_pred, cur_succ = pred[m], succ[m]
        succ_after = succ_any = pred_before = pred_any = -1
        for k in range(k_cols):
            if not entry[m, k]:
                continue
            t_k, i_k = theta[m, k], ids[k]
            after = t_k > ts or (t_k == ts and i_k > own_id)
            if succ_any < 0 or t_k < theta[m, succ_any] or (
                    t_k == theta[m, succ_any] and i_k < ids[succ_any]):
                succ_any = k
            if pred_any < 0 or t_k > theta[m, pred_any] or (
                    t_k == theta[m, pred_any] and i_k > ids[pred_any]):
                pred_any = k
            if after:
                if succ_after < 0 or t_k < theta[m, succ_after] or (
                        t_k == theta[m, succ_after] and i_k < ids[succ_after]):
                    succ_after = k
            else:
                if pred_before < 0 or t_k > theta[m, pred_before] or (
                        t_k == theta[m, pred_before] and i_k > ids[pred_before]):
                    pred_before = k
        if succ_any < 0:
            p_col = s_col = NO_NEIGHBOUR
        else:
            cand_succ = succ_after if succ_after >= 0 else succ_any
            cand_pred = pred_before if pred_before >= 0 else pred_any
            # apply_hysteresis: keep a current (live) neighbour unless the candidate is closer
            # by more than the hysteresis; take both candidates where pred and succ crossed.
            # Where the current neighbour is the candidate, keeping it or taking the candidate
            # is one column: its gaps are not computed (a formed ring's usual case).
            crossed = cand_pred != cand_succ and (
                (cand_pred == cur_succ and cur_succ != NO_NEIGHBOUR)
                or (cand_succ == cur_pred and cur_pred != NO_NEIGHBOUR))
            p_col, s_col = cand_pred, cand_succ
            slack = hysteresis[ring[m]]
            if not crossed and cur_pred != cand_pred and cur_pred != NO_NEIGHBOUR \
                    and entry[m, max(cur_pred, 0)] and _kept(
                        _gap_to_pred(ts, theta[m, cur_pred], own_id, ids[cur_pred]),
                        _gap_to_pred(ts, theta[m, cand_pred], own_id, ids[cand_pred]), slack):
                p_col = cur_pred
            if not crossed and cur_succ != cand_succ and cur_succ != NO_NEIGHBOUR \
                    and entry[m, max(cur_succ, 0)] and _kept(
                        _gap_to_succ(ts, theta[m, cur_succ], own_id, ids[cur_succ]),
                        _gap_to_succ(ts, theta[m, cand_succ], own_id, ids[cand_succ]), slack):
                s_col = cur_succ
        pred[m], succ[m] = p_col, s_col
        # BatchControllers._control's view(): NaN angle/state and zero u of a missing one
        p_ok = p_col != NO_NEIGHBOUR and entry[m, max(p_col, 0)]
        s_ok = s_col != NO_NEIGHBOUR and entry[m, max(s_col, 0)]
        px, py, pz = position[m, 0], position[m, 1], position[m, 2]
        tx, ty = target_position[m, 0], target_position[m, 1]
        tvx, tvy, tvz = target_velocity[m, 0], target_velocity[m, 1], target_velocity[m, 2]
        lx, ly = tvx, tvy                                            # target_lead
        if law[TARGET_LEAD] != 0.0:
            sx = law[TARGET_LEAD] * target_acceleration[m, 0]
            sy = law[TARGET_LEAD] * target_acceleration[m, 1]
            lx = tvx + (sx if math.isfinite(sx) else 0.0)
            ly = tvy + (sy if math.isfinite(sy) else 0.0)
        rx, ry = px - tx, py - ty                                    # polar_frame
        r = np.hypot(rx, ry)
        if r >= R_EPS:
            erx, ery = rx / r, ry / r
        else:
            erx = ery = 0.0
        thx, thy = -ery, erx
        vx, vy = velocity[m, 0], velocity[m, 1]
        v_r = (vx - tvx) * erx + (0.0 + (vy - tvy) * ery)           # radial_velocity
        v_r_corr = -k_r * (r - radius) - k_dr * v_r                  # ring_radius: R
        radx, rady = v_r_corr * erx, v_r_corr * ery
        # gap_to_pred / gap_to_succ, spacing_error
        lambda_self = lambdas[own_col[m]]
        if p_ok:
            gap_pred = _gap_to_pred(ts, theta[m, p_col], own_id, ids[p_col])
            lambda_pred = lambdas[p_col]
        else:
            gap_pred = math.nan
            lambda_pred = 1.0
        if s_ok:
            gap_succ = _gap_to_succ(ts, theta[m, s_col], own_id, ids[s_col])
        else:
            gap_succ = math.nan
        num = lambda_pred * gap_succ - lambda_self * gap_pred
        den = lambda_pred * gap_succ + lambda_self * gap_pred
        e_tau = 0.0
        if den > DENOMINATOR_EPS:
            e = num / den
            if math.isfinite(e):
                e_tau = e
        # BatchControllers._control: law.ring_ramp (its state kept whatever k_e_ring), then
        # law.encirclement_step's e_tau + k_e_ring * _ring_offset (ring_offset x weight; 0
        # where a lambda is not 1)
        crowd = False  # ring_ramp_silent: only where the size changed (law.ring_ramp)
        scanned = law[RING_RAMP_SILENT] != 0.0 and ring[m] != ring_size[m]
        if scanned:
            crowd = _nearer(nearest, d_safe[ring[m]], False)
        weight = _ring_ramp_row(m, ring[m], now, law, ring_size, ring_changed, ring_tick,
                                crowd)
        if law[K_E_RING] != 0.0:
            fitted = 0.0
            if law[RING_FIT] != 0.0:
                fitted = _ring_offset_row(entry, theta, m, ts, ahead) * weight
            e_tau = e_tau + law[K_E_RING] * fitted
        r_eff = r if not r < r_min else r_min                        # effective_radius
        omega_self = ((prev_cmd[m, 0] - lx) * thx + (0.0 + (prev_cmd[m, 1] - ly) * thy)) / r_eff
        um = u[m]                                                    # soliton_update
        pu = nb_u[t, p_col] if p_ok else 0.0
        su = nb_u[t, s_col] if s_ok else 0.0
        puss = nb_u_ss[t, p_col] if p_ok else 0.0
        suss = nb_u_ss[t, s_col] if s_ok else 0.0
        u_s = su - pu
        u_ss = su - 2.0 * um + pu
        u_sss = suss - puss
        if law[ALTITUDE_HOLD] != 0.0:                                # compose_command
            vz0 = law[K_Z] * (law[ALTITUDE] - pz) + tvz
        else:
            vz0 = tvz
        share = 0.0                                                  # ring_gain_share
        if law[RING_GAINS_FROM] != 0.0:
            low = law[RING_GAINS_FROM]
            share = (r / radius - low) / (law[RING_GAINS_FULL] - low)
            share = share if share > 0.0 else 0.0
            share = (share if share < 1.0 else 1.0) * ring_fade[ring[m]]  # ring_size_share
            if share > 0.0 and (crowd if scanned
                                else _nearer(nearest, d_safe[ring[m]], False)):
                share = 0.0                                          # crowded: one scan
        blended = share > 0.0 and share < 1.0
        # law.encirclement_step: the step at the crowd's gains, at the ring's where the share
        # is 1, both where it is between (then blended below)
        crowd_u = crowd_x = crowd_y = crowd_z = 0.0
        u_new = x = y = vz = 0.0
        for g in range(2 if blended else 1):
            if g == 1 or share >= 1.0:
                k_tau, k_e_tau, k_omega_own = ring_law[K_TAU], ring_law[K_E_TAU], \
                    ring_law[K_OMEGA_OWN]
                turn_acc, gain, decay = ring_law[RING_TURN_ACC], ring_damping[ring[m], 0], \
                    ring_damping[ring[m], 1]
            else:
                k_tau, k_e_tau, k_omega_own = law[K_TAU], law[K_E_TAU], law[K_OMEGA_OWN]
                turn_acc, gain, decay = law[RING_TURN_ACC], damping[ring[m], 0], \
                    damping[ring[m], 1]                              # omega_damping_gain
            e_eff = e_tau
            if gain != 0.0:                                          # damped_spacing_error
                o_pred = math.nan
                if p_ok:
                    o_pred = _angular_rate(nb_position[t, p_col, 0], nb_position[t, p_col, 1],
                                           nb_velocity[t, p_col, 0], nb_velocity[t, p_col, 1],
                                           tx, ty, tvx, tvy)
                o_succ = math.nan
                if s_ok:
                    o_succ = _angular_rate(nb_position[t, s_col, 0], nb_position[t, s_col, 1],
                                           nb_velocity[t, s_col, 0], nb_velocity[t, s_col, 1],
                                           tx, ty, tvx, tvy)
                if math.isfinite(o_pred):
                    local = 0.5 * (o_pred + o_succ) if math.isfinite(o_succ) else o_pred
                else:
                    local = o_succ
                damped = e_tau - gain * (omega_self - local)
                if math.isfinite(damped):
                    e_eff = damped
            if k_omega_own != 0.0:                                   # own_rate_damping
                omega_own = ((vx - tvx) * thx + (0.0 + (vy - tvy) * thy)) / r_eff
                damped = e_eff - k_omega_own * (omega_own - omega_ref)
                if math.isfinite(damped):
                    e_eff = damped
            du = (law[C_COUPLING] * u_s - law[BETA_U] * um - law[ALPHA_U] * g_u[m]
                  + k_e_tau * e_eff + law[KAPPA_U_DIFF] * u_ss - law[K_U_STEEPEN] * um * u_s
                  + law[KAPPA_U_DISP] * u_sss)
            u_new = um + law[CONTROL_PERIOD] * du / (1.0 + law[CONTROL_PERIOD] * decay)
            if math.isfinite(u_new):                                 # implicit_decay above
                cap = law[U_BOUND]                                   # floats.clip
                u_new = u_new if u_new > -cap else -cap
                u_new = u_new if u_new < cap else cap
            else:
                u_new = 0.0
            free = u_new
            if turn_acc != 0.0 and k_tau != 0.0:                     # turn_capped
                held = math.sqrt(turn_acc / r_eff) / k_tau
                u_new = held if u_new > held else (-held if u_new < -held else u_new)
            vz = vz0
            flown = free  # unheld where the d_safe term acts on it, else held (turn_released)
            while True:
                speed = k_tau * flown * r_eff + omega_ref * r        # tangential_velocity
                x = radx + speed * thx + lx
                y = rady + speed * thy + ly
                sep_x = sep_y = 0.0  # separation_velocity: nothing within reach
                if in_reach and d_safe[ring[m]] > 0.0:  # v_law: v_rad + v_tau + lead
                    scale = _saturation(x, y, law[MAX_SPEED_XY])    # flyable_command
                    fx, fy = x * scale, y * scale
                    sep_x, sep_y, leftx, lefty = _separation_row(
                        m, law, now, has, tab, rx_time, age_at_arrival, member, position,
                        velocity, nb_position, nb_velocity, fx, fy, d_safe[ring[m]], bound[m],
                        units, weights, pushes, closings, near)
                    if sep_x != 0.0 or sep_y != 0.0:                # slide (what is kept)
                        left = np.hypot(leftx, lefty)
                        if (np.hypot(x, y) > law[MAX_SPEED_XY] and left > DENOMINATOR_EPS
                                and leftx * x + lefty * y > 0.0):
                            factor = min(law[MAX_SPEED_XY] / left, SLIDE_GAIN)
                            slx, sly = leftx * factor, lefty * factor
                            sep_x, sep_y, _, _ = _separation_row(
                                m, law, now, has, tab, rx_time, age_at_arrival, member,
                                position, velocity, nb_position, nb_velocity, slx, sly,
                                d_safe[ring[m]], bound[m], units, weights, pushes, closings,
                                near, True)
                            sep_x, sep_y = sep_x + (slx - x), sep_y + (sly - y)
                        else:
                            sep_x, sep_y = sep_x + (fx - x), sep_y + (fy - y)
                if flown == u_new or sep_x != 0.0 or sep_y != 0.0:
                    break
                flown = u_new
            u_new = flown
            x, y = x + sep_x, y + sep_y
            if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(vz)):
                x, y = lx, ly
            scale = _saturation(x, y, law[MAX_SPEED_XY])            # saturate
            z_cap = law[MAX_SPEED_Z]
            if vz == vz:
                vz = vz if vz > -z_cap else -z_cap
                vz = vz if vz < z_cap else z_cap
            x, y = x * scale, y * scale
            if blended and g == 0:
                crowd_u, crowd_x, crowd_y, crowd_z = u_new, x, y, vz
        if blended:                                                  # law._blend
            u_new = crowd_u + share * (u_new - crowd_u)
            x = crowd_x + share * (x - crowd_x)
            y = crowd_y + share * (y - crowd_y)
            vz = crowd_z + share * (vz - crowd_z)
            u_ss = u_ss + share * (u_ss - u_ss)  # the same in both: its bits as blended
        u[m] = u_new
        u_ss_out[m] = u_ss
        cmd_out[m, 0] = x
        cmd_out[m, 1] = y
        cmd_out[m, 2] = vz
        prev_cmd[m, 0] = x
        prev_cmd[m, 1] = y
        prev_cmd[m, 2] = vz
    return stepped


@numba.njit(**_JIT)
def metrics_rows(positions, velocities, live, target_position, target_velocity, radius, out):
    """
    ``batch_engine.batch_metrics`` of R runs into ``out`` (R, 6).

    ``E_r, E_vr, rho, G_max, E_gap, d_min`` as ``metrics.compute_metrics`` defines them; NaN
    rows without a live agent, ``d_min`` NaN below two. Sums in agent order, and ``rho`` of
    each agent's unit offset from the target rather than the cosine and sine of its angle:
    numpy's may differ in the last bits.
    """
    r_runs, n = live.shape
    theta = np.empty(n)
    ordered_buffer = np.empty(n)
    for j in range(r_runs):
        m = 0
        e_r = 0.0
        e_vr = 0.0
        cos_sum = 0.0
        sin_sum = 0.0
        tx, ty = target_position[j, 0], target_position[j, 1]
        tvx, tvy = target_velocity[j, 0], target_velocity[j, 1]
        for i in range(n):
            if not live[j, i]:
                continue
            rx, ry = positions[j, i, 0] - tx, positions[j, i, 1] - ty
            dist = np.hypot(rx, ry)
            t = _mod_2pi(math.atan2(ry, rx))
            if dist > 1e-9:
                ex, ey = rx / dist, ry / dist
                cos_t, sin_t = ex, ey  # cos and sin of t, but in the last bits
            else:
                ex = ey = 0.0
                cos_t, sin_t = math.cos(t), math.sin(t)
            v_r = (velocities[j, i, 0] - tvx) * ex + (velocities[j, i, 1] - tvy) * ey
            theta[m] = t
            m += 1
            e_r += (dist / radius[j] - 1.0) ** 2
            e_vr += v_r * v_r
            cos_sum += cos_t
            sin_sum += sin_t
        if m == 0:
            out[j, :] = math.nan
            continue
        out[j, 0] = math.sqrt(e_r / m)
        out[j, 1] = math.sqrt(e_vr / m)
        out[j, 2] = np.hypot(cos_sum, sin_sum) / m
        ordered = _sorted(theta, m, ordered_buffer)
        g_max = -math.inf
        e_gap = 0.0
        even = TWO_PI / m
        for i in range(m):
            nxt = ordered[i + 1] if i + 1 < m else ordered[0] + TWO_PI
            gap = (nxt - ordered[i]) / even
            if gap > g_max:
                g_max = gap
            e_gap += (gap - 1.0) ** 2
        out[j, 3] = g_max
        out[j, 4] = math.sqrt(e_gap / m)
        d2 = math.inf
        for a in range(n):
            if not live[j, a]:
                continue
            for b in range(a + 1, n):
                if not live[j, b]:
                    continue
                dx = positions[j, a, 0] - positions[j, b, 0]
                dy = positions[j, a, 1] - positions[j, b, 1]
                d = dx * dx + dy * dy
                if d < d2:
                    d2 = d
        out[j, 5] = math.sqrt(d2) if m >= 2 else math.nan


@numba.njit(**_JIT)
def _sorted(values, m, buffer):
    """
    Return ``np.sort(values[:m])``: an insertion sort into ``buffer`` (no allocation).

    The same array wherever no value is NaN (no -0.0 either: the angles are ``_mod_2pi``'s);
    else ``np.sort`` itself (NaN last).
    """
    for i in range(m):
        if values[i] != values[i]:
            return np.sort(values[:m])
    for i in range(m):
        v = values[i]
        k = i
        while k > 0 and buffer[k - 1] > v:
            buffer[k] = buffer[k - 1]
            k -= 1
        buffer[k] = v
    return buffer[:m]


@numba.njit(**_JIT)
def estimate_rows(velocity, previous, acceleration, dt, share):
    """
    ``target_estimate.estimate_acceleration`` after its first sample, in place (R, 3).

    ``velocity`` the new samples, ``previous`` the last kept velocities (updated),
    ``acceleration`` the estimates (updated); ``dt`` > 0 and ``share`` (``1 - exp(-dt /
    time_constant)``, numpy's) the caller's.
    """
    for j in range(velocity.shape[0]):
        finite = True
        for a in range(velocity.shape[1]):
            if not math.isfinite(velocity[j, a]):
                finite = False
        for a in range(velocity.shape[1]):
            v = velocity[j, a] if finite else previous[j, a]
            raw = (v - previous[j, a]) / dt
            acceleration[j, a] = acceleration[j, a] + share * (raw - acceleration[j, a])
            previous[j, a] = v


# The vehicle parameters vehicle_steps reads, in the order of the float array it takes.
VEHICLE_FIELDS = ('sim_dt', 'tau_xy', 'tau_z', 'max_acc_xy', 'max_acc_z', 'brake_xy', 'brake_z',
                  'max_speed_xy', 'max_speed_z', 'max_yaw_acc')


@numba.njit(**_JIT)
def _clip(x, low, high):
    """np.clip of one float (NaN stays NaN): floats.clip."""
    if x != x:
        return x
    x = x if x > low else low
    return x if x < high else high


@numba.njit(**_JIT)
def _saturation(x, y, limit):
    """
    Return saturate's xy scale: np.minimum(1, limit / np.maximum(hypot(x, y), 1e-300)).

    1.0 without the ``hypot`` where ``x^2 + y^2`` is below ``limit^2`` by far more than either
    can be rounded: the ``hypot`` is then below ``limit``, and the scale at least 1.
    """
    if limit > 1e-100 and x * x + y * y < limit * limit * (1.0 - 1e-9):
        return 1.0
    norm = np.hypot(x, y)
    if not (norm != norm or norm >= 1e-300):
        norm = 1e-300
    scale = limit / norm
    return scale if (scale != scale or scale < 1.0) else 1.0


@numba.njit(**_JIT)
def _slower(ax, ay, bx, by):
    """
    Return ``np.hypot(ax, ay) < np.hypot(bx, by)``.

    From the squared sums where they differ by far more than either can be rounded (and
    ``bx^2 + by^2`` is neither tiny nor huge), else from the ``hypot`` of each.
    """
    a2, b2 = ax * ax + ay * ay, bx * bx + by * by
    if 1e-200 < b2 < 1e200:
        if a2 < b2 * (1.0 - 1e-9):
            return True
        if a2 > b2 * (1.0 + 1e-9):
            return False
    return np.hypot(ax, ay) < np.hypot(bx, by)


@numba.njit(**_JIT)
def vehicle_steps(vehicle, steps, v_des, position, velocity, acceleration, yaw, yaw_rate):
    """
    Take ``steps`` of ``velocity_mobility_ros.core.model.step`` in place (N vehicles).

    The 'command' heading mode without a yaw-rate command and no jerk limit (the caller
    checks, :func:`compiled.vehicle_steps`); ``vehicle`` holds ``VEHICLE_FIELDS``.
    """
    dt, tau_xy, tau_z = vehicle[0], vehicle[1], vehicle[2]
    acc_xy, acc_z, brake_xy, brake_z = vehicle[3], vehicle[4], vehicle[5], vehicle[6]
    speed_xy, speed_z, yaw_acc = vehicle[7], vehicle[8], vehicle[9]
    for _ in range(steps):
        for i in range(position.shape[0]):
            vx, vy, vz = velocity[i, 0], velocity[i, 1], velocity[i, 2]
            cx = v_des[i, 0] - vx                              # step: change = v_des - v
            cy = v_des[i, 1] - vy
            cz = v_des[i, 2] - vz
            if tau_xy > 0.0:
                cx = cx / tau_xy * dt
                cy = cy / tau_xy * dt
            if tau_z > 0.0:
                cz = cz / tau_z * dt
            lim_xy, lim_z = acc_xy * dt, acc_z * dt            # _change_limits
            if brake_xy != acc_xy and _slower(v_des[i, 0], v_des[i, 1], vx, vy):
                lim_xy = brake_xy * dt
            if brake_z != acc_z and abs(v_des[i, 2]) < abs(vz):
                lim_z = brake_z * dt
            scale = _saturation(cx, cy, lim_xy)                # saturate(change, ...)
            nx = vx + cx * scale                               # apply_velocity_limits
            ny = vy + cy * scale
            nz = vz + _clip(cz, -lim_z, lim_z)
            scale = _saturation(nx, ny, speed_xy)
            nx, ny, nz = nx * scale, ny * scale, _clip(nz, -speed_z, speed_z)
            position[i, 0] = position[i, 0] + nx * dt           # integrate_position
            position[i, 1] = position[i, 1] + ny * dt
            position[i, 2] = position[i, 2] + nz * dt
            acceleration[i, 0] = (nx - vx) / dt
            acceleration[i, 1] = (ny - vy) / dt
            acceleration[i, 2] = (nz - vz) / dt
            velocity[i, 0], velocity[i, 1], velocity[i, 2] = nx, ny, nz
            rate = 0.0                                          # _heading, 'command', no cmd
            if yaw_acc > 0.0:
                rate = yaw_rate[i] + _clip(0.0 - yaw_rate[i], -yaw_acc * dt, yaw_acc * dt)
            yaw[i] = _mod_2pi(yaw[i] + rate * dt + math.pi) - math.pi  # wrap_angle
            yaw_rate[i] = rate


# The in-flight queue of exchange_states: [head, count] of a ring of slots, whether the
# last broadcasts delivered reached every receiver (1: each run's receivers hold the same
# tables, see shared_offsets; 0 until a first delivery), and whether the receivers' own tables
# are behind their run's shared ones (1: read the shared tables, or materialize_tables first).
QUEUE_HEAD, QUEUE_COUNT, QUEUE_UNIFORM, QUEUE_SHARED = 0, 1, 2, 3


@numba.njit(**_JIT)
def exchange_states(now, time_eps, delay, queue, q_arrival, q_keep_target, q_keep, q_t_pos,
                    q_t_vel, q_t_acc, q_pos, q_vel, q_u, q_u_ss, q_member, live, positions,
                    velocities, t_pos, t_vel, t_acc, u, u_ss, loss, draws, target_has,
                    target_rx, target_position, target_velocity, target_acceleration, has, rx,
                    member, position, velocity, nb_u, nb_u_ss, s_rx, s_member, s_position,
                    s_velocity, s_u, s_u_ss):
    """
    ``BatchControllers._deliver`` then ``_send`` of a tick without simulated faults.

    Delivers every queued broadcast due by ``now`` (``arrival <= now + time_eps``, oldest
    first) into the receivers' tables, then queues this tick's (R runs x N agents): each
    agent's state to every other one, the target's to every agent, arriving ``delay`` later.
    ``queue`` ([head, count]) and the ``q_*`` slots hold the broadcasts in flight (the caller
    sizes the ring for ``delay``). ``loss`` (R,) and ``draws`` (R, N, W): each receiver's
    uniform draws (``StreamDraws.take``; W = 0: no run lossy), the target's first, then one per
    other sender in order; a message is lost where its draw is below its run's ``loss``.

    Where a delivery reaches every receiver, each run's receivers would hold the same copy of
    every sender's state: it goes into the run's shared tables ``s_*`` (R, N, ...) alone, O(R N)
    instead of O(R N^2), and ``queue[QUEUE_SHARED]`` says the receivers' own tables (``rx``,
    ``member``, ``position``, ...; ``has`` is kept) are behind them. A later delivery that
    misses a receiver first copies the shared tables into every receiver's
    (:func:`materialize_tables`), as a reader that wants the receivers' own tables does.
    """
    r_runs, n = live.shape
    slots = q_arrival.size
    while queue[QUEUE_COUNT] > 0 and q_arrival[queue[QUEUE_HEAD]] <= now + time_eps:
        s = queue[QUEUE_HEAD]
        queue[QUEUE_HEAD] = (s + 1) % slots
        queue[QUEUE_COUNT] -= 1
        arrival = q_arrival[s]
        everyone = True
        for j in range(r_runs):
            for m in range(n):
                if not q_keep_target[s, j, m]:
                    everyone = False
                if q_keep_target[s, j, m]:
                    target_has[j, m] = True
                    target_rx[j, m] = arrival
                    for a in range(3):
                        target_position[j, m, a] = q_t_pos[s, j, a]
                        target_velocity[j, m, a] = q_t_vel[s, j, a]
                        target_acceleration[j, m, a] = q_t_acc[s, j, a]
        heard_all = True
        for j in range(r_runs):
            for m in range(n):
                for k in range(n):
                    if k != m and not q_keep[s, j, m, k]:
                        heard_all = False
        queue[QUEUE_UNIFORM] = 1 if everyone and heard_all else 0
        if heard_all:  # every message heard: each run's one shared copy
            if queue[QUEUE_SHARED] == 0:
                for j in range(r_runs):
                    for m in range(n):
                        for k in range(n):
                            if k != m:
                                has[j, m, k] = True
            queue[QUEUE_SHARED] = 1
            for j in range(r_runs):
                for k in range(n):
                    s_rx[j, k] = arrival
                    s_member[j, k] = q_member[s, j, k]
                    for a in range(3):
                        s_position[j, k, a] = q_pos[s, j, k, a]
                        s_velocity[j, k, a] = q_vel[s, j, k, a]
                    s_u[j, k] = q_u[s, j, k]
                    s_u_ss[j, k] = q_u_ss[s, j, k]
            continue
        materialize_tables(queue, s_rx, s_member, s_position, s_velocity, s_u, s_u_ss, rx,
                           member, position, velocity, nb_u, nb_u_ss)
        for j in range(r_runs):
            for m in range(n):
                for k in range(n):
                    if q_keep[s, j, m, k]:
                        has[j, m, k] = True
                        rx[j, m, k] = arrival
                        member[j, m, k] = q_member[s, j, k]
                        for a in range(3):
                            position[j, m, k, a] = q_pos[s, j, k, a]
                            velocity[j, m, k, a] = q_vel[s, j, k, a]
                        nb_u[j, m, k] = q_u[s, j, k]
                        nb_u_ss[j, m, k] = q_u_ss[s, j, k]
    s = (queue[QUEUE_HEAD] + queue[QUEUE_COUNT]) % slots
    queue[QUEUE_COUNT] += 1
    q_arrival[s] = now + delay
    lossy_any = draws.shape[2] > 0
    for j in range(r_runs):
        lossy = lossy_any and loss[j] > 0.0
        for a in range(3):
            q_t_pos[s, j, a] = t_pos[j, a]
            q_t_vel[s, j, a] = t_vel[j, a]
            q_t_acc[s, j, a] = t_acc[j, a]
        for m in range(n):
            q_keep_target[s, j, m] = not (lossy and draws[j, m, 0] < loss[j])
            for k in range(n):
                keep = k != m
                if keep and lossy:  # the draw of the k-th other sender (self excluded)
                    keep = not draws[j, m, 1 + (k if k < m else k - 1)] < loss[j]
                q_keep[s, j, m, k] = keep
            for a in range(3):
                q_pos[s, j, m, a] = positions[j, m, a]
                q_vel[s, j, m, a] = velocities[j, m, a]
            q_u[s, j, m] = u[j, m]
            q_u_ss[s, j, m] = u_ss[j, m]
            q_member[s, j, m] = live[j, m]


@numba.njit(**_JIT)
def materialize_tables(queue, s_rx, s_member, s_position, s_velocity, s_u, s_u_ss, rx, member,
                       position, velocity, nb_u, nb_u_ss):
    """
    Copy each run's shared tables into every receiver's own, if they are behind (see above).

    What a delivery heard by every receiver writes into them: each other sender's receipt
    time and membership, and every sender's state, the (never read) diagonal included.
    """
    if queue[QUEUE_SHARED] == 0:
        return
    queue[QUEUE_SHARED] = 0
    r_runs, n = s_rx.shape
    for j in range(r_runs):
        for m in range(n):
            for k in range(n):
                if k != m:
                    rx[j, m, k] = s_rx[j, k]
                    member[j, m, k] = s_member[j, k]
                for a in range(3):
                    position[j, m, k, a] = s_position[j, k, a]
                    velocity[j, m, k, a] = s_velocity[j, k, a]
                nb_u[j, m, k] = s_u[j, k]
                nb_u_ss[j, m, k] = s_u_ss[j, k]


@numba.njit(**_JIT)
def target_rows(now, liveness, live, target_has, target_rx, has_target):
    """
    ``BatchControllers._control``'s agents with a live target, on one clock (no fault).

    ``has_target`` (R, N): ``live & target_has & (now - target_rx <= liveness)``. Returns how
    many agents have one, and how many live agents have none (they fly the fallback).
    """
    found = lost = 0
    for j in range(live.shape[0]):
        for i in range(live.shape[1]):
            alive = live[j, i]
            has = alive and target_has[j, i] and now - target_rx[j, i] <= liveness
            has_target[j, i] = has
            if has:
                found += 1
            elif alive:
                lost += 1
    return found, lost


@numba.njit(**_JIT)
def prepare_rows(law, check_reach, obstacle_memory, now, active, has, tab, rx, member, own,
                 own_velocity, nb_position, nb_velocity, target_position, d_safe, entry, ring,
                 covered, speed, others, bound, shared, dy, dx, shared_dy, shared_dx):
    """
    Derive what ``control_rows`` takes per tick (``BatchControllers._control_compiled``).

    ``entry``/``ring`` (:func:`heard_rows`); with ``check_reach`` (d_safe on) ``covered``,
    ``speed``, ``others`` (:func:`reach_rows`) and ``bound`` (M,), ``law.obstacle_reach`` of
    them with no disc (``d_safe`` by ring size); else ``covered`` = ``active``. ``dy``/``dx``
    (M, K + 1): each vehicle's offset from the row's target, then the row's own: numpy's
    ``arctan2`` of them gives the angles (its bits, not the C library's). With ``shared``
    (each run's receivers hold the same tables) ``shared_dy``/``shared_dx`` instead
    (:func:`shared_offsets`). ``rx``, ``member`` and ``nb_*`` are read at row ``tab[m]``
    (:func:`control_rows`). Returns how many rows are ``covered``.
    """
    m_rows, k_cols = has.shape
    agent_timeout = law[AGENT_TIMEOUT]
    ring[:] = heard_rows(has, tab, rx, member, now, agent_timeout, entry)
    count = 0
    if check_reach:
        reach_rows(active, has, tab, rx, now, agent_timeout, obstacle_memory, own_velocity,
                   nb_velocity, speed, others, covered)
        t_safe, a_safe, t_react = law[T_SAFE], law[A_SAFE], law[T_REACT]
        for m in range(m_rows):  # law.obstacle_reach (margin 0.0)
            bound[m] = _obstacle_reach(speed[m], others[m], 0.0, d_safe[ring[m]], t_safe,
                                       a_safe, t_react)
            if covered[m]:
                count += 1
    else:
        for m in range(m_rows):
            covered[m] = active[m]
            if active[m]:
                count += 1
    if shared:
        shared_offsets(own, tab, nb_position, target_position, shared_dy, shared_dx)
        return count
    for m in range(m_rows):
        tx, ty = target_position[m, 0], target_position[m, 1]
        t = tab[m]
        for k in range(k_cols):
            dy[m, k] = nb_position[t, k, 1] - ty
            dx[m, k] = nb_position[t, k, 0] - tx
        dy[m, k_cols] = own[m, 1] - ty
        dx[m, k_cols] = own[m, 0] - tx
    return count


@numba.njit(**_JIT)
def shared_offsets(own, tab, nb_position, target_position, dy, dx):
    """
    :func:`prepare_rows`' offsets where each run's receivers hold the same tables (R N rows).

    Lossless runs without simulated faults: every receiver of a run hears every broadcast, so
    its copy of each sender's state and of the target's is its run's first receiver's (the
    arctan2 of equal offsets is equal). ``dy``/``dx`` (R K + R N,): each run's K senders as its
    first row holds them, then every row's own offset.
    """
    m_rows, k_cols = own.shape[0], nb_position.shape[1]
    r_runs = m_rows // k_cols
    for j in range(r_runs):
        m = j * k_cols
        tx, ty = target_position[m, 0], target_position[m, 1]
        t = tab[m]
        for k in range(k_cols):
            dy[j * k_cols + k] = nb_position[t, k, 1] - ty
            dx[j * k_cols + k] = nb_position[t, k, 0] - tx
    for m in range(m_rows):
        dy[r_runs * k_cols + m] = own[m, 1] - target_position[m, 1]
        dx[r_runs * k_cols + m] = own[m, 0] - target_position[m, 0]


@numba.njit(**_JIT)
def wrap_shared_angles(angles, theta, theta_self):
    """:func:`wrap_angles` of :func:`shared_offsets`' arctan2 (each run's row for its rows)."""
    m_rows, k_cols = theta.shape
    r_runs = m_rows // k_cols
    for m in range(m_rows):
        j = m // k_cols
        for k in range(k_cols):
            a = angles[j * k_cols + k]
            theta[m, k] = a + TWO_PI if a < 0.0 else a
        theta_self[m] = _mod_2pi(angles[r_runs * k_cols + m])


@numba.njit(**_JIT)
def wrap_angles(angles, theta, theta_self):
    """
    Split numpy's ``arctan2`` of :func:`prepare_rows`' offsets (M, K + 1) into the angles.

    ``theta`` (M, K): ``wrap_2pi_once`` of the vehicles'; ``theta_self`` (M,):
    ``geometry.target_angle``'s ``np.mod`` of the row's own.
    """
    m_rows, k_cols = theta.shape
    for m in range(m_rows):
        for k in range(k_cols):
            a = angles[m, k]
            theta[m, k] = a + TWO_PI if a < 0.0 else a
        theta_self[m] = _mod_2pi(angles[m, k_cols])
