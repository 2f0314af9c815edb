"""
A field day flown from one place, with the PX4 test double (issue 37 §4, §7).

The fleet's graph runs in this process (agents, bridges, one kinematic fake PX4 per vehicle,
the target), as ``swarm_px4_sitl.launch.py geo_reference:=... safety_area:=...`` starts it; the
operator runs the real ``fleet`` command in another process, as on a field:

- a fleet with one fault per vehicle (an origin typo, a low battery, a PX4 failsafe, a companion
  clock 0.3 s ahead): ``fleet check`` fails naming each, and ``fleet engage`` engages nothing;
- a healthy fleet: ``fleet check`` passes, ``fleet engage`` engages all four, the ring forms,
  the target then walks off the field and the vehicles stop inside the safety area, and
  ``fleet land`` lands every vehicle: PX4 reports each landed and disarmed. Then the field day
  goes on: ``fleet check`` and ``fleet engage`` fly the same fleet again, and it lands again.

Needs a built px4_msgs (docs/px4/index.md step 1); skips without it.
"""
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

from nav_msgs.msg import Odometry
import numpy as np
import pytest
from rclpy.node import Node
from rclpy.time import Time
from rosgraph_msgs.msg import Clock
import yaml

from soliton_encirclement_ros.bringup.graph import live_scenario, SwarmPlan
from support.harness import default_context_executor, spin_for, spin_until
from support.px4_ring import (
    DEADLINE, every, FIELD, needs_px4_msgs, observe_graph, PARAMS_FILE, SPAWNS, start_graph,
    true_position_enu)

pytestmark = needs_px4_msgs

NAMES = ('uav1', 'uav2', 'uav3', 'uav4')
AREA = {'polygon': [[-30, -30], [30, -30], [30, 30], [-30, 30]], 'z_min': -2.0, 'z_max': 30.0}
STOP_LINE = 29.0  # x: the area's edge less its 1 m margin
SKEW = 0.3        # s: the clock of uav4's companion

ros = pytest.fixture(default_context_executor)


def fleet_files(tmp_path, origins=None):
    (tmp_path / 'field.yaml').write_text(yaml.safe_dump(AREA))
    vehicles = [{'name': name, 'agent_id': i + 1, 'px4_namespace': f'px4_{i + 1}',
                 'target_system': i + 2, 'host': f'companion{i + 1}',
                 **({'origin': list(origins[i])} if origins else {})}
                for i, name in enumerate(NAMES)]
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': list(FIELD), 'safety_area': 'field.yaml',
                                    'vehicles': vehicles}))
    return path


def plan_of(tmp_path, origins=(), **scenario):
    return SwarmPlan(
        scenario=live_scenario(agents=len(NAMES), radius=20.0, altitude_hold=10.0,
                               controller={'d_safe': 2.0}, **scenario),
        mode='px4', names=NAMES, geo_reference=FIELD, px4_origins=tuple(origins),
        safety_area_file=str(tmp_path / 'field.yaml'), swarm_reliability='best_effort',
        use_sim_time=False, params_files=(str(PARAMS_FILE),))


