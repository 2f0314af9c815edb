"""
PX4 <-> ROS frame conversions (pure: numpy and transforms3d, no rclpy, no px4_msgs).

PX4 works in NED (world) and FRD (body); ROS (REP-103) in ENU (world) and FLU (body).
Both changes of axes are proper rotations and their own inverses:

* world: ``v_enu = W @ v_ned``, ``W = [[0,1,0],[1,0,0],[0,0,-1]]``: (x, y, z) -> (y, x, -z);
* body:  ``v_flu = B @ v_frd`` with ``B = diag(1, -1, -1)``.

PX4's attitude ``q = (w, x, y, z)`` rotates body FRD into NED (``v_ned = R(q) v_frd``). The ROS
attitude rotates body FLU into ENU, so ``R_enu_flu = W R_ned_frd B``; as quaternions
``q_enu_flu = q_W * q_ned_frd * q_B``. Converting only the yaw is wrong as soon as the vehicle
rolls or pitches, which is why everything here goes through full quaternions.
"""
from dataclasses import dataclass

import numpy as np
from transforms3d.quaternions import mat2quat, qmult, quat2mat

from velocity_mobility_ros.core.geometry import wrap_angle

# Axis changes (each is a proper rotation and its own inverse).
NED_TO_ENU = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])
FRD_TO_FLU = np.diag([1.0, -1.0, -1.0])
_Q_NED_TO_ENU = mat2quat(NED_TO_ENU)   # (0, sqrt(1/2), sqrt(1/2), 0)
_Q_FRD_TO_FLU = mat2quat(FRD_TO_FLU)   # (0, 1, 0, 0)

# VehicleOdometry enums (px4_msgs/msg/VehicleOdometry.msg; stable since PX4 v1.14).
POSE_FRAME_UNKNOWN, POSE_FRAME_NED, POSE_FRAME_FRD = 0, 1, 2
VELOCITY_FRAME_UNKNOWN, VELOCITY_FRAME_NED, VELOCITY_FRAME_FRD = 0, 1, 2
VELOCITY_FRAME_BODY_FRD = 3
_POSE_FRAME_NAMES = {0: 'UNKNOWN', 1: 'NED', 2: 'FRD'}
_VELOCITY_FRAME_NAMES = {0: 'UNKNOWN', 1: 'NED', 2: 'FRD', 3: 'BODY_FRD'}
# A world velocity frame must be the same world frame the pose is expressed in.
_WORLD_VELOCITY_FRAME_OF_POSE = {POSE_FRAME_NED: VELOCITY_FRAME_NED,
                                 POSE_FRAME_FRD: VELOCITY_FRAME_FRD}


def enu_to_ned(v):
    """
    World vector(s) ENU -> NED: (x, y, z) -> (y, x, -z).

    Works on (3,) or (N, 3).
    """
    return np.asarray(v, dtype=float) @ NED_TO_ENU.T


def ned_to_enu(v):
    """
    World vector(s) NED -> ENU: (x, y, z) -> (y, x, -z).

    Works on (3,) or (N, 3).
    """
    return np.asarray(v, dtype=float) @ NED_TO_ENU.T


def flu_to_frd(v):
    """Body vector(s) FLU -> FRD: (x, y, z) -> (x, -y, -z)."""
    return np.asarray(v, dtype=float) @ FRD_TO_FLU.T


def frd_to_flu(v):
    """Body vector(s) FRD -> FLU: (x, y, z) -> (x, -y, -z)."""
    return np.asarray(v, dtype=float) @ FRD_TO_FLU.T


def yaw_enu_to_ned(yaw_enu):
    """Heading ENU (from East, counter-clockwise) -> NED (from North, clockwise)."""
    return wrap_angle(np.pi / 2.0 - np.asarray(yaw_enu, dtype=float))


def yaw_ned_to_enu(yaw_ned):
    """Heading NED -> ENU; the same map, since it is its own inverse."""
    return yaw_enu_to_ned(yaw_ned)


def yaw_rate_enu_to_ned(rate_enu):
    """Yaw rate about ENU z (up) -> about NED z (down): the sign flips."""
    return -np.asarray(rate_enu, dtype=float)


def _canonical(q):
    """Return the unit quaternion with w >= 0 (q and -q are the same attitude)."""
    q = np.asarray(q, dtype=float)
    q = q / np.linalg.norm(q)
    return -q if q[0] < 0.0 else q


def q_ned_frd_to_enu_flu(q_ned_frd):
    """PX4 attitude (w, x, y, z), body FRD -> NED, to ROS attitude, body FLU -> ENU."""
    q = np.asarray(q_ned_frd, dtype=float)
    return _canonical(qmult(qmult(_Q_NED_TO_ENU, q), _Q_FRD_TO_FLU))


def q_enu_flu_to_ned_frd(q_enu_flu):
    """ROS attitude (w, x, y, z), body FLU -> ENU, to PX4 attitude, body FRD -> NED."""
    # q_W and q_B are their own inverses (up to sign), so this is the same product.
    return q_ned_frd_to_enu_flu(q_enu_flu)


class OdometryFrameError(ValueError):
    """A VehicleOdometry sample that cannot be turned into a ROS odometry (frame or value)."""


@dataclass(frozen=True)
class EnuOdometry:
    """Vehicle state the ROS way: pose in the world ENU frame, twist in the body FLU frame."""

    position: np.ndarray          # (3,) m, world ENU
    orientation: np.ndarray       # (4,) (w, x, y, z), body FLU -> world ENU
    linear_velocity: np.ndarray   # (3,) m/s, body FLU
    angular_velocity: np.ndarray  # (3,) rad/s, body FLU


