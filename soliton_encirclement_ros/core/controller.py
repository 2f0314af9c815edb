"""
One agent's soliton encirclement controller: explicit state, messages, pure step.

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
import math
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple, Optional

import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.geometry import target_angle
from soliton_encirclement_ros.core.law import (
    encirclement_step, encirclement_step_one, fallback_command, MISSING_NEIGHBOUR, NeighbourView,
    silent_obstacles)
from soliton_encirclement_ros.core.neighbours import (
    is_alive, is_fresh, known_age, NO_NEIGHBOUR, select_neighbours, select_neighbours_one)


def seconds_to_ns(seconds: float) -> int:
    """Return ``seconds`` as integer nanoseconds (rounded to the nearest)."""
    return round(float(seconds) * 1e9)


def _integer(name: str, value) -> int:
    """``value`` as an int; ``TypeError`` for a float (seconds passed where ns are due)."""
    if isinstance(value, (bool, float, np.floating)):
        raise TypeError(f'{name} must be an integer number of nanoseconds, got {value!r}; '
                        'convert seconds with seconds_to_ns')
    return int(value)


class _Stamped:
    """The sender stamp of a broadcast: ``stamp_ns`` (int), ``stamp`` the same in seconds."""

    stamp_ns: int

    @property
    def stamp(self) -> float:
        """Return the sender stamp [s]."""
        return self.stamp_ns * 1e-9

    def _check_stamp(self) -> None:
        object.__setattr__(self, 'stamp_ns', _integer('stamp_ns', self.stamp_ns))


def _vector3(name: str, value) -> np.ndarray:
    if (type(value) is np.ndarray and value.base is None and not value.flags.writeable
            and value.dtype == np.float64 and value.shape == (3,)):
        return value  # already such an immutable vector (one made here): no copy
    v = np.array(value, dtype=float)
    if v.ndim != 1:
        v = v.reshape(-1)
    if v.shape != (3,):
        raise ValueError(f'{name} must have 3 components, got {v.size}')
    v.setflags(write=False)
    return v


@dataclass(frozen=True)
class AgentBroadcast(_Stamped):
    """
    An agent's broadcast.

    Id, sequence number, sender stamp (integer nanoseconds of the sender's ROS clock),
    world-frame state (ENU, m and m/s), ``u``, ``u_ss`` and the sender's incarnation.
    ``stamp`` is the same instant in seconds, the core's unit of time. ``member`` is False for
    a *presence* broadcast: the agent's controller is out (failed), so it is no ring member,
    but its vehicle is still there and the others keep ``d_safe`` from it. ``uncertainty``
    (m, >= 0) is how far the vehicle may be from ``position`` (its odometry's position
    covariance: e.g. after an estimator reset); the others keep ``d_safe`` from that disc.
    """

    agent_id: int
    seq: int
    stamp_ns: int
    position: np.ndarray
    velocity: np.ndarray
    u: float
    u_ss: float = 0.0
    incarnation: int = 0  # random per process start: tells two senders of one id apart
    member: bool = True  # False: presence only (controller out), an obstacle, not in the ring
    uncertainty: float = 0.0  # m: the vehicle is within this of position

    def __post_init__(self) -> None:
        object.__setattr__(self, 'agent_id', int(self.agent_id))
        uncertainty = float(self.uncertainty)
        if not uncertainty >= 0.0 or not math.isfinite(uncertainty):
            raise ValueError(f'uncertainty must be a finite distance >= 0, got {uncertainty}')
        object.__setattr__(self, 'uncertainty', uncertainty)
        object.__setattr__(self, 'member', bool(self.member))
        object.__setattr__(self, 'incarnation', int(self.incarnation))
        object.__setattr__(self, 'seq', int(self.seq))
        self._check_stamp()
        object.__setattr__(self, 'position', _vector3('position', self.position))
        object.__setattr__(self, 'velocity', _vector3('velocity', self.velocity))


@dataclass(frozen=True)
class TargetBroadcast(_Stamped):
    """
    The target's broadcast: stamp, world-frame state, spin reference and arc weights.

    ``stamp_ns`` is integer nanoseconds of the sender's ROS clock (``stamp`` the same in
    seconds); position and velocity are world ENU (m, m/s); ``lambdas`` maps an agent id j to
    the spacing weight of arc j -> succ(j) (1.0 if absent).
    """

    stamp_ns: int
    position: np.ndarray
    velocity: np.ndarray
    omega_ref: float = 0.0
    lambdas: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check_stamp()
        object.__setattr__(self, 'position', _vector3('position', self.position))
        object.__setattr__(self, 'velocity', _vector3('velocity', self.velocity))
        object.__setattr__(self, 'lambdas', MappingProxyType(
            {int(k): float(v) for k, v in dict(self.lambdas).items()}))


@dataclass(frozen=True)
class ControllerState:
    """
    Everything one agent's controller remembers between ticks.

    ``neighbours`` maps agent id -> (last AgentBroadcast, receive time); ``target`` is
    (last TargetBroadcast, receive time) or None; ``prev_cmd`` the last command (world frame).
    """

    agent_id: int
    u: float = 0.0
    u_ss: float = 0.0
    pred: Optional[int] = None
    succ: Optional[int] = None
    prev_cmd: np.ndarray = field(default_factory=lambda: _vector3('prev_cmd', np.zeros(3)))
    neighbours: Mapping[int, tuple[AgentBroadcast, float]] = field(default_factory=dict)
    target: Optional[tuple[TargetBroadcast, float]] = None
    seq: int = 0
    incarnation: int = 0
    started: Optional[float] = None  # time of the first tick: inputs never heard age from it


def initial_state(agent_id: int, incarnation: int = 0) -> ControllerState:
    """Return a fresh controller: u = 0, no neighbours, no target, sequence number 0."""
    return ControllerState(agent_id=int(agent_id), incarnation=int(incarnation))


def future_stamp_reason(kind: str, stamp: float, now: float, params: ControllerParams,
                        cause: str = 'are the clocks synchronised?') -> Optional[str]:
    """
    Why a ``kind`` state stamped ``stamp`` must be rejected at ``now``, or None if it is fine.

    A state stamped more than ``max_future_stamp`` ahead of the receiver's clock comes from a
    skewed or restarted clock; cached, it would make every later real state look old. ``cause``
    ends the reason: what the caller can tell about why (the agent names the sender, or a late
    ``/clock``).
    """
    ahead = stamp - now
    if ahead > params.max_future_stamp:
        return (f'{kind} state stamped {ahead:.3f} s ahead of this clock (max_future_stamp '
                f'{params.max_future_stamp:g} s): rejected; {cause}')
    return None


def stepped_back(cached_rx: float, rx_time: float, params: ControllerParams) -> bool:
    """
    Whether ``rx_time`` lies more than ``max_future_stamp`` before ``cached_rx``.

    The receiver's clock stepped back: a state heard on the new clock replaces the cached one.
    """
    return rx_time < cached_rx - params.max_future_stamp


def receive_agent_state(state: ControllerState, msg: AgentBroadcast,
                        rx_time: float, params: ControllerParams) -> ControllerState:
    """
    Cache a neighbour's broadcast with its receive time.

    Own messages are dropped, and so are messages not newer (by ``seq``) than the cached one
    of the same incarnation while that one is live. A new incarnation (the sender restarted) or
    an expired cache entry accepts any ``seq``: a restarted sequence is heard again after at
    most ``agent_timeout``.
    """
    if msg.agent_id == state.agent_id:
        return state
    if _keeps_cached(state.neighbours.get(msg.agent_id), msg, rx_time, params):
        return state
    neighbours = dict(state.neighbours)
    neighbours[msg.agent_id] = (msg, float(rx_time))
    return dataclasses.replace(state, neighbours=MappingProxyType(neighbours))


def _keeps_cached(cached, msg: AgentBroadcast, rx_time: float, params: ControllerParams) -> bool:
    """Whether the cached entry of ``msg``'s sender stays (``msg`` is dropped)."""
    return (cached is not None and msg.seq <= cached[0].seq
            and msg.incarnation == cached[0].incarnation
            and is_alive(cached[1], rx_time, params.agent_timeout)
            and not stepped_back(cached[1], rx_time, params))


