"""
The fleet's pre-flight: a snapshot of the live graph in, a table of verdicts out (no rclpy).

For each vehicle of the fleet file, from what its nodes say in ``/diagnostics`` (the bridge's
and the agent's status values) and where its odometry puts it:

========== ==================================================================================
heard      its bridge and its agent were heard within ``stale`` s
id         its agent reports the fleet file's agent_id, and no other process broadcasts it
config     what runs is what the fleet file says: its bridge's target_system, px4_namespace,
           geo_reference and origin (given, or from GPS), its agent's radius, altitude and
           d_safe (a file edited after the launch: relaunch with fleet launch-commands)
ready      its bridge would accept an engage now (PX4 heard and fresh, no failsafe, armable,
           no other setpoint writer, a matching px4_msgs): the bridge's ``ready`` value
origin     placed in the world frame: the bridge's origin (GPS or given) with no disagreement
area       inside the safety area (when the fleet has one)
separation at least ``d_safe`` from every other vehicle
clock      its companion's clock agrees, within ``max_clock_offset``, with at least half of the
           others' (the offsets the agents measure of each other, ``core.links``, both ways:
           a delivery delay adds to one direction and takes from the other, so half their
           difference is the offset and half their sum bounds its error; only an offset past
           the limit by more than that bound fails): a single companion off is named alone; of
           two that disagree, both are
battery    at least ``min_battery`` charge remaining (PX4's BatteryStatus)
========== ==================================================================================

:func:`check_fleet` returns the rows; :func:`render` makes one table and the problems in full.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import math
import re
from typing import Mapping, Optional

import numpy as np

CHECKS = ('heard', 'id', 'config', 'ready', 'origin', 'area', 'separation', 'clock',
          'battery')
_OFFSET = re.compile(r'offset=([-+]?[0-9.]+(?:e[-+]?\d+)?)')
LINK_KEY = 'link.'  # an agent's /diagnostics key of one sender's figures (agent_node)


@dataclass(frozen=True)
class VehicleView:
    """What the graph says of one vehicle now: its nodes' status values and its position."""

    bridge: Optional[Mapping[str, str]] = None   # status values, plus 'level' and 'message'
    bridge_age: float = math.inf                  # s since its last status
    agent: Optional[Mapping[str, str]] = None
    agent_age: float = math.inf
    position: Optional[np.ndarray] = None         # world ENU (its odom), None = none


@dataclass(frozen=True)
class Verdict:
    """One check of one vehicle."""

    vehicle: str
    check: str
    ok: Optional[bool]  # None: not judged (nothing of the vehicle is heard)
    detail: str = ''


@dataclass
class Report:
    """Every verdict of a fleet check."""

    verdicts: list = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Return whether every check of every vehicle passed."""
        return bool(self.verdicts) and all(v.ok is True for v in self.verdicts)

    @property
    def problems(self) -> list:
        """Return the failed verdicts."""
        return [v for v in self.verdicts if v.ok is False]


def link_offsets(agent: Optional[Mapping[str, str]]) -> dict[int, float]:
    """Return {sender agent id: its clock offset [s]} from an agent's status values."""
    offsets = {}
    for key, value in (agent or {}).items():
        if key.startswith(LINK_KEY):
            match = _OFFSET.search(value)
            if match:
                offsets[int(key[len(LINK_KEY):])] = float(match.group(1))
    return offsets


@dataclass(frozen=True)
class Offset:
    """One companion's clock minus another's [s], and how far off the estimate may be [s]."""

    value: float
    error: float

    def text(self) -> str:
        return f'{self.value:+.3f} s' + (f' (±{self.error:.3f})' if self.error else '')


def pairwise_offsets(fleet, views) -> dict[str, dict[str, Offset]]:
    """
    Return {vehicle: {other: its clock minus the other's}} from the agents' link figures.

    Agent ``u`` measures sender ``v`` at ``clock_v - clock_u + d_vu``, ``v`` measures ``u`` at
    ``clock_u - clock_v + d_uv`` (``d``: the fastest delivery's delay, never negative). Where
    both are known the offset is half their difference and its error at most half their sum
    (NTP's rule); where one is known, that one, its error unknown (0).
    """
    by_id = {v.agent_id: v.name for v in fleet.vehicles}
    measured: dict[tuple[str, str], float] = {}  # (receiver, sender): sender - receiver + d
    for vehicle in fleet.vehicles:
        offsets = link_offsets(views.get(vehicle.name, VehicleView()).agent)
        for sender, offset in offsets.items():
            other = by_id.get(sender)
            if other is not None and other != vehicle.name:
                measured[(vehicle.name, other)] = offset
    result: dict[str, dict[str, Offset]] = {v.name: {} for v in fleet.vehicles}
    for (receiver, sender), seen in measured.items():
        back = measured.get((sender, receiver))  # receiver - sender + d'
        if back is None:
            result[sender][receiver] = Offset(seen, 0.0)
            result[receiver][sender] = Offset(-seen, 0.0)
        else:
            value, error = (seen - back) / 2.0, max(0.0, (seen + back) / 2.0)
            result[sender][receiver] = Offset(value, error)
            result[receiver][sender] = Offset(-value, error)
    return result


