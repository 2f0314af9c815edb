"""
The swarm across emulated hosts.

A ground station (mobility, target, metrics) and three companion computers (one agent_node each) in
Linux network namespaces joined by veth pairs and a bridge, with default DDS discovery (multicast
on the emulated LAN, no shared memory) and best-effort swarm topics. The ring forms; cutting one
host's link makes that agent hold (zero velocity) within target_timeout + 1 s while the other two
re-space; restoring the link brings it back into a ring of three. A variant turns multicast off
(a WiFi network that drops it): the hosts then find each other only through a Fast DDS Discovery
Server in the ground station (``ROS_DISCOVERY_SERVER``), and the ring forms through it. Skips
where namespaces cannot be made (not root, no iproute2).
"""
import json
import math
import os
from pathlib import Path
import sys
import threading
import time

import numpy as np
import pytest

from ros_support import distro
from soliton_encirclement_ros.bringup.graph import build_graph, SwarmPlan
from soliton_encirclement_ros.core.links import parse_link_text
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.processes import executable_path
from support import netns

SKIP = netns.unavailable_reason()
pytestmark = pytest.mark.skipif(SKIP is not None, reason=f'emulated hosts unavailable: {SKIP}')

AGENTS = ('uav1', 'uav2', 'uav3')
RADIUS = 5.0
TARGET_TIMEOUT = 1.0
ODOM_TIMEOUT = 0.5
PROBE = Path(__file__).resolve().parents[1] / 'support' / 'netns_probe.py'
SKEWED_CLOCK = PROBE.with_name('skewed_clock.py')
CLOCK_OFFSET = 0.3  # s: uav1's companion clock runs this far ahead of every other host's
DISCOVERY_PORT = 11811
# The Fast DDS CLI of the wheels, next to this interpreter (its `python3` must be the venv's).
FASTDDS = Path(sys.executable).parent / 'fastdds'


class Lines:
    """Collects a process's JSON lines (and keeps its other output for failure messages)."""

    def __init__(self, process):
        self.records, self.other = [], []
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            try:
                self.records.append(json.loads(line))
            except ValueError:
                self.other.append(line)

    def values(self, topic, since=0.0):
        return [(r['t'], r['v']) for r in list(self.records)
                if r['topic'] == topic and r['t'] >= since]


class Log:
    """Collects a process's log lines (rclpy logs to stderr), so the pipe never fills."""

    def __init__(self, stream):
        self.lines = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip('\n'))


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f'timed out after {timeout:.0f} s waiting for {what}')


def ros_env():
    env = {k: v for k, v in os.environ.items() if k != 'ROS_AUTOMATIC_DISCOVERY_RANGE'}
    # Default discovery over the emulated LAN; no shared memory, which would bypass the links.
    env.update(ROS_AUTOMATIC_DISCOVERY_RANGE='SUBNET', FASTDDS_BUILTIN_TRANSPORTS='UDPv4',
               RMW_IMPLEMENTATION='rmw_fastrtps_cpp', PYTHONUNBUFFERED='1')
    return env


def command(spec):
    return [executable_path(spec), *spec.ros_args()]


def gaps(latest):
    """Sorted angular gaps [rad] between the agents whose odometry is in ``latest``."""
    angles = np.sort([math.atan2(y, x) % (2 * math.pi) for x, y in latest.values()])
    return np.diff(np.append(angles, angles[0] + 2 * math.pi))


@pytest.fixture
def hosts():
    netns.remove_stale()
    emulated = netns.EmulatedHosts(list(AGENTS))
    try:
        yield emulated.create()
    finally:
        emulated.close()


@pytest.fixture
def hosts_without_multicast():
    netns.remove_stale()
    # The ground station is a host of its own: the switch namespace would still flood multicast
    # it sends itself.
    emulated = netns.EmulatedHosts(['ground', *AGENTS], multicast=False)
    try:
        yield emulated.create()
    finally:
        emulated.close()


def start_swarm(hosts, env, station='gs', agent_args=None):
    """
    Start the ground station's nodes in ``station`` and one agent_node per host.

    ``agent_args`` maps a host to more ROS arguments of its agent. Returns each agent's
    :class:`Log` by host.
    """
    logs = {}
    plan = SwarmPlan(scenario=Scenario(agents=3, radius=RADIUS, control_period=0.05),
                     use_sim_time=False, swarm_reliability='best_effort',
                     positions=((6.0, 1.0, 0.0), (5.0, 3.0, 0.0), (4.0, 5.0, 0.0)))
    for spec in build_graph(plan):
        host = spec.namespace.strip('/') if spec.executable == 'agent_node' else station
        extra = (['-p', f'target_timeout:={TARGET_TIMEOUT}', '-p', f'odom_timeout:={ODOM_TIMEOUT}',
                  *(agent_args or {}).get(host, [])]
                 if spec.executable == 'agent_node' else [])
        process = hosts.run(host, command(spec) + extra, env)
        if spec.executable == 'agent_node':
            logs[host] = Log(process.stderr)
    return logs


