"""Unit tests of the soliton encirclement core against hand-computed values."""
import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, control_step, initial_state, outgoing_state, receive_agent_state,
    receive_target_state, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.geometry import (
    angular_rate, polar_frame, target_angle, wrap_2pi)
from soliton_encirclement_ros.core.law import (
    clamp_velocity, compose_command, damped_spacing_error, limiter, radial_velocity,
    soliton_update, spacing_error, tangential_velocity)
from soliton_encirclement_ros.core.metrics import compute_metrics
from soliton_encirclement_ros.core.neighbours import (
    apply_hysteresis, NO_NEIGHBOUR, ring_neighbours, ring_neighbours_shared)

P = ControllerParams.preset('reference')  # the hand-computed cases use the reference gains
ORIGIN = np.zeros(3)


def on_circle(angle, radius=20.0):
    return np.array([radius * math.cos(angle), radius * math.sin(angle), 0.0])


def agent_msg(agent_id, angle, seq=0, u=0.0, u_ss=0.0, velocity=(0.0, 0.0, 0.0)):
    return AgentBroadcast(agent_id, seq, 0, on_circle(angle), velocity, u, u_ss)


def with_target(state, rx=0.0, velocity=(0.0, 0.0, 0.0), **kw):
    target = TargetBroadcast(seconds_to_ns(rx), ORIGIN, velocity, **kw)
    return receive_target_state(state, target, rx, P)


# --- parameters -------------------------------------------------------------------------

def test_params_defaults_and_auto_timeouts():
    assert P.radius == 20.0 and P.k_e_tau == 25.0 and P.hysteresis == 0.05
    assert P.agent_timeout == pytest.approx(0.03)
    assert P.target_liveness == pytest.approx(0.05)
    explicit = P.with_changes(control_period=0.05, agent_state_timeout=0.5)
    assert explicit.agent_timeout == 0.5 and explicit.target_liveness == pytest.approx(0.25)


@pytest.mark.parametrize('field, value, message', [
    ('radius', 0.0, 'radius must be > 0, got 0.0'),
    ('k_r', -1.0, 'k_r must be >= 0, got -1.0'),
    ('control_period', float('nan'), 'control_period must be finite, got nan'),
    ('hysteresis', 'wide', "hysteresis must be a number, got 'wide'"),
    ('soft_limiter', 1, 'soft_limiter must be a bool, got 1'),
])
def test_params_reject_bad_values_naming_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        ControllerParams.from_mapping({field: value})


def test_params_reject_unknown_key():
    with pytest.raises(ValueError, match='unknown ControllerParams field.*k_typo'):
        ControllerParams.from_mapping({'k_typo': 1.0})


# --- geometry ---------------------------------------------------------------------------

def test_target_angle_is_wrapped_and_target_centric():
    assert target_angle([0.0, -1.0, 0.0], ORIGIN) == pytest.approx(1.5 * math.pi)
    assert target_angle([6.0, 5.0, 9.0], [5.0, 5.0, 0.0]) == 0.0
    assert wrap_2pi(-0.5) == pytest.approx(2 * math.pi - 0.5)


def test_polar_frame_and_guard_at_target():
    r, e_r, t = polar_frame([0.0, 3.0, 0.0], ORIGIN)
    assert r == 3.0 and e_r == pytest.approx([0.0, 1.0]) and t == pytest.approx([-1.0, 0.0])
    r, e_r, t = polar_frame(ORIGIN, ORIGIN)
    assert r == 0.0 and np.all(e_r == 0.0) and np.all(t == 0.0)


def test_angular_rate():
    # at (10, 0) moving +y at 2 m/s relative to the target: 0.2 rad/s
    assert angular_rate([11, 0, 0], [1, 3, 0], [1, 0, 0], [1, 1, 0]) == pytest.approx(0.2)
    assert math.isnan(angular_rate(ORIGIN, [1, 0, 0], ORIGIN, ORIGIN))


# --- neighbours -------------------------------------------------------------------------

