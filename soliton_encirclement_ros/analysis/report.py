"""
One run's record and its outputs: CSV files, plots and summary.json.

:class:`RunResult` is what every producer of a run that holds its series hands
:func:`write_run_outputs`: batch_sim and analyze_run. swarm_sim and metrics_node (swarm_sim
--processes, ros2 launch) stream metrics.csv and agents.csv as the run goes and add the plots
and summary.json from those files with :func:`write_streamed_outputs`, in memory that does not
grow with the run's length (:class:`RunningSummary`, ``stream.Envelope``). batch_sim and
swarm_sim --engine stream a control tick's rows through :class:`RunTables` (batch_sim also
holds them, for its summary).

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
from typing import Any, Mapping

import numpy as np

from soliton_encirclement_ros.analysis.outputs import FIGURE_FORMATS, write_problem
from soliton_encirclement_ros.analysis.stream import (
    count_rows, CsvStream, Envelope, read_row_chunks, trim_half_row, WRITING_MARKER)
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, SETTLE_THRESHOLDS, settle_time

METRICS_HEADER = ('timestamp',) + METRIC_NAMES
AGENTS_HEADER = ('node_id', 'timestamp', 'u', 'velocity_norm')
PREVIOUS_OUTPUTS = ('metrics.csv', 'agents.csv', 'summary.json')
# The figures that shade the parts of a run judged (a flight's engaged phases), and the rest.
SHADED_FIGURES = (*METRIC_NAMES, 'dashboard')
FIGURES = (*SHADED_FIGURES, 'trajectories')
# summary.json of a run that has started and not ended: what a killed run leaves (``unfinished``)
UNFINISHED = ('the run did not finish (killed before its end): metrics.csv and agents.csv hold '
              'what it simulated, up to their last whole row; no final, mean or settle time')


def clear_previous_outputs(out_dir: Path) -> None:
    """
    Remove the outputs a previous run left in ``out_dir`` (its CSVs, summary.json, figures).

    Called once this run has started, before it streams into ``out_dir``: what a run killed
    later leaves there is then its own, not mixed with an older summary. Nothing else in
    ``out_dir`` is touched.
    """
    out_dir = Path(out_dir)
    names = [*PREVIOUS_OUTPUTS, WRITING_MARKER,
             *(f'{name}.{fmt}' for name in FIGURES for fmt in FIGURE_FORMATS)]
    for name in names:
        (out_dir / name).unlink(missing_ok=True)


class RunTables:
    """
    metrics.csv and agents.csv of a run, streamed into ``out_dir`` tick by tick (``CsvStream``).

    Opened with the first tick (:meth:`add`): with ``params``, a run that is just starting
    clears ``out_dir``'s previous outputs first and leaves a summary.json saying it is
    unfinished (``unfinished``), replaced by the run's own at its end, so a killed run's
    folder never reads as a whole run. :meth:`failures` says what a full disk cut short.
    """

    def __init__(self, out_dir, params: dict | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.params = params
        self._streams: tuple[CsvStream, CsvStream] | None = None
        self._problems: list[str] = []

    def _open(self) -> tuple[CsvStream, CsvStream]:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.params is not None:
            clear_previous_outputs(self.out_dir)
            try:
                (self.out_dir / 'summary.json').write_text(json_text(
                    {'unfinished': UNFINISHED, 'params': self.params}))
            except OSError as error:
                self._problems.append(write_problem('summary.json not written', error))
        self._streams = (CsvStream(self.out_dir / 'metrics.csv', METRICS_HEADER),
                         CsvStream(self.out_dir / 'agents.csv', AGENTS_HEADER))
        return self._streams

    @property
    def opened(self) -> bool:
        """Whether a tick was taken (the files exist)."""
        return self._streams is not None

    def add(self, tick, ids, agents: np.ndarray | None = None) -> None:
        """
        Take one control tick (``core.swarm_run.Tick``) of the agents ``ids``.

        ``agents``: its :func:`tick_agent_rows`, when the caller has them already.
        """
        metric_rows, agent_rows = self._streams or self._open()
        if tick.metrics is not None:
            metric_rows.append([tick.now, *tick.metrics])
        if tick.telemetry:
            agent_rows.append(tick_agent_rows(tick, ids) if agents is None else agents)

    def failures(self) -> list[str]:
        """Return what could not be written (a full disk), one line each."""
        return [*self._problems,
                *(stream.failure for stream in self._streams or () if stream.failure)]

    def close(self) -> None:
        """Close both files (whole rows); safe to call twice."""
        for stream in self._streams or ():
            stream.close()


def tick_agent_rows(tick, ids) -> np.ndarray:
    """Return a tick's agents.csv rows: ``node_id,timestamp,u,velocity_norm`` per live agent."""
    speed = np.linalg.norm(tick.velocities, axis=1)
    return np.column_stack((ids, np.full(len(ids), tick.now), tick.u, speed))[tick.live]


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
    # The part of the run the summary judges (a recorded flight's engaged phase,
    # ``flight.EngagedPhase.as_dict``: ``start``, ``end`` [s], ``rule``, ``text``...); None: the
    # whole run, and no ``phase`` in the summary.
    judged: dict | None = None
    # Every part of the run judged on its own (a flight's engaged phases, the first being
    # ``judged``): each gets its final values, means, settle times and closest approach in
    # summary.json's ``phases``; None: no ``phases``.
    phases: list[dict] | None = None