def receive_states(state: ControllerState, received, params: ControllerParams
                   ) -> ControllerState:
    """
    Cache ``received`` broadcasts, ``(msg, rx_time)`` in arrival order, in one new state.

    The same as :func:`receive_agent_state` / :func:`receive_target_state` (by the message's
    type) one after the other, without a new state per message.
    """
    neighbours = None
    target = state.target
    for msg, rx_time in received:
        if not isinstance(msg, AgentBroadcast):
            if not _keeps_target(target, msg, rx_time, params):
                target = (msg, float(rx_time))
            continue
        if msg.agent_id == state.agent_id:
            continue
        table = state.neighbours if neighbours is None else neighbours
        if _keeps_cached(table.get(msg.agent_id), msg, rx_time, params):
            continue
        if neighbours is None:
            neighbours = dict(state.neighbours)
        neighbours[msg.agent_id] = (msg, float(rx_time))
    if neighbours is not None:
        return dataclasses.replace(state, neighbours=MappingProxyType(neighbours), target=target)
    if target is not state.target:
        return dataclasses.replace(state, target=target)
    return state


def receive_target_state(state: ControllerState, msg: TargetBroadcast,
                         rx_time: float, params: ControllerParams) -> ControllerState:
    """
    Cache the target's broadcast with its receive time.

    A stamp older than the cached one is dropped while the cached state is live; once it has
    expired (``target_liveness``) any stamp is accepted, so a target that restarted or whose
    clock stepped back is heard again.
    """
    if _keeps_target(state.target, msg, rx_time, params):
        return state
    return dataclasses.replace(state, target=(msg, float(rx_time)))


