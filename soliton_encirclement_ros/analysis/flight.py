"""
What a recorded flight says about the links, the vehicles and the safety margins (pure, no rclpy).

Every function takes plain numbers (arrays, lists, :class:`Status` records) and returns small
dataclasses, so it can be tested on synthetic inputs and fed from any bag reader
(``flight_report`` reads them from a bag):

- :func:`sender_links`: per sender, what the recorder of the bag heard of ``/swarm/agent_states``:
  states recorded, lost (gaps in ``seq`` within one incarnation), age at the recorder (log time
  minus stamp), the longest silence and the restarts. The recorder drops nothing an agent drops
  at its receiver (emulated loss, ``core.comms``): those losses show in :func:`receiver_links`.
- :func:`receiver_links`: who heard whom, from the agents' 1 Hz ``/diagnostics`` values
  ``link.<sender>`` (``core.links.LinkFigures.text``, over the agents' link window).
- :func:`timeline`: each vehicle's agent state (ok, starting, blind, target_lost, failed) and PX4
  bridge phase (idle ... landing; ``holding``: active but holding zero velocity; ``hold``: PX4 in
  Hold, the operator's stop; ``landed``: :func:`bridge_state`) over time, with the transitions
  and their reasons.
- :func:`engaged_phase`: the part of a recorded flight the metrics are judged on, from the PX4
  bridges' phases (the whole run when the bag has no PX4 bridge status: a simulation).
- :func:`margins`: per pair of agents the closest horizontal approach and the time spent below
  ``d_safe`` and below half of it (the controller's separation is horizontal, as ``d_min``); per
  agent the margin to a safety area (horizontal and vertical, negative outside). Worst first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
import itertools
import math
import re
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from soliton_encirclement_ros.core.links import parse_link_text
from soliton_encirclement_ros.px4.offboard import Phase

# Columns of the rows :func:`sender_links` takes: one recorded agent state each.
SENDER_COLUMNS = ('log_time', 'agent_id', 'incarnation', 'seq', 'stamp')
LINK_KEY = 'link.'            # /diagnostics key of one sender's figures at a receiver
AGENT_SUFFIX = '/agent'       # /diagnostics status name of an agent: /<vehicle>/agent
PX4_SUFFIX = '/px4_bridge'    # ... of a PX4 bridge: /<vehicle>/px4_bridge
AGENT, PX4 = 'agent', 'px4'   # the two sources of a vehicle's timeline
STALE_STATUS = 3.0            # s without a status: the vehicle's row shows 'no status'
STATUS_PERIOD = 1.0           # s between two statuses of a node on /diagnostics
NO_STATUS = 'no status'
ACTIVE = Phase.ACTIVE.value   # a PX4 bridge's phase while engaged (offboard, armed)
IDLE = Phase.IDLE.value       # ... while not engaged (sending PX4 nothing, or zero velocity)
HOLDING = 'holding'           # the timeline's state of an active bridge holding zero velocity
HOLD_TEXT = 'holding (zero velocity)'      # what an active bridge's status says while it holds
# The timeline's states of an idle bridge whose vehicle is out of the ring for a reason the
# operator (or PX4) gave: PX4 in Hold (a hold confirmed), and landed; by the start of the
# bridge's ``out_of_ring`` (``OffboardSequencer.out_of_ring``: 'hold (why)', 'landed (why)').
PX4_HOLD, LANDED = 'hold', 'landed'
IDLE_OUT_OF_RING_STATES = {'hold (': PX4_HOLD, 'landed (': LANDED}
ENGAGED_HOLD = 'engaged, ' + HOLD_TEXT + ': '  # ... its usual form, the reason after it
WARN_LEVEL = 1                # DiagnosticStatus.WARN
WHOLE_RUN, BRIDGES = 'whole run', 'px4 bridges'  # how an EngagedPhase was found
DEFAULT_D_SAFE = 2.0          # m, when neither the command line nor the bag gives one
# A receiver's link to a sender is worth a look (the flight report lists it before the fold,
# the full table behind it) from any of these, or a restart of the sender:
LOOK_LOSS = 0.05              # loss: lost / (heard + lost)
LOOK_AGE = 0.2                # s: mean age, arrival - stamp
LOOK_OFFSET = 0.05            # s: |clock offset| of the sender against the receiver
LOOK_RULE = (f'loss ≥ {LOOK_LOSS:.0%}, mean age ≥ {LOOK_AGE:g} s, |clock offset| ≥ '
             f'{LOOK_OFFSET:g} s or a restart')
# The timeline states that are safety events in the flight report's verdicts: an agent
# failed, a PX4 bridge holding zero velocity while engaged, PX4 in Hold.
SAFETY_STATES = ('failed', HOLDING, PX4_HOLD)


@dataclass(frozen=True)
class SenderLinks:
    """What the recorder heard of one sender (times in s)."""

    sender: int
    recorded: int
    lost: int
    restarts: int             # incarnations seen - 1
    age_mean: float           # log time - stamp
    age_p95: float
    age_max: float
    longest_silence: float    # largest gap between consecutive log times
    silence_start: float      # log time the longest silence began (NaN: fewer than 2 states)

    @property
    def loss(self) -> float:
        """Return lost / (recorded + lost), 0 when nothing was expected."""
        expected = self.recorded + self.lost
        return self.lost / expected if expected else 0.0


@dataclass(frozen=True)
class Status:
    """One DiagnosticStatus of a recorded ``/diagnostics`` array, at its log time [s]."""

    time: float
    name: str
    level: int
    message: str
    values: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PairLink:
    """What ``receiver`` heard of ``sender`` per its last status (``core.links`` figures)."""

    receiver: int
    sender: int
    time: float               # log time of that status
    heard: int
    lost: int
    restarts: int
    age_mean: float
    age_max: float
    offset: float             # the sender's clock minus the receiver's

    @property
    def loss(self) -> float:
        """Return lost / (heard + lost), 0 when nothing was expected."""
        expected = self.heard + self.lost
        return self.lost / expected if expected else 0.0


def worth_a_look(pair: PairLink) -> bool:
    """Whether a receiver's link to a sender is worth a look (:data:`LOOK_RULE`)."""
    return (pair.loss >= LOOK_LOSS or pair.age_mean >= LOOK_AGE
            or abs(pair.offset) >= LOOK_OFFSET or pair.restarts > 0)


