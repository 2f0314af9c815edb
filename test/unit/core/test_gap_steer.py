"""law.gap_steer: the whole ring turns so that a gap, not a member, meets a known obstacle."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import gap_steer, GAP_STEER_SPEED

R = 20.0
PARAMS = ControllerParams(radius=R, k_gap_steer=0.5, obstacle_lead=0.0)
CAP = GAP_STEER_SPEED / R


def _ring(n, phase=0.0):
    """Every member's angle of an even ring of n: (theta_self, the others')."""
    theta = phase + 2.0 * math.pi * np.arange(n) / n
    return theta[0], theta[1:]


def _at(angle, radius=R):
    return np.array([[radius * math.cos(angle), radius * math.sin(angle), 5.0]])


def _steer(theta_self, thetas, obstacles, params=PARAMS, target_velocity=(0.0, 0.0, 0.0)):
    return gap_steer(theta_self, thetas, None, obstacles, np.zeros(3),
                     np.array(target_velocity), params)


def _toward_gap(d, n=8, k=0.5):
    """Return the rate of an obstacle ``d`` rad counter-clockwise of a member (even ring of n)."""
    return -k * math.sin(n * d) / n


def test_the_ring_turns_its_nearest_member_away_from_an_obstacle_on_it():
    theta_self, thetas = _ring(8)
    half = math.pi / 8
    # 0.1 rad counter-clockwise of the member at 0: turn clockwise by k sin(0.8)/8
    assert _steer(theta_self, thetas, _at(0.1)) == pytest.approx(_toward_gap(0.1))
    assert _toward_gap(0.1) < 0.0
    assert _steer(theta_self, thetas, _at(-0.1)) == pytest.approx(-_toward_gap(0.1))
    # in a gap's middle it stays: the gap meets the obstacle; near it, k x the angle from it
    assert _steer(theta_self, thetas, _at(half)) == pytest.approx(0.0, abs=1e-12)
    assert _steer(theta_self, thetas, _at(half - 0.01)) == pytest.approx(-0.5 * 0.01, rel=2e-3)
    # every member computes the same rate, whichever it is
    for k in range(8):
        theta = 2.0 * math.pi * np.arange(8) / 8
        rate = _steer(theta[k], np.delete(theta, k), _at(0.1))
        assert rate == pytest.approx(_toward_gap(0.1))


def test_members_that_place_the_ring_a_little_apart_add_rates_a_little_apart():
    # an obstacle on a member: members whose fitted phase differs by what each hears (a state
    # a tick old) see it just on either side; their rates differ by about as little, never
    # by the whole rate toward a gap (which would tear the ring they turn)
    theta_self, thetas = _ring(8)
    rates = [_steer(theta_self + e, thetas + e, _at(0.0)) for e in (-1e-3, 0.0, 1e-3)]
    assert rates[1] == pytest.approx(0.0, abs=1e-12)
    assert max(rates) - min(rates) == pytest.approx(2 * 0.5 * 1e-3, rel=1e-3)


def test_only_obstacles_near_the_ring_count():
    theta_self, thetas = _ring(8)
    ramp = PARAMS.obstacle_ramp
    # whole within obstacle_ramp/2 of the radius, nothing from obstacle_ramp on
    whole = _steer(theta_self, thetas, _at(0.1))
    assert whole == pytest.approx(_toward_gap(0.1))
    assert _steer(theta_self, thetas, _at(0.1, R + 0.5 * ramp)) == pytest.approx(whole)
    assert _steer(theta_self, thetas, _at(0.1, R - 0.75 * ramp)) == pytest.approx(0.5 * whole)
    assert _steer(theta_self, thetas, _at(0.1, R + ramp)) == 0.0
    assert _steer(theta_self, thetas, _at(0.1, R + 3 * ramp)) == 0.0


def test_nothing_to_turn_for():
    theta_self, thetas = _ring(8)
    assert _steer(theta_self, thetas, None) == 0.0
    assert _steer(theta_self, thetas, np.full((1, 3), np.nan)) == 0.0
    # off, and without d_safe (the obstacles are its)
    assert _steer(theta_self, thetas, _at(0.1), PARAMS.with_changes(k_gap_steer=0.0)) == 0.0
    assert _steer(theta_self, thetas, _at(0.1), PARAMS.with_changes(d_safe=0.0)) == 0.0
    # a ring spread evenly at random has no phase: its n-th harmonic vanishes
    theta = np.arange(4) * (math.pi / 8)  # 4 theta: 0, pi/2, pi, 3 pi/2
    assert _steer(theta[0], theta[1:], _at(0.1)) == pytest.approx(0.0, abs=1e-12)


def test_a_gap_that_met_a_passing_obstacle_follows_it_and_the_rate_is_capped():
    theta_self, thetas = _ring(8)
    half = math.pi / 8
    # the target passes a hovering vehicle in the gap's middle at 2 m/s along y: seen from
    # the target, the vehicle turns clockwise at 2 cos(half)/R
    rate = _steer(theta_self, thetas, _at(half), target_velocity=(0.0, 2.0, 0.0))
    assert rate == pytest.approx(-2.0 * math.cos(half) / R)
    fast = _steer(theta_self, thetas, _at(half), target_velocity=(0.0, 30.0, 0.0))
    assert fast == pytest.approx(-CAP)


def test_several_obstacles_take_their_weighted_mean_and_rows_are_independent():
    theta_self, thetas = _ring(8)
    both = np.concatenate((_at(0.1), _at(-0.1)))
    assert _steer(theta_self, thetas, both) == pytest.approx(0.0, abs=1e-12)
    rows = gap_steer(np.array([theta_self, theta_self]), np.stack([thetas, thetas]),
                     np.ones((2, 7), dtype=bool), np.stack([both, np.concatenate(
                         (_at(0.1), np.full((1, 3), np.nan)))]), np.zeros((2, 3)),
                     np.zeros((2, 3)), PARAMS)
    assert rows == pytest.approx([0.0, _toward_gap(0.1)])
