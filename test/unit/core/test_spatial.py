"""The vectorised engine's sorted and k-d tree work (core/spatial.py): core.law's bits."""
import numpy as np
import pytest

from soliton_encirclement_ros.core import spatial
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    crowded, ring_offset, silent_obstacles_within_reach, uncertainty_discs)
from soliton_encirclement_ros.core.spatial import (
    but_own, crowded_shared, obstacles_within_reach_shared, ring_offset_shared)

DEGENERATE = np.array([0.0, -0.0, 0.5, 3.0, np.nextafter(2.0 * np.pi, 0.0)])


def _heard(entry, own_cols):
    """Return the all-pairs table: each row's entries but its own column (M, N)."""
    return entry[None, :] & (np.arange(entry.size) != own_cols[:, None])


def _same(got, want):
    """Bitwise equality (NaN in the same places, the same signs of zero)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_but_own_is_any_of_the_rows_tables():
    mask = np.array([False, True, False])
    for own in ([], [1], [0], [0, 1], [1, 2]):
        own = np.array(own, dtype=np.int64)
        assert but_own(mask, own) == bool(np.any(_heard(mask, own)))


@pytest.mark.parametrize('block', [spatial.BLOCK, 7])
def test_the_ring_offset_of_the_shared_table_is_laws(monkeypatch, block):
    """
    The offset of each row equals law.ring_offset of its all-pairs row.

    Random rings and degenerate ones (many on a few angles, the one just below 2 pi), some
    columns no entry (NaN), rows where their own broadcast says, in blocks of any size.
    """
    monkeypatch.setattr(spatial, 'BLOCK', block)
    rng = np.random.default_rng(62)
    for trial in range(300):
        n = int(rng.integers(1, 40)) if trial % 10 else int(rng.integers(100, 400))
        theta = np.where(rng.random(n) < 0.4, rng.choice(DEGENERATE[:4 if trial % 2 else 5], n),
                         rng.uniform(0.0, 2.0 * np.pi, n))
        entry = rng.random(n) < 0.9
        theta = np.where(entry, theta, np.nan)
        own_cols = rng.permutation(n)[:int(rng.integers(0, n + 1))]
        own = np.where(rng.random(own_cols.size) < 0.3, np.nan_to_num(theta[own_cols]),
                       rng.uniform(0.0, 2.0 * np.pi, own_cols.size))
        _same(ring_offset_shared(own, theta, entry, own_cols),
              ring_offset(own, theta, _heard(entry, own_cols)))


def test_an_angle_of_two_pi_takes_laws_own_offset():
    """np.mod(2 pi, 2 pi) is 0, not 2 pi: outside [0, 2 pi) the offset is law's own call."""
    theta = np.array([2.0 * np.pi, 1.0, 2.0])
    entry = np.ones(3, dtype=bool)
    own_cols = np.array([1, 2])
    own = np.array([0.0, 2.0])
    _same(ring_offset_shared(own, theta, entry, own_cols),
          ring_offset(own, theta, _heard(entry, own_cols)))