def test_ring_neighbours_sorted_by_angle_then_id():
    assert ring_neighbours(1, 0.5, [2, 3, 4], [1.0, 3.0, 6.0]) == (4, 2)
    assert ring_neighbours(1, 6.2, [2, 3], [1.0, 3.0]) == (3, 2)  # wraps around
    # equal angles: order by id, so 2 comes after 1 and 0 before it
    assert ring_neighbours(1, 1.0, [0, 2, 3], [1.0, 1.0, 4.0]) == (0, 2)


def test_ring_one_other_agent_is_both_and_alone_has_none():
    assert ring_neighbours(1, 0.5, [7], [4.0]) == (7, 7)
    assert ring_neighbours(1, 0.5, [], []) == (NO_NEIGHBOUR, NO_NEIGHBOUR)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0.0, 1.0, 2.0, 3.0, 6.0])
                          | st.floats(0.0, 6.28)),
                min_size=1, max_size=8, unique_by=lambda t: t[0]),
       st.floats(0.0, 6.28))
def test_shared_ring_search_equals_per_agent_ring(entries, stale_own_theta):
    """ring_neighbours_shared (searchsorted, own stale entry skipped) == ring_neighbours."""
    ids = np.array([e[0] for e in entries])
    thetas = np.array([e[1] for e in entries])
    askers = np.arange(0, 14)
    own_thetas = np.where(np.isin(askers, ids), stale_own_theta, (askers * 0.9) % 6.28)
    own_thetas[::3] = thetas[0]  # exact ties with a stored angle
    pred, succ = ring_neighbours_shared(askers, own_thetas, ids, thetas)
    for k, agent in enumerate(askers):
        others = ids != agent
        assert (pred[k], succ[k]) == ring_neighbours(agent, own_thetas[k], ids[others],
                                                     thetas[others])


def test_hysteresis_keeps_current_unless_much_closer():
    # current successor 5 at gap 0.50; candidate 6 at gap 0.47 -> keep; at 0.40 -> switch
    keep = apply_hysteresis(2, 6, 0.3, 0.47, 2, 5, 0.3, 0.50, 0.05)
    assert (int(keep[0]), int(keep[1])) == (2, 5)
    switch = apply_hysteresis(2, 6, 0.3, 0.40, 2, 5, 0.3, 0.50, 0.05)
    assert int(switch[1]) == 6


def test_hysteresis_accepts_when_current_expired_missing_or_crossed():
    expired = apply_hysteresis(2, 6, 0.3, 0.47, 2, 5, 0.3, np.nan, 0.05)
    assert int(expired[1]) == 6
    missing = apply_hysteresis(2, 6, 0.3, 0.47, NO_NEIGHBOUR, NO_NEIGHBOUR, np.nan, np.nan, 0.05)
    assert (int(missing[0]), int(missing[1])) == (2, 6)
    # passed the successor: 5 is now the predecessor (gap 0.01) -> take the new pair at once
    crossed = apply_hysteresis(5, 6, 0.01, 0.3, 2, 5, 0.02, 6.27, 0.05)
    assert (int(crossed[0]), int(crossed[1])) == (5, 6)


# --- law terms --------------------------------------------------------------------------

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


def test_u_update_core_form_and_kdv_terms():
    core = P.with_changes(kappa_u_diff=0.0, k_u_steepen=0.0, kappa_u_disp=0.0)
    u, u_ss = soliton_update(0.5, 0.2, 0.6, 0.0, 0.0, 0.1, core)
    du = 2.0 * 0.4 - 7.0 * 0.5 - 0.5 * 0.125 + 25.0 * 0.1
    assert u == pytest.approx(0.5 + 0.01 * du)
    assert u_ss == pytest.approx(0.6 - 1.0 + 0.2)
    full, _ = soliton_update(0.5, 0.2, 0.6, 0.3, -0.1, 0.1, P)
    du_full = du + 0.1 * (-0.2) - 0.3 * 0.5 * 0.4 + 0.05 * (-0.1 - 0.3)
    assert full == pytest.approx(0.5 + 0.01 * du_full)


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


