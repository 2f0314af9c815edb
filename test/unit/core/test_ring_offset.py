"""The even-ring term (law.ring_offset): hand values and the properties the law relies on."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.law import ring_offset


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
    theta = np.sort(rng.uniform(0.0, 2.0 * math.pi, 12))
    offsets = _offsets(theta)
    gaps = np.diff(theta)
    # the one ahead is driven back relative to the one behind by (2 pi/n - gap): a narrow gap
    # opens and a wide one closes, never past each other
    assert np.diff(offsets) == pytest.approx(2.0 * math.pi / 12 - gaps)


def test_only_heard_members_count_and_alone_is_zero():
    theta_self = np.array([0.0, 1.0])
    thetas = np.array([[math.pi, 5.0], [9.9, 9.9]])
    heard = np.array([[True, False], [False, False]])
    # the first hears one member opposite (even), the second no one
    assert ring_offset(theta_self, thetas, heard) == pytest.approx([0.0, 0.0])
    assert ring_offset(0.0, np.array([1.0]), None) == pytest.approx((1.0 - math.pi) / 2)
