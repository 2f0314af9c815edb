"""
Vectorised velocity mobility model (no rclpy): one call steps 1 or 10,000 vehicles.

Semantics of one ``sim_dt`` step, per vehicle (those of the reference velocity mobility
model):

1. Velocity tracking, per plane (xy on the vector norm, z on the absolute value). With the
   plane's tau set, the desired acceleration is ``(v_des - v) / tau``; without it the whole
   gap ``v_des - v`` is the desired change in one step. The change is saturated at
   ``limit * sim_dt``, where the limit is the acceleration limit, or the braking limit when the
   commanded speed is below the current one. An optional jerk limit bounds the change of the
   applied acceleration between steps.
2. Speed saturation (xy norm, abs z).
3. Explicit Euler position update with the NEW velocity.
4. Heading: yaw follows the commanded yaw rate, or turns to face the horizontal velocity,
   under the yaw-rate and yaw-acceleration limits.

Commands persist: the caller passes the same ``v_des`` until a new one replaces it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from velocity_mobility_ros.core.geometry import saturate, wrap_angle
from velocity_mobility_ros.core.vehicle import VehicleParams

# Below this horizontal speed [m/s] the 'velocity' heading mode holds the current yaw, since
# the direction of travel of a hovering vehicle is noise.
HEADING_MIN_SPEED = 0.1


@dataclass
class VehicleState:
    """State of N vehicles, world (ENU) frame."""

    position: np.ndarray      # (N, 3) m
    velocity: np.ndarray      # (N, 3) m/s
    acceleration: np.ndarray  # (N, 3) m/s^2, applied over the last step
    yaw: np.ndarray           # (N,) rad, in [-pi, pi)
    yaw_rate: np.ndarray      # (N,) rad/s

    @classmethod
    def at_rest(cls, position: ArrayLike, yaw: ArrayLike | None = None) -> 'VehicleState':
        """Vehicles at ``position`` (N, 3) with zero velocity; yaw defaults to 0."""
        p = np.array(position, dtype=float, ndmin=2)
        if p.ndim != 2 or p.shape[1] != 3:
            raise ValueError(f'position must have shape (N, 3), got {p.shape}')
        n = p.shape[0]
        yaw_arr = np.zeros(n) if yaw is None else np.array(yaw, dtype=float).reshape(-1)
        if yaw_arr.shape != (n,):
            raise ValueError(f'yaw must have {n} values, got {yaw_arr.size}')
        for name, arr in (('position', p), ('yaw', yaw_arr)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f'{name} must be finite, got {arr.tolist()}')
        return cls(p, np.zeros((n, 3)), np.zeros((n, 3)), wrap_angle(yaw_arr), np.zeros(n))

    def __len__(self) -> int:
        return self.position.shape[0]


def apply_acceleration_limits(velocity: ArrayLike, desired_velocity: ArrayLike, dt: float,
                              max_acc_xy: float, max_acc_z: float) -> np.ndarray:
    """
    Take the reference acceleration-limited step.

    Move ``velocity`` toward ``desired_velocity`` by at most ``max_acc_xy*dt`` (xy norm) and
    ``max_acc_z*dt`` (z).
    """
    v = np.asarray(velocity, dtype=float)
    return v + saturate(np.asarray(desired_velocity, dtype=float) - v,
                        max_acc_xy * dt, max_acc_z * dt)


def apply_velocity_limits(velocity: ArrayLike, max_speed_xy: float,
                          max_speed_z: float) -> np.ndarray:
    """
    Apply the reference speed saturation.

    The xy norm <= ``max_speed_xy``, abs(z) <= ``max_speed_z``.
    """
    return saturate(velocity, max_speed_xy, max_speed_z)


def integrate_position(position: ArrayLike, velocity: ArrayLike, dt: float) -> np.ndarray:
    """Take the reference explicit Euler position update ``p + v*dt``."""
    return np.asarray(position, dtype=float) + np.asarray(velocity, dtype=float) * dt


def _change_limits(v: np.ndarray, v_des: np.ndarray, params: VehicleParams):
    """Per-vehicle bounds on the velocity change this step (acceleration or braking) * dt."""
    dt = params.sim_dt
    lim_xy, lim_z = params.max_acc_xy * dt, params.max_acc_z * dt
    if params.brake_xy != params.max_acc_xy:
        braking = (np.hypot(v_des[:, 0], v_des[:, 1]) < np.hypot(v[:, 0], v[:, 1]))
        lim_xy = np.where(braking, params.brake_xy * dt, lim_xy)
    if params.brake_z != params.max_acc_z:
        lim_z = np.where(np.abs(v_des[:, 2]) < np.abs(v[:, 2]), params.brake_z * dt, lim_z)
    return lim_xy, lim_z


def _heading(state: VehicleState, velocity: np.ndarray, params: VehicleParams,
             yaw_rate_cmd: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    dt, max_rate, max_acc = params.sim_dt, params.max_yaw_rate, params.max_yaw_acc
    if params.heading_mode == 'command':
        if yaw_rate_cmd is None:
            rate_des = np.zeros(len(state))
        else:
            rate_des = np.clip(yaw_rate_cmd, -max_rate, max_rate)
    else:
        moving = np.hypot(velocity[:, 0], velocity[:, 1]) > HEADING_MIN_SPEED
        target = np.where(moving, np.arctan2(velocity[:, 1], velocity[:, 0]), state.yaw)
        error = wrap_angle(target - state.yaw)
        # Reach the target this step if the limits allow it; with a yaw-acceleration limit,
        # never turn faster than a stop at the target allows (sqrt(2*acc*|error|)).
        speed = np.abs(error) / dt
        if max_acc > 0.0:
            speed = np.minimum(speed, np.sqrt(2.0 * max_acc * np.abs(error)))
        rate_des = np.copysign(np.minimum(speed, max_rate), error)
    if max_acc > 0.0:
        rate = state.yaw_rate + np.clip(rate_des - state.yaw_rate, -max_acc * dt, max_acc * dt)
    else:
        rate = rate_des
    return wrap_angle(state.yaw + rate * dt), rate


def step(state: VehicleState, v_des: ArrayLike, params: VehicleParams,
         yaw_rate_cmd: ArrayLike | None = None) -> VehicleState:
    """
    Advance N vehicles by one ``params.sim_dt``; pure, returns a new state.

    ``v_des`` (N, 3) is the desired world-frame velocity; ``yaw_rate_cmd`` (N,) the commanded
    yaw rate, used in the 'command' heading mode (None = 0).
    """
    dt = params.sim_dt
    v = state.velocity
    v_des = np.asarray(v_des, dtype=float)
    change = v_des - v
    if params.tau_xy > 0.0:
        change[:, :2] /= params.tau_xy
        change[:, :2] *= dt
    if params.tau_z > 0.0:
        change[:, 2] /= params.tau_z
        change[:, 2] *= dt
    lim_xy, lim_z = _change_limits(v, v_des, params)
    change = saturate(change, lim_xy, lim_z)
    if params.max_jerk_xy > 0.0 or params.max_jerk_z > 0.0:
        previous = state.acceleration * dt
        jerk_xy = params.max_jerk_xy * dt * dt if params.max_jerk_xy > 0.0 else np.inf
        jerk_z = params.max_jerk_z * dt * dt if params.max_jerk_z > 0.0 else np.inf
        change = previous + saturate(change - previous, jerk_xy, jerk_z)
        # Only bites when the previous acceleration exceeds the current limit (e.g. braking
        # limit lower than the acceleration one, or limits lowered at run time).
        change = saturate(change, lim_xy, lim_z)
    velocity = apply_velocity_limits(v + change, params.max_speed_xy, params.max_speed_z)
    position = integrate_position(state.position, velocity, dt)
    acceleration = (velocity - v) / dt
    yaw, yaw_rate = _heading(state, velocity, params,
                             None if yaw_rate_cmd is None else np.asarray(yaw_rate_cmd, float))
    return VehicleState(position, velocity, acceleration, yaw, yaw_rate)
