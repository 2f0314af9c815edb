"""
px4_bridge_node.

Topic naming, settings, the missing-px4_msgs exit, and (where px4_msgs is built) real rclpy against
a small fake autopilot that answers like PX4's uXRCE-DDS client.
"""
import importlib.util
import math
from pathlib import Path
import selectors
import signal
import subprocess
import sys
import time

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from transforms3d.euler import euler2quat

from soliton_encirclement_ros.px4.bridge_node import (
    BridgeSettings, fill_enu_odometry, PARAMS, px4_topic)
from soliton_encirclement_ros.px4.frames import q_ned_frd_to_enu_flu, vehicle_odometry_to_enu
from support.harness import default_context_executor, spin_for, spin_until
from support.px4_ring import every

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
    assert (s.source_system, s.source_component) == (255, 191)  # not a vehicle's id
    assert s.offboard.cmd_timeout == DEFAULTS['cmd_timeout']
    assert s.offboard.land_after == DEFAULTS['land_after'] == 10.0
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
    ('origin_enu', [0.0, math.nan, 0.0], r'origin_enu\[1\] must be finite, got nan'),
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


ros = pytest.fixture(default_context_executor)


def make_graph(ros, bridge_params=(), with_bridge=True, **fake_options):
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs, Px4BridgeNode
    from support.fake_px4 import FakePx4

    fake = FakePx4('px4_1', q_ned=FAKE_Q_NED.tolist(), **fake_options)
    params = {'px4_namespace': 'px4_1', 'target_system': 2, 'warmup': 0.3, 'cmd_timeout': 0.3,
              'command_retry': 1.0, 'origin_enu': [100.0, 0.0, 0.0], **dict(bridge_params)}
    bridge = Px4BridgeNode(load_px4_msgs(), namespace='uav1', parameter_overrides=[
        Parameter(name, value=value) for name, value in params.items()]) if with_bridge else None
    operator = Node('operator')
    operator.odoms = []
    operator.create_subscription(Odometry, '/uav1/odom', operator.odoms.append, 10)
    operator.cmd_pub = operator.create_publisher(Twist, '/uav1/cmd_vel', 10)
    operator.engage = operator.create_client(Trigger, '/uav1/px4_bridge/engage')
    operator.land = operator.create_client(Trigger, '/uav1/px4_bridge/land')
    operator.statuses = []
    operator.create_subscription(DiagnosticStatus, '/uav1/px4_bridge/status',
                                 operator.statuses.append, 10)
    for node in (fake, bridge, operator):
        if node is not None:
            ros.add_node(node)
    return fake, bridge, operator


def call_engage(ros, operator):
    return call(ros, operator.engage)


def call(ros, client, each=None):
    """Call a Trigger service and return its response; ``each()`` runs every executor turn."""
    from std_srvs.srv import Trigger
    assert spin_until(ros, lambda: client.service_is_ready(), each=each)
    future = client.call_async(Trigger.Request())
    assert spin_until(ros, future.done, timeout=15.0, each=each)
    return future.result()


def engaged_graph(ros, bridge_params=(), **fake_options):
    """
    Return the graph with the bridge engaged and flying cmd_vel.

    Both services are discovered before the engage: on a loaded machine discovering ``~/land``
    once took 57 s, and an agent silent that long is landed by ``land_after``.
    """
    fake, bridge, operator = make_graph(ros, bridge_params, **fake_options)
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready()
                      and operator.land.service_is_ready())
    response = call_engage(ros, operator)
    assert response.success, response.message
    return fake, bridge, operator


def alive(operator):
    """Return an ``each`` callback: the agent keeps publishing cmd_vel (it is alive)."""
    return lambda: operator.cmd_pub.publish(command())


def flying(fake, operator):
    """Return a spin_until condition: cmd_vel (1, 2, 0.5) published and flown."""
    publish = alive(operator)

    def condition():
        publish()
        return bool(fake.setpoints) and fake.setpoints[-1].velocity[0] > 1.5
    return condition


def holding(fake, operator):
    """Return a spin_until condition: cmd_vel published, zero velocity flown."""
    publish = alive(operator)

    def condition():
        publish()
        return bool(fake.setpoints) and zero(fake.setpoints[-1])
    return condition


def command(x=1.0, y=2.0, z=0.5, yaw_rate=0.3):
    cmd = Twist()
    cmd.linear.x, cmd.linear.y, cmd.linear.z, cmd.angular.z = x, y, z, yaw_rate
    return cmd


def zero(setpoint):
    return list(setpoint.velocity) == [0.0] * 3 and setpoint.yawspeed == 0.0


FAKE_Q_NED = euler2quat(0.1, -0.05, 0.8, 'sxyz')


