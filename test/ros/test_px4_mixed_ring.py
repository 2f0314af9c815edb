"""
A mixed fleet: two PX4 vehicles and two simulated ones form one ring, and keep their fail-safes.

Issue 26 §3. The graph is what ``swarm_px4_sitl.launch.py num_agents:=4 simulated:=uav3,uav4``
starts (its argument defaults read from the launch file, its nodes from ``build_graph``), in one
process on real rclpy: uav1 and uav2 fly kinematic fake PX4s (px4_1, px4_2) through
``px4_bridge_node``; uav3 and uav4 fly ``mobility_node`` from their origins, in the same world
ENU frame. Without Gazebo there is no /clock: the wall clock. Needs a built px4_msgs.
"""
import time

import numpy as np
import pytest

from soliton_encirclement_ros.bringup.graph import parse_simulated
from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, engage_and_form_ring, every, needs_px4_msgs, ready, Separation, sitl_plan,
    start_graph, true_position_enu)

pytestmark = needs_px4_msgs

N = 4
SIMULATED = 'uav3,uav4'   # the launch argument
OBSERVE_PERIOD = 0.01     # s: true positions sampled at 100 Hz (the fakes move at 50 Hz)
OFFBOARD, AUTO_LAND = 14, 18  # px4_msgs VehicleStatus nav_state
# docs/explanation/separation.md: a close approach is two agents closer than 0.5 d_safe after
# they were once farther than d_safe apart (the push is soft: 0 at d_safe; a pair may come back a
# few mm inside)
CLOSE_APPROACH = 0.5

ros = pytest.fixture(default_context_executor)


def endpoints(infos):
    return sorted(f'{info.node_namespace.rstrip("/")}/{info.node_name}' for info in infos)