@dataclass
class ReceiverLinks:
    """
    Who heard whom.

    ``last``: one :class:`PairLink` per (receiver, sender), from the receiver's last status that
    names the sender; ``series``: (receiver, sender) -> (K, 4) rows ``time, loss, age_mean,
    offset`` of every status.
    """

    last: list[PairLink]
    series: dict[tuple[int, int], np.ndarray]

    @property
    def receivers(self) -> list[int]:
        """Return the receivers' ids, sorted."""
        return sorted({p.receiver for p in self.last})

    @property
    def senders(self) -> list[int]:
        """Return the senders' ids, sorted."""
        return sorted({p.sender for p in self.last})

    def matrix(self, figure: str = 'loss') -> np.ndarray:
        """Return (receivers, senders) of one :class:`PairLink` figure, NaN where unheard."""
        rows, cols = self.receivers, self.senders
        table = np.full((len(rows), len(cols)), math.nan)
        for p in self.last:
            table[rows.index(p.receiver), cols.index(p.sender)] = getattr(p, figure)
        return table

    def pooled_loss(self) -> float:
        """Return the loss over every pair's last status: sum lost / sum (heard + lost)."""
        expected = sum(p.heard + p.lost for p in self.last)
        return sum(p.lost for p in self.last) / expected if expected else math.nan


@dataclass(frozen=True)
class Span:
    """One state of one vehicle's row (``source`` agent or px4) from ``start`` to ``end``."""

    vehicle: str
    source: str
    state: str
    start: float
    end: float
    message: str


