"""
run_recorder as a separate process on a real DDS graph.

Ctrl-C (SIGINT) or SIGTERM closes the bag, which then holds every message published before the
signal. A sqlite3 recorder killed with SIGKILL leaves every message it committed (once a second)
readable, and analyze_run analyses that part (exit 3).
"""
from contextlib import closing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys

from nav_msgs.msg import Odometry
import pytest
import rclpy
from rclpy.duration import Duration
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.highlevel import AnyReader
from std_msgs.msg import Float64, Float64MultiArray
import yaml

from soliton_encirclement_ros.analysis.bag_reader import Bag
from soliton_encirclement_ros.sim.executables import find_executable
from support.harness import spin_until
from support.waits import DEADLINE

COUNT = 30
WAIT = DEADLINE  # process start-up and DDS discovery: seconds, tens of them under load


def recorder_command(*args):
    script = shutil.which('run_recorder', path=os.path.dirname(sys.executable))
    return [script, *args] if script else [
        sys.executable, '-m', 'soliton_encirclement_ros.nodes.recorder_node', *args]


@pytest.fixture
def publisher_node():
    rclpy.init()
    node = rclpy.create_node('test_recorder_publisher')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    yield node, executor
    executor.shutdown()
    node.destroy_node()
    rclpy.shutdown()


@pytest.mark.parametrize('stop_signal', [signal.SIGINT, signal.SIGTERM])
def test_signal_closes_a_readable_bag_with_every_message(publisher_node, tmp_path, stop_signal):
    node, executor = publisher_node
    reliable = QoSProfile(depth=COUNT, reliability=ReliabilityPolicy.RELIABLE)
    metric = node.create_publisher(Float64, '/swarm/metrics/rho', reliable)
    states = node.create_publisher(Float64MultiArray, '/swarm/agent_states', reliable)
    other = node.create_publisher(Float64, '/not/recorded', reliable)
    bag = tmp_path / 'run'
    process = subprocess.Popen(
        recorder_command('-o', str(bag), '--ros-args', '-p', 'discovery_period:=0.2'),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The recorder's start (its imports) takes seconds, tens of them on a loaded machine:
        # the suite's deadline, not a start-up guess (20 s was too short at load 30).
        subscribed = spin_until(executor, lambda: process.poll() is not None or (
            metric.get_subscription_count() > 0 and states.get_subscription_count() > 0))
        assert subscribed and process.poll() is None, (
            'recorder never subscribed' if not subscribed else process.communicate()[0])
        for i in range(COUNT):
            metric.publish(Float64(data=float(i)))
            states.publish(Float64MultiArray(data=[1.0, float(i)] + [0.0] * 9))
            other.publish(Float64(data=-1.0))
        # The signal once the recorder's readers hold every sample: it writes them before closing.
        acked = Duration(seconds=WAIT)
        assert all(writer.wait_for_all_acked(acked) for writer in (metric, states)), (
            'the recorder never acknowledged every sample')
        process.send_signal(stop_signal)
        output, _ = process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert 'Traceback' not in output
    with AnyReader([bag]) as reader:
        counts = {t: i.msgcount for t, i in reader.topics.items()}
        values = [reader.deserialize(raw, c.msgtype).data for c, _, raw in reader.messages(
            [c for c in reader.connections if c.topic == '/swarm/metrics/rho'])]
    assert counts == {'/swarm/metrics/rho': COUNT, '/swarm/agent_states': COUNT}
    assert values == [float(i) for i in range(COUNT)]
    custom = yaml.safe_load((bag / 'metadata.yaml').read_text())[
        'rosbag2_bagfile_information']['custom_data']
    assert custom['recorder'] == 'run_recorder' and custom['git_commit']
    assert custom['package_version'] and 'scenario' not in custom  # unknown to a recorder


def test_existing_output_is_refused_in_one_line(tmp_path):
    (tmp_path / 'run').mkdir()
    result = subprocess.run(recorder_command('-o', str(tmp_path / 'run')),
                            capture_output=True, text=True, timeout=WAIT)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f'run_recorder: error: output {tmp_path / "run"} exists already; choose a new directory')
    assert 'Traceback' not in result.stderr


