"""
The one place that converts velocity commands and odometry between messages and arrays.

Conventions (REP-103/REP-105): world frame ENU, body frame FLU. ``nav_msgs/Odometry`` carries
the pose in ``header.frame_id`` (world) and the twist in ``child_frame_id`` (body).
"""
from __future__ import annotations

import math
from typing import Sequence

from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped, Twist, TwistStamped
from nav_msgs.msg import Odometry
import numpy as np
from numpy.typing import ArrayLike
from transforms3d.euler import euler2quat, quat2euler
from transforms3d.quaternions import quat2mat

from velocity_mobility_ros.core.geometry import world_to_body

TWIST_FIELDS = ('linear.x', 'linear.y', 'linear.z', 'angular.x', 'angular.y', 'angular.z')


def twist_values(msg: Twist | TwistStamped) -> tuple[float, ...]:
    """
    Return the six twist fields (linear xyz, angular xyz) of a Twist or TwistStamped.

    Raises ``ValueError`` naming the first non-finite field, e.g. ``linear.y is nan``.
    """
    twist = msg.twist if isinstance(msg, TwistStamped) else msg
    lin, ang = twist.linear, twist.angular
    values = (lin.x, lin.y, lin.z, ang.x, ang.y, ang.z)
    for name, value in zip(TWIST_FIELDS, values):
        if not math.isfinite(value):
            raise ValueError(f'{name} is {value}')
    return values


def twist_to_arrays(msg: Twist | TwistStamped) -> tuple[np.ndarray, np.ndarray]:
    """Return the validated (linear (3,), angular (3,)) of a Twist or TwistStamped."""
    values = twist_values(msg)
    return np.array(values[:3]), np.array(values[3:])


def write_twist(msg: Twist | TwistStamped, linear_out: np.ndarray,
                angular_out: np.ndarray) -> None:
    """Validate ``msg`` and write it into preallocated (3,) arrays; on error nothing is written."""
    values = twist_values(msg)
    linear_out[:] = values[:3]
    angular_out[:] = values[3:]


def new_odometry(frame_id: str, child_frame_id: str) -> Odometry:
    """Return an empty Odometry with its frames set, to be filled by :func:`fill_odometry`."""
    msg = Odometry()
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    return msg


def fill_odometry(msgs: Sequence[Odometry], position: ArrayLike, velocity: ArrayLike,
                  yaw: ArrayLike, stamp: Time, yaw_rate: ArrayLike | None = None) -> None:
    """
    Fill one Odometry per vehicle in place from world-frame arrays.

    ``position``/``velocity`` (N, 3) world ENU, ``yaw``/``yaw_rate`` (N,). The orientation is
    the yaw-only quaternion; the twist is rotated into the child (body FLU) frame.
    """
    yaw = np.asarray(yaw, dtype=float).reshape(-1)
    positions = np.asarray(position, dtype=float).reshape(-1, 3).tolist()
    body_velocities = world_to_body(np.reshape(velocity, (-1, 3)), yaw).tolist()
    rates = [0.0] * len(msgs) if yaw_rate is None else np.reshape(yaw_rate, -1).tolist()
    for msg, p, v, psi, rate in zip(msgs, positions, body_velocities, yaw.tolist(), rates,
                                    strict=True):
        msg.header.stamp = stamp
        pose = msg.pose.pose
        pose.position.x, pose.position.y, pose.position.z = p
        q = pose.orientation
        q.w, q.x, q.y, q.z = euler2quat(0.0, 0.0, psi)
        twist = msg.twist.twist
        twist.linear.x, twist.linear.y, twist.linear.z = v
        twist.angular.z = rate


def transforms_of(msgs: Sequence[Odometry]) -> list[TransformStamped]:
    """One ``header.frame_id -> child_frame_id`` transform per Odometry (its pose and stamp)."""
    transforms = []
    for msg in msgs:
        transform = TransformStamped(header=msg.header, child_frame_id=msg.child_frame_id)
        pose, t = msg.pose.pose, transform.transform
        t.translation.x, t.translation.y, t.translation.z = (
            pose.position.x, pose.position.y, pose.position.z)
        t.rotation = pose.orientation
        transforms.append(transform)
    return transforms


def to_odometry(position: ArrayLike, velocity: ArrayLike, yaw: float, stamp: Time,
                frame_id: str, child_frame_id: str, yaw_rate: float = 0.0) -> Odometry:
    """One vehicle's Odometry from world-frame position (3,), velocity (3,) and yaw."""
    msg = new_odometry(frame_id, child_frame_id)
    fill_odometry([msg], position, velocity, [yaw], stamp, [yaw_rate])
    return msg


def odometry_to_arrays(msg: Odometry) -> tuple[np.ndarray, np.ndarray, float]:
    """
    (position (3,), world-frame velocity (3,), yaw) of an Odometry.

    The child-frame twist is rotated by the full orientation, so odometry with roll and pitch
    (e.g. from PX4) converts correctly. Raises ``ValueError`` naming a non-finite field.
    """
    position, velocity, quaternion = _odometry_world(msg)
    return position, velocity, quat2euler(quaternion, 'sxyz')[2]


def odometry_position_velocity(msg: Odometry) -> tuple[np.ndarray, np.ndarray]:
    """:func:`odometry_to_arrays` without the yaw (what a controller reads, per message)."""
    return _odometry_world(msg)[:2]


# x, y, z variances of a row-major 6x6 pose covariance (nav_msgs/Odometry pose.covariance).
POSITION_VARIANCES = (0, 7, 14)


def position_uncertainty(msg: Odometry) -> float:
    """
    How far [m] the vehicle may be from the Odometry's position, horizontally.

    The square root of the larger of the x and y position variances (NaN or negative: 0): the
    one convention of the package for a position's uncertainty, written by
    :func:`with_position_uncertainty`.
    """
    cov = msg.pose.covariance
    worst = max(cov[POSITION_VARIANCES[0]], cov[POSITION_VARIANCES[1]])
    return math.sqrt(worst) if worst > 0.0 and math.isfinite(worst) else 0.0


def with_position_uncertainty(pose_covariance: ArrayLike, radius: float) -> np.ndarray:
    """Return a pose covariance (36,) whose x, y, z variances grow by ``radius**2`` [m^2]."""
    cov = np.array(pose_covariance, dtype=float).reshape(-1)
    if radius > 0.0:
        cov[list(POSITION_VARIANCES)] += radius * radius
    return cov


def _odometry_world(msg: Odometry):
    """(position, world-frame velocity, orientation w, x, y, z), every field checked finite."""
    pose, twist = msg.pose.pose, msg.twist.twist
    p, o, v = pose.position, pose.orientation, twist.linear
    fields = {
        'pose.pose.position': (p.x, p.y, p.z),
        'pose.pose.orientation': (o.w, o.x, o.y, o.z),
        'twist.twist.linear': (v.x, v.y, v.z),
    }
    for name, values in fields.items():
        if not all(math.isfinite(value) for value in values):
            raise ValueError(f'{name} is not finite: {values}')
    quaternion = fields['pose.pose.orientation']
    velocity = quat2mat(quaternion) @ np.array(fields['twist.twist.linear'])
    return np.array(fields['pose.pose.position']), velocity, quaternion