@px4
def test_bridge_odometry_engage_gate_and_velocity_stream(ros):
    from px4_msgs.msg import VehicleCommand

    from support.fake_px4 import POSITION_NED, SAMPLE_AGE_US
    fake, bridge, operator = make_graph(ros)
    assert spin_until(ros, lambda: operator.odoms)
    odom = operator.odoms[-1]
    p = odom.pose.pose.position
    assert np.allclose([p.x, p.y, p.z], [100.0 + POSITION_NED[1], POSITION_NED[0],
                                         -POSITION_NED[2]], atol=1e-5)
    o = odom.pose.pose.orientation
    assert np.allclose(np.abs(np.dot([o.w, o.x, o.y, o.z], q_ned_frd_to_enu_flu(FAKE_Q_NED))),
                       1.0, atol=1e-6)
    assert (odom.header.frame_id, odom.child_frame_id) == ('world', 'uav1/base_link')
    cov = np.reshape(odom.pose.covariance, (6, 6))
    assert np.allclose(np.diag(cov)[:3], [0.04, 0.01, 0.09], atol=1e-6)  # NED -> ENU: x, y swap
    assert np.trace(cov[3:, 3:]) == pytest.approx(0.006, abs=1e-6)  # rotated, trace kept
    assert np.trace(np.reshape(odom.twist.covariance, (6, 6))[:3, :3]) == pytest.approx(0.6)
    stamp_ns = odom.header.stamp.sec * 10**9 + odom.header.stamp.nanosec
    assert stamp_ns < bridge.get_clock().now().nanoseconds - SAMPLE_AGE_US * 1000 + 10**8

    # Before the engage PX4 (in Position mode) is sent nothing: no heartbeat, no setpoint.
    spin_for(ros, 0.8, each=alive(operator))
    assert not fake.heartbeats and not fake.setpoints and not fake.commands

    response = call_engage(ros, operator)
    assert response.success, response.message
    assert all(h.velocity and not h.position for h in fake.heartbeats)
    assert fake.setpoints and all(zero(s) for s in fake.setpoints)  # zero until engaged
    kinds = [c.command for c in fake.commands]
    assert kinds[:2] == [VehicleCommand.VEHICLE_CMD_DO_SET_MODE,
                         VehicleCommand.VEHICLE_CMD_COMPONENT_ARM_DISARM]
    assert all((c.target_system, c.source_system, c.source_component, c.from_external)
               == (2, 255, 191, True) for c in fake.commands)

    fake.setpoints.clear()

    def flying():
        operator.cmd_pub.publish(command())
        return any(s.velocity[0] > 1.5 for s in fake.setpoints)
    assert spin_until(ros, flying)
    sp = [s for s in fake.setpoints if s.velocity[0] > 1.5][-1]
    assert np.allclose(sp.velocity, [2.0, 1.0, -0.5], atol=1e-6)
    assert sp.yawspeed == pytest.approx(-0.3, abs=1e-6)
    assert all(math.isnan(v) for v in sp.position) and math.isnan(sp.yaw)

    fake.setpoints.clear()  # cmd_vel stops: after cmd_timeout the bridge holds
    assert spin_until(ros, lambda: fake.setpoints and zero(fake.setpoints[-1]))


@px4
def test_a_restarted_bridge_sends_nothing_to_px4_in_its_offboard_loss_failsafe(ros):
    """
    PX4 was flying offboard, lost the heartbeat (Hold) and keeps OFFBOARD as the user's intention.

    The new bridge sends it nothing (no heartbeat would bring it back to OFFBOARD): it stays in
    its failsafe's Hold, and nothing is commanded.
    """
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(
        ros, nav_state=VehicleStatus.NAVIGATION_STATE_OFFBOARD,
        arming_state=VehicleStatus.ARMING_STATE_ARMED)
    assert spin_until(ros, lambda: operator.odoms)
    spin_for(ros, 3.0, each=lambda: operator.cmd_pub.publish(command(3.0, 0.0, 0.0)))
    assert fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LOITER and fake.failsafe
    assert not fake.heartbeats and not fake.setpoints and not fake.commands
    assert operator.statuses[-1].message.startswith('PX4 is in a failsafe')


@px4
def test_heartbeat_streams_with_use_sim_time_and_no_clock(ros, capfd):
    fake, bridge, operator = make_graph(ros, bridge_params={'use_sim_time': True})
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready())
    assert call_engage(ros, operator).success   # the engage runs on the steady clock too
    beats = len(fake.heartbeat_times)
    spin_for(ros, 2.5)
    times = fake.heartbeat_times[beats:]
    span_s = (times[-1] - times[0]) * 1e-6
    assert len(times) >= 20 and span_s > 1.5  # ~10 Hz on the steady clock
    err = capfd.readouterr().err
    assert err.count('the ROS clock has not advanced for') == 1
    assert 'is /clock published?' in err


@px4
def test_land_after_lands_the_vehicle_of_a_dead_agent(ros, capfd):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(ros, bridge_params={'land_after': 1.0})
    assert spin_until(ros, lambda: operator.odoms)
    spin_for(ros, 0.5)
    assert call_engage(ros, operator).success
    spin_for(ros, 0.5, each=alive(operator))
    start = time.monotonic()
    assert spin_until(ros, lambda: fake.landed_commands(), timeout=5.0)
    waited = time.monotonic() - start
    spin_for(ros, 1.5)
    assert len(fake.landed_commands()) == 1 and 0.8 < waited < 2.0
    assert spin_until(ros, lambda: fake.arming_state == VehicleStatus.ARMING_STATE_DISARMED)
    assert fake.landed and fake.nav_state != VehicleStatus.NAVIGATION_STATE_OFFBOARD
    spin_for(ros, 0.5)
    err = capfd.readouterr().err
    assert 'land_after 1 s): the agent is gone; sending NAV_LAND' in err
    assert 'PX4 took the landing over: PX4 reports nav_state=18 (AUTO_LAND)' in err
    assert 'landed: PX4 reports nav_state=' in err and 'after NAV_LAND (land_after)' in err
    assert not bridge._seq.streaming


