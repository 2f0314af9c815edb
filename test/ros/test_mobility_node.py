"""
mobility_node with real rclpy.

Message conversions, in-process runs on a test-driven /clock, and the console script in a real ROS
graph driven by a Twist publisher.
"""
import math
from pathlib import Path
import signal
import subprocess
import sys
import time

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from std_msgs.msg import UInt32MultiArray
from transforms3d.euler import euler2quat

from support.harness import spin_until
from support.waits import DEADLINE
from velocity_mobility_ros.core.vehicle import VehicleParams
from velocity_mobility_ros.nodes.messages import (
    odometry_to_arrays, to_odometry, twist_to_arrays, twist_values)
from velocity_mobility_ros.nodes.mobility_node import COUNTER_QOS, MobilityNode, SIM_QOS

REPO = Path(__file__).resolve().parents[2]
MOBILITY_YAML = REPO / 'config' / 'mobility.yaml'


def twist(vx=0.0, vy=0.0, vz=0.0, wz=0.0, msg_type=Twist):
    msg = msg_type()
    body = msg.twist if msg_type is TwistStamped else msg
    body.linear.x, body.linear.y, body.linear.z, body.angular.z = vx, vy, vz, wz
    return msg


# --- message conversions (no graph) -----------------------------------------------------------

def test_twist_values_name_the_bad_field():
    assert twist_values(twist(1.0, 2.0, 3.0, 0.5)) == (1.0, 2.0, 3.0, 0.0, 0.0, 0.5)
    linear, angular = twist_to_arrays(twist(1.0, 2.0, 3.0, 0.5, msg_type=TwistStamped))
    assert linear.tolist() == [1.0, 2.0, 3.0] and angular.tolist() == [0.0, 0.0, 0.5]
    with pytest.raises(ValueError, match=r'^linear.y is nan$'):
        twist_values(twist(1.0, math.nan))
    with pytest.raises(ValueError, match=r'^angular.z is inf$'):
        twist_values(twist(wz=math.inf, msg_type=TwistStamped))


def test_odometry_twist_is_in_the_child_frame_and_round_trips():
    stamp = Time(sec=3, nanosec=500)
    msg = to_odometry([1.0, 2.0, 3.0], [1.0, 0.0, 0.5], math.pi / 2, stamp, 'world',
                      'uav1/base_link', yaw_rate=0.2)
    assert (msg.header.frame_id, msg.child_frame_id, msg.header.stamp) == (
        'world', 'uav1/base_link', stamp)
    q = msg.pose.pose.orientation
    np.testing.assert_allclose([q.w, q.x, q.y, q.z], euler2quat(0, 0, math.pi / 2))
    # Facing +y and moving +x in the world: the vehicle moves to its right (body -y).
    v = msg.twist.twist.linear
    np.testing.assert_allclose([v.x, v.y, v.z], [0.0, -1.0, 0.5], atol=1e-15)
    assert msg.twist.twist.angular.z == 0.2
    position, velocity, yaw = odometry_to_arrays(msg)
    np.testing.assert_allclose(position, [1.0, 2.0, 3.0])
    np.testing.assert_allclose(velocity, [1.0, 0.0, 0.5], atol=1e-15)
    assert yaw == pytest.approx(math.pi / 2)


def test_odometry_to_arrays_uses_the_full_orientation_and_checks_finiteness():
    msg = Odometry()
    q = msg.pose.pose.orientation
    q.w, q.x, q.y, q.z = euler2quat(0.0, math.pi / 2, 0.0)  # pitched nose-down by 90 deg
    msg.twist.twist.linear.x = 2.0  # forward in the body = straight down in the world
    _, velocity, yaw = odometry_to_arrays(msg)
    np.testing.assert_allclose(velocity, [0.0, 0.0, -2.0], atol=1e-12)
    msg.twist.twist.linear.y = math.nan
    with pytest.raises(ValueError, match=r'twist.twist.linear is not finite'):
        odometry_to_arrays(msg)


