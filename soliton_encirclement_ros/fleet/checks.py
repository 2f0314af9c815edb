"""
The fleet's pre-flight: a snapshot of the live graph in, a table of verdicts out (no rclpy).

For each vehicle of the fleet file, from what its nodes say in ``/diagnostics`` (the bridge's
and the agent's status values) and where its odometry puts it:

========== ==================================================================================
heard      its bridge and its agent were heard within ``stale`` s
id         its agent reports the fleet file's agent_id, and no other process broadcasts it
ready      its bridge would accept an engage now (PX4 heard and fresh, no failsafe, armable,
           no other setpoint writer, a matching px4_msgs): the bridge's ``ready`` value
origin     placed in the world frame: the bridge's origin (GPS or given) with no disagreement
area       inside the safety area (when the fleet has one)
separation at least ``d_safe`` from every other vehicle
clock      its companion's clock agrees, within ``max_clock_offset``, with at least half of the
           others' (the offsets the agents measure of each other, ``core.links``): a single
           companion off is named alone; of two that disagree, both are
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

CHECKS = ('heard', 'id', 'ready', 'origin', 'area', 'separation', 'clock', 'battery')
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


def pairwise_offsets(fleet, views) -> dict[str, dict[str, float]]:
    """
    Return {vehicle: {other: its clock minus the other's [s]}} from the agents' link figures.

    Agent ``u`` measures sender ``v`` at ``clock_v - clock_u``; ``v`` measures ``u`` at the
    opposite. Both directions are averaged where both are known.
    """
    by_id = {v.agent_id: v.name for v in fleet.vehicles}
    seen: dict[tuple[str, str], list[float]] = {}
    for vehicle in fleet.vehicles:
        offsets = link_offsets(views.get(vehicle.name, VehicleView()).agent)
        for sender, offset in offsets.items():
            other = by_id.get(sender)
            if other is not None and other != vehicle.name:
                seen.setdefault((other, vehicle.name), []).append(offset)
                seen.setdefault((vehicle.name, other), []).append(-offset)
    result: dict[str, dict[str, float]] = {v.name: {} for v in fleet.vehicles}
    for (name, other), values in seen.items():
        result[name][other] = float(np.mean(values))
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
    off = {name: value for name, value in mine.items() if abs(value) > limit}
    if 2 * len(off) > len(mine) or (off and len(mine) == 1):
        worst = float(np.median(list(off.values())))
        return False, (f'its clock is {worst:+.3f} s off ' + ', '.join(sorted(off))
                       + f' (agrees with {len(mine) - len(off)} of {len(mine)}), past '
                       f'max_clock_offset {limit:g} s: synchronise it (chrony/NTP)')
    return True, f'{float(np.median(list(mine.values()))):+.3f} s'


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


_CHECKS = {'heard': _heard, 'id': _id, 'ready': _ready, 'origin': _origin, 'area': _area,
           'separation': _separation, 'clock': _clock, 'battery': _battery}


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