# --- controller state and step ----------------------------------------------------------

def test_four_agents_step_gives_hand_computed_e_tau_and_command():
    state = with_target(initial_state(1))
    for agent_id, angle in ((2, 1.0), (3, 2.0), (4, 4.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle), 0.0, P)
    state, cmd = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    e_tau = (1.0 - (2 * math.pi - 4.0)) / (1.0 + 2 * math.pi - 4.0)
    u = 0.01 * 25.0 * e_tau  # omega damping: everyone at rest -> no change
    assert (state.pred, state.succ) == (4, 2)
    assert state.u == pytest.approx(u)
    assert cmd == pytest.approx([0.0, 0.2 * u * 20.0, 0.0])
    assert state.seq == 1


def test_omega_self_is_previous_command_tangential_rate_relative_to_target():
    # Symmetric neighbours (e_tau = 0) moving with the target (omega_j = 0); target moves at
    # (1, 2). Previous command (3, 6): relative to the target (2, 4), tangential part 4 m/s
    # at r = 20 -> omega_self = 0.2 (the absolute command would give 0.3).
    vt = (1.0, 2.0, 0.0)
    state = with_target(initial_state(1), velocity=vt)
    for agent_id, angle in ((2, 1.0), (3, 2 * math.pi - 1.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle, velocity=vt), 0.0, P)
    state = dataclasses.replace(state, prev_cmd=np.array([3.0, 6.0, 0.0]))
    state, cmd = control_step(state, on_circle(0.0), np.array(vt), 0.0, P)
    u = 0.01 * 25.0 * (0.0 - 0.1 * (0.2 - 0.0))
    assert state.u == pytest.approx(u)
    assert cmd == pytest.approx([1.0, 2.0 + 0.2 * u * 20.0, 0.0])


def test_one_agent_alone_gets_no_tangential_term():
    state = with_target(initial_state(1))
    state, cmd = control_step(state, [22.0, 0.0, 0.0], np.zeros(3), 0.0, P)
    assert (state.pred, state.succ) == (None, None)
    assert state.u == 0.0
    assert cmd == pytest.approx([-2.0, 0.0, 0.0])  # radial only


def test_one_other_agent_is_pred_and_succ():
    state = with_target(initial_state(1))
    state = receive_agent_state(state, agent_msg(2, 1.0), 0.0, P)
    state, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    assert (state.pred, state.succ) == (2, 2)
    # gaps 2pi-1 back and 1 forward -> e_tau = (1 - (2pi-1)) / 2pi
    assert state.u == pytest.approx(0.01 * 25.0 * (2.0 - 2 * math.pi) / (2 * math.pi))


def test_receive_drops_own_id_and_out_of_order_seq():
    state = initial_state(1)
    assert receive_agent_state(state, agent_msg(1, 0.0), 0.0, P) is state
    state = receive_agent_state(state, agent_msg(2, 1.0, seq=5), 0.0, P)
    stale = receive_agent_state(state, agent_msg(2, 2.0, seq=4), 0.01, P)
    assert stale.neighbours[2][0].seq == 5 and stale.neighbours[2][1] == 0.0
    newer = receive_agent_state(state, agent_msg(2, 2.0, seq=6), 0.01, P)
    assert newer.neighbours[2][0].seq == 6 and newer.neighbours[2][1] == 0.01
    assert state.neighbours[2][0].seq == 5  # the input state is never mutated


def test_expired_neighbours_are_ignored_and_pruned():
    state = with_target(initial_state(1), rx=0.1)
    state = receive_agent_state(state, agent_msg(2, 1.0), 0.0, P)     # expires after 0.03 s
    state = receive_agent_state(state, agent_msg(3, 4.0), 0.09, P)
    stepped, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.1, P)
    assert (stepped.pred, stepped.succ) == (3, 3)
    assert set(stepped.neighbours) == {3}
    kept, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.1,
                           P.with_changes(prune_expired=False))
    assert set(kept.neighbours) == {2, 3} and (kept.pred, kept.succ) == (3, 3)


