"""One agent's soliton encirclement controller: explicit state, messages, pure step.

Per control tick an agent (the ROS ``agent_node`` or the batch simulator) does::

    msg = outgoing_state(state, position, velocity, now)        # 1. broadcast this
    state, v_cmd = control_step(state, position, velocity, now, params)  # 2.-9. command

and between ticks feeds what it hears into ``receive_agent_state`` / ``receive_target_state``
with the receive time. ``outgoing_state`` carries ``state.seq``; ``control_step`` increments
``seq``, so consecutive broadcasts are numbered 0, 1, 2, ... Every function is pure: it
returns a new state and never mutates its arguments. Nothing here imports rclpy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

import numpy as np

from soliton_encirclement_ros.core.geometry import target_angle
from soliton_encirclement_ros.core.law import (
    MISSING_NEIGHBOUR, NeighbourView, encirclement_step, fallback_command)
from soliton_encirclement_ros.core.neighbours import (
    NO_NEIGHBOUR, apply_hysteresis, gap_to_pred, gap_to_succ, is_alive, ring_neighbours)
from soliton_encirclement_ros.core.params import ControllerParams


def _vector3(name: str, value) -> np.ndarray:
    v = np.array(value, dtype=float).reshape(-1)
    if v.shape != (3,):
        raise ValueError(f'{name} must have 3 components, got {v.size}')
    v.setflags(write=False)
    return v


@dataclass(frozen=True)
class AgentStateMsg:
    """An agent's broadcast: id, sequence number, sender stamp, world-frame state, ``u``, ``u_ss``."""

    agent_id: int
    seq: int
    stamp: float
    position: np.ndarray
    velocity: np.ndarray
    u: float
    u_ss: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, 'agent_id', int(self.agent_id))
        object.__setattr__(self, 'seq', int(self.seq))
        object.__setattr__(self, 'position', _vector3('position', self.position))
        object.__setattr__(self, 'velocity', _vector3('velocity', self.velocity))


@dataclass(frozen=True)
class TargetStateMsg:
    """The target's broadcast: stamp, world-frame state, spin reference and arc weights.

    ``lambdas`` maps an agent id j to the spacing weight of arc j -> succ(j) (1.0 if absent).
    """

    stamp: float
    position: np.ndarray
    velocity: np.ndarray
    omega_ref: float = 0.0
    lambdas: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, 'position', _vector3('position', self.position))
        object.__setattr__(self, 'velocity', _vector3('velocity', self.velocity))
        object.__setattr__(self, 'lambdas', MappingProxyType(
            {int(k): float(v) for k, v in dict(self.lambdas).items()}))


@dataclass(frozen=True)
class ControllerState:
    """Everything one agent's controller remembers between ticks.

    ``neighbours`` maps agent id -> (last AgentStateMsg, receive time); ``target`` is
    (last TargetStateMsg, receive time) or None; ``prev_cmd`` the last command (world frame).
    """

    agent_id: int
    u: float = 0.0
    u_ss: float = 0.0
    pred: Optional[int] = None
    succ: Optional[int] = None
    prev_cmd: np.ndarray = field(default_factory=lambda: _vector3('prev_cmd', np.zeros(3)))
    neighbours: Mapping[int, tuple[AgentStateMsg, float]] = field(default_factory=dict)
    target: Optional[tuple[TargetStateMsg, float]] = None
    seq: int = 0


def initial_state(agent_id: int) -> ControllerState:
    """A fresh controller: u = 0, no neighbours, no target, sequence number 0."""
    return ControllerState(agent_id=int(agent_id))


def receive_agent_state(state: ControllerState, msg: AgentStateMsg,
                        rx_time: float) -> ControllerState:
    """Cache a neighbour's broadcast with its receive time.

    Own messages and messages not newer (by ``seq``) than the cached one are dropped.
    """
    if msg.agent_id == state.agent_id:
        return state
    cached = state.neighbours.get(msg.agent_id)
    if cached is not None and msg.seq <= cached[0].seq:
        return state
    neighbours = dict(state.neighbours)
    neighbours[msg.agent_id] = (msg, float(rx_time))
    return dataclasses.replace(state, neighbours=MappingProxyType(neighbours))


