"""
The swarm's wire interface, defined once: topic names, QoS, and the state layouts.

Every node, the in-process fan-out, the recorder and the analysis use this module, and nothing
else, to name a swarm topic, choose its QoS or read and write a swarm message.

Swarm messages are ``std_msgs/Float64MultiArray`` (a pip-only install cannot build custom
messages). Each layout is versioned: the first ``layout.dim`` label is ``<name>.v<version>:``
followed by the field names, so a receiver speaking another version fails with one clear error
instead of misreading positions. Encoding and decoding go by field name (:data:`WIRE_FIELDS`
says which wire names carry which attribute of the decoded view), so the order is written once,
in the layout: adding a broadcast field means adding its name to the layout (and, for a new
view attribute, one :data:`WIRE_FIELDS` entry) and bumping the version here, and nothing else.

- ``/swarm/agent_states`` (:data:`AGENT_STATE`): ``agent_id`` (int), ``incarnation`` (int,
  random per process start: two processes broadcasting one ``agent_id`` are told apart),
  ``seq`` (int, per incarnation), ``stamp_sec stamp_nanosec`` (ints, the sender's ROS clock as
  in ``builtin_interfaces/Time``), ``px py pz`` (m, world ENU), ``vx vy vz`` (m/s, world ENU),
  ``u`` and ``u_ss`` (soliton state, dimensionless), ``member`` (1: a ring member's state; 0: a
  *presence* broadcast of an agent whose controller is out, whose vehicle the others keep
  ``d_safe`` from but leave out of the ring and the metrics), ``uncertainty`` (m: how far the
  vehicle may be from ``px py pz``, from its odometry's position covariance, e.g. after an
  estimator reset; the others keep ``d_safe`` from that disc), ``landed`` (1: a presence of
  a vehicle on the ground or otherwise out of the air, which the others forget as an obstacle;
  0 otherwise: a vehicle that falls silent stays an obstacle until heard again).
- ``/target/state`` (:data:`TARGET_STATE`): ``stamp_sec stamp_nanosec``, ``px py pz`` (m, world
  ENU), ``vx vy vz`` (m/s, world ENU), ``ax ay az`` (m/s^2, world ENU: the broadcaster's
  estimate of its acceleration, which the agents' commands lead by their lag), ``omega_ref``
  (rad/s), then ``(agent_id, lambda)`` pairs.

Integer fields travel as float64 values, exact below 2**53: a stamp is split into seconds and
nanoseconds so that it stays exact at epoch times (a single float64 would round it to 0.2 us).
Decoding checks they are integers. The decoded views (:class:`AgentBroadcast`,
:class:`TargetBroadcast`) have ``agent_id`` and ``stamp_ns`` as ``int``.

rclpy and std_msgs are imported only by the functions that build ROS objects, so the batch
simulator and the analysis can use the layouts without a ROS install.
"""
from __future__ import annotations

from dataclasses import dataclass
import functools
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ros_support.topics import CLOCK_TOPIC  # defined once, exported here too
from ros_support.validation import DOMAIN_IDS  # the one rule, exported here too
from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, AgentStates, FLOAT_COLUMNS, INT_COLUMNS, TargetBroadcast)

__all__ = [
    'AGENT_CMD_TOPIC', 'AGENT_NODE_NAME', 'AGENT_ODOM_TOPIC', 'AGENT_STATE', 'agent_state_array',
    'agent_state_from_msg', 'agent_state_from_values', 'agent_state_to_msg', 'agent_state_values',
    'agent_states_from_values',
    'AGENT_STATES_TOPIC', 'AGENT_STATUS_TOPIC', 'AgentBroadcast', 'BEST_EFFORT',
    'check_reliability', 'CLOCK_TOPIC', 'decode', 'DIAGNOSTICS_TOPIC', 'DOMAIN_IDS', 'encode',
    'Layout', 'MARKERS_TOPIC', 'WIRE_FIELDS', 'WireField',
    'METRICS_TOPIC_PREFIX', 'OPERATOR_REQUEST',
    'RELIABLE', 'SWARM_RELIABILITIES', 'swarm_qos', 'TARGET_ODOM_TOPIC', 'TARGET_STATE',
    'target_state_from_msg', 'target_state_to_msg', 'TARGET_STATE_TOPIC', 'TargetBroadcast',
    'VEHICLE_FAILURE_TOPIC']