def _keeps_target(cached, msg: TargetBroadcast, rx_time: float, params: ControllerParams
                  ) -> bool:
    """Whether the cached target entry stays (``msg`` is dropped)."""
    return (cached is not None and msg.stamp_ns < cached[0].stamp_ns
            and is_alive(cached[1], rx_time, params.target_liveness)
            and not stepped_back(cached[1], rx_time, params))


def outgoing_state(state: ControllerState, own_position, own_velocity,
                   now: float, uncertainty: float = 0.0) -> AgentBroadcast:
    """
    Return the AgentState to broadcast at this tick (before ``control_step``).

    Seq = ``state.seq``; ``uncertainty`` the own position's (m).
    """
    return AgentBroadcast(agent_id=state.agent_id, seq=state.seq, stamp_ns=seconds_to_ns(now),
                          position=own_position, velocity=own_velocity,
                          u=state.u, u_ss=state.u_ss, incarnation=state.incarnation,
                          uncertainty=uncertainty)


def presence_state(state: ControllerState, own_position, own_velocity,
                   now: float, uncertainty: float = 0.0) -> tuple[ControllerState, AgentBroadcast]:
    """
    Return (state, the presence broadcast) of an agent whose controller is out (failed).

    Its vehicle is still in the air: the broadcast (``member`` False) tells the others where,
    so that they keep ``d_safe`` from it, and leaves it out of their ring. It takes the next
    sequence number, so the agent's own broadcasts stay in order when it comes back.
    """
    msg = AgentBroadcast(agent_id=state.agent_id, seq=state.seq, stamp_ns=seconds_to_ns(now),
                         position=own_position, velocity=own_velocity, u=0.0, u_ss=0.0,
                         incarnation=state.incarnation, member=False,
                         uncertainty=uncertainty)
    return dataclasses.replace(state, seq=state.seq + 1), msg


def live_neighbours(state: ControllerState, now: float,
                    params: ControllerParams) -> dict[int, AgentBroadcast]:
    """
    Return the cached ring members' states that are live at ``now``.

    Live: ``now - rx_time <= agent_timeout``; a presence broadcast (``member`` False) is none.
    """
    return {i: msg for i, (msg, rx) in state.neighbours.items()
            if msg.member and is_fresh(rx, now, params.agent_timeout)}


