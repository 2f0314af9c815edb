"""
Metric time series recomputed from the topics of a recorded run, with the core metric functions.

Only standard topics and types are used (docs/reference/topics.md): agent odometry found by
pattern,
the target's odometry, and optionally ``/swarm/agent_states`` for liveness. At each time of a
regular grid, every agent's position and world-frame velocity is its latest odometry at or
before that time. With ``/swarm/agent_states`` in the bag, an agent is live while its last state
(by log time) is at most ``state_timeout`` old, as in metrics_node; without it, every agent with
odometry is live; states of a layout this version cannot read (a newer one) are set aside with a
warning (:attr:`RecordedRun.warnings`), and the odometry still gives every metric. All times are
log times in seconds (the recorder's clock: sim time in simulation). No rclpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import re

import numpy as np

from soliton_encirclement_ros.analysis.bag_reader import Bag, TruncatedBagError
from soliton_encirclement_ros.analysis.bag_scan import implausible
from soliton_encirclement_ros.core.metrics import compute_metrics, METRIC_NAMES
from soliton_encirclement_ros.interface import (
    AGENT_STATE, agent_state_array, AGENT_STATES_TOPIC, METRICS_TOPIC_PREFIX, TARGET_ODOM_TOPIC)
from velocity_mobility_ros.core.geometry import rotate_by_quaternion

DEFAULT_AGENT_PATTERN = r'^/(?P<name>[^/]+)/odom$'
DEFAULT_TARGET_TOPIC = TARGET_ODOM_TOPIC
DEFAULT_RADIUS = 20.0
DEFAULT_PERIOD = 0.05
DEFAULT_STATE_TIMEOUT = 0.15
ODOMETRY_TYPE = 'nav_msgs/msg/Odometry'
AGENT_STATES_TYPE = 'std_msgs/msg/Float64MultiArray'
NANOSECOND = 1e-9
# Columns of ``RecordedRun.states``: the log time, then the agent-state layout's fields.
STATE_COLUMNS = ('log_time',) + AGENT_STATE.fields
_MEMBER = AGENT_STATE.fields.index('member')  # in a state's values (no log time)
_ID = STATE_COLUMNS.index('agent_id')
_POSITION = slice(STATE_COLUMNS.index('px'), STATE_COLUMNS.index('pz') + 1)
_VELOCITY = slice(STATE_COLUMNS.index('vx'), STATE_COLUMNS.index('vz') + 1)
_U = STATE_COLUMNS.index('u')


class RunDataError(ValueError):
    """The bag lacks what the analysis needs; the message is one line for the user."""


@dataclass
class Track:
    """Odometry samples of one body: times (N,) [s], positions and world velocities (N, 3)."""

    t: np.ndarray
    position: np.ndarray
    velocity: np.ndarray

    def at(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Latest sample at or before each time: (positions, velocities, has_sample)."""
        index = np.searchsorted(self.t, times, side='right') - 1
        valid = index >= 0
        index = np.clip(index, 0, None)
        return self.position[index], self.velocity[index], valid


@dataclass
class RecordedRun:
    """
    The parts of a bag the analysis uses.

    ``states`` columns are :data:`STATE_COLUMNS`.
    """

    path: str
    topics: dict[str, str]
    agents: dict[str, Track]
    target: Track
    agent_ids: dict[str, int]
    states: np.ndarray | None
    truncated: str | None = None
    warnings: tuple[str, ...] = ()
    custom_data: dict[str, str] = field(default_factory=dict)  # the bag's own description
    corrupt: str | None = None  # what was dropped as damaged, and where (``Bag.corrupt``)
    metadata_damaged: str | None = None  # the metadata alone, every message read