# --- topics -----------------------------------------------------------------------------------
AGENT_STATES_TOPIC = '/swarm/agent_states'
TARGET_STATE_TOPIC = '/target/state'
TARGET_ODOM_TOPIC = '/target/odom'
METRICS_TOPIC_PREFIX = '/swarm/metrics/'
MARKERS_TOPIC = '/swarm/markers'
# Every agent's and bridge's DiagnosticStatus, one per DiagnosticArray, on change and at 1 Hz
# (the diagnostic_updater convention: rqt_robot_monitor and diagnostic_aggregator read it).
DIAGNOSTICS_TOPIC = '/diagnostics'
# Relative to an agent's namespace.
AGENT_ODOM_TOPIC = 'odom'
AGENT_CMD_TOPIC = 'cmd_vel'
AGENT_STATUS_TOPIC = '~/status'
AGENT_NODE_NAME = 'agent'  # agent_node's name in its vehicle's namespace (/uav1/agent)
# Why the vehicle has left the ring (std_msgs/String, latched; '' = it has not): the bridge
# says it from a landing (battery, land_after, ~/land) until its next confirmed engage, and
# the agent announces a failure with that reason. Relative: in the vehicle's namespace.
VEHICLE_FAILURE_TOPIC = 'vehicle_failure'
# The reason a vehicle left the ring ends with this when the operator asked it (a landing, a
# hold): a report, not a warning.
OPERATOR_REQUEST = 'operator request'

# --- QoS --------------------------------------------------------------------------------------
RELIABLE = 'reliable'
BEST_EFFORT = 'best_effort'
SWARM_RELIABILITIES = (RELIABLE, BEST_EFFORT)
# Reliable: deep enough that a lock-stepped simulation never drops a state within one tick.
LOCKSTEP_DEPTH = 1000
TARGET_RELIABLE_DEPTH = 10
# Best effort over a radio link: only the newest states matter.
RADIO_DEPTH = 5
SWARM_RELIABILITY_DESCRIPTION = (
    "QoS reliability of /swarm/agent_states and /target/state: 'reliable' (lock-stepped "
    "simulation, one host) or 'best_effort' (radio links between hosts). Every host must use "
    'the same value: a best_effort publisher never reaches a reliable subscriber.')


def swarm_qos(reliability: str, topic: str = AGENT_STATES_TOPIC):
    """
    Return the QoS profile of a swarm topic for ``reliability``.

    ``reliability`` is 'reliable' or 'best_effort'.
    """
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
    check_reliability(reliability)
    if reliability == BEST_EFFORT:
        return QoSProfile(depth=RADIO_DEPTH, history=HistoryPolicy.KEEP_LAST,
                          reliability=ReliabilityPolicy.BEST_EFFORT)
    depth = LOCKSTEP_DEPTH if topic == AGENT_STATES_TOPIC else TARGET_RELIABLE_DEPTH
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE)


def check_reliability(reliability: str) -> str:
    """``reliability`` if it is one of :data:`SWARM_RELIABILITIES`, else ``ValueError``."""
    if reliability not in SWARM_RELIABILITIES:
        raise ValueError(f'swarm_reliability must be one of {", ".join(SWARM_RELIABILITIES)}, '
                         f'got {reliability!r}')
    return reliability


# --- layouts ----------------------------------------------------------------------------------
NS_PER_S = 1_000_000_000


@dataclass(frozen=True)
class Layout:
    """A versioned Float64MultiArray layout: ``name``, ``version`` and the field names."""

    name: str
    version: int
    fields: tuple[str, ...]
    pairs: tuple[str, ...] = ()  # trailing repeated pairs, if any

    @functools.cached_property
    def label(self) -> str:
        return f'{self.name}.v{self.version}:' + ','.join(self.fields + self.pairs)

    def heard(self, msg) -> str | None:
        """Return the label ``msg`` carries (None when unlabelled)."""
        dims = msg.layout.dim
        return dims[0].label if dims and dims[0].label else None

    def check_label(self, msg) -> None:
        """``ValueError`` if ``msg`` carries another layout's label (an unlabelled one passes)."""
        label = self.heard(msg)
        if label is not None and label != self.label:
            heard = label.split(':', 1)[0] if ':' in label else 'an unversioned layout'
            raise ValueError(f'{self.name} layout mismatch: the sender speaks {heard}, this node '
                             f'{self.name}.v{self.version}; run one version of the package on '
                             'every host')