def _view(msg: Optional[AgentBroadcast], theta: float) -> NeighbourView:
    if msg is None:
        return MISSING_NEIGHBOUR
    return NeighbourView(theta, msg.position, msg.velocity, msg.u, msg.u_ss, msg.agent_id)


def _obstacles(neighbours, now: float, params: ControllerParams,
               own_uncertainty: float = 0.0) -> dict:
    """
    Return the d_safe term's inputs: every vehicle heard, ring member or presence.

    Those heard within ``agent_timeout`` count where they are; those silent since count at
    rest where last heard, for ``d_safe_memory``; a presence also where it will come to rest.
    A vehicle (this one included) that broadcasts an ``uncertainty`` counts as a disc.
    """
    kept = [(msg, is_fresh(rx, now, params.agent_timeout)) for msg, rx in neighbours.values()
            if is_fresh(rx, now, params.obstacle_memory)]
    rows = np.array([m.position for m, _ in kept]).reshape(-1, 3)
    radius = np.array([m.uncertainty for m, _ in kept], dtype=float)
    uncertain = own_uncertainty > 0.0 or bool(np.any(radius > 0.0))
    obstacles = silent_obstacles(np.array([on for _, on in kept], dtype=bool),
                                 np.ones(len(kept), dtype=bool), rows,
                                 np.array([m.velocity for m, _ in kept]).reshape(-1, 3),
                                 now - np.array([m.stamp for m, _ in kept], dtype=float),
                                 np.array([not m.member for m, _ in kept], dtype=bool), params,
                                 radius if uncertain else None)
    if uncertain:
        obstacles['own_radius'] = own_uncertainty
    return obstacles


def control_step(state: ControllerState, own_position, own_velocity, now: float,
                 params: ControllerParams,
                 own_uncertainty: float = 0.0) -> tuple[ControllerState, np.ndarray]:
    """
    One control tick from this agent's own odometry and cached messages.

    Returns (new state, v_cmd): the desired world-frame velocity (3,), clamped to
    ``max_speed_xy``/``max_speed_z``. Without a live target the command is the last known
    target velocity (zero if none was ever received) and ``u`` and the neighbours are held;
    ``target_timeout`` after the target was last heard (or after the first tick, if never),
    the command is zero.
    """
    position = _vector3('own_position', own_position)
    velocity = _vector3('own_velocity', own_velocity)
    neighbours = state.neighbours
    if params.prune_expired:
        keep = max(params.agent_timeout, params.obstacle_memory)  # silent ones for d_safe
        neighbours = MappingProxyType({i: entry for i, entry in neighbours.items()
                                       if is_fresh(entry[1], now, keep)})
    seq = state.seq + 1
    started = now if state.started is None else state.started
    if state.target is None or not is_fresh(state.target[1], now, params.target_liveness):
        last = state.target[0].velocity if state.target is not None else np.zeros(3)
        cmd = fallback_command(last, target_age(state, now), position, params)
        return dataclasses.replace(state, neighbours=neighbours, prev_cmd=cmd, seq=seq,
                                   started=started), cmd

    target = state.target[0]
    live = live_neighbours(state, now, params)
    angles = target_angle(np.array([position, *(msg.position for msg in live.values())]),
                          target.position)  # one call: the same bits as one call each
    theta_self, thetas = float(angles[0]), angles[1:]
    if not params.d_safe:
        fast = _control_step_floats(state, position, velocity, target, live, theta_self,
                                    thetas.tolist(), params)
        if fast is not None:
            pred, succ, u_new, u_ss, cmd = fast
            return dataclasses.replace(
                state, u=u_new, u_ss=u_ss, pred=pred, succ=succ, prev_cmd=cmd,
                neighbours=neighbours, seq=seq, started=started), cmd
    ids = np.fromiter(live, dtype=np.int64, count=len(live))
    theta_of = dict(zip(ids.tolist(), thetas.tolist()))
    column = {i: k for k, i in enumerate(theta_of)}
    pred_col, succ_col = select_neighbours(
        np.ones((1, ids.size), dtype=bool), thetas, [theta_self], [state.agent_id], ids,
        [column.get(state.pred, NO_NEIGHBOUR)], [column.get(state.succ, NO_NEIGHBOUR)],
        params.hysteresis)
    pred, succ = (None if c[0] == NO_NEIGHBOUR else int(ids[c[0]]) for c in (pred_col, succ_col))
    lambdas = target.lambdas
    u_new, u_ss, cmd = encirclement_step(
        state.u, position, velocity, state.prev_cmd, target.position, target.velocity,
        target.omega_ref, theta_self,
        _view(live.get(pred), theta_of.get(pred, np.nan)),
        _view(live.get(succ), theta_of.get(succ, np.nan)),
        lambdas.get(pred, 1.0), lambdas.get(state.agent_id, 1.0), params,
        ring_size=len(live) + 1, own_id=state.agent_id,
        **(_obstacles(neighbours, now, params, own_uncertainty) if params.d_safe else {}))
    cmd = _vector3('v_cmd', cmd)
    return dataclasses.replace(
        state, u=float(u_new), u_ss=float(u_ss), pred=pred, succ=succ, prev_cmd=cmd,
        neighbours=neighbours, seq=seq, started=started), cmd


