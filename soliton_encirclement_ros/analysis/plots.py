"""
Static figures of a run: metric curves (one run or several overlaid), dashboard, trajectories.

Uses matplotlib's object API (no pyplot state), so it is safe off the main thread and needs no
display. Each ``runs``/``series`` mapping is keyed by a label; an empty label draws no legend.
Figures are written as PNG, or as vector PDF/SVG (``FORMATS``) for papers: the file's suffix
picks the format. E_r, E_gap and rho, which converge to 0 over orders of magnitude, are drawn
on log axes, with the settle thresholds (``SETTLE_THRESHOLDS``) and settle times marked.
"""
from __future__ import annotations

import json
from pathlib import Path
import re
from typing import NamedTuple, Sequence

import matplotlib
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatterSciNotation
import numpy as np

from soliton_encirclement_ros.analysis.outputs import FIGURE_FORMATS
from soliton_encirclement_ros.core.gains import ControllerParams, PRESETS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES, SETTLE_THRESHOLDS, settle_time
from soliton_encirclement_ros.provenance import package_version

METRIC_LABELS = {
    'E_r': 'E_r (radial error / R)',
    'E_vr': 'E_vr [m/s]',
    'rho': 'rho (order parameter)',
    'G_max': 'G_max (worst gap / ideal)',
    'E_gap': 'E_gap (gap RMS error)',
    'd_min': 'd_min [m] (closest two agents)',
}
# Metrics that go to 0: a log axis shows 2e-7 apart from 0.05.
LOG_METRICS = ('E_r', 'rho', 'E_gap')
FORMATS = FIGURE_FORMATS
DPI = 100
# Fixed margins of the metric plots and the dashboard [in] (see _fixed_margins).
MARGIN_LEFT_IN = 0.75
MARGIN_RIGHT_IN = 0.15
MARGIN_BOTTOM_IN = 0.5
MARGIN_TOP_IN = 0.15
MARGIN_TITLE_IN = 0.45
GAP_WIDTH_IN = 0.85   # between columns: the next axes' tick and axis labels
GAP_HEIGHT_IN = 0.6   # between rows: the x axis label
THRESHOLD_COLOUR = 'tab:red'
JUDGED_COLOUR = 'tab:green'  # the parts of a run judged (a flight's engaged phases)
JUDGED_ALPHA = 0.12  # the part the summary's top level judges (the settle times marked)
OTHER_ALPHA = 0.06   # every other part judged on its own (a flight's other engaged phases)
# trajectories.png names each agent in its legend up to this many tracks (the target's
# included); above, the agents go unnamed and are drawn as one artist each for their paths,
# their starts and their ends (three Line2D per agent were a fifth of the figure's CPU time
# at 50 agents).
NAMED_TRACKS_MAX = 12


def preset_name(controller) -> str:
    """
    Name of the preset (``PRESETS``) whose gains ``controller`` has, or 'custom'.

    ``controller`` is a scenario's overrides or its resolved gains (summary.json's
    ``params['controller']``); a gain it does not give has its default value.
    """
    controller = dict(controller or {})
    defaults = ControllerParams().as_dict()
    gains = set().union(*PRESETS.values())
    for name, preset in PRESETS.items():
        expected = {**defaults, **preset}
        if all(controller.get(key, defaults[key]) == expected[key] for key in gains):
            return name
    return 'custom'


def run_title(params: dict) -> str:
    """
    One line naming a run: N, seed, R, preset and this package's version.

    A bag's own description (``params['bag_custom_data']``, written by swarm_sim) gives what
    ``params`` lacks; what neither says is left out, e.g. the seed of a ``ros2 bag record`` bag.
    """
    params = {**_described_scenario(params.get('bag_custom_data')), **params}
    parts = []
    if params.get('bag'):
        parts.append(Path(str(params['bag'])).name)
    agents = params.get('agents')
    if isinstance(agents, (list, tuple)):
        agents = len(agents)
    if agents is not None:
        parts.append(f'N = {int(agents)}')
    if params.get('seed') is not None:
        parts.append(f'seed {params["seed"]}')
    if params.get('radius') is not None:
        parts.append(f'R = {float(params["radius"]):g} m')
    if 'preset' in params or 'controller' in params:
        parts.append(f'preset {params.get("preset") or preset_name(params.get("controller"))}')
    parts.append(f'soliton_encirclement_ros {package_version()}')
    return ', '.join(parts)