AGENT_STATE = Layout('agent_state', 6, (
    'agent_id', 'incarnation', 'seq', 'stamp_sec', 'stamp_nanosec', 'px', 'py', 'pz', 'vx', 'vy',
    'vz', 'u', 'u_ss', 'member', 'uncertainty', 'landed'))
TARGET_STATE = Layout('target_state', 3, (
    'stamp_sec', 'stamp_nanosec', 'px', 'py', 'pz', 'vx', 'vy', 'vz', 'ax', 'ay', 'az',
    'omega_ref'), pairs=('id_k', 'lambda_k'))
# Earlier agent-state layouts that recorded bags may hold: read by the analysis (never by a live
# node, which must not mix versions), converted to AGENT_STATE order.
AGENT_STATE_V2 = Layout('agent_state', 2, (
    'agent_id', 'incarnation', 'seq', 'stamp', 'px', 'py', 'pz', 'vx', 'vy', 'vz', 'u', 'u_ss'))
AGENT_STATE_V3 = Layout('agent_state', 3, AGENT_STATE.fields[:-3])  # before presence: members
AGENT_STATE_V4 = Layout('agent_state', 4, AGENT_STATE.fields[:-2])  # before uncertainty: 0
AGENT_STATE_V5 = Layout('agent_state', 5, AGENT_STATE.fields[:-1])  # before landed: in the air
_TARGET_SIZE = len(TARGET_STATE.fields)


def _with_layout(data: list[float], layout: Layout):
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension
    msg = Float64MultiArray(data=data)
    msg.layout.dim = [MultiArrayDimension(label=layout.label, size=len(data), stride=len(data))]
    return msg


def stamp_fields(stamp_ns: int) -> tuple[float, float]:
    """``(stamp_sec, stamp_nanosec)`` of integer nanoseconds (nanosec in [0, 1e9))."""
    sec, nanosec = divmod(int(stamp_ns), NS_PER_S)
    return float(sec), float(nanosec)


def _stamp_ns(layout: Layout, sec: float, nanosec: float) -> int:
    if not (sec == int(sec) and nanosec == int(nanosec) and 0 <= nanosec < NS_PER_S):
        raise ValueError(f'{layout.name} stamp_sec {float(sec)!r}, stamp_nanosec '
                         f'{float(nanosec)!r}: both must be integers, stamp_nanosec in [0, 1e9)')
    return int(sec) * NS_PER_S + int(nanosec)


@dataclass(frozen=True)
class WireField:
    """How one attribute of a decoded view travels: its wire names and the two conversions."""

    names: tuple[str, ...]
    encode: Callable[[Any], Sequence[float]]
    decode: Callable[[Layout, Sequence[float]], Any]


def _integer(name: str) -> WireField:
    def decode(layout: Layout, values: Sequence[float]) -> int:
        if values[0] != int(values[0]):
            raise ValueError(f'{layout.name.replace("_", " ")} {name} {float(values[0])!r} is not '
                             'an integer')
        return int(values[0])
    return WireField((name,), lambda value: (float(value),), decode)


def _flag(name: str) -> WireField:
    def decode(layout: Layout, values: Sequence[float]) -> bool:
        if values[0] not in (0.0, 1.0):
            raise ValueError(f'{layout.name.replace("_", " ")} {name} {float(values[0])!r} is '
                             'neither 0 nor 1')
        return values[0] == 1.0
    return WireField((name,), lambda value: (1.0 if value else 0.0,), decode)


def _real(name: str) -> WireField:
    return WireField((name,), lambda value: (float(value),), lambda layout, values: values[0])


def _vector(*names: str) -> WireField:
    return WireField(names, lambda value: tuple(map(float, value)),
                     lambda layout, values: np.array(values, dtype=float))


# Attribute of AgentBroadcast / TargetBroadcast -> its wire fields. A layout carries those of its
# fields; the order on the wire is the layout's.
WIRE_FIELDS = {
    'agent_id': _integer('agent_id'),
    'incarnation': _integer('incarnation'),
    'seq': _integer('seq'),
    'stamp_ns': WireField(('stamp_sec', 'stamp_nanosec'), lambda ns: stamp_fields(ns),
                          lambda layout, values: _stamp_ns(layout, *values)),
    'position': _vector('px', 'py', 'pz'),
    'velocity': _vector('vx', 'vy', 'vz'),
    'acceleration': _vector('ax', 'ay', 'az'),
    'u': _real('u'),
    'u_ss': _real('u_ss'),
    'member': _flag('member'),
    'uncertainty': _real('uncertainty'),
    'landed': _flag('landed'),
    'omega_ref': _real('omega_ref'),
}