class Ring:
    """Watches the agents' odometry from a probe in the ground station."""

    def __init__(self, ground: Lines):
        self.ground = ground

    def latest_positions(self, since, names=AGENTS):
        latest = {}
        for name in names:
            values = self.ground.values(f'/{name}/odom', since)
            if values:
                latest[name] = values[-1][1]
        return latest

    def formed(self, names, tolerance):
        latest = self.latest_positions(time.time() - 1.0, names)
        if len(latest) < len(names):
            return False
        radii = [math.hypot(*p) for p in latest.values()]
        return (max(abs(r - RADIUS) for r in radii) < 0.5
                and np.max(np.abs(gaps(latest) - 2 * math.pi / len(names))) < tolerance)


def test_ring_survives_a_lost_link_and_the_agent_rejoins(hosts):
    env = ros_env()
    start_swarm(hosts, env)
    ground = Lines(hosts.run('gs', [sys.executable, str(PROBE)]
                             + [f'/{a}/odom:odom' for a in AGENTS], env))
    onboard = Lines(hosts.run('uav1', [sys.executable, str(PROBE), '/uav1/cmd_vel:twist',
                                       '/uav1/agent/status:status'], env))
    ring_formed = Ring(ground).formed

    # 1. The ring of three forms across the emulated network.
    wait_for(lambda: ring_formed(AGENTS, 0.3), 45.0, 'the ring of 3 to form across hosts')
    assert onboard.values('/uav1/cmd_vel'), 'the probe on uav1 hears its agent'

    # 2. uav1's host loses its link: it holds, the other two re-space to a ring of two.
    cut = time.time()
    hosts.set_link('uav1', up=False)

    def held():  # the times [s after the cut] uav1 commanded zero
        return [t - cut for t, v in onboard.values('/uav1/cmd_vel', since=cut)
                if np.allclose(v, 0.0)]

    def says_why():
        return any(s.startswith('blind') or s.startswith('target lost')
                   for _, s in onboard.values('/uav1/agent/status', since=cut))

    wait_for(lambda: held() and says_why(), TARGET_TIMEOUT + 10.0,
             'uav1 to hold and say why after the cut')
    first_hold = held()[0]
    assert first_hold <= TARGET_TIMEOUT + 1.0
    wait_for(lambda: ring_formed(('uav2', 'uav3'), 0.3), 40.0,
             'uav2 and uav3 to re-space to opposite sides')
    commands = onboard.values('/uav1/cmd_vel', since=cut)  # it held all the while
    assert all(np.allclose(v, 0.0) for t, v in commands if t - cut > first_hold), commands[-5:]

    # 3. Link restored: uav1 rejoins and the ring of three re-forms.
    hosts.set_link('uav1', up=True)
    restored = time.time()
    wait_for(lambda: any(not np.allclose(v, 0.0)
                         for _, v in onboard.values('/uav1/cmd_vel', since=restored)),
             20.0, 'uav1 to fly again after the link came back')
    wait_for(lambda: ring_formed(AGENTS, 0.3), 45.0, 'the ring of 3 to re-form')
    print(f'uav1 held {first_hold:.2f} s after the cut; ring re-formed '
          f'{time.time() - restored:.1f} s after the link came back')


@pytest.mark.skipif(not FASTDDS.exists(), reason=f'no Fast DDS CLI at {FASTDDS}')
def test_ring_forms_through_a_discovery_server_with_multicast_off(hosts_without_multicast):
    hosts = hosts_without_multicast
    assert hosts.multicast_flood() == dict.fromkeys(('ground', *AGENTS), False)
    server = f'{hosts.address("ground")}:{DISCOVERY_PORT}'
    env = ros_env()
    env['PATH'] = f'{FASTDDS.parent}{os.pathsep}{env.get("PATH", "")}'
    fast_dds = distro.current().fast_dds  # 2.x (Jazzy) and 3.x (Kilted) CLIs differ
    started = Lines(hosts.run('ground', fast_dds.discovery_server(
        str(FASTDDS), hosts.address('ground'), DISCOVERY_PORT), env))
    wait_for(lambda: any(fast_dds.server_started in line for line in started.other), 30.0,
             f'the discovery server to start on {server}')
    via_server = {**env, 'ROS_DISCOVERY_SERVER': server}
    start_swarm(hosts, via_server, station='ground')
    ground = Lines(hosts.run('ground', [sys.executable, str(PROBE)]
                             + [f'/{a}/odom:odom' for a in AGENTS], via_server))
    # The control: a ground-station listener with default (multicast) discovery, no server.
    unaided = Lines(hosts.run('ground', [sys.executable, str(PROBE), '/uav1/cmd_vel:twist'],
                              env))
    onboard = Lines(hosts.run('uav1', [sys.executable, str(PROBE), '/uav1/cmd_vel:twist'],
                              via_server))
    wait_for(lambda: Ring(ground).formed(AGENTS, 0.3), 60.0,
             'the ring of 3 to form through the discovery server')
    assert onboard.values('/uav1/cmd_vel'), 'the probe on uav1 hears its agent'
    assert unaided.values('ready'), 'the control listener runs'
    assert unaided.values('/uav1/cmd_vel') == [], \
        'a listener without the server heard another host: multicast discovery was not off'
    print(f'ring formed through the discovery server at {server}, multicast off')


