"""The ring's gains (ring_gains_from): a crowd near the target moves gently, a ring fast."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    encirclement_step, encirclement_step_one, NeighbourView, ring_gain_share, ring_size_share,
    RING_STIFFNESS_NONE, RING_STIFFNESS_WHOLE, step_at_gains, step_at_gains_one)
from soliton_encirclement_ros.core.stability import growth_curve, ring_growth_rate

R = 20.0
BLENDED = ControllerParams(radius=R, ring_gains_from=0.5, ring_gains_full=0.75, d_safe=0.0)


def _views(r):
    """Neighbours 0.3 rad behind and 2 rad ahead of an agent at (r, 0), on the ring."""
    pred = NeighbourView(-0.3, (R * math.cos(0.3), -R * math.sin(0.3), 0.0), (0.0,) * 3,
                         0.2, 0.0, 1)
    succ = NeighbourView(2.0, (R * math.cos(2.0), R * math.sin(2.0), 0.0), (0.0,) * 3,
                         -0.1, 0.0, 2)
    return pred, succ


def _args(r):
    pred, succ = _views(r)
    return (1.5, np.array([r, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), np.array([0.5, 2.0, 0.0]),
            np.zeros(3), np.array([1.0, 0.0, 0.0]), 0.0, 0.0, pred, succ, 1.0, 1.0)


def _one(args):
    return tuple(tuple(map(float, a)) if isinstance(a, np.ndarray) else a for a in args)


def test_the_share_goes_over_from_the_crowds_gains_to_the_rings():
    assert ring_gain_share(0.0, BLENDED) == 0.0
    assert ring_gain_share(0.5 * R, BLENDED) == 0.0
    assert ring_gain_share(0.625 * R, BLENDED) == pytest.approx(0.5)
    assert ring_gain_share(0.75 * R, BLENDED) == 1.0
    assert ring_gain_share(3.0 * R, BLENDED) == 1.0
    np.testing.assert_allclose(ring_gain_share(np.array([5.0, 12.5, 40.0]), BLENDED),
                               [0.0, 0.5, 1.0])


def test_a_crowded_agent_flies_the_crowds_gains_wherever_it_is():
    """A vehicle it counts nearer than d_safe (law.crowded): share 0, in floats and arrays."""
    assert ring_gain_share(0.625 * R, BLENDED, True) == 0.0
    assert ring_gain_share(3.0 * R, BLENDED, np.True_) == 0.0
    np.testing.assert_array_equal(
        ring_gain_share(np.array([5.0, 12.5, 40.0, 40.0]), BLENDED,
                        np.array([False, True, False, True])), [0.0, 0.0, 1.0, 0.0])
    # the step of a crowded agent far out is the crowd's, one and many rows alike
    args = _args(3.0 * R)
    crowd = step_at_gains(*args, BLENDED)
    for got in (encirclement_step(*args, BLENDED, True), encirclement_step_one(
            args[0], *(tuple(map(float, a)) for a in args[1:6]), *args[6:], BLENDED, True)):
        assert float(got[0]) == float(crowd[0])
        np.testing.assert_array_equal(np.asarray(got[2], dtype=float), crowd[2])
    assert float(encirclement_step(*args, BLENDED)[0]) != float(crowd[0])


def test_the_rings_gains_replace_the_crowds_and_nothing_else():
    ring = BLENDED.ring_gains()
    assert (ring.k_tau, ring.k_e_tau, ring.k_omega_own, ring.ring_turn_acc) == (
        BLENDED.k_tau_ring, BLENDED.k_e_tau_ring, BLENDED.k_omega_own_ring,
        BLENDED.ring_turn_acc_ring)
    assert ring.ring_gains_from == 0.0
    swapped = {'k_tau', 'k_e_tau', 'k_omega_own', 'ring_turn_acc', 'ring_gains_from'}
    for name, value in BLENDED.as_dict().items():
        if name not in swapped:
            kept = getattr(ring, name)
            assert kept == value or (math.isnan(kept) and math.isnan(value)), name


@pytest.mark.parametrize('r', [4.0, 10.0, 12.5, 14.0, 15.0, 20.0, 35.0])
def test_the_step_is_the_crowds_inside_the_rings_outside_and_the_line_between(r):
    args = _args(r)
    crowd = step_at_gains(*args, BLENDED, ring_size=3, own_id=0)
    ring = step_at_gains(*args, BLENDED.ring_gains(), ring_size=3, own_id=0)
    got = encirclement_step(*args, BLENDED, ring_size=3, own_id=0)
    share = ring_gain_share(r, BLENDED)
    assert float(crowd[0]) != float(ring[0])  # the two laws differ on this state
    for have, low, high in zip(got, crowd, ring):
        if share == 0.0:
            assert np.asarray(have).tobytes() == np.asarray(low).tobytes()
        elif share == 1.0:
            assert np.asarray(have).tobytes() == np.asarray(high).tobytes()
        else:
            low, high = np.asarray(low), np.asarray(high)
            np.testing.assert_allclose(have, low + share * (high - low))
    # the float path, the very same bits
    one = encirclement_step_one(*_one(args), BLENDED, ring_size=3, own_id=0)
    assert np.float64(one[0]).tobytes() == np.float64(got[0]).tobytes()
    assert np.float64(one[1]).tobytes() == np.float64(got[1]).tobytes()
    assert np.array(one[2]).tobytes() == np.asarray(got[2]).tobytes()
    assert step_at_gains_one(*_one(args), BLENDED, ring_size=3, own_id=0)[0] == float(crowd[0])


def test_rows_at_every_distance_blend_each_by_its_own_share():
    radii = np.array([4.0, 12.5, 20.0])
    rows = [_args(r) for r in radii]
    pred = NeighbourView(*(np.array([getattr(a[8], f) for a in rows]) for f in
                           NeighbourView._fields))
    succ = NeighbourView(*(np.array([getattr(a[9], f) for a in rows]) for f in
                           NeighbourView._fields))
    stacked = tuple(np.array([a[k] for a in rows]) for k in range(8)) + (pred, succ, 1.0, 1.0)
    together = encirclement_step(*stacked, BLENDED, ring_size=3, own_id=0)
    for k, r in enumerate(radii):
        alone = encirclement_step(*_args(r), BLENDED, ring_size=3, own_id=0)
        assert together[0][k] == pytest.approx(float(alone[0]), rel=1e-12)
        np.testing.assert_allclose(together[2][k], alone[2], rtol=1e-12)


def test_a_large_ring_at_a_long_period_fades_to_the_crowds_gains():
    """
    The ring's gains apply whole while k_tau_ring k_e_tau_ring N P <= 400, none from 600.

    Stepped explicitly, their spacing loop's shortest wave grows in a large ring at a long
    period (the ring's gains alone: N = 128 at P = 0.1 s, +0.41/s); the crowd's hold it.
    """
    p = BLENDED.with_changes(control_period=0.1)  # k_tau_ring 1, k_e_tau_ring 100: N P 4 to 6
    assert (RING_STIFFNESS_WHOLE, RING_STIFFNESS_NONE) == (400.0, 600.0)
    assert ring_size_share(40, p) == 1.0 and ring_size_share(60, p) == 0.0
    assert ring_size_share(50, p) == pytest.approx(0.5)
    np.testing.assert_allclose(ring_size_share(np.array([0, 40, 45, 50, 60, 1000]), p),
                               [1.0, 1.0, 0.75, 0.5, 0.0, 0.0])
    # the share at a distance, times the fade: floats and arrays alike, bit for bit
    for n in (3, 45, 52, 70):
        one = ring_gain_share(0.7 * R, p, False, n)
        rows = ring_gain_share(np.array([0.7 * R]), p, np.array([False]), np.array([n]))
        assert np.float64(one).tobytes() == rows[0].tobytes()
        assert one == pytest.approx(0.8 * float(ring_size_share(n, p)))
    # the step of an agent hearing a ring of 70 at P = 0.1 s is the crowd's, far out
    args = _args(3.0 * R)
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(
        encirclement_step(*args, p, ring_size=70, own_id=0),
        step_at_gains(*args, p, ring_size=70, own_id=0)))
    assert ring_growth_rate(128, p.ring_gains()).rate > 0.3  # without the fade: grows
    ns = np.arange(3, 129)
    for period in (0.01, 0.05, 0.1):  # with it, every ring decays (also a 50 % slower vehicle)
        q = ControllerParams(control_period=period, ring_gains_from=0.5)
        assert np.all(growth_curve(ns, q, tau=1.0) < -0.15)
        assert np.all(growth_curve(ns, q, tau=1.5) < -0.15)


def test_off_it_is_the_crowds_step_and_the_kernels_cover_both():
    off = BLENDED.with_changes(ring_gains_from=0.0)
    args = _args(20.0)
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(
        encirclement_step(*args, off, ring_size=3, own_id=0),
        step_at_gains(*args, off, ring_size=3, own_id=0)))
    assert compiled.covers(BLENDED)  # (test_kernels: the kernel's blend is the numpy path's)
    assert compiled.covers(ControllerParams())


def test_a_band_that_does_not_rise_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r'^ring_gains_full = 0.5: must be above '
                                         r'ring_gains_from \(0.6\)$'):
        ControllerParams(ring_gains_from=0.6, ring_gains_full=0.5)
    ControllerParams(ring_gains_from=0.0, ring_gains_full=0.0)  # off: the band is not read
