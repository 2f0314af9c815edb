"""
The fleet file: the vehicles a team flies from one place, and the field they share (no rclpy).

.. code-block:: yaml

    geo_reference: [47.397742, 8.545594, 488.0]  # the field's world origin: lat, lon, alt AMSL
    safety_area: field.yaml     # optional; a path relative to this file
    d_safe: 2.0                 # m: separation flown, and the least distance at the check
    min_battery: 0.25           # share of charge the check requires
    max_clock_offset: 0.1       # s: the most a companion's clock may be off the others'
    radius: 20.0                # m, the ring
    altitude: 10.0              # m, world ENU z of the ring
    swarm_reliability: best_effort
    vehicles:
      - {name: uav1, agent_id: 1, px4_namespace: '', target_system: 1, host: companion1}
      - {name: uav2, agent_id: 2, px4_namespace: '', target_system: 1, host: companion2,
         origin: [0.0, 5.0, 0.0]}   # optional: a hand-measured origin, checked against GPS

Each vehicle runs ``agent_px4.launch.py`` on its companion computer
(:func:`launch_commands`); ``fleet check``/``engage``/``land`` (``fleet.cli``) and
``fleet_node`` act on all of them. Errors are one line naming the file, the vehicle and the rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
import math
from pathlib import Path
import shlex
from typing import Any, Optional

from ros_support.validation import broken_rule, read_yaml
from soliton_encirclement_ros.bringup.graph import PX4_D_SAFE, PX4_MIN_ALTITUDE
from soliton_encirclement_ros.core.area import load_area_file
from soliton_encirclement_ros.interface import SWARM_RELIABILITIES
from soliton_encirclement_ros.px4.geo import check_geo_reference

LAUNCH_FILE = 'agent_px4.launch.py'
PACKAGE = 'soliton_encirclement_ros'


@dataclass(frozen=True)
class FleetVehicle:
    """One vehicle: its agent, its PX4 and the companion computer that runs both."""

    name: str
    agent_id: int
    px4_namespace: str = ''
    target_system: int = 1
    host: str = ''
    origin: tuple = ()   # world ENU of its PX4's local origin, measured by hand; () = GPS

    @property
    def bridge(self) -> str:
        """Return the full name of this vehicle's px4_bridge_node."""
        return f'/{self.name}/px4_bridge'

    @property
    def agent(self) -> str:
        """Return the full name of this vehicle's agent_node."""
        return f'/{self.name}/agent'


@dataclass(frozen=True)
class Fleet:
    """A fleet file, checked: the vehicles and the field's shared settings."""

    vehicles: tuple[FleetVehicle, ...]
    geo_reference: tuple = ()
    safety_area: str = ''      # absolute path, or ''
    d_safe: float = 2.0
    min_battery: float = 0.25
    max_clock_offset: float = 0.1
    radius: float = 20.0
    altitude: float = 10.0
    swarm_reliability: str = 'best_effort'
    path: str = ''
    area: Any = field(default=None, compare=False)

    def vehicle(self, name: str) -> Optional[FleetVehicle]:
        """Return the vehicle called ``name``, or None."""
        return next((v for v in self.vehicles if v.name == name), None)


# Each number of the fleet file: (low, high, low exclusive, why). Every one must be finite: a
# NaN passed every comparison (d_safe .nan into every launch line, and a check
# `distance < d_safe` that no pair fails), an infinite radius or altitude no vehicle can fly.
# d_safe and altitude go into each vehicle's agent_px4.launch.py line: the bounds that launch
# applies (bringup.graph), so a fleet file is refused before any vehicle's launch would be.
_SCALARS = {'d_safe': (PX4_D_SAFE, None, False, 'the least separation a PX4 launch flies with'),
            'min_battery': (0.0, 1.0, False, ''),
            'max_clock_offset': (0.0, None, False, ''), 'radius': (0.0, None, True, ''),
            'altitude': (PX4_MIN_ALTITUDE, None, True, 'world ENU z, up from the origin')}
# A vehicle's MAVLink system id (target_system): 0 is MAVLink's broadcast, not a vehicle; the
# bridge's own bound (px4_bridge_node's target_system parameter).
TARGET_SYSTEM_RANGE = (1, 255)