@px4
def test_a_refused_arm_fails_the_engage_and_leaves_offboard(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(ros, refuse_arm=True)
    assert spin_until(ros, lambda: operator.odoms)
    response = call_engage(ros, operator)
    assert not response.success
    assert 'PX4 refused COMPONENT_ARM_DISARM (400): DENIED' in response.message
    assert spin_until(ros, lambda: fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LOITER)
    assert fake.arming_state == VehicleStatus.ARMING_STATE_DISARMED


@px4
def test_lost_and_temporarily_rejected_requests_are_retried(ros):
    from px4_msgs.msg import VehicleCommand, VehicleStatus
    fake, bridge, operator = make_graph(ros, bridge_params={'command_retry': 0.3},
                                        drop_mode_requests=1, temporarily_reject=1)
    assert spin_until(ros, lambda: operator.odoms)
    response = call_engage(ros, operator)  # called as soon as the bridge hears PX4
    assert response.success, response.message
    mode, arm = (
        VehicleCommand.VEHICLE_CMD_DO_SET_MODE,
        VehicleCommand.VEHICLE_CMD_COMPONENT_ARM_DISARM,
    )
    assert [c for c, _ in fake.received] == [mode, mode, mode, arm]
    assert fake.received[-1] == (arm, VehicleStatus.NAVIGATION_STATE_OFFBOARD)


@px4
def test_a_wrong_target_system_is_named(ros, capfd):
    fake, bridge, operator = make_graph(ros, bridge_params={'target_system': 1})
    assert spin_until(ros, lambda: operator.odoms)
    spin_for(ros, 0.5)
    response = call_engage(ros, operator)
    assert not response.success
    assert 'target_system is 1 but this PX4 reports system_id 2' in response.message
    assert 'target_system is 1 but this PX4 reports system_id 2' in capfd.readouterr().err
    assert not fake.commands


@px4
def test_a_lost_nav_land_is_resent_and_land_answers_once_px4_confirms(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, {'command_retry': 0.3}, lose_land=2)
    assert spin_until(ros, flying(fake, operator))
    response = call(ros, operator.land, each=alive(operator))
    assert response.success, response.message
    assert response.message.startswith('landed: PX4 reports nav_state=')
    assert 'arming_state=1 (DISARMED), landed' in response.message
    assert len(fake.landed_commands()) == 3  # two lost on the link, the third answered
    assert fake.arming_state == VehicleStatus.ARMING_STATE_DISARMED


@px4
def test_a_denied_landing_stops_the_heartbeat_and_px4_failsafe_takes_the_vehicle(ros, capfd):
    from diagnostic_msgs.msg import DiagnosticStatus
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, deny_land=True)
    assert spin_until(ros, flying(fake, operator))
    response = call(ros, operator.land, each=alive(operator))
    assert not response.success
    assert response.message.startswith(
        'NAV_LAND not confirmed (PX4 refused NAV_LAND (21): DENIED): stopping the offboard '
        "heartbeat, so that PX4's offboard-loss failsafe takes the vehicle")
    heard = len(fake.heartbeats)
    # PX4's own failsafe (the fake's offboard_loss_timeout 0.5 s) takes the vehicle.
    assert spin_until(ros, lambda: fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LOITER)
    assert fake.failsafe and 'offboard_control_signal_lost' in fake.failsafe_flags
    setpoints = len(fake.setpoints)
    spin_for(ros, 1.0)
    assert len(fake.heartbeats) <= heard + 1 and len(fake.setpoints) == setpoints
    assert spin_until(ros, lambda: operator.statuses
                      and operator.statuses[-1].level == DiagnosticStatus.ERROR)
    assert operator.statuses[-1].message.startswith('offboard heartbeat stopped: NAV_LAND not '
                                                    'confirmed (PX4 refused NAV_LAND')
    err = capfd.readouterr().err
    assert err.count('NAV_LAND not confirmed') == 1
    assert fake.nav_state != VehicleStatus.NAVIGATION_STATE_OFFBOARD


@px4
def test_an_unanswered_landing_is_handed_to_px4_failsafe(ros):
    fake, bridge, operator = engaged_graph(
        ros, {'command_retry': 0.3, 'confirm_timeout': 1.0}, lose_land=1000)
    response = call(ros, operator.land, each=alive(operator))
    assert not response.success
    sent = len(fake.landed_commands())  # every command_retry during confirm_timeout
    assert sent >= 3 and f'PX4 did not answer NAV_LAND (sent {sent} times)' in response.message
    assert 'stopping the offboard heartbeat' in response.message
    assert not bridge._seq.streaming


