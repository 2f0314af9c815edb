"""The one place that converts swarm messages (std_msgs/Float64MultiArray) to core objects.

Layouts (also in the README's topic table):
- ``/swarm/agent_states``: ``[id, seq, stamp, px, py, pz, vx, vy, vz, u, u_ss]``
- ``/target/state``: ``[stamp, px, py, pz, vx, vy, vz, omega_ref, id_1, lambda_1, ...]``
Positions and velocities are world-frame (ENU), stamps in seconds of the sender's clock.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from .core.controller import AgentStateMsg, TargetStateMsg

AGENT_STATE_FIELDS = ('id', 'seq', 'stamp', 'px', 'py', 'pz', 'vx', 'vy', 'vz', 'u', 'u_ss')
TARGET_STATE_FIELDS = ('stamp', 'px', 'py', 'pz', 'vx', 'vy', 'vz', 'omega_ref')


def _layout(msg: Float64MultiArray, fields: tuple[str, ...], size: int) -> Float64MultiArray:
    msg.layout.dim = [MultiArrayDimension(label=','.join(fields), size=size, stride=size)]
    return msg


def agent_state_to_msg(state: AgentStateMsg) -> Float64MultiArray:
    data = [float(state.agent_id), float(state.seq), state.stamp,
            *map(float, state.position), *map(float, state.velocity), state.u, state.u_ss]
    return _layout(Float64MultiArray(data=data), AGENT_STATE_FIELDS, len(AGENT_STATE_FIELDS))


def agent_state_from_msg(msg: Float64MultiArray) -> AgentStateMsg:
    """Decode an agent state; ``ValueError`` says what is wrong with a malformed one."""
    data = msg.data
    if len(data) != len(AGENT_STATE_FIELDS):
        raise ValueError(f'agent state has {len(data)} values, expected {len(AGENT_STATE_FIELDS)}')
    values = np.asarray(data, dtype=float)
    if not np.all(np.isfinite(values)):
        bad = [AGENT_STATE_FIELDS[i] for i in np.flatnonzero(~np.isfinite(values))]
        raise ValueError(f'agent state has non-finite {", ".join(bad)}')
    return AgentStateMsg(agent_id=int(values[0]), seq=int(values[1]), stamp=float(values[2]),
                         position=values[3:6], velocity=values[6:9],
                         u=float(values[9]), u_ss=float(values[10]))


def target_state_to_msg(stamp: float, position, velocity, omega_ref: float = 0.0,
                        lambdas: Mapping[int, float] | None = None) -> Float64MultiArray:
    data = [float(stamp), *map(float, position), *map(float, velocity), float(omega_ref)]
    for agent_id, weight in sorted((lambdas or {}).items()):
        data += [float(agent_id), float(weight)]
    return _layout(Float64MultiArray(data=data), TARGET_STATE_FIELDS + ('id_k', 'lambda_k'), len(data))


def target_state_from_msg(msg: Float64MultiArray) -> TargetStateMsg:
    data = msg.data
    n = len(TARGET_STATE_FIELDS)
    if len(data) < n or (len(data) - n) % 2:
        raise ValueError(f'target state has {len(data)} values, expected {n} plus (id, lambda) pairs')
    values = [float(x) for x in data]
    if not all(math.isfinite(x) for x in values):
        raise ValueError('target state has non-finite values')
    pairs = values[n:]
    return TargetStateMsg(stamp=values[0], position=np.array(values[1:4]),
                          velocity=np.array(values[4:7]), omega_ref=values[7],
                          lambdas={int(pairs[i]): pairs[i + 1] for i in range(0, len(pairs), 2)})