# --- in-process graph on a test-driven /clock -------------------------------------------------

@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


class SimGraph:
    """
    Node under test + a driver node on one executor; the test owns /clock.

    ``tick`` advances sim time by one ``sim_dt`` and spins until the node has stepped, so the
    node runs in lock-step with the test.
    """

    def __init__(self, node, sim_dt=0.01):
        self.node = node
        self.driver = rclpy.create_node('mobility_test_driver')
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(node)
        self.executor.add_node(self.driver)
        self.clock = self.driver.create_publisher(Clock, '/clock', 10)
        self.dt_ns = round(sim_dt * 1e9)
        self.now_ns = 0
        self.spin_until(lambda: self.clock.get_subscription_count() > 0)

    def spin_until(self, condition, timeout=10.0):
        assert spin_until(self.executor, condition, timeout, period=0.01), 'not met in time'

    def publisher(self, msg_type, topic):
        pub = self.driver.create_publisher(msg_type, topic, SIM_QOS)
        self.spin_until(lambda: pub.get_subscription_count() > 0)
        return pub

    def collect(self, msg_type, topic, qos=SIM_QOS):
        received = []
        sub = self.driver.create_subscription(msg_type, topic, received.append, qos)
        self.spin_until(lambda: sub.get_publisher_count() > 0)
        return received

    def send(self, pub, msg, received=None):
        """Publish and spin until ``received()`` says the node has it."""
        pub.publish(msg)
        if received is not None:
            self.spin_until(received)

    def tick(self, count=1, steps_per_clock=1):
        """``count`` /clock messages, each ``steps_per_clock`` sim_dt after the last."""
        for _ in range(count):
            self.now_ns += self.dt_ns * steps_per_clock
            clock = Clock()
            clock.clock.sec, clock.clock.nanosec = divmod(self.now_ns, 10**9)
            target = self.node.steps + 1
            self.clock.publish(clock)
            self.spin_until(lambda: self.node.steps >= target)
        self.executor.spin_once(timeout_sec=0.01)  # deliver the last odometry

    def caught_up(self, odom):
        """Spin until ``odom`` (a collector) holds the odometry of the last step."""
        self.spin_until(lambda: len(odom) > 0 and stamps_ns(odom)[-1] == self.now_ns)

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()
        self.driver.destroy_node()


def sim_node(namespace, **params):
    overrides = [Parameter('use_sim_time', value=True)] + [
        Parameter(name, value=value) for name, value in params.items()]
    return MobilityNode(namespace=namespace, parameter_overrides=overrides)


@pytest.fixture
def graph_factory(ros):
    graphs = []

    def make(namespace, **params):
        graphs.append(SimGraph(sim_node(namespace, **params)))
        return graphs[-1]
    yield make
    for graph in graphs:
        graph.close()


def velocities(msgs):
    return np.array([[m.twist.twist.linear.x, m.twist.twist.linear.y, m.twist.twist.linear.z]
                     for m in msgs])


def stamps_ns(msgs):
    return [m.header.stamp.sec * 10**9 + m.header.stamp.nanosec for m in msgs]


def test_ramp_rate_saturation_and_sim_time_stamps(graph_factory):
    g = graph_factory('ramp', tau_xy=0.0, tau_z=0.0, odom_rate=50.0, cmd_timeout=0.0)
    odom = g.collect(Odometry, '/ramp/odom')
    cmd = g.publisher(Twist, '/ramp/cmd_vel')
    g.send(cmd, twist(20.0, 0.0, -20.0), lambda: g.node.command_velocity[0, 0] == 20.0)
    g.tick(400)
    g.caught_up(odom)  # under load the last message can still be on its way
    assert len(odom) == 200
    assert stamps_ns(odom) == [20_000_000 * k for k in range(1, 201)]  # sim time, every 2 steps
    v = velocities(odom)
    np.testing.assert_allclose(np.diff(v[:100, 0]), 4.0 * 0.02, atol=1e-9)  # 4 m/s^2
    np.testing.assert_allclose(np.diff(v[:40, 2]), -5.0 * 0.02, atol=1e-9)  # 5 m/s^2
    np.testing.assert_allclose(v[-1], [10.0, 0.0, -5.0])  # saturated at max_speed_xy/z
    assert odom[-1].header.frame_id == 'world'
    assert odom[-1].child_frame_id == 'ramp/base_link'