def test_no_live_target_falls_back_to_target_velocity_or_zero():
    state, cmd = control_step(initial_state(1), on_circle(0.0), np.zeros(3), 0.0, P)
    assert np.all(cmd == 0.0) and state.u == 0.0
    state = with_target(initial_state(1), rx=0.0, velocity=(1.0, 2.0, 0.5))
    state, cmd = control_step(state, on_circle(0.0), np.zeros(3), 1.0, P)  # 1 s > 0.05 s
    assert cmd == pytest.approx([1.0, 2.0, 0.5]) and state.u == 0.0


def test_outgoing_state_carries_seq_u_and_u_ss():
    state = with_target(initial_state(3))
    state = receive_agent_state(state, agent_msg(2, 1.0, u=0.4), 0.0, P)
    msg0 = outgoing_state(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.0)
    assert (msg0.agent_id, msg0.seq, msg0.u) == (3, 0, 0.0)
    state, _ = control_step(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.0, P)
    msg1 = outgoing_state(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.01)
    assert msg1.seq == 1 and msg1.u == state.u and msg1.u_ss == pytest.approx(0.8)
    assert msg1.velocity == pytest.approx([0.0, 1.0, 0.0])


def test_lambdas_from_target_weight_the_spacing():
    state = with_target(initial_state(1), lambdas={4: 2.0})
    for agent_id, angle in ((2, 1.0), (4, 5.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle), 0.0, P)
    state, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    gap_pred, gap_succ = 2 * math.pi - 5.0, 1.0
    e = (2.0 * gap_succ - gap_pred) / (2.0 * gap_succ + gap_pred)
    assert state.pred == 4 and state.u == pytest.approx(0.25 * e)


def test_messages_validate_vectors():
    with pytest.raises(ValueError, match='position must have 3 components, got 2'):
        AgentBroadcast(1, 0, 0, [1.0, 2.0], [0, 0, 0], 0.0)


# --- metrics over the live agents -------------------------------------------------------

def test_perfect_ring_metrics():
    angles = np.arange(8) * 2 * math.pi / 8 + 0.3
    m = compute_metrics(np.array([on_circle(a) for a in angles]), np.zeros((8, 3)), ORIGIN,
                        ORIGIN, 20.0)
    assert m.E_gap == pytest.approx(0.0, abs=1e-12) and m.rho == pytest.approx(0.0, abs=1e-12)
    assert m.G_max == pytest.approx(1.0) and m.E_r == pytest.approx(0.0, abs=1e-12)


def test_clustered_agents_metrics():
    m = compute_metrics(np.array([on_circle(0.0, 22.0), on_circle(0.0, 18.0)]),
                        np.zeros((2, 3)), ORIGIN, ORIGIN, 20.0)
    assert m.rho == pytest.approx(1.0) and m.G_max == pytest.approx(2.0)
    assert m.E_r == pytest.approx(0.1) and m.E_gap == pytest.approx(1.0)


def test_outage_process_starts_its_checks_at_the_first_update_on_a_wall_clock():
    from soliton_encirclement_ros.core.faults import OutageProcess
    wall = 1.8e9 + 0.37
    process = OutageProcess(failures_per_min=0.0, seed=1, agent_id=1)
    assert process.update(wall) is False
    assert process.update(wall + 5.0) is False
    assert process._checks == 50  # 5 s of 0.1 s checks, not 1.8e10 of them since the epoch
    sim = OutageProcess(failures_per_min=600.0, off_time=0.5, seed=3, agent_id=2)
    shifted = OutageProcess(failures_per_min=600.0, off_time=0.5, seed=3, agent_id=2)
    sim.update(0.05)
    shifted.update(1000.05)
    assert [sim.update(0.05 + 0.1 * k) for k in range(50)] == [
        shifted.update(1000.05 + 0.1 * k) for k in range(50)
    ]
