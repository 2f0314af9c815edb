"""
analyze_run on bags written with rosbags' own Writer: outputs, comparisons, bad input, cut bags.

The CLI as a user runs it (in process, or as a process for the one-line errors), a few seconds
a test: the process-level part of ``unit/analysis/test_analysis.py``.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from soliton_encirclement_ros.analysis import cli
from soliton_encirclement_ros.analysis.animation import animation_file
from support.circle_bag import FLOAT, OMEGA, RADIUS, STORAGES, T, TS, write_circle_bag


@pytest.mark.parametrize('storage', sorted(STORAGES))
def test_agents_exactly_on_the_circle_give_ideal_metrics(tmp_path, storage):
    bag = write_circle_bag(tmp_path / 'circle', storage)
    assert cli.main([str(bag), '--out', str(tmp_path / 'out'), '--max-frames', '5']) == 0
    metrics = np.loadtxt(tmp_path / 'out' / 'metrics.csv', delimiter=',', skiprows=1)
    assert metrics.shape == (41, 7)  # 2 s at the default 0.05 s grid
    np.testing.assert_allclose(metrics[:, 0], np.arange(41) * 0.05, atol=1e-9)
    e_r, e_vr, rho, g_max, e_gap, d_min = metrics[:, 1:].T
    np.testing.assert_allclose(d_min, 2.0 * RADIUS * math.sin(math.pi / 6), atol=1e-6)
    np.testing.assert_allclose(e_r, 0.0, atol=1e-9)
    np.testing.assert_allclose(e_vr, 0.0, atol=1e-9)  # needs the body->world twist rotation
    np.testing.assert_allclose(rho, 0.0, atol=1e-9)
    np.testing.assert_allclose(g_max, 1.0, atol=1e-9)
    np.testing.assert_allclose(e_gap, 0.0, atol=1e-9)
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert summary['final']['G_max'] == pytest.approx(1.0)
    assert summary['settle_time'] == {'E_gap': 0.0, 'E_r': 0.0}
    assert summary['closest']['d_min'] == pytest.approx(RADIUS, abs=1e-6)
    assert summary['params']['agents'] == [f'uav{i}' for i in range(1, 7)]
    for name in ('E_r', 'E_vr', 'rho', 'G_max', 'E_gap', 'd_min', 'dashboard', 'trajectories'):
        assert (tmp_path / 'out' / f'{name}.png').stat().st_size > 1000
    video = (tmp_path / 'out' / animation_file()).read_bytes()
    assert video[:6] == b'GIF89a' or video[4:8] == b'ftyp'  # GIF, or MP4 where ffmpeg is
    agents = np.loadtxt(tmp_path / 'out' / 'agents.csv', delimiter=',', skiprows=1)
    assert agents.shape == (6 * 41, 4)
    np.testing.assert_allclose(agents[:, 3], OMEGA * RADIUS)


def test_two_bags_are_compared_in_one_figure(tmp_path):
    a = write_circle_bag(tmp_path / 'a' / 'run', agents=5)
    b = write_circle_bag(tmp_path / 'b' / 'run', agents=3, storage='sqlite3')
    assert cli.main([str(a), str(b), '--out', str(tmp_path / 'cmp'), '--max-frames', '0']) == 0
    assert (tmp_path / 'cmp' / 'comparison.png').stat().st_size > 1000
    for label in ('1_run', '2_run'):
        assert (tmp_path / 'cmp' / label / 'metrics.csv').exists()
        assert not (tmp_path / 'cmp' / label / animation_file()).exists()


def run_cli(*args):
    return subprocess.run([sys.executable, '-m', 'soliton_encirclement_ros.analysis.cli', *args],
                          capture_output=True, text=True, timeout=120)


def test_missing_path_is_one_line_and_nonzero(tmp_path):
    result = run_cli(str(tmp_path / 'nope'), '--out', str(tmp_path / 'out'))
    assert result.returncode == 1
    assert result.stderr.strip() == f'analyze_run: error: bag not found: {tmp_path / "nope"}'
    assert not (tmp_path / 'out').exists()


def test_bag_without_matching_topics_lists_the_topics_found(tmp_path):
    bag = write_circle_bag(tmp_path / 'bag', agents=2, duration=0.2)
    result = run_cli(str(bag), '--out', str(tmp_path / 'out'), '--agent-pattern', '^/drone')
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr
    assert "no agent odometry topic matching '^/drone'" in lines[0]
    assert '/uav1/odom [nav_msgs/msg/Odometry]' in lines[0]
    assert '/swarm/agent_states [std_msgs/msg/Float64MultiArray]' in lines[0]


def test_truncated_bag_is_analysed_up_to_the_cut(tmp_path):
    # 5 agents x 60 s x 20 Hz of odometry is several 1 MiB MCAP chunks; cut it in the middle.
    bag = write_circle_bag(tmp_path / 'cut', agents=5, duration=60.0)
    mcap = bag / 'cut.mcap'
    data = mcap.read_bytes()
    mcap.write_bytes(data[:int(len(data) * 0.6)])
    result = run_cli(str(bag), '--out', str(tmp_path / 'out'), '--max-frames', '0')
    assert result.returncode == cli.EXIT_TRUNCATED
    assert result.stderr.count('\n') == 1 and 'truncated bag' in result.stderr
    metrics = np.loadtxt(tmp_path / 'out' / 'metrics.csv', delimiter=',', skiprows=1)
    assert 5.0 < metrics[-1, 0] < 50.0  # part of the run, not all of it
    side = 2.0 * RADIUS * math.sin(math.pi / 5)  # 5 agents evenly on the circle
    np.testing.assert_allclose(metrics[:, 1:], np.tile([0, 0, 0, 1, 0, side], (len(metrics), 1)),
                               atol=1e-6)
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert 'cut inside a record' in summary['params']['truncated']


@pytest.mark.parametrize('label', [
    'id,seq,stamp,px,py,pz,vx,vy,vz,u,u_ss',  # the first package's unversioned states
    'agent_state.v9:agent_id,incarnation,seq,stamp_sec,stamp_nanosec,px,py,pz,vx,vy,vz,u,u_ss',
])
def test_agent_states_of_an_unknown_layout_are_set_aside_with_a_warning(tmp_path, label):
    """A layout this version cannot read costs the liveness only: odometry gives every metric."""
    bag = write_circle_bag(tmp_path / 'other', agents=5, state_label=label)
    result = run_cli(str(bag), '--out', str(tmp_path / 'out'), '--max-frames', '0')
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr
    assert lines[0].startswith(f'analyze_run: warning: {bag}: /swarm/agent_states set aside (')
    assert 'agent_state layout mismatch' in lines[0] and 'agent_state.v6' in lines[0]
    assert 'odometry alone' in lines[0]
    metrics = np.loadtxt(tmp_path / 'out' / 'metrics.csv', delimiter=',', skiprows=1)
    side = 2.0 * RADIUS * math.sin(math.pi / 5)
    np.testing.assert_allclose(metrics[:, 1:], np.tile([0, 0, 0, 1, 0, side], (len(metrics), 1)),
                               atol=1e-6)
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert summary['params']['liveness_from_agent_states'] is False
    assert summary['params']['warnings'] == [lines[0].split(f'{bag}: ', 1)[1]]


def _file(path, content: bytes):
    path.write_bytes(content)
    return path


def _bag_dir_with_storage(tmp_path, content: bytes):
    """Record a bag (metadata.yaml and all), then replace its storage file by ``content``."""
    bag = write_circle_bag(tmp_path / 'bag', agents=2, duration=0.2)
    (bag / 'bag.mcap').write_bytes(content)
    return bag


@pytest.mark.parametrize('make, code, message', [
    (lambda p: _file(p / 'empty.mcap', b''),
     cli.EXIT_TRUNCATED, 'truncated bag: {bag} is empty (0 bytes)'),
    (lambda p: _file(p / 'noise.mcap', bytes(range(256)) * 16),
     cli.EXIT_ERROR, 'not an MCAP bag: {bag} does not start with the MCAP magic bytes'),
    (lambda p: _file(p / 'noise.db3', b'x' * 4096),
     cli.EXIT_ERROR, 'not a rosbag2 sqlite3 bag'),
    (lambda p: _bag_dir_with_storage(p, b''), cli.EXIT_TRUNCATED,
     'truncated bag: {bag}/bag.mcap is empty (0 bytes)'),
    (lambda p: _bag_dir_with_storage(p, b'\x89MCAP0\r\n\x01\x10\x00'), cli.EXIT_TRUNCATED,
     'truncated bag {bag}: cut before its first topic'),
], ids=['empty file', 'random bytes', 'random db3', 'zero-byte storage', 'cut after the magic'])
def test_a_file_that_is_no_bag_or_is_cut_at_its_start_says_so(tmp_path, make, code, message):
    bag = make(tmp_path)
    result = run_cli(str(bag), '--out', str(tmp_path / 'out'))
    assert result.returncode == code
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr
    assert lines[0].startswith('analyze_run: error: ' + message.format(bag=bag)), lines[0]
    assert 'no agent odometry topic' not in lines[0]


def test_a_matching_topic_of_another_type_is_named(tmp_path):
    with Writer(tmp_path / 'typed', version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        pose = writer.add_connection('/uav1/odom', FLOAT, typestore=TS)
        target = writer.add_connection('/target/odom', FLOAT, typestore=TS)
        for k in range(3):
            for connection in (pose, target):
                writer.write(connection, k * 10**8, TS.serialize_cdr(T[FLOAT](data=1.0), FLOAT))
    result = run_cli(str(tmp_path / 'typed'), '--out', str(tmp_path / 'out'))
    assert result.returncode == cli.EXIT_ERROR
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert ("the topics matching '^/(?P<name>[^/]+)/odom$' are not nav_msgs/msg/Odometry: "
            '/uav1/odom [std_msgs/msg/Float64]') in lines[0]
    bag = write_circle_bag(tmp_path / 'ok', agents=2, duration=0.2)
    result = run_cli(str(bag), '--out', str(tmp_path / 'out2'), '--target-topic',
                     '/swarm/agent_states')
    assert result.returncode == cli.EXIT_ERROR
    assert ("target topic '/swarm/agent_states' is std_msgs/msg/Float64MultiArray, not "
            'nav_msgs/msg/Odometry') in result.stderr


@pytest.mark.parametrize('option, value, message', [
    ('--state-timeout', '-1', 'argument --state-timeout: must be > 0, got -1'),
    ('--max-frames', '-5', 'argument --max-frames: must be >= 0, got -5'),
    ('--period', 'fast', "argument --period: expected a number, got 'fast'"),
])
def test_bad_option_values_are_one_line_and_exit_2(tmp_path, option, value, message):
    bag = write_circle_bag(tmp_path / 'ok')
    result = run_cli(str(bag), '--out', str(tmp_path / 'out'), option, value)
    assert result.returncode == 2
    assert result.stderr.strip() == f'analyze_run: error: {message}'
    assert not (tmp_path / 'out').exists()