def test_a_clock_that_jumps_several_steps_is_integrated_and_a_huge_jump_is_not(
    graph_factory, capfd
):
    """An external /clock at 20 Hz (5 sim_dt per message): the ramp still reaches 4 m/s^2."""
    g = graph_factory('jumps', tau_xy=0.0, tau_z=0.0, odom_rate=100.0, cmd_timeout=0.0)
    odom = g.collect(Odometry, '/jumps/odom')
    cmd = g.publisher(Twist, '/jumps/cmd_vel')
    g.send(cmd, twist(20.0, 0.0, 0.0), lambda: g.node.command_velocity[0, 0] == 20.0)
    g.tick(1)
    g.tick(10, steps_per_clock=5)
    assert g.node.steps == 51
    g.caught_up(odom)  # under load the last message can still be on its way
    v = velocities(odom)
    np.testing.assert_allclose(np.diff(v[-5:, 0]), 4.0 * 0.05, atol=1e-9)  # 4 m/s^2, not 0.8
    assert stamps_ns(odom)[-1] == g.now_ns
    g.tick(1, steps_per_clock=1000)  # 10 s: a bag replay's seek, not something to integrate
    assert g.node.steps == 52
    assert capfd.readouterr().err.count('the clock jumped 9.990 s ahead') == 1


def test_command_timeout_brakes_to_hover_and_logs_once(graph_factory, capfd):
    g = graph_factory('hover', tau_xy=0.0, tau_z=0.0, cmd_timeout=0.2, odom_rate=100.0)
    odom = g.collect(Odometry, '/hover/odom')
    cmd = g.publisher(Twist, '/hover/cmd_vel')
    g.send(cmd, twist(2.0, 0.0, 1.0), lambda: g.node.command_velocity[0, 0] == 2.0)
    g.tick(60)
    g.caught_up(odom)
    v = velocities(odom)
    assert v[19, 0] == pytest.approx(0.8)  # still accelerating at 0.2 s
    assert v[-1, 0] == pytest.approx(0.0, abs=1e-12)  # braked to a hover by 0.6 s
    assert np.all(np.abs(np.diff(v[:, 0])) <= 4.0 * 0.01 + 1e-9)  # braking within limits
    assert np.all(np.diff(v[25:, 0]) <= 1e-12)
    hovering_at = odom[-1].pose.pose.position.x
    g.tick(30)
    g.caught_up(odom)
    assert odom[-1].pose.pose.position.x == pytest.approx(hovering_at)
    assert capfd.readouterr().err.count('no valid cmd_vel for 0.2 s; braking to a hover') == 1
    g.send(cmd, twist(1.0), lambda: g.node.command_velocity[0, 0] == 1.0)
    g.tick(5)
    g.caught_up(odom)
    assert odom[-1].twist.twist.linear.x > 0.0
    assert 'hover: cmd_vel resumed' in capfd.readouterr().err


