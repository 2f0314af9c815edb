"""
Encirclement quality metrics (E_r, E_vr, rho, G_max, E_gap, d_min), computed in the XY plane.

Pure numpy; shared by the batch simulator, ``metrics_node`` and ``analyze_run`` so that all
three report the same numbers for the same positions.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from velocity_mobility_ros.core.geometry import TWO_PI, wrap_2pi

METRIC_NAMES = ('E_r', 'E_vr', 'rho', 'G_max', 'E_gap', 'd_min')
# A metric has settled once it stays below its threshold until the end of the run.
SETTLE_THRESHOLDS = {'E_gap': 0.05, 'E_r': 0.01}


class Metrics(NamedTuple):
    E_r: float
    E_vr: float
    rho: float
    G_max: float
    E_gap: float
    d_min: float  # smallest horizontal distance between two live agents [m]; NaN below two


NAN_METRICS = Metrics(*([float('nan')] * len(METRIC_NAMES)))


def ring_gaps(theta: np.ndarray) -> np.ndarray:
    """Angular gaps between consecutive agents around the ring; they sum to 2*pi."""
    ordered = np.sort(np.asarray(theta, dtype=float))
    if ordered.size == 0:
        return ordered
    return np.diff(np.append(ordered, ordered[0] + TWO_PI))


def gap_error(theta: np.ndarray) -> float:
    """E_gap of agents at angles ``theta``: the RMS of their gaps over the even gap, less 1."""
    theta = np.asarray(theta, dtype=float)
    normalised_gaps = ring_gaps(theta) / (TWO_PI / max(theta.size, 1))
    return float(np.sqrt(np.mean((normalised_gaps - 1.0) ** 2)))


def min_pair_distance(xy: np.ndarray) -> float:
    """
    Smallest Euclidean distance between two rows of ``xy`` (M, 2); NaN when M < 2.

    Sort-and-sweep on x: offsets j = 1, 2, ... of the x-sorted rows are compared until every
    pair j apart is further apart in x than the best distance found, so a ring costs a few
    O(M) passes instead of the M^2/2 pairs.
    """
    p = np.asarray(xy, dtype=float)[:, :2]
    if p.shape[0] < 2:
        return float('nan')
    p = p[np.argsort(p[:, 0], kind='stable')]
    best = np.inf
    for j in range(1, p.shape[0]):
        dx = p[j:, 0] - p[:-j, 0]
        if dx.min() >= best:
            break
        best = min(best, float(np.min(np.hypot(dx, p[j:, 1] - p[:-j, 1]))))
    return float(best)


def compute_metrics(
    positions: np.ndarray,
    velocities: np.ndarray,
    target_position: np.ndarray,
    target_velocity: np.ndarray,
    radius: float,
) -> Metrics:
    """
    Metrics over the M live agents given as rows of ``positions``/``velocities``.

    Returns NaN for every metric when no agent is live; ``d_min`` is NaN with one live agent.
    """
    p = np.asarray(positions, dtype=float)
    m = p.shape[0] if p.ndim == 2 else 0
    if m == 0:
        return NAN_METRICS
    v = np.asarray(velocities, dtype=float)
    rel = p[:, :2] - np.asarray(target_position, dtype=float)[:2]
    r = np.hypot(rel[:, 0], rel[:, 1])
    with np.errstate(invalid='ignore', divide='ignore'):
        e_hat = np.where(r[:, None] > 1e-9, rel / r[:, None], 0.0)
    v_rel = v[:, :2] - np.asarray(target_velocity, dtype=float)[:2]
    v_r = np.einsum('ij,ij->i', v_rel, e_hat)
    theta = wrap_2pi(np.arctan2(rel[:, 1], rel[:, 0]))
    normalised_gaps = ring_gaps(theta) / (TWO_PI / m)
    return Metrics(
        E_r=float(np.sqrt(np.mean((r / radius - 1.0) ** 2))),
        E_vr=float(np.sqrt(np.mean(v_r ** 2))),
        rho=float(np.abs(np.mean(np.exp(1j * theta)))),
        G_max=float(np.max(normalised_gaps)),
        E_gap=gap_error(theta),
        d_min=min_pair_distance(p),
    )


NOT_SETTLED = 'did not settle'  # a settle time of None, in words


def settled_text(name: str, time: float | None) -> str:
    """Say when metric ``name`` settled (``E_gap < 0.05 from 12.30 s``), or that it did not."""
    if time is None:
        return f'{name} {NOT_SETTLED} (< {SETTLE_THRESHOLDS[name]:g})'
    return f'{name} < {SETTLE_THRESHOLDS[name]:g} from {time:.2f} s'


def settle_time(timestamps: np.ndarray, values: np.ndarray, threshold: float) -> float | None:
    """
    Time of the first sample after the last one at or above ``threshold`` (NaN counts as above).

    The first timestamp if none is; None if the last sample is.
    """
    violating = ~(np.asarray(values, dtype=float) < threshold)
    if violating.size == 0 or violating[-1]:
        return None
    last_violation = np.flatnonzero(violating)
    first_settled = last_violation[-1] + 1 if last_violation.size else 0
    return float(timestamps[first_settled])