def _described_scenario(custom_data) -> dict:
    """Seed and controller gains of a bag's ``custom_data`` (strings), or {}."""
    if not isinstance(custom_data, dict):
        return {}
    try:
        scenario = json.loads(custom_data.get('scenario') or '{}')
    except ValueError:
        scenario = {}
    described = {key: scenario[key] for key in ('seed', 'controller') if key in scenario}
    if 'seed' not in described and custom_data.get('seed') not in (None, 'None'):
        described['seed'] = custom_data['seed']
    return described


_SUPERSCRIPTS = str.maketrans('0123456789-\N{MINUS SIGN}', '⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁻')
_MATHDEFAULT = re.compile(r'^\$\\mathdefault\{(.*)\}\$$')
_EXPONENT = re.compile(r'\^\{([^}]*)\}')


class PlainLogFormatter(LogFormatterSciNotation):
    """
    The labels of a log axis as matplotlib writes them (10⁻⁵, 2×10⁻¹), in plain text.

    Matplotlib's own are mathtext, and laying them out was a fifth of the figures' cost.
    """

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        math = _MATHDEFAULT.match(label)
        if math is None:
            return label
        text = math.group(1).replace('\\times', '×')
        return _EXPONENT.sub(lambda power: power.group(1).translate(_SUPERSCRIPTS), text)


def metric_plot(path: Path, series: dict[str, np.ndarray], name: str,
                title: str | None = None, settled: dict | None = None,
                judged: tuple[float, float] | None = None,
                phases: Sequence[tuple[float, float]] = ()) -> Figure:
    """
    One metric against time; ``series`` maps a label to (T, 2) rows ``t,value``.

    ``settled`` maps a label to the settle time to mark (None: never settled) when the series
    is thinned (``stream.Envelope``) or judged on a part of the run, and the time was found
    there; a label it lacks has its settle time found on its series. ``judged``: the part of
    the run (start, end) [s] the summary judges (a flight's engaged phase), shaded. ``phases``:
    every part of the run judged on its own (a flight's engaged phases, ``judged`` among them),
    in time order, each shaded (:func:`judged_spans`): with two or more, each is numbered in
    the legend and ``judged`` is the darker one, ``phase k (judged)``. Returns the figure
    (already written to ``path``).
    """
    fig = Figure(figsize=(6, 3.4), dpi=DPI)
    ax = fig.add_subplot()
    _draw_series(ax, series, name, settled, judged_spans(judged, phases))
    if title:
        fig.suptitle(title, fontsize='small')
    _fixed_margins(fig, titled=bool(title))
    _save(fig, path)
    return fig