def _control_step_floats(state, position, velocity, target, live, theta_self, thetas, params):
    """
    :func:`control_step`'s neighbour choice and law in Python floats (``d_safe`` 0).

    The same decisions and bits as the array path (``select_neighbours_one``,
    ``encirclement_step_one``), at a fraction of the cost. Returns (pred, succ, u, u_ss,
    v_cmd), or None when an input is not finite (the array path then decides).
    """
    own = (*position.tolist(), *velocity.tolist(), *state.prev_cmd.tolist(),
           *target.position.tolist(), *target.velocity.tolist(), target.omega_ref,
           theta_self, sum(thetas))
    if not all(map(math.isfinite, own)):
        return None
    ids = list(live)
    pred, succ = select_neighbours_one(theta_self, state.agent_id, ids, thetas, state.pred,
                                       state.succ, params.hysteresis)
    theta_of = dict(zip(ids, thetas))
    lambdas = target.lambdas
    u_new, u_ss, cmd = encirclement_step_one(
        state.u, own[0:3], own[3:6], own[6:9], own[9:12], own[12:15], own[15], theta_self,
        _view_floats(live.get(pred), theta_of), _view_floats(live.get(succ), theta_of),
        lambdas.get(pred, 1.0), lambdas.get(state.agent_id, 1.0), params,
        ring_size=len(live) + 1, own_id=state.agent_id)
    return pred, succ, float(u_new), float(u_ss), _vector3('v_cmd', cmd)


def _view_floats(msg: Optional[AgentBroadcast], theta_of) -> NeighbourView:
    if msg is None:
        return _MISSING_FLOATS
    return NeighbourView(theta_of[msg.agent_id], msg.position.tolist(), msg.velocity.tolist(),
                         float(msg.u), float(msg.u_ss), msg.agent_id)


_MISSING_FLOATS = NeighbourView(math.nan, (math.nan,) * 3, (math.nan,) * 3, 0.0, 0.0)


def target_age(state: ControllerState, now: float) -> float:
    """
    Seconds since the target was last heard; since the first tick if it never was.

    Infinite when it was heard after ``now`` (the clock stepped back): the target is lost.
    """
    if state.target is not None:
        return float(known_age(state.target[1], now))
    return now - (now if state.started is None else state.started)


# --- one agent's tick with its inputs' freshness ---------------------------------------------
OK = 'ok'
STARTING = 'starting'
BLIND = 'blind'
TARGET_LOST = 'target lost'
FAILED = 'failed'
_ZERO = _vector3('zero', np.zeros(3))


