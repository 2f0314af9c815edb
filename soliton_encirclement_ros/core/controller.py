"""
One agent's soliton encirclement controller: explicit state, messages, pure step.

Per control tick an agent (the ROS ``agent_node`` or the batch simulator) does::

    msg = outgoing_state(state, position, velocity, now)        # 1. broadcast this
    state, v_cmd = control_step(state, position, velocity, now, params)  # 2.-9. command

and between ticks feeds what it hears into ``receive_agent_state`` / ``receive_target_state``
with the receive time, or an instant's swarm states at once as arrays (:class:`AgentStates`)
into ``receive_states``: one numpy pass, the same rules. The cache of neighbours is arrays too
(:class:`NeighbourTable`); a tick makes Python objects only of its ring neighbours, and the
``d_safe`` term sees only the vehicles within :func:`obstacle_reach`. ``outgoing_state``
carries ``state.seq``; ``control_step`` increments ``seq``, so consecutive broadcasts are
numbered 0, 1, 2, ... Every function is pure: it returns a new state and never mutates its
arguments. Nothing here imports rclpy.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import math
from types import MappingProxyType
from typing import Any, Iterator, Mapping, NamedTuple, Optional

import numpy as np

from soliton_encirclement_ros.core.floats import minimum as _minimum
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.geometry import target_angle
from soliton_encirclement_ros.core.law import (
    crowded, encirclement_step, encirclement_step_one, fallback_command, FLOAT_ROWS, FloatRows,
    gap_steer, MISSING_NEIGHBOUR, NeighbourView, obstacle_reach, offset_one, ring_offset,
    ring_ramp, silent_obstacles, silent_track, uncertainty_discs)
from soliton_encirclement_ros.core.neighbours import (
    arrived_late, is_alive, is_fresh, known_age, NO_NEIGHBOUR, ring_choice, select_neighbours)


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
    ``landed`` (a presence only) says the vehicle is on the ground or otherwise out of the air:
    the others forget it as an obstacle (a silent vehicle stays one until heard again).
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
    landed: bool = False  # a presence of a vehicle on the ground (or out): no obstacle

    def __post_init__(self) -> None:
        object.__setattr__(self, 'agent_id', int(self.agent_id))
        object.__setattr__(self, 'landed', bool(self.landed))
        if self.landed and self.member:
            raise ValueError('a landed vehicle is no ring member: landed needs member False')
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
    the spacing weight of arc j -> succ(j) (1.0 if absent); ``acceleration`` (m/s^2, world
    ENU) is the broadcaster's estimate (``core.target_estimate``), which the commands lead.
    """

    stamp_ns: int
    position: np.ndarray
    velocity: np.ndarray
    omega_ref: float = 0.0
    lambdas: Mapping[int, float] = field(default_factory=dict)
    acceleration: np.ndarray = field(default_factory=lambda: _vector3('acceleration',
                                                                      np.zeros(3)))

    def __post_init__(self) -> None:
        self._check_stamp()
        object.__setattr__(self, 'position', _vector3('position', self.position))
        object.__setattr__(self, 'velocity', _vector3('velocity', self.velocity))
        object.__setattr__(self, 'acceleration', _vector3('acceleration', self.acceleration))
        object.__setattr__(self, 'lambdas', MappingProxyType(
            {int(k): float(v) for k, v in dict(self.lambdas).items()}))


# The columns of AgentStates' two matrices: integers (exact) and floats.
INT_COLUMNS = ('agent_id', 'incarnation', 'seq', 'stamp_ns')
FLOAT_COLUMNS = ('px', 'py', 'pz', 'vx', 'vy', 'vz', 'u', 'u_ss', 'member', 'uncertainty',
                 'landed')
_ID, _INC, _SEQ, _STAMP = range(4)
_POS, _VEL, _U, _USS, _MEMBER, _UNC, _LANDED = slice(0, 3), slice(3, 6), 6, 7, 8, 9, 10
_WIDTH = len(FLOAT_COLUMNS)


class AgentStates:
    """
    Agent broadcasts as arrays, in arrival order.

    ``ints`` (K, 4) int64 of :data:`INT_COLUMNS` and ``floats`` (K, 11) of
    :data:`FLOAT_COLUMNS` (``member`` and ``landed`` 1 or 0). What an agent's receive path
    takes in: one instant's states (the in-process graph decodes each once and hands the same
    object to every agent) or one message's (K = 1). Indexing by an int gives that
    :class:`AgentBroadcast`; by a mask or index array, the selected states. Iterating gives the
    broadcasts one by one (made on demand). Never mutated.
    """

    __slots__ = ('ints', 'floats', '_stamp', '_unique')

    def __init__(self, ints: np.ndarray, floats: np.ndarray, unique: Optional[bool] = None
                 ) -> None:
        self.ints = ints
        self.floats = floats
        self._stamp = None
        self._unique = unique

    @classmethod
    def of(cls, broadcasts) -> 'AgentStates':
        """Return the states of ``broadcasts`` (AgentBroadcasts; an AgentStates: itself)."""
        if isinstance(broadcasts, AgentStates):
            return broadcasts
        broadcasts = list(broadcasts)
        ints = np.array([(b.agent_id, b.incarnation, b.seq, b.stamp_ns) for b in broadcasts],
                        dtype=np.int64).reshape(-1, 4)
        floats = np.array([(*b.position.tolist(), *b.velocity.tolist(), b.u, b.u_ss,
                            1.0 if b.member else 0.0, b.uncertainty,
                            1.0 if b.landed else 0.0) for b in broadcasts],
                          dtype=float).reshape(-1, _WIDTH)
        return cls(ints, floats)

    def __len__(self) -> int:
        return self.ints.shape[0]

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            return _broadcast(self.ints[index], self.floats[index])
        return AgentStates(self.ints[index], self.floats[index], self.unique or None)

    def __iter__(self) -> Iterator[AgentBroadcast]:
        return map(_broadcast, self.ints, self.floats)

    @property
    def agent_id(self) -> np.ndarray:
        """Return the senders' ids."""
        return self.ints[:, _ID]

    @property
    def incarnation(self) -> np.ndarray:
        """Return the senders' incarnations."""
        return self.ints[:, _INC]

    @property
    def seq(self) -> np.ndarray:
        """Return the sequence numbers."""
        return self.ints[:, _SEQ]

    @property
    def stamp_ns(self) -> np.ndarray:
        """Return the sender stamps [ns]."""
        return self.ints[:, _STAMP]

    @property
    def unique(self) -> bool:
        """Whether no sender's id is there twice (found once per batch, kept by selections)."""
        if self._unique is None:
            self._unique = _occurrence(self.agent_id) is None
        return self._unique

    @property
    def stamp(self) -> np.ndarray:
        """Return the sender stamps [s] (as ``AgentBroadcast.stamp``: ``stamp_ns * 1e-9``)."""
        if self._stamp is None:
            self._stamp = self.ints[:, _STAMP] * 1e-9
        return self._stamp