def check_fleet(fleet, views: Mapping[str, VehicleView], stale: float = 3.0) -> Report:
    """Check every vehicle of ``fleet`` (a :class:`~.fleet_file.Fleet`) against ``views``."""
    report = Report()
    heard_offsets = pairwise_offsets(fleet, views)
    for vehicle in fleet.vehicles:
        view = views.get(vehicle.name, VehicleView())
        silent = view.bridge is None and view.agent is None  # one line says so: 'heard'
        for check in CHECKS:
            if silent and check != 'heard':
                report.verdicts.append(Verdict(vehicle.name, check, None, 'not heard'))
                continue
            ok, detail = _CHECKS[check](fleet, vehicle, view, views, stale, heard_offsets)
            report.verdicts.append(Verdict(vehicle.name, check, ok, detail))
    return report


def _heard(fleet, vehicle, view, views, stale, offsets):
    missing = [f'{name} ({"never" if age == math.inf else f"{age:.1f} s ago"})'
               for name, status, age in ((vehicle.bridge, view.bridge, view.bridge_age),
                                         (vehicle.agent, view.agent, view.agent_age))
               if status is None or age > stale]
    if missing:
        return False, ('no status from ' + ', '.join(missing) + ': is its companion up, on '
                       'this ROS_DOMAIN_ID and network?')
    return True, 'bridge and agent heard'


def _id(fleet, vehicle, view, views, stale, offsets):
    if view.agent is None:
        return False, 'agent not heard'
    reported = view.agent.get('agent_id')
    if reported != str(vehicle.agent_id):
        return False, (f'its agent reports agent_id {reported}, the fleet file says '
                       f'{vehicle.agent_id}')
    if view.agent.get('duplicate_id') == 'true':
        return False, f'agent_id {vehicle.agent_id} is broadcast by another process too'
    return True, f'agent_id {vehicle.agent_id}'


def _numbers(text: Optional[str]) -> Optional[np.ndarray]:
    """Return the numbers of a status value ('[1.00, 2.00, 0.00]', '47.3,8.5,488', '2')."""
    if text is None:
        return None
    try:
        return np.array([float(x) for x in re.split(r'[\s,\[\]]+', text) if x])
    except ValueError:
        return None


def _differ(running: Optional[np.ndarray], wanted, tolerance: float) -> bool:
    wanted = np.asarray(wanted, dtype=float).reshape(-1)
    if running is None or running.shape != wanted.shape:
        return True
    both_nan = np.isnan(running) & np.isnan(wanted)
    return bool(np.any(~both_nan & ~(np.abs(running - wanted) <= tolerance)))


def _config(fleet, vehicle, view, views, stale, offsets):
    """Compare what runs with the fleet file: the launch values its nodes report."""
    if view.bridge is None or view.agent is None:
        return False, 'bridge or agent not heard'
    bridge, agent = view.bridge, view.agent
    if 'target_system' not in bridge or 'radius' not in agent:
        return False, 'its nodes report no launch values (an older version?): relaunch them'
    wrong = []

    def compare(what, running, wanted, shown, tolerance=1e-6):
        if _differ(_numbers(running), wanted, tolerance):
            wrong.append(f'{what} {running or "none"} (the fleet file says {shown})')
    compare('target_system', bridge.get('target_system'), vehicle.target_system,
            vehicle.target_system, 0.0)
    if bridge.get('px4_namespace', '') != vehicle.px4_namespace:
        wrong.append(f"px4_namespace '{bridge.get('px4_namespace', '')}' (the fleet file says "
                     f"'{vehicle.px4_namespace}')")
    geo = fleet.geo_reference
    if geo:
        compare('geo_reference', bridge.get('geo_reference'), geo,
                ','.join(f'{c:.9g}' for c in geo), 1e-7)
    elif bridge.get('geo_reference'):
        wrong.append(f'geo_reference {bridge["geo_reference"]} (the fleet file has none)')
    source = bridge.get('origin_source')
    if vehicle.origin:
        if source != 'given':
            wrong.append(f'origin from {source} (the fleet file gives {list(vehicle.origin)})')
        else:
            compare('origin', bridge.get('origin_enu'), vehicle.origin, list(vehicle.origin),
                    0.006)
    elif source != 'gps':
        wrong.append(f'origin {bridge.get("origin_enu")} given (the fleet file places it by GPS)')
    for name in ('radius', 'altitude', 'd_safe'):
        compare(name, agent.get(name), getattr(fleet, name), f'{getattr(fleet, name):g}')
    if wrong:
        return False, ('runs with ' + '; '.join(wrong) + ': relaunch it with the line of '
                       'fleet launch-commands')
    return True, 'as the fleet file says'


def _ready(fleet, vehicle, view, views, stale, offsets):
    if view.bridge is None:
        return False, 'bridge not heard'
    ready = view.bridge.get('ready', 'no ready value in its status (an older bridge?)')
    return (True, 'engage would be accepted') if ready == 'yes' else (False, ready)


