"""Ring neighbours and hysteresis (core/neighbours.py)."""
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams, HYSTERESIS_SHARE
from soliton_encirclement_ros.core.neighbours import (
    apply_hysteresis, NO_NEIGHBOUR, ring_candidates, ring_choice, ring_neighbours,
    select_neighbours, select_neighbours_shared)


def test_ring_neighbours_sorted_by_angle_then_id():
    assert ring_neighbours(1, 0.5, [2, 3, 4], [1.0, 3.0, 6.0]) == (4, 2)
    assert ring_neighbours(1, 6.2, [2, 3], [1.0, 3.0]) == (3, 2)  # wraps around
    # equal angles: order by id, so 2 comes after 1 and 0 before it
    assert ring_neighbours(1, 1.0, [0, 2, 3], [1.0, 1.0, 4.0]) == (0, 2)


def test_ring_one_other_agent_is_both_and_alone_has_none():
    assert ring_neighbours(1, 0.5, [7], [4.0]) == (7, 7)
    assert ring_neighbours(1, 0.5, [], []) == (NO_NEIGHBOUR, NO_NEIGHBOUR)


def _ring_by_sorting(own_id, own_theta, ids, thetas):
    """Sort self and the others by (theta, id) and take the neighbours either side."""
    ring = sorted(zip(thetas, ids)) if len(ids) else []
    if not ring:
        return NO_NEIGHBOUR, NO_NEIGHBOUR
    ring = sorted(ring + [(own_theta, own_id)])
    k = ring.index((own_theta, own_id))
    return ring[k - 1][1], ring[(k + 1) % len(ring)][1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.sampled_from([0.0, 1.0, 2.0, 3.0, 6.0])
                          | st.floats(0.0, 6.28)),
                min_size=1, max_size=8, unique_by=lambda t: t[0]),
       st.floats(0.0, 6.28), st.randoms(use_true_random=False))
def test_array_ring_candidates_equal_the_sorted_ring(entries, stale_own_theta, rnd):
    """ring_candidates (rows x columns, any column order, masks) == sorting by (theta, id)."""
    rnd.shuffle(entries)
    ids = np.array([e[0] for e in entries])
    thetas = np.array([e[1] for e in entries])
    askers = np.arange(0, 14)
    own_thetas = np.where(np.isin(askers, ids), stale_own_theta, (askers * 0.9) % 6.28)
    own_thetas[::3] = thetas[0]  # exact ties with a stored angle
    visible = (ids != askers[:, None]) & np.array(
        [[rnd.random() < 0.8 for _ in ids] for _ in askers])
    pred, succ = ring_candidates(visible, thetas, own_thetas, askers, ids)
    for k, agent in enumerate(askers):
        use = visible[k]
        want = _ring_by_sorting(agent, own_thetas[k], ids[use].tolist(), thetas[use].tolist())
        got = tuple(NO_NEIGHBOUR if c == NO_NEIGHBOUR else ids[c] for c in (pred[k], succ[k]))
        assert got == want


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


def test_hysteresis_kept_is_at_most_a_share_of_the_even_gap():
    params = ControllerParams()
    assert params.hysteresis == 0.05
    for n in (0, 1, 2, 10, 37):  # 0.3 x 2 pi / 37 = 0.0509: the setting itself
        assert params.neighbour_hysteresis(n) == 0.05
    assert params.neighbour_hysteresis(100) == HYSTERESIS_SHARE * 2.0 * np.pi / 100  # 0.0188
    per_agent = params.neighbour_hysteresis(np.array([1, 10, 100]))
    np.testing.assert_array_equal(per_agent, [0.05, 0.05, HYSTERESIS_SHARE * 2.0 * np.pi / 100])


