"""
Vehicle limits and node I/O settings: one validated object each (no rclpy).

Every constant of the velocity mobility model lives in :class:`VehicleParams`; the node-side
settings that are not physics (odometry rate, command timeout, frames) live in
:class:`InterfaceParams`. Both validate on construction and raise ``ValueError`` naming the
parameter and the bad value, so nodes, YAML files and the batch simulator share one rule set.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import math
from typing import Any, Mapping

from ros_support.settings import check_fields, setting
from ros_support.validation import from_mapping

HEADING_MODES = ('command', 'velocity')
CMD_FRAMES = ('world', 'body')


@dataclass(frozen=True)
class VehicleParams:
    """
    Physical limits of one vehicle type (SI units, ENU).

    Defaults are the reference scenario: sim_dt 0.01 s, speeds 10/5 m/s, accelerations
    4/5 m/s^2, tau 1.0/1.2 s. Every extension is off by default (``0`` = off / same as the
    acceleration limit), so the defaults reproduce the reference model exactly.
    """

    max_speed_xy: float = setting(10.0, 'Bound on the horizontal speed (xy norm)', 'm/s', 0.0,
                                  100.0)
    max_speed_z: float = setting(5.0, 'Bound on the vertical speed abs(vz)', 'm/s', 0.0, 100.0)
    max_acc_xy: float = setting(4.0, 'Bound on the horizontal acceleration (xy norm)', 'm/s^2',
                                0.0, 100.0)
    max_acc_z: float = setting(5.0, 'Bound on the vertical acceleration abs(az)', 'm/s^2', 0.0,
                               100.0)
    max_dec_xy: float = setting(0.0, 'Horizontal braking limit, used when the commanded '
                                'horizontal speed is below the current one; 0 = same as '
                                'max_acc_xy', 'm/s^2', 0.0, 100.0)
    max_dec_z: float = setting(0.0, 'Vertical braking limit, used when the commanded abs(vz) is '
                               'below the current one; 0 = same as max_acc_z', 'm/s^2', 0.0,
                               100.0)
    max_jerk_xy: float = setting(0.0, 'Bound on the change of horizontal acceleration; 0 = off',
                                 'm/s^3', 0.0, 1000.0)
    max_jerk_z: float = setting(0.0, 'Bound on the change of vertical acceleration; 0 = off',
                                'm/s^3', 0.0, 1000.0)
    tau_xy: float = setting(1.0, 'First-order velocity time constant, horizontal; must exceed '
                            'sim_dt; 0 = acceleration-limited step', 's', 0.0, 60.0)
    tau_z: float = setting(1.2, 'First-order velocity time constant, vertical; must exceed '
                           'sim_dt; 0 = acceleration-limited step', 's', 0.0, 60.0)
    sim_dt: float = setting(0.01, 'Integration step (a node steps on a timer of this period on '
                            'its clock)', 's', 1e-4, 1.0, read_only=True)
    heading_mode: str = setting('command', "'command': yaw follows the command's angular.z; "
                                "'velocity': yaw turns to face the horizontal velocity",
                                choices=HEADING_MODES)
    max_yaw_rate: float = setting(1.5, 'Bound on abs(yaw rate)', 'rad/s', 1e-3, 100.0)
    max_yaw_acc: float = setting(0.0, 'Bound on abs(yaw acceleration); 0 = off', 'rad/s^2', 0.0,
                                 1000.0)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ('tau_xy', 'tau_z'):
            tau = getattr(self, name)
            if 0.0 < tau <= self.sim_dt:
                raise ValueError(
                    f'{name} must be > sim_dt ({self.sim_dt}) when set (0 = off): an Euler step '
                    f'of at least tau overshoots, got {tau}')

    @property
    def brake_xy(self) -> float:
        """Horizontal braking limit in force (max_dec_xy, or max_acc_xy when that is 0)."""
        return self.max_dec_xy or self.max_acc_xy

    @property
    def brake_z(self) -> float:
        """Vertical braking limit in force (max_dec_z, or max_acc_z when that is 0)."""
        return self.max_dec_z or self.max_acc_z

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> 'VehicleParams':
        """Build from a name->value mapping; missing names keep defaults, unknown ones raise."""
        return from_mapping(cls, values)

    def with_changes(self, **changes: Any) -> 'VehicleParams':
        """Return a validated copy with ``changes`` applied."""
        return from_mapping(type(self), {**dataclasses.asdict(self), **changes})


@dataclass(frozen=True)
class InterfaceParams:
    """Node-side settings of a mobility node that are not vehicle physics."""

    odom_rate: float = setting(50.0, 'Odometry rate: odom is published every '
                               'round(1/(odom_rate*sim_dt)) steps', 'Hz', 0.01, 10000.0)
    cmd_timeout: float = setting(0.5, 'Time (node clock) without a valid command before the '
                                 'vehicle brakes to a hover; 0 = never', 's', 0.0, 3600.0)
    cmd_frame: str = setting('world', "Frame of cmd_vel: 'world' (ENU) or 'body' (FLU, rotated "
                             'by the current yaw every step)', choices=CMD_FRAMES)
    cmd_vel_stamped: bool = setting(False, 'Subscribe to geometry_msgs/TwistStamped instead of '
                                    'Twist', read_only=True)
    world_frame: str = setting('world', 'header.frame_id of the odometry')

    def __post_init__(self) -> None:
        check_fields(self)
        if not isinstance(self.world_frame, str) or not self.world_frame:
            raise ValueError(f'world_frame must be a non-empty string, got {self.world_frame!r}')

    def odom_decimation(self, sim_dt: float) -> int:
        """
        Return steps between odometry messages.

        ``round(1 / (odom_rate * sim_dt))``, at least 1.
        """
        decimation = round(1.0 / (self.odom_rate * sim_dt))
        if decimation < 1:
            raise ValueError(
                f'odom_rate must be < 2/sim_dt ({2.0 / sim_dt:g} Hz for sim_dt {sim_dt}): '
                f'it gives an odometry decimation below 1, got {self.odom_rate}')
        return decimation

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> 'InterfaceParams':
        """Build from a name->value mapping; missing names keep defaults, unknown ones raise."""
        return from_mapping(cls, values)


def split_node_params(values: Mapping[str, Any]) -> tuple[VehicleParams, InterfaceParams]:
    """
    Validate a mobility node's flat parameter mapping into (vehicle, interface) objects.

    Names belonging to neither object raise. The odometry decimation is checked against the
    vehicle's ``sim_dt``.
    """
    vehicle_names = {f.name for f in dataclasses.fields(VehicleParams)}
    vehicle = VehicleParams.from_mapping({k: v for k, v in values.items() if k in vehicle_names})
    interface = InterfaceParams.from_mapping(
        {k: v for k, v in values.items() if k not in vehicle_names})
    interface.odom_decimation(vehicle.sim_dt)
    return vehicle, interface


@dataclass(frozen=True)
class ClockSettings:
    """For the node that is the simulation's clock (swarm_sim --processes, swarm_sim.launch.py)."""

    publish_clock: bool = setting(False, 'Step on wall time and publish the simulation time on '
                                  '/clock (this node is the clock of the simulation)',
                                  read_only=True)
    real_time_factor: float = setting(1.0, 'Sim seconds per wall second when publish_clock is '
                                      'set', low=1e-3, high=1000.0, read_only=True)
    clock_subscribers: int = setting(0, 'With publish_clock: hold the clock at 0 until this many '
                                     '/clock subscriptions are matched (every node of the graph '
                                     'is up); 0 = start at once', low=0, high=100_000,
                                     read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class PoseSettings:
    """mobility_node's start pose."""

    initial_position: tuple = setting(description='Initial position [x, y, z] in the world frame',
                                      unit='m', array='double', read_only=True,
                                      default_factory=lambda: (0.0, 0.0, 0.0))
    initial_yaw: float = setting(0.0, 'Initial yaw (ENU, 0 = facing +x)', 'rad', -2 * math.pi,
                                 2 * math.pi, read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if len(self.initial_position) != 3:
            raise ValueError(f'initial_position must be [x, y, z], got {self.initial_position}')


@dataclass(frozen=True)
class SwarmPoseSettings:
    """swarm_mobility_node's vehicles and their start poses."""

    vehicle_names: tuple = setting(description='Vehicle names; each gets /<name>/cmd_vel, '
                                   '/<name>/odom and frame <name>/base_link', array='string',
                                   read_only=True, default_factory=tuple)
    initial_positions: tuple = setting(description='Initial positions, flat [x1, y1, z1, x2, ...] '
                                       'in vehicle_names order; empty = all at the origin',
                                       unit='m', array='double', read_only=True,
                                       default_factory=tuple)
    initial_yaws: tuple = setting(description='Initial yaws in vehicle_names order; empty = all '
                                  '0', unit='rad', array='double', read_only=True,
                                  default_factory=tuple)

    def __post_init__(self) -> None:
        check_fields(self)
        names = list(self.vehicle_names)
        n = len(names)
        if n == 0:
            raise ValueError('vehicle_names must list at least one vehicle, got []')
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f'vehicle_names must be unique, got duplicates {duplicates}')
        if self.initial_positions and len(self.initial_positions) != 3 * n:
            raise ValueError(f'initial_positions must hold 3 values per vehicle ({3 * n} for '
                             f'{n} vehicles), got {len(self.initial_positions)}')
        if self.initial_yaws and len(self.initial_yaws) != n:
            raise ValueError(f'initial_yaws must hold one value per vehicle ({n}), got '
                             f'{len(self.initial_yaws)}')

    def positions(self) -> list[list[float]]:
        """Return the (n, 3) start positions."""
        flat = list(self.initial_positions) or [0.0] * (3 * len(self.vehicle_names))
        return [flat[i:i + 3] for i in range(0, len(flat), 3)]

    def yaws(self) -> list[float]:
        return list(self.initial_yaws) or [0.0] * len(self.vehicle_names)