def fleet(ros, action, path, *args, each=None):
    """Run ``fleet ACTION FILE`` as a process while this graph spins; (exit code, output)."""
    process = subprocess.Popen(
        [sys.executable, '-m', 'soliton_encirclement_ros.fleet.cli', action, str(path), *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
    assert spin_until(ros, lambda: process.poll() is not None, timeout=DEADLINE, each=each)
    return process.returncode, process.stdout.read()


def test_a_fleet_with_a_fault_per_vehicle_fails_the_check_and_engages_nothing(ros, tmp_path):
    typo = (SPAWNS[0][0] + 10.0, *SPAWNS[0][1:])  # uav1's origin measured 10 m off
    origins = [typo, *SPAWNS[1:]]
    path = fleet_files(tmp_path, origins)
    plan = plan_of(tmp_path, origins)
    clock_node = Node('skewed_companion_clock')  # uav4's companion: its clock 0.3 s ahead
    skewed = clock_node.create_publisher(Clock, '/companion4/clock', 10)
    clock_node.create_timer(0.005, lambda: skewed.publish(Clock(clock=Time(
        nanoseconds=int((time.time() + SKEW) * 1e9)).to_msg())))
    ros.add_node(clock_node)
    nodes = start_graph(ros, plan, spawns_enu=SPAWNS, extra_args={'/uav4/agent': [
        '-p', 'use_sim_time:=true', '-r', '/clock:=/companion4/clock']})
    bridges, fakes, odoms, engage = observe_graph(ros, plan, nodes)
    for fake in fakes:
        fake.battery = (0.8, 0)
    fakes[1].battery = (0.12, 0)
    fakes[2].enter_failsafe(4, ['gcs_connection_lost'])  # AUTO_LOITER, as PX4's Hold
    assert spin_until(ros, lambda: len(odoms) == len(NAMES), timeout=DEADLINE)

    code, out = fleet(ros, 'check', path)
    assert code == 1, out
    problems = {tuple(line.split(':', 1)[0].split()) for line in out.splitlines()
                if line.startswith('  ')}
    assert {('uav1', 'origin'), ('uav2', 'battery'), ('uav3', 'ready'),
            ('uav4', 'clock')} <= problems, out
    assert '  uav2 battery: 12% remaining, below min_battery 25%' in out
    assert ('  uav1 origin: origin_enu [11.00, 1.50, 0.00] m disagrees with GPS [1.00, 1.50, '
            '0.00] m by 10.00 m (origin_tolerance 3 m)') in out
    assert 'uav3 ready: PX4 is in a failsafe' in out and 'gcs_connection_lost' in out
    # the skew as the agents measure it (the emulated clock lags a little behind wall + 0.3 s)
    clock = re.search(r'uav4 clock: its clock is ([-+][0-9.]+) s off uav1, uav2, uav3', out)
    assert clock and abs(float(clock.group(1)) - SKEW) < 0.08, out
    assert not {p for p in problems if p[0] == 'uav4' and p[1] != 'clock'}, out

    code, out = fleet(ros, 'engage', path)
    assert code == 1 and 'engage refused: the pre-flight check failed; nothing was engaged' \
        in out
    disarmed = fakes[0].m['VehicleStatus'].ARMING_STATE_DISARMED
    assert all(fake.arming_state == disarmed for fake in fakes)
    assert all(bridge._seq.phase.value == 'idle' for bridge in bridges)
    print(f'\nfaulty fleet check:\n{out}')


class Walker(Node):
    """A tracked target (nav_msgs/Odometry at 20 Hz) that stands, then walks east when told."""

    def __init__(self):
        super().__init__('walker')
        self.x, self.speed = 0.0, 0.0
        self._pub = self.create_publisher(Odometry, '/walker/odom', 10)
        self.create_timer(0.05, self._step)

    def _step(self):
        self.x += 0.05 * self.speed
        msg = Odometry()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.header.frame_id = 'world'
        msg.pose.pose.position.x = self.x
        msg.pose.pose.orientation.w = 1.0
        msg.twist.twist.linear.x = self.speed
        self._pub.publish(msg)


def test_a_healthy_fleet_checks_engages_keeps_inside_and_lands_from_one_place(ros, tmp_path):
    path = fleet_files(tmp_path)
    plan = plan_of(tmp_path)
    walker = Walker()  # the target is tracked: it walks off the field once the ring is up
    ros.add_node(walker)
    nodes = start_graph(ros, plan, spawns_enu=SPAWNS, extra_args={
        '/target/target': ['-p', 'follow_topic:=/walker/odom']})
    bridges, fakes, odoms, engage = observe_graph(ros, plan, nodes)
    for fake in fakes:
        fake.battery = (0.8, 0)
    assert spin_until(ros, lambda: len(odoms) == len(NAMES), timeout=DEADLINE)
    bag = tmp_path / 'flight_bag'  # the flight, recorded as on a field (issue 36)
    recorder = subprocess.Popen([sys.executable, '-m',
                                 'soliton_encirclement_ros.nodes.recorder_node', '-o', str(bag)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        fly_and_report(ros, path, walker, nodes, fakes, odoms, recorder, bag, tmp_path)
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()


def land_and_check(ros, path, nodes, fakes):
    """``fleet land``: every vehicle landed and disarmed in PX4's own state, its agent out."""
    started = time.monotonic()
    code, out = fleet(ros, 'land', path)
    assert code == 0, out
    assert sorted(line.split(':')[0] for line in out.splitlines()
                  if ': land ok: landed: PX4 reports' in line) == list(NAMES), out
    disarmed = fakes[0].m['VehicleStatus'].ARMING_STATE_DISARMED
    assert all(fake.arming_state == disarmed and fake.landed for fake in fakes)
    assert all(-fake.true_position_ned[2] < 0.05 for fake in fakes)
    assert spin_until(ros, lambda: all('vehicle: landed (operator request)' in n.status.detail
                                       for n in (nodes[f'/{v}/agent'] for v in NAMES)),
                      timeout=DEADLINE)
    print(f'\nfleet land: every vehicle landed and disarmed {time.monotonic() - started:.1f} s '
          f'after the command\n{out}')


def fly_and_report(ros, path, walker, nodes, fakes, odoms, recorder, bag, tmp_path):
    """Check, engage, walk the target off, land and analyse the bag (the test's body)."""
    code, out = fleet(ros, 'check', path)
    assert code == 0 and out.rstrip().endswith('all 36 checks passed'), out
    farthest = {'x': -math.inf}

    def watch():
        farthest['x'] = max(farthest['x'], *(true_position_enu(f)[0] for f in fakes))
    code, out = fleet(ros, 'engage', path, each=every(0.05, watch))
    assert code == 0, out
    assert sorted(line.split(':')[0] for line in out.splitlines() if ': engage ok:' in line) \
        == list(NAMES), out
    engaged_at = time.monotonic()

    def around_the_target():  # up and on the circle (an even ring: test_px4_field_day.py)
        watch()
        p = np.array([[getattr(odoms[n].pose.pose.position, c) for c in 'xyz'] for n in NAMES])
        return (np.all(np.abs(p[:, 2] - 10.0) < 0.5)
                and np.all(np.abs(np.hypot(p[:, 0] - walker.x, p[:, 1]) - 20.0) < 2.0))
    assert spin_until(ros, every(0.1, around_the_target), timeout=DEADLINE)
    settle = time.monotonic() - engaged_at
    walker.speed = 3.0  # off the field, to x = 90 m

    def target_gone_and_vehicles_stopped():
        watch()
        if walker.x > 90.0:
            walker.speed = 0.0
        speeds = [np.linalg.norm([odoms[n].twist.twist.linear.x, odoms[n].twist.twist.linear.y])
                  for n in NAMES]
        return walker.x >= 90.0 and max(speeds) < 0.05
    assert spin_until(ros, every(0.1, target_gone_and_vehicles_stopped), timeout=DEADLINE)
    truth = np.array([true_position_enu(f) for f in fakes])
    # inside the area throughout: the margin (1 m) takes the link's latency, so the vehicles
    # stop by the stop line, at worst within half the margin of it on a loaded machine
    assert farthest['x'] <= STOP_LINE + 0.5, farthest
    assert truth[:, 0].max() > STOP_LINE - 1.0  # the ring followed the target to the edge
    land_and_check(ros, path, nodes, fakes)
    # The field day goes on: the target comes back, the same fleet checks, engages and flies.
    walker.x = 0.0
    code, out = fleet(ros, 'check', path)
    assert code == 0 and out.rstrip().endswith('all 36 checks passed'), out
    code, out = fleet(ros, 'engage', path)
    assert code == 0, out
    assert spin_until(ros, every(0.1, around_the_target), timeout=DEADLINE)
    land_and_check(ros, path, nodes, fakes)
    spin_for(ros, 1.5)  # the agents' and bridges' next 1 Hz statuses reach the bag
    recorder.send_signal(signal.SIGINT)
    assert spin_until(ros, lambda: recorder.poll() is not None, timeout=DEADLINE)
    assert recorder.returncode == 0, recorder.stdout.read()
    report = tmp_path / 'report'
    analysis = subprocess.run(
        [sys.executable, '-m', 'soliton_encirclement_ros.analysis.cli', str(bag), '--out',
         str(report), '--report', '--safety-area', str(tmp_path / 'field.yaml'),
         '--agent-pattern', r'^/(?P<name>uav\d+)/odom$'],  # not the tracked target's odom
        capture_output=True, text=True, timeout=600)
    assert analysis.returncode == 0, analysis.stderr
    flight = json.loads((report / 'flight.json').read_text())
    for name in NAMES:  # each vehicle's timeline: engaged, flew, landed out of the ring
        phases = [t['after'] for t in flight['transitions']
                  if t['vehicle'] == name and t['source'] != 'agent']
        assert 'active' in phases and phases.index('landing') > phases.index('active'), phases
        failed = [t for t in flight['transitions'] if t['vehicle'] == name
                  and t['source'] == 'agent' and t['after'] == 'failed']
        assert failed and 'landing (operator request)' in failed[-1]['reason'], failed
    assert sorted(row['agent'] for row in flight['area']) == list(NAMES)
    assert all(row['margin'] > 0.5 for row in flight['area']), flight['area']
    assert 'src="data:image/png;base64,' in (report / 'report.html').read_text()
    print(f'\nhealthy fleet: on the circle {settle:.1f} s after the engage; the target walked '
          'to x = '
          f'{walker.x:.0f} m; farthest vehicle x {farthest["x"]:.3f} m (stop line {STOP_LINE} '
          f'm)\n{out}')
