"""
A recorded flight's links, vehicle timeline and safety margins, and its one-file HTML report.

:func:`flight_data` reads ``/swarm/agent_states`` and ``/diagnostics`` from a bag (with the
odometry ``recompute.load_run`` already read) and computes :mod:`flight`'s tables;
:func:`write_report` writes ``report.html``: ONE self-contained file (figures as base64 data URIs,
CSS inline, no script, nothing loaded from elsewhere) made with jinja2, plus ``flight.json``
and the links and timeline figures; :func:`write_comparison` puts two runs side by side in
``comparison.html``. Times are seconds since the run's first odometry or agent state, as in
analyze_run's other outputs. No rclpy.
"""
from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field
import io
import json
import math
from pathlib import Path
from typing import Optional

import numpy as np

from ros_support.number_text import fixed
from soliton_encirclement_ros.analysis import flight
from soliton_encirclement_ros.analysis.bag_reader import Bag
from soliton_encirclement_ros.analysis.recompute import RecordedRun
from soliton_encirclement_ros.analysis.report import (
    INTERRUPTED_AT, interrupted_text, json_text, SHADED_FIGURES)
from soliton_encirclement_ros.core.metrics import NOT_SETTLED, SETTLE_THRESHOLDS
from soliton_encirclement_ros.interface import (
    agent_state_from_msg, AGENT_STATES_TOPIC, DIAGNOSTICS_TOPIC)
from soliton_encirclement_ros.provenance import code_identity, describe, PACKAGE, UNKNOWN

DIAGNOSTICS_TYPE = 'diagnostic_msgs/msg/DiagnosticArray'
AGENT_STATES_TYPE = 'std_msgs/msg/Float64MultiArray'
REPORT_FILE, COMPARISON_FILE, DATA_FILE = 'report.html', 'comparison.html', 'flight.json'
LINKS_FIGURE, TIMELINE_FIGURE = 'links', 'timeline'
MAX_PAIR_LINES = 12  # more pairs than this: the age figure draws one line per receiver
STATE_COLOURS = {
    'ok': 'tab:green', 'starting': 'tab:olive', 'blind': 'tab:orange',
    'target_lost': 'gold', 'failed': 'tab:red', flight.NO_STATUS: 'lightgrey',
    'idle': 'tab:gray', 'mode_requested': 'tab:cyan', 'arm_requested': 'tab:blue',
    'active': 'tab:green', flight.HOLDING: 'darkorange', 'landing': 'tab:purple',
    'hold_requested': 'tab:pink', flight.PX4_HOLD: 'crimson', flight.LANDED: 'dimgray'}
MIME = {'.png': 'image/png', '.svg': 'image/svg+xml'}  # the animation is not embedded
MAX_EVENTS = 20  # safety events listed in the verdicts; the timeline and margins hold the rest
NO_COMMIT = ('not recorded: the code was installed without its git checkout (the version '
             'identifies it)')


@dataclass
class FlightData:
    """Everything the flight report shows of one bag besides the metrics summary."""

    bag: str
    duration: float
    vehicles: list[str]
    agent_ids: dict[str, int]
    custom_data: dict[str, str]
    senders: list[flight.SenderLinks]
    receivers: flight.ReceiverLinks
    timeline: flight.Timeline
    margins: flight.Margins
    d_safe_source: str
    has_diagnostics: bool
    has_agent_states: bool
    area_file: Optional[str] = None
    notes: list[str] = field(default_factory=list)
    phase: Optional[flight.EngagedPhase] = None  # the part of the run the metrics judge
    phases: list[flight.EngagedPhase] = field(default_factory=list)  # each judged on its own

    def missing(self) -> Optional[str]:
        """Return one line saying what the bag lacks for the report, or None."""
        if not self.has_diagnostics:
            return (f'{self.bag} has no {DIAGNOSTICS_TOPIC}: no per-receiver link figures and '
                    'no vehicle timeline')
        return None


def read_statuses(bag, origin: float) -> Optional[list[flight.Status]]:
    """
    Return the statuses of a bag's ``/diagnostics``, times since ``origin`` (s of the bag clock).

    None when the bag has no ``/diagnostics`` of type :data:`DIAGNOSTICS_TYPE`.
    """
    with Bag(bag) as reader:
        if reader.topics.get(DIAGNOSTICS_TOPIC) != DIAGNOSTICS_TYPE:
            return None
        return [status for _, log_time, msg in reader.messages([DIAGNOSTICS_TOPIC])
                for status in _statuses(msg, log_time * 1e-9 - origin)]


