"""
Test the analysis library on bags written here with rosbags' own Writer (support/circle_bag.py).

An independent writer (no code of ours on the writing side), in both storage formats. analyze_run
as a process on such bags: ``acceptance/test_analyze_run_acceptance.py``.
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.analysis import cli
from soliton_encirclement_ros.analysis.recompute import (
    load_run, metrics_from_bag, published_metrics, STATE_COLUMNS)
from support.circle_bag import STATE_LABEL, STATE_LABEL_V2, STATE_LABEL_V3, write_circle_bag
from velocity_mobility_ros.core.geometry import rotate_by_quaternion


def test_agent_whose_states_stop_is_failed_and_excluded(tmp_path):
    bag = write_circle_bag(tmp_path / 'fail', failed_after=1.0)
    run = load_run(bag)
    assert run.agent_ids == {f'uav{i}': i for i in range(1, 8)}
    metrics = metrics_from_bag(bag, times=10.0 + np.array([0.5, 0.9, 1.2, 1.5, 2.0]))
    # Live on the target (r = 0) while its states come: E_r = sqrt(1/7); failed 0.15 s after
    # its last state (t = 0.95 s): the six on the circle remain.
    np.testing.assert_allclose(metrics[:2, 1], math.sqrt(1 / 7), rtol=1e-9)
    np.testing.assert_allclose(metrics[2:, 1], 0.0, atol=1e-9)
    np.testing.assert_allclose(metrics[2:, 4], 1.0, atol=1e-9)


def test_agent_pattern_and_target_topic_options(tmp_path):
    bag = write_circle_bag(tmp_path / 'opts', agents=4)
    metrics = metrics_from_bag(bag, agent_pattern=r'^/uav[12]/odom$', period=0.5)
    # Only uav1 and uav2 kept, a quarter turn apart: gaps pi/2 and 3pi/2, ideal gap pi.
    np.testing.assert_allclose(metrics[:, 4], 1.5, atol=1e-9)
    assert metrics_from_bag(bag, radius=10.0, period=1.0)[0, 1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"no nav_msgs/msg/Odometry target topic '/tgt/odom'"):
        metrics_from_bag(bag, target_topic='/tgt/odom')


def test_published_metrics_are_read_back(tmp_path):
    bag = write_circle_bag(tmp_path / 'pub', duration=1.0)
    series = published_metrics(bag)
    assert list(series) == ['E_r']
    assert series['E_r'].shape == (21, 2)
    np.testing.assert_allclose(series['E_r'][:, 0], 10.0 + np.arange(21) / 20.0)


def test_world_velocity_rotates_body_twist_by_orientation():
    yaw = np.array([0.0, math.pi / 2, math.pi])
    quaternion = np.column_stack((np.zeros(3), np.zeros(3), np.sin(yaw / 2), np.cos(yaw / 2)))
    world = rotate_by_quaternion(quaternion, np.tile([1.0, 0.0, 0.5], (3, 1)))
    np.testing.assert_allclose(world, [[1, 0, 0.5], [0, 1, 0.5], [-1, 0, 0.5]], atol=1e-12)


def test_bags_recorded_with_the_v2_and_v3_layouts_read_as_the_v4_one(tmp_path):
    """
    Archived bags (float-second stamps; no presence) give the same run, liveness included.

    In the v4 bag the failed vehicle goes on with presence broadcasts: they are no live agent.
    """
    kept = {}
    for label in (STATE_LABEL, STATE_LABEL_V3, STATE_LABEL_V2):
        bag = write_circle_bag(tmp_path / label[:14], failed_after=1.0, state_label=label)
        kept[label] = load_run(bag), metrics_from_bag(bag)
    new, new_metrics = kept[STATE_LABEL]
    for old, old_metrics in (kept[STATE_LABEL_V3], kept[STATE_LABEL_V2]):
        np.testing.assert_array_equal(old.states, new.states)
        np.testing.assert_array_equal(old_metrics, new_metrics)
        assert old.agent_ids == new.agent_ids == {f'uav{i}': i for i in range(1, 8)}
    old = kept[STATE_LABEL_V2][0]
    stamp_sec = STATE_COLUMNS.index('stamp_sec')
    stamp_nanosec = STATE_COLUMNS.index('stamp_nanosec')
    # Each state is stamped at its recording time (10.0 s + k / 20 Hz): exact to the nanosecond.
    stamp_ns = old.states[:, stamp_sec].astype(np.int64) * 10**9 + old.states[:, stamp_nanosec]
    np.testing.assert_array_equal(stamp_ns, np.round(old.states[:, 0] * 1e9).astype(np.int64))
    assert old.states[:, stamp_sec].min() == 10 and old.states[:, stamp_sec].max() == 12


@pytest.mark.parametrize('compare, error', [
    ('nope', 'bag not found: {}'),
    ('empty_dir', 'not a bag: {} holds no .mcap or .db3 storage file'),
])
def test_a_compare_bag_is_checked_before_the_first_is_analysed(tmp_path, capsys, compare,
                                                               error):
    bag = write_circle_bag(tmp_path / 'circle', agents=3)
    (tmp_path / 'empty_dir').mkdir()
    other = tmp_path / compare
    out = tmp_path / 'out'
    assert cli.main([str(bag), '--compare', str(other), '--out', str(out)]) == 1
    assert capsys.readouterr().err.splitlines() == [f'analyze_run: error: {error.format(other)}']
    assert not out.exists()  # nothing of the first bag was analysed


def test_the_report_of_a_truncated_bag_says_it_is_partial(tmp_path):
    bag = write_circle_bag(tmp_path / 'cut', agents=5, duration=60.0)
    mcap = bag / 'cut.mcap'
    data = mcap.read_bytes()
    mcap.write_bytes(data[:int(len(data) * 0.6)])
    out = tmp_path / 'out'
    assert cli.main([str(bag), '--report', '--out', str(out), '--max-frames', '0']) == 3
    report = (out / 'report.html').read_text()
    assert 'partial: the bag is truncated and only its readable part is analysed' in report


def test_the_report_of_an_engine_bag_says_why_it_has_no_timeline(tmp_path):
    bag = write_circle_bag(tmp_path / 'engine', agents=3, engine_statuses=True)
    out = tmp_path / 'out'
    assert cli.main([str(bag), '--report', '--out', str(out), '--max-frames', '0']) == 0
    report = (out / 'report.html').read_text()
    assert ('no vehicle timeline: none of the 9 statuses in /diagnostics carries an agent state '
            'or a PX4 bridge phase (a swarm_sim --engine run') in report


def test_without_out_the_outputs_go_beside_the_bag(tmp_path, capsys):
    """``analyze_run BAG --report`` as the pages show it: NAME_analysis next to the bag."""
    bag = write_circle_bag(tmp_path / 'runs' / 'flight1', agents=3)
    assert cli.main([str(bag), '--report', '--max-frames', '0']) == 0
    out = tmp_path / 'runs' / 'flight1_analysis'
    assert (out / 'report.html').is_file() and (out / 'summary.json').is_file()
    assert f'outputs in {out};' in capsys.readouterr().out
    assert cli.default_out(str(tmp_path / 'b.mcap')) == tmp_path / 'b_analysis'
