"""launch_pytest: start mobility_node from launch/mobility.launch.py and check its odometry.

Needs a ROS 2 install with launch_pytest/launch_ros and this package built with colcon (the
launch file finds the executable through the ament index); skipped on pip-only machines.
"""
import os
import time
from pathlib import Path

import pytest

launch_pytest = pytest.importorskip(
    'launch_pytest', reason='launch_pytest is not installed (pip-only ROS 2): needs a ROS 2 '
    'install with launch_pytest and launch_ros')
launch_ros = pytest.importorskip('launch_ros', reason='launch_ros is not installed')

import rclpy  # noqa: E402
from geometry_msgs.msg import Twist  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402

from velocity_mobility_ros.mobility_node import SIM_QOS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PACKAGE = 'soliton_encirclement_ros'
NAMESPACE = 'launch_uav'


def _not_installed_reason(executables):
    """Why launch_ros cannot start these nodes here, or None. It runs
    <prefix>/lib/<package>/<executable> from the ament index; without it the include fails inside
    the launch service and launch_pytest waits for ReadyToTest forever. (A skipif mark, not a
    module-level skip: launch_testing's collection hook imports the module and turns a
    module-level skip into 'found no collectors'.)"""
    from ament_index_python.packages import get_package_prefix
    try:
        prefix = get_package_prefix(PACKAGE)
    except (LookupError, OSError) as error:  # PackageNotFoundError, or AMENT_PREFIX_PATH unset
        return (f'{PACKAGE} is not in the ament index ({error}): colcon build and source '
                'install/setup.bash first')
    missing = [exe for exe in executables
               if not os.access(os.path.join(prefix, 'lib', PACKAGE, exe), os.X_OK)]
    if missing:
        return (f'{PACKAGE} at {prefix} has no lib/{PACKAGE}/{{{", ".join(missing)}}} '
                '(install it with colcon, not pip)')
    return None


NOT_INSTALLED = _not_installed_reason(['mobility_node'])
pytestmark = pytest.mark.skipif(NOT_INSTALLED is not None, reason=NOT_INSTALLED or '')


@launch_pytest.fixture
def mobility_launch():
    return LaunchDescription([
        IncludeLaunchDescription(
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
