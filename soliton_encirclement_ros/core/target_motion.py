"""
Target motion models: the desired (horizontal) velocity of the target at (t, position).

The target then moves through the same velocity mobility model as the agents. Each model has
``desired_velocity(t, position) -> (3,)``; calls must come with non-decreasing ``t`` (the
random model keeps its current heading as state). Models are ROS-free and shared by
``target_node`` and the batch simulator.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Callable, Mapping, Optional, Protocol, Sequence

import numpy as np

from ros_support.settings import setting
from ros_support.validation import bounded

# Waypoint following: proportional gain on the position error [1/s] and the distance [m]
# within which a waypoint counts as reached (untimed mode).
POSITION_GAIN = 1.0
ARRIVAL_RADIUS = 0.5
TARGET_MOTION_STREAM = 3  # RNG stream id of the random target heading (with the run seed)
# The most waypoints a target's route may have (a scenario's, or target_node's).
MAX_WAYPOINTS = 10_000


def check_waypoint_count(points) -> None:
    """``ValueError`` when ``points`` lists more than ``MAX_WAYPOINTS`` waypoints."""
    if isinstance(points, (list, tuple, np.ndarray)) and len(points) > MAX_WAYPOINTS:
        raise ValueError(f'waypoints has {len(points)} points, more than the {MAX_WAYPOINTS} '
                         "a target's route may have")


def waypoints_error(points) -> ValueError:
    """Return the error of ``points`` that are no list of waypoints."""
    return ValueError(f'waypoints must be a list of [x, y] or [x, y, z], got {points!r}')


# The waypoints of a scenario, or of target_node, that names none: a 40 m square.
DEFAULT_WAYPOINTS = ((0.0, 0.0), (40.0, 0.0), (40.0, 40.0), (0.0, 40.0), (0.0, 0.0))


def _positive(name: str, value: float) -> float:
    return bounded(name, value, 0.0, strict=True)


def _limit_xy(v: np.ndarray, speed: float) -> np.ndarray:
    norm = math.hypot(v[0], v[1])
    return v * (speed / norm) if norm > speed else v


class TargetMotion(Protocol):
    """What every target motion model offers (calls with non-decreasing ``t``)."""

    def desired_velocity(self, t: float, position) -> np.ndarray:
        """Return the desired world-frame velocity (3,) at time ``t`` [s] and ``position``."""


class Static:
    """A target that holds still."""

    def desired_velocity(self, t: float, position) -> np.ndarray:
        return np.zeros(3)


class RandomHeading:
    """
    Every ``period`` s a new uniformly random horizontal heading at ``speed`` m/s.

    At a heading change, if |x| or |y| exceeds ``boundary`` m the heading points back at the
    origin instead. The first heading is drawn at the first call.
    """

    def __init__(self, speed: float = 5.0, period: float = 1.0, boundary: float = 20.0,
                 seed: Optional[int] = None):
        self.speed = _positive('target_speed', speed)
        self.period = _positive('target_period', period)
        self.boundary = _positive('target_boundary', boundary)
        self._rng = np.random.default_rng(seed)
        self._next_change = -math.inf
        self._velocity = np.zeros(3)

    def desired_velocity(self, t: float, position) -> np.ndarray:
        if t >= self._next_change - 1e-9:
            x, y = float(position[0]), float(position[1])
            if max(abs(x), abs(y)) > self.boundary:
                heading = math.atan2(-y, -x)
            else:
                heading = self._rng.uniform(0.0, 2.0 * math.pi)
            self._velocity = np.array([self.speed * math.cos(heading),
                                       self.speed * math.sin(heading), 0.0])
            start = self._next_change if math.isfinite(self._next_change) else t
            self._next_change = max(start, t - self.period) + self.period
        return self._velocity.copy()


class Waypoints:
    """
    A polyline of XY(Z) waypoints, optionally with arrival times.

    Without ``arrival_times`` the target heads for each waypoint in turn at ``speed`` and stops
    at the last one (slowing down proportionally within ``speed/POSITION_GAIN`` of it). With
    ``arrival_times`` (one per waypoint, strictly increasing, the first being when the target
    is at ``points[0]``) it tracks the timed piecewise-linear reference: feed-forward segment
    velocity plus ``POSITION_GAIN`` times the position error, capped at ``speed``. A segment
    that would need more than ``speed`` raises ``ValueError``.
    """

    def __init__(self, points: Sequence[Sequence[float]],
                 arrival_times: Optional[Sequence[float]] = None, speed: float = 5.0):
        check_waypoint_count(points)
        try:
            pts = np.array(points, dtype=float)
        except (TypeError, ValueError):  # ragged, or text: numpy's words would not say which
            raise waypoints_error(points) from None
        if pts.ndim != 2 or pts.shape[0] < 1 or pts.shape[1] not in (2, 3):
            raise waypoints_error(points)
        if not np.all(np.isfinite(pts)):
            raise ValueError(f'waypoints must be finite, got {pts.tolist()}')
        if pts.shape[1] == 2:
            pts = np.hstack((pts, np.zeros((pts.shape[0], 1))))
        self.points = pts
        self.speed = _positive('target_speed', speed)
        self.arrival_times = None
        self._index = 0
        if arrival_times is not None:
            times = np.array(arrival_times, dtype=float).reshape(-1)
            if times.size != pts.shape[0]:
                raise ValueError(f'arrival_times needs one time per waypoint ({pts.shape[0]}), '
                                 f'got {times.size}')
            if not np.all(np.isfinite(times)) or times[0] < 0.0:
                raise ValueError(f'arrival_times must be finite and >= 0, got {times.tolist()}')
            for k in range(1, times.size):
                dt = times[k] - times[k - 1]
                dist = float(np.linalg.norm(pts[k] - pts[k - 1]))
                if dt <= 0.0:
                    raise ValueError(f'arrival_times must increase strictly: waypoint {k} at '
                                     f't={times[k]:g} s is not after t={times[k - 1]:g} s')
                if dist > self.speed * dt * (1.0 + 1e-9):
                    raise ValueError(
                        f'waypoint {k} {pts[k].tolist()} cannot be reached at t={times[k]:g} s: '
                        f'{dist:g} m in {dt:g} s needs {dist / dt:g} m/s > speed '
                        f'{self.speed:g} m/s'
                    )
            self.arrival_times = times

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Return the timed mode's (reference position, feed-forward velocity) at ``t``."""
        times, pts = self.arrival_times, self.points
        if t <= times[0]:
            return pts[0].copy(), np.zeros(3)
        if t >= times[-1]:
            return pts[-1].copy(), np.zeros(3)
        k = int(np.searchsorted(times, t, side='right'))
        seg_v = (pts[k] - pts[k - 1]) / (times[k] - times[k - 1])
        return pts[k - 1] + seg_v * (t - times[k - 1]), seg_v

    def desired_velocity(self, t: float, position) -> np.ndarray:
        p = np.asarray(position, dtype=float)
        if self.arrival_times is not None:
            ref, feed_forward = self.reference(t)
            return _limit_xy(feed_forward + POSITION_GAIN * (ref - p), self.speed)
        last = self.points.shape[0] - 1
        while (self._index < last
               and np.linalg.norm(self.points[self._index] - p) <= ARRIVAL_RADIUS):
            self._index += 1
        error = self.points[self._index] - p
        if self._index < last:
            norm = float(np.linalg.norm(error))
            return error * (self.speed / norm) if norm > 0.0 else np.zeros(3)
        return _limit_xy(POSITION_GAIN * error, self.speed)


