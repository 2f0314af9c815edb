"""
Geometry every layer shares: angle wrapping, xy-norm saturation, body <-> world rotation.

Pure numpy on (..., 3) vectors (ENU world, FLU body, REP-103) and angles in radians; the
vehicle model, the controller law, the PX4 frames and the analysis all use these and no copy
of their own.
"""
from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

TWO_PI = 2.0 * np.pi


def wrap_angle(angle: ArrayLike) -> np.ndarray:
    """Angle(s) wrapped to [-pi, pi)."""
    return np.remainder(np.asarray(angle, dtype=float) + np.pi, 2.0 * np.pi) - np.pi


def wrap_2pi(angle: ArrayLike) -> np.ndarray:
    """Angle(s) wrapped to [0, 2*pi)."""
    return np.mod(angle, TWO_PI)


def wrap_2pi_once(angle: np.ndarray) -> np.ndarray:
    """:func:`wrap_2pi` for angles in (-2 pi, 2 pi) only, without np.mod's cost (hot loops)."""
    return np.where(angle < 0.0, angle + TWO_PI, angle)


def xy_scale(vec: ArrayLike, limit_xy: ArrayLike) -> np.ndarray:
    """Return the factor (...) that scales the xy part of ``vec`` (..., >= 2) to ``limit_xy``."""
    vec = np.asarray(vec, dtype=float)
    norm = np.hypot(vec[..., 0], vec[..., 1])
    return np.minimum(1.0, limit_xy / np.maximum(norm, 1e-300))


def saturate(vec: ArrayLike, limit_xy: ArrayLike, limit_z: ArrayLike) -> np.ndarray:
    """
    Scale the xy part of ``vec`` (..., 3) to norm <= ``limit_xy`` and clamp z to +-``limit_z``.

    Limits are scalars or arrays broadcasting against ``vec[..., 0]``.
    """
    vec = np.asarray(vec, dtype=float)
    out = np.empty_like(vec)
    np.multiply(vec[..., :2], xy_scale(vec, limit_xy)[..., None], out=out[..., :2])
    np.clip(vec[..., 2], -limit_z, limit_z, out=out[..., 2])
    return out


def body_to_world(v_body: ArrayLike, yaw: ArrayLike) -> np.ndarray:
    """Rotate body (FLU) vectors (..., 3) into the world (ENU) frame by ``yaw`` (...)."""
    v = np.asarray(v_body, dtype=float)
    c, s = np.cos(yaw), np.sin(yaw)
    out = np.empty(np.broadcast_shapes(v.shape, np.shape(c) + (3,)))
    out[..., 0] = c * v[..., 0] - s * v[..., 1]
    out[..., 1] = s * v[..., 0] + c * v[..., 1]
    out[..., 2] = v[..., 2]
    return out


def world_to_body(v_world: ArrayLike, yaw: ArrayLike) -> np.ndarray:
    """Rotate world (ENU) vectors (..., 3) into the body (FLU) frame of heading ``yaw``."""
    return body_to_world(v_world, -np.asarray(yaw, dtype=float))


def rotate_by_quaternion(quaternion_xyzw: ArrayLike, vectors: ArrayLike) -> np.ndarray:
    """
    Rotate (N, 3) vectors by (N, 4) unit quaternions ``x, y, z, w`` (ROS message order).

    Body (FLU) to world (ENU) with a pose's orientation, vectorised: v + 2w(a x v) +
    2a x (a x v) with a the vector part.
    """
    q = np.asarray(quaternion_xyzw, dtype=float)
    v = np.asarray(vectors, dtype=float)
    axis, w = q[:, :3], q[:, 3:4]
    twice_cross = 2.0 * np.cross(axis, v)
    return v + w * twice_cross + np.cross(axis, twice_cross)
