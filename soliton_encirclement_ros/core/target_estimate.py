"""
The target's acceleration, estimated from the velocities it broadcasts (pure numpy).

The law leads the target's velocity by the vehicles' lag (``law.target_lead``); the lead needs
the target's acceleration. The broadcaster (``target_node``, the batch engines) estimates it
once, from its own velocity history, and broadcasts it with the velocity: every agent then
leads by the same vector, whatever it hears, and a lost state costs no estimate. A tracked
target's velocity is noisy, so the finite difference of consecutive velocities is low-passed
with time constant :data:`ACCELERATION_TIME_CONSTANT`.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

# s: low-pass of the finite-difference acceleration. A steady turn at rate w is led w x this
# late in phase (0.03 rad at 0.17 rad/s); a velocity noise of s m/s at 0.01 s steps comes out as
# about s x 30 m/s^2 (50 Hz odometry of a 0.05 m/s noise: 1.5 m/s^2, a 1.5 m/s lead at 1 s).
ACCELERATION_TIME_CONSTANT = 0.2


class AccelerationEstimate(NamedTuple):
    """The estimate after a velocity sample: its stamp [s], velocity and acceleration (..., 3)."""

    stamp: float
    velocity: np.ndarray
    acceleration: np.ndarray


def estimate_acceleration(previous: AccelerationEstimate | None, stamp: float, velocity,
                          time_constant: float = ACCELERATION_TIME_CONSTANT
                          ) -> AccelerationEstimate:
    """
    Return the estimate after the velocity sample ``(stamp, velocity)``.

    The first sample (``previous`` None) estimates zero; a sample not later than the previous
    one, or not finite, keeps the estimate (and, not finite, the velocity). Elementwise over
    leading axes (one target per row), with one stamp.
    """
    velocity = np.array(velocity, dtype=float)
    if previous is None:
        return AccelerationEstimate(float(stamp), velocity, np.zeros_like(velocity))
    dt = float(stamp) - previous.stamp
    if not dt > 0.0:
        return previous
    finite = np.all(np.isfinite(velocity), axis=-1, keepdims=True)
    velocity = np.where(finite, velocity, previous.velocity)
    raw = (velocity - previous.velocity) / dt
    share = low_pass_share(dt, time_constant)
    acceleration = previous.acceleration + share * (raw - previous.acceleration)
    return AccelerationEstimate(float(stamp), velocity, acceleration)


def low_pass_share(dt: float, time_constant: float = ACCELERATION_TIME_CONSTANT) -> float:
    """Return the share of a new finite difference taken after a step ``dt`` [s] (0 < it <= 1)."""
    return float(1.0 - np.exp(-dt / time_constant)) if time_constant > 0.0 else 1.0
