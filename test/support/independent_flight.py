"""
Flights from a simulator independent of the project's model, for the fit_mobility tests.

The vehicle here is not ``velocity_mobility_ros.core.model`` (nothing of
``velocity_mobility_ros`` is imported): a continuous-time first-order velocity lag with
acceleration and speed saturation, ``dv/dt = sat_a((u(t - delay) - v) / tau)`` per plane
(xy on the vector norm, z on its absolute value), integrated with classical Runge-Kutta 4 at
``sim_dt`` (1 ms by default), the speed clamped after each step. Commands are sent at
``cmd_rate`` (20 Hz) and held; a command takes effect ``delay`` seconds after it was sent, at
that instant (mid-step when it falls between two steps), not on a step grid. Odometry is
sampled at ``odom_rate`` with a phase offset from the commands, timestamped with the sample
time, and carries white noise plus (optionally) a slowly varying, correlated error.

The commands (:func:`varied_commands`) are drawn from ``seed``: steps large enough for both
acceleration limits and both speed limits to bind, small steps, ramps and chirps in a
shuffled order. The result is a ``support.synthetic_flight.Recording``, so
``write_ros_bag`` records it as this package records a vehicle.
"""
from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from support.synthetic_flight import Recording


@dataclass(frozen=True)
class Truth:
    """The independent vehicle's constants (SI units)."""

    tau_xy: float = 0.8
    max_acc_xy: float = 2.5
    max_speed_xy: float = 6.0
    tau_z: float = 0.5
    max_acc_z: float = 1.5
    max_speed_z: float = 2.5
    delay: float = 0.1

    def as_dict(self) -> dict[str, float]:
        return dict(vars(self))


def _segment(kind: str, length: float, rng, truth: Truth):
    """Return a function of time from the segment's start: (xy velocity (2,), vz)."""
    angle = rng.uniform(-math.pi, math.pi)
    direction = np.array([math.cos(angle), math.sin(angle)])
    if kind == 'big_xy':    # acceleration, then the speed limit binds
        amp = rng.uniform(1.3, 1.6) * truth.max_speed_xy
        return lambda s: (amp * direction * (s < 0.7 * length), 0.0)
    if kind == 'big_z':     # both z limits bind, up or down
        amp = rng.uniform(1.4, 1.8) * truth.max_speed_z * rng.choice([-1.0, 1.0])
        return lambda s: (np.zeros(2), amp * (s < 0.7 * length))
    if kind == 'small':     # the lag alone
        amp_xy = rng.uniform(0.2, 0.4) * truth.max_acc_xy * truth.tau_xy
        amp_z = rng.uniform(0.2, 0.4) * truth.max_acc_z * truth.tau_z * rng.choice([-1, 1])
        return lambda s: (amp_xy * direction * (s < 0.6 * length), amp_z * (s < 0.5 * length))
    if kind == 'ramp':
        slope_xy = rng.uniform(0.3, 0.6)
        slope_z = rng.uniform(0.15, 0.3) * rng.choice([-1.0, 1.0])
        return lambda s: (slope_xy * min(s, 0.8 * length) * direction * (s < 0.8 * length),
                          slope_z * min(s, 0.8 * length) * (s < 0.8 * length))
    # chirp: the lag and the delay
    f0, f1 = rng.uniform(0.1, 0.3), rng.uniform(0.8, 1.3)
    amp_xy, amp_z = rng.uniform(0.8, 1.4), rng.uniform(0.4, 0.8)

    def chirp(s):
        phase = 2 * math.pi * (f0 * s + 0.5 * (f1 - f0) / length * s * s)
        return amp_xy * math.sin(phase) * direction, amp_z * math.sin(1.3 * phase)
    return chirp


def varied_commands(seed: int, truth: Truth, duration: float = 60.0):
    """Return ``commands(t) -> (N, 3)``: shuffled segments drawn from ``seed`` (module doc)."""
    rng = np.random.default_rng(seed)
    # every kind in each run of five segments, in a shuffled order
    kinds = [kind for _ in range(4)
             for kind in rng.permutation(['big_xy', 'big_z', 'small', 'ramp', 'chirp'])]
    segments, start = [], 1.0
    while start < duration:
        kind = kinds[len(segments) % len(kinds)]
        length = rng.uniform(3.5, 5.0)
        if kind in ('big_xy', 'big_z'):  # long enough to reach the speed limit and stay 1 s
            plane = kind[4:]
            reach = (getattr(truth, 'max_speed_' + plane) / getattr(truth, 'max_acc_' + plane)
                     + 2.0 * getattr(truth, 'tau_' + plane) + 1.0)
            length = max(length, reach / 0.7)
        segments.append((start, start + length, _segment(kind, length, rng, truth)))
        start += length

    def commands(t):
        out = np.zeros((np.size(t), 3))
        for row, time in enumerate(np.atleast_1d(t)):
            for begin, end, fn in segments:
                if begin <= time < end:
                    xy, z = fn(time - begin)
                    out[row, :2], out[row, 2] = xy, z
                    break
        return out
    return commands


