"""
Figures of a parameter sweep: a heatmap over two grid parameters, box plots, settle-time CDFs.

Drawn from the ``runs.csv`` columns (``sim.sweep.RunTable``) and ``summary.csv`` rows (see
``sim.sweep``) with matplotlib's object API, like :mod:`.plots`.
"""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
import numpy as np

from soliton_encirclement_ros.analysis.plots import DPI, METRIC_LABELS


def write_sweep_plots(out: Path, spec, table, summary: list[dict]) -> list[str]:
    """Write the sweep's PNGs into ``out`` from a ``RunTable``; return their file names."""
    metric, x, y = spec.plot['metric'], spec.plot['x'], spec.plot['y']
    values = spec.grid[x] if x else [None]
    groups = _by_value(table, x, values)
    written = []
    if x is not None and y is not None:
        written.append(heatmap(out / f'heatmap_{metric}.png', summary, metric, x, y,
                               spec.grid[x], spec.grid[y]))
    written.append(boxplot(out / f'box_{metric}.png',
                           [table.values[f'final_{metric}'][g] for g in groups], metric, x,
                           values))
    written.append(settle_cdf(out / 'settle_cdf.png',
                              [table.values['settle_E_gap'][g] for g in groups], x, values))
    return written


def _label(value) -> str:
    return f'{value:g}' if isinstance(value, float) else str(value)


def _cell(value) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def heatmap(path: Path, summary: list[dict], metric: str, x: str, y: str, xs, ys) -> str:
    """Draw the median final ``metric`` over seeds for every (x, y) grid value pair."""
    grid = np.full((len(ys), len(xs)), np.nan)
    for row in summary:
        if row[x] in xs and row[y] in ys:
            value = row[f'final_{metric}_median']
            if np.isnan(grid[ys.index(row[y]), xs.index(row[x])]):
                grid[ys.index(row[y]), xs.index(row[x])] = value
    fig = Figure(figsize=(1.2 * len(xs) + 3, 0.8 * len(ys) + 2.2), dpi=DPI)
    ax = fig.add_subplot()
    image = ax.imshow(grid, origin='lower', aspect='auto', cmap='viridis')
    ax.set_xticks(range(len(xs)), [_label(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_label(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for (i, j), value in np.ndenumerate(grid):
        ax.text(j, i, 'n/a' if math.isnan(value) else f'{value:.3g}', ha='center',
                va='center', color='w', fontsize=8)
    fig.colorbar(image, ax=ax, label=f'final {METRIC_LABELS[metric]}, median over seeds')
    fig.tight_layout()
    fig.savefig(path)
    return path.name


def _by_value(table, x, values) -> list[np.ndarray]:
    """Return the indices of the runs without error, per value of ``x`` (all, without x)."""
    by_cell = table.rows_by([x] if x else [])
    none = np.zeros(0, dtype=np.int64)
    groups = [by_cell.get((_cell(v),), none) for v in values] if x else [by_cell[()]]
    return [g[~table.failed[g]] for g in groups]


def boxplot(path: Path, groups: list[np.ndarray], metric: str, x, values) -> str:
    """Draw the final ``metric`` over seeds (and the other grid parameters) per ``x`` value."""
    data = [np.asarray(d, dtype=float) for d in groups]
    data = [d[np.isfinite(d)] for d in data]
    fig = Figure(figsize=(max(4.0, 0.9 * len(data) + 2), 3.4), dpi=DPI)
    ax = fig.add_subplot()
    ax.boxplot(data, tick_labels=[_label(v) for v in values] if x else ['all runs'])
    ax.set_xlabel(x or '')
    ax.set_ylabel(f'final {METRIC_LABELS[metric]}')
    fig.tight_layout()
    fig.savefig(path)
    return path.name


def settle_cdf(path: Path, groups: list[np.ndarray], x, values) -> str:
    """Draw the fraction of runs settled (E_gap) by each time, a curve per value of ``x``."""
    fig = Figure(figsize=(6, 3.4), dpi=DPI)
    ax = fig.add_subplot()
    for value, group in zip(values, groups):
        times = np.sort(np.asarray(group, dtype=float))
        settled = times[np.isfinite(times)]
        if not len(group):
            continue
        fraction = np.arange(1, settled.size + 1) / len(group)
        label = f'{x} = {_label(value)}' if x else 'all runs'
        ax.step(np.concatenate(([0.0], settled)), np.concatenate(([0.0], fraction)),
                where='post', label=f'{label} ({settled.size}/{len(group)} settled)')
    ax.set_xlabel('settle time of E_gap [s]')
    ax.set_ylabel('fraction of runs settled')
    ax.set_ylim(0.0, 1.02)
    if ax.lines:  # a sweep stopped before any run ended has no curve to name
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path.name