@dataclass(frozen=True)
class Transition:
    """A change of state of one vehicle's row at ``time``, with the status' reason."""

    time: float
    vehicle: str
    source: str
    before: Optional[str]     # None: the row's first status
    after: str
    reason: str


@dataclass
class Timeline:
    """Each row's spans and transitions, in time order; ``rows`` (vehicle, source) sorted."""

    rows: list[tuple[str, str]]
    spans: list[Span]
    transitions: list[Transition]


@dataclass(frozen=True)
class PairMargin:
    """Closest horizontal approach of two agents and the time below d_safe and d_safe / 2."""

    a: str
    b: str
    closest: float            # m, NaN when never both known
    time: float               # its first time [s]
    below: float              # s below d_safe
    below_half: float         # s below 0.5 d_safe


@dataclass(frozen=True)
class AreaMargin:
    """One agent's smallest margin to the safety area (negative: outside) [m], and when."""

    agent: str
    margin: float             # min of horizontal and vertical
    time: float
    horizontal: float         # smallest horizontal distance to the boundary
    vertical: float           # smallest distance to z_min or z_max
    outside: float            # s outside the area


@dataclass
class Margins:
    """Pairs closest first, agents' area margins smallest first (empty without an area)."""

    d_safe: float
    pairs: list[PairMargin]
    area: list[AreaMargin]


@dataclass(frozen=True)
class EngagedPhase:
    """
    The interval [``start``, ``end``] (s) the metrics of a run are judged on, and why.

    ``rule``: :data:`BRIDGES` (found from the PX4 bridges' phases) or :data:`WHOLE_RUN`;
    ``text``: one line for the user; ``bridges``: the vehicles whose bridges were active at the
    start; ``others``: further engaged phases in the bag (start, end), not judged;
    ``reporting``: how many PX4 bridges the bag has statuses of (0: a simulation);
    ``number``: which of the bag's engaged phases this is (1: the first), of ``count``.
    """

    start: float
    end: float
    rule: str
    text: str
    bridges: tuple[str, ...] = ()
    others: tuple[tuple[float, float], ...] = ()
    reporting: int = 0
    number: int = 1
    count: int = 1

    def as_dict(self) -> dict:
        """Return the phase as plain JSON-able values (summary.json's ``phase``)."""
        return {'start': self.start, 'end': self.end, 'rule': self.rule, 'text': self.text,
                'bridges': list(self.bridges), 'others': [list(o) for o in self.others],
                'px4_bridges': self.reporting, 'number': self.number, 'count': self.count}


def sender_links(states) -> list[SenderLinks]:
    """
    Return each sender's figures from recorded agent states, by sender id.

    ``states``: rows (N, 5) ``log_time, agent_id, incarnation, seq, stamp``
    (:data:`SENDER_COLUMNS`, seconds), any order (sorted by log time, stably). Lost: the gaps
    in ``seq`` between consecutive states of one incarnation (a repeated or older ``seq``
    counts none).
    """
    rows = np.asarray(states, dtype=float).reshape(-1, len(SENDER_COLUMNS))
    rows = rows[np.argsort(rows[:, 0], kind='stable')]
    out = []
    for sender in np.unique(rows[:, 1]):
        mine = rows[rows[:, 1] == sender]
        lost = 0
        for incarnation in np.unique(mine[:, 2]):
            seq = mine[mine[:, 2] == incarnation, 3]
            step = np.diff(seq)
            lost += int(np.sum(np.where(step > 1, step - 1, 0)))
        age = mine[:, 0] - mine[:, 4]
        gaps = np.diff(mine[:, 0])
        k = int(np.argmax(gaps)) if gaps.size else -1
        out.append(SenderLinks(
            int(sender), len(mine), lost, len(np.unique(mine[:, 2])) - 1,
            float(age.mean()), float(np.percentile(age, 95)), float(age.max()),
            float(gaps[k]) if gaps.size else 0.0, float(mine[k, 0]) if gaps.size else math.nan))
    return out