def _rate(vx, vy, vz, u, truth: Truth):
    """dv/dt: the lag, saturated (xy norm, abs z)."""
    ax, ay = (u[0] - vx) / truth.tau_xy, (u[1] - vy) / truth.tau_xy
    norm = math.hypot(ax, ay)
    if norm > truth.max_acc_xy:
        ax, ay = ax * truth.max_acc_xy / norm, ay * truth.max_acc_xy / norm
    az = min(max((u[2] - vz) / truth.tau_z, -truth.max_acc_z), truth.max_acc_z)
    return ax, ay, az


def _rk4(v, u, h, truth: Truth):
    """One classical Runge-Kutta step of ``h`` under the held command ``u``, speed clamped."""
    k1 = _rate(*v, u, truth)
    k2 = _rate(*(a + 0.5 * h * b for a, b in zip(v, k1)), u, truth)
    k3 = _rate(*(a + 0.5 * h * b for a, b in zip(v, k2)), u, truth)
    k4 = _rate(*(a + h * b for a, b in zip(v, k3)), u, truth)
    vx, vy, vz = (a + h / 6.0 * (b1 + 2 * b2 + 2 * b3 + b4)
                  for a, b1, b2, b3, b4 in zip(v, k1, k2, k3, k4))
    norm = math.hypot(vx, vy)
    if norm > truth.max_speed_xy:
        vx, vy = vx * truth.max_speed_xy / norm, vy * truth.max_speed_xy / norm
    return vx, vy, min(max(vz, -truth.max_speed_z), truth.max_speed_z)


def fly_independent(truth: Truth, seed: int = 0, duration: float = 60.0,
                    sim_dt: float = 0.001, cmd_rate: float = 20.0, odom_rate: float = 50.0,
                    odom_phase: float = 0.0073, noise: float = 0.05,
                    correlated_noise: float = 0.0, commands=None,
                    altitude: float = 20.0) -> Recording:
    """
    Fly ``truth`` through ``commands`` (default :func:`varied_commands` of ``seed``).

    ``noise`` is the white odometry noise [m/s] per axis; ``correlated_noise`` the standard
    deviation of an added error that varies over about a second (a first-order filtered
    noise), as an estimator's drift gives.
    """
    rng = np.random.default_rng(1000 + seed)
    commands = commands or varied_commands(seed, truth, duration)
    cmd_t = np.arange(0.0, duration, 1.0 / cmd_rate)
    cmd_v = commands(cmd_t)
    odom_t = np.arange(odom_phase, duration, 1.0 / odom_rate)
    # Events inside the integration grid: a command taking effect (delay after it was sent)
    # and an odometry sample. A step is split at them, so each is exact in time.
    events = sorted([(t, 0, i) for i, t in enumerate(cmd_t + truth.delay) if t < duration]
                    + [(t, 1, i) for i, t in enumerate(odom_t)])
    odom_v = np.empty((odom_t.size, 3))
    odom_p = np.empty((odom_t.size, 3))
    v, p = (0.0, 0.0, 0.0), [0.0, 0.0, altitude]
    u = (0.0, 0.0, 0.0)
    t, e = 0.0, 0
    steps = int(round(duration / sim_dt))
    for k in range(1, steps + 1):
        t_end = k * sim_dt
        while e < len(events) and events[e][0] <= t_end:
            target, kind, i = events[e]
            e += 1
            if target > t:
                v_new = _rk4(v, u, target - t, truth)
                p = [a + 0.5 * (target - t) * (b + c) for a, b, c in zip(p, v, v_new)]
                v, t = v_new, target
            if kind == 0:
                u = tuple(float(x) for x in cmd_v[i])
            else:
                odom_v[i], odom_p[i] = v, p
        if t_end > t:
            v_new = _rk4(v, u, t_end - t, truth)
            p = [a + 0.5 * (t_end - t) * (b + c) for a, b, c in zip(p, v, v_new)]
            v, t = v_new, t_end
    measured = odom_v + rng.normal(0.0, noise, odom_v.shape)
    if correlated_noise > 0.0:
        alpha = math.exp(-1.0 / (odom_rate * 1.0))   # about one second
        drift = np.zeros(3)
        for i in range(measured.shape[0]):
            drift = alpha * drift + math.sqrt(1 - alpha ** 2) * rng.normal(
                0.0, correlated_noise, 3)
            measured[i] += drift
    yaw = (0.3 + 0.1 * odom_t + math.pi) % (2 * math.pi) - math.pi
    return Recording(np.round(cmd_t * 1e9).astype(np.int64), cmd_v,
                     np.round(odom_t * 1e9).astype(np.int64), odom_p, measured, odom_v, yaw)