def encode(layout: Layout, attribute: Callable[[str], Any]) -> list[float]:
    """Return the wire values of ``layout``'s fields, by name, from ``attribute(name)``."""
    carried, order = _encoding(layout)
    values = [value for name, wire in carried for value in wire.encode(attribute(name))]
    return [values[k] for k in order]


@functools.lru_cache(maxsize=None)
def _encoding(layout: Layout) -> tuple[tuple[tuple[str, WireField], ...], tuple[int, ...]]:
    """Return the attributes ``layout`` carries with their wire fields, and where each lands."""
    carried = tuple((name, wire) for name, wire in WIRE_FIELDS.items()
                    if wire.names[0] in layout.fields)
    names = [n for _, wire in carried for n in wire.names]
    return carried, tuple(names.index(name) for name in layout.fields)


def decode(layout: Layout, values: Sequence[float]) -> dict[str, Any]:
    """Return the view attributes that ``values`` (``layout``'s fields, in order) carry."""
    named = dict(zip(layout.fields, values))
    return {name: wire.decode(layout, [named[n] for n in wire.names])
            for name, wire in WIRE_FIELDS.items() if wire.names[0] in named}


def agent_state_values(state: AgentBroadcast) -> list[float]:
    """Return the wire values of an agent state, in :data:`AGENT_STATE` order."""
    return encode(AGENT_STATE, lambda name: getattr(state, name))


def agent_state_to_msg(state: AgentBroadcast):
    """std_msgs/Float64MultiArray of an agent state."""
    return _with_layout(agent_state_values(state), AGENT_STATE)


def _from_v2(values: np.ndarray) -> np.ndarray:
    """AGENT_STATE_V2 values (stamp in float seconds) in AGENT_STATE order."""
    named = dict(zip(AGENT_STATE_V2.fields, values))
    stamp = named.pop('stamp')
    named.update(zip(('stamp_sec', 'stamp_nanosec'),
                     stamp_fields(round(stamp * 1e9) if math.isfinite(stamp) else 0)))
    return _from_v3(np.array([named[name] for name in AGENT_STATE_V3.fields]))


def _from_v3(values: np.ndarray) -> np.ndarray:
    """AGENT_STATE_V3 values in AGENT_STATE order: every state then was a ring member's."""
    return _from_v4(np.append(values, 1.0))


def _from_v4(values: np.ndarray) -> np.ndarray:
    """AGENT_STATE_V4 values in AGENT_STATE order: no position uncertainty was broadcast."""
    return _from_v5(np.append(values, 0.0))


def _from_v5(values: np.ndarray) -> np.ndarray:
    """AGENT_STATE_V5 values in AGENT_STATE order: no landing was broadcast."""
    return np.append(values, 0.0)


_OLDER_AGENT_STATES = {AGENT_STATE_V2.label: (AGENT_STATE_V2, _from_v2),
                       AGENT_STATE_V3.label: (AGENT_STATE_V3, _from_v3),
                       AGENT_STATE_V4.label: (AGENT_STATE_V4, _from_v4),
                       AGENT_STATE_V5.label: (AGENT_STATE_V5, _from_v5)}


def agent_state_array(msg, older: bool = False) -> np.ndarray:
    """
    Return the values of an agent state message in :data:`AGENT_STATE` order.

    The label and size are checked, the values not: for bulk readers such as the analysis.
    ``older``: also read the earlier labelled layouts a recorded bag may hold (converted).
    """
    known = _OLDER_AGENT_STATES.get(AGENT_STATE.heard(msg)) if older else None
    layout, convert = known or (AGENT_STATE, None)
    if convert is None:
        AGENT_STATE.check_label(msg)
    values = np.asarray(msg.data, dtype=float)
    if values.size != len(layout.fields):
        raise ValueError(f'agent state has {values.size} values, expected '
                         f'{len(layout.fields)} ({layout.name}.v{layout.version})')
    return values if convert is None else convert(values)


