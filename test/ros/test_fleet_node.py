"""
fleet_node over real DDS: its services read the graph and act on every bridge (issue 37 §4).

The vehicles here are stand-ins that speak as bridges and agents do on the wire: each bridge's
and agent's DiagnosticStatus on ``/diagnostics`` (the keys ``px4_bridge_node`` and
``agent_node`` publish), odometry, and the bridges' ``~/engage``, ``~/land`` and ``~/hold``
(std_srvs/Trigger). The verdict on each vehicle is what its status says, a lost reply no
failure. test_px4_fleet.py flies the same with
real bridges and the PX4 test double, where px4_msgs is built.
"""
import subprocess
import sys

import pytest
from rclpy.node import Node
from std_srvs.srv import Trigger

from soliton_encirclement_ros.nodes.fleet_node import FleetNode
from support.harness import default_context_executor, spin_until
from support.stand_in import fleet_file, NAMES, StandIn

ros = pytest.fixture(default_context_executor)


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
