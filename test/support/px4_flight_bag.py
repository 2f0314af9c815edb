"""
A recorded PX4 fleet flight, written with rosbags' own Writer (no code of ours on that side).

As a field day records it: the vehicles sit on their pads with the bridges idle, are engaged
(each PX4 bridge's /diagnostics ``phase``: idle, mode_requested, arm_requested, active), fly to
the ring around a still target and hold it, then land (``landing``, then ``idle``, out of the
ring) and sit on the ground until the recording stops. Odometry and agent states at 10 Hz, every
agent's and bridge's status at 1 Hz (each node at its own offset, as the nodes publish them).
The vehicles move as a first-order approach to their slot on the ring (``TAU``): a vehicle whose
bridge holds stays where it is; one that leaves the ring alone (``land_after``) stops, its agent
broadcasts its presence only (``member`` 0), and the others spread over the ring again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import math

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from support.circle_bag import agent_state, ODOM, STATES, T, TS

DIAGNOSTICS = 'diagnostic_msgs/msg/DiagnosticArray'
# A clean link at a receiver (core.links.LinkFigures over its window): 20 heard, nothing lost
LINK_CLEAN = {'heard': 20, 'lost': 0, 'restarts': 0, 'age_mean': 0.01, 'age_max': 0.02,
              'offset': 0.0}
RADIUS = 20.0
OMEGA = 0.1       # rad/s: the ring turns around the target
TAU = 3.0         # s: the vehicles' approach to their slots
RATE = 10.0       # Hz: odometry and agent states
MODE_DELAY, ARM_DELAY = 1.0, 2.0  # s after the engage: mode_requested, then active
LANDED_AFTER = 7.0  # s after NAV_LAND: the bridge is idle again
HOLD_WHY = ('cmd_vel stale (0.62 s old > cmd_timeout 0.5 s): commanding zero velocity '
            '(hover)')
START = 1_700_000_000.0  # s: a wall-clock epoch, as a real recording has


@dataclass
class Flight:
    """What the fleet does and when (s since the first message)."""

    vehicles: int = 3
    engage: float = 10.0
    land: float = 45.0
    end: float = 56.0
    # vehicle -> (start, end): its bridge holds zero velocity while active
    holds: dict = field(default_factory=dict)
    # vehicle -> time its bridge lands it alone (land_after: its agent is gone)
    leaves: dict = field(default_factory=dict)
    # the fleet flies again: (engage, land) of each later sortie, after ``land``; the vehicles
    # take off from where they landed
    again: tuple = ()
    # (receiver, sender) -> figures of that link that differ from a clean one (LINK_CLEAN),
    # e.g. {'lost': 3}; every agent's status carries its link figures to each other agent
    links: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [f'uav{i + 1}' for i in range(self.vehicles)]

    def sortie(self, t: float) -> tuple[float, float] | None:
        """Return (engage, land) of the last sortie begun at ``t``; None before the first."""
        begun = [s for s in ((self.engage, self.land), *self.again) if s[0] <= t]
        return begun[-1] if begun else None

    def phase(self, name: str, i: int, t: float) -> tuple[str, str | None]:
        """Return the bridge's phase and out_of_ring at ``t``."""
        sortie = self.sortie(t)
        if sortie is None:
            return 'idle', None
        engage, land = sortie
        left = min(self.leaves.get(name, math.inf), land)
        why = 'land_after' if self.leaves.get(name, math.inf) <= land else 'operator request'
        if t >= left:
            return ('landing' if t < left + LANDED_AFTER else 'idle'), f'landing ({why})'
        if t < engage + MODE_DELAY:
            return 'mode_requested', None
        if t < engage + ARM_DELAY + 0.05 * i:  # each a little after the one before
            return 'arm_requested', None
        return 'active', None

    def holding(self, name: str, t: float) -> bool:
        start, stop = self.holds.get(name, (math.inf, math.inf))
        return start <= t < stop


def bridge_status(flight: Flight, name: str, i: int, t: float):
    """Return the bridge's DiagnosticStatus at ``t``, as the PX4 bridge words it."""
    phase, out = flight.phase(name, i, t)
    level, message = 0, {
        'idle': 'idle: streaming zero velocity; ~/engage to fly',
        'mode_requested': 'engaging (mode_requested)',
        'arm_requested': 'engaging (arm_requested)',
        'active': 'engaged: following cmd_vel',
        'landing': 'landing: NAV_LAND sent, waiting for PX4 to confirm'}[phase]
    if phase == 'active' and flight.holding(name, t):
        level, message = 1, 'engaged, holding (zero velocity): ' + HOLD_WHY
    nav, arming = {'idle': ('4 (AUTO_LOITER)', 'DISARMED'),
                   'mode_requested': ('4 (AUTO_LOITER)', 'DISARMED'),
                   'arm_requested': ('14 (OFFBOARD)', 'DISARMED'),
                   'active': ('14 (OFFBOARD)', 'ARMED'),
                   'landing': ('18 (AUTO_LAND)', 'ARMED')}[phase]
    values = [('phase', phase), ('streaming', 'true'), ('nav_state', nav),
              ('arming_state', arming), ('failsafe', 'false')]
    if out:
        values.append(('out_of_ring', out))
    values.append(('ready', 'yes' if phase == 'idle' else f'no: {phase}'))
    return _status(f'/{name}/px4_bridge', level, message, values)


