"""px4_bridge_node: topic naming, settings, the missing-px4_msgs exit, and (where px4_msgs is
built) real rclpy against a small fake autopilot that answers like PX4's uXRCE-DDS client."""
import importlib.util
import math
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from transforms3d.euler import euler2quat

from soliton_encirclement_ros.px4.bridge_node import (PARAMS, BridgeSettings, fill_enu_odometry,
                                                      px4_topic)
from soliton_encirclement_ros.px4.frames import q_ned_frd_to_enu_flu, vehicle_odometry_to_enu

HAVE_PX4_MSGS = importlib.util.find_spec('px4_msgs') is not None
DEFAULTS = {spec.name: spec.default for spec in PARAMS}


@pytest.mark.parametrize('namespace, direction, name, version, expected', [
    ('', 'out', 'vehicle_odometry', 0, '/fmu/out/vehicle_odometry'),
    ('px4_1', 'out', 'vehicle_status', 1, '/px4_1/fmu/out/vehicle_status_v1'),
    ('/px4_2/', 'in', 'trajectory_setpoint', 0, '/px4_2/fmu/in/trajectory_setpoint'),
    ('', 'out', 'vehicle_status', 4, '/fmu/out/vehicle_status_v4'),
])
def test_px4_topic_names(namespace, direction, name, version, expected):
    assert px4_topic(namespace, direction, name, version) == expected


def test_settings_defaults_and_derived_offboard_config():
    s = BridgeSettings.from_mapping(DEFAULTS)
    assert (s.px4_namespace, s.target_system, s.message_version_suffix) == ('', 1, 'auto')
    assert s.offboard.cmd_timeout == DEFAULTS['cmd_timeout']
    assert s.origin_enu == (0.0, 0.0, 0.0)
    slashed = BridgeSettings.from_mapping({**DEFAULTS, 'px4_namespace': '/px4_3'})
    assert slashed.px4_namespace == 'px4_3'


@pytest.mark.parametrize('name, value, match', [
    ('px4_namespace', 'px4 1', "px4_namespace must be '' or a ROS namespace"),
    ('px4_namespace', '1px4', 'px4_namespace'),
    ('message_version_suffix', '_v1',
     "message_version_suffix must be one of auto, none, got '_v1'"),
    ('origin_enu', [0.0, 1.0],
     r'origin_enu must be 3 finite numbers \[x, y, z\], got \[0.0, 1.0\]'),
    ('origin_enu', [0.0, math.nan, 0.0], 'origin_enu must be 3 finite'),
    ('world_frame_id', '', 'world_frame_id must not be empty'),
])
def test_settings_reject_bad_values_naming_the_parameter(name, value, match):
    with pytest.raises(ValueError, match=match):
        BridgeSettings.from_mapping({**DEFAULTS, name: value})


def test_fill_enu_odometry_keeps_full_attitude_and_body_twist():
    q_ned = euler2quat(0.3, -0.2, 1.0, 'sxyz')
    odom = vehicle_odometry_to_enu(1, [1.0, 2.0, -3.0], q_ned, 1, [0.5, 0.0, 0.0],
                                   [0.0, 0.1, 0.0], origin_enu=(10.0, 0.0, 0.0))
    msg = Odometry()
    fill_enu_odometry(msg, odom, Odometry().header.stamp)
    o = msg.pose.pose.orientation
    assert np.allclose([o.w, o.x, o.y, o.z], q_ned_frd_to_enu_flu(q_ned))
    p, v = msg.pose.pose.position, msg.twist.twist.linear
    assert (p.x, p.y, p.z) == (12.0, 1.0, 3.0)
    assert msg.twist.twist.angular.y == pytest.approx(-0.1)
    assert np.allclose([v.x, v.y, v.z], odom.linear_velocity)


@pytest.mark.skipif(HAVE_PX4_MSGS,
                    reason='px4_msgs is importable here; the missing case cannot occur')