def _statuses(msg, time: float) -> list[flight.Status]:
    """Return the :class:`flight.Status` records of one DiagnosticArray logged at ``time``."""
    return [flight.Status(time, str(st.name), int(st.level), str(st.message),
                          {str(kv.key): str(kv.value) for kv in st.values})
            for st in msg.status]


def flight_data(bag, run: RecordedRun, origin: float, *, d_safe: Optional[float] = None,
                area=None, area_file: Optional[str] = None,
                statuses: Optional[list[flight.Status]] = None,
                phase: Optional[flight.EngagedPhase] = None,
                phases: Optional[list[flight.EngagedPhase]] = None) -> FlightData:
    """
    Read a bag's agent states and diagnostics and compute the flight tables.

    ``run`` is the bag's :class:`RecordedRun` with times since ``origin`` (s of the bag clock);
    ``d_safe`` [m]: None takes the scenario's ``controller: d_safe`` from the bag's description,
    else :data:`flight.DEFAULT_D_SAFE`. ``area``: a ``core.area.SafetyArea`` or None.
    ``statuses``: the bag's /diagnostics already read (:func:`read_statuses`), None to read
    them here; ``phase``: the engaged phase the summary's top level judges, ``phases``: every
    engaged phase (each judged on its own), shown in the report.
    """
    states, notes = [], []
    bad = 0
    with Bag(bag) as reader:
        wanted = []
        has_states = reader.topics.get(AGENT_STATES_TOPIC) == AGENT_STATES_TYPE
        has_diagnostics = reader.topics.get(DIAGNOSTICS_TOPIC) == DIAGNOSTICS_TYPE
        if has_states:
            wanted.append(AGENT_STATES_TOPIC)
        if has_diagnostics and statuses is None:
            wanted.append(DIAGNOSTICS_TOPIC)
        statuses = [] if statuses is None else list(statuses)
        for topic, log_time, msg in reader.messages(wanted):
            t = log_time * 1e-9 - origin
            if topic == AGENT_STATES_TOPIC:
                try:
                    s = agent_state_from_msg(msg)
                except ValueError:
                    bad += 1
                    continue
                states.append((t, s.agent_id, s.incarnation, s.seq, s.stamp - origin))
            else:
                statuses.extend(_statuses(msg, t))
    if bad:
        notes.append(f'{bad} agent states of a layout this version does not decode were left '
                     'out of the sender figures')
    if not has_states:
        notes.append(f'no {AGENT_STATES_TOPIC} in the bag: no sender figures')
    stopped = recorded_interruption(run.custom_data)
    if stopped:
        notes.insert(0, f'partial: the recorded run was {stopped} (the bag says so)')
    if run.truncated:  # first: every figure and table below stops at the cut
        notes.insert(0, f'partial: the bag is truncated and only its readable part is analysed '
                        f'({run.truncated}); the flight may have gone on beyond it')
    ends = [track.t[-1] for track in run.agents.values()] + [run.target.t[-1]]
    ends += [s[0] for s in states[-1:]] + [s.time for s in statuses[-1:]]
    duration = float(max(ends))
    scenario = _scenario(run.custom_data)
    if d_safe is not None:
        source = '--d-safe'
    elif (d_safe := flight.d_safe_from_scenario(scenario)) is not None:
        source = "the bag's scenario (controller d_safe)"
    else:
        d_safe, source = flight.DEFAULT_D_SAFE, 'default (neither --d-safe nor the bag gives one)'
    times, positions = _positions(run)
    timeline = flight.timeline(statuses, end=duration)
    if has_diagnostics and not timeline.rows:
        notes.append(f'no vehicle timeline: none of the {len(statuses)} statuses in '
                     f'{DIAGNOSTICS_TOPIC} carries an agent state or a PX4 bridge phase (a '
                     'swarm_sim --engine run flies its agents as arrays, not agent nodes: its '
                     'statuses say only ok or failed)')
    return FlightData(
        str(bag), duration, list(run.agents), dict(run.agent_ids), dict(run.custom_data),
        flight.sender_links(states), flight.receiver_links(statuses), timeline,
        flight.margins(times, positions, d_safe, area),
        source, has_diagnostics, has_states, area_file, notes, phase,
        list(phases or ([phase] if phase is not None else [])))


def recorded_interruption(custom_data: dict) -> str:
    """Say that a bag's run was stopped before its end (its ``custom_data``), or ''."""
    at = custom_data.get(INTERRUPTED_AT)
    if at is None:
        return ''
    try:
        at = float(at)
    except ValueError:
        return f'interrupted ({INTERRUPTED_AT} {at!r})'
    return interrupted_text({INTERRUPTED_AT: at}, _scenario(custom_data).get('duration'))


