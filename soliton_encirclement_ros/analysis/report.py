"""
One run's record and its outputs: CSV files, plots and summary.json.

:class:`RunResult` is what every producer of a run hands :func:`write_run_outputs`: batch_sim,
swarm_sim in one process, metrics_node (swarm_sim --processes, ros2 launch) and analyze_run.

No rclpy. ``metrics`` arrays are (T, 7) with columns ``timestamp`` then the six metrics in
``core.metrics.METRIC_NAMES`` order; ``agents`` arrays are (K, 4)
``node_id,timestamp,u,velocity_norm``.
"""

from __future__ import annotations

from dataclasses import dataclass
import json
import math
import os
from pathlib import Path
import shutil
import tempfile

import numpy as np

from soliton_encirclement_ros.analysis.outputs import FIGURE_FORMATS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, SETTLE_THRESHOLDS, settle_time

METRICS_HEADER = ('timestamp',) + METRIC_NAMES
AGENTS_HEADER = ('node_id', 'timestamp', 'u', 'velocity_norm')


@dataclass
class RunResult:
    """
    Everything one run produced, whichever simulator or recording it came from.

    ``metrics`` (T, 7): timestamp then the six metrics; ``agents`` (K, 4): node_id, timestamp,
    u, velocity_norm; ``params``: what was run (the scenario, the engine, the bag...);
    ``trajectories``: name -> (T, 3) rows t, x, y, ``'target'`` drawn as the target;
    ``real_time_factor``: sim seconds per wall second, None when not measured.
    """

    metrics: np.ndarray
    agents: np.ndarray
    params: dict
    trajectories: dict[str, np.ndarray] | None = None
    real_time_factor: float | None = None
    sim_time: float | None = None
    wall_time: float | None = None
    final_positions: np.ndarray | None = None  # (N + 1, 3) agents then target, world ENU [m]
    # The smallest margin of any agent to the safety area over the run [m] (negative: out);
    # None: not measured, NaN: no area.
    area_margin: float | None = None


def closest_approach(timestamps: np.ndarray, d_min: np.ndarray) -> dict:
    """
    Return the closest approach of two agents in a run.

    ``{'d_min': smallest d_min of the run [m], 'time': its first time [s]}`` (NaN ignored; both
    NaN when no sample has two live agents).
    """
    values = np.asarray(d_min, dtype=float)
    if not np.any(np.isfinite(values)):
        return {'d_min': math.nan, 'time': math.nan}
    k = int(np.nanargmin(values))
    return {'d_min': float(values[k]), 'time': float(timestamps[k])}


def summarise(metrics: np.ndarray) -> dict:
    """
    Summarise a (T, 7) metrics series.

    Final value, NaN-ignoring mean and settle times of each metric, and the closest approach of
    two agents (smallest ``d_min`` and its time).
    """
    metrics = _checked_table(metrics, len(METRICS_HEADER), 'metrics')
    columns = {name: metrics[:, i + 1] for i, name in enumerate(METRIC_NAMES)}
    final = {name: float(col[-1]) if col.size else math.nan for name, col in columns.items()}
    mean = {name: _nanmean(col) for name, col in columns.items()}
    settle = {
        name: settle_time(metrics[:, 0], columns[name], threshold)
        for name, threshold in SETTLE_THRESHOLDS.items()
    }
    return {'final': final, 'mean': mean, 'settle_time': settle,
            'closest': closest_approach(metrics[:, 0], columns['d_min'])}


def __getattr__(name: str):
    """Import ``plots`` (matplotlib) when first used: runs without plots never load it."""
    if name == 'plots':
        from soliton_encirclement_ros.analysis import plots
        return plots
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def write_run_outputs(out_dir, result: RunResult, plots: bool = True, fmt: str = 'png') -> dict:
    """
    Write a run's outputs into ``out_dir`` and return its summary.

    The outputs: metrics.csv, agents.csv, one figure per metric, dashboard, trajectories
    (when the result has trajectories, with ``params['radius']``, if present, drawn as the
    desired circle around the target's last position) and summary.json; ``plots=False``: no
    figures (and matplotlib is not imported). Figures are ``fmt`` files (``FIGURE_FORMATS``:
    png, or vector pdf/svg), titled with the run's identity (``plots.run_title``).

    Files are written into a temporary directory first and moved into place only when all of
    them succeeded, so an error never leaves partial outputs behind.
    """
    metrics, agents, params = result.metrics, result.agents, result.params
    trajectories, real_time_factor = result.trajectories, result.real_time_factor
    metrics = _checked_table(metrics, len(METRICS_HEADER), 'metrics')
    agents = _checked_table(agents, len(AGENTS_HEADER), 'agents')
    if fmt not in FIGURE_FORMATS:  # before anything is written
        raise ValueError(f'figure format must be one of {", ".join(FIGURE_FORMATS)}, '
                         f'got {fmt!r}')
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarise(metrics)
    summary['real_time_factor'] = real_time_factor
    if result.area_margin is not None:
        summary['area_margin'] = result.area_margin
    summary['params'] = params
    staging = Path(tempfile.mkdtemp(prefix='.outputs-', dir=out_dir))
    try:
        _write_csv(staging / 'metrics.csv', METRICS_HEADER, metrics)
        _write_csv(staging / 'agents.csv', AGENTS_HEADER, agents)
        if plots:
            _write_plots(staging, metrics, trajectories, params, fmt)
        (staging / 'summary.json').write_text(json_text(summary))
        for produced in staging.iterdir():
            os.replace(produced, out_dir / produced.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return summary


def _write_plots(staging: Path, metrics: np.ndarray, trajectories, params: dict,
                 fmt: str) -> None:
    from soliton_encirclement_ros.analysis import plots
    title = plots.run_title(params)
    for i, name in enumerate(METRIC_NAMES):
        plots.metric_plot(staging / plots.figure_name(name, fmt), {'': metrics[:, [0, i + 1]]},
                          name, title)
    plots.dashboard(staging / plots.figure_name('dashboard', fmt), {'': metrics}, title)
    if trajectories is not None:
        plots.trajectory_plot(staging / plots.figure_name('trajectories', fmt), trajectories,
                              params.get('radius'), title)


def _checked_table(table, columns: int, what: str) -> np.ndarray:
    array = np.asarray(table, dtype=float)
    if array.size == 0:
        return array.reshape(0, columns)
    if array.ndim != 2 or array.shape[1] != columns:
        raise ValueError(f'{what} must be an array of shape (N, {columns}), got {array.shape}')
    return array


def _nanmean(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else math.nan


def _write_csv(path: Path, header: tuple[str, ...], rows: np.ndarray) -> None:
    np.savetxt(path, rows, delimiter=',', header=','.join(header), comments='', fmt='%.9g')


def json_text(value) -> str:
    """Return ``value`` as strict JSON text (NaN and inf, which JSON lacks, become null)."""
    return json.dumps(_json_safe(value), indent=2, allow_nan=False, default=str) + '\n'


def _json_safe(value):
    """Plain JSON types; NaN/inf (no JSON equivalent) become null."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Path):
        return str(value)
    return value