def agent_status(status: Status) -> bool:
    """Return whether a status is an agent's (its values carry ``agent_id`` and ``state``)."""
    return 'agent_id' in status.values and 'state' in status.values


def px4_status(status: Status) -> bool:
    """Return whether a status is a PX4 bridge's (named ``/<vehicle>/px4_bridge``, a phase)."""
    return status.name.endswith(PX4_SUFFIX) and 'phase' in status.values


def vehicle_name(status: Status) -> str:
    """Return the vehicle of an agent's or PX4 bridge's status: its name's namespace."""
    name = status.name
    for suffix in (AGENT_SUFFIX, PX4_SUFFIX):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[:-len(suffix)]
            break
    return name.strip('/') or status.name


def receiver_links(statuses: Iterable[Status]) -> ReceiverLinks:
    """
    Return who heard whom from the agents' statuses (any order: sorted by time, stably).

    A receiver is an agent status' ``agent_id``; each ``link.<sender>`` value is parsed with
    ``core.links.parse_link_text``; a value that does not parse is skipped.
    """
    last: dict[tuple[int, int], PairLink] = {}
    series: dict[tuple[int, int], list] = {}
    for status in sorted(statuses, key=lambda s: s.time):
        if not agent_status(status):
            continue
        try:
            receiver = int(status.values['agent_id'])
        except ValueError:
            continue
        for key, text in status.values.items():
            if not key.startswith(LINK_KEY):
                continue
            try:
                sender = int(key[len(LINK_KEY):])
                f = parse_link_text(text)
                pair = PairLink(receiver, sender, status.time, int(f['heard']), int(f['lost']),
                                int(f.get('restarts', 0)), f['age_mean'], f['age_max'],
                                f.get('offset', math.nan))
            except (KeyError, ValueError):
                continue
            last[(receiver, sender)] = pair
            series.setdefault((receiver, sender), []).append(
                (status.time, pair.loss, pair.age_mean, pair.offset))
    return ReceiverLinks(sorted(last.values(), key=lambda p: (p.receiver, p.sender)),
                         {k: np.asarray(v, dtype=float) for k, v in sorted(series.items())})


def timeline(statuses: Iterable[Status], end: Optional[float] = None,
             stale: float = STALE_STATUS) -> Timeline:
    """
    Return each vehicle's states over time from agent and PX4 bridge statuses.

    A status holds until the next one of its row, at most ``stale`` s (a 1 Hz status missing
    longer shows as :data:`NO_STATUS` until the next); the last holds until ``end`` (default: the
    last status of any row), at most ``stale`` s too. Agents' state is their ``state`` value, PX4
    bridges' their ``phase`` or :data:`HOLDING` (:func:`bridge_state`); the reason is the status
    message (and a bridge's ``out_of_ring``; a hold's reason).
    """
    rows: dict[tuple[str, str], list[tuple[float, str, str]]] = {}
    for status in sorted(statuses, key=lambda s: s.time):
        if agent_status(status):
            key, state, reason = (vehicle_name(status), AGENT), status.values['state'], \
                status.message
        elif px4_status(status):
            key = (vehicle_name(status), PX4)
            state, reason = bridge_state(status)
        else:
            continue
        rows.setdefault(key, []).append((status.time, state, reason))
    if end is None:
        end = max((r[-1][0] for r in rows.values()), default=0.0)
    spans, transitions = [], []
    for (vehicle, source), samples in sorted(rows.items(), key=lambda i: _natural_key(i[0])):
        before = None
        for k, (time, state, reason) in enumerate(samples):
            following = samples[k + 1][0] if k + 1 < len(samples) else max(end, time)
            if state != before:
                transitions.append(Transition(time, vehicle, source, before, state, reason))
            stop = min(following, time + stale)
            spans.append(Span(vehicle, source, state, time, stop, reason))
            if following > stop:
                spans.append(Span(vehicle, source, NO_STATUS, stop, following,
                                  f'no status for {following - time:.1f} s'))
            before = state
    transitions.sort(key=lambda t: t.time)
    return Timeline(sorted(rows, key=_natural_key), _merged(spans), transitions)