def flight_json(data: FlightData) -> dict:
    """Return the flight tables as plain JSON-able values (``flight.json``)."""
    return {
        'bag': data.bag, 'duration': data.duration, 'vehicles': data.vehicles,
        'agent_ids': data.agent_ids, 'has_diagnostics': data.has_diagnostics,
        'missing': data.missing(), 'notes': data.notes,
        'senders': [{**asdict(s), 'loss': s.loss} for s in data.senders],
        'receivers': [{**asdict(p), 'loss': p.loss} for p in data.receivers.last],
        'pooled_loss': data.receivers.pooled_loss() if data.receivers.last else None,
        'transitions': [asdict(t) for t in data.timeline.transitions],
        'spans': [asdict(s) for s in data.timeline.spans],
        'd_safe': data.margins.d_safe, 'd_safe_source': data.d_safe_source,
        'area_file': data.area_file,
        'pairs': [asdict(p) for p in data.margins.pairs],
        'area': [asdict(a) for a in data.margins.area],
        'phase': data.phase.as_dict() if data.phase is not None else None,
    }


def write_report(out_dir, data: FlightData, summary: dict, fmt: str = 'png') -> Path:
    """
    Write report.html, flight.json and the links and timeline figures into ``out_dir``.

    ``summary`` is analyze_run's summary (``report.summarise`` plus params); every figure
    already in ``out_dir`` (png or svg) is embedded too. Return the report's path.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    for name, draw in ((LINKS_FIGURE, links_figure), (TIMELINE_FIGURE, timeline_figure)):
        fig = draw(data)
        if fig is None:
            continue
        fig.savefig(out_dir / f'{name}.{fmt}', dpi=100)
        buffer = io.BytesIO()
        fig.savefig(buffer, format='png', dpi=100)
        figures[name] = 'data:image/png;base64,' + base64.b64encode(buffer.getvalue()).decode()
    existing = [(path.stem, _data_uri(path)) for path in sorted(out_dir.iterdir())
                if path.suffix in MIME and path.stem not in (LINKS_FIGURE, TIMELINE_FIGURE)
                and not path.name.startswith('.')]
    (out_dir / DATA_FILE).write_text(json_text(flight_json(data)))
    text = _template(REPORT_TEMPLATE).render(
        run=_run_view(data, summary), figures=figures, existing=existing,
        shaded=SHADED_FIGURES)
    path = out_dir / REPORT_FILE
    staging = out_dir / f'.{REPORT_FILE}'
    staging.write_text(text, encoding='utf-8')
    staging.replace(path)
    return path


def write_comparison(path, runs: dict[str, tuple[FlightData, dict]]) -> Path:
    """Write one HTML file with the runs (label -> (data, summary)) side by side."""
    path = Path(path)
    views = [(label, _run_view(data, summary)) for label, (data, summary) in runs.items()]
    path.write_text(_template(COMPARISON_TEMPLATE).render(runs=views), encoding='utf-8')
    return path


def links_figure(data: FlightData):
    """Heat map of loss (senders x receivers) beside age over time; None without diagnostics."""
    from matplotlib.figure import Figure
    links = data.receivers
    if not links.last:
        return None
    fig = Figure(figsize=(11, 4.2))
    heat, ages = fig.subplots(1, 2, gridspec_kw={'width_ratios': [1, 1.5]})
    loss = links.matrix('loss').T  # rows senders, columns receivers
    image = heat.imshow(loss, cmap='viridis', vmin=0.0, vmax=max(0.05, float(np.nanmax(loss))),
                        origin='upper', aspect='auto')
    heat.set_xticks(range(len(links.receivers)), [str(r) for r in links.receivers])
    heat.set_yticks(range(len(links.senders)), [str(s) for s in links.senders])
    heat.set_xlabel('receiver (agent id)')
    heat.set_ylabel('sender (agent id)')
    heat.set_title('loss (last status of each receiver)')
    for (i, j), value in np.ndenumerate(loss):
        if np.isfinite(value):
            heat.text(j, i, f'{value:.2f}', ha='center', va='center', fontsize=8, color='w')
    fig.colorbar(image, ax=heat)
    if len(links.series) <= MAX_PAIR_LINES:
        for (receiver, sender), rows in links.series.items():
            ages.plot(rows[:, 0], rows[:, 2], marker='.', label=f'{sender} -> {receiver}')
        ages.set_title('mean age per pair (sender -> receiver)')
    else:
        for receiver in links.receivers:
            rows = np.concatenate([r for (rx, _), r in links.series.items() if rx == receiver])
            rows = rows[np.argsort(rows[:, 0], kind='stable')]
            times = np.unique(rows[:, 0])
            ages.plot(times, [np.nanmean(rows[rows[:, 0] == t, 2]) for t in times], marker='.',
                      label=f'receiver {receiver}')
        ages.set_title('mean age per receiver (over its senders)')
    ages.set_xlabel('time [s]')
    ages.set_ylabel('age: arrival - stamp [s]')
    ages.grid(True, alpha=0.3)
    ages.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig


def timeline_figure(data: FlightData):
    """One row per vehicle (agent state, PX4 phase) with coloured spans; None without rows."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    rows = data.timeline.rows
    if not rows:
        return None
    fig = Figure(figsize=(11, 1.0 + 0.45 * len(rows)))
    ax = fig.subplots()
    seen = {}
    for span in data.timeline.spans:
        y = rows.index((span.vehicle, span.source))
        colour = STATE_COLOURS.get(span.state, 'tab:brown')
        ax.broken_barh([(span.start, max(span.end - span.start, 1e-3))], (y - 0.4, 0.8),
                       facecolors=colour)
        seen.setdefault(span.state, colour)
    for phase in data.phases:
        if phase.rule != flight.BRIDGES:
            continue
        ax.axvspan(phase.start, phase.end, color='tab:green', alpha=0.08, lw=0, zorder=0)
        ax.axvline(phase.start, color='tab:green', ls='--', lw=0.8)
        ax.axvline(phase.end, color='tab:green', ls='--', lw=0.8)
        seen.setdefault(f'judged: engaged {phase.start:.1f}–{phase.end:.1f} s'
                        + (f' (phase {phase.number})' if phase.count > 1 else ''), 'honeydew')
    ax.set_yticks(range(len(rows)), [f'{v} {s}' for v, s in rows])
    ax.invert_yaxis()
    ax.set_xlim(0.0, max(data.duration, 1e-3))
    ax.set_xlabel('time [s]')
    ax.set_title('vehicle timeline (agent state; PX4 bridge phase)')
    ax.legend(handles=[Patch(color=c, label=s) for s, c in seen.items()], fontsize=8,
              loc='upper left', bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, axis='x', alpha=0.3)
    fig.tight_layout()
    return fig