@px4
def test_a_second_bridge_on_the_vehicle_is_named_and_cannot_engage(ros, capfd):
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs, Px4BridgeNode
    fake, bridge, operator = engaged_graph(ros)
    assert spin_until(ros, flying(fake, operator))
    second = Px4BridgeNode(load_px4_msgs(), namespace='spare', parameter_overrides=[
        Parameter('px4_namespace', value='px4_1'), Parameter('target_system', value=2)])
    ros.add_node(second)
    # The engaged bridge names the newcomer once and holds its vehicle.
    assert spin_until(ros, lambda: any('/spare/px4_bridge' in s.message
                                       for s in operator.statuses), timeout=10.0)
    fake.setpoints.clear()
    assert spin_until(ros, holding(fake, operator))
    spin_for(ros, 0.5, each=alive(operator))
    assert all(zero(sp) for sp in fake.setpoints[-5:])
    spare = Node('spare_operator')
    spare.engage = spare.create_client(Trigger, '/spare/px4_bridge/engage')
    spare.statuses = []
    spare.create_subscription(DiagnosticStatus, '/spare/px4_bridge/status',
                              spare.statuses.append, 10)
    ros.add_node(spare)
    assert spin_until(ros, lambda: any('/uav1/px4_bridge' in s.message for s in spare.statuses),
                      timeout=10.0)
    response = call(ros, spare.engage)
    assert not response.success
    assert response.message == ('another node publishes setpoints to this vehicle: '
                                '/uav1/px4_bridge; stop it first (one bridge per vehicle)')
    status = [s for s in operator.statuses if '/spare/px4_bridge' in s.message]
    assert status[-1].level == DiagnosticStatus.WARN
    ros.remove_node(second)
    second.destroy_node()
    assert spin_until(ros, flying(fake, operator), timeout=10.0)  # flies again once it is gone
    spin_for(ros, 0.5)  # the next heartbeats log what the sequencer reported
    err = capfd.readouterr().err
    named = [line for line in err.splitlines()
             if 'another node publishes setpoints to this vehicle (' in line]
    assert len(named) <= 2, named  # at most once by each bridge, naming the other
    assert any(line.endswith('/spare/px4_bridge; its setpoints interleave with this '
                             "bridge's: engage is refused and an engaged vehicle holds (zero "
                             'velocity) while it is there') for line in named), named
    assert 'no other node publishes setpoints to this vehicle any more' in err
    assert 'engage refused: another node publishes setpoints to this vehicle' in err


@px4
def test_an_estimator_jump_is_logged_and_held_until_re_engaged(ros, capfd):
    from diagnostic_msgs.msg import DiagnosticStatus
    fake, bridge, operator = engaged_graph(ros)
    assert spin_until(ros, flying(fake, operator))
    fake.reset_estimate([3.0, -4.0, 0.0])  # 5 m: more than max_reset_jump 2 m
    fake.setpoints.clear()
    assert spin_until(ros, holding(fake, operator))
    spin_for(ros, 2.0, each=alive(operator))  # > reset_hold
    assert all(zero(sp) for sp in fake.setpoints[-20:])
    assert spin_until(ros, lambda: operator.statuses and operator.statuses[-1].message.startswith(
        'PX4 estimator reset moved the position estimate 5.00 m (> max_reset_jump 2 m)'))
    assert operator.statuses[-1].level == DiagnosticStatus.ERROR
    assert capfd.readouterr().err.count(
        'PX4 estimator reset (reset_counter 0 -> 1): the position estimate jumped 5.00 m '
        '(-4.00, +3.00, +0.00); more than max_reset_jump 2 m') == 1
    # held where it was: the others are told that, not where the new estimate says
    p = operator.odoms[-1].pose.pose.position
    assert (p.x, p.y) == pytest.approx((100.0 - 2.0, 4.0), abs=1e-5)
    response = call_engage(ros, operator)
    assert response.success and 'after the estimator reset' in response.message
    assert spin_until(ros, flying(fake, operator))
    p = operator.odoms[-1].pose.pose.position  # the operator accepted the new estimate
    assert (p.x, p.y) == pytest.approx((100.0 - 2.0 - 4.0, 4.0 + 3.0), abs=0.5)


@px4
def test_a_small_estimator_jump_holds_for_reset_hold_then_flies(ros, capfd):
    fake, bridge, operator = engaged_graph(ros, {'reset_hold': 1.0})
    assert spin_until(ros, flying(fake, operator))
    fake.reset_estimate([1.0, 0.0, 0.0])
    assert spin_until(ros, holding(fake, operator))
    start = time.monotonic()
    assert spin_until(ros, flying(fake, operator))
    assert 0.5 < time.monotonic() - start < 3.0
    err = capfd.readouterr().err
    assert err.count('PX4 estimator reset (reset_counter 0 -> 1): the position estimate '
                     'jumped 1.00 m') == 1
    assert 'commanding zero velocity for reset_hold 1 s' in err