def _crowd(rng, n, rows):
    """Return a crowd: broadcast states, rows' own states, some silent or a presence."""
    spread = rng.choice([2.0, 8.0, 40.0, 2000.0])
    speed = rng.choice([0.0, 1.0, 6.0])
    position = rng.uniform(-spread, spread, (n, 3))
    if rng.random() < 0.3:  # coincident vehicles
        position[rng.integers(0, n, n // 3)] = position[0]
    velocity = rng.normal(0.0, speed + 1e-3, (n, 3))
    own_cols = rng.permutation(n)[:rows]
    own = position[own_cols] + rng.normal(0.0, 0.05, (rows, 3))
    own_v = velocity[own_cols] + rng.normal(0.0, 0.1, (rows, 3))
    heard = rng.random(n) < 0.85
    silent = ~heard & (rng.random(n) < 0.5)
    age = rng.uniform(0.0, 0.3, n)
    presence = (rng.random(n) < 0.1) if rng.random() < 0.5 else None
    return own, own_v, own_cols, position, velocity, heard, silent, age, presence


def test_the_vehicles_within_reach_of_the_shared_table_are_laws():
    """
    The k-d tree's pairs, each tested with its own bound, gathered in column order: law's dict.

    Crowds from packed to spread wide, at rest to 6 m/s, with silent vehicles (discs growing
    at hold_drift, sized to each row's ring) and presences; over and under SHARED_COLUMNS.
    """
    params = ControllerParams(d_safe=2.0)
    rng = np.random.default_rng(1000)
    found = empty = 0
    for trial in range(80):
        n = int(rng.integers(spatial.SHARED_COLUMNS + 1, 300)) if trial % 4 else \
            int(rng.integers(2, spatial.SHARED_COLUMNS))
        rows = int(rng.integers(1, n + 1))
        own, own_v, own_cols, position, velocity, heard, silent, age, presence = _crowd(
            rng, n, rows)
        d_safe = rng.choice([0.5, 2.0], rows)
        discs = rng.random() < 0.5
        silent_for = rng.uniform(0.0, 3.0, n) if discs else None
        usable = rng.uniform(0.0, 1.0, rows) if discs else None
        usable_cols = np.arange(n) != own_cols[:, None]
        radius = None
        if discs:
            radius = uncertainty_discs(0.0, np.where(silent & usable_cols, silent_for, 0.0),
                                       usable, params)
        want = silent_obstacles_within_reach(
            own, own_v, d_safe, heard & usable_cols, silent & usable_cols, position, velocity,
            age, presence, params, radius)
        got = obstacles_within_reach_shared(
            own, own_v, d_safe, heard, silent, own_cols, position, velocity, age, presence,
            params, silent_for, usable)
        assert got.keys() == want.keys()
        for name in want:
            _same(got[name], want[name])
        found += bool(want)
        empty += not want
    assert found > 30 and empty > 5


def test_a_nan_state_takes_laws_own_scan():
    """A non-finite broadcast counts as within reach (law's NaN rule): law's call decides."""
    params = ControllerParams(d_safe=2.0)
    rng = np.random.default_rng(5)
    own, own_v, own_cols, position, velocity, heard, silent, age, presence = _crowd(rng, 100, 30)
    velocity[3] = np.nan
    heard[3] = True
    usable_cols = np.arange(100) != own_cols[:, None]
    want = silent_obstacles_within_reach(own, own_v, 2.0, heard & usable_cols,
                                         silent & usable_cols, position, velocity, age,
                                         presence, params)
    got = obstacles_within_reach_shared(own, own_v, 2.0, heard, silent, own_cols, position,
                                        velocity, age, presence, params)
    assert got.keys() == want.keys() and got
    for name in want:
        _same(got[name], want[name])


@pytest.mark.parametrize('n', [5, 64, 65, 400])
def test_crowded_over_a_shared_table_is_the_laws(n):
    """Blocks up to SHARED_COLUMNS counted, a k-d tree beyond: law.crowded's answer each row."""
    rng = np.random.default_rng(n)
    position = np.column_stack((rng.uniform(-30, 30, (n, 2)), rng.normal(10.0, 1.0, n)))
    position[3, 0] = np.nan                      # never nearer
    position[1] = position[0] + [0.0, 1.9, 0.0]  # a pair within 2 m
    kept = rng.random(n) < 0.9
    kept[:2] = True
    rows = np.arange(n)[rng.random(n) < 0.7]
    rows = np.union1d(rows, [0, 1])
    own = position[rows] + rng.normal(0.0, 0.01, (rows.size, 3))
    bound = rng.choice([0.0, 2.0, 3.0], rows.size)
    bound[:2] = 2.0
    want = crowded(own, np.broadcast_to(position, (rows.size, n, 3)),
                   _heard(kept, rows), bound)
    got = crowded_shared(own, kept, position, rows, bound)
    np.testing.assert_array_equal(got, want)
    assert got[:2].all() and (n < 10 or want.sum() < rows.size)