def agent_status(flight: Flight, name: str, i: int, t: float):
    """Return the agent's DiagnosticStatus at ``t``: ok in the ring, failed once out of it."""
    phase, out = flight.phase(name, i, t)
    failed = out is not None
    values = [('agent_id', str(i + 1)), ('incarnation', '7'),
              ('state', 'failed' if failed else 'ok')]
    for j, sender in enumerate(flight.names):
        if sender != name:
            link = {**LINK_CLEAN, **flight.links.get((name, sender), {})}
            loss = link['lost'] / (link['heard'] + link['lost'])
            values.append((f'link.{j + 1}', (
                f'heard={link["heard"]} lost={link["lost"]} loss={loss:.4f} '
                f'restarts={link["restarts"]} age_mean={link["age_mean"]:.4f} '
                f'age_max={link["age_max"]:.4f} offset={link["offset"]:+.4f}')))
    return _status(f'/{name}/agent', 2 if failed else 0,
                   f'failed (vehicle: {out})' if failed else 'ok', values)


def _status(name, level, message, values):
    return T['diagnostic_msgs/msg/DiagnosticStatus'](
        level=level, name=name, message=message, hardware_id='',
        values=[T['diagnostic_msgs/msg/KeyValue'](key=k, value=v) for k, v in values])


def _odometry(t, name, position, velocity):
    sec, nsec = divmod(int(round((START + t) * 1e9)), 10**9)
    header = T['std_msgs/msg/Header'](
        stamp=T['builtin_interfaces/msg/Time'](sec=sec, nanosec=nsec), frame_id='world')
    point = T['geometry_msgs/msg/Point'](*map(float, position))
    pose = T['geometry_msgs/msg/Pose'](
        position=point, orientation=T['geometry_msgs/msg/Quaternion'](0.0, 0.0, 0.0, 1.0))
    vector = T['geometry_msgs/msg/Vector3']
    twist = T['geometry_msgs/msg/Twist'](linear=vector(*map(float, velocity)),
                                         angular=vector(0.0, 0.0, 0.0))
    return T[ODOM](
        header=header, child_frame_id=f'{name}/base_link',
        pose=T['geometry_msgs/msg/PoseWithCovariance'](pose=pose, covariance=np.zeros(36)),
        twist=T['geometry_msgs/msg/TwistWithCovariance'](twist=twist, covariance=np.zeros(36)))


def trajectories(flight: Flight) -> tuple[np.ndarray, np.ndarray]:
    """Return times (K,) and positions (K, vehicles, 3) of the fleet at RATE, world ENU [m]."""
    dt = 1.0 / RATE
    times = np.arange(int(round(flight.end * RATE)) + 1) * dt
    n = flight.vehicles
    pads = np.array([[-4.0 + 4.0 * i, -26.0, 0.0] for i in range(n)])
    p = pads.copy()
    out = np.empty((len(times), n, 3))
    gain = 1.0 - math.exp(-dt / TAU)
    for k, t in enumerate(times):
        flying = [i for i, name in enumerate(flight.names)
                  if flight.phase(name, i, t)[0] == 'active']
        members = [i for i, name in enumerate(flight.names)
                   if flight.phase(name, i, t)[1] is None]
        for i, name in enumerate(flight.names):
            if flight.phase(name, i, t)[0] == 'landing':
                p[i, 2] = max(0.0, p[i, 2] - 2.0 * dt)
            if i not in flying or flight.holding(name, t):
                continue
            spread = members.index(i) - (len(members) - 1) / 2  # no paths cross from the pads
            slot = 2 * math.pi * spread / len(members) + OMEGA * (t - flight.engage) - math.pi / 2
            r, angle = math.hypot(p[i, 0], p[i, 1]), math.atan2(p[i, 1], p[i, 0])
            error = (slot - angle + math.pi) % (2 * math.pi) - math.pi
            r += (RADIUS - r) * gain
            angle += OMEGA * dt + error * gain
            p[i] = [r * math.cos(angle), r * math.sin(angle), p[i, 2] + (10.0 - p[i, 2]) * gain]
        out[k] = p
    return times, out


def write_flight_bag(path, flight: Flight | None = None, custom_data: dict | None = None):
    """
    Write ``flight`` (default: engage at 10 s, ring, land at 45 s) as a bag; return ``path``.

    ``custom_data``: the bag's description (what a recorder of ours writes), none by default.
    """
    flight = flight or Flight()
    times, positions = trajectories(flight)
    velocities = np.gradient(positions, times, axis=0)
    items = []

    def add(topic, msgtype, t, msg):
        items.append((t, topic, msgtype, TS.serialize_cdr(msg, msgtype)))

    for k, t in enumerate(times):
        add('/target/odom', ODOM, t, _odometry(t, 'target', (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
        for i, name in enumerate(flight.names):
            add(f'/{name}/odom', ODOM, t, _odometry(t, name, positions[k, i], velocities[k, i]))
            member = flight.phase(name, i, t)[1] is None
            add('/swarm/agent_states', STATES, t, agent_state(
                i + 1, k, START + t, positions[k, i, :2], velocities[k, i, :2], member=member))
    for i, name in enumerate(flight.names):
        for offset, status in ((0.1 + 0.3 * i, bridge_status), (0.2 + 0.3 * i, agent_status)):
            for t in np.arange(offset, flight.end, 1.0):
                header = T['std_msgs/msg/Header'](
                    stamp=T['builtin_interfaces/msg/Time'](sec=0, nanosec=0), frame_id='')
                add('/diagnostics', DIAGNOSTICS, t, T[DIAGNOSTICS](
                    header=header, status=[status(flight, name, i, t)]))
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in (custom_data or {}).items():
            writer.set_custom_data(key, value)
        connections = {}
        for t, topic, msgtype, raw in sorted(items, key=lambda item: item[0]):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=TS)
            writer.write(connections[topic], int(round((START + t) * 1e9)), raw)
    return path
