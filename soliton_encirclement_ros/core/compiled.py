"""
Where the batch engine's compiled tick (:mod:`core.kernels`, numba) applies, and its inputs.

The kernels cover the usual tick of a sweep: no simulated faults, every agent with a live
target, and the law's terms they mirror, the even-ring term (``k_e_ring``, its gate and its
ramp) included. The ``d_safe`` term is compiled too, for swarms of up to
``WITHIN_REACH_COLUMNS`` / 2 agents (a moving target's ring, within its reach all along, runs
compiled; a failed agent's vehicle with its rest point): a row with a vehicle within its
reach (``law.obstacle_reach``) runs the numpy path's scan only where it counts a silent
vehicle (a track, a disc), or in a larger swarm. The ring's gains (``ring_gains_from``) are
compiled too: a second law array and damping table, the step taken at both and blended.
Everything else (the ring's bulge ``obstacle_clearance`` or gap steering ``k_gap_steer`` set,
a field of ``ControllerParams`` this module does not know, numba missing or failing to
compile) runs the numpy path, tick by tick: the numpy path stays the definition, the kernels
a faster copy of its common case.

numba is imported on first use (a run that never steps a batch does not pay its import). Its
on-disk cache (:func:`cache_dir`) is named after a digest of the sources the kernels are built
from: numba's own cache checks only the file of each compiled function, while the kernels read
:mod:`core.law`'s constants and call each other's helpers across files, so an edit there would
otherwise load stale machine code. It goes under ``NUMBA_CACHE_DIR`` if set, else beside the
sources (``__pycache__/numba``) where writable, else ``~/.cache/soliton_encirclement_ros/numba``,
else the temporary directory. The environment variable ``SOLITON_COMPILED=0`` turns the kernels
off (the numpy path everywhere).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
from pathlib import Path
import shutil
import tempfile
from typing import Optional

import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    implicit_decay, omega_damping_gain, ring_size_share, u_bound, WITHIN_REACH_COLUMNS)

# The fields of ControllerParams the kernels read (through LAW_FIELDS and the tables) or that
# their path does not depend on (timeouts and liveness the caller applies, the d_safe term's
# silent vehicles, whose rows the numpy path steps). A field outside this set
# (a new term) sends every tick to the numpy path until the kernels learn it.
KNOWN_FIELDS = frozenset({
    'radius', 'k_r', 'k_dr', 'c_coupling', 'beta_u', 'alpha_u', 'k_e_tau', 'kappa_u_diff',
    'k_u_steepen', 'kappa_u_disp', 'k_tau', 'r_min', 'k_omega_damp', 'k_omega_damp_n',
    'k_omega_own', 'soft_limiter', 'u_lim', 'hysteresis', 'control_period', 'target_lead',
    'max_speed_xy', 'max_speed_z', 'altitude', 'k_z', 'k_e_ring', 'ring_ramp', 'ring_turn_acc',
    'ring_ramp_silent',
    # the ring's gains: ring_gains_from/full through LAW_FIELDS, the rest through the ring's
    # law array and damping table (ControlPlan.ring_law, ring_damping) and the fade by ring
    # size (ControlPlan.ring_fade)
    'ring_gains_from', 'ring_gains_full', 'k_tau_ring', 'k_e_tau_ring', 'k_omega_own_ring',
    'ring_turn_acc_ring',
    # the d_safe term (kernels._separation_row; d_safe and d_safe_share through the table of
    # safety_distance) and the reach test before it
    'd_safe', 'd_safe_share', 'v_safe', 't_safe', 'a_safe', 't_react',
    # applied by BatchControllers before the kernel, or only for silent vehicles and discs
    # (rows the numpy path steps)
    'hold_drift', 'silent_run_on', 'v_uncertain', 'obstacle_ramp', 'obstacle_lead',
    'agent_state_timeout', 'agent_timeout_floor', 'target_state_timeout', 'target_timeout',
    'odom_timeout',
    'max_future_stamp', 'prune_expired',
    # not covered when set (NOT_COVERED): the numpy path runs
    'obstacle_clearance', 'k_gap_steer',
})
# Terms the kernels do not compute: a run with any of these non-zero takes the numpy path.
NOT_COVERED = ('obstacle_clearance', 'k_gap_steer')

_KERNELS = None  # the kernels module once loaded; False: unavailable


# The sources the compiled code is built from: the kernels, the constants and helpers they
# read (core.law, core.geometry, core.neighbours) and the vehicle model's. A digest of them
# names the cache directory (:func:`cache_dir`).
KERNEL_SOURCES = ('soliton_encirclement_ros.core', 'velocity_mobility_ros.core')
_CACHE_KEY_LENGTH = 16


def sources_key() -> str:
    """Return a digest of every ``.py`` file of the packages :data:`KERNEL_SOURCES`."""
    digest = hashlib.sha256()
    for package in KERNEL_SOURCES:
        spec = importlib.util.find_spec(package)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for path in sorted(Path(folder).glob('*.py')):
                digest.update(f'{package}.{path.name}'.encode() + b'\0' + path.read_bytes())
    return digest.hexdigest()[:_CACHE_KEY_LENGTH]


def cache_dir() -> Optional[str]:
    """
    Return the directory for numba's on-disk cache of these sources, or None (numba's default).

    ``<base>/<sources_key()>``, the base the first of ``NUMBA_CACHE_DIR``, ``__pycache__/numba``
    beside the sources, ``~/.cache/soliton_encirclement_ros/numba`` and the temporary
    directory where it can be written. The caches of older sources under the same base are
    removed when a new one is made (best effort).
    """
    key = sources_key()
    given = os.environ.get('NUMBA_CACHE_DIR')
    if given and Path(given).name == key:
        return given  # a worker of a process that chose it
    bases = [Path(given)] if given else []
    bases += [Path(__file__).resolve().parent / '__pycache__' / 'numba',
              Path.home() / '.cache' / 'soliton_encirclement_ros' / 'numba',
              Path(tempfile.gettempdir()) / 'soliton_encirclement_ros_numba']
    for base in bases:
        target = base / key
        fresh = not target.is_dir()
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if not os.access(target, os.W_OK):
            continue
        if fresh and not given:
            _remove_stale(base, key)
        return str(target)
    return None


def _remove_stale(base: Path, key: str) -> None:
    """Remove the caches of other sources under ``base`` (directories named like a key)."""
    for other in base.iterdir():
        if (other.name != key and len(other.name) == _CACHE_KEY_LENGTH and other.is_dir()
                and all(c in '0123456789abcdef' for c in other.name)):
            shutil.rmtree(other, ignore_errors=True)


def kernels():
    """Return :mod:`core.kernels` (numba imported on first use), or None if unavailable."""
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = False
        if os.environ.get('SOLITON_COMPILED', '1') != '0':
            try:
                from soliton_encirclement_ros.core import kernels as module
            except ImportError:
                pass
            else:
                _KERNELS = module
    return _KERNELS or None


def available() -> bool:
    """
    Return whether the kernels can run here, without importing numba for it.

    numba installed (the ``standalone`` extra) and ``SOLITON_COMPILED`` not ``0``.
    """
    if _KERNELS is not None:
        return bool(_KERNELS)
    return (os.environ.get('SOLITON_COMPILED', '1') != '0'
            and importlib.util.find_spec('numba') is not None)


def compiles_whole(params: ControllerParams, agents: int) -> bool:
    """
    Return whether a run of ``agents`` flying ``params`` runs its law compiled on every row.

    Every term it has set is compiled (:func:`covers`), and its ``d_safe`` term too: the kernel
    computes that term for swarms whose every vehicle fits its within-reach columns
    (``law.WITHIN_REACH_COLUMNS``); above, rows with a vehicle within reach take numpy.
    """
    return (covers(params) and (not params.d_safe or 2 * agents <= WITHIN_REACH_COLUMNS)
            and available())


def covers(params: ControllerParams) -> bool:
    """Return whether the kernels compute this law (every term it has set)."""
    names = {f.name for f in dataclasses.fields(params)}
    if names - KNOWN_FIELDS:
        return False
    return not any(getattr(params, name) for name in NOT_COVERED)


@dataclasses.dataclass(frozen=True)
class ControlPlan:
    """What the control kernel takes besides the tick's state: parameters and tables."""

    law: np.ndarray         # kernels.LAW_FIELDS in order
    hysteresis: np.ndarray  # by ring size 0..N+1: params.neighbour_hysteresis
    damping: np.ndarray     # by ring size: law.omega_damping_gain, law.implicit_decay
    d_safe: np.ndarray      # by ring size: params.safety_distance
    own_col: np.ndarray     # (R N,) each row's own column
    no_reach: np.ndarray    # (R N,) the bound of each row where d_safe is off (unread)
    kernels: object
    separate: bool = False  # the d_safe term compiled where a vehicle is within reach
    ring_law: np.ndarray = None      # law of params.ring_gains() (ring_gains_from; else law)
    ring_damping: np.ndarray = None  # its damping table (else damping)
    ring_fade: np.ndarray = None     # by ring size: law.ring_size_share (ring_gains_from)