def _positions(run: RecordedRun) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Every agent's odometry position at the union of their sample times (NaN before)."""
    if not run.agents:
        return np.empty(0), {}
    times = np.unique(np.concatenate([track.t for track in run.agents.values()]))
    positions = {}
    for name, track in run.agents.items():
        position, _, valid = track.at(times)
        positions[name] = np.where(valid[:, None], position, np.nan)
    return times, positions


def _scenario(custom_data: dict) -> dict:
    try:
        scenario = json.loads(custom_data.get('scenario', '{}'))
    except ValueError:
        return {}
    return scenario if isinstance(scenario, dict) else {}


def _data_uri(path: Path) -> str:
    return f'data:{MIME[path.suffix]};base64,' + base64.b64encode(path.read_bytes()).decode()


def _number(value, digits: int = 3) -> str:
    if value is None:
        return '–'
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(value):
        return '–'
    return fixed(value, digits)


def _run_view(data: FlightData, summary: dict) -> dict:
    """Everything the templates show of one run, as strings and small tables."""
    custom = data.custom_data
    stopped = recorded_interruption(data.custom_data)
    identity = [('bag', data.bag),
                ('duration', f'{data.duration:.2f} s' + (f' ({stopped})' if stopped else '')),
                ('vehicles', ', '.join(data.vehicles) or '–'),
                ('agent ids', ', '.join(f'{v}: {i}' for v, i in data.agent_ids.items()) or '–')]
    scenario = _scenario(custom)
    if custom:
        identity.append(('recorded with', describe(custom)))
    if custom.get('seed'):
        identity.append(('seed', custom['seed']))
    identity += _code_rows('recorded by', custom.get('package_version'),
                           custom.get('git_commit')) if custom else []
    if custom.get('recorder'):
        identity.append(('recorder', custom['recorder']))
    analysed = (summary.get('params') or {}).get('analysed_with') or code_identity()
    identity += _code_rows('analysed by', analysed.get('version'), analysed.get('commit'))
    if scenario:
        identity.append(('scenario', ', '.join(
            f'{k} {scenario[k]}' for k in ('agents', 'radius', 'duration', 'control_period',
                                           'loss', 'delay', 'failures_per_min')
            if k in scenario)))
    phase = summary.get('phase') or {}
    engaged = phase.get('rule') == flight.BRIDGES
    whole = summary.get('whole_run')
    header = ['final', 'mean', 'settles at'] + (
        ['whole recording: final', 'settles at'] if whole else [])
    metrics = []
    for name, final in summary.get('final', {}).items():
        row = [name, _number(final, 4), _number(summary.get('mean', {}).get(name), 4),
               _settle_text(summary, name, phase.get('start') if engaged else None)]
        if whole:
            row += [_number(whole['final'].get(name), 4), _settle_text(whole, name)]
        metrics.append(row)
    later = [(f'Engaged phase {p["number"]} of {p["count"]}: '
              + p['text'].removesuffix(f'; engaged phase {p["number"]} of {p["count"]}'),
              [[name, _number(final, 4), _number(p['mean'].get(name), 4),
                _settle_text(p, name, p['start'])] for name, final in p['final'].items()])
             for p in (summary.get('phases') or [])[1:]]
    closest = summary.get('closest', {})
    links = data.receivers
    look = [p for p in links.last if flight.worth_a_look(p)]
    return {
        'title': Path(data.bag).name, 'identity': identity, 'metrics': metrics,
        'metric_header': header, 'engaged': engaged, 'later_phases': later,
        'shown': (f'engaged phase 1 of {phase.get("count", 1)}' if engaged else 'the whole run'),
        'shading': _shading_text(phase) if engaged else None,
        'verdicts': _verdicts(summary), 'events': _safety_events(data),
        # a simulation's report says nothing of it: the whole run, as always
        'judged': phase.get('text') if phase.get('px4_bridges') else None,
        'phase_closest': _closest_text(phase.get('closest')),
        'closest': _closest_text(closest),
        'missing': data.missing(), 'notes': data.notes,
        'senders': [(s.sender, s.recorded, s.lost, _number(s.loss, 4), _number(s.age_mean, 4),
                     _number(s.age_p95, 4), _number(s.age_max, 4),
                     f'{_number(s.longest_silence, 3)} s at {_number(s.silence_start, 2)} s',
                     s.restarts) for s in data.senders],
        'pairs': [_pair_row(p) for p in links.last],
        'look_pairs': [_pair_row(p) for p in look], 'look_rule': flight.LOOK_RULE,
        'pooled_loss': _number(links.pooled_loss(), 4) if links.last else '–',
        'matrix': _matrix_view(links),
        'transitions': [(_number(t.time, 2), t.vehicle, t.source, t.before or 'start', t.after,
                         t.reason) for t in data.timeline.transitions],
        'd_safe': _number(data.margins.d_safe, 2), 'd_safe_source': data.d_safe_source,
        'margin_pairs': [(f'{p.a} – {p.b}', _number(p.closest), _number(p.time, 2),
                          _number(p.below, 2), _number(p.below_half, 2))
                         for p in data.margins.pairs],
        'area_file': data.area_file,
        'area': [(a.agent, _number(a.margin), _number(a.time, 2), _number(a.horizontal),
                  _number(a.vertical), _number(a.outside, 2)) for a in data.margins.area],
    }


