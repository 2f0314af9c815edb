"""
Encirclement scenarios: one validated dataclass, YAML loading, initial placement.

A scenario names everything a run needs besides the gains: swarm size and radius, seed,
duration, control/metrics timing, target motion, failures and communication impairments.
Controller gains (``controller:``) and vehicle limits (``vehicle:``) are nested mappings of the
values given (what a ROS graph passes on); a scenario resolves them once, at creation, into the
typed, validated :class:`ControllerParams` and ``VehicleParams`` it then holds (``gains`` and
``limits``). Unknown keys are errors.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import math
from typing import Any, ClassVar, Mapping, Optional

import numpy as np

from ros_support.settings import check_fields, setting
from ros_support.validation import bounded, from_mapping, read_yaml
from soliton_encirclement_ros.core.area import SafetyArea
from soliton_encirclement_ros.core.faults import Impairments, SimulatedFaults
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.target_motion import (
    check_waypoint_count, DEFAULT_WAYPOINTS, TargetMotionSettings, waypoints_error)
from velocity_mobility_ros.core.vehicle import VehicleParams

PLACEMENT_SPREAD = (0.8, 1.2)  # x = a*R*cos(theta), y = b*R*sin(theta), a, b ~ U(0.8, 1.2)
# Start placements (Scenario.placement): the reference's, and the degenerate starts a real
# swarm meets (PX4's multi-vehicle SITL spawns vehicles on one line; a launch pad is a cluster).
PLACEMENTS = ('reference', 'collinear', 'coincident', 'cluster', 'file')
# The shortest run in control periods: the agents need odometry, then one broadcast, before
# metrics_node has anything to measure (4 periods at the defaults; one more for margin).
MIN_DURATION_PERIODS = 5
# The controller fields each scenario sets from its own (radius, control period) and its
# vehicle's (speed limits): never a controller override, so they cannot disagree.
SCENARIO_SET = ('radius', 'control_period', 'max_speed_xy', 'max_speed_z')
# Bounds that keep the arithmetic of a run finite and meaningful (beyond them sums overflow and
# a ring that fast never moves): far past any swarm, radio link or battery.
MAX_RADIUS = 1e5       # m (100 km)
MAX_DURATION = 1e6     # s (11.6 days)
MAX_OMEGA_REF = 10.0   # rad/s (1.6 turns a second; the command clamp binds long before)


def min_duration(control_period: float, metrics_period: float = 0.0) -> float:
    """Return the shortest simulated run [s] that gives metrics."""
    return max(MIN_DURATION_PERIODS * control_period, metrics_period)


def initial_positions(n: int, radius: float, seed: Optional[int],
                      center=(0.0, 0.0, 0.0), altitude: float = 0.0) -> np.ndarray:
    """
    Return the reference placement (n, 3).

    theta ~ U[0, 2pi), x = a*R*cos, y = b*R*sin, a, b ~ U[0.8, 1.2]. Seeded with ``seed``;
    angles first, then a, then b. z = ``center`` z + ``altitude``.
    """
    rng = np.random.default_rng(seed)
    theta = rng.uniform(0.0, 2.0 * math.pi, n)
    a = rng.uniform(*PLACEMENT_SPREAD, n)
    b = rng.uniform(*PLACEMENT_SPREAD, n)
    c = np.asarray(center, dtype=float)
    return np.column_stack((c[0] + a * radius * np.cos(theta), c[1] + b * radius * np.sin(theta),
                            np.full(n, c[2] + altitude)))


def placed_positions(placement: str, n: int, seed: Optional[int], center, altitude: float,
                     distance: float, spacing: float, bearing: float, spread: float,
                     points=None) -> np.ndarray:
    """
    Return the start positions (n, 3) of a degenerate ``placement`` about ``center``.

    ``collinear``: agent k (1..n) at ``distance + (k-1)*spacing`` from the target on one
    bearing (PX4's multi-vehicle SITL spawns instance k at (0, k*spacing)); ``coincident``:
    every agent at ``distance`` on that bearing; ``cluster``: uniformly in a disc of radius
    ``spread`` about that point (seeded with ``seed``); ``file``: ``points`` (n rows of x, y
    or x, y, z, world ENU). z = ``center`` z + ``altitude`` unless the file gives it.
    """
    c = np.asarray(center, dtype=float)
    heading = np.array([math.cos(bearing), math.sin(bearing)])
    if placement == 'file':
        xyz = np.full((n, 3), c[2] + altitude)
        pts = np.asarray(points, dtype=float)
        xyz[:, :pts.shape[1]] = pts
        return xyz
    if placement == 'collinear':
        along = distance + spacing * np.arange(n)
        xy = c[:2] + along[:, None] * heading
    else:
        xy = np.tile(c[:2] + distance * heading, (n, 1))
    if placement == 'cluster':
        rng = np.random.default_rng(seed)
        angle = rng.uniform(0.0, 2.0 * math.pi, n)
        radius = spread * np.sqrt(rng.uniform(0.0, 1.0, n))
        xy = xy + radius[:, None] * np.column_stack((np.cos(angle), np.sin(angle)))
    return np.column_stack((xy, np.full(n, c[2] + altitude)))


def read_placement_file(path, n: int) -> tuple:
    """Return the n start points of a placement file: a YAML list of [x, y(, z)] (m, ENU)."""
    try:
        pts = np.array(read_yaml(path, 'placement file'), dtype=float)
    except (TypeError, ValueError) as error:
        if str(error).startswith(('cannot read', 'placement file')):
            raise
        pts = np.empty(0)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise ValueError(f'placement_file {path} must be a YAML list of [x, y] or [x, y, z] '
                         'points, one per agent')
    if pts.shape[0] != n or not np.all(np.isfinite(pts)):
        raise ValueError(f'placement_file {path} must hold {n} finite points (one per agent), '
                         f'got {pts.shape[0]}')
    return tuple(tuple(p) for p in pts.tolist())


@dataclass(frozen=True)
class Scenario(Impairments, SimulatedFaults, TargetMotionSettings):
    """
    One encirclement run.

    Defaults: the reference static scenario (N=10, R=20 m, 120 s). The target's motion settings
    (``TargetMotionSettings``) and the failures and link impairments (``Impairments``) are
    inherited: target_node and agent_node inherit the same fields. So are the simulated faults
    (``SimulatedFaults``: killed agents, an estimator reset, a clock step), which the
    simulators' engines model and a node graph does not.
    """

    # batch_sim and swarm_sim step everything on the mobility step sim_dt, so their periods
    # must be multiples of it (a real-time graph's timers need not: bringup.graph.LiveScenario).
    steps_on_sim_dt: ClassVar[bool] = True

    agents: int = setting(10, 'number of agents N', low=1)
    radius: float = setting(20.0, 'encirclement radius R', 'm', 0.0, MAX_RADIUS, strict=True)
    seed: Optional[int] = setting(0, 'seed of the initial placement, target motion, failures '
                                  'and loss (null = unseeded)', low=0, high=2**31 - 1,
                                  optional=True)
    duration: float = setting(120.0, 'simulated time', 's', 0.0, MAX_DURATION, strict=True)
    control_period: float = setting(0.01, 'control period P: agents and target broadcast and the '
                                    'agents command every P', 's', 1e-3, 1.0)
    metrics_period: float = setting(0.0, 'metrics period; 0 = every control tick', 's', 0.0)
    telemetry_period: float = setting(0.1, 'agents.csv row period per agent', 's', 0.0,
                                      strict=True)
    altitude: float = setting(0.0, "agents' start height above the target", 'm')
    placement: str = setting('reference', 'start placement: reference (random about the '
                             'circle), collinear (on one bearing from the target, as PX4 SITL '
                             'spawns), coincident (all at one point), cluster (in a disc of '
                             'placement_spread), file (placement_file)', choices=PLACEMENTS)
    placement_distance: float = setting(1.0, 'distance from the target of the first collinear '
                                        'agent, the coincident point and the cluster centre',
                                        'm', 0.0)
    placement_spacing: float = setting(1.0, 'spacing of collinear agents', 'm', 0.0)
    placement_bearing: float = setting(math.pi / 2, 'bearing of the degenerate placements from '
                                       'the target, counter-clockwise from x (ENU)', 'rad')
    placement_spread: float = setting(1.0, 'radius of the cluster placement', 'm', 0.0)
    placement_file: str = setting('', 'YAML list of start points [x, y(, z)], one per agent, '
                                  'for placement: file')
    waypoints: tuple = DEFAULT_WAYPOINTS
    arrival_times: Optional[tuple] = None
    omega_ref: float = setting(0.0, 'swarm spin reference broadcast by the target', 'rad/s',
                               -MAX_OMEGA_REF, MAX_OMEGA_REF)
    lambdas: Mapping[int, float] = field(default_factory=dict)  # arc weights by agent id
    controller: Mapping[str, Any] = field(default_factory=dict)  # ControllerParams overrides
    vehicle: Mapping[str, Any] = field(default_factory=dict)     # VehicleParams overrides
    # {polygon: [[x, y], ...] | polygon_latlon + geo_reference, z_min, z_max, margin}: every
    # command keeps its vehicle able to stop inside (core.area); empty = none
    safety_area: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        check_waypoint_count(self.waypoints)
        try:
            object.__setattr__(self, 'waypoints', tuple(tuple(p) for p in self.waypoints))
        except TypeError:  # a number where a point should be
            raise waypoints_error(self.waypoints) from None
        if self.arrival_times is not None:
            object.__setattr__(self, 'arrival_times', tuple(self.arrival_times))
        object.__setattr__(self, 'lambdas', {int(k): bounded(f'lambdas[{k}]', v, 0.0, strict=True)
                                             for k, v in dict(self.lambdas).items()})
        if (self.placement == 'file') != bool(self.placement_file):
            raise ValueError('placement_file must be given exactly when placement is file, got '
                             f'placement {self.placement!r} and placement_file '
                             f'{self.placement_file!r}')
        if self.placement == 'file':
            read_placement_file(self.placement_file, self.agents)
        # Resolved once, here: bad gains, limits or waypoints fail now, naming the field, and
        # every later reader gets these same objects.
        object.__setattr__(self, 'area', SafetyArea.from_mapping(self.safety_area))
        limits = VehicleParams.from_mapping(dict(self.vehicle))
        object.__setattr__(self, 'limits', limits)
        object.__setattr__(self, 'gains', self._resolved_gains(limits))
        controller = self.gains
        r_min = controller.r_min
        if self.radius < r_min:
            raise ValueError(f'radius must be >= the controller r_min ({r_min:g} m): the '
                             f'tangential mapping uses max(r, r_min), so no ring forms below '
                             f'it; got radius {self.radius:g} m')
        d_safe = controller.safety_distance(self.agents)
        spacing = 2.0 * self.radius * math.sin(math.pi / max(self.agents, 2))
        if d_safe and spacing <= d_safe:
            raise ValueError(f'radius {self.radius:g} m is too small for {self.agents} agents '
                             f'd_safe {d_safe:g} m apart: the even ring spacing 2 R sin(pi/N) = '
                             f'{spacing:.3g} m must exceed d_safe (R > '
                             f'{d_safe / (2.0 * math.sin(math.pi / max(self.agents, 2))):.3g} m)')
        self.target_model()
        if not self.steps_on_sim_dt:
            return
        sim_dt = limits.sim_dt
        for name in ('control_period', 'metrics_period'):
            period = getattr(self, name)
            if period and abs(period / sim_dt - round(period / sim_dt)) > 1e-6:
                raise ValueError(f'{name} must be a multiple of the mobility step sim_dt '
                                 f'({sim_dt:g} s), got {period:g}')
        shortest = min_duration(self.control_period, self.metrics_period)
        if self.duration < shortest - 1e-9:
            raise ValueError(f'duration must be >= {MIN_DURATION_PERIODS} control periods and one '
                             f'metrics period ({shortest:g} s here): a shorter run gives no '
                             f'metrics; got {self.duration:g} s')

    # Set by __post_init__ (not dataclass fields: neither compared, copied nor given).
    gains: ClassVar[ControllerParams]
    limits: ClassVar[VehicleParams]
    area: ClassVar[Optional[SafetyArea]]

    def _resolved_gains(self, vehicle: VehicleParams) -> ControllerParams:
        """
        Return the gains: the ``controller`` overrides, with radius.

        Control_period and speed limits taken from the scenario and vehicle so that they cannot
        disagree.
        """
        overrides = dict(self.controller)
        for name in SCENARIO_SET:
            if name in overrides:
                raise ValueError(f'controller.{name} is set by the scenario, not the controller '
                                 f'mapping (got {overrides[name]!r})')
        return ControllerParams.from_mapping({
            **overrides, 'radius': self.radius, 'control_period': self.control_period,
            'max_speed_xy': vehicle.max_speed_xy, 'max_speed_z': vehicle.max_speed_z})

    def controller_params(self) -> ControllerParams:
        """Return the resolved gains (``gains``, built once when the scenario was)."""
        return self.gains

    def vehicle_params(self) -> VehicleParams:
        """Return the resolved vehicle limits (``limits``, built once when the scenario was)."""
        return self.limits

    def target_model(self):
        """Return a fresh target motion model (the random one seeded from the scenario seed)."""
        return self.motion_model(self.waypoints, self.arrival_times, self.seed)

    def target_start(self) -> np.ndarray:
        """Where the target starts: the origin, or the first waypoint."""
        return self.motion_start(self.waypoints, self.arrival_times)

    def start_positions(self) -> np.ndarray:
        """Return the agents' start positions (N, 3), world ENU, by ``placement``."""
        if self.placement == 'reference':
            return initial_positions(self.agents, self.radius, self.seed, self.target_start(),
                                     self.altitude)
        points = (read_placement_file(self.placement_file, self.agents)
                  if self.placement == 'file' else None)
        return placed_positions(self.placement, self.agents, self.seed, self.target_start(),
                                self.altitude, self.placement_distance, self.placement_spacing,
                                self.placement_bearing, self.placement_spread, points)

    def agent_ids(self) -> np.ndarray:
        """Agent ids 1..N (uav1 -> 1)."""
        return np.arange(1, self.agents + 1)

    def as_dict(self) -> dict[str, Any]:
        """Plain mapping for summaries (resolved controller and vehicle parameters included)."""
        out = dataclasses.asdict(self)
        out['waypoints'] = [list(p) for p in self.waypoints]
        out['arrival_times'] = None if self.arrival_times is None else list(self.arrival_times)
        out['controller'] = self.gains.as_dict()
        # The separation flown on the full ring (ControllerParams.safety_distance): 0 = off.
        out['d_safe_flown'] = self.gains.safety_distance(self.agents)
        out['vehicle'] = dataclasses.asdict(self.limits)
        out['safety_area'] = None if self.area is None else self.area.as_dict()
        return out

    def to_mapping(self) -> dict[str, Any]:
        """Return the fields as given, by name: what :meth:`from_mapping` takes back."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> 'Scenario':
        """Build from a mapping; missing keys keep defaults, unknown keys raise."""
        if not isinstance(values, Mapping):
            raise ValueError(f'a scenario must be a mapping, got {type(values).__name__}')
        return from_mapping(cls, values, 'scenario key(s)')

    def with_changes(self, **changes: Any) -> 'Scenario':
        return dataclasses.replace(self, **changes)


def load_scenario(path) -> Scenario:
    """
    Read a scenario YAML file (a flat mapping of :class:`Scenario` fields).

    A ROS 2 parameters file of vehicle limits (``fit_mobility``'s ``mobility_fit.yaml``) is
    read as the ``vehicle:`` overrides it sets (:func:`vehicle_overrides`).
    """
    values = read_yaml(path, 'scenario')
    try:
        if is_ros_params(values):
            return Scenario(vehicle=vehicle_overrides(values))
        return Scenario.from_mapping(values or {})
    except (TypeError, ValueError) as exc:
        raise ValueError(f'scenario {path}: {exc}') from None


def is_ros_params(values: Any) -> bool:
    """Return whether ``values`` is a ROS 2 parameters file: {node: {ros__parameters: {...}}}."""
    return bool(values) and isinstance(values, Mapping) and all(
        isinstance(section, Mapping) and isinstance(section.get('ros__parameters'), Mapping)
        for section in values.values())


def vehicle_overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """
    Return the vehicle limits a ROS 2 parameters file sets, as ``vehicle:`` overrides.

    Every parameter of every node section must be a :class:`VehicleParams` field (the agents'
    ``max_speed_xy``/``max_speed_z`` are), and a name set twice must have one value.
    """
    known = {f.name for f in dataclasses.fields(VehicleParams)}
    out: dict[str, Any] = {}
    for node, section in values.items():
        for name, value in section['ros__parameters'].items():
            if name not in known:
                raise ValueError(f'{node}: {name} is not a vehicle limit; a ROS parameters file '
                                 'is read as a scenario only for its vehicle: overrides '
                                 f'(known: {", ".join(sorted(known))})')
            if name in out and out[name] != value:
                raise ValueError(f'{name} is {out[name]!r} in one node section and {value!r} '
                                 f'in {node}: one value for the vehicle: overrides')
            out[name] = value
    return out