def load_run(path, agent_pattern: str = DEFAULT_AGENT_PATTERN,
             target_topic: str = DEFAULT_TARGET_TOPIC, relative_time: bool = False) -> RecordedRun:
    """
    Read agent and target odometry and agent states from a bag.

    ``agent_pattern`` selects agent odometry topics (``re.search``; the group ``name``, else the
    first group, else the topic is the agent's name); the target topic is never an agent.
    ``relative_time`` counts times from the first message read instead of the bag clock's zero.
    """
    try:
        pattern = re.compile(agent_pattern)
    except re.error as err:
        raise RunDataError(f'--agent-pattern {agent_pattern!r} is not a regular expression: {err}')
    with Bag(path) as bag:
        agent_topics = {
            topic: _agent_name(match, topic) for topic, msgtype in bag.topics.items()
            if msgtype == ODOMETRY_TYPE and topic != target_topic
            and (match := pattern.search(topic))
        }
        if not agent_topics or bag.topics.get(target_topic) != ODOMETRY_TYPE:
            raise RunDataError(f'{_missing(bag.topics, pattern, target_topic)} in {path}; '
                               f'topics found: {_topic_list(bag.topics)}')
        odometry: dict[str, list] = {topic: [] for topic in [*agent_topics, target_topic]}
        states, ignored = [], None
        wanted = [*odometry]
        if bag.topics.get(AGENT_STATES_TOPIC) == AGENT_STATES_TYPE:
            wanted.append(AGENT_STATES_TOPIC)
        elif AGENT_STATES_TOPIC in bag.topics:
            ignored = f'its type is {bag.topics[AGENT_STATES_TOPIC]}, not {AGENT_STATES_TYPE}'
        for topic, log_time, msg in bag.messages(wanted):
            if topic != AGENT_STATES_TOPIC:
                row = _odometry_row(log_time, msg)
                if implausible(row[1:]):  # a damaged message that still decoded
                    bag.set_aside(topic, log_time, 'implausible')
                    continue
                odometry[topic].append(row)
            elif ignored is None:
                try:
                    data = agent_state_array(msg, older=True)
                except ValueError as error:  # a layout this version does not know
                    ignored, states = str(error), []
                    continue
                if data[_MEMBER]:  # a presence broadcast (controller out) is no live agent
                    states.append(np.concatenate(([log_time * 1e-9], data)))
        truncated, topics, custom_data = bag.truncated, bag.topics, bag.custom_data
        corrupt, metadata_damaged = bag.corrupt, bag.metadata_damaged
    warnings = () if ignored is None else (
        f'{AGENT_STATES_TOPIC} set aside ({ignored}); the metrics come from the odometry alone, '
        'every agent with odometry counted live',)
    rows = {topic: np.asarray(r, dtype=float).reshape(-1, 11) for topic, r in odometry.items()}
    state_rows = (
        np.asarray(states, dtype=float).reshape(-1, len(STATE_COLUMNS)) if states else None
    )
    if relative_time:
        tables = [r for r in [*rows.values(), state_rows] if r is not None and len(r)]
        origin = min((r[:, 0].min() for r in tables), default=0.0)
        for r in tables:
            r[:, 0] -= origin
    agents = {name: _track(rows[topic]) for topic, name in
              sorted(agent_topics.items(), key=lambda item: _natural_key(item[1]))
              if len(rows[topic])}
    target = _track(rows[target_topic])
    if not agents or not len(target.t):
        if truncated or corrupt:
            raise TruncatedBagError(f'{"truncated" if truncated else "corrupt"} bag {path}: no '
                                    'readable odometry of the agents or the target ('
                                    + '; '.join(filter(None, [truncated, corrupt])) + ')')
        raise RunDataError(f'no readable odometry for the agents or the target in {path}')
    return RecordedRun(str(path), topics, agents, target, _agent_ids(agents, state_rows),
                       state_rows, truncated, warnings, custom_data, corrupt, metadata_damaged)