def _broadcast(ints, floats) -> AgentBroadcast:
    """Return the :class:`AgentBroadcast` of one row of :class:`AgentStates`' matrices."""
    agent_id, incarnation, seq, stamp_ns = ints.tolist()
    values = floats.tolist()
    return AgentBroadcast(agent_id, seq, stamp_ns, values[0:3], values[3:6], values[_U],
                          values[_USS], incarnation, values[_MEMBER] == 1.0, values[_UNC],
                          values[_LANDED] == 1.0)


# The columns of NeighbourTable.trusted: each sender's last trusted state (its uncertainty at
# most d_safe), where it counts while its broadcasts are wider (an estimate that jumped).
TRUSTED_COLUMNS = ('px', 'py', 'pz', 'vx', 'vy', 'vz', 'uncertainty', 'rx')
_T_POS, _T_VEL, _T_UNC, _T_RX = slice(0, 3), slice(3, 6), 6, 7


class NeighbourTable(Mapping):
    """
    An agent's cache of its neighbours' last broadcasts: id -> (AgentBroadcast, receive time).

    Arrays underneath (``ints`` and ``floats`` as in :class:`AgentStates`, ``rx`` the receive
    times), one row per sender in the order first heard (a sender dropped and heard again goes
    last): the order in which the ``d_safe`` term sums its obstacles. ``trusted`` (K, 8) of
    :data:`TRUSTED_COLUMNS`: each sender's last state whose ``uncertainty`` was at most
    ``d_safe`` (its first state until then), and when it was received. As a mapping it makes
    the broadcast of an id on demand. Never mutated: the functions below return new tables.
    """

    __slots__ = ('ints', 'floats', 'rx', 'trusted', '_lookup', '_query')

    def __init__(self, ints: np.ndarray, floats: np.ndarray, rx: np.ndarray,
                 same_ids: Optional['NeighbourTable'] = None,
                 trusted: Optional[np.ndarray] = None) -> None:
        self.ints = ints
        self.floats = floats
        self.rx = rx
        self.trusted = _as_trusted(floats, rx) if trusted is None else trusted
        # Lookups of ids kept from a table with the same ids in the same rows.
        self._lookup = None if same_ids is None else same_ids._lookup
        self._query = None if same_ids is None else same_ids._query

    @classmethod
    def of(cls, entries: Mapping) -> 'NeighbourTable':
        """Return the table of a mapping id -> (AgentBroadcast, receive time)."""
        if isinstance(entries, NeighbourTable):
            return entries
        values = list(entries.values())
        states = AgentStates.of([msg for msg, _ in values])
        return cls(states.ints, states.floats, np.array([rx for _, rx in values], dtype=float))

    @property
    def ids(self) -> np.ndarray:
        """Return the senders' ids, in table order."""
        return self.ints[:, _ID]

    def rows_of(self, ids) -> np.ndarray:
        """Return the rows of ``ids`` (array), -1 where not in the table."""
        query = self._query
        if query is not None and query[0].shape == ids.shape and (query[0] == ids).all():
            return query[1]  # the ids of the last query, in the same order (the usual case)
        rows = self._rows_of(ids)
        self._query = (ids.copy(), rows,
                       rows.size == len(self) and bool((rows == np.arange(rows.size)).all()))
        return rows

    def all_rows(self, rows: np.ndarray) -> bool:
        """Whether ``rows`` (from :meth:`rows_of`) are every row of the table, in order."""
        query = self._query
        return query is not None and query[1] is rows and query[2]

    def _rows_of(self, ids) -> np.ndarray:
        if self._lookup is None:
            order = np.argsort(self.ids, kind='stable')
            self._lookup = (self.ids[order], order)
        known, order = self._lookup
        if known.size == 0:
            return np.full(np.shape(ids), -1, dtype=np.int64)
        at = np.minimum(known.searchsorted(ids), known.size - 1)
        return np.where(known[at] == ids, order[at], -1)

    def take(self, rows) -> 'NeighbourTable':
        """Return the table of ``rows`` (a mask or row indices, in table order)."""
        return NeighbourTable(self.ints[rows], self.floats[rows], self.rx[rows],
                              trusted=self.trusted[rows])

    def __getitem__(self, agent_id) -> tuple[AgentBroadcast, float]:
        rows = np.flatnonzero(self.ids == agent_id)
        if rows.size == 0:
            raise KeyError(agent_id)
        k = rows[0]
        return _broadcast(self.ints[k], self.floats[k]), float(self.rx[k])

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return self.ints.shape[0]