@px4
def test_engaging_in_a_failsafe_names_it(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(ros)
    assert spin_until(ros, lambda: operator.odoms)
    fake.enter_failsafe(VehicleStatus.NAVIGATION_STATE_AUTO_RTL,
                        ['battery_low_remaining_time', 'gcs_connection_lost'])
    assert spin_until(ros, lambda: bridge._seq._failsafe)
    spin_for(ros, 0.3)
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message == (
        'PX4 is in a failsafe (nav_state=5 (AUTO_RTL); active: gcs_connection_lost, '
        'battery_low_remaining_time): clear it (or take over) before engaging')
    assert not fake.commands


@px4
def test_a_failsafe_during_the_engage_is_named_not_a_timeout(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(ros, {'warmup': 1.0}, refuse_arm=False)
    assert spin_until(ros, lambda: operator.odoms)
    from std_srvs.srv import Trigger
    future = operator.engage.call_async(Trigger.Request())
    assert spin_until(ros, lambda: bridge._seq.phase.value == 'mode_requested')
    fake.enter_failsafe(VehicleStatus.NAVIGATION_STATE_AUTO_LOITER, ['local_position_invalid'])
    assert spin_until(ros, future.done, timeout=15.0)
    response = future.result()
    assert not response.success
    assert response.message.startswith('PX4 is in a failsafe (nav_state=4 (AUTO_LOITER)')
    assert 'local_position_invalid' in response.message


@px4
def test_an_arm_refused_by_preflight_checks_names_px4_answer(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(ros, {'confirm_timeout': 2.0, 'command_retry': 0.5},
                                        preflight_fail=True)
    assert spin_until(ros, lambda: operator.odoms)
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message.startswith(
        'no confirmation within 2 s: arming refused: PX4 answered COMPONENT_ARM_DISARM (400) '
        'TEMPORARILY_REJECTED (sent ')
    assert response.message.endswith(
        "nav_state=14 (OFFBOARD), arming_state=1 (DISARMED); PX4's pre-flight checks fail "
        '(pre_flight_checks_pass false)')
    assert spin_until(ros, lambda: fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LOITER)


def bridge_command():
    script = Path(sys.executable).with_name('px4_bridge_node')
    return [str(script)] if script.exists() else [
        sys.executable, '-c',
        'import sys; from soliton_encirclement_ros.px4.bridge_node import main; sys.exit(main())']


@px4
def test_node_process_stops_cleanly_on_sigint():
    """
    Exit 0 without a traceback.

    Whether rclpy's spin() returns or raises ExternalShutdownException on SIGINT is a race; main()
    must accept both.
    """
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
    path = Path(__file__).resolve().parents[2] / 'config' / 'px4_bridge.yaml'
    text = path.read_text()
    values = yaml.safe_load(text)['/**/px4_bridge']['ros__parameters']
    # An empty list has no type in a ROS params file: geo_reference (unset) is a comment.
    unset = {'geo_reference'}
    assert set(values) == set(DEFAULTS) - unset
    assert values == {k: v for k, v in DEFAULTS.items() if k not in unset}
    assert all(f'# {name}: ' in text for name in unset)
    BridgeSettings.from_mapping(values)


# ---- issue 38: the landing's truth, a twin launch, the reset's uncertainty ------------------
@px4
@pytest.mark.parametrize('fake_options', [
    {'lose_land_acks': True},                      # acks lost: PX4 lands all the same
    {'land_ack_delay': 3.0},                       # acks late, after confirm_timeout
    {'stale_land_ack': 2},                         # a DENIED left over from an earlier attempt
], ids=['lost', 'late', 'stale'])
def test_land_answers_from_px4_state_whatever_the_acks(ros, fake_options):
    from diagnostic_msgs.msg import DiagnosticStatus
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, {'confirm_timeout': 2.0, 'command_retry': 0.3},
                                           **fake_options)
    assert spin_until(ros, flying(fake, operator))
    response = call(ros, operator.land, each=alive(operator))
    assert response.success, response.message
    assert response.message.startswith('landed: PX4 reports nav_state=')
    assert fake.arming_state == VehicleStatus.ARMING_STATE_DISARMED
    assert bridge._seq._stream_stopped is None  # the heartbeat was never given up on
    spin_for(ros, 3.5)            # a late ack arrives: it changes nothing
    assert bridge._seq._stream_stopped is None
    assert spin_until(ros, lambda: operator.statuses
                      and operator.statuses[-1].level == DiagnosticStatus.OK)


@px4
def test_a_landing_confirmed_after_it_was_given_up_clears_the_error(ros, capfd):
    from diagnostic_msgs.msg import DiagnosticStatus
    fake, bridge, operator = engaged_graph(
        ros, {'confirm_timeout': 1.0, 'command_retry': 0.3}, lose_land_acks=True, land_delay=2.5)
    assert spin_until(ros, flying(fake, operator))
    response = call(ros, operator.land, each=alive(operator))
    assert not response.success and 'stopping the offboard heartbeat' in response.message
    assert spin_until(ros, lambda: operator.statuses
                      and operator.statuses[-1].level == DiagnosticStatus.ERROR)
    # PX4 reports AUTO_LAND late: the status is cleared, once.
    assert spin_until(ros, lambda: operator.statuses[-1].level == DiagnosticStatus.OK,
                      timeout=15.0)
    assert operator.statuses[-1].message.startswith(
        'landing confirmed: PX4 reports nav_state=18 (AUTO_LAND)')
    spin_for(ros, 1.0)
    assert capfd.readouterr().err.count('landing confirmed after all') == 1


@px4
def test_engage_is_refused_while_px4_is_landing(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = make_graph(
        ros, nav_state=VehicleStatus.NAVIGATION_STATE_AUTO_LAND,
        arming_state=VehicleStatus.ARMING_STATE_ARMED)
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready())
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message.startswith(
        'PX4 is landing (nav_state=18 (AUTO_LAND), arming_state=2 (ARMED)): the bridge never '
        'takes a vehicle out of a landing')
    spin_for(ros, 1.0)
    assert fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LAND
    assert not any(c.command == 176 for c in fake.commands)  # no DO_SET_MODE was sent


@px4
def test_the_same_bridge_launched_twice_refuses_to_engage(ros):
    """Two /uav1/px4_bridge processes (one launch started twice): neither engages."""
    from support.waits import Running
    fake, _, operator = make_graph(ros, with_bridge=False)
    args = ['--ros-args', '-r', '__ns:=/uav1', '-p', 'px4_namespace:=px4_1',
            '-p', 'target_system:=2', '-p', 'warmup:=0.3']
    with Running(bridge_command() + args) as first, Running(bridge_command() + args) as second:
        for proc in (first, second):
            proc.wait_for_line('bridging cmd_vel/odom')
        for proc in (first, second):  # each names the other, once
            proc.wait_for_line('another node publishes setpoints to this vehicle')
        assert spin_until(ros, lambda: operator.engage.service_is_ready())
        # A call reaches each server it is matched with; both refuse, and each says so in its
        # log. (A server not yet matched with the client misses a call: call again until both
        # said it. The client keeps the first answer: the logs are the test.)
        from std_srvs.srv import Trigger
        refusal = ('engage refused: another node publishes setpoints to this vehicle: '
                   "/uav1/px4_bridge (another bridge with this one's own name: the same launch "
                   'started twice?)')
        futures = []

        def both_refused():
            if not futures or futures[-1].done():
                futures.append(operator.engage.call_async(Trigger.Request()))
            return refusal in first.err and refusal in second.err
        assert spin_until(ros, every(1.0, both_refused), timeout=30.0), (first.err, second.err)
        for future in (f for f in futures if f.done()):
            assert not future.result().success
            assert future.result().message.startswith(refusal[len('engage refused: '):])

        def incarnations():
            return {v.value for s in operator.statuses for v in s.values
                    if v.key == 'incarnation'}
        # the two twins tell themselves apart on ~/status (each publishes it every second)
        assert spin_until(ros, lambda: len(incarnations()) >= 2, timeout=30.0)
        assert not any(c.command == 176 for c in fake.commands)  # nothing reached PX4


@px4
def test_after_a_reset_the_odometry_carries_the_jump_as_position_uncertainty(ros):
    fake, bridge, operator = engaged_graph(ros)
    assert spin_until(ros, flying(fake, operator))
    base = operator.odoms[-1].pose.covariance
    assert base[0] == pytest.approx(0.04) and base[7] == pytest.approx(0.01)  # PX4's, ENU
    fake.reset_estimate([0.9, -1.2, 0.0])  # 1.5 m: flown on the new estimate, as uncertain
    assert spin_until(ros, lambda: operator.odoms[-1].pose.covariance[0] > 2.0)
    cov = operator.odoms[-1].pose.covariance
    assert cov[0] == pytest.approx(2.29) and cov[7] == pytest.approx(2.26)
    assert spin_until(ros, lambda: operator.odoms[-1].pose.covariance[0] < 1.0,
                      timeout=15.0)  # reset_window later


# ---- issue 37 §6: a px4_msgs that does not match the firmware is named, not waited on -------
def test_a_topic_under_another_message_version_is_found():
    from soliton_encirclement_ros.px4.bridge_node import other_versions, version_mismatch_text
    names = ['/px4_1/fmu/out/vehicle_status_v2', '/px4_1/fmu/out/vehicle_status_v4x',
             '/px4_2/fmu/out/vehicle_status', '/px4_1/fmu/out/vehicle_odometry',
             '/px4_1/fmu/out/vehicle_status_v4']
    assert other_versions('/px4_1/fmu/out/vehicle_status_v4', names) == [
        '/px4_1/fmu/out/vehicle_status_v2']
    assert other_versions('/px4_2/fmu/out/vehicle_status_v1', names) == [
        '/px4_2/fmu/out/vehicle_status']
    assert other_versions('/px4_1/fmu/out/vehicle_odometry', names) == []
    line = version_mismatch_text('/fmu/out/vehicle_status_v4', ['/fmu/out/vehicle_status_v2'],
                                 'VehicleStatus')
    assert line.startswith('PX4 publishes /fmu/out/vehicle_status_v2 but this bridge listens on '
                           '/fmu/out/vehicle_status_v4: its px4_msgs does not match the firmware; '
                           'build the px4_msgs branch whose VehicleStatus has MESSAGE_VERSION 2')


@px4
def test_a_px4_msgs_of_another_message_version_is_named_in_one_line(ros, capfd):
    """PX4 publishes vehicle_status_v2, the built px4_msgs listens on _v4: say so, once."""
    from px4_msgs.msg import VehicleStatus
    ours = getattr(VehicleStatus, 'MESSAGE_VERSION', 0)
    theirs = 2 if ours != 2 else 3
    fake, bridge, operator = make_graph(ros, message_versions={'VehicleStatus': theirs})
    expected = (f'PX4 publishes /px4_1/fmu/out/vehicle_status_v{theirs} but this bridge listens '
                f'on {bridge.topics["vehicle_status"]}: its px4_msgs does not match the firmware; '
                f'build the px4_msgs branch whose VehicleStatus has MESSAGE_VERSION {theirs}')
    assert spin_until(ros, lambda: bridge._seq.link_hint is not None, timeout=30.0)
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready())
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message.startswith('no vehicle_status received from PX4 yet: ' + expected)
    spin_for(ros, 2.0)
    assert capfd.readouterr().err.count(f'px4_bridge]: {expected}') == 1  # warned once


# ---- origins from GPS (issue 37 part 1) ---------------------------------------------------
GEO_REFERENCE = [47.397742, 8.545594, 488.0]  # the field's shared origin (PX4 SITL's default)


def point_at(east, north, up=0.0):
    """Return the (lat, lon, alt) ``east``, ``north``, ``up`` m from GEO_REFERENCE."""
    import pymap3d
    return pymap3d.enu2geodetic(east, north, up, *GEO_REFERENCE)


@px4
def test_gps_places_the_vehicle_from_its_estimator_reference(ros, capfd):
    # This PX4's estimator took its reference 30 m east, 40 m north, 2 m up of the field origin.
    fake, bridge, operator = make_graph(
        ros, {'origin_source': 'gps', 'geo_reference': GEO_REFERENCE,
              'origin_enu': [0.0, 0.0, 0.0]}, ref_point=point_at(30.0, 40.0, 2.0))
    assert spin_until(ros, lambda: operator.odoms)
    p = operator.odoms[-1].pose.pose.position
    # The fake's local NED position (4, -2, -10) is ENU (-2, 4, 10) from its origin.
    assert (p.x, p.y, p.z) == pytest.approx((30.0 - 2.0, 40.0 + 4.0, 2.0 + 10.0), abs=0.01)
    assert spin_until(ros, lambda: operator.statuses and {
        v.key: v.value for v in operator.statuses[-1].values}.get('origin_enu')
        == '[30.00, 40.00, 2.00]')
    assert "placed by GPS: PX4's estimator reference 47.39" in capfd.readouterr().err


@px4
def test_gps_without_a_fix_publishes_no_odometry_and_refuses_the_engage(ros, capfd):
    fake, bridge, operator = make_graph(
        ros, {'origin_source': 'gps', 'geo_reference': GEO_REFERENCE}, ref_point=None)
    assert spin_until(ros, lambda: operator.engage.service_is_ready())
    spin_for(ros, 0.5)
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message == (
        'origin_source gps: no global position reference from PX4 yet (vehicle_local_position '
        'xy_global/z_global not valid: GPS fix?), so this vehicle is not placed in the world '
        'frame')
    assert operator.odoms == []
    spin_for(ros, 2.5)  # PX4 sends its reference right after its odometry: a warning after 2 s
    assert operator.odoms == []
    assert capfd.readouterr().err.count('not publishing odom: origin_source gps') == 1
    fake.set_reference(point_at(-5.0, 7.0))  # the fix comes
    assert spin_until(ros, lambda: operator.odoms)
    p = operator.odoms[-1].pose.pose.position
    assert (p.x, p.y) == pytest.approx((-5.0 - 2.0, 7.0 + 4.0), abs=0.01)
    assert call_engage(ros, operator).success


@px4
def test_an_origin_typo_is_refused_naming_both_values(ros):
    # Measured by hand as (100, 0, 0); GPS says the estimator started at (10, 0, 0).
    fake, bridge, operator = make_graph(
        ros, {'origin_enu': [100.0, 0.0, 0.0], 'geo_reference': GEO_REFERENCE},
        ref_point=point_at(10.0, 0.0))
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready())
    assert spin_until(ros, lambda: bridge._seq.origin_problem)
    response = call_engage(ros, operator)
    assert not response.success
    assert response.message == (
        'origin_enu [100.00, 0.00, 0.00] m disagrees with GPS [10.00, 0.00, 0.00] m by 90.00 m '
        '(origin_tolerance 3 m): correct origin_enu, or fly origin_source gps')