def test_a_clock_stepped_back_drops_the_held_command_and_logs_once(graph_factory, capfd):
    """A simulator reset 8 s back: the vehicle brakes at once, not 8 s + cmd_timeout later."""
    g = graph_factory('reset', tau_xy=0.0, tau_z=0.0, cmd_timeout=0.5, odom_rate=100.0)
    odom = g.collect(Odometry, '/reset/odom')
    cmd = g.publisher(Twist, '/reset/cmd_vel')
    g.tick(800)
    g.send(cmd, twist(2.0), lambda: g.node.command_velocity[0, 0] == 2.0)
    g.tick(20)
    g.caught_up(odom)
    assert odom[-1].twist.twist.linear.x == pytest.approx(0.8)  # accelerating at 4 m/s^2
    g.now_ns -= 8 * 10**9  # the clock steps back 8 s; the commander is gone
    back = Clock()
    back.clock.sec, back.clock.nanosec = divmod(g.now_ns, 10**9)
    g.clock.publish(back)  # rcl restarts the node's timer from the new time: no step yet
    g.spin_until(lambda: g.node.get_clock().now().nanoseconds == g.now_ns)
    g.tick(100)  # 1 s on the new clock: well within the old command's 8.5 s
    g.caught_up(odom)
    v = velocities(odom[-100:])
    assert v[-1, 0] == pytest.approx(0.0, abs=1e-12)  # braked to a hover
    assert np.all(np.diff(v[:, 0]) <= 1e-12)  # from the first step after the clock's step
    assert not g.node.command_velocity.any()
    err = capfd.readouterr().err
    assert err.count('the clock stepped back') == 1, err
    assert 'stepped back 7.990 s: dropped the command heard before the step (reset)' in err
    assert 'no valid cmd_vel' not in err
    g.send(cmd, twist(1.0), lambda: g.node.command_velocity[0, 0] == 1.0)
    g.tick(5)
    g.caught_up(odom)
    assert odom[-1].twist.twist.linear.x > 0.0
    assert 'reset: cmd_vel resumed' in capfd.readouterr().err


def test_non_finite_commands_are_rejected_and_counted(graph_factory, capfd):
    g = graph_factory('nan', tau_xy=0.0, cmd_timeout=0.0)
    counts = g.collect(UInt32MultiArray, '/nan/mobility/rejected_commands', COUNTER_QOS)
    cmd = g.publisher(Twist, '/nan/cmd_vel')
    g.send(cmd, twist(1.0, 0.5), lambda: g.node.command_velocity[0, 0] == 1.0)
    for k in range(5):
        g.send(cmd, twist(3.0, math.nan), lambda k=k: g.node.rejected_commands[0] == k + 1)
    g.tick(100)
    np.testing.assert_allclose(g.node.command_velocity, [[1.0, 0.5, 0.0]])
    np.testing.assert_allclose(g.node.state.velocity, [[1.0, 0.5, 0.0]], atol=1e-12)
    g.spin_until(lambda: counts and counts[-1].data.tolist() == [5])
    received = [m.data[0] for m in counts]  # depth 1: intermediate counts may be superseded
    assert received == sorted(set(received)) and received[-1] == 5
    late_joiner = g.collect(UInt32MultiArray, '/nan/mobility/rejected_commands', COUNTER_QOS)
    g.spin_until(lambda: late_joiner)
    assert [list(m.data) for m in late_joiner] == [[5]]
    warnings = capfd.readouterr().err.count('rejected cmd_vel (linear.y is nan)')
    assert warnings == 1  # throttled: 5 bad commands well within one second


def test_runtime_parameter_changes_are_validated(graph_factory):
    g = graph_factory('params', tau_xy=0.0, cmd_timeout=0.0)
    node = g.node
    [result] = node.set_parameters([Parameter('tau_xy', value=0.005)])
    assert not result.successful
    assert 'tau_xy must be > sim_dt (0.01)' in result.reason and '0.005' in result.reason
    [result] = node.set_parameters([Parameter('heading_mode', value='sideways')])
    assert not result.successful and 'heading_mode must be one of command, velocity, got ' \
        "'sideways'" in result.reason
    [result] = node.set_parameters([Parameter('max_speed_xy', value=-1.0)])
    assert not result.successful and 'max_speed_xy out of range' in result.reason
    [result] = node.set_parameters([Parameter('sim_dt', value=0.02)])
    assert not result.successful and 'read-only' in result.reason
    [result] = node.set_parameters([Parameter('odom_rate', value=500.0)])
    assert not result.successful and 'odom_rate must be < 2/sim_dt' in result.reason
    assert node.get_parameter('tau_xy').value == 0.0
    # An accepted change takes effect on the next steps.
    [result] = node.set_parameters([Parameter('max_speed_xy', value=2.0)])
    assert result.successful
    cmd = g.publisher(Twist, '/params/cmd_vel')
    g.send(cmd, twist(5.0), lambda: g.node.command_velocity[0, 0] == 5.0)
    g.tick(100)
    np.testing.assert_allclose(node.state.velocity, [[2.0, 0.0, 0.0]])