def _as_trusted(floats: np.ndarray, rx: np.ndarray) -> np.ndarray:
    """Return ``NeighbourTable.trusted`` rows of states as received: each trusted as it is."""
    return np.column_stack((floats[:, _POS], floats[:, _VEL], floats[:, _UNC], rx))


def _trusted_after(trusted: np.ndarray, floats: np.ndarray, rx: np.ndarray,
                   params: ControllerParams) -> np.ndarray:
    """
    Return ``trusted`` rows after the states ``floats`` received at ``rx`` (one each).

    A state whose uncertainty is at most ``d_safe`` is trusted; a wider one (an estimator
    that jumped beyond it) leaves the last trusted state as it was.
    """
    new = _as_trusted(floats, rx)
    return np.where((floats[:, _UNC] <= params.d_safe)[:, None], new, trusted)


EMPTY_TABLE = NeighbourTable(np.empty((0, 4), dtype=np.int64), np.empty((0, _WIDTH)),
                             np.empty(0))


@dataclass(frozen=True)
class ControllerState:
    """
    Everything one agent's controller remembers between ticks.

    ``neighbours`` maps agent id -> (last AgentBroadcast, receive time) (a
    :class:`NeighbourTable`; a plain mapping given here becomes one); ``target`` is (last
    TargetBroadcast, receive time) or None; ``prev_cmd`` the last command (world frame).
    """

    agent_id: int
    u: float = 0.0
    u_ss: float = 0.0
    pred: Optional[int] = None
    succ: Optional[int] = None
    prev_cmd: np.ndarray = field(default_factory=lambda: _vector3('prev_cmd', np.zeros(3)))
    neighbours: Mapping[int, tuple[AgentBroadcast, float]] = field(
        default_factory=lambda: EMPTY_TABLE)
    target: Optional[tuple[TargetBroadcast, float]] = None
    seq: int = 0
    incarnation: int = 0
    started: Optional[float] = None  # time of the first tick: inputs never heard age from it
    # The even-ring term's ramp (law.ring_ramp): the ring size heard at the last tick with a
    # live target, when the membership last changed, and that tick's time.
    ring_size: int = 0
    ring_changed: float = -math.inf
    ring_tick: float = -math.inf

    def __post_init__(self) -> None:
        if type(self.neighbours) is not NeighbourTable:
            object.__setattr__(self, 'neighbours', NeighbourTable.of(self.neighbours))

    def _with(self, **changes) -> 'ControllerState':
        """
        ``dataclasses.replace`` for a tick's own changes, without ``__init__`` (a fifth of it).

        Only for values this module made as the fields need them (a :class:`NeighbourTable`,
        a ``_vector3``): nothing is converted or checked.
        """
        new = object.__new__(ControllerState)
        new.__dict__.update(self.__dict__)
        new.__dict__.update(changes)
        return new


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
        done = ("rejected as a state, kept as its vehicle's presence" if kind == 'agent'
                else 'rejected')
        return (f'{kind} state stamped {ahead:.3f} s ahead of this clock (max_future_stamp '
                f'{params.max_future_stamp:g} s): {done}; {cause}')
    return None


