"""
The swarm's wire interface, defined once: topic names, QoS, and the state layouts.

Every node, the in-process fan-out, the recorder and the analysis use this module, and nothing
else, to name a swarm topic, choose its QoS or read and write a swarm message.

Swarm messages are ``std_msgs/Float64MultiArray`` (a pip-only install cannot build custom
messages). Each layout is versioned: the first ``layout.dim`` label is ``<name>.v<version>:``
followed by the field names, so a receiver speaking another version fails with one clear error
instead of misreading positions. Adding a broadcast field means changing the field tuple and the
version here, and nothing else.

- ``/swarm/agent_states`` (:data:`AGENT_STATE`): ``agent_id`` (int), ``incarnation`` (int,
  random per process start: two processes broadcasting one ``agent_id`` are told apart),
  ``seq`` (int, per incarnation), ``stamp`` (s, sender's clock), ``px py pz`` (m, world ENU),
  ``vx vy vz`` (m/s, world ENU), ``u`` and ``u_ss`` (soliton state, dimensionless).
- ``/target/state`` (:data:`TARGET_STATE`): ``stamp`` (s), ``px py pz`` (m, world ENU),
  ``vx vy vz`` (m/s, world ENU), ``omega_ref`` (rad/s), then ``(agent_id, lambda)`` pairs.

rclpy and std_msgs are imported only by the functions that build ROS objects, so the batch
simulator and the analysis can use the layouts without a ROS install.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Mapping

import numpy as np

from soliton_encirclement_ros.core.controller import AgentStateMsg, TargetStateMsg

# --- topics -----------------------------------------------------------------------------------
AGENT_STATES_TOPIC = '/swarm/agent_states'
TARGET_STATE_TOPIC = '/target/state'
TARGET_ODOM_TOPIC = '/target/odom'
METRICS_TOPIC_PREFIX = '/swarm/metrics/'
MARKERS_TOPIC = '/swarm/markers'
CLOCK_TOPIC = '/clock'
# Relative to an agent's namespace.
AGENT_ODOM_TOPIC = 'odom'
AGENT_CMD_TOPIC = 'cmd_vel'
AGENT_STATUS_TOPIC = '~/status'

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
@dataclass(frozen=True)
class Layout:
    """A versioned Float64MultiArray layout: ``name``, ``version`` and the field names."""

    name: str
    version: int
    fields: tuple[str, ...]
    pairs: tuple[str, ...] = ()  # trailing repeated pairs, if any

    @property
    def label(self) -> str:
        return f'{self.name}.v{self.version}:' + ','.join(self.fields + self.pairs)

    def check_label(self, msg) -> None:
        """``ValueError`` if ``msg`` carries another layout's label (an unlabelled one passes)."""
        dims = msg.layout.dim
        if not dims or not dims[0].label:
            return
        label = dims[0].label
        if label != self.label:
            heard = label.split(':', 1)[0] if ':' in label else 'an unversioned layout'
            raise ValueError(f'{self.name} layout mismatch: the sender speaks {heard}, this node '
                             f'{self.name}.v{self.version}; run one version of the package on '
                             'every host')


AGENT_STATE = Layout('agent_state', 2, ('agent_id', 'incarnation', 'seq', 'stamp', 'px', 'py',
                                        'pz', 'vx', 'vy', 'vz', 'u', 'u_ss'))
TARGET_STATE = Layout('target_state', 1, ('stamp', 'px', 'py', 'pz', 'vx', 'vy', 'vz',
                                          'omega_ref'), pairs=('id_k', 'lambda_k'))
_AGENT_SIZE = len(AGENT_STATE.fields)
_TARGET_SIZE = len(TARGET_STATE.fields)


def _with_layout(data: list[float], layout: Layout):
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension
    msg = Float64MultiArray(data=data)
    msg.layout.dim = [MultiArrayDimension(label=layout.label, size=len(data), stride=len(data))]
    return msg


def agent_state_values(state: AgentStateMsg) -> list[float]:
    """Return the wire values of an agent state, in :data:`AGENT_STATE` order."""
    return [float(state.agent_id), float(state.incarnation), float(state.seq), state.stamp,
            *map(float, state.position), *map(float, state.velocity), state.u, state.u_ss]


def agent_state_to_msg(state: AgentStateMsg):
    """std_msgs/Float64MultiArray of an agent state."""
    return _with_layout(agent_state_values(state), AGENT_STATE)


def agent_state_array(msg) -> np.ndarray:
    """
    Return the values of an agent state message in :data:`AGENT_STATE` order.

    The label and size are checked, the values not: for bulk readers such as the analysis.
    """
    AGENT_STATE.check_label(msg)
    values = np.asarray(msg.data, dtype=float)
    if values.size != _AGENT_SIZE:
        raise ValueError(f'agent state has {values.size} values, expected {_AGENT_SIZE} '
                         f'({AGENT_STATE.name}.v{AGENT_STATE.version})')
    return values


def agent_state_from_values(values) -> AgentStateMsg:
    """Decode finite :data:`AGENT_STATE` values; ``ValueError`` says what is wrong."""
    if not np.all(np.isfinite(values)):
        bad = [AGENT_STATE.fields[i] for i in np.flatnonzero(~np.isfinite(values))]
        raise ValueError(f'agent state has non-finite {", ".join(bad)}')
    return AgentStateMsg(agent_id=int(values[0]), incarnation=int(values[1]), seq=int(values[2]),
                         stamp=float(values[3]), position=values[4:7], velocity=values[7:10],
                         u=float(values[10]), u_ss=float(values[11]))


def agent_state_from_msg(msg) -> AgentStateMsg:
    """Decode an agent state message (rclpy or rosbags); ``ValueError`` on a bad one."""
    return agent_state_from_values(agent_state_array(msg))


def target_state_to_msg(stamp: float, position, velocity, omega_ref: float = 0.0,
                        lambdas: Mapping[int, float] | None = None):
    """std_msgs/Float64MultiArray of a target state."""
    data = [float(stamp), *map(float, position), *map(float, velocity), float(omega_ref)]
    for agent_id, weight in sorted((lambdas or {}).items()):
        data += [float(agent_id), float(weight)]
    return _with_layout(data, TARGET_STATE)


def target_state_from_msg(msg) -> TargetStateMsg:
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
    return TargetStateMsg(stamp=values[0], position=np.array(values[1:4]),
                          velocity=np.array(values[4:7]), omega_ref=values[7],
                          lambdas={int(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)})