def test_a_candidate_half_a_gap_away_replaces_a_neighbour_two_places_away_in_a_ring_of_100():
    # Seed 4 of N = 100 with d_safe: agent 84's successor stayed agent 61, two places ahead,
    # while agent 27 sat between them half a gap (1.8 deg) from each, held there by d_safe;
    # 0.05 rad of hysteresis (2.9 deg) kept 61 for good and E_gap at 0.087.
    gap = 2.0 * np.pi / 100
    ids = np.array([25, 27, 61], dtype=np.int64)
    thetas = np.array([-gap, 0.5 * gap, gap])
    params = ControllerParams()
    pred, succ = ring_choice(0.0, 84, ids, thetas, 25, 61, params.neighbour_hysteresis(100))
    assert (ids[pred], ids[succ]) == (25, 27)
    pred, succ = ring_choice(0.0, 84, ids, thetas, 25, 61, params.hysteresis)
    assert (ids[pred], ids[succ]) == (25, 61)  # the stuck choice, with the setting alone


def _shared_table(rng, n, angles):
    """Return a shared table of n agents (ids shuffled), some not entries, and rows asking."""
    ids = rng.permutation(3 * n)[:n].astype(np.int64)
    theta = np.where(rng.random(n) < 0.5, rng.choice(angles, n), rng.uniform(0.0, 6.28, n))
    entry = rng.random(n) < 0.85
    theta = np.where(entry, theta, np.nan)  # the engine's angle of no entry
    rows = rng.permutation(n)[:int(rng.integers(0, n + 1))]
    own = np.where(rng.random(rows.size) < 0.5, rng.choice(angles, rows.size),
                   rng.uniform(0.0, 6.28, rows.size))
    stale = rng.random(rows.size) < 0.3  # where it is now is where its broadcast said
    own = np.where(stale & entry[rows], np.nan_to_num(theta[rows]), own)

    def current():
        return np.where(rng.random(rows.size) < 0.3, NO_NEIGHBOUR,
                        rng.integers(0, n, rows.size)).astype(np.int64)
    hysteresis = rng.choice([0.0, 0.05, 1.0, 7.0]) if rng.random() < 0.5 else \
        rng.uniform(0.0, 1.0, rows.size)
    return entry, theta, own, ids[rows], ids, rows, current(), current(), hysteresis


def test_the_sorted_selection_is_the_all_pairs_one():
    """
    select_neighbours_shared picks what select_neighbours picks on the shared table: ties too.

    Random tables, and degenerate ones: many agents on a few angles (a coincident or collinear
    start), an agent where its own broadcast says, current neighbours gone, itself or none,
    every hysteresis from none to more than the circle; one row alone; no entry at all.
    """
    rng = np.random.default_rng(63)
    degenerate = np.array([0.0, 1.0, 3.0, 6.0, np.nextafter(2.0 * np.pi, 0.0)])
    checked = 0
    for trial in range(1000):
        n = int(rng.integers(1, 14)) if trial % 10 else int(rng.integers(50, 200))
        entry, theta, own, own_ids, ids, rows, cur_pred, cur_succ, hysteresis = _shared_table(
            rng, n, degenerate if trial % 3 else degenerate[:2])
        visible = entry[None, :] & (np.arange(n) != rows[:, None])
        want = select_neighbours(visible, theta, own, own_ids, ids, cur_pred, cur_succ,
                                 hysteresis)
        got = select_neighbours_shared(entry, theta, own, own_ids, ids, rows, cur_pred,
                                       cur_succ, hysteresis)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        checked += rows.size
    assert checked > 4000


def test_the_sorted_selection_breaks_ties_by_id():
    """Agents on one bearing (a coincident start): the ring follows the ids either side."""
    ids = np.array([7, 3, 9, 1, 5], dtype=np.int64)
    theta = np.full(5, 1.0)
    rows = np.arange(5)
    none = np.full(5, NO_NEIGHBOUR)
    pred, succ = select_neighbours_shared(np.ones(5, dtype=bool), theta, theta, ids, ids, rows,
                                          none, none, 0.05)
    # ring order 1, 3, 5, 7, 9: each sits between the ids either side of its own
    assert dict(zip(ids.tolist(), zip(ids[pred].tolist(), ids[succ].tolist()))) == {
        1: (9, 3), 3: (1, 5), 5: (3, 7), 7: (5, 9), 9: (7, 1)}
