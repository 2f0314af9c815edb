"""Property tests (hypothesis) of the mobility core over random limits, states and commands."""
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
import numpy as np

from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

TOL = 1e-9
N = 4

limits = st.floats(0.1, 20.0)
optional = st.one_of(st.just(0.0), st.floats(0.1, 30.0))  # 0 = extension off


@st.composite
def vehicle_params(draw):
    sim_dt = draw(st.sampled_from([0.005, 0.01, 0.02, 0.05]))
    tau = st.one_of(st.just(0.0), st.floats(sim_dt * 1.5, 3.0))
    return VehicleParams(
        max_speed_xy=draw(limits), max_speed_z=draw(limits), max_acc_xy=draw(limits),
        max_acc_z=draw(limits), max_dec_xy=draw(optional), max_dec_z=draw(optional),
        max_jerk_xy=draw(optional), max_jerk_z=draw(optional), tau_xy=draw(tau),
        tau_z=draw(tau), sim_dt=sim_dt,
        heading_mode=draw(st.sampled_from(['command', 'velocity'])),
        max_yaw_rate=draw(limits), max_yaw_acc=draw(optional))


commands = arrays(np.float64, (N, 3), elements=st.floats(-50.0, 50.0))
command_sequences = st.lists(commands, min_size=1, max_size=4)


def xy_norm(v):
    return np.hypot(v[..., 0], v[..., 1])


@settings(max_examples=200, deadline=None)
@given(vehicle_params(), arrays(np.float64, (N, 3), elements=st.floats(-100.0, 100.0)),
       commands)
def test_speed_bounds_hold_after_any_step(params, velocity, v_des):
    state = VehicleState(np.zeros((N, 3)), velocity, np.zeros((N, 3)), np.zeros(N),
                         np.zeros(N))
    new = step(state, v_des, params)
    assert np.all(xy_norm(new.velocity) <= params.max_speed_xy * (1 + TOL))
    assert np.all(np.abs(new.velocity[:, 2]) <= params.max_speed_z * (1 + TOL))


@settings(max_examples=150, deadline=None)
@given(vehicle_params(), command_sequences, st.integers(1, 60))
def test_acceleration_bound_holds_on_every_step(params, sequence, steps_per_command):
    state = VehicleState.at_rest(np.zeros((N, 3)))
    bound_xy = max(params.max_acc_xy, params.brake_xy) * (1 + TOL) + TOL
    bound_z = max(params.max_acc_z, params.brake_z) * (1 + TOL) + TOL
    for v_des in sequence:
        for _ in range(steps_per_command):
            new = step(state, v_des, params, yaw_rate_cmd=v_des[:, 0])
            accel = (new.velocity - state.velocity) / params.sim_dt
            assert np.all(xy_norm(accel) <= bound_xy)
            assert np.all(np.abs(accel[:, 2]) <= bound_z)
            assert np.all(np.abs(new.yaw_rate) <= params.max_yaw_rate * (1 + TOL))
            state = new


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([0.005, 0.01, 0.02]), st.floats(0.1, 2.0), st.floats(0.1, 2.0),
       arrays(np.float64, (N, 3), elements=st.floats(-3.0, 3.0)), st.integers(1, 300))
def test_tau_response_follows_the_first_order_solution_within_euler_error(
        sim_dt, tau_xy, tau_z, v_des, steps):
    # Limits generous enough that neither acceleration (|v_des| / tau <= 43 m/s^2) nor speed
    # saturates.
    params = VehicleParams(tau_xy=max(tau_xy, 1.5 * sim_dt), tau_z=max(tau_z, 1.5 * sim_dt),
                           sim_dt=sim_dt, max_acc_xy=100.0, max_acc_z=100.0,
                           max_speed_xy=50.0, max_speed_z=50.0)
    state = VehicleState.at_rest(np.zeros((N, 3)))
    for _ in range(steps):
        state = step(state, v_des, params)
    taus = np.array([params.tau_xy, params.tau_xy, params.tau_z])
    t = steps * sim_dt
    exact = v_des * (1.0 - np.exp(-t / taus))
    # |(1-h)^k - exp(-k h)| <= k h^2 / 2 for 0 <= h = dt/tau <= 1.
    euler_error = np.abs(v_des) * steps * (sim_dt / taus) ** 2 / 2.0
    assert np.all(np.abs(state.velocity - exact) <= euler_error + 1e-12)


def test_euler_error_bound_is_tight_enough_to_fail_a_wrong_tau():
    """Guard for the property above: a 5 % tau error is outside the Euler error bound."""
    params = VehicleParams(tau_xy=1.0, tau_z=1.0)
    state = VehicleState.at_rest(np.zeros((1, 3)))
    for _ in range(100):
        state = step(state, [[1.0, 1.0, 1.0]], params)
    wrong = 1.0 - math.exp(-1.0 / 1.05)
    assert abs(state.velocity[0, 0] - wrong) > 100 * (0.01 ** 2) / 2
