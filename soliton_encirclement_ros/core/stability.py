"""
Linear stability of the evenly spaced ring under the soliton law (pure numpy).

The equilibrium: N agents at radius R, angles ``2*pi*i/N`` around a static target, at rest,
``u = 0``, ``omega_ref = 0``. Linearised about it the radial loop decouples from the ring
(``tau*s^2 + (1 + k_dr)*s + k_r``) and the ring is circulant: each Fourier mode ``k`` of the
agents' angle deviations evolves on its own. This module builds, per mode, the exact linear
map of one control period of the batch simulator's timing:

- the agent uses its own current angle and ``u``, and the neighbours' broadcasts of the
  previous tick (angle, angular rate, ``u``, ``u_ss``), as ``batch_sim`` delivers them;
- ``e_tau`` about equal gaps ``2*pi/N`` is ``N/(4*pi)`` times the second difference of the
  angles, so its gain grows with N: the high modes of a large ring are stiff;
- ``omega_self = k_tau*u`` (the previous command), ``omega_ref_local`` = the mean of the
  neighbours' rates, with the damping gain ``law.omega_damping_gain`` of N agents; the
  cubic decay and the steepening vanish at ``u = 0``; ``k_omega_own`` damps ``e_tau`` by the
  agent's own current angular rate (``law.own_rate_damping``); ``k_e_ring`` adds the offset
  from the even ring (``law.ring_offset``): ``(sum_j phi_j(prev) - (N - 1) phi) / N`` over
  the other agents, which is ``-(phi_prev + (N - 1) phi) / N`` for every mode ``k != 0``;
- ``u`` steps by Euler, explicit but for the damping's decay that the period cannot take
  (``law.implicit_decay``), the command's angular rate is ``k_tau*u_new``, and the
  vehicle follows it through ``substeps`` first-order lag steps ``v += dt/tau*(v_cmd - v)``,
  ``p += dt*v`` (acceleration and speed limits are not active in the linear regime).

Per mode the state is (phi, w, u, s) now and at the previous tick: angle deviation, angular
rate, soliton state and broadcast ``u_ss``. The growth rate of an eigenvalue ``lam`` of the
per-period map is ``ln|lam| / P`` [1/s] (negative = decays), its frequency ``angle(lam) / P``.
Mode 0 (the whole ring turning) is neutral and left out. :func:`ring_growth_rate` is the
largest growth rate over the modes ``k = 1 .. N-1``: the ring settles when it is negative,
and how negative says how fast the slowest mode decays.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import implicit_decay, omega_damping_gain, ring_gain_share

STATE = ('phi', 'w', 'u', 's', 'phi_prev', 'w_prev', 'u_prev', 's_prev')


class ModeGrowth(NamedTuple):
    """The least stable eigenvalue of the ring: growth rate [1/s], mode k, frequency [rad/s]."""

    rate: float
    mode: int
    frequency: float


def mode_map(n: int, k: int, params: ControllerParams, tau: float = 1.0,
             sim_dt: float = 0.01) -> np.ndarray:
    """
    Return the (8, 8) complex map of one control period for ring mode ``k`` of ``n`` agents.

    ``tau`` is the vehicle's horizontal velocity time constant [s] and ``sim_dt`` its
    integration step [s]; the control period is ``params.control_period``. With the ring's
    gains (``ring_gains_from``), the law flown at R by a ring of ``n``
    (``law.ring_gain_share``; an even ring is spaced wider than the ``d_safe`` flown, so never
    crowded): the ring's map, or where the share is between, the two maps blended in that
    share, as the law blends the two steps (every row is linear in the blended ``u``,
    ``u_ss`` and command).
    """
    share = (ring_gain_share(float(params.radius), params, ring_size=n)
             if params.ring_gains_from else 0.0)
    if share <= 0.0:
        return _mode_map(n, k, params, tau, sim_dt)
    ring = _mode_map(n, k, params.ring_gains(), tau, sim_dt)
    if share >= 1.0:
        return ring
    return (1.0 - share) * _mode_map(n, k, params, tau, sim_dt) + share * ring


def _mode_map(n: int, k: int, params: ControllerParams, tau: float, sim_dt: float) -> np.ndarray:
    """:func:`mode_map` of the law at ``params``' own gains."""
    if n < 3:
        raise ValueError(f'a ring needs n >= 3 agents, got {n}')
    if tau <= 0.0 or sim_dt <= 0.0:
        raise ValueError(f'tau and sim_dt must be > 0, got {tau}, {sim_dt}')
    p = params
    period = p.control_period
    substeps = max(1, round(period / sim_dt))
    dt = period / substeps
    q = 2.0 * math.pi * k / n
    succ, pred = np.exp(1j * q), np.exp(-1j * q)   # neighbour i+1 / i-1 of mode k
    stiffness = n / (4.0 * math.pi)                 # d e_tau / d(second difference of angles)
    PHI, W, U, S, PHI0, W0, U0, S0 = range(8)

    # u_new = u + P*du as a row over the state; u_ss (what the agent broadcasts next) likewise.
    du = np.zeros(8, dtype=complex)
    e_eff = np.zeros(8, dtype=complex)
    e_eff[PHI] += -2.0 * stiffness
    e_eff[PHI0] += (succ + pred) * stiffness
    damp = float(omega_damping_gain(n, p))
    if damp:
        e_eff[U] += -damp * p.k_tau        # omega_self = k_tau * u (the previous command)
        e_eff[W0] += damp * 0.5 * (succ + pred)
    e_eff[W] += -p.k_omega_own             # the vehicle's own rate (law.own_rate_damping)
    if p.k_e_ring:                          # law.ring_offset: the others' sum of mode k
        others = (n - 1) if k % n == 0 else -1
        e_eff[PHI] += -p.k_e_ring * (n - 1) / n
        e_eff[PHI0] += p.k_e_ring * others / n
    du += p.k_e_tau * e_eff
    du[U] += -p.beta_u
    du[U0] += p.c_coupling * (succ - pred)
    u_ss = np.zeros(8, dtype=complex)
    u_ss[U] = -2.0
    u_ss[U0] = succ + pred
    du += p.kappa_u_diff * u_ss
    du[S0] += p.kappa_u_disp * (succ - pred)
    u_new = np.zeros(8, dtype=complex)
    u_new[U] = 1.0
    u_new += period * du / (1.0 + period * float(implicit_decay(damp, p)))

    # The vehicle over one period: substeps of w += a*(k_tau*u_new - w), phi += dt*w.
    a = dt / tau
    phi_row = np.zeros(8, dtype=complex)
    phi_row[PHI] = 1.0
    w_row = np.zeros(8, dtype=complex)
    w_row[W] = 1.0
    for _ in range(substeps):
        w_row = (1.0 - a) * w_row + a * p.k_tau * u_new
        phi_row = phi_row + dt * w_row

    m = np.zeros((8, 8), dtype=complex)
    m[PHI], m[W], m[U], m[S] = phi_row, w_row, u_new, u_ss
    m[PHI0, PHI] = m[W0, W] = m[U0, U] = m[S0, S] = 1.0
    return m