def test_two_px4_and_two_simulated_vehicles_form_one_ring_and_keep_their_fail_safes(ros):
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.core.controller import BLIND

    defaults, plan = sitl_plan(N, simulated=parse_simulated(SIMULATED))
    d_safe, altitude, radius = float(defaults['d_safe']), float(defaults['altitude']), plan.radius
    nodes = start_graph(ros, plan)
    real, simulated = ('uav1', 'uav2'), ('uav3', 'uav4')
    assert sorted(name for name in nodes if name.startswith('fake ')) == [
        'fake px4_1', 'fake px4_2']  # no PX4 at all behind a simulated agent
    bridges = {name: nodes[f'/{name}/px4_bridge'] for name in real}
    fakes = {name: nodes[f'fake px4_{name[-1]}'] for name in real}
    sims = {name: nodes[f'/{name}/mobility'] for name in simulated}
    vehicles = {**fakes, **sims}

    observer = Node('observer')
    ros.add_node(observer)
    odoms, first_odoms, commands = {}, {}, {name: [] for name in plan.names}
    for name in plan.names:
        def on_odom(msg, name=name):
            odoms[name] = msg
            first_odoms.setdefault(name, msg)
        observer.create_subscription(Odometry, f'/{name}/odom', on_odom, 10)
        observer.create_subscription(Twist, f'/{name}/cmd_vel', commands[name].append, 10)
    engage = {name: observer.create_client(Trigger, f'/{name}/px4_bridge/engage')
              for name in real}

    separation = Separation(d_safe, N)

    def positions():
        return np.array([true_position_enu(vehicles[name]) for name in plan.names])

    observe = every(OBSERVE_PERIOD, lambda: separation.observe(positions()))

    assert spin_until(ros, lambda: ready(
        odoms, plan.names, engage.values(), bridges.values()), timeout=DEADLINE, each=observe), (
        f'odometry from {sorted(odoms)} only, or engage services missing')

    # The wiring the plan promises, as the ROS graph sees it: each cmd_vel flies exactly its
    # own vehicle, and each PX4 hears setpoints from its own bridge only.
    for name in plan.names:
        vehicle = 'mobility' if name in simulated else 'px4_bridge'
        assert endpoints(observer.get_subscriptions_info_by_topic(f'/{name}/cmd_vel')) == [
            '/observer', f'/{name}/{vehicle}'], name
    for name, bridge in bridges.items():
        for topic in ('trajectory_setpoint', 'offboard_control_mode', 'vehicle_command'):
            assert endpoints(observer.get_publishers_info_by_topic(bridge.topics[topic])) == [
                f'/{name}/px4_bridge'], (name, topic)

    # One world ENU frame: every vehicle starts at its origin (PX4s on the ground, unengaged).
    origins = dict(zip(plan.names, plan.px4_origins))
    for name in plan.names:
        p = first_odoms[name].pose.pose.position
        assert [p.x, p.y, p.z] == pytest.approx(list(origins[name]), abs=0.05), name
    for name in real:
        assert true_position_enu(fakes[name]) == pytest.approx(list(origins[name]), abs=1e-9)

    formed, settle, p, metrics = engage_and_form_ring(
        ros, engage, odoms, plan.names, radius, altitude, observe)

    def by_pair(values):
        return {f'{plan.names[i]}-{plan.names[j]}': round(d, 3) for (i, j), d in values.items()}
    print(f'\nmixed ring: formed={formed} after {settle:.1f} s wall from '
          f'the engage; E_gap {metrics.E_gap:.4f}, E_r {metrics.E_r:.4f}, altitudes '
          f'{np.round(p[:, 2], 2).tolist()}; closest approach after first farther than d_safe '
          f'({d_safe} m): {by_pair(separation.min_after)}')
    assert formed, (f'no ring at {altitude} m within {DEADLINE:.0f} s: E_gap {metrics.E_gap:.3f}, '
                    f'positions {np.round(p, 2).tolist()}')
    assert np.all(np.abs(np.hypot(p[:, 0], p[:, 1]) - radius) < 0.1 * radius), p
    for pair, closest in separation.min_after.items():
        assert closest >= CLOSE_APPROACH * d_safe, (
            f'{by_pair({pair: closest})}: a close approach after first farther than d_safe')

    # A simulated vehicle's fail-safe: its odometry stops (simulation gone), its agent goes
    # blind and holds (zero velocity), and nothing reaches a real vehicle.
    gone = sims['uav4']
    ros.remove_node(gone)
    gone.destroy_node()
    agent4 = nodes['/uav4/agent']
    assert spin_until(ros, lambda: agent4.status.kind == BLIND, timeout=DEADLINE), (
        agent4.status)
    commands['uav4'].clear()
    assert spin_until(ros, lambda: len(commands['uav4']) >= 3, timeout=DEADLINE)
    held = [[m.linear.x, m.linear.y, m.linear.z] for m in commands['uav4']]
    assert held == [[0.0, 0.0, 0.0]] * len(held), held
    assert agent4.status.kind == BLIND and 'odometry' in str(agent4.status)
    assert endpoints(observer.get_subscriptions_info_by_topic('/uav4/cmd_vel')) == ['/observer']
    assert [fakes[name].nav_state for name in real] == [OFFBOARD, OFFBOARD]

    # A PX4 vehicle's fail-safe: its agent dies, its bridge hovers, then lands it after
    # land_after; the other PX4 and the simulated agent fly on.
    land_after = 10.0  # config/px4_bridge.yaml, the launch's params_file
    killed = nodes['/uav1/agent']
    ros.remove_node(killed)
    killed.destroy_node()
    killed_at = time.monotonic()
    assert spin_until(ros, lambda: fakes['uav1'].nav_state == AUTO_LAND,
                      timeout=land_after + DEADLINE), fakes['uav1'].nav_state
    landed_after = time.monotonic() - killed_at
    print(f'uav1 landed {landed_after:.1f} s after its agent died (land_after {land_after} s)')
    assert landed_after >= land_after - 0.5
    assert fakes['uav1'].landed_commands()
    # ... and PX4 detects the landing and disarms: the bridge sends nothing into its land mode
    disarmed = fakes['uav1'].m['VehicleStatus'].ARMING_STATE_DISARMED
    assert spin_until(ros, lambda: fakes['uav1'].arming_state == disarmed, timeout=DEADLINE)
    assert fakes['uav1'].landed and -fakes['uav1'].true_position_ned[2] < 0.05
    assert fakes['uav2'].nav_state == OFFBOARD and not fakes['uav2'].landed_commands()
    before = odoms['uav3'].header.stamp.sec + odoms['uav3'].header.stamp.nanosec * 1e-9
    assert spin_until(ros, lambda: odoms['uav3'].header.stamp.sec
                      + odoms['uav3'].header.stamp.nanosec * 1e-9 > before + 0.5,
                      timeout=DEADLINE), 'the simulated uav3 stopped'
    assert nodes['/uav3/agent'].status.kind != BLIND