def test_missing_px4_msgs_exits_with_one_actionable_line():
    script = Path(sys.executable).with_name('px4_bridge_node')
    command = [str(script)] if script.exists() else [
        sys.executable, '-c',
        'import sys; from soliton_encirclement_ros.px4.bridge_node import main; sys.exit(main())']
    result = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert 'px4_msgs' in lines[0] and 'https://github.com/PX4/px4_msgs' in lines[0]
    assert 'matches your PX4 firmware' in lines[0]


# ---- real rclpy against a fake autopilot (needs a built px4_msgs) ---------------------------
px4 = pytest.mark.skipif(not HAVE_PX4_MSGS, reason=(
    'px4_msgs is not importable: build PX4/px4_msgs (matching the PX4 version) '
    'in a colcon workspace and source it'))

NAV_POSCTL, NAV_OFFBOARD, DISARMED, ARMED = 2, 14, 1, 2
FAKE_Q_NED = euler2quat(0.1, -0.05, 0.8, 'sxyz')
FAKE_POSITION_NED = [4.0, -2.0, -10.0]


def spin_until(executor, predicate, timeout=10.0):
    """Spin until predicate() holds; False if the deadline passes first."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=0.02)
    return True


def spin_for(executor, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.02)


@pytest.fixture
def ros():
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    rclpy.init()
    executor = SingleThreadedExecutor()
    yield executor
    executor.shutdown()
    for node in list(executor.get_nodes()):
        node.destroy_node()
    rclpy.try_shutdown()


def make_fake_autopilot(px4_namespace, refuse_arm=False, ignore_mode_requests=0):
    """PX4 stand-in: odometry + status out (best effort, transient local), commands in.

    ``node.received`` records (command, nav_state when it arrived); the first
    ``ignore_mode_requests`` DO_SET_MODE requests are lost (best-effort link)."""
    from px4_msgs.msg import (OffboardControlMode, TrajectorySetpoint, VehicleCommand,
                              VehicleCommandAck, VehicleOdometry, VehicleStatus)
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    writer_qos = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT,
                            history=HistoryPolicy.KEEP_LAST, depth=1,
                            durability=DurabilityPolicy.TRANSIENT_LOCAL)
    reader_qos = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT,
                            history=HistoryPolicy.KEEP_LAST, depth=10,
                            durability=DurabilityPolicy.VOLATILE)

    def name(direction, topic, msg_type):
        return px4_topic(px4_namespace, direction, topic, getattr(msg_type, 'MESSAGE_VERSION', 0))

    node = Node('fake_autopilot')
    node.nav_state, node.arming_state = NAV_POSCTL, DISARMED
    node.commands, node.setpoints, node.heartbeats = [], [], []
    node.received, node.mode_requests_to_ignore = [], ignore_mode_requests
    odom_pub = node.create_publisher(
        VehicleOdometry, name('out', 'vehicle_odometry', VehicleOdometry), writer_qos)
    status_pub = node.create_publisher(VehicleStatus, name('out', 'vehicle_status', VehicleStatus),
                                       writer_qos)
    ack_pub = node.create_publisher(
        VehicleCommandAck, name('out', 'vehicle_command_ack', VehicleCommandAck), writer_qos)

    def publish_state():
        odom = VehicleOdometry()
        odom.pose_frame, odom.velocity_frame = 1, 1
        odom.position, odom.q = FAKE_POSITION_NED, FAKE_Q_NED.tolist()
        odom.velocity, odom.angular_velocity = [1.0, 0.5, -0.2], [0.0, 0.0, 0.1]
        odom_pub.publish(odom)
        status = VehicleStatus()
        status.nav_state, status.arming_state = node.nav_state, node.arming_state
        status_pub.publish(status)

    def on_command(msg):
        node.commands.append(msg)
        node.received.append((msg.command, node.nav_state))
        if msg.command == 176 and node.mode_requests_to_ignore > 0:
            node.mode_requests_to_ignore -= 1
            return
        result = 0
        if msg.command == 176 and msg.param1 == 1.0 and msg.param2 == 6.0 and node.heartbeats:
            node.nav_state = NAV_OFFBOARD
        elif msg.command == 400 and msg.param1 == 1.0:
            if refuse_arm:
                result = 1
            else:
                node.arming_state = ARMED
        ack = VehicleCommandAck()
        ack.command, ack.result = msg.command, result
        ack_pub.publish(ack)

    node.create_subscription(VehicleCommand, name('in', 'vehicle_command', VehicleCommand),
                             on_command, reader_qos)
    node.create_subscription(OffboardControlMode,
                             name('in', 'offboard_control_mode', OffboardControlMode),
                             node.heartbeats.append, reader_qos)
    node.create_subscription(TrajectorySetpoint,
                             name('in', 'trajectory_setpoint', TrajectorySetpoint),
                             node.setpoints.append, reader_qos)
    node.create_timer(0.02, publish_state)
    return node


def make_graph(ros, refuse_arm=False, ignore_mode_requests=0, command_retry=1.0):
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.px4.bridge_node import Px4BridgeNode, load_px4_msgs

    fake = make_fake_autopilot('px4_1', refuse_arm, ignore_mode_requests)
    bridge = Px4BridgeNode(load_px4_msgs(), namespace='uav1', parameter_overrides=[
        Parameter('px4_namespace', value='px4_1'), Parameter('target_system', value=2),
        Parameter('warmup', value=0.3), Parameter('cmd_timeout', value=0.3),
        Parameter('command_retry', value=command_retry),
        Parameter('origin_enu', value=[100.0, 0.0, 0.0])])
    operator = Node('operator')
    operator.odoms = []
    operator.create_subscription(Odometry, '/uav1/odom', operator.odoms.append, 10)
    operator.cmd_pub = operator.create_publisher(Twist, '/uav1/cmd_vel', 10)
    operator.engage = operator.create_client(Trigger, '/uav1/px4_bridge/engage')
    for node in (fake, bridge, operator):
        ros.add_node(node)
    return fake, bridge, operator


def call_engage(ros, operator):
    from std_srvs.srv import Trigger
    assert spin_until(ros, lambda: operator.engage.service_is_ready())
    future = operator.engage.call_async(Trigger.Request())
    assert spin_until(ros, future.done, timeout=15.0)
    return future.result()


@px4
def test_bridge_publishes_odom_engages_on_request_and_streams_velocity(ros):
    fake, bridge, operator = make_graph(ros)
    assert spin_until(ros, lambda: operator.odoms)
    odom = operator.odoms[-1]
    p = odom.pose.pose.position
    assert np.allclose([p.x, p.y, p.z], [100.0 - 2.0, 4.0, 10.0], atol=1e-5)
    o = odom.pose.pose.orientation
    assert np.allclose(np.abs(np.dot([o.w, o.x, o.y, o.z], q_ned_frd_to_enu_flu(FAKE_Q_NED))), 1.0,
                       atol=1e-6)
    assert (odom.header.frame_id, odom.child_frame_id) == ('world', 'uav1/base_link')

    # Streaming, but nothing is commanded until the operator asks.
    spin_for(ros, 0.5)
    assert fake.heartbeats and fake.setpoints and not fake.commands
    assert all(h.velocity and not h.position for h in fake.heartbeats)

    response = call_engage(ros, operator)
    assert response.success, response.message
    assert [c.command for c in fake.commands][:2] == [176, 400]
    mode, arm = fake.commands[0], fake.commands[1]
    assert (mode.param1, mode.param2, arm.param1) == (1.0, 6.0, 1.0)
    assert all(c.target_system == 2 and c.from_external for c in fake.commands)

    # cmd_vel (world ENU) becomes an NED velocity setpoint with position left NaN.
    cmd = Twist()
    cmd.linear.x, cmd.linear.y, cmd.linear.z, cmd.angular.z = 1.0, 2.0, 0.5, 0.3
    fake.setpoints.clear()

    def flying():
        operator.cmd_pub.publish(cmd)
        return any(not math.isnan(s.velocity[0]) and s.velocity[0] > 1.5 for s in fake.setpoints)
    assert spin_until(ros, flying)
    sp = [s for s in fake.setpoints if s.velocity[0] > 1.5][-1]
    assert np.allclose(sp.velocity, [2.0, 1.0, -0.5], atol=1e-6)
    assert sp.yawspeed == pytest.approx(-0.3, abs=1e-6)
    assert all(math.isnan(v) for v in sp.position) and math.isnan(sp.yaw)

    # cmd_vel stops: after cmd_timeout the bridge commands hover.
    fake.setpoints.clear()
    assert spin_until(
        ros, lambda: fake.setpoints and list(fake.setpoints[-1].velocity) == [0.0] * 3)
    assert all(np.all(np.isfinite(s.velocity)) for s in fake.setpoints)
    assert all(s.timestamp > 0 for s in fake.setpoints)


@px4
def test_engage_reports_px4_refusal(ros):
    fake, bridge, operator = make_graph(ros, refuse_arm=True)
    assert spin_until(ros, lambda: operator.odoms)
    response = call_engage(ros, operator)
    assert not response.success
    assert 'PX4 refused COMPONENT_ARM_DISARM (400): TEMPORARILY_REJECTED' in response.message
    assert fake.arming_state == DISARMED


@px4
def test_lost_mode_request_is_resent_and_arm_waits_for_offboard_in_status(ros):
    fake, bridge, operator = make_graph(ros, ignore_mode_requests=1, command_retry=0.3)
    assert spin_until(ros, lambda: operator.odoms)
    response = call_engage(ros, operator)
    assert response.success, response.message
    assert [c for c, _ in fake.received] == [176, 176, 400]
    # ARM went out only after vehicle_status had reported OFFBOARD, never while in POSCTL.
    assert fake.received[-1] == (400, NAV_OFFBOARD)
    assert (fake.nav_state, fake.arming_state) == (NAV_OFFBOARD, ARMED)


def bridge_command():
    script = Path(sys.executable).with_name('px4_bridge_node')
    return [str(script)] if script.exists() else [
        sys.executable, '-c',
        'import sys; from soliton_encirclement_ros.px4.bridge_node import main; sys.exit(main())']


@px4
def test_node_process_stops_cleanly_on_sigint():
    """Exit 0 without a traceback. Whether rclpy's spin() returns or raises
    ExternalShutdownException on SIGINT is a race; main() must accept both."""
    proc = subprocess.Popen(bridge_command() + ['--ros-args', '-r', '__ns:=/uav9'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with selectors.DefaultSelector() as selector:  # wait for the start-up line
            selector.register(proc.stderr, selectors.EVENT_READ)
            deadline, started = time.monotonic() + 30.0, ''
            while 'bridging cmd_vel/odom' not in started and time.monotonic() < deadline:
                if selector.select(timeout=0.5):
                    line = proc.stderr.readline()
                    if not line:
                        break
                    started += line
        assert 'bridging cmd_vel/odom' in started, started
        time.sleep(1.0)  # the line is logged by the constructor: let it reach spin()
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, started + rest
    assert 'Traceback' not in rest and 'Exception' not in rest, rest


@px4
def test_node_process_names_a_bad_parameter_and_exits_1():
    result = subprocess.run(bridge_command() + ['--ros-args', '-p', 'px4_namespace:=px4 1'],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "px4_namespace must be '' or a ROS namespace" in lines[0], (
        result.stderr)


def test_shipped_yaml_declares_every_parameter_with_valid_values():
    import yaml
    path = Path(__file__).resolve().parents[1] / 'config' / 'px4_bridge.yaml'
    values = yaml.safe_load(path.read_text())['/**/px4_bridge']['ros__parameters']
    assert set(values) == set(DEFAULTS)
    assert values == DEFAULTS
    BridgeSettings.from_mapping(values)