def control_plan(params: ControllerParams, omega_ref: float, runs: int, agents: int,
                 lambdas=None) -> Optional[ControlPlan]:
    """
    Return the plan of the control kernel for these runs, or None (numpy path).

    ``lambdas`` (N,): the agents' arc weights (None: all 1); the even ring is fitted only
    where every one is 1 (``BatchControllers._ring_offset``).
    """
    if not covers(params):
        return None
    module = kernels()
    if module is None:
        return None
    fit = lambdas is None or not np.any(np.asarray(lambdas) != 1.0)
    sizes = np.arange(agents + 2)

    def law(p):
        values = {f: getattr(p, f, None) for f in module.LAW_FIELDS}
        # omega_ref + gap_steer (0.0 where k_gap_steer is not covered) as _control adds them
        values.update(u_bound=u_bound(p), omega_ref=omega_ref + 0.0 + 0.0,
                      altitude_hold=1.0 if p.altitude_hold else 0.0,
                      ring_fit=1.0 if fit else 0.0)
        return np.array([float(values[f]) for f in module.LAW_FIELDS])

    crowd = law(params), damping_table(sizes, params)
    ring = crowd
    if params.ring_gains_from:
        ring = law(params.ring_gains()), damping_table(sizes, params.ring_gains())
    return ControlPlan(
        crowd[0], np.asarray(params.neighbour_hysteresis(sizes), dtype=float), crowd[1],
        np.asarray(params.safety_distance(sizes), dtype=float),
        np.tile(np.arange(agents, dtype=np.int64), runs), np.zeros(runs * agents), module,
        bool(params.d_safe) and compiles_whole(params, agents), ring[0], ring[1],
        np.asarray(ring_size_share(sizes, params), dtype=float))


