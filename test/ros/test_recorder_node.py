"""
run_recorder as a separate process on a real DDS graph.

Ctrl-C (SIGINT) or SIGTERM closes the bag, which then holds every message published before the
signal.
"""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosbags.highlevel import AnyReader
from std_msgs.msg import Float64, Float64MultiArray
import yaml

from support.harness import spin_until

COUNT = 30
WAIT = 20.0  # upper bound for process start-up and DDS discovery


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
        subscribed = spin_until(executor, lambda: metric.get_subscription_count() > 0
                                and states.get_subscription_count() > 0, WAIT)
        assert subscribed, 'recorder never subscribed'
        for i in range(COUNT):
            metric.publish(Float64(data=float(i)))
            states.publish(Float64MultiArray(data=[1.0, float(i)] + [0.0] * 9))
            other.publish(Float64(data=-1.0))
        time.sleep(1.0)  # let the reliable deliveries land before the signal
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
    assert result.stderr.strip().splitlines()[-1].startswith('run_recorder: error: bag path')
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