class Circle:
    """
    A target that turns steadily: ``speed`` m/s on a circle of radius ``radius`` m.

    The desired velocity turns counter-clockwise at ``speed / radius`` rad/s from +x at t = 0
    (the target starts at the origin; the circle's centre is ``radius`` m along +y).
    """

    def __init__(self, speed: float = 5.0, radius: float = 20.0):
        self.speed = _positive('target_speed', speed)
        self.rate = self.speed / _positive('target_boundary', radius)

    def desired_velocity(self, t: float, position) -> np.ndarray:
        heading = self.rate * t
        return np.array([self.speed * math.cos(heading), self.speed * math.sin(heading), 0.0])


# The one registry of motion models: name -> factory taking the settings a model may use
# (speed, period, boundary, waypoints, arrival_times, seed). Names are derived from it.
TARGET_MOTION_MODELS: Mapping[str, Callable[..., TargetMotion]] = {
    'static': lambda **_: Static(),
    'random': lambda speed, period, boundary, seed, **_: RandomHeading(
        speed, period, boundary, seed),
    'waypoints': lambda waypoints, arrival_times, speed, **_: Waypoints(
        waypoints, arrival_times, speed),
    'circle': lambda speed, boundary, **_: Circle(speed, boundary),
}
TARGET_MOTIONS = tuple(TARGET_MOTION_MODELS)


def make_target_motion(name: str, **settings) -> TargetMotion:
    """Return a new ``name`` model from :data:`TARGET_MOTION_MODELS`; ``ValueError`` if unknown."""
    if name not in TARGET_MOTION_MODELS:
        raise ValueError(f'target_motion must be one of {", ".join(TARGET_MOTIONS)}, '
                         f'got {name!r}')
    return TARGET_MOTION_MODELS[name](**settings)


@dataclass(frozen=True)
class TargetMotionSettings:
    """
    The target's motion settings, defined once for a :class:`Scenario` and ``target_node``.

    Both inherit these fields, so a scenario's ``target_speed`` is the node's ``target_speed``
    parameter, the ``--target-speed`` option and a sweep grid name, with one description, unit
    and rule. Where the waypoints come from differs (a scenario's list of points, the node's
    flat parameter), so :meth:`motion_model` takes them.
    """

    target_motion: str = setting('static', 'target motion model', choices=TARGET_MOTIONS)
    target_speed: float = setting(5.0, 'target speed (random) or speed limit (waypoints)', 'm/s',
                                  0.0, strict=True)
    target_period: float = setting(1.0, 'heading change period of the random target', 's', 0.0,
                                   strict=True)
    target_boundary: float = setting(20.0, 'the random target steers home beyond |x| or |y| of '
                                     'this; the circle target turns on a circle of this '
                                     'radius', 'm', 0.0, strict=True)

    def motion_model(self, waypoints, arrival_times, seed: Optional[int]) -> TargetMotion:
        """
        Return a fresh motion model of these settings.

        ``waypoints``: points of x, y(, z); ``seed``: the run's seed (None = unseeded), from
        which the random model draws on its own stream.
        """
        return make_target_motion(
            self.target_motion, speed=self.target_speed, period=self.target_period,
            boundary=self.target_boundary, waypoints=waypoints, arrival_times=arrival_times,
            seed=None if seed is None else [seed, 0, TARGET_MOTION_STREAM])

    def motion_start(self, waypoints, arrival_times) -> np.ndarray:
        """Return where the target starts: the first waypoint, or the origin."""
        if self.target_motion == 'waypoints':
            return self.motion_model(waypoints, arrival_times, None).points[0].copy()
        return np.zeros(3)