def damping_table(sizes, params: ControllerParams) -> np.ndarray:
    """Return (len(sizes), 2): each ring size's damping gain and the decay taken implicitly."""
    gain = np.asarray(omega_damping_gain(sizes, params), dtype=float)
    return np.ascontiguousarray(np.stack([gain, implicit_decay(gain, params)], axis=1))


def vehicle_vector(params) -> Optional[np.ndarray]:
    """
    Return ``kernels.vehicle_steps``' parameter vector of ``params``, or None (the numpy path).

    Covered: the 'command' heading mode (no yaw-rate command) without jerk limits.
    """
    module = kernels()
    if module is None or params.heading_mode != 'command' or params.max_jerk_xy > 0.0 \
            or params.max_jerk_z > 0.0:
        return None
    return np.array([float(getattr(params, f)) for f in module.VEHICLE_FIELDS])


def vehicle_steps(state, v_des, params, steps: int):
    """
    Return ``state`` after ``steps`` of ``model.step`` compiled, or None (the numpy path).

    Covered: the 'command' heading mode (no yaw-rate command) without jerk limits.
    """
    vector = vehicle_vector(params)
    if vector is None:
        return None
    out = type(state)(state.position.copy(), state.velocity.copy(), state.acceleration.copy(),
                      state.yaw.copy(), state.yaw_rate.copy())
    kernels().vehicle_steps(vector, steps, np.ascontiguousarray(v_des, dtype=float),
                            out.position, out.velocity, out.acceleration, out.yaw, out.yaw_rate)
    return out
