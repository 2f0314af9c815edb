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
from typing import Any, Mapping

from ros_support.validation import bounded, from_mapping

HEADING_MODES = ('command', 'velocity')
CMD_FRAMES = ('world', 'body')


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f'{name} must be one of {", ".join(choices)}, got {value!r}')


@dataclass(frozen=True)
class VehicleParams:
    """
    Physical limits of one vehicle type (SI units, ENU).

    Defaults are the reference scenario: sim_dt 0.01 s, speeds 10/5 m/s, accelerations
    4/5 m/s^2, tau 1.0/1.2 s. Every extension is off by default (``0`` = off / same as the
    acceleration limit), so the defaults reproduce the reference model exactly.
    """

    max_speed_xy: float = 10.0
    max_speed_z: float = 5.0
    max_acc_xy: float = 4.0
    max_acc_z: float = 5.0
    max_dec_xy: float = 0.0   # braking limit; 0 = same as max_acc_xy
    max_dec_z: float = 0.0    # braking limit; 0 = same as max_acc_z
    max_jerk_xy: float = 0.0  # 0 = no jerk limit
    max_jerk_z: float = 0.0   # 0 = no jerk limit
    tau_xy: float = 1.0       # first-order time constant; 0 = acceleration-limited step
    tau_z: float = 1.2        # first-order time constant; 0 = acceleration-limited step
    sim_dt: float = 0.01      # integration step, s
    heading_mode: str = 'command'  # 'command': yaw follows angular.z; 'velocity': faces travel
    max_yaw_rate: float = 1.5  # rad/s
    max_yaw_acc: float = 0.0   # rad/s^2; 0 = no yaw acceleration limit

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            if field.name != 'heading_mode':
                strict = field.name in ('sim_dt', 'max_yaw_rate')
                object.__setattr__(self, field.name, bounded(
                    field.name, getattr(self, field.name), 0.0, strict=strict))
        for name in ('tau_xy', 'tau_z'):
            tau = getattr(self, name)
            if 0.0 < tau <= self.sim_dt:
                raise ValueError(
                    f'{name} must be > sim_dt ({self.sim_dt}) when set (0 = off): an Euler step '
                    f'of at least tau overshoots, got {tau}')
        _check_choice('heading_mode', self.heading_mode, HEADING_MODES)

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

    odom_rate: float = 50.0       # Hz; odometry is published every odom_decimation steps
    cmd_timeout: float = 0.5      # s without a valid command before braking to hover; 0 = off
    cmd_frame: str = 'world'      # 'world' (ENU) or 'body' (FLU)
    cmd_vel_stamped: bool = False  # subscribe geometry_msgs/TwistStamped instead of Twist
    world_frame: str = 'world'    # header.frame_id of the odometry

    def __post_init__(self) -> None:
        object.__setattr__(self, 'odom_rate', bounded('odom_rate', self.odom_rate, 0.0,
                                                      strict=True))
        object.__setattr__(self, 'cmd_timeout', bounded('cmd_timeout (0 = off)',
                                                        self.cmd_timeout, 0.0))
        _check_choice('cmd_frame', self.cmd_frame, CMD_FRAMES)
        if not isinstance(self.cmd_vel_stamped, bool):
            raise ValueError(f'cmd_vel_stamped must be a bool, got {self.cmd_vel_stamped!r}')
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
