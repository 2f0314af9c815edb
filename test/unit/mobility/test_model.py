"""
Unit tests of the vectorised mobility core.

The reference's worked values, the reference step re-implemented literally (scalar, per vehicle) as
an oracle, and each extension.
"""
import math

import numpy as np
import pytest

from velocity_mobility_ros.core.geometry import body_to_world, world_to_body, wrap_angle
from velocity_mobility_ros.core.model import (
    apply_acceleration_limits, apply_velocity_limits, integrate_position, step, VehicleState)
from velocity_mobility_ros.core.vehicle import VehicleParams


def test_reference_worked_values():
    np.testing.assert_allclose(
        apply_acceleration_limits((0, 0, 0), (10, 10, 5), dt=0.1, max_acc_xy=2, max_acc_z=1),
        (0.2 / math.sqrt(2), 0.2 / math.sqrt(2), 0.1), rtol=1e-12)
    np.testing.assert_allclose(
        apply_acceleration_limits((0, 0, 0), (10, 10, 5), dt=0.1, max_acc_xy=2, max_acc_z=1),
        (0.1414, 0.1414, 0.1), atol=1e-4)
    np.testing.assert_allclose(apply_velocity_limits((15, 15, 10), max_speed_xy=10,
                                                     max_speed_z=5), (7.0711, 7.0711, 5.0),
                               atol=1e-4)
    np.testing.assert_allclose(integrate_position((0, 0, 0), (1, 2, 0.5), 0.1),
                               (0.1, 0.2, 0.05), rtol=1e-12)


def test_worked_functions_are_vectorised():
    v = apply_velocity_limits([[15, 15, 10], [1, 2, -9], [0, 0, 0]], 10, 5)
    np.testing.assert_allclose(v, [[10 / math.sqrt(2), 10 / math.sqrt(2), 5], [1, 2, -5],
                                   [0, 0, 0]])


def reference_step(p, v, v_des, dt, max_speed_xy, max_speed_z, max_acc_xy, max_acc_z,
                   tau_xy=None, tau_z=None):
    """Return the reference update step for one vehicle, written literally from the spec."""
    p, v, v_des = list(p), list(v), list(v_des)
    if tau_xy is None and tau_z is None:
        v = list(apply_acceleration_limits(v, v_des, dt, max_acc_xy, max_acc_z))
    else:
        if tau_xy is not None:
            ax, ay = (v_des[0] - v[0]) / tau_xy, (v_des[1] - v[1]) / tau_xy
            norm = math.hypot(ax, ay)
            if norm > max_acc_xy:
                ax, ay = ax * max_acc_xy / norm, ay * max_acc_xy / norm
            v[0], v[1] = v[0] + ax * dt, v[1] + ay * dt
        else:
            dx, dy = v_des[0] - v[0], v_des[1] - v[1]
            norm = math.hypot(dx, dy)
            if norm > max_acc_xy * dt:
                dx, dy = dx * max_acc_xy * dt / norm, dy * max_acc_xy * dt / norm
            v[0], v[1] = v[0] + dx, v[1] + dy
        if tau_z is not None:
            az = min(max((v_des[2] - v[2]) / tau_z, -max_acc_z), max_acc_z)
            v[2] = v[2] + az * dt
        else:
            v[2] = v[2] + min(max(v_des[2] - v[2], -max_acc_z * dt), max_acc_z * dt)
    speed = math.hypot(v[0], v[1])
    if speed > max_speed_xy:
        v[0], v[1] = v[0] * max_speed_xy / speed, v[1] * max_speed_xy / speed
    v[2] = min(max(v[2], -max_speed_z), max_speed_z)
    return [p[i] + v[i] * dt for i in range(3)], v