def bridge_state(status: Status) -> tuple[str, str]:
    """
    Return a PX4 bridge status' timeline state and its reason.

    The state is the bridge's ``phase``, except that an ``active`` bridge that holds zero
    velocity (:func:`hold_reason`) is :data:`HOLDING`, with the hold's reason, and an ``idle``
    one whose vehicle PX4 holds (a hold confirmed: the operator's stop) or has landed is
    :data:`PX4_HOLD` or :data:`LANDED`, so that a hold, and a landing from it, show. Otherwise
    the reason is the status message, with the bridge's ``out_of_ring`` when it has one.
    """
    phase = status.values['phase']
    if phase == ACTIVE and (why := hold_reason(status)) is not None:
        return HOLDING, why
    out = status.values.get('out_of_ring')
    if phase == IDLE and out:
        phase = next((state for start, state in IDLE_OUT_OF_RING_STATES.items()
                      if out.startswith(start)), phase)
    return phase, status.message + (f'; out of the ring: {out}' if out else '')


def hold_reason(status: Status) -> Optional[str]:
    """
    Return why an engaged PX4 bridge holds zero velocity, or None when it does not say it holds.

    A ``holding`` value, when the bridge reports one, decides (``no``, ``false`` or empty: not
    holding; ``yes``/``true``: holding, the message says why; else the value is the reason).
    Without it: a WARN or worse status whose message says :data:`HOLD_TEXT` (the bridge's
    ``engaged, holding (zero velocity): <why>``); the reason is ``<why>``, or the whole message
    in another form.
    """
    holding = status.values.get('holding')
    if holding is not None:
        flag = holding.strip().lower()
        if flag in ('', 'no', 'false'):
            return None
        return status.message if flag in ('yes', 'true') else holding
    if status.level < WARN_LEVEL or HOLD_TEXT not in status.message:
        return None
    if status.message.startswith(ENGAGED_HOLD):
        return status.message[len(ENGAGED_HOLD):]
    return status.message


def engaged_phase(statuses: Iterable[Status], start: float, end: float,
                  stale: float = STALE_STATUS) -> EngagedPhase:
    """Return the first of :func:`engaged_phases` (its ``others``: the later ones)."""
    return engaged_phases(statuses, start, end, stale)[0]