def agent_state_from_values(values) -> AgentBroadcast:
    """Decode finite :data:`AGENT_STATE` values; ``ValueError`` says what is wrong."""
    if not np.all(np.isfinite(values)):
        bad = [AGENT_STATE.fields[i] for i in np.flatnonzero(~np.isfinite(values))]
        raise ValueError(f'agent state has non-finite {", ".join(bad)}')
    return AgentBroadcast(**decode(AGENT_STATE, [float(v) for v in values]))


def agent_states_from_values(rows) -> tuple[AgentStates, list[str]]:
    """
    Decode rows (K, fields) of :data:`AGENT_STATE` values at once, by field name.

    Returns the good rows as :class:`AgentStates` (in order) and, for each bad one, what
    :func:`agent_state_from_values` says is wrong: a row passes the same checks (finite,
    integers where :data:`WIRE_FIELDS` has them, a flag 0 or 1, a stamp's nanoseconds in [0,
    1e9), an uncertainty >= 0, landed only with member 0), here over arrays. Integers beyond
    2**62 are refused.
    """
    rows = np.asarray(rows, dtype=float).reshape(-1, len(AGENT_STATE.fields))
    named = dict(zip(AGENT_STATE.fields, rows.T))
    stamp = WIRE_FIELDS['stamp_ns'].names
    integers = [*(n for n in INT_COLUMNS if n in named), *stamp]
    good = np.isfinite(rows).all(axis=1)
    with np.errstate(invalid='ignore'):
        for name in integers:
            good &= (named[name] == np.trunc(named[name])) & (np.abs(named[name]) < 2.0 ** 62)
        good &= (named[stamp[1]] >= 0) & (named[stamp[1]] < NS_PER_S)
        good &= (named['member'] == 0.0) | (named['member'] == 1.0)
        good &= named['uncertainty'] >= 0.0
        good &= (named['landed'] == 0.0) | ((named['landed'] == 1.0) & (named['member'] == 0.0))
    errors = []
    for k in np.flatnonzero(~good):
        try:
            agent_state_from_values(rows[k])
            errors.append('agent state has an integer beyond 2**62')
        except ValueError as error:
            errors.append(str(error))
    if not good.all():
        named = {name: column[good] for name, column in named.items()}
    ints = np.stack([*(named[n].astype(np.int64) for n in INT_COLUMNS if n in named),
                     named[stamp[0]].astype(np.int64) * NS_PER_S
                     + named[stamp[1]].astype(np.int64)], axis=1)
    floats = np.stack([named[n] for n in FLOAT_COLUMNS], axis=1)
    return AgentStates(ints, floats), errors


def agent_state_from_msg(msg) -> AgentBroadcast:
    """Decode an agent state message (rclpy or rosbags); ``ValueError`` on a bad one."""
    return agent_state_from_values(agent_state_array(msg))


def target_state_to_msg(stamp_ns: int, position, velocity, omega_ref: float = 0.0,
                        lambdas: Mapping[int, float] | None = None, acceleration=(0.0, 0.0, 0.0)):
    """
    Return the std_msgs/Float64MultiArray of a target state stamped ``stamp_ns`` (int ns).

    ``acceleration`` (m/s^2, world ENU): the broadcaster's estimate (``core.target_estimate``).
    """
    given = {'stamp_ns': stamp_ns, 'position': position, 'velocity': velocity,
             'acceleration': acceleration, 'omega_ref': omega_ref}
    data = encode(TARGET_STATE, given.__getitem__)
    for agent_id, weight in sorted((lambdas or {}).items()):
        data += [float(agent_id), float(weight)]
    return _with_layout(data, TARGET_STATE)


def target_state_from_msg(msg) -> TargetBroadcast:
    """Decode a target state message; ``ValueError`` on a bad one."""
    TARGET_STATE.check_label(msg)
    data = msg.data
    n = _TARGET_SIZE
    if len(data) < n or (len(data) - n) % 2:
        raise ValueError(f'target state has {len(data)} values, expected {n} plus '
                         '(id, lambda) pairs')
    values = [float(x) for x in data]
    if not all(math.isfinite(x) for x in values):
        raise ValueError('target state has non-finite values')
    pairs = values[n:]
    if any(agent_id != int(agent_id) for agent_id in pairs[::2]):
        raise ValueError('target state has a non-integer agent id in its (id, lambda) pairs')
    return TargetBroadcast(**decode(TARGET_STATE, values[:n]),
                           lambdas={int(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)})
