"""
Identify the velocity model's limits from a recorded flight (pure: numpy and scipy, no rclpy).

A :class:`Flight` is what a recording gives per vehicle: the commanded world-frame velocity at
each command's arrival, and the measured world-frame velocity at each odometry sample. The fit
simulates this package's own model (:func:`velocity_mobility_ros.core.model.step`'s velocity
path, built from its own ``saturate`` and ``apply_velocity_limits``, stepped on ``sim_dt``) on
the recorded commands and minimises the velocity error at the odometry samples with
``scipy.optimize.least_squares``, over

- ``tau_xy``, ``max_acc_xy``, ``max_speed_xy`` and their z counterparts (``VehicleParams``);
- a pure transport delay between a command and its effect (not a model parameter: the
  simulators have none; it is reported so that the limits are not bent to absorb it).

Timing: step ``k`` of the simulation (from ``t_(k-1)`` to ``t_k``) applies the mean, over the
step, of the held commands shifted by the delay, so a command that takes effect mid-step drives
the step for the fraction after it: neither a command's arrival nor the delay is rounded to the
step grid (rounding them cost up to a step of delay, traded against the acceleration limits).
A command arriving on a step boundary with a delay of whole steps drives the whole next step,
the mobility node's own timing. The error is continuous in the delay. The simulation starts
from the first odometry sample at or after the first command (the measured velocity), and the
command before the first one is taken to be the first one. The search starts from a scan of
the delay over its whole range (one vectorised pass), each plane's lag fast or slow.

The first ``1 - holdout`` of each flight is fitted; the rest is held out and scored (RMSE of the
velocity, R^2). Each estimate has an interval, ``value -+ (COVERAGE_Z std + systematic)``:
``std`` is the sandwich standard deviation robust to residuals correlated in time (Newey-West
over ``HAC_BANDWIDTH`` of per-sample scores; never below the white-noise one), ``systematic``
the model mismatch that no resampling of one flight shows (half a step for the delay,
``MODEL_MISMATCH`` of the value for the limits). On independent continuous-time flights the
interval covered the truth where the error reached 4 white-noise standard deviations
``s^2 (J^T J)^-1`` (``std_white``; on one recorded flight, 100 of them). A limit the flight never
reached leaves the error flat in it: such a parameter is reported *unidentifiable* (no value),
never guessed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import math
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import least_squares

from velocity_mobility_ros.core.geometry import saturate
from velocity_mobility_ros.core.model import apply_velocity_limits
from velocity_mobility_ros.core.vehicle import VehicleParams

AXES = ('xy', 'z')
PLANE_PARAMS = {'xy': ('tau_xy', 'max_acc_xy', 'max_speed_xy'),
                'z': ('tau_z', 'max_acc_z', 'max_speed_z')}
PARAM_NAMES = PLANE_PARAMS['xy'] + PLANE_PARAMS['z']
DELAY = 'delay'
UNITS = {'tau_xy': 's', 'tau_z': 's', 'max_acc_xy': 'm/s^2', 'max_acc_z': 'm/s^2',
         'max_speed_xy': 'm/s', 'max_speed_z': 'm/s', DELAY: 's'}
MAX_DELAY = 1.0           # s, upper bound of the fitted transport delay
MIN_MOTION = 0.1          # m/s: below this peak (commanded or measured) a plane never moved
MIN_DURATION = 5.0        # s of flight (commands and odometry together) needed for a fit
MIN_SAMPLES = 50          # odometry samples needed in the fitted part, and 10 in the held-out
MAX_RELATIVE_STD = 0.25   # a parameter known worse than this is reported unidentifiable
MIN_BINDING = 0.5         # s: a limit that bound for less than this in the fitted part is not
BINDING_MARGIN = 0.05     # identified; it binds when asked for 5 % more than it allows
DEFAULT_HOLDOUT = 0.3
HAC_BANDWIDTH = 2.0       # s: residuals further apart than this are taken as uncorrelated
COVERAGE_Z = 2.0          # the interval: value -+ (COVERAGE_Z std + systematic)
MODEL_MISMATCH = 0.02     # relative systematic term of the limits and taus (see the docs)


class FitError(ValueError):
    """Input that cannot be fitted; the message is one line for the user."""


@dataclass(frozen=True)
class Flight:
    """One vehicle's recording, world ENU frame, times in seconds on one clock."""

    name: str
    cmd_t: np.ndarray    # (K,) arrival time of each command
    cmd_v: np.ndarray    # (K, 3) commanded velocity
    odom_t: np.ndarray   # (M,) odometry sample time
    odom_v: np.ndarray   # (M, 3) measured velocity

    def window(self, start: float | None, end: float | None) -> 'Flight':
        """Return the part from ``start`` to ``end`` (the command in force at ``start`` kept)."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        keep_cmd = self.cmd_t <= hi
        # the newest command before the window is still in force at its start
        before = np.flatnonzero(self.cmd_t < lo)
        if before.size:
            keep_cmd &= np.arange(self.cmd_t.size) >= before[-1]
        keep_odom = (self.odom_t >= lo) & (self.odom_t <= hi)
        return Flight(self.name, self.cmd_t[keep_cmd], self.cmd_v[keep_cmd],
                      self.odom_t[keep_odom], self.odom_v[keep_odom])


@dataclass(frozen=True)
class Estimate:
    """
    One fitted quantity (None: unidentifiable).

    ``std``: one standard deviation robust to residuals correlated in time; ``low``/``high``:
    the interval, ``value -+ (COVERAGE_Z std + systematic)``; ``std_white``: the standard
    deviation as if the residuals were white noise (``s^2 (J^T J)^-1``, far too small on a
    real flight, kept for comparison).
    """

    value: float | None
    std: float | None
    reason: str = ''   # why it is unidentifiable
    low: float | None = None
    high: float | None = None
    std_white: float | None = None
    systematic: float | None = None

    @property
    def half_width(self) -> float | None:
        return None if self.high is None else 0.5 * (self.high - self.low)

    @property
    def identified(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Score:
    """Fit quality of the velocity on a set of odometry samples."""

    rmse: float          # m/s, over every fitted velocity component
    r2: float            # 1 - SS_res / SS_tot, components about their own means
    rmse_xy: float | None
    rmse_z: float | None
    samples: int


@dataclass(frozen=True)
class FitResult:
    """A fit of one vehicle, or of several pooled (one set of parameters for all)."""

    vehicles: tuple[str, ...]
    axes: tuple[str, ...]
    estimates: Mapping[str, Estimate]          # PARAM_NAMES of the fitted axes + DELAY
    before: Mapping[str, Score]                # 'train' / 'holdout': the starting model
    after: Mapping[str, Score]                 # the same with the fitted parameters
    start_params: VehicleParams
    sim_dt: float
    iterations: int
    notes: tuple[str, ...] = ()

    def vehicle_params(self) -> VehicleParams:
        """Return the starting parameters with every identified limit replaced by its fit."""
        changes = {name: est.value for name, est in self.estimates.items()
                   if name in PARAM_NAMES and est.identified}
        return self.start_params.with_changes(**changes)

    def identified(self) -> dict[str, float]:
        return {name: est.value for name, est in self.estimates.items() if est.identified}

    def unidentifiable(self) -> dict[str, str]:
        return {name: est.reason for name, est in self.estimates.items() if not est.identified}


@dataclass
class _Prepared:
    """A flight on the simulation grid: commands in force per step, samples to compare."""

    flight: Flight
    t0: float
    cmd_t: np.ndarray          # (C,) command arrival times relative to t0
    cmd_v: np.ndarray          # (C, 3)
    cmd_int: np.ndarray        # (C, 3): integral of the held commands from cmd_t[0] to cmd_t
    dt: float
    steps: int                 # K
    odom_t: np.ndarray         # (M,) relative to t0
    odom_v: np.ndarray         # (M, 3)
    v0: np.ndarray             # (3,)
    train: np.ndarray          # (M,) bool
    holdout: np.ndarray        # (M,) bool
    extra: dict = field(default_factory=dict)


def simulate_velocity(u: np.ndarray, v0: np.ndarray, params: Mapping[str, np.ndarray],
                      dt: float, bound: dict | None = None) -> np.ndarray:
    """
    Simulate the model's velocity under ``u`` (R, K, 3) from ``v0`` (R, 3): (R, K+1, 3).

    Row ``r`` uses its own limits ``params[name][r]`` (``PARAM_NAMES``; tau > 0). Step for step
    :func:`velocity_mobility_ros.core.model.step` with braking and jerk limits off (the
    velocity path does not depend on position or heading), vectorised over rows so that the
    fit simulates every trial set of parameters in one pass. ``bound``, when given, receives
    per row the number of steps each acceleration and speed limit bound (clamped the step).
    """
    if bound is not None:
        return _simulate_counting(u, v0, params, dt, bound)
    rows, steps = u.shape[0], u.shape[1]
    commands = np.ascontiguousarray(np.moveaxis(np.asarray(u, dtype=float), 0, -1))  # K, 3, R
    v = np.array(np.asarray(v0, dtype=float).T)                                      # 3, R
    out = np.empty((steps + 1, 3, rows))
    out[0] = v
    gain = np.empty((3, rows))
    gain[:2] = dt / np.asarray(params['tau_xy'], dtype=float)
    gain[2] = dt / np.asarray(params['tau_z'], dtype=float)
    lim_xy = np.asarray(params['max_acc_xy'], dtype=float) * dt
    lim_z = np.asarray(params['max_acc_z'], dtype=float) * dt
    speed_xy = np.asarray(params['max_speed_xy'], dtype=float) * np.ones(rows)
    speed_z = np.asarray(params['max_speed_z'], dtype=float) * np.ones(rows)
    lim_xy, lim_z = lim_xy * np.ones(rows), lim_z * np.ones(rows)
    change, norm, scale = np.empty((3, rows)), np.empty(rows), np.empty(rows)
    vx, vy, vz = v
    cx, cy, cz = change
    neg_lim_z, neg_speed_z = -lim_z, -speed_z
    mul, hypot, minimum, maximum = np.multiply, np.hypot, np.minimum, np.maximum

    def saturate(x, y, z, limit_xy, limit_z, neg_limit_z):
        """geometry.saturate in place: the xy norm to limit_xy, z to +-limit_z."""
        hypot(x, y, out=norm)
        maximum(norm, 1e-300, out=norm)
        np.divide(limit_xy, norm, out=scale)
        minimum(scale, 1.0, out=scale)
        mul(x, scale, out=x)
        mul(y, scale, out=y)
        minimum(z, limit_z, out=z)
        maximum(z, neg_limit_z, out=z)

    for k in range(steps):
        # the model's step (the change, then the velocity, saturated), written for speed:
        # (x, y, z) x rows
        np.subtract(commands[k], v, out=change)
        mul(change, gain, out=change)
        saturate(cx, cy, cz, lim_xy, lim_z, neg_lim_z)
        np.add(v, change, out=v)
        saturate(vx, vy, vz, speed_xy, speed_z, neg_speed_z)
        out[k + 1] = v
    return np.moveaxis(out, -1, 0)


def _simulate_counting(u, v0, params, dt, bound) -> np.ndarray:
    """:func:`simulate_velocity` that also counts the steps each limit bound (slower)."""
    rows, steps = u.shape[0], u.shape[1]
    v = np.array(v0, dtype=float)
    out = np.empty((rows, steps + 1, 3))
    out[:, 0] = v
    tau_xy = np.asarray(params['tau_xy'], dtype=float)[:, None]
    tau_z = np.asarray(params['tau_z'], dtype=float)
    lim_xy = np.asarray(params['max_acc_xy'], dtype=float) * dt
    lim_z = np.asarray(params['max_acc_z'], dtype=float) * dt
    speed_xy = np.asarray(params['max_speed_xy'], dtype=float)
    speed_z = np.asarray(params['max_speed_z'], dtype=float)
    for k in range(steps):
        change = u[:, k] - v
        change[:, :2] /= tau_xy
        change[:, :2] *= dt
        change[:, 2] /= tau_z
        change[:, 2] *= dt
        _count_binding(bound, u[:, k], change, v, lim_xy, lim_z, speed_xy, speed_z)
        change = saturate(change, lim_xy, lim_z)
        v = apply_velocity_limits(v + change, speed_xy, speed_z)
        out[:, k + 1] = v
    return out


def _count_binding(bound, u, change, v, lim_xy, lim_z, speed_xy, speed_z) -> None:
    """
    Add this step's binding limits to ``bound`` (name -> (R,) step counts).

    A limit binds when what was asked exceeds it by ``BINDING_MARGIN``: the desired change for
    an acceleration limit, the command for a speed limit (with the speed at the limit). A
    limit just under the commanded speed is no different from no limit at all.
    """
    limited = saturate(change, lim_xy, lim_z)
    rows = change.shape[0]
    over = 1.0 + BINDING_MARGIN
    for name, hit in (
            ('max_acc_xy', np.hypot(change[:, 0], change[:, 1]) > lim_xy * over),
            ('max_acc_z', np.abs(change[:, 2]) > lim_z * over),
            ('max_speed_xy', (np.hypot(u[:, 0], u[:, 1]) > speed_xy * over)
             & (np.hypot(v[:, 0] + limited[:, 0], v[:, 1] + limited[:, 1]) > speed_xy)),
            ('max_speed_z', (np.abs(u[:, 2]) > speed_z * over)
             & (np.abs(v[:, 2] + limited[:, 2]) > speed_z))):
        bound[name] = bound.get(name, np.zeros(rows)) + hit


def score(sim: np.ndarray, measured: np.ndarray, axes: Sequence[str]) -> Score:
    """RMSE and R^2 of simulated against measured velocities (M, 3) on the ``axes`` components."""
    cols = _columns(axes)
    if measured.shape[0] == 0:
        nan = float('nan')
        return Score(nan, nan, None, None, 0)
    err = sim[:, cols] - measured[:, cols]
    ss_res = float(np.sum(err ** 2))
    ss_tot = float(np.sum((measured[:, cols] - measured[:, cols].mean(axis=0)) ** 2))
    rmse_xy = (float(np.sqrt(np.mean(np.sum((sim[:, :2] - measured[:, :2]) ** 2, axis=1))))
               if 'xy' in axes else None)
    rmse_z = float(np.sqrt(np.mean((sim[:, 2] - measured[:, 2]) ** 2))) if 'z' in axes else None
    return Score(float(np.sqrt(ss_res / err.size)),
                 1.0 - ss_res / ss_tot if ss_tot > 0.0 else float('nan'),
                 rmse_xy, rmse_z, int(measured.shape[0]))


def moving_planes(flight: Flight) -> dict[str, float]:
    """
    How far each plane moved: the smaller of the peak commanded and measured speeds [m/s].

    xy norm and abs z; the measured velocity averaged over 11 samples first, so that odometry
    noise alone does not look like motion. A plane below ``MIN_MOTION`` never moved.
    """
    peaks = {}
    smooth = (np.stack([_smooth(flight.odom_v[:, c], 11) for c in range(3)], axis=1)
              if flight.odom_v.size else np.zeros((1, 3)))
    for plane, cols in (('xy', slice(0, 2)), ('z', slice(2, 3))):
        cmd = np.linalg.norm(flight.cmd_v[:, cols], axis=1) if flight.cmd_v.size else [0.0]
        meas = np.linalg.norm(smooth[:, cols], axis=1)
        peaks[plane] = float(min(np.max(cmd), np.max(meas)))
    return peaks


def fit(flights: Sequence[Flight], axes: Sequence[str] = AXES, *,
        start: VehicleParams | None = None, holdout: float = DEFAULT_HOLDOUT,
        max_delay: float = MAX_DELAY) -> FitResult:
    """
    Fit one set of limits (and a delay) to ``flights`` (one vehicle, or several pooled).

    ``start`` (default ``VehicleParams()``) gives ``sim_dt``, the parameters of the axes not
    fitted and the "before" model. Raises :class:`FitError` (one line) for unusable input.
    """
    start = start or VehicleParams()
    dt = start.sim_dt
    axes = tuple(a for a in AXES if a in axes)
    if not axes:
        raise FitError(f'axes must name xy and/or z, got {list(axes)}')
    notes = []
    moving = {a: max(moving_planes(f)[a] for f in flights) for a in axes}
    fitted_axes = tuple(a for a in axes if moving[a] >= MIN_MOTION)
    for plane in axes:
        if plane not in fitted_axes:
            notes.append(f'{plane} never moved (peak {moving[plane]:.3g} m/s): '
                         f'{", ".join(PLANE_PARAMS[plane])} unidentifiable')
    if not fitted_axes:
        names = ', '.join(f.name for f in flights)
        unident = ', '.join(n for a in axes for n in PLANE_PARAMS[a]) + ', delay'
        raise FitError(f'{names} never moved (commanded or measured peak speed below '
                       f'{MIN_MOTION} m/s on {" and ".join(axes)}): nothing to identify; '
                       f'{unident} unidentifiable')
    prepared = [_prepare(f, dt, holdout) for f in flights]
    names = [n for a in fitted_axes for n in PLANE_PARAMS[a]]
    x0, lower, upper = _initial(prepared, names, start, dt, max_delay)
    fixed = {n: getattr(start, n) for n in PARAM_NAMES}

    def residuals(x):
        return _residuals(prepared, _rows(x[None, :], names, fixed), fitted_axes, dt,
                          'train')[0]

    def jacobian(x):
        steps = np.maximum(np.abs(x) * 1e-3, 1e-6)
        steps[-1] = 0.25 * dt
        trial = np.repeat(x[None, :], 2 * x.size, axis=0)
        for i in range(x.size):
            up = min(x[i] + steps[i], upper[i])
            down = max(x[i] - steps[i], lower[i])
            trial[2 * i, i], trial[2 * i + 1, i] = up, down
        res = _residuals(prepared, _rows(trial, names, fixed), fitted_axes, dt, 'train')
        jac = np.empty((res.shape[1], x.size))
        for i in range(x.size):
            width = trial[2 * i, i] - trial[2 * i + 1, i]
            jac[:, i] = (res[2 * i] - res[2 * i + 1]) / width if width > 0 else 0.0
        return jac

    best = None
    # A second start from a slow lag only when the first leaves the error well above the noise
    # (an acceleration limit can mimic a slow lag).
    for x_init in _starts(prepared, names, fixed, fitted_axes, x0, dt, max_delay):
        sol = least_squares(residuals, x_init, jac=jacobian, bounds=(lower, upper),
                            x_scale='jac', xtol=1e-5, ftol=1e-6, gtol=1e-8, max_nfev=100)
        if best is None or sol.cost < best.cost:
            best = sol
        if _r2(best.fun, prepared, fitted_axes) >= 0.98:
            break
    sol = best
    estimates = _estimates(sol, names, lower, upper, fitted_axes, axes,
                           _binding_seconds(prepared, _rows(sol.x[None, :], names, fixed), dt),
                           prepared, dt)
    fitted = _rows(sol.x[None, :], names, fixed)
    start_rows = _rows(np.append([getattr(start, n) for n in names], 0.0)[None, :], names,
                       fixed)
    before = {part: _score(prepared, start_rows, fitted_axes, dt, part)
              for part in ('train', 'holdout')}
    after = {part: _score(prepared, fitted, fitted_axes, dt, part)
             for part in ('train', 'holdout')}
    return FitResult(tuple(f.name for f in flights), fitted_axes, estimates, before, after,
                     start, dt, int(sol.nfev), tuple(notes))


def predict(flight: Flight, params: VehicleParams, delay: float = 0.0,
            holdout: float = DEFAULT_HOLDOUT) -> dict[str, np.ndarray]:
    """
    Simulate ``params`` (and ``delay``) on ``flight``'s commands.

    Returns ``t`` (odometry times), ``measured`` and ``simulated`` (M, 3) and ``holdout`` (M,)
    bool, for plots.
    """
    dt = params.sim_dt
    prep = _prepare(flight, dt, holdout, check=False)
    rows = {n: np.array([getattr(params, n)]) for n in PARAM_NAMES}
    rows[DELAY] = np.array([delay])
    sim = _simulate_at_samples([prep], rows, dt)[0][0]
    return {'t': prep.odom_t + prep.t0, 'measured': prep.odom_v, 'simulated': sim,
            'holdout': prep.holdout}


def _columns(axes: Sequence[str]) -> list[int]:
    return ([0, 1] if 'xy' in axes else []) + ([2] if 'z' in axes else [])


def _smooth(values: np.ndarray, width: int = 5) -> np.ndarray:
    if values.size < width:
        return values
    return np.convolve(values, np.ones(width) / width, mode='valid')


def _prepare(flight: Flight, dt: float, holdout: float, check: bool = True) -> _Prepared:
    if flight.cmd_t.size == 0:
        raise FitError(f'{flight.name}: no commands in the window')
    odom_after = np.flatnonzero(flight.odom_t >= flight.cmd_t[0])
    if odom_after.size == 0:
        raise FitError(f'{flight.name}: no odometry after the first command')
    t0 = float(flight.odom_t[odom_after[0]])
    odom_t = flight.odom_t[odom_after] - t0
    odom_v = flight.odom_v[odom_after]
    duration = float(odom_t[-1]) if odom_t.size else 0.0
    split = (1.0 - holdout) * duration
    train = odom_t <= split
    held = ~train
    if check and (duration < MIN_DURATION or train.sum() < MIN_SAMPLES or held.sum() < 10):
        raise FitError(f'{flight.name}: too short a flight: {duration:.2f} s and '
                       f'{odom_t.size} odometry samples after the first command (need >= '
                       f'{MIN_DURATION:g} s and {MIN_SAMPLES} samples in the fitted part)')
    steps = int(math.ceil(duration / dt - 1e-9)) + 1
    cmd_t = flight.cmd_t - t0
    cmd_int = np.zeros_like(flight.cmd_v, dtype=float)
    np.cumsum(flight.cmd_v[:-1] * np.diff(cmd_t)[:, None], axis=0, out=cmd_int[1:])
    return _Prepared(flight, t0, cmd_t, flight.cmd_v, cmd_int, dt, steps, odom_t, odom_v,
                     odom_v[0].copy(), train, held)


def _step_commands(p: _Prepared, delays: np.ndarray, steps: int) -> np.ndarray:
    """
    Return the command each step applies, per delay: (R, steps, 3).

    Step ``k`` (from ``(k-1) dt`` to ``k dt`` after ``t0``) applies the mean over the step of
    the held commands, delayed: a command that takes effect mid-step drives the step for the
    fraction after it, so neither its arrival nor the delay is rounded to the step. A command
    that arrives on a step boundary with a delay of whole steps gives the mobility node's own
    timing (it drives the whole step after it). Before the first command, the first one.
    """
    times = np.arange(steps + 1)[None, :] * p.dt - np.asarray(delays, dtype=float)[:, None]
    index = np.searchsorted(p.cmd_t, times, side='right') - 1
    np.maximum(index, 0, out=index)
    integral = p.cmd_int[index] + p.cmd_v[index] * (times - p.cmd_t[index])[..., None]
    return np.diff(integral, axis=1) / p.dt


def _rows(x: np.ndarray, names: Sequence[str], fixed: Mapping[str, float]) -> dict:
    """Per-row parameter arrays from trial vectors ``x`` (R, len(names) + 1; last = delay)."""
    rows = {n: np.full(x.shape[0], float(fixed[n])) for n in PARAM_NAMES}
    for i, n in enumerate(names):
        rows[n] = x[:, i].astype(float)
    rows[DELAY] = x[:, -1].astype(float)
    return rows


def _simulate_at_samples(prepared: Sequence[_Prepared], rows: Mapping[str, np.ndarray],
                         dt: float, part: str | None = None) -> list[np.ndarray]:
    """
    Each flight simulated under every row: a list of (R, M, 3) at its odometry times.

    With ``part`` ('train'), only as far as that part's last sample: the other samples' values
    are then meaningless.
    """
    n_rows = rows[DELAY].shape[0]
    if part is None:
        steps = max(p.steps for p in prepared)
    else:
        steps = max(min(p.steps, int(math.ceil(p.odom_t[getattr(p, part)][-1] / dt)) + 1)
                    for p in prepared)
    u = np.empty((n_rows * len(prepared), steps, 3))
    v0 = np.empty((n_rows * len(prepared), 3))
    for j, p in enumerate(prepared):
        # past its end a flight holds its last command (unscored)
        block = slice(j * n_rows, (j + 1) * n_rows)
        u[block] = _step_commands(p, rows[DELAY], steps)
        v0[block] = p.v0
    params = {n: np.tile(rows[n], len(prepared)) for n in PARAM_NAMES}
    sim = simulate_velocity(u, v0, params, dt)
    out = []
    for j, p in enumerate(prepared):
        block = sim[j * n_rows:(j + 1) * n_rows]
        pos = np.clip(p.odom_t / dt, 0.0, steps - 1e-9)
        lo = np.floor(pos).astype(int)
        w = (pos - lo)[None, :, None]
        out.append((1.0 - w) * block[:, lo] + w * block[:, lo + 1])
    return out


def _residuals(prepared, rows, axes, dt, part) -> np.ndarray:
    """(R, n) residuals of every row on the ``part`` samples of every flight."""
    cols = _columns(axes)
    sims = _simulate_at_samples(prepared, rows, dt, part)
    parts = []
    for p, sim in zip(prepared, sims):
        mask = getattr(p, part)
        parts.append((sim[:, mask][:, :, cols] - p.odom_v[mask][:, cols]).reshape(
            sim.shape[0], -1))
    return np.concatenate(parts, axis=1)


def _score(prepared, rows, axes, dt, part) -> Score:
    sims = _simulate_at_samples(prepared, rows, dt)
    sim = np.concatenate([s[0][getattr(p, part)] for p, s in zip(prepared, sims)])
    meas = np.concatenate([p.odom_v[getattr(p, part)] for p in prepared])
    return score(sim, meas, axes)


def _initial(prepared, names, start, dt, max_delay):
    """Return the starting point and bounds from the data: speeds and accelerations seen."""
    peak_speed = {'xy': 0.0, 'z': 0.0}
    peak_acc = {'xy': 0.0, 'z': 0.0}
    for p in prepared:
        v = p.odom_v
        for plane, cols in (('xy', slice(0, 2)), ('z', slice(2, 3))):
            speed = _smooth(np.linalg.norm(v[:, cols], axis=1))
            peak_speed[plane] = max(peak_speed[plane], float(np.max(speed, initial=0.0)))
            # the slope over 0.2 s of the velocity averaged over 0.2 s: a ramp at the
            # acceleration limit lasts longer than that, the noise averages out
            period = float(np.median(np.diff(p.odom_t))) if v.shape[0] > 1 else 1.0
            width = max(3, int(round(0.2 / max(period, 1e-6))))
            if v.shape[0] > 3 * width:
                smooth = np.stack([_smooth(v[:, c], width) for c in range(3)], axis=1)
                t = _smooth(p.odom_t, width)
                dv = (smooth[width:, cols] - smooth[:-width, cols]) / np.maximum(
                    t[width:] - t[:-width], 1e-6)[:, None]
                acc = np.linalg.norm(dv, axis=1)
                peak_acc[plane] = max(peak_acc[plane], float(np.percentile(acc, 99)))
    x0, lower, upper = [], [], []
    for n in names:
        plane = 'xy' if n.endswith('xy') else 'z'
        if n.startswith('tau'):
            x0.append(0.5)
            lower.append(1.5 * dt)
            upper.append(20.0)
        elif n.startswith('max_acc'):
            x0.append(min(max(peak_acc[plane], 0.5), 99.0))
            lower.append(0.01)
            upper.append(100.0)
        else:
            x0.append(min(max(1.05 * peak_speed[plane], 0.1), 99.0))
            lower.append(0.01)
            upper.append(100.0)
    x0.append(0.5 * min(max_delay, 0.1))
    lower.append(0.0)
    upper.append(max_delay)
    return np.array(x0), np.array(lower), np.array(upper)


def _starts(prepared, names, fixed, axes, x0, dt, max_delay) -> list[np.ndarray]:
    """
    Return the starting points: each plane's lag fast or slow, with the delay fitting best.

    The delay is scanned every 20 ms over its whole range in one vectorised pass (the error
    has local minima where a shorter delay and a lower acceleration limit trade off); each
    plane takes the lag (0.5 or 2 s) that fits it better at that delay. The second start
    swaps every plane's lag.
    """
    delays = np.arange(0.0, max_delay + 1e-9, 0.02)
    taus = (0.5, 2.0)
    trial = np.repeat(x0[None, :], len(taus) * delays.size, axis=0)
    trial[:, -1] = np.tile(delays, len(taus))
    for i, n in enumerate(names):
        if n.startswith('tau'):
            trial[:, i] = np.repeat([max(t, 2.0 * dt) for t in taus], delays.size)
    res = _residuals(prepared, _rows(trial, names, fixed), axes, dt, 'train')
    cols = _columns(axes)
    res = res.reshape(len(taus), delays.size, -1, len(cols)) ** 2
    plane_cost = {'xy': res[..., :2].sum(axis=(2, 3)) if 'xy' in axes else 0.0,
                  'z': res[..., -1].sum(axis=2) if 'z' in axes else 0.0}
    best_tau = {a: np.argmin(plane_cost[a], axis=0) for a in axes}   # per delay
    total = sum(np.min(plane_cost[a], axis=0) for a in axes)
    k = int(np.argmin(total))
    out = []
    for swap in (0, 1):
        x = x0.copy()
        x[-1] = delays[k]
        for i, n in enumerate(names):
            if n.startswith('tau'):
                choice = best_tau['xy' if n.endswith('xy') else 'z'][k]
                x[i] = max(taus[choice ^ swap], 2.0 * dt)
        out.append(x)
    return out


def _r2(residual: np.ndarray, prepared, axes) -> float:
    cols = _columns(axes)
    meas = np.concatenate([p.odom_v[p.train][:, cols] for p in prepared])
    ss_tot = float(np.sum((meas - meas.mean(axis=0)) ** 2))
    return 1.0 - float(np.sum(residual ** 2)) / ss_tot if ss_tot > 0.0 else 0.0


def _binding_seconds(prepared, rows, dt) -> dict[str, float]:
    """Seconds each limit bound in the fitted parts of the flights, under ``rows`` (one row)."""
    total: dict[str, float] = {}
    for p in prepared:
        steps = max(1, int(round(float(p.odom_t[p.train][-1]) / dt)))
        u = _step_commands(p, rows[DELAY][:1], steps)
        bound: dict = {}
        simulate_velocity(u, p.v0[None], {n: rows[n][:1] for n in PARAM_NAMES}, dt, bound)
        for name, count in bound.items():
            total[name] = total.get(name, 0.0) + float(count[0]) * dt
    return total


def _robust_std(jac: np.ndarray, res: np.ndarray, prepared, n_cols: int,
                bandwidth: float = None) -> np.ndarray:
    """
    Return standard deviations robust to residuals correlated in time (active columns).

    The sandwich ``H^-1 S H^-1`` with ``H = J^T J`` and ``S`` the long-run covariance of the
    per-sample scores ``g_t = J_t^T r_t`` (Newey-West: Bartlett weights over ``bandwidth``
    seconds, within each flight).
    """
    bandwidth = HAC_BANDWIDTH if bandwidth is None else bandwidth
    p_count = jac.shape[1]
    scores = (jac * res[:, None]).reshape(-1, n_cols, p_count).sum(axis=1)
    s_mat = np.zeros((p_count, p_count))
    start = 0
    for p in prepared:
        n = int(p.train.sum())
        g = scores[start:start + n]
        start += n
        period = float(np.median(np.diff(p.odom_t[p.train]))) if n > 1 else 1.0
        lags = min(n - 1, int(round(bandwidth / max(period, 1e-9))))
        s_mat += g.T @ g
        for lag in range(1, lags + 1):
            cross = g[:-lag].T @ g[lag:]
            s_mat += (1.0 - lag / (lags + 1.0)) * (cross + cross.T)
    h_inv = np.linalg.pinv(jac.T @ jac)
    return np.sqrt(np.maximum(np.diag(h_inv @ s_mat @ h_inv), 0.0))


def _systematic(name: str, value: float, dt: float) -> float:
    """
    Return the part of the interval that no resampling of one flight shows: model mismatch.

    The delay: half a step (the model applies a command over whole steps, so where an
    acceleration limit binds the change starts up to a step early or late). The limits and
    taus: ``MODEL_MISMATCH`` of the value (the errors beyond ``COVERAGE_Z`` robust standard
    deviations on independent continuous-time flights stayed below it:
    docs/analyse/fit-mobility.md).
    """
    return 0.5 * dt if name == DELAY else MODEL_MISMATCH * abs(value)


def _estimates(sol, names, lower, upper, fitted_axes, axes,
               binding: Mapping[str, float], prepared=(), dt: float = 0.01
               ) -> dict[str, Estimate]:
    jac = sol.jac
    dof = max(sol.fun.size - sol.x.size, 1)
    s2 = 2.0 * sol.cost / dof
    norms = np.linalg.norm(jac, axis=0)
    flat = norms <= 1e-9 * max(norms.max(), 1e-300)
    active = ~flat
    std = np.full(sol.x.size, np.inf)
    white = np.full(sol.x.size, np.inf)
    if active.any():
        ja = jac[:, active]
        cov = np.linalg.pinv(ja.T @ ja) * s2
        white[active] = np.sqrt(np.maximum(np.diag(cov), 0.0))
        # never below the white-noise one (Bartlett weights can cancel negative correlations)
        std[active] = np.maximum(
            _robust_std(ja, sol.fun, prepared, len(_columns(fitted_axes))), white[active])
    out: dict[str, Estimate] = {}
    for i, n in enumerate(list(names) + [DELAY]):
        value, sd = float(sol.x[i]), float(std[i])
        reason = ''
        if flat[i]:
            reason = 'the error does not depend on it (the flight never reached this limit)'
        elif n != DELAY and (sd > MAX_RELATIVE_STD * abs(value)):
            reason = f'too uncertain ({value:.3g} +- {sd:.2g} {UNITS[n]})'
        elif n != DELAY and value >= 0.999 * upper[i]:
            reason = f'at the search bound {upper[i]:g} {UNITS[n]}'
        elif n in binding and binding[n] < MIN_BINDING:
            reason = (f'the flight never reached this limit (it bound for {binding[n]:.2f} s '
                      f'of the fitted part; {MIN_BINDING:g} s needed)')
        if reason:
            out[n] = Estimate(None, None, reason)
            continue
        systematic = _systematic(n, value, dt)
        half = COVERAGE_Z * sd + systematic
        out[n] = Estimate(value, sd, '', max(value - half, 0.0), value + half, float(white[i]),
                          systematic)
    for plane in axes:
        if plane not in fitted_axes:
            for n in PLANE_PARAMS[plane]:
                out[n] = Estimate(None, None, f'{plane} never moved')
    return out
