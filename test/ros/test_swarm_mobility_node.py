"""
swarm_mobility_node with real rclpy on a test-driven /clock.

Vehicles move independently on their own namespaced topics, exactly like separate mobility_nodes.
"""
import math
from pathlib import Path

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter
from std_msgs.msg import UInt32MultiArray
from test_mobility_node import SimGraph, twist, velocities

from velocity_mobility_ros.nodes.messages import odometry_to_arrays
from velocity_mobility_ros.nodes.mobility_node import COUNTER_QOS
from velocity_mobility_ros.nodes.swarm_mobility_node import swarm_initial_state, SwarmMobilityNode

SWARM_YAML = Path(__file__).resolve().parents[2] / 'config' / 'swarm_mobility.yaml'


@pytest.fixture(scope='module')
def ros():
    rclpy.init()
    yield
    rclpy.shutdown()


def swarm_graph(**params):
    overrides = [Parameter('use_sim_time', value=True)] + [
        Parameter(name, value=value) for name, value in params.items()]
    return SimGraph(SwarmMobilityNode(parameter_overrides=overrides))


def test_vehicles_move_independently_on_their_own_topics(ros, capfd):
    names = ['sw_a', 'sw_b', 'sw_c']
    g = swarm_graph(vehicle_names=names, initial_positions=[0.0, 0.0, 5.0, 10.0, 0.0, 5.0,
                                                            20.0, 0.0, 5.0],
                    initial_yaws=[0.0, math.pi / 2, 0.0], tau_xy=0.0, tau_z=0.0,
                    cmd_timeout=0.3)
    try:
        assert g.node.get_name() == 'swarm_mobility'
        odom = {n: g.collect(Odometry, f'/{n}/odom') for n in names}
        cmd = {n: g.publisher(Twist, f'/{n}/cmd_vel') for n in names[:2]}
        g.send(cmd['sw_a'], twist(2.0), lambda: g.node.command_velocity[0, 0] == 2.0)
        g.send(cmd['sw_b'], twist(0.0, 0.0, 1.0), lambda: g.node.command_velocity[1, 2] == 1.0)
        g.tick(20)
        g.send(cmd['sw_a'], twist(math.nan), lambda: g.node.rejected_commands[0] == 1)
        g.tick(80)  # past both timeouts (0.3 s), and both braked to a hover
        g.spin_until(lambda: all(len(odom[n]) == 50 for n in names))  # 100 steps, every 2nd
        positions = {n: odometry_to_arrays(odom[n][-1])[0] for n in names}
        world_velocity = {n: odometry_to_arrays(odom[n][-1])[1] for n in names}
        # sw_a: 0.3 s at +4 m/s^2 toward 2 m/s (the NaN command changed nothing), then 0.3 s
        # braking at 4 m/s^2: 2 * 0.5 * 4 * 0.3^2 = 0.36 m along x only.
        assert positions['sw_a'] == pytest.approx([0.36, 0.0, 5.0], abs=0.02)
        np.testing.assert_allclose(world_velocity['sw_a'], 0.0, atol=1e-12)
        # sw_b: climbed, then hovered; never moved horizontally.
        assert positions['sw_b'][2] > 5.2 and positions['sw_b'][:2] == pytest.approx([10, 0])
        # sw_c: never commanded, never moved.
        np.testing.assert_allclose(positions['sw_c'], [20.0, 0.0, 5.0])
        assert [odom[n][-1].child_frame_id for n in names] == [f'{n}/base_link' for n in names]
        err = capfd.readouterr().err
        assert err.count('braking to a hover') == 2  # sw_a and sw_b, once each
        assert 'sw_a: rejected cmd_vel (linear.x is nan)' in err
        counts = g.collect(UInt32MultiArray, '/swarm_mobility/rejected_commands', COUNTER_QOS)
        g.spin_until(lambda: counts)
        assert counts[-1].data.tolist() == [1, 0, 0]
        assert counts[-1].layout.dim[0].size == 3
    finally:
        g.close()


def test_swarm_keeps_each_vehicles_velocity_under_its_command(ros):
    names = [f'swv{i}' for i in range(5)]
    g = swarm_graph(vehicle_names=names, cmd_timeout=0.0)
    try:
        odom = {n: g.collect(Odometry, f'/{n}/odom') for n in names}
        for i, n in enumerate(names):
            pub = g.publisher(Twist, f'/{n}/cmd_vel')
            g.send(pub, twist(0.5 * i, -0.5 * i),  # (v_des - v)/tau stays below max_acc_xy
                   lambda i=i: g.node.command_velocity[i, 0] == 0.5 * i)
        g.tick(1000)  # 10 s = 10 tau_xy
        g.spin_until(lambda: all(len(odom[n]) == 500 for n in names))
        final = np.array([odometry_to_arrays(odom[n][-1])[1] for n in names])
        expected = np.array([[0.5 * i, -0.5 * i, 0.0] for i in range(5)]) * (1 - 0.99 ** 1000)
        np.testing.assert_allclose(final, expected, atol=1e-9)
        assert velocities([odom['swv0'][-1]]).tolist() == [[0.0, 0.0, 0.0]]
    finally:
        g.close()


