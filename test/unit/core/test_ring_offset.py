"""The even-ring term (law.ring_offset): hand values and the properties the law relies on."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    crowded, RING_GATE_SHARE, ring_offset, ring_offset_gate, ring_ramp)


def _offsets(theta):
    """Every member's offset from the ring it hears (all the others)."""
    theta = np.asarray(theta, dtype=float)
    others = np.array([np.delete(theta, i) for i in range(theta.size)])
    return ring_offset(theta, others)


def test_even_ring_has_no_offset_whatever_the_order():
    theta = 2.0 * math.pi * np.arange(7) / 7 + 0.3
    rng = np.random.default_rng(1)
    assert _offsets(rng.permutation(theta)) == pytest.approx(np.zeros(7), abs=1e-12)


def test_one_displaced_member_is_driven_back_by_its_share():
    # four agents at 0, pi/2, pi, 3pi/2 with the one at pi/2 moved 0.2 rad ahead
    theta = np.array([0.0, math.pi / 2 + 0.2, math.pi, 1.5 * math.pi])
    offsets = _offsets(theta)
    # it hears the others 0.2 rad nearer ahead: (sum - 3 pi)/4 = -3 x 0.2/4
    assert offsets[1] == pytest.approx(-0.15)
    assert offsets[[0, 2, 3]] == pytest.approx([0.05, 0.05, 0.05])
    assert offsets.sum() == pytest.approx(0.0, abs=1e-12)  # it does not spin the ring


def test_neighbours_offsets_differ_by_the_even_gap_less_theirs():
    rng = np.random.default_rng(4)
    even = 2.0 * math.pi / 12
    # every gap at least half the even one (RING_GATE_SHARE): the term whole
    theta = np.sort(even * np.arange(12) + rng.uniform(-0.24, 0.24, 12) * even)
    offsets = _offsets(theta)
    gaps = np.diff(theta)
    # the one ahead is driven back relative to the one behind by (2 pi/n - gap): a narrow gap
    # opens and a wide one closes, never past each other
    assert np.diff(offsets) == pytest.approx(2.0 * math.pi / 12 - gaps)


def test_the_term_fades_toward_a_near_member():
    """It drives no agent into a neighbour under RING_GATE_SHARE of the even gap away."""
    even = 2.0 * math.pi / 4
    # four bunched on a quarter of the ring: the fit drives the one at 0.1 even gaps back,
    # into the one at 0 (which it drives back faster)
    theta = np.array([0.0, 0.1 * even, 0.6 * even, 1.2 * even])
    whole = (np.sum(np.mod(np.delete(theta, 1) - theta[1], 2.0 * math.pi)) - 3.0 * math.pi) / 4
    assert whole == pytest.approx(-0.125 * even)
    offsets = _offsets(theta)
    assert offsets[1] == pytest.approx(whole * 0.1 / RING_GATE_SHARE)  # faded
    assert offsets[[0, 2, 3]] == pytest.approx(np.array([-1.025, 0.375, 0.775]) * even)
    assert ring_offset_gate(np.array([0.0, 0.25, 0.5, 2.0]) * even, 4.0) == pytest.approx(
        [0.0, 0.25 / RING_GATE_SHARE, 1.0, 1.0])


def test_a_start_at_one_point_has_no_offset():
    """Every member at the same angle: the fitted ring's order is arbitrary, so no drive."""
    assert _offsets(np.full(5, 1.2)) == pytest.approx(np.zeros(5))


def test_the_ramp_restarts_when_the_membership_changes():
    params = ControllerParams(ring_ramp=5.0, control_period=0.1,  # agent_timeout 0.3 s
                              ring_ramp_silent=False)
    # first tick (never ticked): from 0; ticking on at the same size since 1 s: whole
    weight, changed = ring_ramp(np.array([6, 6]), np.array([0, 6]), np.array([-math.inf, 1.0]),
                                np.array([-math.inf, 9.9]), 10.0, params)
    assert weight == pytest.approx([0.0, 1.0]) and changed == pytest.approx([10.0, 1.0])
    # 2 s on: the first at 0.4; the second hears one member fewer: from 0 again
    weight, changed = ring_ramp(np.array([6, 5]), np.array([6, 6]), changed,
                                np.array([11.9, 11.9]), 12.0, params)
    assert weight == pytest.approx([0.4, 0.0]) and changed == pytest.approx([10.0, 12.0])
    # back from its own outage (last tick 1 s ago, over agent_timeout), the same size heard:
    # the others lost it and re-spaced, so from 0 as well
    weight, changed = ring_ramp(6, 6, 1.0, 11.0, 12.0, params)
    assert weight == 0.0 and changed == 12.0
    # a clock that stepped back gives none; ring_ramp 0: the whole term at once
    assert ring_ramp(6, 6, 12.0, 11.0, 11.05, params)[0] == 0.0
    assert ring_ramp(6, 5, 12.0, 12.0, 12.1, ControllerParams(ring_ramp=0.0))[0] == 1.0