@pytest.mark.parametrize('args, message', [
    (['-e', '('], "topics_regex '(' is not a regular expression"),
    (['--ros-args', '-p', 'storage:=zip'], "storage must be one of mcap, sqlite3, got 'zip'"),
    (['--ros-args', '-p', 'discovery_period:=0.01'], 'discovery_period out of range'),
])
def test_bad_settings_are_one_line_and_make_no_bag(tmp_path, args, message):
    bag = tmp_path / 'run'
    result = subprocess.run(recorder_command('-o', str(bag), *args), capture_output=True,
                            text=True, timeout=60)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith('run_recorder: error: ') and message in lines[0]
    assert not bag.exists()


def committed_rows(database) -> int:
    """Return the messages a reader sees in a sqlite3 bag being written (0 if none yet)."""
    try:
        with closing(sqlite3.connect(f'file:{database}?mode=ro', uri=True, timeout=1.0)) as db:
            return db.execute('SELECT count(*) FROM messages').fetchone()[0]
    except sqlite3.Error:  # not created yet, or busy committing
        return 0


def readable_messages(bag, storage: str) -> int:
    """Return the messages a reader sees in a bag being written (0 if none yet)."""
    if storage == 'sqlite3':
        return committed_rows(bag / 'run.db3')
    from soliton_encirclement_ros.analysis.bag_scan import Damage, mcap_messages
    try:
        return sum(1 for _ in mcap_messages(bag / 'run.mcap', Damage()))
    except OSError:  # not created yet
        return 0


@pytest.mark.parametrize('storage', ['sqlite3', 'mcap'])
def test_a_killed_recorder_leaves_what_it_made_durable_readable(publisher_node, tmp_path,
                                                                storage):
    """sqlite3 commits, MCAP flushes its chunk, once a second: a small run is not lost whole."""
    node, executor = publisher_node
    reliable = QoSProfile(depth=COUNT, reliability=ReliabilityPolicy.RELIABLE)
    odometry = {name: node.create_publisher(Odometry, f'/{name}/odom', reliable)
                for name in ('uav1', 'uav2', 'target')}
    bag = tmp_path / 'run'
    process = subprocess.Popen(
        recorder_command('-o', str(bag), '-s', storage, '--ros-args', '-p',
                         'discovery_period:=0.2'),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert spin_until(executor, lambda: all(
            p.get_subscription_count() for p in odometry.values()), WAIT), 'never subscribed'
        sent = [0]

        def publish_some() -> bool:
            if sent[0] < 60:  # then quiet: what came must reach the file all the same
                for x, publisher in zip((20.0, -20.0, 0.0), odometry.values()):
                    msg = Odometry()
                    msg.pose.pose.position.x = x  # uav1, uav2 on the ring, the target inside
                    msg.pose.pose.orientation.w = 1.0
                    publisher.publish(msg)
                sent[0] += 1
            executor.spin_once(timeout_sec=0.02)
            return readable_messages(bag, storage) >= 3 * 40
        assert spin_until(executor, publish_some, WAIT), \
            f'{readable_messages(bag, storage)} messages readable'
    finally:
        process.kill()  # SIGKILL: the recorder cannot close the bag
        process.communicate(timeout=WAIT)
    assert not (bag / 'metadata.yaml').exists()
    with Bag(bag) as recorded:
        assert ('read from its database' if storage == 'sqlite3' else 'the recording was cut') \
            in recorded.truncated, recorded.truncated
        assert 'no metadata.yaml: the recorder never closed the bag' in recorded.truncated
        assert set(recorded.topics) == {'/uav1/odom', '/uav2/odom', '/target/odom'}
        read = [topic for topic, _, _ in recorded.messages(recorded.topics)]
    assert len(read) >= 3 * 40
    analysed = subprocess.run([find_executable('analyze_run'), str(bag), '--out',
                               str(tmp_path / 'out'), '--max-frames', '0'],
                              capture_output=True, text=True, timeout=120)
    assert analysed.returncode == 3, analysed.stderr
    assert 'analyze_run: warning: truncated bag, analysed the readable part only' in \
        analysed.stderr and 'Traceback' not in analysed.stderr
    assert (tmp_path / 'out' / 'summary.json').exists()