def receive_target_state(state: ControllerState, msg: TargetStateMsg,
                         rx_time: float) -> ControllerState:
    """Cache the target's broadcast with its receive time (older stamps than the cached are dropped)."""
    if state.target is not None and msg.stamp < state.target[0].stamp:
        return state
    return dataclasses.replace(state, target=(msg, float(rx_time)))


def outgoing_state(state: ControllerState, own_position, own_velocity,
                   now: float) -> AgentStateMsg:
    """The AgentState to broadcast at this tick (before ``control_step``): seq = ``state.seq``."""
    return AgentStateMsg(agent_id=state.agent_id, seq=state.seq, stamp=float(now),
                         position=own_position, velocity=own_velocity,
                         u=state.u, u_ss=state.u_ss)


def live_neighbours(state: ControllerState, now: float,
                    params: ControllerParams) -> dict[int, AgentStateMsg]:
    """The cached agent states that are live at ``now`` (``now - rx_time <= agent_timeout``)."""
    return {i: msg for i, (msg, rx) in state.neighbours.items()
            if is_alive(rx, now, params.agent_timeout)}


def _view(msg: Optional[AgentStateMsg], theta: float) -> NeighbourView:
    if msg is None:
        return MISSING_NEIGHBOUR
    return NeighbourView(theta, msg.position, msg.velocity, msg.u, msg.u_ss)


def _as_id(value) -> Optional[int]:
    value = int(value)
    return None if value == NO_NEIGHBOUR else value


def control_step(state: ControllerState, own_position, own_velocity, now: float,
                 params: ControllerParams) -> tuple[ControllerState, np.ndarray]:
    """One control tick from this agent's own odometry and cached messages.

    Returns (new state, v_cmd): the desired world-frame velocity (3,), clamped to
    ``max_speed_xy``/``max_speed_z``. Without a live target the command is the last known
    target velocity (zero if none was ever received) and ``u`` and the neighbours are held.
    """
    position = _vector3('own_position', own_position)
    velocity = _vector3('own_velocity', own_velocity)
    neighbours = state.neighbours
    if params.prune_expired:
        neighbours = MappingProxyType({i: entry for i, entry in neighbours.items()
                                       if is_alive(entry[1], now, params.agent_timeout)})
    seq = state.seq + 1
    if state.target is None or not is_alive(state.target[1], now, params.target_timeout):
        last = state.target[0].velocity if state.target is not None else np.zeros(3)
        cmd = fallback_command(last, params)
        return dataclasses.replace(state, neighbours=neighbours, prev_cmd=cmd, seq=seq), cmd

    target = state.target[0]
    live = live_neighbours(state, now, params)
    theta_self = float(target_angle(position, target.position))
    ids = list(live)
    thetas = (target_angle(np.array([live[i].position for i in ids]), target.position)
              if ids else np.empty(0))
    theta_of = dict(zip(ids, thetas.tolist()))
    cand_pred, cand_succ = ring_neighbours(state.agent_id, theta_self, ids, thetas)

    def gap(neighbour, gap_fn):
        return gap_fn(theta_self, theta_of[neighbour]) if neighbour in theta_of else np.nan

    pred, succ = apply_hysteresis(
        cand_pred, cand_succ, gap(cand_pred, gap_to_pred), gap(cand_succ, gap_to_succ),
        NO_NEIGHBOUR if state.pred is None else state.pred,
        NO_NEIGHBOUR if state.succ is None else state.succ,
        gap(state.pred, gap_to_pred), gap(state.succ, gap_to_succ), params.hysteresis)
    pred, succ = _as_id(pred), _as_id(succ)
    lambdas = target.lambdas
    u_new, u_ss, cmd = encirclement_step(
        state.u, position, velocity, state.prev_cmd, target.position, target.velocity,
        target.omega_ref, theta_self,
        _view(live.get(pred), theta_of.get(pred, np.nan)),
        _view(live.get(succ), theta_of.get(succ, np.nan)),
        lambdas.get(pred, 1.0), lambdas.get(state.agent_id, 1.0), params)
    cmd = _vector3('v_cmd', cmd)
    return dataclasses.replace(
        state, u=float(u_new), u_ss=float(u_ss), pred=pred, succ=succ, prev_cmd=cmd,
        neighbours=neighbours, seq=seq), cmd