def dashboard(path: Path, runs: dict, title: str | None = None,
              settled: dict | None = None, judged: tuple[float, float] | None = None,
              phases: Sequence[tuple[float, float]] = ()) -> Figure:
    """
    Every metric in one figure; ``runs`` maps a label to a (T, 1 + len(METRIC_NAMES)) array.

    Or to a mapping of each metric name to its own (T, 2) rows ``t,value`` (thinned series).
    ``settled`` maps a label to {metric: settle time to mark}, and ``judged`` and ``phases``
    are the parts of the run judged, as for :func:`metric_plot`. Returns the figure (already
    written to ``path``), so tests can look at its axes.
    """
    fig = Figure(figsize=(10, 8.4), dpi=DPI)
    axes = fig.subplots((len(METRIC_NAMES) + 1) // 2, 2).ravel()
    spans = judged_spans(judged, phases)
    for i, (ax, name) in enumerate(zip(axes, METRIC_NAMES)):
        marks = None if settled is None else {
            label: times[name] for label, times in settled.items() if name in times}
        _draw_series(ax, {label: _column(m, i, name) for label, m in runs.items()}, name,
                     marks, spans)
    for ax in axes[len(METRIC_NAMES):]:
        ax.set_axis_off()
    if title:
        fig.suptitle(title)
    _fixed_margins(fig, titled=bool(title), rows=(len(METRIC_NAMES) + 1) // 2, columns=2)
    _save(fig, path)
    return fig


def trajectory_plot(path: Path, trajectories: dict[str, np.ndarray], radius: float | None,
                    title: str | None = None) -> Figure:
    """
    XY paths from a start marker (open circle) to an end marker (dot); ``'target'``: the target.

    With the desired circle of ``radius`` around its last position when both are known. The
    legend sits outside the axes, so it never covers the target or the ring. Returns the figure
    (already written to ``path``).
    """
    fig = Figure(figsize=(7.6, 6), dpi=DPI)
    ax = fig.add_subplot()
    agents = {name: np.asarray(track, dtype=float) for name, track in trajectories.items()
              if name != 'target' and np.asarray(track).size}
    if len(trajectories) > NAMED_TRACKS_MAX:  # too many agents to name
        _unnamed_tracks(ax, list(agents.values()))
    else:
        for name, track in agents.items():
            line, = ax.plot(track[:, 1], track[:, 2], lw=0.8, label=name)
            ax.plot(track[0, 1], track[0, 2], 'o', mfc='none', color=line.get_color(), ms=6)
            ax.plot(track[-1, 1], track[-1, 2], 'o', color=line.get_color(), ms=5)
    target = np.asarray(trajectories.get('target', np.empty((0, 3))), dtype=float)
    if target.size:
        ax.plot(target[:, 1], target[:, 2], 'k--', lw=1.2, label='target')
        ax.plot(target[0, 1], target[0, 2], 'k^', mfc='none', ms=9)
        ax.plot(target[-1, 1], target[-1, 2], 'k*', ms=12)
        if radius:
            angle = np.linspace(0.0, 2.0 * np.pi, 200)
            ax.plot(target[-1, 1] + radius * np.cos(angle), target[-1, 2] + radius * np.sin(angle),
                    color='0.5', lw=0.8, ls=':', label=f'desired circle (R={radius:g} m)')
    # Proxy entries explain the markers once, whatever the number of agents.
    ax.plot([], [], 'o', mfc='none', color='0.3', label='start')
    ax.plot([], [], 'o', color='0.3', label='end')
    ax.set_aspect('equal', adjustable='datalim')
    ax.set_xlabel('x [m] (ENU)')
    ax.set_ylabel('y [m] (ENU)')
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize='small', loc='upper left', bbox_to_anchor=(1.02, 1.0),
              borderaxespad=0.0)
    if title:
        ax.set_title(title, fontsize='small')
    fig.tight_layout()
    _save(fig, path)
    return fig


def _unnamed_tracks(ax, tracks: list[np.ndarray]) -> None:
    """
    Draw agents' (T, 3) ``t, x, y`` tracks as :func:`trajectory_plot` does, unnamed.

    The same colours (the axes' colour cycle, one per agent in order), widths and markers
    as a line and two markers per agent, in three artists: the paths (a ``LineCollection``),
    the open circles at the starts and the dots at the ends (two ``scatter``).
    """
    cycle = matplotlib.rcParams['axes.prop_cycle'].by_key()['color']
    colours = [cycle[i % len(cycle)] for i in range(len(tracks))]
    ax.add_collection(LineCollection([track[:, 1:3] for track in tracks], colors=colours,
                                     linewidths=0.8, zorder=2))
    edge = matplotlib.rcParams['lines.markeredgewidth']
    starts = np.array([track[0, 1:3] for track in tracks]).reshape(-1, 2)
    ends = np.array([track[-1, 1:3] for track in tracks]).reshape(-1, 2)
    # scatter's size is the marker's area in points² (a Line2D's markersize squared)
    ax.scatter(starts[:, 0], starts[:, 1], s=6 ** 2, marker='o', facecolors='none',
               edgecolors=colours, linewidths=edge, zorder=2)
    ax.scatter(ends[:, 0], ends[:, 1], s=5 ** 2, marker='o', c=colours, edgecolors='face',
               linewidths=edge, zorder=2)


def _column(run, i: int, name: str) -> np.ndarray:
    """(T, 2) rows ``t,value`` of metric ``i`` (``name``) of a dashboard run."""
    if isinstance(run, dict):
        return run[name]
    return np.asarray(run)[:, [0, i + 1]]


class Shade(NamedTuple):
    """One shaded span of a metric plot: a part of the run judged [s], its legend label."""

    start: float
    end: float
    label: str
    alpha: float


def judged_spans(judged: tuple[float, float] | None,
                 phases: Sequence[tuple[float, float]] = ()) -> list[Shade]:
    """
    Return the shaded spans of a metric plot, in time order.

    ``judged`` (the part the summary's top level judges) alone, or none: its span is labelled
    ``judged a–b s``. Two or more parts judged on their own (``phases``, ``judged`` among them):
    each is ``phase k: a–b s``, the judged one ``phase k (judged): a–b s`` and darker.
    """
    parts = sorted({(float(a), float(b)) for a, b in phases}
                   | ({(float(judged[0]), float(judged[1]))} if judged is not None else set()))
    if len(parts) < 2:
        return [Shade(a, b, f'judged {a:.1f}–{b:.1f} s', JUDGED_ALPHA) for a, b in parts]
    key = None if judged is None else (float(judged[0]), float(judged[1]))
    return [Shade(a, b, f'phase {k}{" (judged)" if (a, b) == key else ""}: {a:.1f}–{b:.1f} s',
                  JUDGED_ALPHA if (a, b) == key else OTHER_ALPHA)
            for k, (a, b) in enumerate(parts, start=1)]


def _draw_series(ax, series: dict[str, np.ndarray], name: str, settled: dict | None = None,
                 spans: Sequence[Shade] = ()) -> None:
    log = name in LOG_METRICS
    threshold = SETTLE_THRESHOLDS.get(name)
    for start, end, label, alpha in spans:
        ax.axvspan(start, end, color=JUDGED_COLOUR, alpha=alpha, lw=0, label=label)
    for label, values in series.items():
        values = np.asarray(values, dtype=float)
        t, v = values[:, 0], values[:, 1]
        # Exact zeros (a perfect ring) have no place on a log axis: they are left out.
        line, = ax.plot(t, np.where(v > 0, v, np.nan) if log else v, lw=1.0,
                        label=label or None)
        if threshold is None:
            settled_at = None
        elif settled is not None and label in settled:  # found on the rows before thinning
            settled_at = settled[label]
        else:
            settled_at = settle_time(t, v, threshold)
        if settled_at is not None:
            ax.axvline(settled_at, color=line.get_color(), ls=':', lw=1.0,
                       label=f'settled {settled_at:.1f} s' + (f' ({label})' if label else ''))
    if log:
        ax.set_yscale('log')
        ax.yaxis.set_major_formatter(PlainLogFormatter())
        ax.yaxis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))
    if threshold is not None:
        ax.axhline(threshold, color=THRESHOLD_COLOUR, ls='--', lw=0.9,
                   label=f'threshold {threshold:g}')
    ax.set_xlabel('time [s]')
    ax.set_ylabel(METRIC_LABELS[name])
    ax.grid(True, alpha=0.3)
    if any(series) or threshold is not None or spans:
        ax.legend(fontsize='small')


