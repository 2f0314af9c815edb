"""
The soliton encirclement control law, term by term (pure numpy, elementwise over agents).

Every function takes scalars or arrays with any leading shape (one agent, or N agents in the
batch simulator) and returns the same shape; vectors are (..., 2) in the XY plane or (..., 3).
A missing quantity is NaN (gaps, angular rates) or 0 (a neighbour's ``u``/``u_ss``), as the
reference specifies. ``ControllerParams`` supplies the gains.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

import numpy as np

from soliton_encirclement_ros.core.floats import (
    clip as _clip, hypot as _hypot, maximum as _maximum, minimum as _minimum,
    xy_scale as _xy_scale)
from soliton_encirclement_ros.core.gains import ControllerParams, DAMPING_DECAY_MAX
from soliton_encirclement_ros.core.geometry import angular_rate, polar_frame, R_EPS
from soliton_encirclement_ros.core.neighbours import gap_to_pred, gap_to_succ, NO_NEIGHBOUR
from velocity_mobility_ros.core.geometry import saturate, TWO_PI, xy_scale

DENOMINATOR_EPS = 1e-9  # e_tau is 0 when its denominator is at or below this
# The d_safe term takes out the law's approach to an agent in proportion
# min(1, SEPARATION_YIELD * (1 - d_ahead/d_safe)): all of it once 0.2 d_safe inside. With
# yield 1 (the push's own proportion) a law at full speed balanced the push at 0.5 d_safe.
SEPARATION_YIELD = 5.0
# Were another agent to stop now (law.stopping_gap), this agent must still pass its rest point
# this share of d_safe apart: a contingency, not the nominal distance (the separation
# benchmark's close approach is 0.5 d_safe). The whole of d_safe held a ring packed tighter
# than d_safe in a jostle that never settled.
CONTINGENCY_SHARE = 0.5
# The ring's gains step the spacing loop explicitly: its stiffness per tick, k_tau k_e_tau N P
# of the ring's gains (N the ring size heard, P the control period), grows with N, and the
# evenly spaced ring's shortest wave (mode N/2, core.stability) grows from about 950 on (the
# ring's default gains: N = 95 at P = 0.1 s, 190 at 0.05 s; 825 with k_e_tau_ring 50). The ring's
# gains apply whole up to RING_STIFFNESS_WHOLE and fade out by RING_STIFFNESS_NONE, the crowd's
# taking over (stable to N = 400 at P = 0.1 s): at N P = 4 to 6 with the defaults, beyond
# every ring the benchmarks fly (N P = 3.2 at most) and short of where any mode grows.
RING_STIFFNESS_WHOLE = 400.0
RING_STIFFNESS_NONE = 600.0
SEPARATION_PASSES = 4  # passes of the approach removal (see separation_velocity)
# |u| is kept where the explicit Euler step of its decay, control_period x (beta_u + 3 alpha_u
# u^2), stays below this (2 is where the step starts to oscillate with growing amplitude).
EULER_STEP_MAX = 1.0
EULER_DECAY_MAX = 1.0   # control_period x decay rate of u that the explicit Euler step takes
# The even-ring term (ring_offset) is whole while the member it drives toward is at least this
# share of the even gap 2 pi/n away, and fades to 0 as that gap closes (ring_offset_gate).
RING_GATE_SHARE = 0.5
GAP_STEER_SPEED = 3.0  # m/s: the most that law.gap_steer turns the ring at, along the ring
SLIDE_GAIN = 2.0  # law.slide flies what the d_safe term keeps at most this many times as fast


def radial_velocity(r, e_r_hat, velocity, target_velocity, params: ControllerParams,
                    radius=None):
    """
    Radial PD term (..., 2): ``(-K_R*(r - R) - K_DR*v_r) * e_r_hat``, v_r relative to target.

    ``radius`` (...): the radius each agent holds (:func:`ring_radius`; None: ``params.radius``).
    """
    rel_v = (
        np.asarray(velocity, dtype=float)[..., :2]
        - np.asarray(target_velocity, dtype=float)[..., :2]
    )
    v_r = np.sum(rel_v * e_r_hat, axis=-1)
    held = params.radius if radius is None else radius
    v_r_corr = -params.k_r * (np.asarray(r) - held) - params.k_dr * v_r
    return v_r_corr[..., None] * e_r_hat


def ring_obstacles(known, position):
    """
    Return the obstacles :func:`ring_radius` takes: ``position`` (..., M, 3) where ``known``.

    ``known`` (..., M): the vehicles heard within ``obstacle_memory`` that are no live ring
    member (a failed agent's presence, or silent); NaN rows elsewhere; None when there is none.
    """
    known = np.asarray(known, dtype=bool)
    if not known.any():
        return None
    return np.where(known[..., None], position, np.nan)


def ring_radius(position, velocity, target_position, target_velocity, obstacles,
                params: ControllerParams):
    """
    Return the radius (...) each agent's radial term holds: R, bulged round known obstacles.

    A known obstacle (``obstacles`` (..., K, 3): a failed or silent agent's vehicle, NaN rows
    none; None: none) on the ring's path would have the separation term push the agents that
    pass it out of their slots, and the ring re-form behind it. Instead the ring's radius is
    shaped round it, agent by agent, along the agent's ray from the target (where the agent
    and the target will be ``obstacle_lead`` s ahead): an obstacle ``a`` along that ray and
    ``b`` across it, at ``a - R <= c/2`` (``c`` = ``obstacle_clearance``), lifts the radius to
    ``a + c`` (no lower than R); one beyond lowers it to ``a - c`` (no higher than R). The
    change is whole while ``b <= c`` and falls to 0 over ``obstacle_ramp`` beyond it
    (smoothstep): the agent goes round it at least ``c`` away and keeps its angle, so the
    spacing term and its neighbours see nothing. Several obstacles: the largest lift plus
    the largest lowering. Exactly ``params.radius`` (a number) without obstacles, without
    ``d_safe`` or with ``obstacle_clearance`` 0. Elementwise and max/min only (no
    transcendental functions): the same bits over any batch shape.
    """
    p = params
    if obstacles is None or not (p.d_safe and p.obstacle_clearance):
        return p.radius
    obstacles = np.asarray(obstacles, dtype=float)
    if obstacles.shape[-2] == 0:
        return p.radius
    lead = p.obstacle_lead
    pos, vel = np.asarray(position, dtype=float), np.asarray(velocity, dtype=float)
    t_pos = np.asarray(target_position, dtype=float)
    t_vel = np.asarray(target_velocity, dtype=float)
    cx = t_pos[..., 0] + t_vel[..., 0] * lead
    cy = t_pos[..., 1] + t_vel[..., 1] * lead
    rx = (pos[..., 0] + vel[..., 0] * lead) - cx
    ry = (pos[..., 1] + vel[..., 1] * lead) - cy
    r = np.sqrt(rx * rx + ry * ry)
    ok = r >= R_EPS
    scale = np.where(ok, r, 1.0)
    ex = (np.where(ok, rx, 0.0) / scale)[..., None]
    ey = (np.where(ok, ry, 0.0) / scale)[..., None]
    ox = obstacles[..., 0] - cx[..., None]
    oy = obstacles[..., 1] - cy[..., None]
    c = p.obstacle_clearance
    with np.errstate(invalid='ignore'):
        along = ox * ex + oy * ey
        across = np.abs(oy * ex - ox * ey)
        beyond = along - p.radius
        known = np.isfinite(beyond) & np.isfinite(across)
        outside = beyond > 0.5 * c
        z = np.clip((c + p.obstacle_ramp - np.where(known, across, np.inf)) / p.obstacle_ramp,
                    0.0, 1.0)
        weight = z * z * (3.0 - 2.0 * z)
        lift = np.where(known & ~outside, np.maximum(c + beyond, 0.0) * weight, 0.0)
        lower = np.where(known & outside, np.minimum(beyond - c, 0.0) * weight, 0.0)
    return p.radius + (np.max(lift, axis=-1, initial=0.0) + np.min(lower, axis=-1, initial=0.0))


def gap_steer(theta_self, thetas, heard, obstacles, target_position, target_velocity,
              params: ControllerParams):
    """
    Return the rate [rad/s] (...) each agent adds to ``omega_ref``: the ring turns whole.

    A known obstacle on the ring's path (``obstacles`` (..., K, 3), :func:`ring_obstacles`: a
    failed or silent agent's vehicle; NaN rows none; None: none) would meet a member, whose
    ``d_safe`` detour takes it out of its slot and leaves the ring seconds of re-spacing. A
    ring turned as a whole keeps every gap, so the ring turns until a gap's middle meets it.
    The ring's phase comes from every member heard (``thetas`` (..., M) where ``heard``;
    None: all) and the agent itself, without a sort: the n-th harmonic ``sum exp(i n theta)``
    (n members) has the angle ``n phi`` of the even ring ``phi + 2 pi k/n`` nearest to them,
    and its length over n (1 on an even ring, 0 on a ring bunched evenly at random) weighs
    the whole term, which therefore fades out while a ring forms. Per obstacle, at its angle
    ``d`` from a fitted member (any: ``sin(n d)`` is the same from each) about the target where
    it will be ``obstacle_lead`` s ahead: ``-k_gap_steer sin(n d)/n`` (toward the nearest gap's
    middle, 0 there; continuous, and 0 on a member too, so members whose phases differ by
    what each hears add opposite rates there only as large as that difference) plus its own
    angular rate about that point (a hovering vehicle that the target passes: ``-v_target x
    rel / |rel|^2``), so a gap that met it stays on it. It is whole while the obstacle is
    within ``obstacle_ramp``/2 of the radius and falls to 0 at ``obstacle_ramp``
    (smoothstep); several obstacles: the weighted mean of their rates. At most
    ``GAP_STEER_SPEED``/R. Every member hears about the same ring and obstacles, so they
    all add about the same rate and the ring's gaps see nothing. 0 (a number) without
    obstacles, without ``d_safe`` or with ``k_gap_steer`` 0.
    """
    p = params
    if obstacles is None or not (p.d_safe and p.k_gap_steer):
        return 0.0
    obstacles = np.asarray(obstacles, dtype=float)
    if obstacles.shape[-2] == 0:
        return 0.0
    theta_self = np.asarray(theta_self, dtype=float)
    thetas = np.asarray(thetas, dtype=float)
    if heard is None:
        heard = np.ones(thetas.shape, dtype=bool)
    n = np.sum(heard, axis=-1) + 1.0
    with np.errstate(invalid='ignore'):
        angle = n[..., None] * np.where(heard, thetas, 0.0)
        sx = np.cos(n * theta_self) + np.sum(np.where(heard, np.cos(angle), 0.0), axis=-1)
        sy = np.sin(n * theta_self) + np.sum(np.where(heard, np.sin(angle), 0.0), axis=-1)
    evenness = np.hypot(sx, sy) / n
    n_phase = np.arctan2(sy, sx)[..., None]  # n phi: the ring's phase, n times
    t_pos = np.asarray(target_position, dtype=float)
    t_vel = np.asarray(target_velocity, dtype=float)
    cx = (t_pos[..., 0] + t_vel[..., 0] * p.obstacle_lead)[..., None]
    cy = (t_pos[..., 1] + t_vel[..., 1] * p.obstacle_lead)[..., None]
    ox, oy = obstacles[..., 0] - cx, obstacles[..., 1] - cy
    with np.errstate(invalid='ignore', divide='ignore'):
        rho2 = ox * ox + oy * oy
        off = np.abs(np.sqrt(rho2) - p.radius)
        z = np.clip((p.obstacle_ramp - off) / (0.5 * p.obstacle_ramp), 0.0, 1.0)
        weight = np.where(np.isfinite(z) & (rho2 > R_EPS * R_EPS), z * z * (3.0 - 2.0 * z), 0.0)
        # sin(n d) is the same from every member (they are 2 pi/n apart): no wrapping
        push = -p.k_gap_steer * np.sin(n[..., None] * np.arctan2(oy, ox) - n_phase) \
            / n[..., None]
        own = (t_vel[..., 0, None] * oy - t_vel[..., 1, None] * ox) / rho2
        rate = np.where(weight > 0.0, weight * (push + own), 0.0)
        total = np.sum(weight, axis=-1)
        steer = evenness * np.sum(rate, axis=-1) / np.maximum(total, 1.0)
    cap = GAP_STEER_SPEED / p.radius
    return np.clip(np.where(np.isfinite(steer), steer, 0.0), -cap, cap)


def spacing_error(gap_pred, gap_succ, lambda_pred=1.0, lambda_self=1.0):
    """
    Lambda-weighted spacing error in [-1, 1]; 0 when a gap is missing (NaN) or degenerate.

    ``e_tau = (l_pred*gap_succ - l_self*gap_pred) / (l_pred*gap_succ + l_self*gap_pred)``.
    """
    num = lambda_pred * np.asarray(gap_succ, dtype=float) - lambda_self * np.asarray(
        gap_pred, dtype=float
    )
    den = lambda_pred * np.asarray(gap_succ, dtype=float) + lambda_self * np.asarray(
        gap_pred, dtype=float
    )
    with np.errstate(invalid='ignore', divide='ignore'):
        e = num / np.where(den > DENOMINATOR_EPS, den, 1.0)
    return np.where((den > DENOMINATOR_EPS) & np.isfinite(e), e, 0.0)


def damped_spacing_error(e_tau, omega_self, omega_pred, omega_succ, k_omega_damp: float):
    """
    ``e_tau - K_OMEGA_DAMP*(omega_self - omega_ref_local)``, or ``e_tau`` if anything is missing.

    ``omega_ref_local`` is the mean of the neighbours' angular rates, or whichever exists (NaN
    marks a missing one). ``k_omega_damp = 0`` disables the term.
    """
    e_tau = np.asarray(e_tau, dtype=float)
    if np.all(np.asarray(k_omega_damp) == 0.0):
        return e_tau
    omega_pred = np.asarray(omega_pred, dtype=float)
    omega_succ = np.asarray(omega_succ, dtype=float)
    both = 0.5 * (omega_pred + omega_succ)
    omega_local = np.where(np.isfinite(omega_pred),
                           np.where(np.isfinite(omega_succ), both, omega_pred), omega_succ)
    damped = e_tau - k_omega_damp * (np.asarray(omega_self, dtype=float) - omega_local)
    return np.where(np.isfinite(damped), damped, e_tau)


def ring_offset(theta_self, thetas, heard=None):
    """
    Return the agent's angular offset [rad] from the even ring fitted to every member it hears.

    ``thetas`` (..., M) are the target-centric angles of the other ring members heard (those
    where ``heard`` (..., M) is True; None: all), ``theta_self`` (...) this agent's. With the
    ring of n = heard + 1 members even about this agent, the k-th member counter-clockwise
    would lie ``2 pi k/n`` ahead, so the angles ahead ``wrap2pi(theta_j - theta_self)`` would sum
    to ``pi (n - 1)`` whatever their order (no sort, no ranks): the offset is
    ``(sum_j wrap2pi(theta_j - theta_self) - pi (n - 1)) / n``, that is the ring's mean
    displacement from the even ring less this agent's own (positive: move counter-clockwise).
    The offsets of a ring sum to 0 (the term does not spin it), and two members' offsets
    differ by ``2 pi/n - gap`` between them: the term opens a gap narrower than the even one
    and closes a wider one, and never drives two members past each other. 0 with no one heard.

    The offset is then weighted by how open the way it drives is (:func:`ring_offset_gate`):
    whole while the nearest member heard that way is at least ``RING_GATE_SHARE`` of the even
    gap ``2 pi/n`` away, falling to 0 as that gap closes. A member at the very same angle (a
    coincident start) closes both ways: the fitted ring's order is then arbitrary.
    """
    theta_self = np.asarray(theta_self, dtype=float)
    ahead = np.mod(np.asarray(thetas, dtype=float) - theta_self[..., None], TWO_PI)
    behind = np.mod(theta_self[..., None] - np.asarray(thetas, dtype=float), TWO_PI)
    if heard is None:
        count = np.full(theta_self.shape, float(ahead.shape[-1]))
        near_ahead = np.min(ahead, axis=-1, initial=np.inf)
        near_behind = np.min(behind, axis=-1, initial=np.inf)
    else:
        near_ahead = np.min(np.where(heard, ahead, np.inf), axis=-1, initial=np.inf)
        near_behind = np.min(np.where(heard, behind, np.inf), axis=-1, initial=np.inf)
        ahead = np.where(heard, ahead, 0.0)
        count = np.sum(heard, axis=-1).astype(float)
    offset = (np.sum(ahead, axis=-1) - math.pi * count) / (count + 1.0)
    offset = offset * ring_offset_gate(np.where(offset > 0.0, near_ahead, near_behind),
                                       count + 1.0)
    return np.where(np.isfinite(offset), offset, 0.0)


def ring_offset_gate(gap, members):
    """
    Return the weight in [0, 1] of a ring offset that drives toward a member ``gap`` [rad] away.

    ``members`` (...): n, the ring's size heard (self included). 1 while ``gap`` is at least
    ``RING_GATE_SHARE`` x the even gap ``2 pi/n``, falling linearly to 0 at 0: the fitted ring
    never drives an agent into a neighbour it is already near (a start at one point, a member
    that re-joins in a gap); the spacing law's own gaps open those first.
    """
    with np.errstate(invalid='ignore', divide='ignore'):
        weight = np.asarray(gap, dtype=float) / (RING_GATE_SHARE * TWO_PI
                                                 / np.asarray(members, dtype=float))
    return np.clip(np.where(np.isfinite(weight), weight, 1.0), 0.0, 1.0)


def ring_ramp(ring_size, last_size, changed_at, last_tick, now, params: ControllerParams,
              silent=False):
    """
    Return (weight, changed_at): how much of the even-ring term an agent flies now.

    ``ring_size`` (...) is the number of ring members it hears now, self included;
    ``last_size``, ``changed_at`` and ``last_tick`` what it heard at its last tick, when that
    number last changed and when that tick was (its controller state; 0, -inf and -inf before
    its first tick); ``now`` its clock. The fitted even ring (:func:`ring_offset`) moves every
    slot when a member is lost or returns, and a ring whose members come and go every few
    seconds would chase each new fit round the whole ring; the neighbours' gaps re-space it
    locally at once. So the term ramps in linearly over ``params.ring_ramp`` seconds from the
    tick the membership last changed: ``clip((now - changed_at) / ring_ramp, 0, 1)``, 1 with
    ``ring_ramp`` 0. It changed where the number heard did, and where this agent's own last
    tick is over ``agent_timeout`` ago (its first tick, or back from an outage: the others
    lost it, and the ring it left has re-spaced without it). With ``params.ring_ramp_silent``
    a change of the number heard restarts it only where ``silent`` (...): the agent counts a
    vehicle that has fallen silent (kept by its ``d_safe`` term, ``obstacle_memory``, but not
    heard within ``agent_timeout``), or has a vehicle it counts within its ``d_safe``
    (:func:`crowded`: in a crowd the whole term at once would push it through the vehicles
    round it); a member failed and broadcasting its presence, or back, is a known vehicle,
    and a ring spaced wider than ``d_safe`` re-spaces round it at once. The engines need
    ``silent`` only where the number changed. A clock that stepped back
    (``now`` before ``changed_at``) gives 0. One agent's state in Python numbers (``now`` a
    float): the same values as floats, without arrays.
    """
    if isinstance(now, float) and isinstance(last_tick, float):  # one agent: no arrays
        if (ring_size != last_size and (silent or not params.ring_ramp_silent)) \
                or not now - last_tick <= params.agent_timeout:
            changed_at = now
        if not params.ring_ramp:
            return 1.0, changed_at
        weight = _clip((now - changed_at) / params.ring_ramp, 0.0, 1.0)
        return (weight if math.isfinite(weight) else 0.0), changed_at
    resized = np.asarray(ring_size) != np.asarray(last_size)
    if params.ring_ramp_silent:
        resized = resized & np.asarray(silent)
    changed = resized | ~(now - np.asarray(last_tick) <= params.agent_timeout)
    changed_at = np.where(changed, now, changed_at)
    if not params.ring_ramp:
        return np.ones(np.shape(changed_at)), changed_at
    with np.errstate(invalid='ignore'):
        weight = np.clip((now - changed_at) / params.ring_ramp, 0.0, 1.0)
    return np.where(np.isfinite(weight), weight, 0.0), changed_at


def crowded(own_position, positions, counted, bound):
    """
    Return whether a vehicle ``counted`` lies nearer than ``bound`` to an agent (ring_ramp's).

    ``own_position`` (..., 3), ``positions`` (..., K, 3) the vehicles it knows, ``counted``
    (..., K) those its ``d_safe`` term counts, ``bound`` (...) its ``d_safe``; horizontal,
    squared distances against the squared bound (a NaN distance is not nearer; 0 never).
    """
    own, positions = np.asarray(own_position, dtype=float), np.asarray(positions, dtype=float)
    dx = positions[..., 0] - own[..., None, 0]
    dy = positions[..., 1] - own[..., None, 1]
    bound = np.asarray(bound, dtype=float)
    return np.any(counted & (dx * dx + dy * dy < (bound * bound)[..., None]), axis=-1)


def own_rate_damping(e_tau_eff, omega_own, omega_ref, k_omega_own: float):
    """
    ``e_tau_eff - K_OMEGA_OWN*(omega_own - omega_ref)``, or ``e_tau_eff`` if that is not finite.

    ``omega_own`` is the agent's own angular rate about the target as its vehicle flies it
    (measured velocity relative to the target's, over ``r_eff``), ``omega_ref`` the rate of the
    settled ring. The spacing law sets a rate that the vehicle follows only through its
    velocity lag, so the angle is a second-order loop that the neighbour damping
    (:func:`damped_spacing_error`, relative to the neighbours) leaves undamped for the ring's
    long waves: they all turn together. This derivative action damps every wave alike (and
    the ring's spin about ``omega_ref``); with a stiffer ``k_e_tau`` the long waves then settle
    in about half the time (``core.stability``). ``k_omega_own = 0`` disables the term.
    """
    e_tau_eff = np.asarray(e_tau_eff, dtype=float)
    if np.all(np.asarray(k_omega_own) == 0.0):
        return e_tau_eff
    damped = e_tau_eff - k_omega_own * (np.asarray(omega_own, dtype=float) - omega_ref)
    return np.where(np.isfinite(damped), damped, e_tau_eff)


def omega_damping_gain(ring_size, params: ControllerParams):
    """
    Return the angular-rate damping gain: ``k_omega_damp + k_omega_damp_n * ring_size``.

    ``ring_size`` is the number of agents this agent hears, itself included (N). The
    sensitivity of ``e_tau`` to the angles is ``1/(gap_pred + gap_succ)``, i.e. ``N/(4 pi)`` on
    an even ring, so the stiffness of a ring's short-wave modes grows with N and their damping
    has to keep up (``core.stability``). The gain is capped where the damping's own decay of
    ``u`` (``k_e_tau*k_tau*gain`` on top of ``beta_u``) reaches ``DAMPING_DECAY_MAX``: a
    constant of the law, not of the control period. What of that decay one explicit Euler step
    of the period flown cannot take is taken implicitly (:func:`implicit_decay`).
    """
    p = params
    gain = p.k_omega_damp + p.k_omega_damp_n * np.asarray(ring_size, dtype=float)
    if p.k_omega_damp_n and p.k_e_tau * p.k_tau > 0.0:
        cap = (DAMPING_DECAY_MAX - p.beta_u) / (p.k_e_tau * p.k_tau)
        gain = np.minimum(gain, max(cap, p.k_omega_damp))
    return gain


def implicit_decay(gain, params: ControllerParams):
    """
    Return the decay rate of ``u`` [1/s] that :func:`soliton_update` takes implicitly.

    The damping ``gain`` (:func:`omega_damping_gain`) decays ``u`` at ``k_e_tau*k_tau*gain``
    (``omega_self`` is ``k_tau*u``, the previous command) on top of ``beta_u``. An explicit Euler
    step of ``control_period`` takes that decay while ``control_period * decay`` stays within
    ``EULER_DECAY_MAX`` (``k_omega_damp`` is always taken explicitly); the rest, at a longer
    period, oscillates with growing amplitude if taken explicitly (a 10 Hz controller's
    linearised ring of 32 grew), so the step takes it implicitly: ``u + P du / (1 + P D)``.
    0 where the explicit step takes all of it (always at ``control_period`` 0.01 s).
    """
    p = params
    k = p.k_e_tau * p.k_tau
    if k <= 0.0:
        return np.zeros_like(np.asarray(gain, dtype=float))
    explicit = max((EULER_DECAY_MAX / p.control_period - p.beta_u) / k, p.k_omega_damp)
    return k * np.maximum(np.asarray(gain, dtype=float) - explicit, 0.0)


def limiter(u, params: ControllerParams):
    """g(u): ``u^3``, or the soft limiter ``u^3 / (1 + (|u|/U_lim)^2)`` when enabled."""
    u = np.asarray(u, dtype=float)
    cube = u * u * u  # IEEE products: the same bits on every CPU (numpy's pow is not)
    if params.soft_limiter:
        return cube / (1.0 + (np.abs(u) / params.u_lim) ** 2)
    return cube


def soliton_update(u, u_pred, u_succ, u_ss_pred, u_ss_succ, e_tau_eff, params: ControllerParams,
                   decay=0.0):
    """
    One Euler step of ``u`` (dt = control_period), explicit but for ``decay``.

    Returns (u_new, u_ss).

    ``du = C*u_s - BETA*u - ALPHA*g(u) + K_E_TAU*e_tau_eff + KAPPA_DIFF*u_ss
    - K_STEEPEN*u*u_s + KAPPA_DISP*u_sss`` with ``u_s = u_succ - u_pred``,
    ``u_ss = u_succ - 2u + u_pred`` and ``u_sss = u_ss_succ - u_ss_pred``. Missing neighbours
    count as 0. ``u_new = u + P du / (1 + P decay)``: the part ``decay`` [1/s] of the linear
    decay in ``du`` taken implicitly (:func:`implicit_decay`; 0: explicit). A non-finite result
    resets ``u`` to 0. ``u_ss`` is what the agent broadcasts.
    """
    u = np.asarray(u, dtype=float)
    u_s = u_succ - np.asarray(u_pred)
    u_ss = u_succ - 2.0 * u + u_pred
    u_sss = u_ss_succ - np.asarray(u_ss_pred)
    with np.errstate(invalid='ignore', over='ignore'):
        du = (params.c_coupling * u_s - params.beta_u * u - params.alpha_u * limiter(u, params)
              + params.k_e_tau * e_tau_eff + params.kappa_u_diff * u_ss
              - params.k_u_steepen * u * u_s + params.kappa_u_disp * u_sss)
        u_new = u + params.control_period * du / (1.0 + params.control_period * decay)
    cap = u_bound(params)
    return np.where(np.isfinite(u_new), np.clip(u_new, -cap, cap), 0.0), u_ss


def u_bound(params: ControllerParams) -> float:
    """
    Return the largest ``|u|`` at which the explicit Euler step of ``u`` is stable.

    The step's local decay rate is ``beta_u + 3 alpha_u u^2`` (the cubic's slope); past
    ``control_period x rate = 2`` each step overshoots more than the last and ``u`` grows
    without bound (seen: 1e270 after an agent near the target was kicked by its damping).
    :func:`soliton_update` keeps ``|u|`` where that product is ``EULER_STEP_MAX``; the
    settled ring's ``u`` stays far below it.
    """
    room = EULER_STEP_MAX / params.control_period - params.beta_u
    if params.alpha_u <= 0.0 or room <= 0.0:
        return np.inf
    return float(np.sqrt(room / (3.0 * params.alpha_u)))


def effective_radius(r, params: ControllerParams):
    """``r_eff = max(r, R_MIN)``."""
    return np.maximum(r, params.r_min)


def tangential_velocity(u, r, t_hat, omega_ref, params: ControllerParams):
    """
    Tangential term (..., 2): ``(K_TAU*u*r_eff + omega_ref*r) * t_hat`` (counter-clockwise).

    With ``ring_turn_acc``, ``u`` comes held so that ``K_TAU*u*r_eff`` stays within
    ``sqrt(ring_turn_acc*r_eff)`` (:func:`turn_capped`).
    """
    speed = params.k_tau * np.asarray(u) * effective_radius(r, params) + np.asarray(omega_ref) * r
    return np.asarray(speed)[..., None] * t_hat


def turn_capped(u, r, params: ControllerParams):
    """
    Return ``u`` held where the speed it asks along the ring can still fly the ring's circle.

    An agent that flies round the target at ``v`` relative to it, ``r_eff`` away, needs
    ``v^2 / r_eff`` of centripetal acceleration to stay on the circle. Asked to fly faster than
    its vehicle can turn, it drifts out, and the acceleration it spends along the ring is taken
    from its radial term: a stiff spacing loop then re-spaces the ring at the cost of its
    radius. So ``u`` is held within ``+-sqrt(ring_turn_acc / r_eff) / k_tau``, where the
    tangential term ``k_tau u r_eff`` reaches ``sqrt(ring_turn_acc r_eff)``. It is ``u`` that is
    held, not only the speed: ``u`` does not wind up past what is flown, and the ring's
    re-spacing ends when its spacing does. Not where the ``d_safe`` term pushes the agent
    (:func:`turn_released`). ``ring_turn_acc`` or ``k_tau`` 0: ``u`` as it is.
    A NaN bound (a NaN ``r``) leaves ``u`` as it is (the array and float paths and the
    kernels alike).
    """
    if not (params.ring_turn_acc and params.k_tau):
        return u
    bound = np.sqrt(params.ring_turn_acc / effective_radius(np.asarray(r, dtype=float), params)
                    ) / params.k_tau
    u = np.asarray(u, dtype=float)
    return np.where(u > bound, bound, np.where(u < -bound, -bound, u))


def clamp_velocity(v, max_speed_xy: float, max_speed_z: float):
    """Scale the XY part down to norm ``max_speed_xy`` and clip z to +-``max_speed_z``."""
    return saturate(v, max_speed_xy, max_speed_z)


def vertical_velocity(z, target_vz, params: ControllerParams):
    """
    Return the vertical command.

    The target's ``vz``, plus ``k_z (altitude - z)`` when holding.
    """
    target_vz = np.asarray(target_vz, dtype=float)
    if not params.altitude_hold:
        return target_vz
    return params.k_z * (params.altitude - np.asarray(z, dtype=float)) + target_vz


def with_vertical(v_t, position, params: ControllerParams):
    """``v_t`` (..., 3) with its z replaced by :func:`vertical_velocity` (a copy)."""
    v = np.array(v_t, dtype=float)
    v[..., 2] = vertical_velocity(np.asarray(position, dtype=float)[..., 2], v[..., 2], params)
    return v


class FloatRows(list):
    """
    Rows of Python floats for :func:`separation_velocity`: (x, y) pairs, or ages.

    What the per-agent controller gathers for the term's float path, which takes them as they
    are (any other sequence is converted); anything else reads them as the list they are.
    """


def separation_velocity(position, velocity, others_position, others_velocity,
                        params: ControllerParams, v_law=None, others_age=None,
                        others_radius=None, own_radius=0.0, d_safe=None, kept=False,
                        slide=False):
    """
    Repulsion (..., 2) of the optional safety distance ``d_safe`` (zero when it is 0).

    ``others_position``/``others_velocity`` (..., M, >=2) are the states of the other live
    agents this agent hears (NaN rows: none), sent ``others_age`` (..., M) seconds ago (None:
    now); ``position``/``velocity`` its own. A state is carried forward to now along its
    velocity, at most ``t_safe``: a link's delay would otherwise hide a closing agent (at
    0.2 s and 10 m/s, 2 m). In the horizontal plane, with ``d`` the distance to another agent
    and ``closing`` the speed at which it shrinks, each agent whose look-ahead distance
    ``d_ahead = d - t_safe*closing - closing^2/(2 a_safe)`` (``closing`` counted when positive;
    the last term is the stopping distance at ``a_safe``, none when it is 0) is below
    ``d_safe`` pushes this agent straight away from it with ``v_safe * min(1, 1 -
    d_ahead/d_safe)``: nothing at ``d_safe``, ``v_safe`` at contact. The look-ahead ``t_safe``
    (about the vehicle's velocity lag) starts braking before a fast approach is inside
    ``d_safe``; ``t_safe = 0`` uses the plain distance. For an agent ahead, the distance
    counted is also at most :func:`stopping_gap` (reacting ``t_react`` late, were that one to
    stop now) plus ``(1 - CONTINGENCY_SHARE) d_safe``, pushing along that gap: a following
    distance at speed. The gap is the closer of two ways: the one this agent flies now and,
    with ``v_law``, the one its law turns it to (:func:`_heading`). The sum is
    bounded to norm ``v_safe``. Two agents at the very same point push nothing (no direction).

    With ``v_law`` (..., 2), the rest of the command, the result also takes out the part of
    ``v_law`` that heads toward each such agent, in proportion ``min(1, SEPARATION_YIELD (1 -
    d_ahead/d_safe))`` (all of it from 0.8 ``d_safe`` in), so the law cannot out-vote the
    repulsion: the only balance of the two inside ``d_safe`` is within 0.2 ``d_safe`` of it.
    The pushes' sum loses its part toward each such agent that is closing in, in the same
    proportion: the pushes of a crowd must not carry the agent into one closing in from outside.

    ``others_radius`` (..., M) and ``own_radius`` (...) are position uncertainties [m] (the
    broadcast ``uncertainty``, e.g. after an estimator reset): each vehicle counts as a disc,
    so every distance above is counted less their sum (``d_safe`` kept from the disc's edge).
    None: points. What a disc adds to the push of its point is at most ``v_uncertain``, while
    the law's approach to it is taken out as for a point that near: inside a wide disc (a
    vehicle's estimate jumped, or it has been silent long) an agent stops approaching it and
    leaves at ``v_uncertain``, instead of fleeing at ``v_safe`` through where the vehicle is.

    ``d_safe`` (...): the safety distance each agent flies (None: ``params.d_safe``; the law
    passes :meth:`ControllerParams.safety_distance` of its ring size).

    ``kept`` (with ``v_law``): return (the repulsion, ``v_law`` with its approach taken out
    (..., 2)): what the law keeps of its command, before the pushes (:func:`slide`). ``slide``
    (with ``v_law``): ``v_law`` is a :func:`slide`, its way counted at the larger of the
    agent's speed and its own (:func:`_heading`), over the vehicles within reach at the
    agent's own speed (:func:`_within_own_reach`).
    """
    position = np.asarray(position, dtype=float)
    d_safe = np.asarray(params.d_safe if d_safe is None else d_safe, dtype=float)
    if others_position is None or not np.any(d_safe > 0.0):
        zero = np.zeros(position.shape[:-1] + (2,))
        if kept:
            return zero, zero + np.asarray(v_law, dtype=float)[..., :2]
        return zero
    if position.ndim == 1 and d_safe.ndim == 0 and 0 < len(others_position) <= FLOAT_ROWS:
        return _separation_one(position, velocity, others_position, others_velocity, params,
                               v_law, others_age, others_radius, own_radius, float(d_safe),
                               kept, slide)
    return _separation_arrays(position, velocity, others_position, others_velocity, params,
                              v_law, others_age, others_radius, own_radius, d_safe, kept, slide)


def _separation_arrays(position, velocity, others_position, others_velocity, params, v_law,
                       others_age, others_radius, own_radius, d_safe, kept=False, slide=False):
    """:func:`separation_velocity` over arrays (``position`` an array, ``d_safe`` one too)."""
    if slide:  # a slide's pass: the vehicles within reach at the agent's own speed
        others_position = _within_own_reach(position, velocity, others_position, params, d_safe)
    on = d_safe[..., None] > 0.0          # (..., 1): over the others
    reach = np.where(on, d_safe[..., None], 1.0)
    others_velocity = np.asarray(others_velocity, dtype=float)[..., :2]
    others_xy = np.asarray(others_position, dtype=float)[..., :2]
    if others_age is not None:
        age = np.clip(np.asarray(others_age, dtype=float), 0.0, params.t_safe)
        others_xy = others_xy + others_velocity * age[..., None]
    away = position[..., None, :2] - others_xy
    rel_v = np.asarray(velocity, dtype=float)[..., None, :2] - others_velocity
    d = np.hypot(away[..., 0], away[..., 1])
    margin = 0.0
    if others_radius is not None:  # discs: where the vehicles may be, not where they say
        margin = (np.nan_to_num(np.asarray(others_radius, dtype=float))
                  + np.asarray(own_radius, dtype=float)[..., None])
    with np.errstate(invalid='ignore', divide='ignore'):
        apart = d > DENOMINATOR_EPS
        unit = np.where(apart[..., None], away / np.where(apart, d, 1.0)[..., None], 0.0)
        closing = np.maximum(-np.sum(rel_v * unit, axis=-1), 0.0)
        closing = np.where(np.isfinite(closing), closing, 0.0)
        d_ahead = d - margin - params.t_safe * closing
        if params.a_safe > 0.0:  # and what braking at a_safe takes
            d_ahead = d_ahead - closing * closing / (2.0 * params.a_safe)
        if params.t_react > 0.0:  # and were the other to stop now: a follower's gap
            react = params.t_react + (0.0 if others_age is None else age)
            own_v = np.asarray(velocity, dtype=float)[..., :2]
            if v_law is None:
                gap, unit_gap = stopping_gap(position, own_v, others_xy, others_velocity, react,
                                             params)
            else:  # the way it flies now, or the one its law turns it to: one pass over both
                ways = np.stack((own_v, _heading(own_v, v_law, slide)))
                both, units = stopping_gap(position, ways, others_xy, others_velocity, react,
                                           params)
                lower = both[1] < both[0]
                gap = np.where(lower, both[1], both[0])
                unit_gap = np.where(lower[..., None], units[1], units[0])
            gap = gap - margin + (1.0 - CONTINGENCY_SHARE) * reach  # keep the share
            worse = gap < d_ahead
            d_ahead = np.where(worse, gap, d_ahead)
            unit = np.where(worse[..., None], unit_gap, unit)
            closing = np.where(worse, np.maximum(closing, 1.0), closing)
            apart = apart | (worse & (gap > DENOMINATOR_EPS))
        near = apart & on & (d_ahead < reach)
        weight = np.where(near, params.v_safe * np.minimum(1.0, 1.0 - d_ahead / reach), 0.0)
        pushed = weight
        if others_radius is not None:  # what a disc adds to its point's push is bounded
            point = np.maximum(params.v_safe * np.minimum(1.0, 1.0 - (d_ahead + margin) / reach),
                               0.0)
            pushed = np.where(near, np.minimum(weight, point + params.v_uncertain), 0.0)
    push = np.sum(unit * pushed[..., None], axis=-2)
    norm = np.hypot(push[..., 0], push[..., 1])
    scale = np.where(norm > params.v_safe, params.v_safe / np.where(norm > 0.0, norm, 1.0), 1.0)
    push = push * scale[..., None]
    if v_law is not None:  # take out the approach, one agent after the other
        v_law = np.asarray(v_law, dtype=float)[..., :2]
        yield_ = np.minimum(1.0, SEPARATION_YIELD * weight / params.v_safe)
        active = np.flatnonzero(np.any(near.reshape(-1, near.shape[-1]), axis=0)) \
            if near.size else ()
        # The pushes too lose their approach to each agent that is closing in: in a crowd the
        # sum of many neighbours' pushes (each away from one of them, bounded to v_safe) headed
        # at 10 m/s straight at an agent outside the crowd that was closing in, and out-voted
        # that one's own push. An agent that is not closing in does not hold the pushes back
        # (one pushed from behind may flee toward agents ahead that move on).
        taken = _take_out(v_law, unit, yield_, active)
        push = (_take_out(push, unit, np.where(closing > 0.0, yield_, 0.0), active)
                + taken - v_law)
        if kept:
            return push, taken
    return push


def _within_own_reach(position, velocity, others_position, params, d_safe):
    """
    Return ``others_position`` with NaN rows (none there) where a vehicle lies beyond reach.

    The reach is :func:`obstacle_reach` at the agent's own horizontal speed, the vehicle at
    rest and no disc: no vehicle within it is left out by an engine's search for the vehicles
    within reach (each vehicle's own reach is at least that), so every engine counts the same
    ones. A :func:`slide`'s pass counts these alone: its way at the slide's speed reaches
    farther than the search looked, and a vehicle there is counted on a later tick, once the
    agent flies faster.
    """
    own = np.asarray(velocity, dtype=float)
    reach = obstacle_reach(np.hypot(own[..., 0], own[..., 1]), 0.0, 0.0, params, 0.0, d_safe)
    others = np.asarray(others_position, dtype=float)
    at = np.asarray(position, dtype=float)
    distance = np.hypot(others[..., 0] - at[..., None, 0], others[..., 1] - at[..., None, 1])
    return np.where((distance >= np.asarray(reach)[..., None])[..., None], np.nan, others)


def obstacle_reach(speed, others_speed, others_radius, params: ControllerParams,
                   own_radius: float = 0.0, d_safe=None):
    """
    Return the horizontal distance beyond which another vehicle adds nothing to ``d_safe``.

    :func:`law.separation_velocity` counts a vehicle only where its look-ahead distance
    ``d_ahead`` is below ``d_safe``. A vehicle whose reported position lies ``D`` away (this one
    at horizontal speed ``speed`` = v, the other at ``others_speed`` = v_o: numbers or arrays)
    has ``d_ahead >= d_safe`` whatever its state's age when ``D`` is at least the largest of

    - ``d_safe + m + v_o t_safe + t_safe V + V^2 / (2 a_safe)``: carried forward at most
      ``t_safe`` (``v_o t_safe``), closing at most ``V = v + v_o``, less the discs' radii ``m``
      (``others_radius`` + ``own_radius``: both uncertainties);
    - ``d_safe + m + S(v_o) + t_safe v + v^2 / (2 a_safe)``: the rest point of a presence
      (``S`` the :func:`law.stopping_distance`), which does not move;
    - ``CONTINGENCY_SHARE d_safe + m + v_o t_safe + S(v_o) + v (t_react + t_safe) + S(v)``
      (``t_react`` > 0): the stopping gap to one ahead is at least the distance to its rest
      point less this vehicle's path until it would stop (its state at most ``t_safe`` old).

    It grows with ``others_speed`` and ``others_radius``. A silent vehicle counts at rest: its
    own speed only adds to the bound. The bound is padded by a millimetre and a relative 1e-9
    against rounding; it is NaN (within reach) for a non-finite state. The speeds are the
    broadcast ones, no limit assumed on them. ``d_safe`` (a number or an array): the distance
    flown (None: ``params.d_safe``).
    """
    p = params
    d = p.d_safe if d_safe is None else d_safe
    v, v_o = speed, others_speed
    stop_o = stopping_distance(v_o, p.t_safe, p.a_safe)
    stop = stopping_distance(v, p.t_safe, p.a_safe)
    margin = others_radius + own_radius
    closing = v + v_o
    brake = closing * closing / (2.0 * p.a_safe) if p.a_safe > 0.0 else 0.0
    own_brake = v * v / (2.0 * p.a_safe) if p.a_safe > 0.0 else 0.0
    reach = _maximum_of(d + margin + v_o * p.t_safe + p.t_safe * closing + brake,
                        d + margin + stop_o + p.t_safe * v + own_brake)
    if p.t_react > 0.0:
        reach = _maximum_of(reach, CONTINGENCY_SHARE * d + margin + v_o * p.t_safe
                            + stop_o + v * (p.t_react + p.t_safe) + stop)
    return reach * (1.0 + 1e-9) + 1e-3


def _maximum_of(a, b):
    """``np.maximum`` (NaN wins), in Python floats when both are floats: the same value."""
    if isinstance(a, float) and isinstance(b, float):
        return _maximum(a, b)
    return np.maximum(a, b)


def _gatherer(keep: np.ndarray):
    """
    Return ``gather(values, fill, trailing=())`` of the columns ``keep`` (..., M) marks.

    ``values`` (broadcast to (..., M, *trailing)) becomes (..., K, *trailing): each row's kept
    columns first, in their order, then ``fill``; K the most any row keeps (at least 1).
    """
    lead, m = keep.shape[:-1], keep.shape[-1]
    keep = keep.reshape(-1, m)
    k = max(int(keep.sum(axis=1).max()), 1)
    order = np.argsort(~keep, axis=1, kind='stable')[:, :k]
    kept = np.take_along_axis(keep, order, axis=1)

    def gather(values, fill, trailing=()):
        values = np.broadcast_to(values, lead + (m,) + trailing).reshape((-1, m) + trailing)
        taken = np.take_along_axis(values, order.reshape(order.shape + (1,) * len(trailing)),
                                   axis=1)
        taken = np.where(kept.reshape(kept.shape + (1,) * len(trailing)), taken, fill)
        return taken.reshape(lead + (k,) + trailing)
    return gather


def _heading(velocity, v_law, slide=False):
    """
    Return (..., 2) the agent's horizontal speed along the law's command ``v_law`` (None: as is).

    A lagged vehicle turns toward its command: a follower whose law curves its way toward the
    one ahead keeps its following distance along the way it is about to fly. It also keeps it
    along the way it flies now (:func:`separation_velocity` takes the closer of the two): a law
    that swings aside from one tick to the next does not turn the vehicle within a tick. The
    speed is its own; with ``slide`` (``v_law`` a :func:`slide`, at ``max_speed_xy``), the
    larger of its own and the command's: a slide faster than the vehicle flies now is counted
    at the speed it will fly, toward a vehicle ahead on its way (of those within reach at its
    own speed: :func:`_within_own_reach`).
    """
    own = np.asarray(velocity, dtype=float)[..., :2]
    if v_law is None:
        return own
    law = np.asarray(v_law, dtype=float)[..., :2]
    speed = np.hypot(own[..., 0], own[..., 1])
    commanded = np.hypot(law[..., 0], law[..., 1])
    if slide:
        speed = np.maximum(speed, commanded)
    with np.errstate(invalid='ignore', divide='ignore'):
        turned = law * (speed / np.where(commanded > DENOMINATOR_EPS, commanded, 1.0))[..., None]
    return np.where((commanded > DENOMINATOR_EPS)[..., None], turned, own)


def stopping_gap(position, velocity, others_xy, others_velocity, react, params):
    """
    Return how close (..., M) this agent would come to each other one were it to stop now.

    The other vehicle, at ``others_xy`` (..., M, 2) flying ``others_velocity``, stops on a
    zero command where :func:`stopping_offset` puts it (``t_safe`` lag, ``a_safe`` braking);
    this one hears it ``react`` (..., M) seconds later, flying on at ``velocity`` meanwhile,
    then stops as well. The gap is the distance from the other's rest point to this agent's
    path to its own (a straight segment), and the unit vector (..., M, 2) is the sum of the
    one from that rest point to the path's closest point (away from the other when they
    coincide) and of the one back along this agent's velocity, normalised: braking widens the
    gap as steering aside does, and a push only aside left a follower at full speed when the
    rest point lay on its way (0.12 m from a failed vehicle in the separation benchmark); inf
    for one that is not ahead (along this agent's velocity). A follower
    as fast as the one ahead keeps ``v react`` more than its distance; one faster also what
    braking from the higher speed takes. (A leader that braked to a hover ran the follower
    0.2 s behind it from 6 m to 0.65 m: both braked at 4 m/s^2.)
    """
    xy = np.asarray(position, dtype=float)[..., None, :2]
    own = np.asarray(velocity, dtype=float)[..., None, :2]
    rest = others_xy + stopping_offset(others_velocity, params.t_safe, params.a_safe)[..., :2]
    path = own * np.asarray(react, dtype=float)[..., None] \
        + stopping_offset(own, params.t_safe, params.a_safe)[..., :2]
    rel = rest - xy
    length2 = np.sum(path * path, axis=-1)
    with np.errstate(invalid='ignore', divide='ignore'):
        along = np.clip(np.sum(rel * path, axis=-1) / np.where(length2 > 0.0, length2, 1.0),
                        0.0, 1.0)
        diff = along[..., None] * path - rel
        gap = np.hypot(diff[..., 0], diff[..., 1])
        away = xy - others_xy
        d = np.hypot(away[..., 0], away[..., 1])
        unit = np.where((gap > DENOMINATOR_EPS)[..., None],
                        diff / np.where(gap > DENOMINATOR_EPS, gap, 1.0)[..., None],
                        away / np.where(d > DENOMINATOR_EPS, d, 1.0)[..., None])
        speed = np.hypot(own[..., 0], own[..., 1])
        brake = -own / np.where(speed > DENOMINATOR_EPS, speed, 1.0)[..., None]
        unit = unit + brake
        norm = np.hypot(unit[..., 0], unit[..., 1])
        unit = np.where((norm > DENOMINATOR_EPS)[..., None],
                        unit / np.where(norm > DENOMINATOR_EPS, norm, 1.0)[..., None], brake)
    # Only one ahead of this agent counts: the rest point of one behind lies on its way, but
    # this agent is past it by then (that one's own rule keeps it back).
    return np.where(np.sum(away * own, axis=-1) < 0.0, gap, np.inf), unit


def _take_out(v, unit, share, active):
    """
    Return ``v`` (..., 2) less its part toward each ``active`` agent, in proportion ``share``.

    Taking out the approach to one agent can head toward another: later passes over the agents
    whose approach goes entirely (share 1) converge on a velocity that approaches none.
    """
    kept = v.copy()
    full = np.where(share >= 1.0, 1.0, 0.0)
    for s in [share] + [full] * (SEPARATION_PASSES - 1):
        for j in active:
            e = unit[..., j, :]
            toward = np.minimum(np.sum(kept * e, axis=-1), 0.0)
            kept = kept - s[..., j, None] * toward[..., None] * e
    return kept


# Up to this many other vehicles, one agent's separation term is computed in Python floats.
FLOAT_ROWS = 32
# Above this many columns (vehicles and rest points), the engines build each agent's obstacles
# from its vehicles within reach only (below, finding them costs more than it saves: N = 10's
# 20 columns, 8 %).
WITHIN_REACH_COLUMNS = 32


def offset_one(vx: float, vy: float, lag: float, braking: float) -> tuple[float, float]:
    """:func:`stopping_offset` of one horizontal velocity, in floats."""
    vx = vx if math.isfinite(vx) else 0.0
    vy = vy if math.isfinite(vy) else 0.0
    speed = _hypot(vx, vy)
    distance = stopping_distance(speed, lag, braking)
    if speed > 0.0:
        return vx / speed * distance, vy / speed * distance
    return 0.0 * distance, 0.0 * distance


def _way_one(wx: float, wy: float, params: ControllerParams) -> tuple:
    """Return what :func:`_gap_one` takes of a way ``(wx, wy)``: it, its stop offset, braking."""
    offx, offy = offset_one(wx, wy, params.t_safe, params.a_safe)
    speed = _hypot(wx, wy)
    scale = speed if speed > DENOMINATOR_EPS else 1.0
    return wx, wy, offx, offy, -wx / scale, -wy / scale


def _gap_one(x0, y0, way, ox, oy, restx, resty, react, d):
    """
    :func:`stopping_gap` of one way (:func:`_way_one`) to one other vehicle, in floats.

    ``(ox, oy)`` its (carried-forward) position, ``(restx, resty)`` its rest point, ``d`` the
    distance to it. Returns (gap, unit x, unit y).
    """
    wx, wy, offx, offy, bx, by = way
    px, py = wx * react + offx, wy * react + offy
    relx, rely = restx - x0, resty - y0
    length2 = px * px + (0.0 + py * py)  # np.sum of two: a + (0.0 + b)
    along = (relx * px + (0.0 + rely * py)) / (length2 if length2 > 0.0 else 1.0)
    along = _clip(along, 0.0, 1.0)
    diffx, diffy = along * px - relx, along * py - rely
    gap = _hypot(diffx, diffy)
    awayx, awayy = x0 - ox, y0 - oy
    if gap > DENOMINATOR_EPS:
        ux, uy = diffx / gap, diffy / gap
    else:
        scale = d if d > DENOMINATOR_EPS else 1.0
        ux, uy = awayx / scale, awayy / scale
    ux, uy = ux + bx, uy + by
    norm = _hypot(ux, uy)
    if norm > DENOMINATOR_EPS:
        ux, uy = ux / norm, uy / norm
    else:
        ux, uy = bx, by
    if not awayx * wx + (0.0 + awayy * wy) < 0.0:
        gap = math.inf
    return gap, ux, uy


def _take_out_one(vx, vy, units, shares, active):
    """:func:`_take_out` of one agent's ``(vx, vy)``, in floats."""
    full = [1.0 if s >= 1.0 else 0.0 for s in shares]
    for pass_shares in [shares] + [full] * (SEPARATION_PASSES - 1):
        for j in active:
            ex, ey = units[j]
            toward = _minimum(vx * ex + (0.0 + vy * ey), 0.0)
            s = pass_shares[j] * toward
            vx, vy = vx - s * ex, vy - s * ey
    return vx, vy


def _separation_one(position, velocity, others_position, others_velocity, params, v_law,
                    others_age, others_radius, own_radius, d_safe, kept=False, slide=False):
    """
    :func:`separation_velocity` of one agent (``d_safe`` > 0) in Python floats.

    The same operations in the same order as the array path (the same bits, NaN rows and
    signed zeros included; ``test_separation_in_floats_is_the_array_paths``), at a fraction of
    its cost on the few vehicles a tick usually has within reach.
    """
    p = params
    x0, y0 = float(position[0]), float(position[1])
    vx0, vy0 = float(velocity[0]), float(velocity[1])
    others = (others_position if type(others_position) is FloatRows
              else np.asarray(others_position, dtype=float)[:, :2].tolist())
    others_v = (others_velocity if type(others_velocity) is FloatRows
                else np.asarray(others_velocity, dtype=float)[:, :2].tolist())
    if slide:  # _within_own_reach
        bound = obstacle_reach(_hypot(vx0, vy0), 0.0, 0.0, p, 0.0, d_safe)
        others = [(ox, oy) if not _hypot(ox - x0, oy - y0) >= bound else (math.nan, math.nan)
                  for ox, oy in others]
    m = len(others)
    ages = [None] * m
    if type(others_age) is FloatRows and len(others_age) == m:
        ages = others_age
    elif others_age is not None:
        ages = np.asarray(others_age, dtype=float)
        ages = ages.tolist() if ages.shape == (m,) else np.broadcast_to(ages, (m,)).tolist()
    if others_radius is None:
        margins = [0.0] * m
    else:
        radius = np.nan_to_num(np.broadcast_to(np.asarray(others_radius, dtype=float), (m,)))
        margins = (radius + float(own_radius)).tolist()
    law = None if v_law is None else np.asarray(v_law, dtype=float)[:2].tolist()
    own_way = heading = None
    if p.t_react > 0.0:
        own_way = _way_one(vx0, vy0, p)
    if law is not None and p.t_react > 0.0:
        speed, commanded = _hypot(vx0, vy0), _hypot(law[0], law[1])
        if slide and commanded > speed:  # _heading: a slide at its own speed
            speed = commanded
        if commanded > DENOMINATOR_EPS:
            ratio = speed / commanded
            heading = _way_one(law[0] * ratio, law[1] * ratio, p)
        else:
            heading = own_way
    reach = d_safe
    keep = (1.0 - CONTINGENCY_SHARE) * reach
    units, weights, pushes, closings, near_rows = [], [], [], [], []
    for (ox, oy), (ovx, ovy), age, margin in zip(others, others_v, ages, margins):
        if ox != ox or oy != oy:  # a NaN row (none there): what the array path makes of it
            units.append((0.0, 0.0))
            weights.append(0.0)
            pushes.append(0.0)
            closings.append(0.0)
            continue
        if age is not None:
            age = _clip(age, 0.0, p.t_safe)
            ox, oy = ox + ovx * age, oy + ovy * age
        awayx, awayy = x0 - ox, y0 - oy
        relx, rely = vx0 - ovx, vy0 - ovy
        d = _hypot(awayx, awayy)
        apart = d > DENOMINATOR_EPS
        if apart:
            ux, uy = awayx / d, awayy / d
        else:
            ux = uy = 0.0
        closing = _maximum(-(relx * ux + (0.0 + rely * uy)), 0.0)
        closing = closing if math.isfinite(closing) else 0.0
        d_ahead = d - margin - p.t_safe * closing
        if p.a_safe > 0.0:
            d_ahead = d_ahead - closing * closing / (2.0 * p.a_safe)
        if p.t_react > 0.0:
            react = p.t_react + (0.0 if age is None else age)
            offx, offy = offset_one(ovx, ovy, p.t_safe, p.a_safe)
            restx, resty = ox + offx, oy + offy
            gap, gx, gy = _gap_one(x0, y0, own_way, ox, oy, restx, resty, react, d)
            if heading is not None:
                gap_law, lx, ly = _gap_one(x0, y0, heading, ox, oy, restx, resty, react, d)
                if gap_law < gap:
                    gap, gx, gy = gap_law, lx, ly
            gap = gap - margin + keep
            if gap < d_ahead:
                d_ahead, ux, uy = gap, gx, gy
                closing = _maximum(closing, 1.0)
                apart = apart or gap > DENOMINATOR_EPS
        near = apart and d_ahead < reach
        weight = p.v_safe * _minimum(1.0, 1.0 - d_ahead / reach) if near else 0.0
        pushed = weight
        if near and others_radius is not None:  # the bound of what a disc adds (arrays')
            point = _maximum(p.v_safe * _minimum(1.0, 1.0 - (d_ahead + margin) / reach), 0.0)
            pushed = _minimum(weight, point + p.v_uncertain)
        units.append((ux, uy))
        weights.append(weight)
        pushes.append(pushed)
        closings.append(closing)
        if near:
            near_rows.append(len(units) - 1)
    push = np.sum(np.array(units) * np.array(pushes)[:, None], axis=-2).tolist()
    norm = _hypot(push[0], push[1])
    scale = p.v_safe / (norm if norm > 0.0 else 1.0) if norm > p.v_safe else 1.0
    px, py = push[0] * scale, push[1] * scale
    if law is None:
        return np.array((px, py))
    lawx, lawy = law
    yields = [_minimum(1.0, SEPARATION_YIELD * w / p.v_safe) for w in weights]
    closing_yields = [y if c > 0.0 else 0.0 for y, c in zip(yields, closings)]
    px, py = _take_out_one(px, py, units, closing_yields, near_rows)
    kx, ky = _take_out_one(lawx, lawy, units, yields, near_rows)
    result = np.array(((px + kx) - lawx, (py + ky) - lawy))
    return (result, np.array((kx, ky))) if kept else result


def uncertainty_discs(uncertainty, silent_for, usable, params: ControllerParams):
    """
    Return the radius [m] (..., M) each other vehicle counts with in the ``d_safe`` term.

    Its broadcast ``uncertainty`` (..., M), grown at ``hold_drift`` for ``silent_for`` (..., M)
    seconds (how long its position has not been known: 0 while it is heard), and at most
    ``usable`` (..., one per agent: :meth:`ControllerParams.usable_uncertainty` of its ring):
    a wider disc gives no direction, and the vehicle's last trusted position counts instead
    (:func:`silent_obstacles`' ``trusted``).
    """
    grown = (np.asarray(uncertainty, dtype=float)
             + params.hold_drift * np.asarray(silent_for, dtype=float))
    return np.minimum(grown, np.asarray(usable, dtype=float)[..., None])


def _silent_way(position, velocity, age, params: ControllerParams):
    """
    Return the way a vehicle last heard ``age`` s ago may have gone: (along, s1, s2).

    Last heard at ``position`` (..., 3) flying ``velocity`` (..., 3), a vehicle whose agent
    fell silent flies on at that velocity for at most ``silent_run_on`` (its bridge's or
    mobility node's ``cmd_timeout``), then brakes to a hover; one whose agent failed or went
    blind brakes at once (its zero command). Braking is one constant deceleration over
    :func:`stopping_distance` (``t_safe`` lag, ``a_safe`` braking). The vehicle is on its way
    between the two, horizontally: from ``s1`` (...) to ``s2`` (...) metres along the unit
    vector ``along`` (..., 2) of its last velocity (0 at rest).
    """
    v = np.asarray(velocity, dtype=float)[..., :2]
    v = np.where(np.isfinite(v), v, 0.0)
    speed = np.hypot(v[..., 0], v[..., 1])
    moving = speed > 0.0
    tau = np.maximum(np.where(np.isfinite(age), np.asarray(age, dtype=float), 0.0), 0.0)
    stop = stopping_distance(speed, params.t_safe, params.a_safe)
    with np.errstate(invalid='ignore', divide='ignore'):
        along = np.where(moving[..., None], v / np.where(moving, speed, 1.0)[..., None], 0.0)
        t_stop = np.where(moving, 2.0 * stop / np.where(moving, speed, 1.0), 0.0)
        decel = np.where(t_stop > 0.0, speed / np.where(t_stop > 0.0, t_stop, 1.0), 0.0)
    at_once = np.minimum(tau, t_stop)            # braked from the start
    s1 = speed * at_once - 0.5 * decel * at_once * at_once
    run_on = np.minimum(tau, params.silent_run_on)  # flew on, then braked
    braked = np.minimum(np.maximum(tau - params.silent_run_on, 0.0), t_stop)
    s2 = speed * run_on + speed * braked - 0.5 * decel * braked * braked
    return along, s1, s2


def silent_track(position, velocity, age, params: ControllerParams):
    """
    Return where a vehicle last heard ``age`` s ago may be: (position, half-width).

    Somewhere on its way (braking at once or flying on for ``silent_run_on`` first, see
    :func:`_silent_way`): the result is the way's midpoint (..., 3), give or take half its
    length (..., 0 at rest). A vehicle last heard at rest is where it was. This bounds what
    is within reach of it; the ``d_safe`` term counts the point of the way nearest each agent
    (:func:`silent_nearest`).
    """
    position = np.asarray(position, dtype=float)
    along, s1, s2 = _silent_way(position, velocity, age, params)
    middle = 0.5 * (s1 + s2)
    where = position.copy()
    where[..., :2] = position[..., :2] + along * middle[..., None]
    return where, 0.5 * (s2 - s1)


def silent_nearest(position, velocity, age, own_position, params: ControllerParams):
    """
    Return the point of a silent vehicle's way nearest an agent (..., 3), at its height.

    The way is :func:`silent_track`'s; ``own_position`` broadcasts against ``position`` (an
    agent's (..., 3) against its columns' (..., M, 3): pass ``own[..., None, :]``). Counted at
    rest there, the vehicle pushes the agent away from wherever on its way it may be. Counted
    at the way's midpoint with a disc half the way wide, an agent within that disc was pushed
    away from the midpoint: straight at the vehicle when it had braked at once (seen: a
    neighbour that flew with the one that fell silent came within 0.65 m of its vehicle).
    """
    position = np.asarray(position, dtype=float)
    own = np.asarray(own_position, dtype=float)
    along, s1, s2 = _silent_way(position, velocity, age, params)
    ahead = ((own[..., 0] - position[..., 0]) * along[..., 0]
             + (own[..., 1] - position[..., 1]) * along[..., 1])
    s = np.minimum(np.maximum(np.where(np.isfinite(ahead), ahead, s1), s1), s2)
    shape = np.broadcast_shapes(position.shape, s.shape + (3,))
    where = np.array(np.broadcast_to(position, shape))
    where[..., :2] = position[..., :2] + along * s[..., None]
    return where


def silent_obstacles(live, silent, position, velocity, age, presence=None,
                     params: Optional[ControllerParams] = None, radius=None, trusted=None,
                     landed=None, *, own_position) -> dict:
    """
    Return the inputs of the ``d_safe`` term, neighbours that fell silent among them.

    ``live``/``silent`` (..., M) mark the other agents heard now and those heard before but no
    longer (they stay obstacles until heard again, or their landing is: ``landed``);
    ``position``/``velocity`` (..., M, 3) and ``age`` (..., M) their last states. A live one
    counts where it is (carried forward by the term); a silent one at rest on the way
    :func:`silent_track` gives it (flying on, then braking to a hover; then held where it
    stopped: a failed agent commands zero once, a blind one holds, a dead one's vehicle holds
    on its bridge's timeout, PX4 lands it after ``land_after``), at the point of that way
    nearest the agent at ``own_position`` (..., 3; :func:`silent_nearest`). At rest: one
    closing on it brakes for all its own speed (with the track's mean velocity, a follower
    braked as if the one ahead were still moving away, and came within 0.75 m of it after it
    failed, its presence lost on a link of loss 0.2).
    Rows neither live nor silent, or ``landed`` (..., M; None: none), are NaN (not counted).

    ``presence`` (..., M) marks those whose last broadcast was a presence: a failed agent's
    vehicle, braking to a hover on its last zero command. Each also counts at rest where it
    will stop (:func:`stopping_offset` ahead of it, with ``params``' ``t_safe`` as the vehicle's
    lag and ``a_safe`` as its braking), as M more columns: carried forward along its velocity
    alone, a vehicle that brakes as hard as the one behind it looks as if it were not closing.

    ``radius`` (..., M): their discs (:func:`uncertainty_discs`; None: none), the rest points'
    too. ``trusted``: None, or (position (..., M, 3), velocity (..., M, 3), age (..., M),
    radius (..., M), used (..., M)) of each vehicle's last trusted state: where ``used`` (its
    broadcast is wider than ``d_safe`` or the usable size) it counts at rest on the way
    :func:`silent_track` gives it from there (as a silent one), as a disc too, as M more
    columns.
    """
    live = np.asarray(live, dtype=bool)
    silent = np.asarray(silent, dtype=bool) & ~live
    if landed is not None:
        live = live & ~np.asarray(landed, dtype=bool)
        silent = silent & ~np.asarray(landed, dtype=bool)
    shown = (live | silent)[..., None]
    where = position
    own = np.asarray(own_position, dtype=float)[..., None, :]  # against the columns
    if silent.any():
        track = silent_nearest(position, velocity, age, own, params)
        if np.any(silent[..., None] & (track != position)):
            where = np.where(silent[..., None], track, position)
    out = {'others_position': np.where(shown, where, np.nan),
           'others_velocity': np.where(live[..., None], velocity, np.where(shown, 0.0, np.nan)),
           'others_age': np.where(live, np.broadcast_to(age, live.shape), 0.0)}
    if radius is not None:
        out['others_radius'] = np.broadcast_to(np.asarray(radius, dtype=float), live.shape)
    columns = [out]
    if presence is not None:
        stops = shown & np.asarray(presence, dtype=bool)[..., None]
        rest = np.where(stops, np.asarray(position, dtype=float)
                        + stopping_offset(velocity, params.t_safe, params.a_safe), np.nan)
        columns.append(_columns(rest, rest * 0.0, out.get('others_radius')))
    if trusted is not None:
        at, moved, since, disc, used = trusted
        used = shown[..., 0] & np.asarray(used, dtype=bool)
        track = silent_nearest(at, moved, since, own, params)
        disc = np.broadcast_to(np.asarray(disc, dtype=float), live.shape)
        points = np.where(used[..., None], track, np.nan)
        columns.append(_columns(points, points * 0.0, None if radius is None else disc))
    if len(columns) == 1:
        return out
    both = {name: np.concatenate([c[name] for c in columns], axis=-2 if name != 'others_age'
                                 else -1)
            for name in ('others_position', 'others_velocity', 'others_age')}
    if radius is not None:
        both['others_radius'] = np.concatenate([c['others_radius'] for c in columns], axis=-1)
    return both


def _columns(points, velocity, radius) -> dict:
    """Columns of obstacles at ``points`` (..., M, 3; NaN: none) flying ``velocity``."""
    out = {'others_position': points, 'others_velocity': velocity,
           'others_age': np.zeros(points.shape[:-1])}
    if radius is not None:
        out['others_radius'] = radius
    return out


def silent_obstacles_within_reach(own_position, own_velocity, d_safe, live, silent, position,
                                  velocity, age, presence, params: ControllerParams,
                                  radius=None, trusted=None, landed=None,
                                  own_radius=0.0) -> dict:
    """
    :func:`silent_obstacles` of many agents at once, each with its vehicles within reach only.

    ``own_position``/``own_velocity`` (..., 3) the agents', ``d_safe`` (...) the distance each
    flies, the rest as for :func:`silent_obstacles` (``radius`` the discs, None: points;
    ``own_radius`` (...) the agents' own). The columns (..., M) are first cut to each agent's
    vehicles, heard or silent (where :func:`silent_track` puts it), within
    :func:`obstacle_reach` of their speed and the discs, and every vehicle whose trusted
    position counts, in their order, then columns of none (K the most any agent keeps): the
    rows the agent node's ``controller.obstacle_rows`` gives it, a presence's rest point and a
    trusted position with its vehicle. The others add exactly nothing to the term. Up to
    ``WITHIN_REACH_COLUMNS`` columns in all, every vehicle; with no vehicle within reach of any
    agent, none (an empty dict: the term is zero, as the agent node's without rows).
    """
    live = np.asarray(live, dtype=bool)
    silent = np.asarray(silent, dtype=bool) & ~live
    if landed is not None:
        live = live & ~np.asarray(landed, dtype=bool)
        silent = silent & ~np.asarray(landed, dtype=bool)
    position = np.asarray(position, dtype=float)
    velocity = np.asarray(velocity, dtype=float)
    own = np.asarray(own_position, dtype=float)
    own_v = np.asarray(own_velocity, dtype=float)
    at, moving, disc = position, velocity, (0.0 if radius is None
                                            else np.asarray(radius, dtype=float))
    if silent.any():  # where each silent one may be by now (its speed bounds its rest point)
        track, half = silent_track(position, velocity, age, params)
        at = np.where(silent[..., None], track, position)
        disc = disc + np.where(silent, half, 0.0)
    bound = obstacle_reach(np.hypot(own_v[..., 0], own_v[..., 1])[..., None],
                           np.hypot(moving[..., 0], moving[..., 1]), disc, params,
                           np.asarray(own_radius, dtype=float)[..., None],
                           np.asarray(d_safe, dtype=float)[..., None])
    distance = np.hypot(at[..., 0] - own[..., None, 0], at[..., 1] - own[..., None, 1])
    keep = (live | silent) & ~(distance >= bound)  # NaN: within reach
    if trusted is not None:
        keep = keep | ((live | silent) & np.asarray(trusted[4], dtype=bool))
    if not keep.any():  # no agent has a vehicle within reach: the term adds nothing
        return {}
    columns = 2 + (trusted is not None)
    if columns * live.shape[-1] <= WITHIN_REACH_COLUMNS:
        return silent_obstacles(live, silent, position, velocity, age, presence, params,
                                radius, trusted, own_position=own)
    gather = _gatherer(keep)
    kept_trusted = None
    if trusted is not None:
        kept_trusted = (gather(trusted[0], np.nan, (3,)), gather(trusted[1], np.nan, (3,)),
                        gather(np.asarray(trusted[2], dtype=float), 0.0),
                        gather(np.asarray(trusted[3], dtype=float), 0.0),
                        gather(np.asarray(trusted[4], dtype=bool), False))
    return silent_obstacles(gather(live, False), gather(silent, False),
                            gather(position, np.nan, (3,)), gather(velocity, np.nan, (3,)),
                            gather(np.asarray(age, dtype=float), 0.0),
                            None if presence is None
                            else gather(np.asarray(presence, dtype=bool), False), params,
                            None if radius is None else gather(np.asarray(radius, dtype=float),
                                                               0.0),
                            kept_trusted, own_position=own)


def stopping_distance(speed, lag: float, braking: float):
    """
    Return how far a vehicle at horizontal ``speed`` (a number or an array) goes on a zero command.

    A first-order lag ``lag`` [s] whose deceleration is bounded to ``braking`` [m/s^2] (0:
    unbounded) stops from speed v in ``v lag`` while ``v/lag <= braking``, else in
    ``(v^2 - (braking lag)^2) / (2 braking) + braking lag^2``: it grows with the speed.
    """
    knee = braking * lag
    distance = speed * lag
    if isinstance(speed, float):  # one vehicle: the same value without arrays
        if braking > 0.0 and speed > knee:
            return (speed * speed - knee * knee) / (2.0 * braking) + knee * lag
        return distance
    if braking > 0.0:
        distance = np.where(speed > knee,
                            (speed * speed - knee * knee) / (2.0 * braking) + knee * lag,
                            distance)
    return distance


def stopping_offset(velocity, lag: float, braking: float):
    """
    Return (..., 3) how far a vehicle flying ``velocity`` (..., 3) goes on a zero command.

    Horizontally, along its velocity, :func:`stopping_distance` of its horizontal speed.
    """
    v = np.asarray(velocity, dtype=float)
    xy = np.where(np.isfinite(v[..., :2]), v[..., :2], 0.0)
    speed = np.hypot(xy[..., 0], xy[..., 1])
    distance = stopping_distance(speed, lag, braking)
    with np.errstate(invalid='ignore', divide='ignore'):
        along = np.where(speed[..., None] > 0.0, xy / np.where(speed > 0.0, speed, 1.0)[..., None],
                         0.0)
    return np.concatenate((along * distance[..., None], np.zeros(speed.shape + (1,))), axis=-1)


def compose_command(v_rad, v_tau, target_velocity, position, params: ControllerParams,
                    v_sep=0.0):
    """
    Compose ``v_cmd = v_rad + v_tau + v_T + v_sep``.

    It falls back to v_T if non-finite and is clamped to the limits. ``v_sep`` is
    :func:`separation_velocity` (0 without a safety distance).

    The vertical part is :func:`vertical_velocity` of the agent's own ``position``.
    """
    v_t = with_vertical(target_velocity, position, params)
    xy = np.asarray(v_rad) + np.asarray(v_tau) + v_t[..., :2] + np.asarray(v_sep)
    cmd = np.concatenate((xy, v_t[..., 2:3]), axis=-1)
    cmd = np.where(np.all(np.isfinite(cmd), axis=-1, keepdims=True), cmd, v_t)
    return clamp_velocity(cmd, params.max_speed_xy, params.max_speed_z)


def fallback_command(target_velocity, target_age, position, params: ControllerParams):
    """
    Command without a live target (clamped).

    Up to ``target_timeout`` since the target was last heard (``target_age``, inf if never):
    the last known target velocity (zero if none), with altitude hold. Past it: zero (hold).
    """
    v_t = np.asarray(target_velocity, dtype=float)
    v_t = np.where(np.all(np.isfinite(v_t), axis=-1, keepdims=True), v_t, 0.0)
    v_t = with_vertical(v_t, position, params)
    lost = np.asarray(target_age, dtype=float) > params.target_timeout
    v_t = np.where(lost[..., None], 0.0, v_t)
    return clamp_velocity(v_t, params.max_speed_xy, params.max_speed_z)


def ring_gain_share(r, params: ControllerParams, crowd=False, ring_size=0):
    """
    Return how far (0 to 1) the ring's gains replace the crowd's at distance ``r`` [m].

    0 within ``ring_gains_from`` x R of the target, 1 from ``ring_gains_full`` x R, linear
    between (:meth:`ControllerParams.ring_gains`); 0 wherever ``crowd`` (:func:`crowded`: a
    vehicle the agent counts nearer than its ``d_safe``). The ring's gains re-space a formed
    ring, spaced wider than ``d_safe``; among vehicles that near, at a crowded start or past a
    vehicle on its path, their stronger pull along the ring carried agents into each other
    (0.58 ``d_safe`` once apart from a line start), where the crowd's gains keep clear.
    Times :func:`ring_size_share` of the ``ring_size`` heard. Elementwise; floats in, a float
    out.
    """
    low, full = params.ring_gains_from, params.ring_gains_full
    share = (r / params.radius - low) / (full - low)
    fade = ring_size_share(ring_size, params)
    if isinstance(share, float):
        return 0.0 if crowd else min(max(share, 0.0), 1.0) * fade
    return np.where(crowd, 0.0, np.clip(share, 0.0, 1.0) * fade)


def ring_size_share(ring_size, params: ControllerParams):
    """
    Return how far (0 to 1) the ring's gains may apply in a ring of ``ring_size`` heard.

    1 while the ring's spacing stiffness per tick, ``k_tau_ring k_e_tau_ring ring_size P``, is
    at most :data:`RING_STIFFNESS_WHOLE`, 0 from :data:`RING_STIFFNESS_NONE`, linear between:
    a large ring at a long control period keeps the crowd's gains, which its explicit step
    holds. Elementwise (an int gives a float).
    """
    stiffness = (params.k_tau_ring * params.k_e_tau_ring * params.control_period) * ring_size
    fade = (RING_STIFFNESS_NONE - stiffness) / (RING_STIFFNESS_NONE - RING_STIFFNESS_WHOLE)
    if np.ndim(fade) == 0:
        return min(max(float(fade), 0.0), 1.0)
    return np.clip(fade, 0.0, 1.0)


def _blend(crowd, ring, share):
    """``crowd`` where ``share`` is 0, ``ring`` where it is 1, the straight line between."""
    if isinstance(share, float):
        return crowd if share <= 0.0 else ring if share >= 1.0 else crowd + share * (ring - crowd)
    return np.where(share <= 0.0, crowd,
                    np.where(share >= 1.0, ring, crowd + share * (ring - crowd)))


def encirclement_step(u, position, velocity, prev_cmd, target_position, target_velocity,
                      omega_ref, theta_self, pred, succ, lambda_pred, lambda_self,
                      params: ControllerParams, crowd=False, **terms):
    """
    Return steps 4-9 of the control loop once the neighbours are chosen: (u_new, u_ss, v_cmd).

    :func:`step_at_gains` with ``params``; with ``ring_gains_from`` set, that step and the same
    step with the ring's gains (:meth:`ControllerParams.ring_gains`) blended by
    :func:`ring_gain_share` of the agent's distance from the target and ``crowd`` (...): the
    law of the gains in place wherever the share is 0 or 1, and only that one computed where
    every row's is.
    """
    args = (u, position, velocity, prev_cmd, target_position, target_velocity, omega_ref,
            theta_self, pred, succ, lambda_pred, lambda_self)
    if not params.ring_gains_from:
        return step_at_gains(*args, params, **terms)
    share = ring_gain_share(polar_frame(position, target_position)[0], params, crowd,
                            terms.get('ring_size', 0))
    if np.all(share <= 0.0):
        return step_at_gains(*args, params, **terms)
    ring = step_at_gains(*args, params.ring_gains(), **terms)
    if np.all(share >= 1.0):
        return ring
    crowd = step_at_gains(*args, params, **terms)
    return (_blend(crowd[0], ring[0], share), _blend(crowd[1], ring[1], share),
            _blend(crowd[2], ring[2], np.asarray(share)[..., None]))


def step_at_gains(u, position, velocity, prev_cmd, target_position, target_velocity,
                  omega_ref, theta_self, pred, succ, lambda_pred, lambda_self,
                  params: ControllerParams, others_position=None, others_velocity=None,
                  ring_size=0, own_id=None, others_age=None, others_radius=None,
                  own_radius=0.0, target_acceleration=None, ring_offset=0.0,
                  ring_obstacles=None, separation=None):
    """
    Return steps 4-9 of the control loop once the neighbours are chosen, at ``params``' gains.

    Returns (u_new, u_ss, v_cmd).

    ``pred``/``succ`` are :class:`NeighbourView` of the chosen neighbours (NaN angle/position
    and zero ``u`` when missing). ``others_position``/``others_velocity`` (..., M, 3): the
    states of every other live agent heard, for the ``d_safe`` repulsion (None: none), sent
    ``others_age`` (..., M) seconds ago, uncertain by ``others_radius`` (..., M; this agent by
    ``own_radius``: :func:`separation_velocity`);
    ``ring_size`` the number of agents heard, self included (:func:`omega_damping_gain`, and
    the ``d_safe`` flown: :meth:`ControllerParams.safety_distance`; 0: ``k_omega_damp`` alone
    and ``d_safe`` as set); ``own_id`` this agent's id, which with the neighbours' ids breaks
    exact ties of angle in ring order (:func:`gap_to_pred`); ``target_acceleration`` (..., 3)
    the target's, for the command's lead (:func:`target_lead`; None: none); ``ring_offset``
    (...) the agent's :func:`ring_offset`, which drives ``e_tau`` by ``k_e_ring`` x it (0: the
    neighbours' spacing alone); ``ring_obstacles`` (..., K, 3) the known obstacles the ring's
    radius bulges round (:func:`ring_radius`; None: none); ``separation`` a function with the
    arguments and values of :func:`separation_velocity` that computes the ``d_safe`` term
    instead (None: that one; the vectorised engine passes its compiled copy,
    ``core.kernels_wide``). Elementwise over agents: one agent's result depends only on its
    own row.
    """
    lead = target_lead(target_velocity, target_acceleration, params)
    r, e_r_hat, t_hat = polar_frame(position, target_position)
    v_rad = radial_velocity(r, e_r_hat, velocity, target_velocity, params, ring_radius(
        position, velocity, target_position, target_velocity, ring_obstacles, params))
    gap_pred = gap_to_pred(theta_self, pred.theta, own_id, pred.agent_id)
    gap_succ = gap_to_succ(theta_self, succ.theta, own_id, succ.agent_id)
    e_tau = spacing_error(gap_pred, gap_succ, lambda_pred, lambda_self)
    if params.k_e_ring:
        e_tau = e_tau + params.k_e_ring * np.asarray(ring_offset, dtype=float)
    rel_cmd = np.asarray(prev_cmd, dtype=float)[..., :2] - lead[..., :2]
    omega_self = np.sum(rel_cmd * t_hat, axis=-1) / effective_radius(r, params)
    gain = omega_damping_gain(ring_size, params)
    e_tau_eff = damped_spacing_error(
        e_tau, omega_self,
        angular_rate(pred.position, pred.velocity, target_position, target_velocity),
        angular_rate(succ.position, succ.velocity, target_position, target_velocity), gain)
    if params.k_omega_own:
        rel_v = (np.asarray(velocity, dtype=float)[..., :2]
                 - np.asarray(target_velocity, dtype=float)[..., :2])
        omega_own = np.sum(rel_v * t_hat, axis=-1) / effective_radius(r, params)
        e_tau_eff = own_rate_damping(e_tau_eff, omega_own, omega_ref, params.k_omega_own)
    u_new, u_ss = soliton_update(u, pred.u, succ.u, pred.u_ss, succ.u_ss, e_tau_eff, params,
                                 implicit_decay(gain, params))
    free = u_new
    u_new = turn_capped(u_new, r, params)
    v_tau = tangential_velocity(u_new, r, t_hat, omega_ref, params)
    separation = separation or separation_velocity
    d_safe = params.safety_distance(ring_size)

    def term(v_law):  # the d_safe term on the command as flown (flyable_command, slide)
        v_fly = flyable_command(v_law, params)
        v_sep, v_kept = separation(position, velocity, others_position, others_velocity,
                                   params, v_fly, others_age, others_radius, own_radius, d_safe,
                                   kept=True)
        acts = np.any(v_sep != 0.0, axis=-1, keepdims=True)
        v_slide, slides = slide(v_law, v_kept, acts[..., 0], params)
        v_sep = np.where(acts, v_sep + (v_fly - v_law), v_sep)
        if np.any(slides):
            v_sep_slide = separation(position, velocity, others_position, others_velocity,
                                     params, v_slide, others_age, others_radius, own_radius,
                                     d_safe, slide=True)
            v_sep = np.where(slides[..., None], v_sep_slide + (v_slide - v_law), v_sep)
        return v_sep

    v_sep = term(v_rad + v_tau + lead[..., :2])
    held = u_new != free
    if np.any(held):  # where the d_safe term acts on the unheld command, that is flown
        v_tau_free = tangential_velocity(free, r, t_hat, omega_ref, params)
        v_sep_free = term(v_rad + v_tau_free + lead[..., :2])
        released = held & turn_released(v_sep_free, params)
        u_new = np.where(released, free, u_new)
        v_tau = np.where(released[..., None], v_tau_free, v_tau)
        v_sep = np.where(released[..., None], v_sep_free, v_sep)
    return u_new, u_ss, compose_command(v_rad, v_tau, lead, position, params, v_sep)


def flyable_command(v_law, params: ControllerParams):
    """
    Return the law's horizontal command ``v_law`` (..., 2) scaled to ``max_speed_xy``.

    What the ``d_safe`` term (:func:`separation_velocity`) takes the approach out of: the
    command the vehicle can fly, as :func:`compose_command` clamps it. A law wound up far past
    it (``k_tau u r`` 70 m/s along the ring at a crowded start) kept, once the approach to one
    vehicle had been taken out, a part toward another that the proportional take-out left
    several m/s of (0.79 m between two agents, of 2 m flown). Within ``max_speed_xy`` it is
    ``v_law`` exactly. Where the term acts, the law composes the flyable command with it
    (:func:`encirclement_step`: the term plus ``v_fly - v_law``); elsewhere the command is
    clamped as before.
    """
    v = np.asarray(v_law, dtype=float)
    return v * xy_scale(v, params.max_speed_xy)[..., None]


def slide(v_law, v_kept, acts, params: ControllerParams):
    """
    Return (the command the ``d_safe`` term acts on again (..., 2), where it does (...)).

    Where the law asks more than ``max_speed_xy`` (``v_law`` (..., 2)) and the term acts
    (``acts``) on its :func:`flyable_command`, what the term keeps of that command (``v_kept``:
    its approach to each vehicle near taken out, no push added; ``separation_velocity``'s
    ``kept``) at ``max_speed_xy``, in its own direction, but at most ``SLIDE_GAIN`` times as
    fast as what is kept; the term then acts on that, a command
    the vehicle can fly like any other, so the rule holds on it as it does on every command,
    and its push counts once. What is kept of a command at the speed limit is a slow slide
    past the vehicle it approached: an agent passing a failed vehicle hovering on the ring's
    path lagged behind its slot (the hovering-obstacle family). The law asked for the speed
    limit or more; the slide flies at it, along the way the term keeps. The term's second pass
    counts that way at the slide's speed (:func:`_heading`), over the vehicles within reach at
    the agent's own speed (:func:`_within_own_reach`): a slide faster than the vehicle flies
    now keeps its following distance at the speed it will fly (its look-ahead at its own speed
    let an agent behind a failed vehicle braking to a hover close to 0.53 ``d_safe``). Straight
    at a vehicle from rest it backs off, where the single pass flew at it. The gain is bounded:
    where little is kept (a crowd's take-outs nearly balance the law), the way of what is left
    turns with the agent's velocity, and flown at the limit it made the command chatter. A
    boxed-in agent 0.14 m/s faster had its 2.4 m/s remainder turned by 60 degrees, the slide
    swung its 10 m/s command round each tick, and the vehicle, which cannot follow a command
    that alternates every tick, drifted on into another for 1.5 s (0.503 ``d_safe`` in the
    separation grid over six seeds; 0.893 at twice what is kept). Elsewhere (the law
    within the limit, nothing kept, what is kept heading back against the law's way, the term
    not acting, a non-finite command) the command is as the single pass leaves it.
    """
    v_law = np.asarray(v_law, dtype=float)
    v_kept = np.asarray(v_kept, dtype=float)
    asked = np.hypot(v_law[..., 0], v_law[..., 1])
    left = np.hypot(v_kept[..., 0], v_kept[..., 1])
    along = v_kept[..., 0] * v_law[..., 0] + v_kept[..., 1] * v_law[..., 1]
    slides = acts & (asked > params.max_speed_xy) & (left > DENOMINATOR_EPS) & (along > 0.0)
    with np.errstate(invalid='ignore', divide='ignore', over='ignore'):
        gain = np.minimum(params.max_speed_xy / np.where(slides, left, 1.0), SLIDE_GAIN)
        v_slide = v_kept * gain[..., None]
    return v_slide, slides


def turn_released(v_sep, params: ControllerParams):
    """
    Return where ``u`` flies unheld by :func:`turn_capped` (...): where the ``d_safe`` term acts.

    The hold keeps a ring that re-spaces in the open on its circle. An agent that the
    ``d_safe`` term pushes on its unheld command (``v_sep`` (..., 2), the term on that command,
    not zero: it steers round another vehicle, a failed one hovering on the ring's path, say)
    flies that command, its term included: held, it lingers beside the vehicle and its
    neighbours bunch behind it (the hovering-obstacle family on the stability page).
    Elsewhere it flies the held command with the term on it. Either way the term is the one
    on the command flown. (Releasing where the term acts on the held command, then flying the
    unheld one, can fly it with no term at all: an unheld heading the term does not count.)
    False everywhere without the hold (``ring_turn_acc`` or ``k_tau`` 0).
    """
    if not (params.ring_turn_acc and params.k_tau):
        return np.zeros(np.shape(v_sep)[:-1], dtype=bool)
    return np.any(np.asarray(v_sep) != 0.0, axis=-1)


def target_lead(target_velocity, target_acceleration, params: ControllerParams):
    """
    Return the target's velocity ``target_lead`` s ahead (..., 3): what the commands follow.

    A vehicle's velocity follows its command about ``target_lead`` late (its velocity time
    constant). Commanded the target's velocity, it keeps pace with a target that turns or
    speeds up ``target_lead`` x its acceleration too slowly: the whole ring falls behind on the
    outside of the turn, and the angles seen from the target are uneven for as long as it
    turns (E_gap 0.17 on a 30 m circle at 5 m/s). Commanded the velocity that far ahead
    (horizontally), the vehicles fly the target's velocity now; so the measured velocities
    (radial speed, the neighbours' angular rates) are still taken relative to the target's
    velocity, and only the command's own angular rate relative to the lead.
    ``target_acceleration`` None or ``target_lead`` 0: the target's velocity.
    """
    velocity = np.asarray(target_velocity, dtype=float)
    if target_acceleration is None or not params.target_lead:
        return velocity
    step = params.target_lead * np.asarray(target_acceleration, dtype=float)[..., :2]
    lead = np.array(np.broadcast_to(velocity, np.broadcast_shapes(
        velocity.shape, step.shape[:-1] + (3,))))
    lead[..., :2] += np.where(np.isfinite(step), step, 0.0)
    return lead


def encirclement_step_one(u, position, velocity, prev_cmd, target_position, target_velocity,
                          omega_ref, theta_self, pred, succ, lambda_pred, lambda_self,
                          params: ControllerParams, crowd=False, **terms):
    """
    :func:`encirclement_step` for one agent, in Python floats: (u_new, u_ss, v_cmd).

    :func:`step_at_gains_one`, blended with the ring's gains as :func:`encirclement_step` blends.
    """
    args = (u, position, velocity, prev_cmd, target_position, target_velocity, omega_ref,
            theta_self, pred, succ, lambda_pred, lambda_self)
    if not params.ring_gains_from:
        return step_at_gains_one(*args, params, **terms)
    share = ring_gain_share(_hypot(position[0] - target_position[0],
                                   position[1] - target_position[1]), params, crowd,
                            terms.get('ring_size', 0))
    if share <= 0.0:
        return step_at_gains_one(*args, params, **terms)
    ring = step_at_gains_one(*args, params.ring_gains(), **terms)
    if share >= 1.0:
        return ring
    crowd = step_at_gains_one(*args, params, **terms)
    return (_blend(crowd[0], ring[0], share), _blend(crowd[1], ring[1], share),
            tuple(_blend(c, g, share) for c, g in zip(crowd[2], ring[2])))


def step_at_gains_one(u, position, velocity, prev_cmd, target_position, target_velocity,
                      omega_ref, theta_self, pred, succ, lambda_pred, lambda_self,
                      params: ControllerParams, ring_size=0, own_id=None,
                      target_acceleration=None, others_position=None,
                      others_velocity=None, others_age=None, others_radius=None,
                      own_radius=0.0, ring_offset=0.0, ring_obstacles=None):
    """
    :func:`step_at_gains` for one agent, in Python floats.

    The same operations in the same order (so the same bits) as the array version, at a
    fraction of its cost: the per-agent controller's path. The vectors are sequences of 3
    finite floats, ``pred``/``succ`` :class:`NeighbourView` with float fields (NaN angle and
    position when missing). The ``d_safe`` term (``others_*``, ``own_radius``: the vehicles
    within reach, as :func:`encirclement_step` takes them; None: none) is
    :func:`separation_velocity` itself, over arrays, and so is :func:`ring_radius`
    (``ring_obstacles``). The transcendental functions stay
    numpy's (``math``'s differ from them in the last bit), and a sum of two products is
    written ``a + (0.0 + b)`` as ``np.sum`` adds it (the sign of a zero). Returns (u_new,
    u_ss, v_cmd) with v_cmd a tuple of 3 floats.
    """
    p = params
    px, py, pz = position
    tx, ty = target_position[0], target_position[1]
    tvx, tvy, tvz = target_velocity
    lx, ly = tvx, tvy                                                   # target_lead
    if target_acceleration is not None and p.target_lead:
        sx, sy = p.target_lead * target_acceleration[0], p.target_lead * target_acceleration[1]
        lx = tvx + (sx if math.isfinite(sx) else 0.0)
        ly = tvy + (sy if math.isfinite(sy) else 0.0)
    rx, ry = px - tx, py - ty                                           # polar_frame
    r = _hypot(rx, ry)
    if r >= R_EPS:
        erx, ery = rx / r, ry / r
    else:
        erx = ery = 0.0
    thx, thy = -ery, erx
    v_r = (velocity[0] - tvx) * erx + (0.0 + (velocity[1] - tvy) * ery)  # radial_velocity
    held = p.radius                                                     # ring_radius
    if ring_obstacles is not None:
        held = float(ring_radius(position, velocity, target_position, target_velocity,
                                 ring_obstacles, p))
    v_r_corr = -p.k_r * (r - held) - p.k_dr * v_r
    radx, rady = v_r_corr * erx, v_r_corr * ery
    gap_pred = (theta_self - pred.theta) % TWO_PI                      # gap_to_pred/succ
    if gap_pred == 0.0 and own_id is not None and pred.agent_id > own_id:
        gap_pred = TWO_PI
    gap_succ = (succ.theta - theta_self) % TWO_PI
    if gap_succ == 0.0 and own_id is not None and succ.agent_id < own_id:
        gap_succ = TWO_PI
    num = lambda_pred * gap_succ - lambda_self * gap_pred               # spacing_error
    den = lambda_pred * gap_succ + lambda_self * gap_pred
    e_tau = 0.0
    if den > DENOMINATOR_EPS:
        e = num / den
        if math.isfinite(e):
            e_tau = e
    if p.k_e_ring:
        e_tau = e_tau + p.k_e_ring * ring_offset
    r_eff = r if not r < p.r_min else p.r_min                          # effective_radius
    omega_self = ((prev_cmd[0] - lx) * thx + (0.0 + (prev_cmd[1] - ly) * thy)) / r_eff
    gain = p.k_omega_damp + p.k_omega_damp_n * float(ring_size)        # omega_damping_gain
    if p.k_omega_damp_n and p.k_e_tau * p.k_tau > 0.0:
        cap = (DAMPING_DECAY_MAX - p.beta_u) / (p.k_e_tau * p.k_tau)
        gain = min(gain, max(cap, p.k_omega_damp))
    decay = 0.0                                                         # implicit_decay
    if p.k_e_tau * p.k_tau > 0.0:
        explicit = (EULER_DECAY_MAX / p.control_period - p.beta_u) / (p.k_e_tau * p.k_tau)
        explicit = explicit if explicit > p.k_omega_damp else p.k_omega_damp
        if gain > explicit:
            decay = p.k_e_tau * p.k_tau * (gain - explicit)
    e_eff = e_tau
    if gain != 0.0:
        o_pred = _angular_rate_one(pred, tx, ty, tvx, tvy)
        o_succ = _angular_rate_one(succ, tx, ty, tvx, tvy)
        if math.isfinite(o_pred):
            local = 0.5 * (o_pred + o_succ) if math.isfinite(o_succ) else o_pred
        else:
            local = o_succ
        damped = e_tau - gain * (omega_self - local)                 # damped_spacing_error
        if math.isfinite(damped):
            e_eff = damped
    if p.k_omega_own:                                                   # own_rate_damping
        omega_own = ((velocity[0] - tvx) * thx + (0.0 + (velocity[1] - tvy) * thy)) / r_eff
        damped = e_eff - p.k_omega_own * (omega_own - omega_ref)
        if math.isfinite(damped):
            e_eff = damped
    u_s = succ.u - pred.u                                               # soliton_update
    u_ss = succ.u - 2.0 * u + pred.u
    u_sss = succ.u_ss - pred.u_ss
    cube = float(u)
    g = cube * cube * cube                                              # limiter
    if p.soft_limiter:
        g = g / (1.0 + float(np.asarray(abs(u) / p.u_lim) ** 2))
    du = (p.c_coupling * u_s - p.beta_u * u - p.alpha_u * g + p.k_e_tau * e_eff
          + p.kappa_u_diff * u_ss - p.k_u_steepen * u * u_s + p.kappa_u_disp * u_sss)
    u_new = u + p.control_period * du / (1.0 + p.control_period * decay)
    if math.isfinite(u_new):
        cap = u_bound(p)
        u_new = _clip(u_new, -cap, cap)
    else:
        u_new = 0.0
    free = u_new
    if p.ring_turn_acc and p.k_tau:                                     # turn_capped
        bound = math.sqrt(p.ring_turn_acc / r_eff) / p.k_tau
        u_new = bound if u_new > bound else (-bound if u_new < -bound else u_new)
    vz = p.k_z * (p.altitude - pz) + tvz if p.altitude_hold else tvz   # compose_command
    flown = free  # unheld where the d_safe term acts on it, else held (turn_released)
    while True:
        speed = p.k_tau * flown * r_eff + omega_ref * r                # tangential_velocity
        x = radx + speed * thx + lx
        y = rady + speed * thy + ly
        sep_x = sep_y = 0.0
        if others_position is not None:
            scale = _xy_scale(x, y, p.max_speed_xy)                     # flyable_command
            fx, fy = x * scale, y * scale
            d_safe = p.safety_distance(ring_size)
            sep, kept = separation_velocity(
                (px, py, pz), velocity, others_position, others_velocity, p,
                np.array((fx, fy)), others_age, others_radius, own_radius, d_safe, kept=True)
            sep_x, sep_y = sep.tolist()
            if sep_x != 0.0 or sep_y != 0.0:
                leftx, lefty = kept.tolist()                            # slide
                left = _hypot(leftx, lefty)
                if (_hypot(x, y) > p.max_speed_xy and left > DENOMINATOR_EPS
                        and leftx * x + lefty * y > 0.0):
                    factor = min(p.max_speed_xy / left, SLIDE_GAIN)
                    slx, sly = leftx * factor, lefty * factor
                    sep_x, sep_y = separation_velocity(
                        (px, py, pz), velocity, others_position, others_velocity, p,
                        np.array((slx, sly)), others_age, others_radius, own_radius,
                        d_safe, slide=True).tolist()
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
    scale = _xy_scale(x, y, p.max_speed_xy)                             # saturate
    return u_new, u_ss, (x * scale, y * scale, _clip(vz, -p.max_speed_z, p.max_speed_z))


def _angular_rate_one(view, tx, ty, tvx, tvy):
    """:func:`geometry.angular_rate` of one neighbour view in floats (NaN when missing)."""
    rx, ry = view.position[0] - tx, view.position[1] - ty
    r2 = rx * rx + ry * ry
    cross = rx * (view.velocity[1] - tvy) - ry * (view.velocity[0] - tvx)
    return cross / r2 if r2 >= R_EPS ** 2 else math.nan


class NeighbourView(NamedTuple):
    """What the law uses of a chosen neighbour (rows of arrays in the vectorised case)."""

    theta: Any      # target-centric angle, NaN when there is no such neighbour
    position: Any   # (..., 3), NaN when missing
    velocity: Any   # (..., 3), NaN when missing
    u: Any          # 0 when missing
    u_ss: Any       # 0 when missing
    agent_id: Any = NO_NEIGHBOUR  # ties of angle are broken by id


MISSING_NEIGHBOUR = NeighbourView(np.nan, np.full(3, np.nan), np.full(3, np.nan), 0.0, 0.0)