def _shading_text(phase: dict) -> str:
    """Say what the metric plots shade: the engaged phases (``plots.judged_spans``)."""
    count = phase.get('count', 1)
    if count < 2:
        return ('shaded, the engaged phase judged (its interval in the legend); the settle '
                'times marked are its own')
    return (f'shaded, each of the {count} engaged phases, judged on its own (the verdicts; '
            'their intervals in the legend); the darker, phase '
            f'{phase.get("number", 1)} (judged), is the one the metrics table gives first and '
            'whose settle times are marked')


def _code_rows(who: str, version: Optional[str], commit: Optional[str]) -> list:
    """Return the Run table's rows of the code that recorded or analysed: version, commit."""
    rows = [(f'{who} version', f'{PACKAGE} {version or UNKNOWN}')]
    rows.append((f'{who} commit', commit if commit and commit != UNKNOWN else NO_COMMIT))
    return rows


def _pair_row(p: flight.PairLink) -> tuple:
    return (p.receiver, p.sender, p.heard, p.lost, _number(p.loss, 4), _number(p.age_mean, 4),
            _number(p.age_max, 4), _number(p.offset, 4), _number(p.time, 2), p.restarts)


def _verdicts(summary: dict) -> list[tuple]:
    """
    One row per part of the run judged: which, its interval, settled or not, closest approach.

    A recorded PX4 flight: each engaged phase (summary.json's ``phases``); else the whole run.
    """
    phases = summary.get('phases') or [{**(summary.get('phase') or {}), **summary}]
    rows = []
    for p in phases:
        engaged = p.get('rule') == flight.BRIDGES
        label = (f'engaged phase {p.get("number", 1)} of {p.get("count", 1)}' if engaged
                 else 'whole run')
        interval = (f'{_number(p.get("start"), 2)}–{_number(p.get("end"), 2)} s'
                    if 'start' in p else '–')
        start = p.get('start') if engaged else None
        settled = [_settle_text(p, name, start) for name in SETTLE_THRESHOLDS]
        finals = [_number((p.get('final') or {}).get(name), 4) for name in SETTLE_THRESHOLDS]
        rows.append((label, interval, *settled, *finals, _closest_text(p.get('closest'))))
    return rows