def test_swarm_yaml_loads(ros):
    node = SwarmMobilityNode(cli_args=['--ros-args', '--params-file', str(SWARM_YAML)])
    try:
        np.testing.assert_allclose(node.state.position, [[0, 0, 10], [5, 0, 10], [10, 0, 10]])
        assert node.get_parameter('vehicle_names').value == ['uav1', 'uav2', 'uav3']
        assert node.get_parameter('tau_z').value == 1.2
    finally:
        node.destroy_node()


def test_swarm_initial_state_validation():
    state = swarm_initial_state(['a', 'b'], [], [])
    np.testing.assert_allclose(state.position, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r'vehicle_names must list at least one vehicle'):
        swarm_initial_state([], [], [])
    with pytest.raises(ValueError, match=r"vehicle_names must be unique, got duplicates \['a'\]"):
        swarm_initial_state(['a', 'b', 'a'], [], [])
    with pytest.raises(ValueError, match=r'initial_positions must hold 3 values per vehicle '
                                         r'\(6 for 2 vehicles\), got 5'):
        swarm_initial_state(['a', 'b'], [0.0] * 5, [])
    with pytest.raises(ValueError, match=r'initial_yaws must hold one value per vehicle \(2\), '
                                         r'got 1'):
        swarm_initial_state(['a', 'b'], [], [0.0])
    with pytest.raises(ValueError, match=r'initial_positions\[1\] must be finite, got inf'):
        swarm_initial_state(['a'], [0.0, math.inf, 0.0], [])


def test_swarm_node_rejects_a_missing_vehicle_list(ros):
    with pytest.raises(ValueError, match='vehicle_names must list at least one vehicle'):
        SwarmMobilityNode()


def test_tf_carries_every_vehicle_where_tf2_msgs_imports_else_one_info_line(ros, capfd):
    names = ['tf_a', 'tf_b']
    g = swarm_graph(vehicle_names=names, initial_positions=[1.0, 2.0, 3.0, -4.0, 5.0, 6.0],
                    initial_yaws=[0.0, math.pi / 2])
    try:
        odom = g.collect(Odometry, '/tf_b/odom')
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:  # a pip-only machine: tf2 has no wheel
            g.tick(4)
            g.spin_until(lambda: len(odom) == 2)
            err = capfd.readouterr().err
            assert err.count('not publishing /tf: tf2_msgs is not installed') == 1
            assert '/tf' not in dict(g.node.get_topic_names_and_types())
            return
        tf = g.collect(TFMessage, '/tf')
        g.tick(4)
        g.spin_until(lambda: len(odom) == 2 and len(tf) == 2)  # one message per odometry step
        transforms = {t.child_frame_id: t for t in tf[-1].transforms}
        assert sorted(transforms) == ['tf_a/base_link', 'tf_b/base_link']
        b = transforms['tf_b/base_link']
        assert b.header.frame_id == 'world' and b.header.stamp == odom[-1].header.stamp
        assert (b.transform.translation.x, b.transform.translation.y,
                b.transform.translation.z) == pytest.approx((-4.0, 5.0, 6.0))
        assert b.transform.rotation.z == pytest.approx(math.sin(math.pi / 4))
    finally:
        g.close()


def test_transforms_of_odometry_keep_frames_pose_and_stamp():
    from builtin_interfaces.msg import Time
    from velocity_mobility_ros.nodes.messages import to_odometry, transforms_of
    msg = to_odometry([1.0, -2.0, 3.0], [0.5, 0.0, 0.0], math.pi / 2, Time(sec=7, nanosec=5),
                      'world', 'uav3/base_link')
    transform, = transforms_of([msg])
    assert (transform.header.frame_id, transform.child_frame_id) == ('world', 'uav3/base_link')
    assert transform.header.stamp == Time(sec=7, nanosec=5)
    t = transform.transform
    assert (t.translation.x, t.translation.y, t.translation.z) == (1.0, -2.0, 3.0)
    assert (t.rotation.w, t.rotation.z) == pytest.approx((math.cos(math.pi / 4),
                                                          math.sin(math.pi / 4)))