def ahead_as_presence(states: 'AgentStates', now_ns: int, params: ControllerParams,
                      own_id: Optional[int] = None) -> tuple['AgentStates', np.ndarray]:
    """
    Return ``states`` with those stamped too far ahead kept as presence, and which they were.

    A state stamped more than ``max_future_stamp`` ahead of this clock (``now_ns``) cannot be
    cached as it is (:func:`future_stamp_reason`: it would make every later state look old),
    yet it still says where its vehicle is: it is kept as a presence (no ring member, an
    obstacle), stamped with its receive time ``now_ns``, so that its age counts from when it
    was heard. Before, it was dropped, and a companion whose clock stepped 2 s ahead had its
    vehicle invisible to every other. ``own_id``'s states are left as they are. Returns the
    states (the same object when none is ahead) and the mask (K,) of those that were.
    """
    ahead = states.stamp - int(now_ns) * 1e-9 > params.max_future_stamp
    if own_id is not None:
        ahead &= states.agent_id != own_id
    if not ahead.any():
        return states, ahead
    ints, floats = states.ints.copy(), states.floats.copy()
    ints[ahead, _STAMP] = int(now_ns)
    floats[ahead, _MEMBER] = 0.0
    return AgentStates(ints, floats, states.unique or None), ahead


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
    most ``agent_timeout``. :func:`receive_states` with one message.
    """
    return receive_states(state, ((msg, rx_time),), params)


def receive_states(state: ControllerState, received, params: ControllerParams
                   ) -> ControllerState:
    """
    Cache ``received`` broadcasts, ``(msg, rx_time)`` in arrival order, in one new state.

    ``msg`` is an :class:`AgentBroadcast`, :class:`AgentStates` (all received at ``rx_time``)
    or :class:`TargetBroadcast`. The same as :func:`receive_agent_state` /
    :func:`receive_target_state` one message after the other, in one pass over arrays.
    """
    target = state.target
    batches, times = [], []
    for msg, rx_time in received:
        if isinstance(msg, TargetBroadcast):
            if not _keeps_target(target, msg, rx_time, params):
                target = (msg, float(rx_time))
            continue
        batch = msg if isinstance(msg, AgentStates) else AgentStates.of((msg,))
        batches.append(batch)
        times.append(np.full(len(batch), float(rx_time)))
    neighbours = state.neighbours
    if batches:
        if len(batches) == 1:
            batch, rx = batches[0], times[0]
        else:
            batch = AgentStates(np.concatenate([b.ints for b in batches]),
                                np.concatenate([b.floats for b in batches]))
            rx = np.concatenate(times)
        neighbours = merge_states(neighbours, batch, rx, state.agent_id, params)
    if neighbours is state.neighbours and target is state.target:
        return state
    return state._with(neighbours=neighbours, target=target)


def merge_states(table: NeighbourTable, states: AgentStates, rx: np.ndarray, own_id: int,
                 params: ControllerParams) -> NeighbourTable:
    """
    Return ``table`` with the broadcasts ``states`` received at ``rx`` taken in, in order.

    The rules of :func:`receive_agent_state` for every state: own ones dropped, one not newer
    (by ``seq``) than the cached one of its incarnation dropped while that one is live (and the
    receive clock has not stepped back), any other cached; one that :func:`arrived_late`
    stamped with its arrival. A sender heard twice is taken in
    over passes, its k-th state in the k-th, so each is judged against the one before it.
    """
    ints, floats = states.ints, states.floats
    mine = ints[:, _ID] == own_id
    if mine.any():
        ints, floats, rx = ints[~mine], floats[~mine], rx[~mine]
    if ints.shape[0] == 0:
        return table
    late = arrived_late(ints[:, _STAMP] * 1e-9, rx, params.max_future_stamp)
    if late.any():  # aged from their arrival
        ints = ints.copy()
        ints[late, _STAMP] = np.round(rx[late] * 1e9).astype(np.int64)
    occurrence = None if states.unique else _occurrence(ints[:, _ID])
    if occurrence is None:
        return _merge_unique(table, ints, floats, rx, params)
    for k in range(int(occurrence.max()) + 1):
        now = occurrence == k
        table = _merge_unique(table, ints[now], floats[now], rx[now], params)
    return table


def _occurrence(ids: np.ndarray) -> Optional[np.ndarray]:
    """Return for each id how many times it came before; None when every id is unique."""
    if ids.size < 2:
        return None
    order = np.argsort(ids, kind='stable')
    ranked = ids[order]
    repeat = ranked[1:] == ranked[:-1]
    if not repeat.any():
        return None
    start = np.flatnonzero(np.concatenate(([True], ~repeat)))
    run = np.repeat(start, np.diff(np.append(start, ids.size)))
    occurrence = np.empty(ids.size, dtype=np.int64)
    occurrence[order] = np.arange(ids.size) - run
    return occurrence


def _merge_unique(table: NeighbourTable, ints: np.ndarray, floats: np.ndarray, rx: np.ndarray,
                  params: ControllerParams) -> NeighbourTable:
    """:func:`merge_states` of states whose ids are unique."""
    rows = table.rows_of(ints[:, _ID])
    found = rows >= 0
    if found.all():
        cached = table.ints[rows]
        cached_rx = table.rx[rows]
        take = ~((ints[:, _SEQ] <= cached[:, _SEQ]) & (ints[:, _INC] == cached[:, _INC])
                 & is_alive(cached_rx, rx, params.agent_timeout)
                 & ~stepped_back(cached_rx, rx, params))
        if not take.any():
            return table
        if not take.all():
            rows, ints, floats, rx = rows[take], ints[take], floats[take], rx[take]
        elif table.all_rows(rows):  # every sender again, in table order (the usual tick)
            return NeighbourTable(ints, floats, rx, same_ids=table, trusted=_trusted_after(
                table.trusted, floats, rx, params))
        out_ints, out_floats, out_rx = table.ints.copy(), table.floats.copy(), table.rx.copy()
        out_trusted = table.trusted.copy()
        out_trusted[rows] = _trusted_after(table.trusted[rows], floats, rx, params)
        out_ints[rows] = ints
        out_floats[rows] = floats
        out_rx[rows] = rx
        return NeighbourTable(out_ints, out_floats, out_rx, same_ids=table, trusted=out_trusted)
    take = ~found
    if found.any():
        at = rows[found]
        cached = table.ints[at]
        cached_rx = table.rx[at]
        keeps = ((ints[found, _SEQ] <= cached[:, _SEQ]) & (ints[found, _INC] == cached[:, _INC])
                 & is_alive(cached_rx, rx[found], params.agent_timeout)
                 & ~stepped_back(cached_rx, rx[found], params))
        take[found] = ~keeps
    update = take & found
    out_ints, out_floats, out_rx, out_trusted = table.ints, table.floats, table.rx, table.trusted
    if update.any():  # old rows keep their places; the new ones come last
        out_ints, out_floats, out_rx = out_ints.copy(), out_floats.copy(), out_rx.copy()
        out_trusted = out_trusted.copy()
        out_trusted[rows[update]] = _trusted_after(table.trusted[rows[update]],
                                                   floats[update], rx[update], params)
        out_ints[rows[update]] = ints[update]
        out_floats[rows[update]] = floats[update]
        out_rx[rows[update]] = rx[update]
    added = ~found
    return NeighbourTable(np.concatenate((out_ints, ints[added])),
                          np.concatenate((out_floats, floats[added])),
                          np.concatenate((out_rx, rx[added])),
                          trusted=np.concatenate((out_trusted,
                                                  _as_trusted(floats[added], rx[added]))))


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
                   now: float, uncertainty: float = 0.0,
                   landed: bool = False) -> tuple[ControllerState, AgentBroadcast]:
    """
    Return (state, the presence broadcast) of an agent whose controller is out (failed).

    Its vehicle is still in the air: the broadcast (``member`` False) tells the others where,
    so that they keep ``d_safe`` from it, and leaves it out of their ring. It takes the next
    sequence number, so the agent's own broadcasts stay in order when it comes back.
    ``landed``: the vehicle is on the ground (or otherwise out of the air): the others forget
    it as an obstacle.
    """
    msg = AgentBroadcast(agent_id=state.agent_id, seq=state.seq, stamp_ns=seconds_to_ns(now),
                         position=own_position, velocity=own_velocity, u=0.0, u_ss=0.0,
                         incarnation=state.incarnation, member=False,
                         uncertainty=uncertainty, landed=landed)
    return dataclasses.replace(state, seq=state.seq + 1), msg


def live_neighbours(state: ControllerState, now: float,
                    params: ControllerParams) -> dict[int, AgentBroadcast]:
    """
    Return the cached ring members' states that are live at ``now``.

    Live: ``now - rx_time <= agent_timeout``; a presence broadcast (``member`` False) is none.
    """
    table = state.neighbours
    rows = np.flatnonzero(_live(table, now, params))
    return {int(table.ints[k, _ID]): _broadcast(table.ints[k], table.floats[k]) for k in rows}


def _live(table: NeighbourTable, now: float, params: ControllerParams,
          age: Optional[np.ndarray] = None) -> np.ndarray:
    """Return which rows of ``table`` are live ring members at ``now`` (rows' ``age`` if known)."""
    if age is None:
        age = known_age(table.rx, now)
    return (table.floats[:, _MEMBER] == 1.0) & (age <= params.agent_timeout)


def _view(table: NeighbourTable, row: int, theta: float) -> NeighbourView:
    if row < 0:
        return MISSING_NEIGHBOUR
    floats = table.floats[row]
    return NeighbourView(theta, floats[_POS], floats[_VEL], float(floats[_U]),
                         float(floats[_USS]), int(table.ints[row, _ID]))


# Up to this many rows, obstacle_rows first asks in Python floats whether no row is within reach
# (the settled ring's usual answer), which costs less than the array pass on a small table.
FLOAT_OBSTACLE_ROWS = 12
_NO_ROWS = np.zeros(0, dtype=np.intp)
_XY_VXY_UNC_LANDED = [FLOAT_COLUMNS.index(name)
                      for name in ('px', 'py', 'vx', 'vy', 'uncertainty', 'landed')]


def _disc_one(uncertainty: float, rx: float, now: float, params: ControllerParams,
              usable: float) -> float:
    """:func:`law.uncertainty_discs` of one row heard at ``rx``, in floats (the same bits)."""
    age = known_age(rx, now)
    silent_for = 0.0 if age <= params.agent_timeout else age
    return _minimum(uncertainty + params.hold_drift * silent_for, usable)


def _discs(table: NeighbourTable, rows: np.ndarray, now: float, params: ControllerParams,
           usable: float):
    """
    Return the discs of ``rows``: (radius, untrusted, trusted radius), arrays over the rows.

    ``radius`` the broadcast uncertainty, grown at ``hold_drift`` while the row is silent, at
    most ``usable``; ``untrusted`` where the broadcast is wider than ``usable`` or ``d_safe``
    (not trusted: its last trusted state counts too), with that one's disc grown since it was
    received.
    """
    uncertainty = table.floats[rows, _UNC]
    age = known_age(table.rx[rows], now)
    radius = uncertainty_discs(uncertainty, np.where(age <= params.agent_timeout, 0.0, age),
                               usable, params)
    trusted = table.trusted[rows]
    trusted_radius = uncertainty_discs(trusted[:, _T_UNC], known_age(trusted[:, _T_RX], now),
                                       usable, params)
    return radius, uncertainty > _minimum(float(usable), params.d_safe), trusted_radius


def _all_beyond_reach(table: NeighbourTable, position, speed: float, now: float,
                      params: ControllerParams, own_uncertainty: float, d_safe: float,
                      usable: float) -> bool:
    """
    Return True only where :func:`obstacle_rows` returns no rows, in Python floats.

    Every row heard within ``obstacle_memory`` (and not landed) lies beyond the bound of the
    fastest and widest (its disc: :func:`law.uncertainty_discs`), with a relative 1e-12 more
    than the array path asks (``math.hypot`` may differ from ``np.hypot`` in the last bit).
    False where that is not so, or where a row is within ``d_safe``, not finite, or wider than
    ``usable``: the array path then decides, so the rows are the same.
    """
    x0, y0 = float(position[0]), float(position[1])
    memory = params.obstacle_memory
    heard, fastest, widest, closest = False, 0.0, -math.inf, math.inf
    for rx, (x, y, vx, vy, uncertainty, landed) in zip(
            table.rx.tolist(), table.floats[:, _XY_VXY_UNC_LANDED].tolist()):
        if not is_fresh(rx, now, memory) or landed == 1.0:
            continue
        distance = math.hypot(x - x0, y - y0)
        others_speed = math.hypot(vx, vy)
        if not (distance > d_safe and others_speed < math.inf
                and uncertainty <= _minimum(usable, params.d_safe)):
            return False  # within d_safe (so within reach), NaN, infinite or too wide
        if others_speed > 0.0 and not is_fresh(rx, now, params.agent_timeout):
            return False  # silent while it flew: where its track puts it, the arrays
        radius = _disc_one(uncertainty, rx, now, params, usable)
        heard = True
        fastest = others_speed if others_speed > fastest else fastest
        widest = radius if radius > widest else widest
        closest = distance if distance < closest else closest
    if not heard:
        return True  # none heard within obstacle_memory
    bound = obstacle_reach(speed, fastest, widest, params, own_uncertainty, d_safe)
    return closest >= bound * (1.0 + 1e-9) * (1.0 + 1e-12)


def obstacle_rows(table: NeighbourTable, position, velocity, now: float,
                  params: ControllerParams, own_uncertainty: float = 0.0,
                  d_safe: Optional[float] = None, usable: Optional[float] = None) -> np.ndarray:
    """
    Return the rows of ``table`` the ``d_safe`` term may count at ``now``, in table order.

    Those heard within ``obstacle_memory`` (not landed) and within :func:`obstacle_reach`
    horizontally of ``d_safe`` flown (None: ``params.d_safe``; the tick passes its ring's),
    counted with their discs (``usable`` the widest, None: ``params.usable_uncertainty()``),
    and every one whose broadcast is wider than ``usable`` or ``d_safe`` (its last trusted
    position counts):
    the others add exactly nothing to the term. When every vehicle lies beyond the reach of
    the fastest and widest (the usual case on a ring), the rows' own reaches are not computed;
    on a table of at most :data:`FLOAT_OBSTACLE_ROWS` rows that is first asked in Python floats.
    """
    d_safe = params.d_safe if d_safe is None else d_safe
    usable = params.usable_uncertainty() if usable is None else usable
    if len(table.rx) <= FLOAT_OBSTACLE_ROWS and _all_beyond_reach(
            table, position, math.hypot(float(velocity[0]), float(velocity[1])), now, params,
            own_uncertainty, d_safe, usable):
        return _NO_ROWS
    kept = np.flatnonzero(is_fresh(table.rx, now, params.obstacle_memory)
                          & (table.floats[:, _LANDED] != 1.0))
    if kept.size == 0:
        return kept
    floats = table.floats[kept]
    at, moving = floats[:, _POS], floats[:, _VEL]
    radius, untrusted, _ = _discs(table, kept, now, params, usable)
    silent = ~is_fresh(table.rx[kept], now, params.agent_timeout)
    if silent.any():  # a silent one counts where its track puts it by now
        track, half = silent_track(at, moving, now - table.ints[kept, _STAMP] * 1e-9, params)
        at = np.where(silent[:, None], track, at)  # its speed still bounds its rest point
        radius = radius + np.where(silent, half, 0.0)
    xy = at[:, 0:2] - np.asarray(position, dtype=float)[:2]
    distance = np.hypot(xy[:, 0], xy[:, 1])
    speed = math.hypot(float(velocity[0]), float(velocity[1]))
    others_speed = np.hypot(moving[:, 0], moving[:, 1])
    if not untrusted.any():
        bound = obstacle_reach(speed, float(others_speed.max()), float(radius.max()), params,
                               own_uncertainty, d_safe)
        if (distance >= bound * (1.0 + 1e-9)).all():  # a NaN anywhere: the rows' own reaches
            return kept[:0]
    reach = obstacle_reach(speed, others_speed, radius, params, own_uncertainty, d_safe)
    return kept[~(distance >= reach) | untrusted]


def _obstacles(table: NeighbourTable, rows: np.ndarray, now: float, params: ControllerParams,
               own_uncertainty: float = 0.0, usable: Optional[float] = None, *,
               position) -> dict:
    """
    Return the d_safe term's inputs: the vehicles heard in ``rows``, ring member or presence.

    Those heard within ``agent_timeout`` count where they are; those silent since count at
    rest where last heard (one silent while it flew, at the point of its possible way nearest
    this vehicle at ``position``: ``law.silent_nearest``), their discs growing at
    ``hold_drift`` (until heard again); a
    presence also where it will come to rest. A vehicle (this one included) that broadcasts an
    ``uncertainty`` counts as a disc, at most ``usable`` wide (None:
    ``params.usable_uncertainty()``); a broadcast wider than that or ``d_safe`` also counts
    its last trusted state.

    Each row gives two columns (the vehicle, and its rest point or NaN), three when a row's
    broadcast is that wide (its trusted state or NaN). Up to :data:`FLOAT_ROWS` columns,
    which the separation term takes in Python floats, the inputs are lists
    (:func:`_obstacles_floats`), unless a row fell silent while it flew or is that wide;
    otherwise arrays.
    """
    usable = params.usable_uncertainty() if usable is None else usable
    radius, untrusted, trusted_radius = _discs(table, rows, now, params, usable)
    wide = bool(untrusted.any())
    own = _minimum(float(own_uncertainty), float(usable))
    floats = table.floats[rows]
    fresh = is_fresh(table.rx[rows], now, params.agent_timeout)
    flew = bool(np.any(~fresh & ((floats[:, 3] != 0.0) | (floats[:, 4] != 0.0))))
    if 2 * rows.size <= FLOAT_ROWS and not (flew or wide):
        return _obstacles_floats(table, rows, now, params, own, usable)
    uncertain = own > 0.0 or bool(np.any(radius > 0.0))
    trusted = None
    if wide:
        kept = table.trusted[rows]
        trusted = (kept[:, _T_POS], kept[:, _T_VEL], known_age(kept[:, _T_RX], now),
                   trusted_radius, untrusted)
    obstacles = silent_obstacles(fresh, np.ones(rows.size, dtype=bool), floats[:, _POS],
                                 floats[:, _VEL], now - table.ints[rows, _STAMP] * 1e-9,
                                 floats[:, _MEMBER] != 1.0, params,
                                 radius if uncertain else None, trusted, own_position=position)
    if uncertain:
        obstacles['own_radius'] = own
    return obstacles


_OBSTACLE_COLUMNS = [FLOAT_COLUMNS.index(name)
                     for name in ('px', 'py', 'vx', 'vy', 'member', 'uncertainty')]


def _obstacles_floats(table: NeighbourTable, rows: np.ndarray, now: float,
                      params: ControllerParams, own_uncertainty: float, usable: float) -> dict:
    """
    :func:`_obstacles` in Python floats: the values :func:`silent_obstacles` gives.

    :class:`law.FloatRows` of (x, y) (the term takes ``>= 2`` columns): each vehicle where it
    is, moving if heard within ``agent_timeout`` (its state's age) else at rest (age 0; one
    silent while it flew takes the arrays, :func:`law.silent_track`); then each presence's rest
    point (:func:`law.offset_one`, the floats of ``stopping_offset``), NaN for the others, with
    velocity the point times 0.0 as the arrays make it. Discs at most ``usable`` wide (none
    wider: the arrays count their trusted states).
    """
    timeout, lag, braking = params.agent_timeout, params.t_safe, params.a_safe
    drift = params.hold_drift
    positions, velocities, ages, rests, rest_velocities, radii = [], [], [], [], [], []
    for stamp_ns, (x, y, vx, vy, member, uncertainty), rx in zip(
            table.ints[rows, _STAMP].tolist(), table.floats[rows][:, _OBSTACLE_COLUMNS].tolist(),
            table.rx[rows].tolist()):
        positions.append((x, y))
        age = known_age(rx, now)
        if age <= timeout:
            velocities.append((vx, vy))
            ages.append(now - stamp_ns * 1e-9)
            radius = _minimum(uncertainty + drift * 0.0, usable)
        else:
            velocities.append((0.0, 0.0))
            ages.append(0.0)
            radius = _minimum(uncertainty + drift * age, usable)
        if member != 1.0:
            offx, offy = offset_one(vx, vy, lag, braking)
            restx, resty = x + offx, y + offy
            rests.append((restx, resty))
            rest_velocities.append((restx * 0.0, resty * 0.0))
        else:
            rests.append((math.nan, math.nan))
            rest_velocities.append((math.nan, math.nan))
        radii.append(radius)
    obstacles = {'others_position': FloatRows(positions + rests),
                 'others_velocity': FloatRows(velocities + rest_velocities),
                 'others_age': FloatRows(ages + [0.0] * len(ages))}
    if own_uncertainty > 0.0 or any(radius > 0.0 for radius in radii):
        obstacles['others_radius'] = radii + radii
        obstacles['own_radius'] = own_uncertainty
    return obstacles


def _kept(table: NeighbourTable, age, params: ControllerParams) -> np.ndarray:
    """Return the rows the ``d_safe`` term keeps: heard within ``obstacle_memory``, not landed."""
    return (age <= params.obstacle_memory) & (table.floats[:, _LANDED] != 1.0)


def known_vehicles(state: ControllerState, now: float, params: ControllerParams):
    """
    Return the vehicles this agent knows at ``now``: (ids (K,), positions (K, 3), counted (K,)).

    ``counted``: those its ``d_safe`` term keeps (:func:`law.crowded`'s, ``area.limit_clear``'s).
    Positions as last heard, by id.
    """
    table = state.neighbours
    order = np.argsort(table.ints[:, _ID], kind='stable')
    return (table.ints[order, _ID], table.floats[order][:, _POS],
            _kept(table, known_age(table.rx, now), params)[order])


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

    With ``d_safe`` only the vehicles within :func:`obstacle_reach` enter the separation term
    (the others add exactly zero); with none within reach the term is exactly zero and the
    tick takes the float path, as without ``d_safe``.
    """
    position = _vector3('own_position', own_position)
    velocity = _vector3('own_velocity', own_velocity)
    table = state.neighbours
    age = known_age(table.rx, now)  # of each row: its freshness for pruning and the ring
    if params.prune_expired and len(table):
        # Silent ones stay for d_safe (obstacle_memory: until heard again), landed ones go.
        keep = max(params.agent_timeout, params.obstacle_memory)
        fresh = (age <= keep) & ~((table.floats[:, _LANDED] == 1.0) & (age > params.agent_timeout))
        if not fresh.all():
            table, age = table.take(fresh), age[fresh]
    seq = state.seq + 1
    started = now if state.started is None else state.started
    if state.target is None or not is_fresh(state.target[1], now, params.target_liveness):
        last = state.target[0].velocity if state.target is not None else np.zeros(3)
        cmd = fallback_command(last, target_age(state, now), position, params)
        return dataclasses.replace(state, neighbours=table, prev_cmd=cmd, seq=seq,
                                   started=started), cmd

    target = state.target[0]
    live = np.flatnonzero(_live(table, now, params, age))
    floats = table.floats[live]
    angles = target_angle(np.concatenate((position[None], floats[:, _POS])),
                          target.position)  # one call: the same bits as one call each
    theta_self, thetas = float(angles[0]), angles[1:]
    ids = table.ints[live, _ID]
    if params.d_safe:  # the d_safe the law flies, and the widest disc it counts, its ring's
        usable = params.usable_uncertainty(live.size + 1)
        own_radius = _minimum(float(own_uncertainty), usable)
        near = obstacle_rows(table, position, velocity, now, params, own_radius,
                             params.safety_distance(live.size + 1), usable)
        if len(near) > 1:  # by id, not by arrival: the term takes out approaches in turn
            near = near[np.argsort(table.ints[near, _ID], kind='stable')]
    else:
        near = ()
    obstacles = (_obstacles(table, np.asarray(near), now, params, own_radius, usable,
                            position=position) if len(near) else {})
    ring_size = live.size + 1
    # law.crowded: where the ring's gains are off and (ring_ramp_silent, where the size
    # changed) the ramp restarts, as where a vehicle it heard fell silent (not landed)
    crowd = silent = False
    resized = params.ring_ramp_silent and ring_size != state.ring_size
    if len(table) and (resized or (params.ring_gains_from and params.d_safe)):
        kept = _kept(table, age, params)
        crowd = bool(crowded(position, table.floats[:, _POS], kept,
                             params.safety_distance(ring_size)))
        silent = resized and (crowd or bool(np.any(kept & (age > params.agent_timeout))))
    weight, ring_changed = ring_ramp(ring_size, state.ring_size, state.ring_changed,
                                     state.ring_tick, float(now), params, silent)
    obstacles = {**obstacles, 'ring_offset': _ring_offset(theta_self, thetas, target, params,
                                                          weight), 'crowd': crowd}
    omega_ref = target.omega_ref
    if params.knows_obstacles:
        outside = np.ones(len(table.rx), dtype=bool)
        outside[live] = False
        known = (outside & (age <= params.obstacle_memory)
                 & (table.floats[:, _LANDED] != 1.0))
        if known.any():
            obstacles['ring_obstacles'] = table.floats[known][:, _POS]
            omega_ref += float(gap_steer(theta_self, thetas, None, obstacles['ring_obstacles'],
                                         target.position, target.velocity, params))
    fast = _control_step_floats(state, position, velocity, target, omega_ref, table, live, ids,
                                theta_self, thetas, params, obstacles)
    if fast is not None:
        pred, succ, u_new, u_ss, cmd = fast
        return state._with(u=u_new, u_ss=u_ss, pred=pred, succ=succ, prev_cmd=cmd,
                           neighbours=table, seq=seq, started=started, ring_size=ring_size,
                           ring_changed=ring_changed, ring_tick=float(now)), cmd
    column = {i: k for k, i in enumerate(ids.tolist())}
    pred_col, succ_col = select_neighbours(
        np.ones((1, ids.size), dtype=bool), thetas, [theta_self], [state.agent_id], ids,
        [column.get(state.pred, NO_NEIGHBOUR)], [column.get(state.succ, NO_NEIGHBOUR)],
        params.neighbour_hysteresis(live.size + 1))
    pred_col, succ_col = int(pred_col[0]), int(succ_col[0])
    pred, succ = (None if c == NO_NEIGHBOUR else int(ids[c]) for c in (pred_col, succ_col))
    lambdas = target.lambdas
    u_new, u_ss, cmd = encirclement_step(
        state.u, position, velocity, state.prev_cmd, target.position, target.velocity,
        omega_ref, theta_self,
        _view(table, -1 if pred is None else int(live[pred_col]),
              np.nan if pred is None else float(thetas[pred_col])),
        _view(table, -1 if succ is None else int(live[succ_col]),
              np.nan if succ is None else float(thetas[succ_col])),
        lambdas.get(pred, 1.0), lambdas.get(state.agent_id, 1.0), params,
        ring_size=live.size + 1, own_id=state.agent_id, target_acceleration=target.acceleration,
        **obstacles)
    cmd = _vector3('v_cmd', cmd)
    return dataclasses.replace(
        state, u=float(u_new), u_ss=float(u_ss), pred=pred, succ=succ, prev_cmd=cmd,
        neighbours=table, seq=seq, started=started, ring_size=ring_size,
        ring_changed=ring_changed, ring_tick=float(now)), cmd


def _ring_offset(theta_self: float, thetas: np.ndarray, target, params: ControllerParams,
                 weight: float):
    """
    :func:`law.ring_offset` of this agent (0 when the target weights the arcs, or off).

    Times its :func:`law.ring_ramp` ``weight``.
    """
    if not params.k_e_ring or any(v != 1.0 for v in target.lambdas.values()):
        return 0.0
    return float(ring_offset(theta_self, thetas)) * weight


def _control_step_floats(state, position, velocity, target, omega_ref, table, live, ids,
                         theta_self, thetas, params, obstacles):
    """
    :func:`control_step`'s neighbour choice and law in Python floats.

    The same decisions and bits as the array path (``ring_choice``, ``encirclement_step_one``),
    at a fraction of the cost. ``live`` the table rows of the live ring members, ``ids`` and
    ``thetas`` their ids and angles, ``obstacles`` the law's other inputs (the ``d_safe``
    term's, none where no vehicle is within reach; ``ring_offset``, ``crowd``). Returns
    (pred, succ, u, u_ss, v_cmd), or None when an input is not finite (the array path then
    decides).
    """
    own = (*position.tolist(), *velocity.tolist(), *state.prev_cmd.tolist(),
           *target.position.tolist(), *target.velocity.tolist(), omega_ref,
           theta_self)
    if not all(map(math.isfinite, own)) or not np.isfinite(thetas).all():
        return None
    pred_col, succ_col = ring_choice(theta_self, state.agent_id, ids, thetas, state.pred,
                                     state.succ, params.neighbour_hysteresis(ids.size + 1))
    pred = None if pred_col < 0 else int(ids[pred_col])
    succ = None if succ_col < 0 else int(ids[succ_col])
    lambdas = target.lambdas
    u_new, u_ss, cmd = encirclement_step_one(
        state.u, own[0:3], own[3:6], own[6:9], own[9:12], own[12:15], own[15], theta_self,
        _view_floats(table, live, thetas, pred_col), _view_floats(table, live, thetas, succ_col),
        lambdas.get(pred, 1.0), lambdas.get(state.agent_id, 1.0), params,
        ring_size=ids.size + 1, own_id=state.agent_id,
        target_acceleration=target.acceleration.tolist(), **obstacles)
    return pred, succ, float(u_new), float(u_ss), _vector3('v_cmd', cmd)


def _view_floats(table: NeighbourTable, live, thetas, column: int) -> NeighbourView:
    if column < 0:
        return _MISSING_FLOATS
    row = live[column]
    values = table.floats[row].tolist()
    return NeighbourView(float(thetas[column]), values[0:3], values[3:6], values[_U],
                         values[_USS], int(table.ints[row, _ID]))


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