def _safety_events(data: FlightData) -> list[str]:
    """Say each safety event: pairs below d_safe, agents outside the area, failures, holds."""
    events = [f'{p.a} – {p.b} closer than d_safe ({_number(data.margins.d_safe, 2)} m) for '
              f'{_number(p.below, 2)} s; closest {_number(p.closest)} m at {_number(p.time, 2)} s'
              for p in data.margins.pairs if p.below > 0]
    events += [f'{a.agent} outside the safety area for {_number(a.outside, 2)} s; margin '
               f'{_number(a.margin)} m at {_number(a.time, 2)} s'
               for a in data.margins.area if a.outside > 0]
    events += [f'{_number(t.time, 2)} s: {t.vehicle} ({t.source}) {t.after}: {t.reason}'
               for t in data.timeline.transitions if t.after in flight.SAFETY_STATES
               and not (t.source == flight.AGENT and _left_the_ring(data, t))]
    if len(events) > MAX_EVENTS:
        events = events[:MAX_EVENTS] + [f'and {len(events) - MAX_EVENTS} more (see the '
                                        'timeline and the safety margins below)']
    return events


def _left_the_ring(data: FlightData, failed: flight.Transition) -> bool:
    """
    Whether an agent failed because its PX4 bridge took its vehicle out of the ring.

    (Landing, idle, Hold: the timeline says why.) Its bridge is not engaged at the failure or
    within one status period after it (the two nodes report each at its own time).
    """
    spans = [s for s in data.timeline.spans
             if (s.vehicle, s.source) == (failed.vehicle, flight.PX4)]
    engaged = (flight.ACTIVE, flight.HOLDING)
    return any(s.start <= t < s.end and s.state not in engaged for s in spans
               for t in (failed.time, failed.time + flight.STATUS_PERIOD))


def _settle_text(summary: dict, name: str, start: Optional[float] = None) -> str:
    """Say when a metric settles; ``start``: the engaged phase's, also counted from."""
    times = summary.get('settle_time', {})
    if name not in times:
        return 'n/a'
    settle = times[name]
    if settle is None:
        return NOT_SETTLED
    return f'{settle:.2f} s' + ('' if start is None else f' ({settle - start:.2f} s engaged)')


def _closest_text(closest: Optional[dict]) -> str:
    if not closest:
        return '–'
    return f'{_number(closest.get("d_min"))} m at {_number(closest.get("time"), 2)} s'


def _matrix_view(links: flight.ReceiverLinks) -> dict:
    loss = links.matrix('loss').T if links.last else np.empty((0, 0))
    age = links.matrix('age_mean').T if links.last else np.empty((0, 0))
    return {'receivers': links.receivers,
            'rows': [(sender, [(_number(loss[i, j], 3), _number(age[i, j], 3))
                               for j in range(loss.shape[1])])
                     for i, sender in enumerate(links.senders)]}


def _template(source: str):
    try:
        import jinja2
    except ImportError:  # pragma: no cover - the standalone extra installs it
        raise RuntimeError('the flight report needs jinja2 (pip install jinja2)') from None
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.from_string(MACROS + source)


STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ccc; padding-top: 0.6em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; } td.l, th.l { text-align: left; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.3em 0; }
.missing { background: #fff3cd; border: 1px solid #e0c060; padding: 0.4em 0.8em; }
.side { display: flex; gap: 1.5em; align-items: flex-start; }
.side > div { flex: 1; min-width: 0; overflow-x: auto; }
figure { margin: 0.5em 0; } figcaption { font-size: 0.85em; color: #555; }
"""

MACROS = """
{% macro verdicts(run) %}
<table class="verdicts"><tr><th class="l">part of the run</th><th>interval</th>
<th>E_gap settles at</th><th>E_r settles at</th><th>final E_gap</th><th>final E_r</th>
<th>closest approach</th></tr>
{% for row in run.verdicts %}<tr><td class="l">{{ row[0] }}</td>
{% for cell in row[1:] %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}
</table>
<p>Closest approach (d_min of the live agents){% if run.engaged %}, whole recording{% endif %}:
{{ run.closest }}</p>
{% if run.events %}
<p class="missing">Safety events:</p>
<ul class="events">{% for event in run.events %}<li>{{ event }}</li>{% endfor %}</ul>
{% else %}
<p class="events">No safety event: no pair closer than d_safe ({{ run.d_safe }} m),
{% if run.area_file %}no agent outside the safety area{% else %}no safety area given{% endif %},
no agent failed, no PX4 bridge holding or in Hold.</p>
{% endif %}
{% endmacro %}
{% macro identity(run) %}
<table>{% for key, value in run.identity %}
<tr><th class="l">{{ key }}</th><td class="l">{{ value }}</td></tr>{% endfor %}
</table>
{% endmacro %}
{% macro summary(run) %}
{% if run.later_phases %}<p>Shown first: {{ run.shown }}; the later phases follow.</p>{% endif %}
{% if run.judged %}<p class="judged">Judged: {{ run.judged }}</p>{% endif %}
<table class="metrics"><tr><th class="l">metric</th>
{% for title in run.metric_header %}<th>{{ title }}</th>{% endfor %}</tr>
{% for row in run.metrics %}
<tr><td class="l">{{ row[0] }}</td>{% for cell in row[1:] %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% if run.engaged %}
<p>Final values, means and settle times over the engaged phase (a real flight starts on the
ground and ends landed); settle times count from the recording's start and, in brackets,
from the start of the engaged phase.</p>
<p>Closest approach (d_min of the live agents), whole recording: {{ run.closest }}; engaged
phase: {{ run.phase_closest }}</p>
{% else %}
<p>Closest approach (d_min of the live agents): {{ run.closest }}</p>
{% endif %}
{% for title, rows in run.later_phases %}
<p class="judged">{{ title }}</p>
<table class="metrics"><tr><th class="l">metric</th><th>final</th><th>mean</th>
<th>settles at</th></tr>
{% for row in rows %}
<tr><td class="l">{{ row[0] }}</td>{% for cell in row[1:] %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endfor %}
{% endmacro %}
{% macro links(run) %}
<h3>Per sender, as the recorder heard /swarm/agent_states</h3>
<table class="senders"><tr><th>sender</th><th>recorded</th><th>lost</th><th>loss</th>
<th>age mean [s]</th><th>age p95 [s]</th><th>age max [s]</th><th>longest silence</th>
<th>restarts</th></tr>
{% for row in run.senders %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% else %}<tr><td colspan="9" class="l">no agent states recorded</td></tr>{% endfor %}
</table>
<p>Emulated loss happens at the receivers: the recorder sees no gaps from it, the receivers'
figures below do.</p>
<h3>Per receiver (who heard whom), from /diagnostics</h3>
{% if run.pairs %}
<p>Loss over every pair's last status: {{ run.pooled_loss }}</p>
<p>Pairs worth a look ({{ run.look_rule }}): {{ run.look_pairs | length }} of
{{ run.pairs | length }}.</p>
{% if run.look_pairs %}
<table class="look"><tr><th>receiver</th><th>sender</th><th>heard</th><th>lost</th>
<th>loss</th><th>age mean [s]</th><th>age max [s]</th><th>clock offset [s]</th>
<th>status at [s]</th><th>restarts</th></tr>
{% for row in run.look_pairs %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
{% endif %}
<details><summary>Every pair ({{ run.pairs | length }}): the matrix and the full table</summary>
<table class="matrix"><tr><th>sender \\ receiver</th>
{% for r in run.matrix.receivers %}<th>{{ r }}</th>{% endfor %}</tr>
{% for sender, cells in run.matrix.rows %}<tr><th>{{ sender }}</th>
{% for loss, age in cells %}<td>{{ loss }} / {{ age }} s</td>{% endfor %}</tr>{% endfor %}
</table>
<p>Cells: loss / mean age, from each receiver's last status (its link window).</p>
<table class="receivers"><tr><th>receiver</th><th>sender</th><th>heard</th><th>lost</th>
<th>loss</th><th>age mean [s]</th><th>age max [s]</th><th>clock offset [s]</th>
<th>status at [s]</th><th>restarts</th></tr>
{% for row in run.pairs %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</table>
</details>
{% else %}<p class="missing">No per-receiver link figures in this bag.</p>{% endif %}
{% endmacro %}
{% macro transitions(run) %}
{% if run.transitions %}
<table class="transitions"><tr><th>time [s]</th><th class="l">vehicle</th><th class="l">source</th>
<th class="l">from</th><th class="l">to</th><th class="l">reason</th></tr>
{% for time, vehicle, source, before, after, reason in run.transitions %}
<tr><td>{{ time }}</td><td class="l">{{ vehicle }}</td><td class="l">{{ source }}</td>
<td class="l">{{ before }}</td><td class="l">{{ after }}</td><td class="l">{{ reason }}</td></tr>
{% endfor %}</table>
{% else %}<p class="missing">No vehicle statuses in this bag.</p>{% endif %}
{% endmacro %}
{% macro margins(run) %}
<p>d_safe = {{ run.d_safe }} m ({{ run.d_safe_source }}); horizontal distances, as the
controller's separation and d_min.</p>
<table class="margins"><tr><th class="l">pair</th><th>closest [m]</th><th>at [s]</th>
<th>below d_safe [s]</th><th>below d_safe/2 [s]</th></tr>
{% for pair, closest, time, below, half in run.margin_pairs %}
<tr><td class="l">{{ pair }}</td><td>{{ closest }}</td><td>{{ time }}</td><td>{{ below }}</td>
<td>{{ half }}</td></tr>{% endfor %}</table>
{% if run.area_file %}
<p>Safety area {{ run.area_file }}: margin = the smaller of the horizontal distance to the
boundary and the distance to z_min/z_max; negative outside.</p>
<table class="area"><tr><th class="l">agent</th><th>margin [m]</th><th>at [s]</th>
<th>horizontal [m]</th><th>vertical [m]</th><th>outside [s]</th></tr>
{% for row in run.area %}<tr><td class="l">{{ row[0] }}</td>
{% for cell in row[1:] %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}</table>
{% else %}<p>No safety area given (--safety-area FILE).</p>{% endif %}
{% endmacro %}
"""

REPORT_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Flight report: {{ run.title }}</title>
<style>""" + STYLE + """</style></head>
<body>
<h1>Flight report: {{ run.title }}</h1>
{% if run.missing %}<p class="missing">{{ run.missing }}</p>{% endif %}
{% for note in run.notes %}<p class="missing">{{ note }}</p>{% endfor %}
<h2>Verdicts</h2>
{{ verdicts(run) }}
<h2>Figures</h2>
{% if figures.get('timeline') %}
<figure><img alt="vehicle timeline" src="{{ figures['timeline'] }}">
<figcaption>vehicle timeline{% if run.engaged %}: the engaged phases judged shaded (the legend
gives their intervals){% endif %}</figcaption></figure>
{% endif %}
{% for name, uri in existing %}
<figure><img alt="{{ name }}" src="{{ uri }}"><figcaption>{{ name }}{% if run.shading and
name in shaded %}: {{ run.shading }}{% endif %}</figcaption></figure>
{% endfor %}
{% if figures.get('links') %}<figure><img alt="link loss and age" src="{{ figures['links'] }}">
<figcaption>Left: loss per sender and receiver. Right: age (arrival - stamp) over time.
</figcaption></figure>{% endif %}
<h2>Run</h2>
{{ identity(run) }}
<h2>Metrics</h2>
{{ summary(run) }}
<h2>Links</h2>
{{ links(run) }}
<h2>Vehicle timeline</h2>
{{ transitions(run) }}
<h2>Safety margins (worst first)</h2>
{{ margins(run) }}
</body></html>
"""

COMPARISON_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Comparison: {{ runs | map(attribute=0) | join(' vs ') }}</title>
<style>""" + STYLE + """</style></head>
<body>
<h1>Comparison: {{ runs | map(attribute=0) | join(' vs ') }}</h1>
{% for section, macro in [('Verdicts', verdicts), ('Run', identity), ('Metrics', summary),
                          ('Links', links),
                          ('Vehicle transitions', transitions),
                          ('Safety margins (worst first)', margins)] %}
<h2>{{ section }}</h2>
<div class="side">
{% for label, run in runs %}<div><h3>{{ label }}</h3>
{% if section == 'Verdicts' and run.missing %}<p class="missing">{{ run.missing }}</p>
{% endif %}
{% if section == 'Verdicts' %}{% for note in run.notes %}<p class="missing">{{ note }}</p>
{% endfor %}{% endif %}
{{ macro(run) }}</div>
{% endfor %}</div>
{% endfor %}
</body></html>
"""