# summary.json ``params`` and a recording's ``custom_data``: the sim time [s] a run that was
# stopped (Ctrl-C, SIGTERM) had reached when it stopped; absent when the run went to its end.
INTERRUPTED_AT = 'interrupted_at'


def interrupted_params(sim_time: float | None) -> dict:
    """Return ``{INTERRUPTED_AT: sim_time}`` for a run stopped at ``sim_time`` [s]; None: {}."""
    return {} if sim_time is None else {INTERRUPTED_AT: round(float(sim_time), 9)}


def interrupted_text(params: Mapping[str, Any], duration: float | None = None) -> str:
    """
    Say in a few words that a run was stopped before its end, from its ``params``; '' if not.

    ``duration`` [s]: the scenario's, when ``params`` does not hold it.
    """
    at = params.get(INTERRUPTED_AT)
    if at is None:
        return ''
    duration = params.get('duration', duration)
    of = '' if duration is None else f' of its {float(duration):g} s'
    return (f'interrupted at t={float(at):g} s{of}: the outputs cover the run until then '
            'only')


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


def summarise(metrics: np.ndarray, window: tuple[float, float] | None = None) -> dict:
    """
    Summarise a (T, 7) metrics series.

    Final value, NaN-ignoring mean and settle times of each metric, and the closest approach of
    two agents (smallest ``d_min`` and its time). ``window`` (start, end) [s]: the final values,
    means and settle times are those of the rows in it (ends included: the part of the run
    judged); the closest approach is still the whole run's.
    """
    metrics = _checked_table(metrics, len(METRICS_HEADER), 'metrics')
    closest = closest_approach(metrics[:, 0], metrics[:, METRIC_NAMES.index('d_min') + 1])
    if window is not None:
        metrics = metrics[(metrics[:, 0] >= window[0]) & (metrics[:, 0] <= window[1])]
    columns = {name: metrics[:, i + 1] for i, name in enumerate(METRIC_NAMES)}
    final = {name: float(col[-1]) if col.size else math.nan for name, col in columns.items()}
    mean = {name: _nanmean(col) for name, col in columns.items()}
    settle = {
        name: settle_time(metrics[:, 0], columns[name], threshold)
        for name, threshold in SETTLE_THRESHOLDS.items()
    }
    return {'final': final, 'mean': mean, 'settle_time': settle, 'closest': closest}


