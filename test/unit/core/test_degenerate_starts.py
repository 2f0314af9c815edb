"""
Degenerate starts spread into the ring in every engine.

Agents on one bearing from the target (PX4's multi-vehicle SITL spawn line), at one point, or
in a tight cluster: exact ties of angle follow the ring order (angle, id), so the ends of the
tie see the whole circle as a gap and pull the others apart. Without the tie-break every agent
saw two zero gaps and the swarm flew to one point (E_gap 1.73 for N = 4, d_min 0). The 40 s
runs in every engine: ``acceptance/test_degenerate_starts_acceptance.py``.
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.neighbours import gap_to_pred, gap_to_succ
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.sweep import chunks, Run


def test_exact_ties_of_angle_follow_the_ring_order():
    # three agents on one bearing, ids 1 < 2 < 3: ring order 1, 2, 3, back to 1
    assert gap_to_pred(1.0, 1.0, own_id=2, pred_id=1) == 0.0
    assert gap_to_succ(1.0, 1.0, own_id=2, succ_id=3) == 0.0
    assert gap_to_pred(1.0, 1.0, own_id=1, pred_id=3) == pytest.approx(2 * math.pi)
    assert gap_to_succ(1.0, 1.0, own_id=3, succ_id=1) == pytest.approx(2 * math.pi)
    # distinct angles are unchanged, and so is the call without ids
    assert gap_to_pred(1.0, 0.5, own_id=1, pred_id=3) == pytest.approx(0.5)
    assert gap_to_succ(6.0, 0.5, own_id=3, succ_id=1) == pytest.approx(0.5 + 2 * math.pi - 6.0)
    assert gap_to_pred(1.0, 1.0) == 0.0
    # vectorised, with a missing neighbour (NaN) kept NaN
    got = gap_to_pred(np.array([1.0, 1.0, 1.0]), np.array([1.0, 1.0, np.nan]),
                      np.array([2, 1, 1]), np.array([1, 3, -1]))
    assert got[:2] == pytest.approx([0.0, 2 * math.pi]) and math.isnan(got[2])


def test_placements_put_agents_where_they_say():
    collinear = Scenario(agents=4, placement='collinear', placement_spacing=2.0,
                         altitude=3.0).start_positions()
    np.testing.assert_allclose(collinear, [[0, 1, 3], [0, 3, 3], [0, 5, 3], [0, 7, 3]],
                               atol=1e-12)
    coincident = Scenario(agents=3, placement='coincident', placement_distance=5.0,
                          placement_bearing=0.0).start_positions()
    np.testing.assert_allclose(coincident, [[5, 0, 0]] * 3)
    cluster = Scenario(agents=50, placement='cluster', placement_distance=10.0,
                       seed=3).start_positions()
    assert np.all(np.hypot(cluster[:, 0], cluster[:, 1] - 10.0) <= 1.0)
    assert np.array_equal(cluster, Scenario(agents=50, placement='cluster',
                                            placement_distance=10.0, seed=3).start_positions())
    reference = Scenario(agents=5).start_positions()
    assert np.all(np.hypot(reference[:, 0], reference[:, 1]) > 0.8 * 20.0 - 1e-9)


def test_placement_file(tmp_path):
    path = tmp_path / 'start.yaml'
    path.write_text('- [1.0, 2.0]\n- [3.0, 4.0, 5.0]\n- [6, 7]\n')
    with pytest.raises(ValueError, match='one per agent'):  # a ragged list is not points
        Scenario(agents=3, placement='file', placement_file=str(path))
    path.write_text('- [1.0, 2.0]\n- [3.0, 4.0]\n- [6, 7]\n')
    s = Scenario(agents=3, placement='file', placement_file=str(path), altitude=2.0)
    np.testing.assert_allclose(s.start_positions(), [[1, 2, 2], [3, 4, 2], [6, 7, 2]])
    with pytest.raises(ValueError, match=r'must hold 4 finite points .* got 3'):
        Scenario(agents=4, placement='file', placement_file=str(path))
    with pytest.raises(ValueError, match='placement_file must be given exactly when'):
        Scenario(agents=3, placement='file')
    with pytest.raises(ValueError, match='cannot read placement file'):
        Scenario(agents=3, placement='file', placement_file=str(tmp_path / 'missing.yaml'))


def test_d_safe_must_fit_the_ring():
    as_set = {'d_safe': 2.0, 'd_safe_share': 0.0}  # d_safe flown as set, not sized to the ring
    with pytest.raises(ValueError, match=r'radius 20 m is too small for 100 agents d_safe 2 m '
                                         r'apart.*1\.26 m.*R > 31\.8 m'):
        Scenario(agents=100, controller=as_set)
    Scenario(agents=100, radius=32.0, controller=as_set)
    Scenario(agents=100, controller={'d_safe': 0.0})  # off: any ring
    # the default d_safe is sized to the ring: half its spacing, 0.63 m of 1.26 m
    assert Scenario(agents=100).gains.safety_distance(100) == pytest.approx(
        0.5 * 40.0 * math.sin(math.pi / 100))
    assert Scenario(agents=10).gains.safety_distance(10) == 2.0


def test_sweep_runs_a_placement_per_run():
    """Placement is a per-run field: runs of several starts share one chunk of the sweep."""
    base = Scenario(agents=4, duration=1.0, control_period=0.05)
    runs = [Run({'placement': p}, 0, base.with_changes(placement=p))
            for p in ('reference', 'collinear', 'coincident', 'cluster')]
    assert len(chunks(runs, 1)) == 1
    result = simulate_runs([r.scenario for r in runs], apart=2.0)
    starts = [r.scenario.start_positions() for r in runs]
    assert result.separation.overall[2] == 0.0  # coincident: every agent at one point
    for k, start in enumerate(starts):
        xy = start[:, :2]
        closest = min(math.dist(a, b) for i, a in enumerate(xy) for b in xy[i + 1:])
        assert result.separation.overall[k] <= closest + 1e-12