@pytest.mark.parametrize('tau_xy,tau_z', [(1.0, 1.2), (0.0, 0.0), (0.5, 0.0), (0.0, 0.7)])
def test_step_reproduces_the_reference_over_a_trajectory(tau_xy, tau_z):
    rng = np.random.default_rng(7)
    params = VehicleParams(tau_xy=tau_xy, tau_z=tau_z)
    n = 5
    state = VehicleState.at_rest(rng.uniform(-50, 50, (n, 3)))
    ref_p, ref_v = state.position.tolist(), state.velocity.tolist()
    for k in range(600):
        if k % 100 == 0:  # commands persist between changes
            v_des = rng.uniform(-15, 15, (n, 3))
        state = step(state, v_des, params)
        for i in range(n):
            ref_p[i], ref_v[i] = reference_step(
                ref_p[i], ref_v[i], v_des[i], params.sim_dt, params.max_speed_xy,
                params.max_speed_z, params.max_acc_xy, params.max_acc_z,
                tau_xy or None, tau_z or None)
    np.testing.assert_allclose(state.velocity, ref_v, rtol=0, atol=1e-9)
    np.testing.assert_allclose(state.position, ref_p, rtol=0, atol=1e-9)


def test_acceleration_limited_ramp_and_saturation():
    params = VehicleParams(tau_xy=0.0, tau_z=0.0)
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]])
    speeds = []
    for _ in range(400):
        state = step(state, [[20.0, 0.0, -20.0]], params)
        speeds.append(state.velocity[0].copy())
    speeds = np.array(speeds)
    np.testing.assert_allclose(np.diff(speeds[:200, 0]), 0.04, atol=1e-12)  # 4 m/s^2 * 0.01
    np.testing.assert_allclose(np.diff(speeds[:90, 2]), -0.05, atol=1e-12)  # 5 m/s^2 * 0.01
    np.testing.assert_allclose(speeds[-1], [10.0, 0.0, -5.0])
    np.testing.assert_allclose(state.acceleration, 0.0, atol=1e-9)


def test_first_order_tracking_matches_the_discrete_solution_when_unsaturated():
    params = VehicleParams(tau_xy=0.5, tau_z=0.8)
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]])
    v_des = np.array([[1.0, -0.5, 0.5]])  # small steps: (v_des - v)/tau stays below max_acc
    for _ in range(100):
        state = step(state, v_des, params)
    k = 100
    expected = v_des[0] * (1 - np.array([(1 - 0.01 / 0.5) ** k] * 2 + [(1 - 0.01 / 0.8) ** k]))
    np.testing.assert_allclose(state.velocity[0], expected, rtol=1e-10)


def test_braking_limit_applies_only_when_slowing_down():
    params = VehicleParams(tau_xy=0.0, tau_z=0.0, max_dec_xy=8.0, max_dec_z=10.0)
    state = VehicleState(np.zeros((2, 3)), np.array([[5.0, 0, 2.0], [5.0, 0, 2.0]]),
                         np.zeros((2, 3)), np.zeros(2), np.zeros(2))
    new = step(state, [[0.0, 0.0, 0.0], [9.0, 0.0, 4.0]], params)
    np.testing.assert_allclose(new.velocity[0], [5.0 - 0.08, 0.0, 2.0 - 0.1])  # braking
    np.testing.assert_allclose(new.velocity[1], [5.0 + 0.04, 0.0, 2.0 + 0.05])  # accelerating


def test_jerk_limit_ramps_the_acceleration():
    params = VehicleParams(tau_xy=0.0, tau_z=0.0, max_jerk_xy=20.0, max_jerk_z=50.0)
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]])
    accelerations = []
    for _ in range(30):
        state = step(state, [[10.0, 0.0, 5.0]], params)
        accelerations.append(state.acceleration[0].copy())
    accelerations = np.array(accelerations)
    np.testing.assert_allclose(accelerations[:19, 0], 0.2 * np.arange(1, 20), atol=1e-9)
    np.testing.assert_allclose(accelerations[19:, 0], 4.0, atol=1e-9)  # then max_acc_xy
    np.testing.assert_allclose(accelerations[:9, 2], 0.5 * np.arange(1, 10), atol=1e-9)
    assert np.all(np.abs(np.diff(accelerations, axis=0)) <= [0.2 + 1e-9, 1e-9, 0.5 + 1e-9])