class RunningSummary:
    """
    :func:`summarise` of a metrics series handed over in chunks of rows, in bounded memory.

    Feed (n, 7) chunks in time order to :meth:`add`; :meth:`result` is what :func:`summarise`
    returns for all of them together: the same final values, settle times and closest approach,
    and the same means when one chunk held every row (over several chunks, the means are summed
    exactly (``math.fsum``) where numpy sums pairwise: they may differ in the last digit).
    """

    def __init__(self) -> None:
        self.rows = 0
        self._final = {name: math.nan for name in METRIC_NAMES}
        self._sum = dict.fromkeys(METRIC_NAMES, 0.0)
        self._count = dict.fromkeys(METRIC_NAMES, 0)
        self._one_chunk_mean = {name: math.nan for name in METRIC_NAMES}
        self._chunks = 0
        # settle: (time of the first row after the last violation so far, next row settles it)
        self._settle = {name: (None, True) for name in SETTLE_THRESHOLDS}
        self._closest = {'d_min': math.nan, 'time': math.nan}

    def add(self, metrics: np.ndarray) -> None:
        """Take the next rows: a (n, 7) chunk, timestamp then the six metrics."""
        metrics = _checked_table(metrics, len(METRICS_HEADER), 'metrics')
        if len(metrics) == 0:
            return
        self.rows += len(metrics)
        self._chunks += 1
        t = metrics[:, 0]
        for i, name in enumerate(METRIC_NAMES):
            column = metrics[:, i + 1]
            self._final[name] = float(column[-1])
            finite = column[~np.isnan(column)]
            self._sum[name] = math.fsum((self._sum[name], math.fsum(finite.tolist())))
            self._count[name] += finite.size
            self._one_chunk_mean[name] = _nanmean(column)
        for name, threshold in SETTLE_THRESHOLDS.items():
            violating = ~(metrics[:, METRIC_NAMES.index(name) + 1] < threshold)
            settled, pending = self._settle[name]
            if violating.any():
                after = int(np.flatnonzero(violating)[-1]) + 1
                self._settle[name] = ((float(t[after]), False) if after < len(t)
                                      else (None, True))
            elif pending:
                self._settle[name] = (float(t[0]), False)
        closest = closest_approach(t, metrics[:, METRIC_NAMES.index('d_min') + 1])
        best = self._closest['d_min']
        if not math.isnan(closest['d_min']) and (math.isnan(best) or closest['d_min'] < best):
            self._closest = closest  # strictly smaller: the first time it was reached stays

    def result(self) -> dict:
        """Return the summary of every row added, as :func:`summarise` does."""
        if self._chunks == 1:
            mean = dict(self._one_chunk_mean)
        else:
            mean = {name: self._sum[name] / self._count[name] if self._count[name] else math.nan
                    for name in METRIC_NAMES}
        return {'final': dict(self._final), 'mean': mean,
                'settle_time': {name: self._settle[name][0] for name in SETTLE_THRESHOLDS},
                'closest': dict(self._closest)}


def __getattr__(name: str):
    """Import ``plots`` (matplotlib) when first used: runs without plots never load it."""
    if name == 'plots':
        from soliton_encirclement_ros.analysis import plots
        return plots
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


class OutputsIncomplete(Exception):
    """
    Some outputs could not be written (a full or read-only disk): ``problem`` says which.

    ``summary`` is the run's summary (what the run measured, written or not), so the caller can
    still print it; the outputs written before the failure stay in place.
    """

    def __init__(self, summary: dict | None, problem: str) -> None:
        super().__init__(problem)
        self.summary = summary
        self.problem = problem