def load_fleet(path) -> Fleet:
    """Read and check a fleet file; ``ValueError`` in one line naming what is wrong."""
    path = Path(path)
    content = read_yaml(path, 'fleet file')
    where = f'fleet file {path}'
    if not isinstance(content, dict) or not isinstance(content.get('vehicles'), list) \
            or not content['vehicles']:
        raise ValueError(f'{where}: must be a mapping with a non-empty list vehicles: [{{name, '
                         'agent_id, px4_namespace, target_system, host}}, ...]')
    known = {f.name for f in fields(Fleet)} - {'vehicles', 'path', 'area'}
    unknown = sorted(set(content) - known - {'vehicles'})
    if unknown:
        raise ValueError(f'{where}: unknown keys {unknown}; known: vehicles, '
                         f'{", ".join(sorted(known))}')
    values: dict[str, Any] = {}
    for name, (low, high, strict, why) in _SCALARS.items():
        if name in content:
            value = content[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or broken_rule(float(value), low, high, strict):
                rule = ('a finite number' + (f' {">" if strict else ">="} {low:g}'
                                             if low is not None else '')
                        + (f' and <= {high:g}' if high is not None else ''))
                why = f' ({why})' if why else ''
                raise ValueError(f'{where}: {name} must be {rule}{why}, got {value!r}')
            values[name] = float(value)
    if 'swarm_reliability' in content:
        if content['swarm_reliability'] not in SWARM_RELIABILITIES:
            raise ValueError(f'{where}: swarm_reliability must be one of '
                             f'{", ".join(SWARM_RELIABILITIES)}, got '
                             f'{content["swarm_reliability"]!r}')
        values['swarm_reliability'] = content['swarm_reliability']
    try:
        geo = check_geo_reference(content.get('geo_reference') or ())
    except ValueError as error:
        raise ValueError(f'{where}: {error}') from None
    area_path = ''
    area = None
    if content.get('safety_area'):
        area_path = str((path.parent / str(content['safety_area'])).resolve())
        area = load_area_file(area_path, geo)
    vehicles = tuple(_vehicle(where, i, entry) for i, entry in enumerate(content['vehicles']))
    for attribute, what in (('name', 'names'), ('agent_id', 'agent ids')):
        seen = [getattr(v, attribute) for v in vehicles]
        twice = sorted({str(x) for x in seen if seen.count(x) > 1})
        if twice:
            raise ValueError(f'{where}: {what} must be unique, got {", ".join(twice)} twice')
    places = [(v.host, v.px4_namespace) for v in vehicles]
    twice = sorted({f'{h or "(no host)"}:{ns or "(instance 0)"}' for h, ns in places
                    if places.count((h, ns)) > 1})
    if twice:
        raise ValueError(f'{where}: two vehicles on one host share a px4_namespace (one PX4 '
                         f'each): {", ".join(twice)}')
    if not geo and any(not v.origin for v in vehicles):
        missing = ', '.join(v.name for v in vehicles if not v.origin)
        raise ValueError(f'{where}: {missing} has no origin and there is no geo_reference: give '
                         'the field a geo_reference (origins from GPS) or each vehicle an origin')
    return Fleet(vehicles=vehicles, geo_reference=geo or (), safety_area=area_path, path=str(path),
                 area=area, **values)


def _vehicle(where: str, index: int, entry: Any) -> FleetVehicle:
    if not isinstance(entry, dict) or 'name' not in entry or 'agent_id' not in entry:
        raise ValueError(f'{where}: vehicles[{index}] must be a mapping with at least name and '
                         f'agent_id, got {entry!r}')
    unknown = sorted(set(entry) - {f.name for f in fields(FleetVehicle)})
    if unknown:
        raise ValueError(f'{where}: vehicles[{index}] has unknown keys {unknown}')
    name = str(entry['name'])
    if not name or not (name[0].isalpha() and name.replace('_', 'a').isalnum()):
        raise ValueError(f'{where}: vehicles[{index}] name must be a ROS name token, got '
                         f'{name!r}')
    for key, low, high in (('agent_id', 1, 1_000_000), ('target_system', *TARGET_SYSTEM_RANGE)):
        value = entry.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f'{where}: {name} {key} must be an integer in [{low}, {high}], got '
                             f'{value!r}')
    origin = entry.get('origin') or ()
    if origin and (not isinstance(origin, (list, tuple)) or len(origin) != 3 or not all(
            isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c)
            for c in origin)):
        raise ValueError(f'{where}: {name} origin must be [x, y, z] of finite numbers (m, world '
                         f'ENU), got {origin!r}')
    return FleetVehicle(name=name, agent_id=int(entry['agent_id']),
                        px4_namespace=str(entry.get('px4_namespace', '') or '').strip('/'),
                        target_system=int(entry.get('target_system', 1)),
                        host=str(entry.get('host', '') or ''),
                        origin=tuple(float(c) for c in origin))


def launch_arguments(fleet: Fleet, vehicle: FleetVehicle) -> list[str]:
    """Return the ``agent_px4.launch.py`` arguments (``name:=value``) of one vehicle."""
    args = {'agent_name': vehicle.name, 'agent_id': vehicle.agent_id,
            'px4_namespace': vehicle.px4_namespace, 'target_system': vehicle.target_system,
            'radius': f'{fleet.radius:g}', 'altitude': f'{fleet.altitude:g}',
            'd_safe': f'{fleet.d_safe:g}', 'swarm_reliability': fleet.swarm_reliability}
    if fleet.geo_reference:
        args['geo_reference'] = ','.join(f'{c:.9g}' for c in fleet.geo_reference)
    if vehicle.origin:
        args['origin'] = ','.join(f'{c:g}' for c in vehicle.origin)
    if fleet.safety_area:
        args['safety_area'] = fleet.safety_area
    return [f'{key}:={value}' for key, value in args.items()]


def launch_commands(fleet: Fleet) -> list[tuple[str, str, str]]:
    """Return ``(host, vehicle name, the exact ros2 launch line)`` for every vehicle."""
    return [(v.host, v.name, shlex.join(['ros2', 'launch', PACKAGE, LAUNCH_FILE,
                                         *launch_arguments(fleet, v)]))
            for v in fleet.vehicles]
