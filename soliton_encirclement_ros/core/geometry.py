"""
Target-centric polar geometry in the horizontal plane (pure numpy, any leading shape).

Angles are measured counter-clockwise from ENU x and wrapped to [0, 2*pi). The unit vectors
are zero at the target itself (r below ``R_EPS``), so every law built on them degrades to
"no radial, no tangential term" there instead of producing NaN.
"""
from __future__ import annotations

import numpy as np

from velocity_mobility_ros.core.geometry import wrap_2pi

R_EPS = 1e-9  # below this distance [m] the direction to the target is undefined


def target_angle(position, target_position):
    """Angle(s) of ``position`` (..., >=2) about ``target_position`` (..., >=2), in [0, 2*pi)."""
    p = np.asarray(position, dtype=float)
    t = np.asarray(target_position, dtype=float)
    return wrap_2pi(np.arctan2(p[..., 1] - t[..., 1], p[..., 0] - t[..., 0]))


def polar_frame(position, target_position):
    """
    (r, e_r_hat, t_hat) of ``position`` about ``target_position`` in the XY plane.

    ``r`` has the leading shape; ``e_r_hat`` (radial, outward) and ``t_hat`` (tangent,
    counter-clockwise) have shape (..., 2) and are zero where r < ``R_EPS``.
    """
    rel = (
        np.asarray(position, dtype=float)[..., :2]
        - np.asarray(target_position, dtype=float)[..., :2]
    )
    r = np.hypot(rel[..., 0], rel[..., 1])
    safe = r >= R_EPS
    with np.errstate(invalid='ignore', divide='ignore'):
        e_r_hat = np.where(safe[..., None], rel / np.where(safe, r, 1.0)[..., None], 0.0)
    t_hat = np.stack((-e_r_hat[..., 1], e_r_hat[..., 0]), axis=-1)
    return r, e_r_hat, t_hat


def angular_rate(position, velocity, target_position, target_velocity):
    """Angular rate(s) about the target, ((p - pT) x (v - vT))_z / r^2; NaN where r < R_EPS."""
    rel = (
        np.asarray(position, dtype=float)[..., :2]
        - np.asarray(target_position, dtype=float)[..., :2]
    )
    rel_v = (
        np.asarray(velocity, dtype=float)[..., :2]
        - np.asarray(target_velocity, dtype=float)[..., :2]
    )
    r2 = rel[..., 0] ** 2 + rel[..., 1] ** 2
    cross = rel[..., 0] * rel_v[..., 1] - rel[..., 1] * rel_v[..., 0]
    with np.errstate(invalid='ignore', divide='ignore'):
        return np.where(r2 >= R_EPS ** 2, cross / np.where(r2 > 0.0, r2, 1.0), np.nan)