def _finite_vector(name, value, size):
    arr = np.asarray(value, dtype=float).reshape(-1)
    if arr.shape != (size,):
        raise OdometryFrameError(
            f'VehicleOdometry.{name} must have {size} values, got {arr.tolist()}')
    if not np.all(np.isfinite(arr)):
        raise OdometryFrameError(f'VehicleOdometry.{name} is invalid (non-finite): {arr.tolist()}')
    return arr


def vehicle_odometry_to_enu(pose_frame, position, q, velocity_frame, velocity, angular_velocity,
                            origin_enu=(0.0, 0.0, 0.0)):
    """
    Convert the fields of a px4_msgs/VehicleOdometry into an :class:`EnuOdometry`.

    ``origin_enu`` is where this vehicle's PX4 local origin lies in the shared ROS world frame
    (each PX4 starts its own local frame where its estimator initialised). Accepts pose frames
    NED and FRD (FRD is treated like NED: same axes, heading offset unknown to us) and velocity
    frames NED/FRD (matching the pose frame) and BODY_FRD. Raises :class:`OdometryFrameError`
    naming the field and value for UNKNOWN or mismatched frames and for NaN (PX4's "invalid").
    """
    if pose_frame not in _WORLD_VELOCITY_FRAME_OF_POSE:
        raise OdometryFrameError(
            f'VehicleOdometry.pose_frame={pose_frame} '
            f'({_POSE_FRAME_NAMES.get(pose_frame, "not a POSE_FRAME value")}) is not supported; '
            'expected POSE_FRAME_NED (1) or POSE_FRAME_FRD (2)')
    body_velocity = velocity_frame == VELOCITY_FRAME_BODY_FRD
    if not body_velocity and velocity_frame != _WORLD_VELOCITY_FRAME_OF_POSE[pose_frame]:
        raise OdometryFrameError(
            f'VehicleOdometry.velocity_frame={velocity_frame} '
            f'({_VELOCITY_FRAME_NAMES.get(velocity_frame, "not a VELOCITY_FRAME value")}) '
            f'is not supported with pose_frame={pose_frame} ({_POSE_FRAME_NAMES[pose_frame]}); '
            f'expected VELOCITY_FRAME_{_POSE_FRAME_NAMES[pose_frame]} '
            f'({_WORLD_VELOCITY_FRAME_OF_POSE[pose_frame]}) or VELOCITY_FRAME_BODY_FRD (3)')
    p_ned = _finite_vector('position', position, 3)
    q_ned_frd = _finite_vector('q', q, 4)
    if not np.isclose(np.linalg.norm(q_ned_frd), 1.0, atol=1e-3):
        raise OdometryFrameError(
            f'VehicleOdometry.q is not a unit quaternion: {q_ned_frd.tolist()}')
    v = _finite_vector('velocity', velocity, 3)
    w_frd = _finite_vector('angular_velocity', angular_velocity, 3)

    orientation = q_ned_frd_to_enu_flu(q_ned_frd)
    if body_velocity:
        v_flu = frd_to_flu(v)
    else:  # world velocity -> body FLU: v_flu = R_enu_flu^T v_enu
        v_flu = quat2mat(orientation).T @ ned_to_enu(v)
    return EnuOdometry(position=np.asarray(origin_enu, dtype=float) + ned_to_enu(p_ned),
                       orientation=orientation,
                       linear_velocity=v_flu,
                       angular_velocity=frd_to_flu(w_frd))


def _variance_matrix(variance):
    """diag(variance) with NaN (PX4's "unknown") as 0, ROS's "no information" convention."""
    v = np.asarray(variance, dtype=float).reshape(-1)
    return np.diag(np.where(np.isfinite(v), v, 0.0))


def odometry_covariances(position_variance, orientation_variance, velocity_variance,
                         velocity_frame, orientation_enu_flu):
    """
    nav_msgs/Odometry covariances (row-major 36 each) from PX4's VehicleOdometry variances.

    Pose: the position variance (world NED axes) permuted to ENU (x and y swap; a sign does not
    change a variance); the attitude variance (about the body FRD axes, the same as FLU's up to
    sign) rotated to the world ENU axes the ROS covariance is about. Twist: the linear
    velocity variance in the body FLU frame the twist is expressed in (rotated from the world
    frame when PX4 gives a world velocity); angular velocity variance is not reported by PX4
    and stays 0. NaN variances (PX4's "invalid") become 0.
    """
    pose = np.zeros((6, 6))
    pose[:3, :3] = NED_TO_ENU @ _variance_matrix(position_variance) @ NED_TO_ENU.T
    body_to_world = quat2mat(orientation_enu_flu)
    pose[3:, 3:] = body_to_world @ _variance_matrix(orientation_variance) @ body_to_world.T
    if velocity_frame == VELOCITY_FRAME_BODY_FRD:
        to_flu = FRD_TO_FLU
    else:
        to_flu = body_to_world.T @ NED_TO_ENU
    twist = np.zeros((6, 6))
    twist[:3, :3] = to_flu @ _variance_matrix(velocity_variance) @ to_flu.T
    return pose.reshape(-1), twist.reshape(-1)


def sample_stamp_ns(receive_ns, timestamp_us, timestamp_sample_us):
    """
    ROS time [ns] of a PX4 sample.

    The receive time less the sample's age on PX4's clock (``timestamp - timestamp_sample``), so no
    PX4/ROS clock offset enters. An old sample (a stalled estimator) keeps its age, however
    large, so the agent sees it stale. A missing or inconsistent (future) ``timestamp_sample``
    gives the receive time.
    """
    age_us = int(timestamp_us) - int(timestamp_sample_us)
    if timestamp_sample_us <= 0 or age_us < 0 or receive_ns < age_us * 1000:
        return int(receive_ns)  # (a ROS clock still at 0: no /clock yet)
    return int(receive_ns) - age_us * 1000