def _fixed_margins(fig: Figure, titled: bool, rows: int = 1, columns: int = 1) -> None:
    """
    Place the axes by margins fixed in inches (room for tick labels, axis labels, a title).

    What ``tight_layout`` would find for these plots, at half the drawing cost: it measures
    every tick label (six metric plots: 1.15-1.22 CPU-s with it, 0.58 with fixed margins).
    """
    width, height = fig.get_size_inches()
    top = MARGIN_TITLE_IN if titled else MARGIN_TOP_IN
    # wspace/hspace are fractions of one axes' width/height.
    axes_width = (width - MARGIN_LEFT_IN - MARGIN_RIGHT_IN
                  - (columns - 1) * GAP_WIDTH_IN) / columns
    axes_height = (height - MARGIN_BOTTOM_IN - top - (rows - 1) * GAP_HEIGHT_IN) / rows
    fig.subplots_adjust(left=MARGIN_LEFT_IN / width, right=1.0 - MARGIN_RIGHT_IN / width,
                        bottom=MARGIN_BOTTOM_IN / height, top=1.0 - top / height,
                        wspace=GAP_WIDTH_IN / axes_width, hspace=GAP_HEIGHT_IN / axes_height)


def _save(fig: Figure, path: Path) -> None:
    path = Path(path)
    fmt = path.suffix.lstrip('.').lower()
    if fmt not in FORMATS:
        raise ValueError(f'figure format must be one of {", ".join(FORMATS)}, got {fmt!r}')
    # TrueType fonts in PDFs (publishers refuse Type 3) and real text in SVGs (editable).
    with matplotlib.rc_context({'pdf.fonttype': 42, 'svg.fonttype': 'none'}):
        fig.savefig(path, format=fmt)


def figure_name(name: str, fmt: str = 'png') -> str:
    """File name of the figure ``name`` in format ``fmt`` (one of ``FORMATS``)."""
    if fmt not in FORMATS:
        raise ValueError(f'--format must be one of {", ".join(FORMATS)}, got {fmt!r}')
    return f'{name}.{fmt}'


__all__ = ['dashboard', 'figure_name', 'FORMATS', 'judged_spans', 'LOG_METRICS', 'metric_plot',
           'preset_name', 'run_title', 'trajectory_plot']