@dataclass(frozen=True)
class Status:
    """Why the agent does what it does: ``kind`` (one of the constants above) and a detail."""

    kind: str
    detail: str = ''

    def __str__(self) -> str:
        return f'{self.kind} ({self.detail})' if self.detail else self.kind


class Tick(NamedTuple):
    """What one control tick decided."""

    state: ControllerState
    command: Optional[np.ndarray]        # world-frame velocity to publish; None = publish none
    broadcast: Optional[AgentBroadcast]   # own state to broadcast; None = stay silent
    status: Status


def odometry_problem(state: ControllerState, odometry, now: float,
                     params: ControllerParams) -> Optional[Status]:
    """
    Why the own odometry ``(stamp, position, velocity)`` (or None) cannot be flown on, or None.

    STARTING within ``odom_timeout`` of the first tick with none yet; BLIND when there is none
    after that, when it is older than ``odom_timeout`` or stamped ahead of this clock.
    """
    if odometry is None:
        started = now if state.started is None else state.started
        if now - started <= params.odom_timeout:
            return Status(STARTING, 'waiting for odometry')
        return Status(BLIND, 'no odometry received')
    age = now - odometry[0]
    if age > params.odom_timeout:
        return Status(BLIND, f'odometry {age:.1f} s old')
    if -age > params.max_future_stamp:
        return Status(BLIND, f'odometry stamped {-age:.1f} s ahead of this clock (did '
                             'the clock step back?)')
    return None


def odometry_uncertainty(odometry) -> float:
    """Return the position uncertainty [m] of ``(stamp, position, velocity[, uncertainty])``."""
    return float(odometry[3]) if len(odometry) > 3 else 0.0


def failed_tick(state: ControllerState, odometry: Optional[tuple[float, Any, Any]], now: float,
                params: ControllerParams, detail: str = 'injected') -> Tick:
    """
    One tick of an agent whose controller is out (a failure): no command, its vehicle's presence.

    The vehicle holds on the zero command sent when it failed. While the own odometry is fresh
    the tick broadcasts :func:`presence_state` (not a ring member, an obstacle for the others'
    ``d_safe``); with stale odometry it stays silent, as a blind agent does.
    """
    if state.started is None:
        state = dataclasses.replace(state, started=float(now))
    if odometry_problem(state, odometry, now, params) is not None:
        return Tick(state, None, None, Status(FAILED, detail))
    state, presence = presence_state(state, odometry[1], odometry[2], now,
                                     odometry_uncertainty(odometry))
    return Tick(state, None, presence, Status(FAILED, detail))


def agent_tick(state: ControllerState, odometry: Optional[tuple[float, Any, Any]], now: float,
               params: ControllerParams) -> Tick:
    """
    One control tick from the newest own odometry ``(stamp, position, velocity)`` or None.

    - Odometry older than ``odom_timeout`` (or none ``odom_timeout`` after the first tick):
      blind. No broadcast (neighbours drop this agent after their liveness timeout) and a zero
      command every tick, so the vehicle holds; the controller state is kept for the return.
    - Otherwise the broadcast (stamped ``now``, with the fresh odometry) and ``control_step``;
      the status says 'target lost' once the target is older than ``target_timeout``.
    """
    if state.started is None:
        state = dataclasses.replace(state, started=float(now))
    blind = odometry_problem(state, odometry, now, params)
    if blind is not None:
        if blind.kind == STARTING:
            return Tick(state, None, None, blind)
        return Tick(dataclasses.replace(state, prev_cmd=_ZERO), _ZERO, None, blind)
    _, position, velocity = odometry[:3]
    uncertainty = odometry_uncertainty(odometry)
    broadcast = outgoing_state(state, position, velocity, now, uncertainty)
    state, command = control_step(state, broadcast.position, broadcast.velocity, now, params,
                                  uncertainty)
    lost_for = target_age(state, now)
    if lost_for > params.target_timeout:
        heard = 'never heard' if state.target is None else f'last heard {lost_for:.1f} s ago'
        return Tick(state, command, broadcast, Status(TARGET_LOST, heard))
    return Tick(state, command, broadcast, Status(OK))