def _missing(topics: dict[str, str], pattern: re.Pattern, target_topic: str) -> str:
    """Say what the bag lacks: no topic by that name, or one of another type (named)."""
    if not any(t == ODOMETRY_TYPE and name != target_topic and pattern.search(name)
               for name, t in topics.items()):
        others = [f'{name} [{t}]' for name, t in sorted(topics.items())
                  if name != target_topic and pattern.search(name)]
        if others:
            return (f'the topics matching {pattern.pattern!r} are not {ODOMETRY_TYPE}: '
                    + ', '.join(others))
        return f'no agent odometry topic matching {pattern.pattern!r}'
    if target_topic in topics:
        return (f'target topic {target_topic!r} is {topics[target_topic]}, not '
                f'{ODOMETRY_TYPE}')
    return f'no {ODOMETRY_TYPE} target topic {target_topic!r}'


def metric_times(run: RecordedRun, period: float = DEFAULT_PERIOD) -> np.ndarray:
    """
    Return the analysis time grid.

    A regular grid from the first time the target and an agent both have odometry to the last
    odometry sample.
    """
    if not period > 0:
        raise RunDataError(f'metrics period must be > 0 s, got {period}')
    start = max(run.target.t[0], min(track.t[0] for track in run.agents.values()))
    end = max(run.target.t[-1], max(track.t[-1] for track in run.agents.values()))
    return start + period * np.arange(int(np.floor((end - start) / period + 1e-9)) + 1)


def liveness(run: RecordedRun, times: np.ndarray,
             state_timeout: float = DEFAULT_STATE_TIMEOUT) -> np.ndarray:
    """(T, n_agents) bool: agent has odometry and, when states were recorded, a fresh state."""
    live = np.empty((len(times), len(run.agents)), dtype=bool)
    for j, (name, track) in enumerate(run.agents.items()):
        live[:, j] = track.at(times)[2]
        if run.states is None:
            continue
        state_times = np.sort(run.states[run.states[:, _ID] == run.agent_ids.get(name, np.nan), 0])
        if not len(state_times):
            live[:, j] = False
            continue
        last = np.searchsorted(state_times, times, side='right') - 1
        age = times - state_times[np.clip(last, 0, None)]
        live[:, j] &= (last >= 0) & (age <= state_timeout + NANOSECOND)  # bag time resolution
    return live


def recompute_metrics(
    run: RecordedRun,
    times: np.ndarray,
    radius: float = DEFAULT_RADIUS,
    state_timeout: float = DEFAULT_STATE_TIMEOUT,
) -> tuple[np.ndarray, np.ndarray]:
    """
    Metrics (T, 7) ``timestamp,E_r,E_vr,rho,G_max,E_gap,d_min`` over the live agents at ``times``.

    And the (T, n_agents) liveness used.
    """
    if not radius > 0:
        raise RunDataError(f'--radius must be > 0 m, got {radius}')
    live = liveness(run, times, state_timeout)
    samples = [track.at(times) for track in run.agents.values()]
    positions = np.stack([s[0] for s in samples], axis=1)
    velocities = np.stack([s[1] for s in samples], axis=1)
    target_position, target_velocity, _ = run.target.at(times)
    metrics = np.empty((len(times), 1 + len(METRIC_NAMES)))
    metrics[:, 0] = times
    for k in range(len(times)):
        metrics[k, 1:] = compute_metrics(positions[k, live[k]], velocities[k, live[k]],
                                         target_position[k], target_velocity[k], radius)
    return metrics, live


def metrics_from_bag(path, *, radius: float = DEFAULT_RADIUS, period: float = DEFAULT_PERIOD,
                     state_timeout: float = DEFAULT_STATE_TIMEOUT, times: np.ndarray | None = None,
                     agent_pattern: str = DEFAULT_AGENT_PATTERN,
                     target_topic: str = DEFAULT_TARGET_TOPIC) -> np.ndarray:
    """
    Recompute the metrics (T, 7) from a bag, on a regular grid or at the log ``times`` [s].

    ``times`` may be e.g. the times of :func:`published_metrics`, to compare with metrics_node.
    """
    run = load_run(path, agent_pattern, target_topic)
    grid = metric_times(run, period) if times is None else np.asarray(times, dtype=float)
    return recompute_metrics(run, grid, radius, state_timeout)[0]