def mode_growth(n: int, k: int, params: ControllerParams, tau: float = 1.0,
                sim_dt: float = 0.01) -> tuple[float, float]:
    """(growth rate [1/s], frequency [rad/s]) of the least stable eigenvalue of mode ``k``."""
    lam = np.linalg.eigvals(mode_map(n, k, params, tau, sim_dt))
    worst = lam[np.argmax(np.abs(lam))]
    period = params.control_period
    return _rate(abs(worst), period), abs(float(np.angle(worst))) / period


def ring_growth_rate(n: int, params: ControllerParams, tau: float = 1.0,
                     sim_dt: float = 0.01) -> ModeGrowth:
    """
    Return the largest growth rate over modes 1..n-1 of the ``n``-ring.

    Below 0, every mode decays.
    """
    worst = ModeGrowth(-math.inf, 0, 0.0)
    for k in range(1, n // 2 + 1):   # mode n-k is the complex conjugate of mode k
        rate, freq = mode_growth(n, k, params, tau, sim_dt)
        if rate > worst.rate:
            worst = ModeGrowth(rate, k, freq)
    return worst


def growth_curve(ns, params: ControllerParams, tau: float = 1.0,
                 sim_dt: float = 0.01) -> np.ndarray:
    """Largest growth rate [1/s] for each ring size in ``ns`` (an array of the same length)."""
    return np.array([ring_growth_rate(int(n), params, tau, sim_dt).rate for n in ns])


def radial_growth_rate(params: ControllerParams, tau: float = 1.0) -> float:
    """Largest real part [1/s] of the radial loop ``tau*s^2 + (1 + k_dr)*s + k_r = 0``."""
    return float(np.max(np.roots([tau, 1.0 + params.k_dr, params.k_r]).real))


def _rate(modulus: float, period: float) -> float:
    return math.log(modulus) / period if modulus > 0.0 else -math.inf