def write_run_outputs(out_dir, result: RunResult, plots: bool = True, fmt: str = 'png',
                      incomplete: tuple[str, ...] = (), streamed: bool = False) -> dict:
    """
    Write a run's outputs into ``out_dir`` and return its summary.

    The outputs: metrics.csv, agents.csv, one figure per metric, dashboard, trajectories
    (when the result has trajectories, with ``params['radius']``, if present, drawn as the
    desired circle around the target's last position) and summary.json; ``plots=False``: no
    figures (and matplotlib is not imported). Figures are ``fmt`` files (``FIGURE_FORMATS``:
    png, or vector pdf/svg), titled with the run's identity (``plots.run_title``).

    The tables and summary.json come first, then the figures (which take the most room): each
    group is written into a temporary directory and moved into place only when all of it was
    written, so an error never leaves part of a group behind. A write that fails raises
    :class:`OutputsIncomplete` naming it; ``incomplete`` (what went wrong before, e.g. a
    stream) goes into summary.json as ``outputs_incomplete``. ``streamed``: metrics.csv and
    agents.csv were streamed into ``out_dir`` as the run went (:class:`RunTables`) and stay as
    they are; summary.json replaces the unfinished one.
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
    judged = result.judged
    window = None if judged is None else (judged['start'], judged['end'])
    summary = summarise(metrics, window)
    part = window is not None and (len(metrics) == 0 or window[0] > metrics[0, 0]
                                   or window[1] < metrics[-1, 0])
    if judged is not None:
        summary['phase'] = {**judged, 'closest': phase_summary(metrics, judged)['closest']}
        if part:
            whole = summarise(metrics)
            summary['whole_run'] = {key: whole[key] for key in ('final', 'mean', 'settle_time')}
    if result.phases is not None:
        summary['phases'] = [phase_summary(metrics, phase) for phase in result.phases]
    summary['real_time_factor'] = real_time_factor
    if result.area_margin is not None:
        summary['area_margin'] = result.area_margin
    summary['params'] = params
    _note_incomplete(summary, incomplete)

    def tables(staging: Path) -> None:
        if not streamed:
            _write_csv(staging / 'metrics.csv', METRICS_HEADER, metrics)
            _write_csv(staging / 'agents.csv', AGENTS_HEADER, agents)
        (staging / 'summary.json').write_text(json_text(summary))
    try:
        _staged(out_dir, tables, summary, 'summary.json' if streamed
                else 'metrics.csv, agents.csv and summary.json')
    except OutputsIncomplete:
        if streamed:  # the unfinished summary.json must not stay: the run did finish
            (out_dir / 'summary.json').unlink(missing_ok=True)
        raise
    if plots:
        phases = [(p['start'], p['end']) for p in result.phases or []] if part else []
        # the settle times marked are the summary's, found on every row (the window's, or the
        # whole run's), whatever the thinning keeps
        _staged(out_dir, lambda staging: _write_plots(
            staging, plot_columns(metrics), summary['settle_time'], trajectories, params,
            fmt, window if part else None, phases), summary, 'the figures')
    return summary


def plot_columns(metrics: np.ndarray) -> dict[str, np.ndarray]:
    """
    Return each metric's (M, 2) rows ``t,value`` of a (T, 7) series, thinned for its plot.

    A figure 100 dpi wide shows no more than a few points per pixel column: a long series is
    thinned as :func:`write_streamed_outputs` thins it (``stream.Envelope``: each bucket's first,
    last, smallest and largest value and its first gap), so it is drawn the same; a series of
    up to ``4 * stream.PLOT_BUCKETS`` rows is kept whole.
    """
    from soliton_encirclement_ros.analysis.plots import LOG_METRICS
    columns = {}
    for i, name in enumerate(METRIC_NAMES):
        envelope = Envelope(len(metrics), log=name in LOG_METRICS)
        envelope.append(metrics[:, 0], metrics[:, i + 1])
        columns[name] = envelope.array()
    return columns


def phase_summary(metrics: np.ndarray, phase: dict) -> dict:
    """
    Return ``phase`` (``start``, ``end`` [s]...) with the verdicts of the metrics rows in it.

    Its final values, means and settle times (:func:`summarise` over the phase) and its own
    closest approach (``closest``: the smallest ``d_min`` within the phase).
    """
    window = (phase['start'], phase['end'])
    inside = metrics[(metrics[:, 0] >= window[0]) & (metrics[:, 0] <= window[1])]
    judged = summarise(metrics, window)
    return {**phase, 'final': judged['final'], 'mean': judged['mean'],
            'settle_time': judged['settle_time'],
            'closest': closest_approach(inside[:, 0], inside[:, METRIC_NAMES.index('d_min') + 1])}


def write_streamed_outputs(out_dir, params: dict, trajectories=None,
                           real_time_factor: float | None = None, plots: bool = True,
                           fmt: str = 'png', area_margin: float | None = None,
                           incomplete: tuple[str, ...] = (), extra=None) -> dict | None:
    """
    Add the plots and summary.json to the metrics.csv and agents.csv streamed into ``out_dir``.

    What :func:`write_run_outputs` writes for the same rows (the arguments are those of
    :class:`RunResult`), in memory that does not grow with the run's length: metrics.csv is
    read in chunks (``stream.read_row_chunks``) into a :class:`RunningSummary` and, for the
    plots, into one ``stream.Envelope`` per metric (long series are thinned to a few points per
    pixel column, drawn the same; the settle times marked are those of every row). agents.csv
    is not read. A half row a killed writer left at the end of either file is cut off. Returns
    the summary, or None when metrics.csv holds no row (then nothing is written). summary.json
    is written first, then the figures (staged and moved into place together); a write that
    fails raises :class:`OutputsIncomplete`, as does ``incomplete`` (what went wrong while the
    tables were streamed: it goes into summary.json as ``outputs_incomplete`` too). ``extra``
    (a dict, or None) adds its keys to the summary before it is written.
    """
    if fmt not in FIGURE_FORMATS:  # before anything is written
        raise ValueError(f'figure format must be one of {", ".join(FIGURE_FORMATS)}, '
                         f'got {fmt!r}')
    out_dir = Path(out_dir)
    try:
        for name in ('metrics.csv', 'agents.csv'):
            if (out_dir / name).exists():
                trim_half_row(out_dir / name)
    except OSError as error:  # a read-only disk: the readers cut a half row off themselves
        incomplete = (*incomplete, write_problem(f'{name} not trimmed to whole rows', error))
    metrics_file = out_dir / 'metrics.csv'
    rows = count_rows(metrics_file) if metrics_file.exists() else 0
    if rows == 0:
        if incomplete:
            raise OutputsIncomplete(None, '; '.join(incomplete))
        return None
    running = RunningSummary()
    envelopes = {}
    if plots:
        from soliton_encirclement_ros.analysis.plots import LOG_METRICS
        envelopes = {name: Envelope(rows, log=name in LOG_METRICS) for name in METRIC_NAMES}
    for chunk in read_row_chunks(metrics_file, len(METRICS_HEADER)):
        running.add(chunk)
        for i, name in enumerate(envelopes):
            envelopes[name].append(chunk[:, 0], chunk[:, i + 1])
    summary = running.result()
    summary['real_time_factor'] = real_time_factor
    if area_margin is not None:
        summary['area_margin'] = area_margin
    summary['params'] = params
    summary.update(extra or {})
    _note_incomplete(summary, incomplete)
    _staged(out_dir, lambda staging: (staging / 'summary.json').write_text(json_text(summary)),
            summary, 'summary.json')
    if plots:
        _staged(out_dir, lambda staging: _write_plots(
            staging, {name: e.array() for name, e in envelopes.items()},
            summary['settle_time'], trajectories, params, fmt), summary, 'the figures')
    if incomplete:
        raise OutputsIncomplete(summary, '; '.join(incomplete))
    return summary


def _note_incomplete(summary: dict, incomplete: tuple[str, ...]) -> None:
    """Say in ``summary`` what was not written whole (only when something was not)."""
    if incomplete:
        summary['outputs_incomplete'] = list(incomplete)


def _staged(out_dir: Path, write, summary: dict, what: str) -> None:
    """
    ``write(staging)`` into a new directory in ``out_dir``, then move what it wrote into place.

    Nothing of it lands in ``out_dir`` when a write fails: :class:`OutputsIncomplete` names
    ``what`` and the reason, and the summary so far (and what went wrong before) goes with it.
    """
    staging = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix='.outputs-', dir=out_dir))
        write(staging)
        for produced in sorted(staging.iterdir()):
            os.replace(produced, out_dir / produced.name)
    except OSError as error:
        done = summary.get('outputs_incomplete', [])
        raise OutputsIncomplete(summary, '; '.join(
            [*done, write_problem(f'{what} not written', error)])) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _write_plots(staging: Path, columns: dict, settled: dict | None, trajectories,
                 params: dict, fmt: str, judged: tuple[float, float] | None = None,
                 phases: list[tuple[float, float]] = ()) -> None:
    """
    Write the figures: ``columns`` maps each metric to its (T, 2) rows ``t,value``.

    ``settled``: the settle times to mark, by metric (None: from ``columns``); ``judged``: the
    part of the run the summary judges (start, end) [s], shaded (None: the whole run);
    ``phases``: every part judged on its own (``judged`` among them), each shaded.
    """
    from soliton_encirclement_ros.analysis import plots
    title = plots.run_title(params)
    span = {} if judged is None else {'judged': judged, 'phases': phases}
    for name in METRIC_NAMES:
        plots.metric_plot(staging / plots.figure_name(name, fmt), {'': columns[name]}, name,
                          title, **({} if settled is None else
                                    {'settled': {'': settled.get(name)}}), **span)
    plots.dashboard(staging / plots.figure_name('dashboard', fmt), {'': columns}, title,
                    **({} if settled is None else {'settled': {'': settled}}), **span)
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


def separation_note(params: Mapping[str, Any]) -> str:
    """
    Return which ``d_safe`` a run flew, in words, from its summary's ``params``.

    ``d_safe_flown`` (``Scenario.as_dict``; swarm_sim: the least any agent flies after its
    params files) is the controller's ``d_safe`` sized to the ring; both 0: separation off (the
    reference law). ``d_safe_flown_by_agent`` (swarm_sim): each agent's, named when they differ.
    """
    flown = params.get('d_safe_flown')
    set_to = (params.get('controller') or {}).get('d_safe')
    by_agent = params.get('d_safe_flown_by_agent') or {}
    if flown is None:
        return 'separation: not recorded'
    if len(set(by_agent.values())) > 1:  # a params file set some agents apart
        each = ', '.join(f'{name} {value:.3g} m' for name, value in by_agent.items())
        return f'separation: d_safe flown differs between agents: {each}'
    if not flown:
        return 'separation: off (d_safe 0)'
    sized = ('' if set_to is None or flown == set_to
             else f' (d_safe {set_to:g} m, sized to the ring)')
    return f'separation: d_safe {flown:.3g} m flown{sized}'