@px4
def test_a_given_origin_within_tolerance_of_gps_engages(ros):
    fake, bridge, operator = make_graph(
        ros, {'origin_enu': [100.0, 0.0, 0.0], 'geo_reference': GEO_REFERENCE},
        ref_point=point_at(101.5, 1.0))
    assert spin_until(ros, lambda: operator.odoms and operator.engage.service_is_ready()
                      and operator.statuses)
    spin_for(ros, 0.3)
    assert bridge._seq.origin_problem is None
    assert call_engage(ros, operator).success


@px4
def test_a_new_estimator_reference_re_places_and_holds_like_a_reset(ros, capfd):
    fake, bridge, operator = engaged_graph(
        ros, {'origin_source': 'gps', 'geo_reference': GEO_REFERENCE},
        ref_point=point_at(0.0, 0.0))
    assert spin_until(ros, flying(fake, operator))
    fake.set_reference(point_at(3.0, 4.0))  # 5 m: past max_reset_jump 2 m
    fake.setpoints.clear()
    assert spin_until(ros, holding(fake, operator))
    assert spin_until(ros, lambda: operator.odoms[-1].pose.pose.position.x == pytest.approx(
        3.0 - 2.0, abs=0.01))
    err = capfd.readouterr().err
    assert 'PX4 estimator reference changed (ref_timestamp' in err and '; re-placed' in err
    assert ('PX4 estimator reference changed (ref_timestamp): the origin moved 5.00 m; more '
            'than max_reset_jump 2 m: commanding zero velocity until the operator calls '
            '~/engage again') in err
    response = call_engage(ros, operator)
    assert response.success and 'after the estimator reset' in response.message
    assert spin_until(ros, flying(fake, operator))


