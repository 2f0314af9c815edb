"""
launch_pytest: start mobility_node from launch/mobility.launch.py and check its odometry.

Needs a ROS 2 install with launch_pytest/launch_ros and this package built with colcon (the
launch file finds the executable through the ament index); skipped on pip-only machines.
"""
from pathlib import Path
import time

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor

from launch_checks import not_installed_reason
from velocity_mobility_ros.nodes.mobility_node import SIM_QOS

launch_pytest = pytest.importorskip(
    'launch_pytest', reason='launch_pytest is not installed (pip-only ROS 2): needs a ROS 2 '
    'install with launch_pytest and launch_ros')
launch_ros = pytest.importorskip('launch_ros', reason='launch_ros is not installed')
launch = pytest.importorskip('launch', reason='launch is not installed')
PythonLaunchDescriptionSource = launch.launch_description_sources.PythonLaunchDescriptionSource


REPO = Path(__file__).resolve().parents[2]
NAMESPACE = 'launch_uav'


NOT_INSTALLED = not_installed_reason(['mobility_node'])
pytestmark = pytest.mark.skipif(NOT_INSTALLED is not None, reason=NOT_INSTALLED or '')


@launch_pytest.fixture
def mobility_launch():
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(REPO / 'launch' / 'mobility.launch.py')),
            launch_arguments={'namespace': NAMESPACE,
                              'params_file': str(REPO / 'config' / 'mobility.yaml')}.items()),
        launch_pytest.actions.ReadyToTest(),
    ])


@pytest.mark.launch(fixture=mobility_launch)
def test_launched_mobility_node_follows_cmd_vel():
    rclpy.init()
    node = rclpy.create_node('launch_mobility_test')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    odom = []
    node.create_subscription(Odometry, f'/{NAMESPACE}/odom', odom.append, SIM_QOS)
    cmd = node.create_publisher(Twist, f'/{NAMESPACE}/cmd_vel', SIM_QOS)
    command = Twist()
    command.linear.x = 1.0
    node.create_timer(0.05, lambda: cmd.publish(command))
    try:
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline and not (
                odom and odom[-1].twist.twist.linear.x > 0.5):
            executor.spin_once(timeout_sec=0.05)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown()
    assert odom, 'no odometry from the launched mobility_node'
    last = odom[-1]
    assert (last.header.frame_id, last.child_frame_id) == ('world', f'{NAMESPACE}/base_link')
    assert 0.5 < last.twist.twist.linear.x <= 1.0  # tau_xy 1.0 s: rising toward 1 m/s
    assert last.pose.pose.position.x > 0.0
    assert abs(last.twist.twist.linear.y) < 1e-9
