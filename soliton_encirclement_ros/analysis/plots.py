"""
Static figures of a run: metric curves (one run or several overlaid), dashboard, trajectories.

Uses matplotlib's object API (no pyplot state), so it is safe off the main thread and needs no
display. Each ``runs``/``series`` mapping is keyed by a label; an empty label draws no legend.
"""
from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
import numpy as np

from soliton_encirclement_ros.core.metrics import METRIC_NAMES

METRIC_LABELS = {
    'E_r': 'E_r (radial error / R)',
    'E_vr': 'E_vr [m/s]',
    'rho': 'rho (order parameter)',
    'G_max': 'G_max (worst gap / ideal)',
    'E_gap': 'E_gap (gap RMS error)',
    'd_min': 'd_min [m] (closest two agents)',
}
DPI = 100


def metric_plot(path: Path, series: dict[str, np.ndarray], name: str) -> None:
    """One metric against time; ``series`` maps a label to (T, 2) rows ``t,value``."""
    fig = Figure(figsize=(6, 3.2), dpi=DPI)
    ax = fig.add_subplot()
    _draw_series(ax, series, name)
    fig.tight_layout()
    fig.savefig(path)


def dashboard(path: Path, runs: dict[str, np.ndarray]) -> None:
    """Every metric in one figure; ``runs`` maps a label to a (T, 1 + len(METRIC_NAMES)) array."""
    fig = Figure(figsize=(10, 8), dpi=DPI)
    axes = fig.subplots((len(METRIC_NAMES) + 1) // 2, 2).ravel()
    for i, (ax, name) in enumerate(zip(axes, METRIC_NAMES)):
        _draw_series(ax, {label: m[:, [0, i + 1]] for label, m in runs.items()}, name)
    for ax in axes[len(METRIC_NAMES):]:
        ax.set_axis_off()
    fig.tight_layout()
    fig.savefig(path)


def trajectory_plot(path: Path, trajectories: dict[str, np.ndarray], radius: float | None) -> None:
    """
    XY paths; key ``'target'`` drawn as the target.

    With the desired circle of ``radius`` around its last position when both are known.
    """
    fig = Figure(figsize=(6, 6), dpi=DPI)
    ax = fig.add_subplot()
    for name, track in trajectories.items():
        track = np.asarray(track, dtype=float)
        if name == 'target' or track.size == 0:
            continue
        line, = ax.plot(track[:, 1], track[:, 2], lw=0.8, label=name)
        ax.plot(track[-1, 1], track[-1, 2], 'o', color=line.get_color(), ms=4)
    target = np.asarray(trajectories.get('target', np.empty((0, 3))), dtype=float)
    if target.size:
        ax.plot(target[:, 1], target[:, 2], 'k--', lw=1.2, label='target')
        ax.plot(target[-1, 1], target[-1, 2], 'k*', ms=12)
        if radius:
            angle = np.linspace(0.0, 2.0 * np.pi, 200)
            ax.plot(target[-1, 1] + radius * np.cos(angle), target[-1, 2] + radius * np.sin(angle),
                    color='0.5', lw=0.8, ls=':', label=f'desired circle (R={radius:g} m)')
    ax.set_aspect('equal', adjustable='datalim')
    ax.set_xlabel('x [m] (ENU)')
    ax.set_ylabel('y [m] (ENU)')
    ax.grid(True, alpha=0.3)
    if len(trajectories) <= 12:
        ax.legend(fontsize='small', loc='best')
    fig.tight_layout()
    fig.savefig(path)


def _draw_series(ax, series: dict[str, np.ndarray], name: str) -> None:
    for label, values in series.items():
        values = np.asarray(values, dtype=float)
        ax.plot(values[:, 0], values[:, 1], lw=1.0, label=label or None)
    ax.set_xlabel('time [s]')
    ax.set_ylabel(METRIC_LABELS[name])
    ax.grid(True, alpha=0.3)
    if any(series):
        ax.legend(fontsize='small')