def test_a_companion_clock_off_by_0_3_s_is_named_and_the_ring_still_forms(hosts):
    """
    A companion clock 0.3 s ahead is named by every other agent, and the ring still forms.

    uav1's agent runs on a skewed clock. The others name agent 1 in a WARN and in /diagnostics,
    uav1 names them, and the ring of three forms: liveness goes by receive time, and 0.3 s is
    within max_future_stamp (0.5 s).
    """
    env = ros_env()
    hosts.run('uav1', [sys.executable, str(SKEWED_CLOCK), str(CLOCK_OFFSET), '/uav1/host_clock'],
              env)
    logs = start_swarm(hosts, env, agent_args={
        'uav1': ['-p', 'use_sim_time:=true', '-r', '/clock:=/uav1/host_clock']})
    ground = Lines(hosts.run('gs', [sys.executable, str(PROBE), '/diagnostics:diagnostics']
                             + [f'/{a}/odom:odom' for a in AGENTS], env))

    def statuses(name):
        return [status for _, array in ground.values('/diagnostics') for status in array
                if status['name'] == name]

    def warned(host, about):  # from the agent's own log: said once, it must not be missed
        # uav1 runs on its host clock as /clock (use_sim_time): it words it as a simulation's
        return [line for line in list(logs[host].lines) if '[WARN]' in line
                and (f'the clock of agent {about} is' in line
                     or f'agent {about} stamps its states' in line)]

    wait_for(lambda: Ring(ground).formed(AGENTS, 0.3), 60.0,
             'the ring of 3 to form with one clock 0.3 s ahead')
    wait_for(lambda: warned('uav2', 1) and warned('uav3', 1) and warned('uav1', 2), 60.0,
             'the agents to name the skewed clock')
    assert 'ahead of this one (max_clock_offset 0.1 s)' in warned('uav2', 1)[0]
    # uav1's /clock comes from a publisher on its host: on a loaded machine that publisher can
    # lag by more than the skew when uav1 makes its first estimate, which then reads agent 2
    # ahead. The wording names agent 2 against this node's /clock either way; the sign is
    # checked on the settled offsets below (every one of uav1's at least 0.25 s behind).
    assert ('agent 2 stamps its states' in warned('uav1', 2)[0]
            and "this node's /clock" in warned('uav1', 2)[0]), warned('uav1', 2)
    # uav2 and uav3 share a clock: no clock warning between them. On a loaded machine their
    # states may arrive late: that is worded as lag ('the states of agent 3 arrive ...').
    assert not warned('uav2', 3), 'uav2 and uav3 share a clock: no clock warning between them'

    def offsets(name):
        latest = statuses(name)[-1]
        return latest, {key: parse_link_text(value)['offset']
                        for key, value in latest['values'].items() if key.startswith('link.')}
    wait_for(lambda: len(offsets('/uav2/agent')[1]) == 2, 60.0, "uav2's link figures")
    status, seen_by_uav2 = offsets('/uav2/agent')
    # Lag (a busy receiver or sender) makes every sender look behind by it, never ahead: uav3,
    # on uav2's clock, reads -lag (0 on an idle machine, -0.22 s at a load of 20), so uav1's
    # skew is measured against it.
    lag = -seen_by_uav2['link.3']
    assert lag > -0.05, seen_by_uav2  # a sender on the same clock is never ahead
    assert 0.25 < seen_by_uav2['link.1'] + lag < 0.35, seen_by_uav2
    assert status['level'] == 1 and 'clock of agent 1 off by +0.' in status['message'], status
    # uav2 and uav3 share a clock 0.3 s behind uav1's: each reads at least that far behind
    # (lag adds to it), and the two alike. uav1's own /clock comes from a publisher on its
    # host: while a loaded machine holds that publisher back, uav1's clock lags and the others
    # read less far behind (-0.24 s with both cores busy), so the settled figures are waited for.

    def uav1_reads_both_behind():
        seen = offsets('/uav1/agent')[1]
        return (len(seen) == 2 and all(offset < -0.25 for offset in seen.values())
                and abs(seen['link.2'] - seen['link.3']) < 0.05)
    wait_for(uav1_reads_both_behind, 60.0, 'uav1 to read agents 2 and 3 0.3 s behind, alike')
    _, seen_by_uav1 = offsets('/uav1/agent')
    print(f'offsets heard by uav2: {seen_by_uav2}; by uav1: {seen_by_uav1}')
