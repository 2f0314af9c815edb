"""The control law terms (core/law.py) against hand-computed values."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.geometry import polar_frame, wrap_2pi
from soliton_encirclement_ros.core.law import (
    clamp_velocity, compose_command, damped_spacing_error, DAMPING_DECAY_MAX,
    encirclement_step, encirclement_step_one, flyable_command, implicit_decay, limiter,
    NeighbourView, omega_damping_gain, own_rate_damping, radial_velocity, separation_velocity,
    soliton_update, spacing_error, tangential_velocity, turn_capped, u_bound)
from support.core_cases import ORIGIN, P


def test_radial_pd_hand_value():
    r, e_r, _ = polar_frame([22.0, 0.0, 0.0], ORIGIN)
    v = radial_velocity(r, e_r, [1.0, 3.0, 0.0], [0.5, 0.0, 0.0], P)
    # e = 2, v_r = 0.5 -> -1*2 - 0.5*0.5 = -2.25 along +x
    assert v == pytest.approx([-2.25, 0.0])


def test_spacing_error_four_agents_known_angles():
    # agents at 0, 1, 2.5, 4 rad: agent at 1 has gap_pred 1, gap_succ 1.5 -> e = 0.5/2.5
    theta = np.array([0.0, 1.0, 2.5, 4.0])
    gap_pred = wrap_2pi(theta - np.roll(theta, 1))
    gap_succ = wrap_2pi(np.roll(theta, -1) - theta)
    e = spacing_error(gap_pred, gap_succ)
    assert e == pytest.approx([(1 - (2 * math.pi - 4)) / (1 + 2 * math.pi - 4), 0.2, 0.0,
                               (2 * math.pi - 4 - 1.5) / (2 * math.pi - 4 + 1.5)])


def test_spacing_error_lambda_missing_and_degenerate():
    # l_pred = 2, l_self = 1, gaps 1 and 1 -> (2 - 1)/(2 + 1)
    assert spacing_error(1.0, 1.0, 2.0, 1.0) == pytest.approx(1 / 3)
    assert spacing_error(np.nan, 1.0) == 0.0
    assert spacing_error(0.0, 0.0) == 0.0
    assert spacing_error(np.inf, 1.0) == 0.0


def test_omega_damping_hand_value_and_fallbacks():
    assert damped_spacing_error(0.2, 0.3, 0.1, 0.3, 0.1) == pytest.approx(0.2 - 0.1 * 0.1)
    assert damped_spacing_error(0.2, 0.3, np.nan, 0.5, 0.1) == pytest.approx(0.2 + 0.02)
    assert damped_spacing_error(0.2, 0.3, np.nan, np.nan, 0.1) == 0.2
    assert damped_spacing_error(0.2, np.nan, 0.1, 0.1, 0.1) == 0.2
    assert damped_spacing_error(0.2, 0.3, 0.1, 0.3, 0.0) == 0.2


def test_own_rate_damping_hand_value_and_fallbacks():
    # e_eff 0.2, own rate 0.3 about a ring spinning at 0.1, gain 0.5 -> 0.2 - 0.5 * 0.2
    assert own_rate_damping(0.2, 0.3, 0.1, 0.5) == pytest.approx(0.1)
    assert own_rate_damping(0.2, np.nan, 0.1, 0.5) == 0.2
    assert own_rate_damping(0.2, 0.3, 0.1, 0.0) == 0.2
    assert own_rate_damping([0.2, 0.0], [0.1, -0.2], 0.0, 1.0) == pytest.approx([0.1, 0.2])


def test_u_update_core_form_and_kdv_terms():
    core = P.with_changes(kappa_u_diff=0.0, k_u_steepen=0.0, kappa_u_disp=0.0)
    u, u_ss = soliton_update(0.5, 0.2, 0.6, 0.0, 0.0, 0.1, core)
    du = 2.0 * 0.4 - 7.0 * 0.5 - 0.5 * 0.125 + 25.0 * 0.1
    assert u == pytest.approx(0.5 + 0.01 * du)
    assert u_ss == pytest.approx(0.6 - 1.0 + 0.2)
    full, _ = soliton_update(0.5, 0.2, 0.6, 0.3, -0.1, 0.1, P)
    du_full = du + 0.1 * (-0.2) - 0.3 * 0.5 * 0.4 + 0.05 * (-0.1 - 0.3)
    assert full == pytest.approx(0.5 + 0.01 * du_full)


def test_the_damping_a_period_cannot_take_explicitly_is_taken_implicitly():
    defaults = ControllerParams()
    sizes = np.arange(3, 401)
    # the gain is a law's: the same at every period, capped where damping and beta_u decay u
    # at DAMPING_DECAY_MAX
    gains = [omega_damping_gain(sizes, defaults.with_changes(control_period=period))
             for period in (0.01, 0.05, 0.1)]
    np.testing.assert_array_equal(gains[0], gains[1])
    np.testing.assert_array_equal(gains[0], gains[2])
    k = defaults.k_e_tau * defaults.k_tau
    assert gains[0].max() == pytest.approx((DAMPING_DECAY_MAX - defaults.beta_u) / k)
    # at 0.01 s the explicit step takes all of it; at 0.05 s what is above 1/P with beta_u
    assert not np.any(implicit_decay(gains[0], defaults))
    slow = defaults.with_changes(control_period=0.05)
    explicit = (1.0 / 0.05 - defaults.beta_u) / k
    np.testing.assert_allclose(implicit_decay(gains[0], slow),
                               k * np.maximum(gains[0] - explicit, 0.0))
    # k_omega_damp alone is always explicit (the reference preset's step is unchanged)
    assert implicit_decay(0.1, P.with_changes(k_omega_damp=0.1, control_period=0.5)) == 0.0
    # the step: u + P du / (1 + P decay)
    core = P.with_changes(kappa_u_diff=0.0, k_u_steepen=0.0, kappa_u_disp=0.0)
    du = 2.0 * 0.4 - 7.0 * 0.5 - 0.5 * 0.125 + 25.0 * 0.1
    u, _ = soliton_update(0.5, 0.2, 0.6, 0.0, 0.0, 0.1, core, decay=30.0)
    assert u == pytest.approx(0.5 + 0.01 * du / 1.3)


def _stiff_step(params, **others):
    """Return (step, float step) of one agent at (20, 0), u 1.5, neighbours 0.3 and 2 rad off."""
    position = (20.0, 0.0, 0.0)
    pred = NeighbourView(-0.3, (20.0 * np.cos(0.3), -20.0 * np.sin(0.3), 0.0), (0.0,) * 3,
                         0.0, 0.0, 1)
    succ = NeighbourView(2.0, (20.0 * np.cos(2.0), 20.0 * np.sin(2.0), 0.0), (0.0,) * 3,
                         0.0, 0.0, 2)
    u, _, cmd = encirclement_step(1.5, np.array(position), np.zeros(3), np.zeros(3),
                                  np.zeros(3), np.zeros(3), 0.0, 0.0, pred, succ, 1.0, 1.0,
                                  params, ring_size=3, own_id=0, **others)
    u1, _, cmd1 = encirclement_step_one(1.5, position, (0.0,) * 3, (0.0,) * 3, (0.0,) * 3,
                                        (0.0,) * 3, 0.0, 0.0, pred, succ, 1.0, 1.0, params,
                                        ring_size=3, own_id=0, **others)
    return (float(u), np.asarray(cmd)), (u1, cmd1)


def test_u_is_held_where_its_speed_along_the_ring_needs_more_than_ring_turn_acc():
    capped = P.with_changes(ring_turn_acc=3.2)  # sqrt(3.2 x 20) = 8 m/s at r 20 m: u 2 (k_tau .2)
    # below the bound, and with no bound: u as it is
    assert turn_capped(1.0, 20.0, capped) == 1.0
    assert turn_capped(5.0, 20.0, P) == 5.0
    # above it, either way round: held where k_tau u r_eff is sqrt(ring_turn_acc r_eff)
    assert turn_capped(5.0, 20.0, capped) == pytest.approx(2.0)
    assert turn_capped(-5.0, 20.0, capped) == pytest.approx(-2.0)
    _, _, t = polar_frame([20.0, 0.0, 0.0], ORIGIN)
    held = turn_capped(5.0, 20.0, capped)
    # omega_ref's share (the ring's spin) is not held
    assert tangential_velocity(held, 20.0, t, 0.1, capped) == pytest.approx([0.0, 8.0 + 2.0])
    # the bound is the circle's: at r_eff (r_min 1 m near the target) sqrt(3.2) m/s, elementwise
    near = turn_capped(np.array([20.0, 0.01]), np.array([0.5, 0.5]), capped)
    np.testing.assert_allclose(0.2 * near * 1.0, [np.sqrt(3.2), 0.2 * 0.01])
    # no bound without k_tau, and a NaN radius leaves u as it is
    assert turn_capped(5.0, 20.0, capped.with_changes(k_tau=0.0)) == 5.0
    assert turn_capped(5.0, np.nan, capped) == 5.0
    # the step holds u itself (it does not wind up past what is flown), the float path alike
    (u, cmd), (u1, cmd1) = _stiff_step(capped.with_changes(k_e_tau=1e4))
    assert u == pytest.approx(np.sqrt(3.2 / 20.0) / 0.2)
    assert cmd[1] == pytest.approx(8.0)
    assert u == u1 and tuple(cmd.tolist()) == tuple(cmd1)


def test_u_is_not_held_where_the_d_safe_term_pushes_the_agent():
    """Steering round another vehicle, an agent flies the spacing law unheld (turn_released)."""
    stiff = P.with_changes(ring_turn_acc=3.2, k_e_tau=1e4, d_safe=2.0)
    held = np.sqrt(3.2 / 20.0) / 0.2
    (unheld, _), _ = _stiff_step(stiff.with_changes(ring_turn_acc=0.0))
    assert unheld > 2.0 * held
    # a hovering vehicle 1.5 m outside the ring pushes: u unheld; 30 m away: held
    along = []
    for others, want in (([[21.5, 0.0, 0.0]], unheld), ([[50.0, 0.0, 0.0]], held)):
        (u, cmd), (u1, cmd1) = _stiff_step(stiff, others_position=np.array(others),
                                           others_velocity=np.zeros((1, 3)))
        assert u == pytest.approx(want)
        assert u == u1 and tuple(cmd.tolist()) == tuple(cmd1)
        along.append(float(cmd[1]))
    # pushed (radially here), the command flies the unheld speed along the ring (to the speed
    # limit); the far vehicle leaves it held at sqrt(3.2 x 20) = 8 m/s
    assert along[0] > 9.0 and along[1] == pytest.approx(8.0)


def test_d_safe_term_takes_the_approach_out_of_the_command_as_flown():
    """A law wound up past max_speed_xy keeps no more of its approach than one at it would."""
    wound = P.with_changes(k_tau=1.0, k_e_tau=1e4, d_safe=2.0)
    (u, cmd), _ = _stiff_step(wound)
    assert u == pytest.approx(u_bound(wound))  # k_tau u r: 157 m/s along the ring, flown at 10
    assert cmd[1] == pytest.approx(10.0)
    flown = np.array([0.0, wound.max_speed_xy])  # along the ring at the limit
    for ahead, along in ((1.9, 7.0), (1.8, 4.0), (1.7, 1.0), (1.5, -2.5)):
        # a hovering vehicle straight ahead on the ring, inside d_safe: of the 10 m/s flyable
        # approach 5 (1 - d/d_safe) goes, and it pushes back v_safe (1 - d/d_safe); of the law's
        # 157 m/s the same share left 10 m/s straight at it from 1.7 m out
        others = {'others_position': np.array([[20.0, ahead, 0.0]]),
                  'others_velocity': np.zeros((1, 3))}
        single = flown + separation_velocity(np.array([20.0, 0.0, 0.0]), np.zeros(3),
                                             v_law=flown, d_safe=2.0, params=wound, **others)
        assert single[0] == pytest.approx(0.0, abs=1e-9)
        assert single[1] == pytest.approx(along)
        # the law slides (law.slide): what is kept is flown at the limit, its way counted at
        # that speed from rest, so it keeps no more of the approach (here it backs off)
        (_, cmd), (_, cmd1) = _stiff_step(wound, **others)
        assert cmd[0] == pytest.approx(0.0, abs=1e-9)
        assert cmd[1] <= along + 1e-9
        assert tuple(cmd.tolist()) == tuple(cmd1)  # the float path alike, bit for bit
    # within max_speed_xy the command is the law's own, exactly
    v = np.array([[3.0, 4.0], [6.0, -8.0], [0.0, 0.0]])
    assert np.array_equal(flyable_command(v, P), v)
    np.testing.assert_allclose(flyable_command(np.array([30.0, 40.0]), P), [6.0, 8.0])


def test_a_law_past_max_speed_xy_slides_past_a_vehicle_beside_its_way():
    """
    Wound up, an agent flies round a hovering vehicle beside its way at more speed, not less.

    What the d_safe term keeps of the command as flown (its approach out, before the push) is
    flown at max_speed_xy and the term acts on that again (law.slide), its way counted at that
    speed: faster than the single pass, approaching the vehicle no faster, the float path alike
    bit for bit.
    """
    wound = P.with_changes(k_tau=1.0, k_e_tau=1e4, d_safe=2.0)
    for ox, oy in ((20.6, 1.8), (19.4, 1.8), (20.8, 1.6), (21.0, 1.0)):
        others = {'others_position': np.array([[ox, oy, 0.0]]),
                  'others_velocity': np.zeros((1, 3))}
        (_, cmd), (_, cmd1) = _stiff_step(wound, **others)
        assert tuple(cmd.tolist()) == tuple(cmd1)
        flown = np.array([0.0, wound.max_speed_xy])  # along the ring at the limit
        single = flown + separation_velocity(np.array([20.0, 0.0, 0.0]), np.zeros(3),
                                             v_law=flown, d_safe=2.0, params=wound, **others)
        toward = np.array([ox - 20.0, oy]) / math.hypot(ox - 20.0, oy)
        assert np.hypot(*cmd[:2]) > np.hypot(*single) + 0.05
        assert max(cmd[:2] @ toward, 0.0) <= max(single @ toward, 0.0)  # closing no faster
        assert np.hypot(*cmd[:2]) <= wound.max_speed_xy + 1e-9
        if (ox, oy) == (20.8, 1.6):  # 0.8 m outside its way, 1.6 m ahead (the docs' example)
            assert np.hypot(*single) == pytest.approx(5.48, abs=0.005)
            assert single @ toward == pytest.approx(3.17, abs=0.005)
            assert np.hypot(*cmd[:2]) == pytest.approx(7.59, abs=0.005)
            assert cmd[:2] @ toward == pytest.approx(2.19, abs=0.005)


def test_soft_limiter_and_non_finite_guard():
    soft = P.with_changes(soft_limiter=True)
    assert limiter(2.0, soft) == pytest.approx(8.0 / 2.0)
    assert limiter(2.0, P) == 8.0
    u, _ = soliton_update(1e300, 0.0, 0.0, 0.0, 0.0, 0.0, P)
    assert u == 0.0


def test_tangential_mapping_uses_r_eff_and_spin_reference():
    _, _, t = polar_frame([0.5, 0.0, 0.0], ORIGIN)
    v = tangential_velocity(1.0, 0.5, t, 0.0, P)
    assert v == pytest.approx([0.0, 0.2 * 1.0 * 1.0])  # r_eff = R_MIN = 1
    v = tangential_velocity(1.0, 20.0, t, 0.1, P)
    assert v == pytest.approx([0.0, 0.2 * 20.0 + 0.1 * 20.0])


def test_command_composition_clamping_and_fallback():
    cmd = compose_command([3.0, 0.0], [0.0, 4.0], [1.0, 0.0, 9.0], np.zeros(3), P)
    assert cmd == pytest.approx([4.0, 4.0, 5.0])
    cmd = compose_command([30.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0], np.zeros(3), P)
    assert cmd == pytest.approx([10.0, 0.0, 0.0])
    cmd = compose_command([np.nan, 0.0], [0.0, 1.0], [1.0, 2.0, 0.0], np.zeros(3), P)
    assert cmd == pytest.approx([1.0, 2.0, 0.0])
    assert clamp_velocity([15.0, 15.0, 10.0], 10.0, 5.0) == pytest.approx([7.0711, 7.0711, 5.0],
                                                                          abs=1e-4)