def test_twist_in_child_frame_with_nonzero_yaw(graph_factory):
    g = graph_factory('yawed', initial_yaw=math.pi / 2, initial_position=[1.0, 2.0, 3.0],
                      cmd_timeout=0.0)
    odom = g.collect(Odometry, '/yawed/odom')
    cmd = g.publisher(Twist, '/yawed/cmd_vel')
    g.send(cmd, twist(1.0), lambda: g.node.command_velocity[0, 0] == 1.0)
    g.tick(2)
    g.caught_up(odom)
    first = odom[0].pose.pose.position
    assert (first.x, first.y, first.z) == pytest.approx((1.0, 2.0, 3.0), abs=0.01)
    g.tick(1500)  # 15 s = 15 tau: settled
    g.caught_up(odom)
    msg = odom[-1]
    q = msg.pose.pose.orientation
    np.testing.assert_allclose([q.w, q.x, q.y, q.z], euler2quat(0, 0, math.pi / 2), atol=1e-12)
    v = msg.twist.twist.linear
    np.testing.assert_allclose([v.x, v.y, v.z], [0.0, -1.0, 0.0], atol=1e-5)  # body FLU
    _, world_velocity, _ = odometry_to_arrays(msg)
    np.testing.assert_allclose(world_velocity, [1.0, 0.0, 0.0], atol=1e-5)


def test_body_frame_twist_stamped_commands_and_yaw_rate(graph_factory):
    g = graph_factory('body', cmd_frame='body', cmd_vel_stamped=True, initial_yaw=math.pi / 2,
                      tau_xy=0.0, max_yaw_rate=1.0, cmd_timeout=0.0)
    cmd = g.publisher(TwistStamped, '/body/cmd_vel')
    g.send(cmd, twist(1.0, msg_type=TwistStamped),
           lambda: g.node.command_velocity[0, 0] == 1.0)
    g.tick(30)
    np.testing.assert_allclose(g.node.state.velocity, [[0.0, 1.0, 0.0]], atol=1e-12)
    g.send(cmd, twist(0.0, wz=5.0, msg_type=TwistStamped),
           lambda: g.node.command_velocity[0, 0] == 0.0)
    yaw0 = g.node.state.yaw[0]
    g.tick(10)
    assert g.node.state.yaw[0] - yaw0 == pytest.approx(10 * 0.01 * 1.0)  # clipped at 1 rad/s


def test_invalid_startup_configuration_names_the_parameter(ros):
    with pytest.raises(ValueError, match=r'tau_z must be > sim_dt \(0.05\)'):
        sim_node('bad', sim_dt=0.05, tau_z=0.04)
    with pytest.raises(ValueError, match=r'initial_position must be \[x, y, z\], got \[1.0\]'):
        sim_node('bad2', initial_position=[1.0])


def test_yaml_config_loads_the_reference_values(ros):
    node = MobilityNode(namespace='yaml',
                        cli_args=['--ros-args', '--params-file', str(MOBILITY_YAML)])
    try:
        values = {name: node.get_parameter(name).value for name in VehicleParams.__annotations__}
        assert VehicleParams.from_mapping(values) == VehicleParams()
        assert node.get_parameter('odom_rate').value == 50.0
        assert node.get_parameter('cmd_timeout').value == 0.5
        descriptor = node.describe_parameter('max_acc_xy')
        assert descriptor.description and descriptor.floating_point_range[0].to_value == 100.0
    finally:
        node.destroy_node()