def test_command_heading_follows_yaw_rate_under_limits():
    params = VehicleParams(max_yaw_rate=1.0, max_yaw_acc=5.0)
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]] * 2, yaw=[0.0, 3.1])
    rates = []
    for _ in range(100):
        state = step(state, np.zeros((2, 3)), params, yaw_rate_cmd=[0.5, 3.0])
        rates.append(state.yaw_rate.copy())
    rates = np.array(rates)
    np.testing.assert_allclose(rates[:10, 0], 0.05 * np.arange(1, 11))  # yaw acc 5 rad/s^2
    np.testing.assert_allclose(rates[-1], [0.5, 1.0])  # command; clipped at max_yaw_rate
    assert -math.pi <= state.yaw[1] < math.pi  # wrapped after passing pi
    no_acc_limit = step(VehicleState.at_rest([[0, 0, 0]]), [[0, 0, 0]],
                        VehicleParams(), yaw_rate_cmd=[0.5])
    np.testing.assert_allclose(no_acc_limit.yaw, [0.005])


def test_velocity_heading_turns_to_face_travel_and_holds_when_hovering():
    params = VehicleParams(heading_mode='velocity', max_yaw_rate=2.0, tau_xy=0.0)
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]] * 2)
    for _ in range(200):
        state = step(state, [[0.0, 3.0, 0.0], [0.0, 0.0, 1.0]], params,
                     yaw_rate_cmd=[1.0, 1.0])  # ignored in 'velocity' mode
    np.testing.assert_allclose(state.yaw, [math.pi / 2, 0.0], atol=1e-12)
    assert np.all(np.abs(state.yaw_rate) <= 2.0)


def test_velocity_heading_respects_the_rate_limit():
    params = VehicleParams(heading_mode='velocity', max_yaw_rate=0.5, tau_xy=0.0)
    state = VehicleState(np.zeros((1, 3)), np.array([[-2.0, 0.1, 0.0]]), np.zeros((1, 3)),
                         np.zeros(1), np.zeros(1))
    new = step(state, [[-2.0, 0.1, 0.0]], params)
    np.testing.assert_allclose(new.yaw_rate, [0.5])
    np.testing.assert_allclose(new.yaw, [0.005])


def test_body_world_rotation():
    np.testing.assert_allclose(body_to_world([1.0, 0.0, 2.0], math.pi / 2), [0.0, 1.0, 2.0],
                               atol=1e-15)
    v = np.random.default_rng(1).normal(size=(4, 3))
    yaw = np.array([0.3, -2.0, 3.0, 1.0])
    np.testing.assert_allclose(world_to_body(body_to_world(v, yaw), yaw), v, atol=1e-12)


def test_wrap_angle_range():
    np.testing.assert_allclose(wrap_angle([math.pi, -math.pi, 3 * math.pi / 2, 0.1]),
                               [-math.pi, -math.pi, -math.pi / 2, 0.1])


def test_at_rest_validates_shapes_and_values():
    state = VehicleState.at_rest([1.0, 2.0, 3.0], yaw=0.5)
    assert len(state) == 1 and state.yaw.tolist() == [0.5]
    with pytest.raises(ValueError, match=r'position must have shape \(N, 3\), got \(1, 2\)'):
        VehicleState.at_rest([[1.0, 2.0]])
    with pytest.raises(ValueError, match='yaw must have 2 values, got 3'):
        VehicleState.at_rest(np.zeros((2, 3)), yaw=[0, 0, 0])
    with pytest.raises(ValueError, match=r'position must be finite, got \[\[nan'):
        VehicleState.at_rest([[math.nan, 0.0, 0.0]])


def test_step_is_pure():
    state = VehicleState.at_rest([[0.0, 0.0, 0.0]])
    v_des = np.array([[1.0, 2.0, 3.0]])
    step(state, v_des, VehicleParams())
    assert state.velocity.tolist() == [[0.0, 0.0, 0.0]]
    assert v_des.tolist() == [[1.0, 2.0, 3.0]]
