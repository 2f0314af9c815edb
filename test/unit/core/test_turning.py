"""The target's acceleration, the commands' lead and the sized d_safe (issue 35)."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    encirclement_step, encirclement_step_one, NeighbourView, target_lead)
from soliton_encirclement_ros.core.target_estimate import (
    ACCELERATION_TIME_CONSTANT, estimate_acceleration)
from soliton_encirclement_ros.core.target_motion import Circle, make_target_motion


def test_a_steady_turn_is_estimated_as_its_centripetal_acceleration():
    speed, radius, dt = 5.0, 30.0, 0.01
    rate = speed / radius
    estimate = None
    for k in range(int(3.0 / dt) + 1):  # 15 time constants
        t = k * dt
        velocity = speed * np.array([math.cos(rate * t), math.sin(rate * t), 0.0])
        estimate = estimate_acceleration(estimate, t, velocity)
    t = estimate.stamp
    # the finite difference is the acceleration half a step back; the low-pass lags by about
    # its time constant, so the estimate points that much earlier along the turn
    lag = 0.5 * dt + ACCELERATION_TIME_CONSTANT
    expected = speed * rate * np.array([-math.sin(rate * (t - lag)), math.cos(rate * (t - lag)),
                                        0.0])
    assert estimate.acceleration == pytest.approx(expected, abs=0.01 * speed * rate)


def test_the_estimate_starts_at_zero_and_keeps_through_bad_samples():
    first = estimate_acceleration(None, 1.0, [1.0, 0.0, 0.0])
    assert np.all(first.acceleration == 0.0)
    second = estimate_acceleration(first, 1.1, [2.0, 0.0, 0.0])
    assert second.acceleration[0] == pytest.approx((1.0 - math.exp(-0.5)) * 10.0)
    assert estimate_acceleration(second, 1.1, [9.0, 0.0, 0.0]) is second  # same stamp
    assert estimate_acceleration(second, 1.0, [9.0, 0.0, 0.0]) is second  # stepped back
    kept = estimate_acceleration(second, 1.2, [math.nan, 0.0, 0.0])
    assert np.all(np.isfinite(kept.acceleration)) and np.all(kept.velocity == second.velocity)
    rows = estimate_acceleration(estimate_acceleration(None, 0.0, np.zeros((2, 3))), 0.1,
                                 [[1.0, 0.0, 0.0], [0.0, -2.0, 0.0]])  # one target per row
    assert rows.acceleration[0, 0] > 0.0 > rows.acceleration[1, 1]


def test_the_lead_is_horizontal_and_off_in_the_reference():
    params = ControllerParams()
    lead = target_lead([1.0, 2.0, 3.0], [0.5, -1.0, 7.0], params)
    assert lead == pytest.approx([1.0 + params.target_lead * 0.5,
                                  2.0 - params.target_lead * 1.0, 3.0])
    reference = ControllerParams.preset('reference')
    assert reference.target_lead == 0.0 and reference.d_safe == 0.0
    assert np.all(target_lead([1.0, 2.0, 3.0], [0.5, -1.0, 7.0], reference) == [1.0, 2.0, 3.0])
    assert np.all(target_lead([1.0, 2.0, 3.0], None, params) == [1.0, 2.0, 3.0])
    rows = target_lead(np.zeros((4, 3)), np.ones((4, 3)), params)
    assert rows.shape == (4, 3) and np.all(rows[:, 2] == 0.0)


def _views():
    pred = NeighbourView(0.2, np.array([19.0, 4.0, 0.0]), np.array([1.0, 0.5, 0.0]), 0.1, 0.0, 2)
    succ = NeighbourView(1.4, np.array([3.0, 19.5, 0.0]), np.array([-0.5, 1.0, 0.0]), -0.2, 0.0,
                         3)
    return pred, succ


@pytest.mark.parametrize('acceleration', [None, [0.3, -0.8, 0.1], [math.inf, 0.2, 0.0]])
def test_the_float_path_leads_with_the_array_paths_bits(acceleration):
    params = ControllerParams(d_safe=0.0, ring_gains_from=0.0)  # the crowd's k_e_tau, 50
    pred, succ = _views()
    args = (0.3, np.array([20.0, 1.0, 0.0]), np.array([0.5, 2.0, 0.0]),
            np.array([0.4, 2.2, 0.0]), np.zeros(3), np.array([4.0, 3.0, 0.0]), 0.0, 0.05)
    u, u_ss, cmd = encirclement_step(*args, pred, succ, 1.0, 1.0, params, ring_size=3, own_id=1,
                                     target_acceleration=acceleration)
    floats = [tuple(float(x) for x in a) if isinstance(a, np.ndarray) else a for a in args]
    views = [NeighbourView(v.theta, v.position.tolist(), v.velocity.tolist(), v.u, v.u_ss,
                           v.agent_id) for v in (pred, succ)]
    u1, u_ss1, cmd1 = encirclement_step_one(*floats, *views, 1.0, 1.0, params, ring_size=3,
                                            own_id=1, target_acceleration=acceleration)
    assert np.float64(u).tobytes() == np.float64(u1).tobytes()
    assert np.float64(u_ss).tobytes() == np.float64(u_ss1).tobytes()
    assert np.asarray(cmd, dtype=float).tobytes() == np.asarray(cmd1, dtype=float).tobytes()
    if acceleration is not None and math.isfinite(acceleration[0]):
        plain = encirclement_step(*args, pred, succ, 1.0, 1.0, params, ring_size=3, own_id=1)[2]
        # the lead, and a little more: it also takes the command's own angular rate (u; 0.018
        # m/s here with k_e_tau 50)
        assert cmd[:2] - plain[:2] == pytest.approx(params.target_lead * np.array([0.3, -0.8]),
                                                    abs=0.02)


def test_the_circle_target_turns_steadily():
    circle = make_target_motion('circle', speed=5.0, boundary=30.0, period=1.0, seed=None,
                                waypoints=(), arrival_times=None)
    assert isinstance(circle, Circle)
    for t in (0.0, 3.0, 40.0):
        v = circle.desired_velocity(t, np.zeros(3))
        assert math.hypot(v[0], v[1]) == pytest.approx(5.0)
        assert math.atan2(v[1], v[0]) % (2 * math.pi) == pytest.approx((t / 6.0) % (2 * math.pi))


@pytest.mark.parametrize('n, expected', [(100, 0.5 * 40.0 * math.sin(math.pi / 100)),
                                         (32, 0.5 * 40.0 * math.sin(math.pi / 32)),
                                         (12, 2.0), (2, 2.0), (1, 2.0), (0, 2.0)])
def test_d_safe_is_on_and_sized_to_the_ring(n, expected):
    params = ControllerParams()
    assert params.d_safe == 2.0 and params.d_safe_share == 0.5
    assert params.safety_distance(n) == pytest.approx(expected)
    sizes = params.safety_distance(np.array([n, 12]))
    assert sizes == pytest.approx([expected, 2.0])
    assert ControllerParams(d_safe_share=0.0).safety_distance(100) == 2.0  # as set
    assert ControllerParams(d_safe=0.0).safety_distance(100) == 0.0        # off


def test_the_target_state_carries_its_acceleration():
    from soliton_encirclement_ros.interface import (
        TARGET_STATE, target_state_from_msg, target_state_to_msg)
    msg = target_state_to_msg(1_700_000_000_123_456_789, [1.0, 2.0, 3.0], [0.5, 0.0, 0.0], 0.2,
                              {3: 1.5}, acceleration=[0.25, -0.5, 0.0])
    assert msg.layout.dim[0].label == TARGET_STATE.label and TARGET_STATE.version == 3
    decoded = target_state_from_msg(msg)
    assert np.all(decoded.acceleration == [0.25, -0.5, 0.0])
    assert dict(decoded.lambdas) == {3: 1.5} and decoded.omega_ref == 0.2
    still = target_state_from_msg(target_state_to_msg(0, [0.0] * 3, [0.0] * 3))
    assert np.all(still.acceleration == 0.0)