def engaged_phases(statuses: Iterable[Status], start: float, end: float,
                   stale: float = STALE_STATUS) -> list[EngagedPhase]:
    """
    Return the parts of a run [``start``, ``end``] (s) its metrics are judged on, in time order.

    A real flight starts on the ground and ends landed: its metrics are judged while the fleet
    is engaged. From the PX4 bridges' statuses (``phase`` ``active``, holding included): each
    bridge is engaged over each run of consecutive ``active`` statuses (at most ``stale`` s
    apart), from the first of them to the last (the times the bridge is known to be engaged).
    The engaged phase starts at the first time the most bridges are engaged together (normally
    every bridge of the run) and ends when the last bridge engaged is no longer: a vehicle that
    leaves the ring alone (e.g. ``land_after``) does not end it (its agent is failed, out of the
    metrics, as in a simulation); the fleet's landing does. Several such phases (the fleet flew
    again): each is judged on its own; each one's ``text`` says which of them it is and
    ``others`` lists the rest. No PX4 bridge status, or none ever active: one phase, the whole
    run (a simulation is judged as before).
    """
    by_bridge: dict[str, list[tuple[float, Status]]] = {}
    for status in sorted(statuses, key=lambda s: s.time):
        if px4_status(status):
            by_bridge.setdefault(vehicle_name(status), []).append((status.time, status))
    if not by_bridge:
        return [EngagedPhase(start, end, WHOLE_RUN, f'the whole run, {start:.2f}–{end:.2f} s: '
                             'no PX4 bridge status in the bag')]
    spells = []  # (first, last, vehicle, the status that ended it or None)
    for vehicle, samples in by_bridge.items():
        first = last = None
        for time, status in samples:
            engaged = status.values['phase'] == ACTIVE
            if first is not None and (not engaged or time - last > stale):
                spells.append((first, last, vehicle, None if engaged else status))
                first = None
            if engaged:
                first, last = (time, time) if first is None else (first, time)
        if first is not None:
            spells.append((first, last, vehicle, None))
    if not spells:
        return [EngagedPhase(start, end, WHOLE_RUN, f'the whole run, {start:.2f}–{end:.2f} s: '
                             f'no PX4 bridge was ever active ({len(by_bridge)} reported)',
                             reporting=len(by_bridge))]

    def engaged_at(time):
        return sorted({v for a, b, v, _ in spells if a <= time <= b}, key=_natural_key)

    most = max(len(engaged_at(a)) for a, *_ in spells)
    phases = []  # (start, end, spells in it)
    for spell in sorted(spells):
        if phases and spell[0] <= phases[-1][1]:
            phases[-1] = (phases[-1][0], max(phases[-1][1], spell[1]), phases[-1][2] + [spell])
        else:
            phases.append((spell[0], spell[1], [spell]))
    judged = [(min(a for a, *_ in group if len(engaged_at(a)) == most), stop, group)
              for _, stop, group in phases if any(len(engaged_at(a)) == most for a, *_ in group)]
    silent = sorted(set(by_bridge) - {v for *_, v, _ in spells}, key=_natural_key)
    intervals = [(a, b) for a, b, _ in judged]
    out = []
    for k, (first, last, group) in enumerate(judged):
        names = engaged_at(first)
        text = _phase_text(first, last, group, names, len(by_bridge), silent, end, stale)
        others = tuple(interval for j, interval in enumerate(intervals) if j != k)
        if k == 0 and others:
            text += (f'; the first of {len(judged)} engaged phases (the others: '
                     + ', '.join(f'{a:.2f}–{b:.2f} s' for a, b in others) + ')')
        elif k:
            text += f'; engaged phase {k + 1} of {len(judged)}'
        out.append(EngagedPhase(first, last, BRIDGES, text, tuple(names), others,
                                len(by_bridge), k + 1, len(judged)))
    return out


def _phase_text(first: float, last: float, group, names: list[str], bridges: int,
                silent: list[str], end: float, stale: float) -> str:
    """Say which interval an engaged phase is, who was engaged and how it ended (one line)."""
    if len(names) == bridges:
        who = f'all {len(names)} PX4 bridges were active ({", ".join(names)})'
    else:
        who = (f'{len(names)} of {bridges} PX4 bridges were active together '
               f'({", ".join(names)}'
               + (f'; never active: {", ".join(silent)}' if silent else '') + ')')
    ending = max(group, key=lambda spell: spell[1])
    text = (f'engaged {first:.2f}–{last:.2f} s: from when {who} to the last active status of '
            f"any ({ending[2]}'s; then {_ended(ending, end, stale)})")
    left = [f'{spell[2]} ({_ended(spell, end, stale)})'
            for spell in sorted(group, key=lambda x: x[1])
            if spell[2] in names and first <= spell[1]
            and (spell[1] + stale if spell[3] is None else spell[3].time) <= last]
    if left:
        text += '; out of the ring before: ' + ', '.join(left)
    return text


def _ended(spell, end: float, stale: float) -> str:
    """Say how an engaged spell of a bridge ended: what it went to and when, or silence."""
    _, last, _, status = spell
    if status is None:
        return ('the recording ends' if end - last <= stale
                else f'its bridge silent after {last:.2f} s')
    out = status.values.get('out_of_ring')
    return f'{status.values["phase"]} at {status.time:.2f} s' + (f': {out}' if out else '')