# ---- battery (issue 37 §5) ---------------------------------------------------------------
@px4
def test_a_low_battery_lands_the_vehicle_and_its_agent_leaves_the_ring(ros, capfd):
    from diagnostic_msgs.msg import DiagnosticStatus
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from soliton_encirclement_ros.interface import agent_state_from_msg
    from soliton_encirclement_ros.nodes.agent_node import AgentNode
    fake, bridge, operator = engaged_graph(ros)
    fake.battery = (0.6, 0)
    agent = AgentNode(namespace='uav1', parameter_overrides=[Parameter('agent_id', value=1)])
    ros.add_node(agent)
    statuses, broadcasts = [], []
    operator.create_subscription(DiagnosticStatus, '/uav1/agent/status', statuses.append, 10)
    # the agent's own broadcasts: its bridge speaks for it (incarnation 0) while it is silent,
    # as it may be on a loaded machine before its first ~/status
    operator.create_subscription(
        Float64MultiArray, '/swarm/agent_states',
        lambda m: broadcasts.append(state) if (state := agent_state_from_msg(m)).incarnation
        == agent.incarnation else None, 50)
    assert spin_until(ros, lambda: broadcasts and broadcasts[-1].member)  # in the ring
    fake.battery = (0.2, 1)
    reason = 'landing (battery 20% remaining, below min_battery 25%)'
    assert spin_until(ros, lambda: fake.nav_state == 18)  # NAV_LAND: AUTO_LAND
    assert spin_until(ros, lambda: statuses and statuses[-1].message
                      == f'failed (vehicle: {reason})')
    assert statuses[-1].level == DiagnosticStatus.ERROR
    assert spin_until(ros, lambda: not broadcasts[-1].member)  # its presence only
    err = capfd.readouterr().err
    assert err.count('battery 20% remaining, below min_battery 25%: leaving the ring and '
                     'landing') == 1
    assert f'agent 1: the vehicle left the ring: {reason}' in err
    # An agent started after it hears the latched reason too.
    late = AgentNode(namespace='uav1', parameter_overrides=[Parameter('agent_id', value=1)])
    ros.add_node(late)
    assert spin_until(ros, lambda: late.failed)