def published_metrics(path) -> dict[str, np.ndarray]:
    """
    Return the ``/swarm/metrics/<name>`` series recorded in a bag.

    Name -> (N, 2) rows ``log_time [s], value``.
    """
    with Bag(path) as bag:
        series: dict[str, list] = {}
        for topic, log_time, msg in bag.messages(
                [METRICS_TOPIC_PREFIX + name for name in METRIC_NAMES]):
            series.setdefault(topic.removeprefix(METRICS_TOPIC_PREFIX), []).append(
                (log_time * 1e-9, msg.data))
    return {name: np.asarray(rows, dtype=float) for name, rows in series.items()}


def agent_rows(run: RecordedRun) -> np.ndarray:
    """
    (K, 4) ``node_id,timestamp,u,velocity_norm``.

    From agent states when recorded (log time), else from odometry with ``u`` unknown (NaN).
    """
    if run.states is not None:
        s = run.states
        return np.column_stack(
            (s[:, _ID], s[:, 0], s[:, _U], np.linalg.norm(s[:, _VELOCITY], axis=1))
        )
    blocks = [np.column_stack((np.full(len(track.t), run.agent_ids.get(name, j + 1)), track.t,
                               np.full(len(track.t), np.nan),
                               np.linalg.norm(track.velocity, axis=1)))
              for j, (name, track) in enumerate(run.agents.items())]
    return np.concatenate(blocks) if blocks else np.empty((0, 4))


def _odometry_row(log_time: int, msg) -> tuple:
    pose, twist = msg.pose.pose, msg.twist.twist
    p, q, v = pose.position, pose.orientation, twist.linear
    return (log_time * 1e-9, p.x, p.y, p.z, q.x, q.y, q.z, q.w, v.x, v.y, v.z)


def _track(rows: np.ndarray) -> Track:
    rows = rows[np.argsort(rows[:, 0], kind='stable')]
    quaternion = rows[:, 4:8]
    norm = np.linalg.norm(quaternion, axis=1, keepdims=True)
    # An unset orientation (all zeros) is read as identity.
    quaternion = np.where(norm > 1e-9, quaternion / np.where(norm > 1e-9, norm, 1.0),
                          [0.0, 0.0, 0.0, 1.0])
    return Track(rows[:, 0], rows[:, 1:4], rotate_by_quaternion(quaternion, rows[:, 8:11]))


def _agent_name(match: re.Match, topic: str) -> str:
    if 'name' in match.re.groupindex:
        return match.group('name')
    return match.group(1) if match.re.groups else topic


def _agent_ids(agents: dict[str, Track], states: np.ndarray | None) -> dict[str, int]:
    """
    Agent id per name.

    Trailing digits of the name (uav3 -> 3); a state id no name claims goes to the unclaimed agent
    nearest to that state's first position.
    """
    ids = {name: int(m.group()) for name in agents if (m := re.search(r'\d+$', name))}
    if states is None:
        return ids
    for state_id in np.unique(states[:, _ID]).astype(int):
        unclaimed = [name for name in agents if name not in ids]
        if state_id in ids.values() or not unclaimed:
            continue
        first = states[np.flatnonzero(states[:, _ID] == state_id)[0]]
        distance = [np.linalg.norm(agents[name].at(first[:1])[0][0] - first[_POSITION])
                    for name in unclaimed]
        ids[unclaimed[int(np.argmin(distance))]] = int(state_id)
    return ids


def _natural_key(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', name)]


def _topic_list(topics: dict[str, str]) -> str:
    return ', '.join(f'{t} [{m}]' for t, m in sorted(topics.items())) or 'none'