def margins(times, positions_by_agent: Mapping[str, Any], d_safe: float,
            area=None) -> Margins:
    """
    Return the safety margins of a run, worst first.

    ``times`` (T,) increasing [s]; ``positions_by_agent``: name -> (T, 2 or 3) positions at those
    times (NaN rows: unknown). Each sample holds until the next (the last for no time), so the
    times below ``d_safe`` sum those intervals. ``area``: a ``core.area.SafetyArea`` (its
    ``distance`` horizontal, negative outside; ``z_min``/``z_max``) or None.
    """
    t = np.asarray(times, dtype=float)
    hold = np.append(np.diff(t), 0.0) if t.size else t
    positions = {name: np.asarray(p, dtype=float).reshape(len(t), -1)
                 for name, p in positions_by_agent.items()}
    pairs = []
    for a, b in itertools.combinations(positions, 2):
        d = np.hypot(*(positions[a][:, :2] - positions[b][:, :2]).T)
        known = np.isfinite(d)
        if not known.any():
            pairs.append(PairMargin(a, b, math.nan, math.nan, 0.0, 0.0))
            continue
        k = int(np.nanargmin(d))
        pairs.append(PairMargin(a, b, float(d[k]), float(t[k]),
                                float(hold[known & (d < d_safe)].sum()),
                                float(hold[known & (d < 0.5 * d_safe)].sum())))
    pairs.sort(key=lambda p: (math.isnan(p.closest), p.closest))
    area_rows = []
    if area is not None:
        for name, p in positions.items():
            known = np.all(np.isfinite(p), axis=1)
            if not known.any():
                continue
            horizontal = np.full(len(t), math.nan)
            horizontal[known] = area.distance(p[known, :2])
            vertical = np.full(len(t), math.inf)
            margin = horizontal
            if p.shape[1] > 2:
                vertical = np.minimum(p[:, 2] - area.z_min, area.z_max - p[:, 2])
                margin = np.full(len(t), math.nan)
                margin[known] = area.clearance(p[known])
            k = int(np.nanargmin(margin))
            area_rows.append(AreaMargin(name, float(margin[k]), float(t[k]),
                                        float(np.nanmin(horizontal)), float(np.nanmin(vertical)),
                                        float(hold[known & (margin < 0)].sum())))
        area_rows.sort(key=lambda r: r.margin)
    return Margins(float(d_safe), pairs, area_rows)


def d_safe_from_scenario(scenario: Mapping[str, Any]) -> Optional[float]:
    """
    Return the ``d_safe`` the scenario flew when it is set (> 0), else None.

    Its ``d_safe_flown`` (the controller's ``d_safe`` sized to the ring,
    ``ControllerParams.safety_distance``), else its ``controller: {d_safe}``.
    """
    if not isinstance(scenario, Mapping):
        return None
    controller = scenario.get('controller')
    value = scenario.get('d_safe_flown')
    if value is None and isinstance(controller, Mapping):
        value = controller.get('d_safe')
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if value > 0 and math.isfinite(value) else None


def _merged(spans: Sequence[Span]) -> list[Span]:
    """Join consecutive spans of one row in one state (the 1 Hz repeats of a status)."""
    out: list[Span] = []
    for span in spans:
        prev = out[-1] if out else None
        same_row = prev is not None and (prev.vehicle, prev.source, prev.state) == (
            span.vehicle, span.source, span.state)
        if same_row and abs(prev.end - span.start) < 1e-12:
            out[-1] = Span(prev.vehicle, prev.source, prev.state, prev.start, span.end,
                           prev.message)
        else:
            out.append(span)
    return out


def _natural_key(key) -> list:
    text = '/'.join(key) if isinstance(key, tuple) else str(key)
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', text)]
