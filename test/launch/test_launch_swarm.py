"""
swarm_sim.launch.py with 4 agents forms the ring (launch_pytest; skipped where it is missing).

pip-only machines have no launch/launch_ros/launch_pytest; a ROS 2 workspace has them, and
there this test starts the real launch file and watches /swarm/metrics/E_gap.
"""
from pathlib import Path
import time

import pytest
import rclpy
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64

from launch_checks import not_installed_reason

launch_pytest = pytest.importorskip(
    'launch_pytest', reason='launch_pytest is not installed (a ROS 2 workspace provides it)')
pytest.importorskip('launch_ros', reason='launch_ros is not installed')
launch = pytest.importorskip('launch', reason='launch is not installed')
PythonLaunchDescriptionSource = launch.launch_description_sources.PythonLaunchDescriptionSource


LAUNCH_FILE = Path(__file__).resolve().parents[2] / 'launch' / 'swarm_sim.launch.py'


NOT_INSTALLED = not_installed_reason(
    ['swarm_mobility_node', 'target_node', 'agent_node', 'metrics_node'])
pytestmark = pytest.mark.skipif(NOT_INSTALLED is not None, reason=NOT_INSTALLED or '')


@launch_pytest.fixture
def swarm():
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
            launch_arguments={'num_agents': '4', 'seed': '1', 'real_time_factor': '3.0'}.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


@pytest.mark.launch(fixture=swarm)
def test_ring_forms_through_the_launch_file():
    rclpy.init()
    try:
        node = Node('launch_test_listener')
        gaps, clock = [], []
        node.create_subscription(
            Float64, '/swarm/metrics/E_gap', lambda m: gaps.append(m.data), 10)
        node.create_subscription(
            Clock, '/clock', lambda m: clock.append(m.clock.sec + 1e-9 * m.clock.nanosec), 10)
        deadline = time.monotonic() + 90.0
        while time.monotonic() < deadline and not (len(gaps) > 20 and max(gaps[-20:]) < 0.05):
            rclpy.spin_once(node, timeout_sec=0.1)
        assert clock, 'no /clock from swarm_mobility (publish_clock)'
        assert clock[-1] - clock[0] > 1.0, \
            f'/clock did not advance: {clock[0]:.2f} .. {clock[-1]:.2f} s'
        assert gaps, 'metrics_node published no E_gap'
        assert max(gaps[-20:]) < 0.05, f'ring did not form: last E_gap {gaps[-1]:.3f}'
        node.destroy_node()
    finally:
        rclpy.shutdown()
