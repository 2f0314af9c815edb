"""
fleet_node over real DDS: its services read the graph and act on every bridge (issue 37 §4).

The vehicles here are stand-ins that speak as bridges and agents do on the wire: each bridge's
and agent's DiagnosticStatus on ``/diagnostics`` (the keys ``px4_bridge_node`` and
``agent_node`` publish), odometry, and the bridges' ``~/engage``, ``~/land`` and ``~/hold``
(std_srvs/Trigger). The verdict on each vehicle is what its status says, a lost reply no
failure. test_px4_fleet.py flies the same with
real bridges and the PX4 test double, where px4_msgs is built.
"""
import functools
import subprocess
import sys

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
import pytest
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger
import yaml

from soliton_encirclement_ros.nodes.fleet_node import FleetNode
from support.harness import default_context_executor, spin_until

ros = pytest.fixture(default_context_executor)
NAMES = ('uav1', 'uav2', 'uav3')


class StandIn(Node):
    """
    Three vehicles' bridges and agents, as the wire shows them.

    Each bridge's status follows its requests as a bridge's does (phase, out_of_ring, PX4's
    nav_state and arming_state); uav3 refuses its landing; uav2's ``~/land`` never answers
    (the reply lost by the middleware) though its vehicle lands.
    """

    def __init__(self):
        super().__init__('stand_in')
        self.battery = dict.fromkeys(NAMES, '0.80')
        self.calls = []
        self.state = {name: {'phase': 'idle', 'nav_state': '2 (POSCTL)',
                             'arming_state': 'DISARMED'} for name in NAMES}
        self._diag = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._odom = {name: self.create_publisher(Odometry, f'/{name}/odom', 10)
                      for name in NAMES}
        for name in NAMES:
            for action in ('engage', 'land', 'hold'):
                self.create_service(Trigger, f'/{name}/px4_bridge/{action}',
                                    functools.partial(self._answer, name, action),
                                    callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(0.2, self._publish)

    async def _answer(self, name, action, request, response):
        self.calls.append((name, action))
        state = self.state[name]
        if action == 'engage':
            state.update(phase='active', nav_state='14 (OFFBOARD)', arming_state='ARMED')
            state.pop('out_of_ring', None)
            response.success = True
            response.message = 'engaged: PX4 confirmed OFFBOARD and ARMED; following cmd_vel'
        elif action == 'hold':
            state.update(phase='idle', nav_state='4 (AUTO_LOITER)',
                         out_of_ring='hold (operator request)')
            response.success, response.message = True, 'holding: PX4 reports AUTO_LOITER'
        elif name == 'uav3':
            response.success = False
            response.message = 'PX4 refused NAV_LAND: DENIED; offboard heartbeat stopped'
        else:
            state.update(phase='idle', nav_state='18 (AUTO_LAND)', arming_state='DISARMED',
                         out_of_ring='landed (operator request)')
            response.success, response.message = True, 'landed: PX4 reports DISARMED'
            if name == 'uav2':
                await Future()  # the reply is lost: never sent
        return response

    def _publish(self):
        statuses = []
        for i, name in enumerate(NAMES):
            bridge = {'ready': 'yes', 'origin_source': 'gps',
                      'origin_enu': f'({5.0 * i:.2f}, 0.00, 0.00)',
                      'battery_remaining': self.battery[name], 'target_system': '1',
                      'px4_namespace': '', 'geo_reference': '47,8,400', **self.state[name]}
            agent = {'agent_id': str(i + 1), 'duplicate_id': 'false', 'radius': '20',
                     'altitude': '10', 'd_safe': '2',
                     **{f'link.{j + 1}': 'heard=20 lost=0 offset=+0.0010'
                        for j in range(len(NAMES)) if j != i}}
            for full, values in ((f'/{name}/px4_bridge', bridge), (f'/{name}/agent', agent)):
                message = (f'{values["out_of_ring"]}: ...' if 'out_of_ring' in values
                           else values.get('phase', 'ok'))
                statuses.append(DiagnosticStatus(name=full, message=message, values=[
                    KeyValue(key=k, value=v) for k, v in values.items()]))
            odom = Odometry()
            odom.pose.pose.position.x = 5.0 * i
            self._odom[name].publish(odom)
        self._diag.publish(DiagnosticArray(status=statuses))


def fleet_file(tmp_path):
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': [47.0, 8.0, 400.0], 'vehicles': [
        {'name': name, 'agent_id': i + 1, 'host': f'c{i + 1}'} for i, name in enumerate(NAMES)]}))
    return path