# --- the console script in a real ROS graph (wall clock) --------------------------------------

class MobilityProcess:
    """
    The mobility_node console script in namespace ``ns``, with a driver node.

    The driver node collects its odometry; leaving the block sends SIGINT and records the exit
    code.
    """

    def __init__(self, ns, *ros_args):
        self.ns, self.ros_args = ns, list(ros_args)
        self.odom, self.return_code = [], None

    def __enter__(self):
        exe = Path(sys.executable).parent / 'mobility_node'
        command = [str(exe)] if exe.exists() else [sys.executable, '-m',
                                                   'velocity_mobility_ros.nodes.mobility_node']
        self.proc = subprocess.Popen(
            command + ['--ros-args', '-r', f'__ns:=/{self.ns}', *self.ros_args]
        )
        self.node = rclpy.create_node(f'{self.ns}_driver')
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.node.create_subscription(Odometry, f'/{self.ns}/odom', self.odom.append, SIM_QOS)
        return self

    def spin_until(self, condition, timeout=20.0):
        spin_until(self.executor, condition, timeout, period=0.05)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.return_code = self.proc.wait(timeout=10)
        self.executor.shutdown()
        self.node.destroy_node()


def test_mobility_node_process_follows_a_twist_publisher(ros):
    with MobilityProcess('realgraph', '--params-file', str(MOBILITY_YAML),
                         '-p', 'tau_xy:=0.0', '-p', 'tau_z:=0.0') as run:
        cmd = run.node.create_publisher(Twist, '/realgraph/cmd_vel', SIM_QOS)
        run.node.create_timer(0.05, lambda: cmd.publish(twist(2.0, 0.0, 0.5)))
        odom = run.odom
        run.spin_until(lambda: odom and odom[-1].twist.twist.linear.x >= 1.9)
        count_at_speed = len(odom)
        # It keeps flying at that speed: ten more messages (0.2 s at 50 Hz; waited for, not
        # timed, so a loaded machine is slow but not red).
        run.spin_until(lambda: len(odom) - count_at_speed >= 10, timeout=DEADLINE)
    assert odom, 'no odometry from mobility_node'
    last = odom[-1]
    assert (last.header.frame_id, last.child_frame_id) == ('world', 'realgraph/base_link')
    np.testing.assert_allclose(velocities(odom[-1:]), [[2.0, 0.0, 0.5]], atol=1e-9)
    assert len(odom) - count_at_speed >= 10, 'mobility_node stopped publishing at speed'
    stamps = stamps_ns(odom)
    assert stamps == sorted(stamps)
    assert abs(stamps[-1] * 1e-9 - time.time()) < 5.0  # wall-clock (ROS time) stamps
    assert run.return_code == 0


def test_mobility_node_process_steps_and_stamps_on_sim_clock(ros):
    """main()'s executor runs ROS-time timers from /clock: stamps are sim time, not wall time."""
    sim_ns = [1000 * 10**9]  # sim time starts at 1000 s, far from wall time
    with MobilityProcess('simclock', '-p', 'use_sim_time:=true', '-p', 'cmd_timeout:=0.0') as run:
        clock_pub = run.node.create_publisher(Clock, '/clock', 10)

        def publish_clock():
            sim_ns[0] += 10_000_000
            clock_pub.publish(Clock(clock=Time(sec=sim_ns[0] // 10**9,
                                               nanosec=sim_ns[0] % 10**9)))

        run.node.create_timer(0.01, publish_clock)
        odom = run.odom
        run.spin_until(lambda: len(odom) >= 30)
    return_code = run.return_code
    assert len(odom) >= 30, 'mobility_node did not step on /clock'
    stamps = stamps_ns(odom)
    assert all(1000 * 10**9 < s <= sim_ns[0] for s in stamps)
    assert all(s % 10_000_000 == 0 for s in stamps)  # timer ticks land on /clock ticks
    assert stamps == sorted(stamps)
    assert return_code == 0