def _origin(fleet, vehicle, view, views, stale, offsets):
    if view.bridge is None:
        return False, 'bridge not heard'
    problem = view.bridge.get('origin_problem')
    origin = view.bridge.get('origin_enu', 'none')
    source = view.bridge.get('origin_source', '?')
    if problem:
        return False, problem
    if origin == 'none':
        return False, f'not placed in the world frame yet (origin_source {source})'
    return True, f'{origin} ({source})'


def _area(fleet, vehicle, view, views, stale, offsets):
    if fleet.area is None:
        return True, 'no safety area'
    if view.position is None:
        return False, 'no odometry: position unknown'
    from soliton_encirclement_ros.core.area import outside_text
    outside = outside_text(fleet.area, view.position)
    return (True, 'inside') if outside is None else (False, f'outside the safety area ({outside})')


def _separation(fleet, vehicle, view, views, stale, offsets):
    if view.position is None:
        return False, 'no odometry: position unknown'
    others = [(float(np.linalg.norm(np.asarray(v.position[:2]) - view.position[:2])), name)
              for name, v in views.items()
              if name != vehicle.name and v.position is not None and fleet.vehicle(name)]
    if not others:
        return True, 'no other vehicle placed'
    distance, name = min(others)
    if distance < fleet.d_safe:
        return False, f'{name} is {distance:.2f} m away, closer than d_safe {fleet.d_safe:g} m'
    return True, f'nearest {name} at {distance:.1f} m'


def _clock(fleet, vehicle, view, views, stale, offsets):
    mine = offsets.get(vehicle.name, {})
    if not mine:
        if len(fleet.vehicles) == 1:
            return True, 'a single vehicle'
        return False, 'no link figures between its agent and the others yet'
    limit = fleet.max_clock_offset
    off = {name: o.value for name, o in mine.items() if abs(o.value) - o.error > limit}
    if 2 * len(off) > len(mine) or (off and len(mine) == 1):
        worst = float(np.median(list(off.values())))
        return False, (f'its clock is {worst:+.3f} s off ' + ', '.join(sorted(off))
                       + f' (agrees with {len(mine) - len(off)} of {len(mine)}), past '
                       f'max_clock_offset {limit:g} s: synchronise it (chrony/NTP)')
    median = float(np.median([o.value for o in mine.values()]))
    error = float(np.median([o.error for o in mine.values()]))
    return True, Offset(median, error).text()


def _battery(fleet, vehicle, view, views, stale, offsets):
    if view.bridge is None:
        return False, 'bridge not heard'
    text = view.bridge.get('battery_remaining')
    if text is None:
        return False, 'battery unknown: no BatteryStatus heard from PX4'
    remaining = float(text)
    if not math.isfinite(remaining):
        return False, 'battery unknown: PX4 reports no charge estimate'
    if remaining < fleet.min_battery:
        return False, f'{remaining:.0%} remaining, below min_battery {fleet.min_battery:.0%}'
    return True, f'{remaining:.0%}'


_CHECKS = {'heard': _heard, 'id': _id, 'config': _config, 'ready': _ready, 'origin': _origin,
           'area': _area,
           'separation': _separation, 'clock': _clock, 'battery': _battery}


# What a vehicle's bridge status shows once an action is done: PX4's word, not a reply.
ACTIONS = ('engage', 'land', 'hold')


def confirmed(action: str, bridge: Mapping[str, str]) -> bool:
    """
    Return whether a bridge's status values show ``action`` done on its vehicle.

    engage: the bridge is ``active`` (PX4 confirmed OFFBOARD and ARMED); land: idle, out of the
    ring ``landed``, PX4 DISARMED; hold: idle, out of the ring ``hold``, PX4 in AUTO_LOITER.
    """
    phase, out = bridge.get('phase'), bridge.get('out_of_ring', '')
    if action == 'engage':
        return phase == 'active'
    if action == 'land':
        return (phase == 'idle' and out.startswith('landed')
                and bridge.get('arming_state') == 'DISARMED')
    if action == 'hold':
        return (phase == 'idle' and out.startswith('hold')
                and bridge.get('nav_state', '').startswith('4 '))
    raise ValueError(f'action must be one of {", ".join(ACTIONS)}, got {action!r}')


def render(report: Report) -> str:
    """Return one table (a row per vehicle, ok/FAIL/- per check), then every problem in full."""
    names = list(dict.fromkeys(v.vehicle for v in report.verdicts))
    cells = {(v.vehicle, v.check): {True: 'ok', False: 'FAIL', None: '-'}[v.ok]
             for v in report.verdicts}
    width = max([len('vehicle'), *map(len, names)])
    lines = ['  '.join(['vehicle'.ljust(width), *(c.ljust(max(len(c), 4)) for c in CHECKS)])]
    for name in names:
        lines.append('  '.join([name.ljust(width), *(cells.get((name, c), '-').ljust(
            max(len(c), 4)) for c in CHECKS)]))
    problems = report.problems
    if problems:
        lines.append(f'{len(problems)} problem(s):')
        lines += [f'  {v.vehicle} {v.check}: {v.detail}' for v in problems]
    else:
        lines.append(f'all {len(report.verdicts)} checks passed')
    return '\n'.join(lines)