def call(ros, client):
    assert spin_until(ros, client.service_is_ready)
    future = client.call_async(Trigger.Request())
    assert spin_until(ros, future.done)
    return future.result()


def test_fleet_node_checks_refuses_a_failing_engage_and_acts_on_every_bridge(
        ros, tmp_path, capfd):
    stand_in = StandIn()
    node = FleetNode(cli_args=['--ros-args', '-p', f'fleet_file:={fleet_file(tmp_path)}',
                               '-p', 'timeout:=5.0'])
    client_node = Node('operator')
    for n in (stand_in, node, client_node):
        ros.add_node(n)
    check, engage, land, hold = (client_node.create_client(Trigger, f'/fleet/{a}')
                                 for a in ('check', 'engage', 'land', 'hold'))
    assert spin_until(ros, lambda: node.operator.heard_all() and node.operator.links_known())

    result = call(ros, check)
    assert result.success and result.message.endswith('all 27 checks passed'), result.message

    stand_in.battery['uav2'] = '0.10'
    assert spin_until(ros, lambda: not node.operator.check().passed)
    result = call(ros, engage)
    assert not result.success
    assert '  uav2 battery: 10% remaining, below min_battery 25%' in result.message
    assert result.message.endswith('engage refused: the pre-flight check failed; nothing was '
                                   'engaged')
    assert stand_in.calls == []  # no bridge was asked

    stand_in.battery['uav2'] = '0.90'
    assert spin_until(ros, lambda: node.operator.check().passed)
    result = call(ros, engage)
    assert result.success, result.message
    assert result.message.splitlines() == [
        f'{name}: engage ok: engaged: PX4 confirmed OFFBOARD and ARMED; following cmd_vel'
        for name in NAMES]
    result = call(ros, land)
    assert not result.success  # uav3's landing was refused: said, and the answer is false
    lines = result.message.splitlines()
    assert lines[0] == 'uav1: land ok: landed: PX4 reports DISARMED'
    # uav2's answer was lost: its status says it landed, and that is the verdict
    assert lines[1] == ('uav2: land ok: landed (operator request): ... (as its status says; '
                        'its answer was lost)')
    assert lines[2] == ('uav3: land FAILED: PX4 refused NAV_LAND: DENIED; offboard heartbeat '
                        'stopped')
    assert sorted(stand_in.calls) == sorted((n, a) for n in NAMES for a in ('engage', 'land'))
    # the node's log: a vehicle that failed is an ERROR, one confirmed is INFO
    logged = [line for line in capfd.readouterr().err.splitlines() if ': land ' in line]
    failed = [line for line in logged if 'uav3: land FAILED' in line]
    assert failed and all(line.startswith('[ERROR]') for line in failed), logged
    assert all(line.startswith('[INFO]') for line in logged if ': land ok' in line), logged
    result = call(ros, hold)
    assert result.success and result.message.splitlines() == [
        f'{name}: hold ok: holding: PX4 reports AUTO_LOITER' for name in NAMES]


def test_fleet_node_without_a_fleet_file_says_so_in_one_line():
    result = subprocess.run([sys.executable, '-m', 'soliton_encirclement_ros.nodes.fleet_node'],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "FleetNode: invalid configuration: fleet_file must name a fleet file, got ''")