def test_with_ring_ramp_silent_only_a_silent_vehicle_or_a_return_restarts_the_ramp():
    """A member failed with its presence, or back, is known: the ring re-spaces at once."""
    params = ControllerParams(ring_ramp=5.0, control_period=0.1, ring_ramp_silent=True)
    # three agents at 0.4 of the ramp: one member fewer heard, with and without a silent
    # vehicle counted; the same size heard, a silent vehicle counted
    weight, changed = ring_ramp(np.array([5, 5, 6]), np.array([6, 6, 6]),
                                np.full(3, 10.0), np.full(3, 11.9), 12.0, params,
                                np.array([False, True, True]))
    assert weight == pytest.approx([0.4, 0.0, 0.4])
    assert changed == pytest.approx([10.0, 12.0, 10.0])
    # its first tick, and back from its own outage: from 0 whatever it hears
    weight, changed = ring_ramp(np.array([6, 6]), np.array([0, 6]), np.array([-math.inf, 1.0]),
                                np.array([-math.inf, 11.0]), 12.0, params, False)
    assert weight == pytest.approx([0.0, 0.0]) and changed == pytest.approx([12.0, 12.0])
    for size, last, silent in [(5, 6, False), (5, 6, True), (6, 6, True), (7, 6, False)]:
        one = ring_ramp(size, last, 10.0, 11.9, 12.0, params, silent)
        rows = ring_ramp(np.array([size]), np.array([last]), np.array([10.0]),
                         np.array([11.9]), 12.0, params, np.array([silent]))
        assert isinstance(one[0], float) and one == (rows[0][0], rows[1][0])
        assert one[0] == (0.0 if silent and size != last else pytest.approx(0.4))
    # off (the default): any change restarts it, silent or not
    assert ring_ramp(5, 6, 10.0, 11.9, 12.0, ControllerParams(ring_ramp=5.0))[0] == 0.0


def test_a_crowd_is_a_counted_vehicle_nearer_than_d_safe_in_the_plane():
    """law.crowded: what ring_ramp_silent restarts the ramp for besides a silent vehicle."""
    own = np.array([[0.0, 0.0, 10.0], [5.0, 5.0, 10.0]])
    others = np.array([[[1.9, 0.0, 30.0], [0.0, 0.5, 10.0]],   # 1.9 m away, 20 m above
                       [[7.0, 5.0, 10.0], [np.nan, 5.0, 10.0]]])  # exactly 2 m; NaN
    counted = np.array([[True, False], [True, True]])
    assert crowded(own, others, counted, np.array([2.0, 2.0])).tolist() == [True, False]
    # the one 0.5 m away counts only where its d_safe term counts it; d_safe 0: never
    assert crowded(own, others, np.array([[False, True], [True, True]]), 1.0).tolist() == \
        [True, False]
    assert not crowded(own, others, np.ones((2, 2), dtype=bool), np.zeros(2)).any()
    # one agent: a bool of its rows
    assert crowded(own[0], others[0], counted[0], 2.0) == np.True_
    assert crowded(own[0], others[0, :0], counted[0, :0], 2.0) == np.False_


def test_the_ramp_of_one_agent_in_floats_is_the_arrays_one():
    params = ControllerParams(ring_ramp=5.0, control_period=0.1)
    cases = [(6, 6, 1.0, 11.0, 12.0), (6, 6, 10.3, 12.95, 13.0), (6, 5, 10.3, 12.95, 13.0),
             (1, 0, -math.inf, -math.inf, 0.0), (6, 6, 12.0, 11.0, 11.05)]
    for size, last, changed, tick, now in cases:
        one = ring_ramp(size, last, changed, tick, now, params)
        rows = ring_ramp(np.array([size]), np.array([last]), np.array([changed]),
                         np.array([tick]), now, params)
        assert isinstance(one[0], float) and one == (rows[0][0], rows[1][0])


def test_only_heard_members_count_and_alone_is_zero():
    theta_self = np.array([0.0, 1.0])
    thetas = np.array([[math.pi, 5.0], [9.9, 9.9]])
    heard = np.array([[True, False], [False, False]])
    # the first hears one member opposite (even), the second no one
    assert ring_offset(theta_self, thetas, heard) == pytest.approx([0.0, 0.0])
    assert ring_offset(0.0, np.array([1.0]), None) == pytest.approx((1.0 - math.pi) / 2)