# ---- PX4 as the real autopilot does it: setpoints only in the mode the bridge asked for -------
def climb(ros, fake, operator, height=4.0):
    """Fly the kinematic vehicle up to ``height`` m (cmd_vel up) and return once there."""
    up = lambda: operator.cmd_pub.publish(command(0.0, 0.0, 3.0, 0.0))  # noqa: E731
    assert spin_until(ros, lambda: -fake.true_position_ned[2] > height, each=up, timeout=20.0)


def call_hold(ros, operator, each=None):
    from std_srvs.srv import Trigger
    if not hasattr(operator, 'hold'):
        operator.hold = operator.create_client(Trigger, '/uav1/px4_bridge/hold')
    return call(ros, operator.hold, each=each)


@px4
def test_the_vehicle_lands_and_disarms_and_land_answers_only_then(ros):
    """PX4 detects the landing only when no setpoint mixes with its land mode's own."""
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, kinematic=True, land_speed=3.0)
    climb(ros, fake, operator)
    fake.setpoint_log.clear()
    response = call(ros, operator.land, each=alive(operator))
    assert response.success, response.message
    assert response.message.startswith('landed: PX4 reports nav_state=')
    assert 'arming_state=1 (DISARMED), landed' in response.message
    assert fake.arming_state == VehicleStatus.ARMING_STATE_DISARMED and fake.landed
    assert -fake.true_position_ned[2] < 0.05
    land = VehicleStatus.NAVIGATION_STATE_AUTO_LAND
    entered = min(t for t, nav, _ in fake.setpoint_log if nav == land) if fake.setpoints_in(
        {land}) else fake._now_us()
    # the bridge hears AUTO_LAND within a status period or two: nothing after that
    assert fake.setpoints_in({land}, after_us=entered + 300_000) == 0
    spin_for(ros, 1.0)  # no heartbeat at the disarm: PX4 does not return to OFFBOARD
    assert fake.nav_state != VehicleStatus.NAVIGATION_STATE_OFFBOARD
    status = operator.statuses[-1]
    assert status.message.startswith('landed (operator request): PX4 reports')


@px4
def test_after_landing_the_vehicle_is_engaged_again_and_flies(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, kinematic=True)
    climb(ros, fake, operator, 2.0)
    assert call(ros, operator.land, each=alive(operator)).success
    spin_for(ros, 0.3)
    response = call_engage(ros, operator)
    assert response.success, response.message
    assert fake.arming_state == VehicleStatus.ARMING_STATE_ARMED
    climb(ros, fake, operator, 2.0)   # it flies cmd_vel again
    assert bridge._seq.out_of_ring is None


@px4
@pytest.mark.parametrize('mode', ['hold', 'rtl'])
def test_no_setpoint_reaches_px4_in_a_mode_a_pilot_or_failsafe_chose(ros, mode):
    """An RC switch to Hold, or a failsafe's RTL: the bridge sends nothing, the vehicle holds."""
    from px4_msgs.msg import VehicleStatus
    nav = {'hold': VehicleStatus.NAVIGATION_STATE_AUTO_LOITER,
           'rtl': VehicleStatus.NAVIGATION_STATE_AUTO_RTL}[mode]
    fake, bridge, operator = engaged_graph(ros, kinematic=True)
    climb(ros, fake, operator, 2.0)
    assert spin_until(ros, flying(fake, operator))
    fake.switch_mode(nav)
    switched = fake._now_us()
    beats = len(fake.heartbeats)
    spin_for(ros, 1.5, each=alive(operator))
    assert fake.setpoints_in({nav}, after_us=switched + 300_000) == 0
    assert len(fake.heartbeats) - beats <= 3
    assert bridge._seq.out_of_ring.startswith(f'PX4 left OFFBOARD (nav_state={nav} ')


@px4
def test_hold_puts_px4_in_hold_at_once_and_then_sends_nothing(ros):
    from px4_msgs.msg import VehicleStatus
    fake, bridge, operator = engaged_graph(ros, kinematic=True)
    climb(ros, fake, operator, 2.0)
    assert spin_until(ros, flying(fake, operator))
    response = call_hold(ros, operator, each=alive(operator))
    assert response.success, response.message
    assert response.message.startswith('holding: PX4 reports nav_state=4 (AUTO_LOITER), '
                                       'arming_state=2 (ARMED) (operator request)')
    assert fake.nav_state == VehicleStatus.NAVIGATION_STATE_AUTO_LOITER
    held = fake._now_us()
    spin_for(ros, 1.0, each=alive(operator))
    assert fake.setpoints_in({VehicleStatus.NAVIGATION_STATE_AUTO_LOITER},
                             after_us=held + 100_000) == 0
    assert bridge._seq.out_of_ring == 'hold (operator request)'
    response = call_engage(ros, operator)   # and it flies again
    assert response.success, response.message
    assert spin_until(ros, flying(fake, operator))
