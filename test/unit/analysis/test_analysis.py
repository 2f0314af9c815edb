"""
Test analyze_run and the analysis library on bags written here with rosbags' own Writer.

An independent writer (no code of ours on the writing side), in both storage formats.
"""
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_typestore, Stores

from soliton_encirclement_ros.analysis import cli
from soliton_encirclement_ros.analysis.animation import animation_file
from soliton_encirclement_ros.analysis.recompute import (
    load_run, metrics_from_bag, published_metrics, STATE_COLUMNS)
from velocity_mobility_ros.core.geometry import rotate_by_quaternion

TS = get_typestore(Stores.ROS2_KILTED)
T = TS.types
RADIUS = 20.0
TARGET = np.array([3.0, -2.0])
OMEGA = 0.2  # rad/s around the target
STORAGES = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
ODOM, STATES, FLOAT = (
    'nav_msgs/msg/Odometry',
    'std_msgs/msg/Float64MultiArray',
    'std_msgs/msg/Float64',
)


def odometry(t, name, xy, yaw, forward_speed):
    """Odometry as a vehicle publishes it: pose in world, twist in the body frame."""
    sec, nsec = divmod(int(round(t * 1e9)), 10**9)
    header = T['std_msgs/msg/Header'](
        stamp=T['builtin_interfaces/msg/Time'](sec=sec, nanosec=nsec), frame_id='world'
    )
    pose = T['geometry_msgs/msg/Pose'](
        position=T['geometry_msgs/msg/Point'](x=float(xy[0]), y=float(xy[1]), z=5.0),
        orientation=T['geometry_msgs/msg/Quaternion'](x=0.0, y=0.0, z=math.sin(yaw / 2),
                                                      w=math.cos(yaw / 2)))
    vector = T['geometry_msgs/msg/Vector3']
    twist = T['geometry_msgs/msg/Twist'](linear=vector(x=forward_speed, y=0.0, z=0.0),
                                         angular=vector(x=0.0, y=0.0, z=0.0))
    return T[ODOM](
        header=header, child_frame_id=f'{name}/base_link',
        pose=T['geometry_msgs/msg/PoseWithCovariance'](pose=pose, covariance=np.zeros(36)),
        twist=T['geometry_msgs/msg/TwistWithCovariance'](twist=twist, covariance=np.zeros(36)))


# The agent-state wire layouts, written out here independently of the package's interface:
# v4 (now: ``member``, 0 for a failed agent's presence broadcast), v3 (archived: the stamp as
# integer seconds and nanoseconds) and v2 (archived: float seconds).
STATE_LABEL = ('agent_state.v4:agent_id,incarnation,seq,stamp_sec,stamp_nanosec,px,py,pz,vx,vy,'
               'vz,u,u_ss,member')
STATE_LABEL_V3 = ('agent_state.v3:agent_id,incarnation,seq,stamp_sec,stamp_nanosec,px,py,pz,vx,'
                  'vy,vz,u,u_ss')
STATE_LABEL_V2 = 'agent_state.v2:agent_id,incarnation,seq,stamp,px,py,pz,vx,vy,vz,u,u_ss'


def agent_state(agent_id, seq, t, xy, velocity, label=STATE_LABEL, member=True):
    stamp = (list(divmod(int(round(t * 1e9)), 10**9))
             if label.startswith(('agent_state.v3', 'agent_state.v4')) else [t])
    values = [agent_id, 7, seq, *stamp, xy[0], xy[1], 5.0, velocity[0], velocity[1], 0.0, 0.5,
              0.5] + ([float(member)] if label.endswith(',member') else [])
    if not label.startswith('agent_state.v'):  # the v1 layout: no incarnation
        del values[1]
    layout = T['std_msgs/msg/MultiArrayLayout'](
        dim=[T['std_msgs/msg/MultiArrayDimension'](label=label, size=len(values),
                                                   stride=len(values))], data_offset=0)
    return T[STATES](layout=layout, data=np.array(values, dtype=float))


def write_circle_bag(path, storage='mcap', agents=6, duration=2.0, rate=20.0, failed_after=None,
                     state_label=STATE_LABEL):
    """
    ``agents`` vehicles uav1..

    on the desired circle at equal angles, turning around a still target, plus /swarm/agent_states.
    With ``failed_after`` an extra vehicle uav<agents+1> sits on the target and fails at that
    time (it keeps publishing odometry): from then on it sends presence broadcasts (``member``
    0) in a layout that has them, else nothing.
    """
    with Writer(path, version=9, storage_plugin=STORAGES[storage]) as writer:
        connections = {}

        def write(topic, msgtype, t, msg):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TS)
            writer.write(connections[topic], int(round(t * 1e9)), TS.serialize_cdr(msg, msgtype))

        for k in range(int(duration * rate) + 1):
            t = 10.0 + k / rate
            write('/target/odom', ODOM, t, odometry(t, 'target', TARGET, 0.0, 0.0))
            for i in range(agents):
                angle = 2 * math.pi * i / agents + OMEGA * t
                xy = TARGET + RADIUS * np.array([math.cos(angle), math.sin(angle)])
                heading = angle + math.pi / 2  # flying tangentially, nose first
                speed = OMEGA * RADIUS
                write(f'/uav{i + 1}/odom', ODOM, t, odometry(t, f'uav{i + 1}', xy, heading, speed))
                write('/swarm/agent_states', STATES, t, agent_state(
                    i + 1, k, t, xy, speed * np.array([math.cos(heading), math.sin(heading)]),
                    state_label))
            if failed_after is not None:
                name = f'uav{agents + 1}'
                write(f'/{name}/odom', ODOM, t, odometry(t, name, TARGET, 0.0, 0.0))
                member = t - 10.0 < failed_after
                if member or state_label.endswith(',member'):
                    write('/swarm/agent_states', STATES, t, agent_state(
                        agents + 1, k, t, TARGET, np.zeros(2), state_label, member))
            write('/swarm/metrics/E_r', FLOAT, t, T[FLOAT](data=0.0))
    return path


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
    assert 'EndOfFile' in summary['params']['truncated']


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
    assert 'agent_state layout mismatch' in lines[0] and 'agent_state.v5' in lines[0]
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
