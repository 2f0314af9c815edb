"""
Many runs of one shape stepped together: a leading run axis over the per-agent controllers.

:func:`simulate_runs` advances R scenarios that share everything but their seeds, failure
rates and outage lengths, loss, and target motion (:func:`group_key`) with one numpy step per
tick. Each agent keeps its own copy of what it heard (arrays over receiver x sender), so
loss, delay, outages and liveness are per run and per receiver, exactly as the per-agent
engine of ``batch_sim`` (one ``controller.control_step`` and one ``ImpairedChannel`` per
agent) has them; random draws come from the same per-agent streams in the same order
(:class:`StreamDraws`), so a run's metrics do not depend on the runs grouped with it and equal
``batch_sim --seed K`` on the same scenario. Cost is O(R N^2) per tick: meant for swarms of
tens of agents; large N runs one run at a time (``max_batch``). Where every receiver heard every
broadcast (no loss, no simulated fault), the compiled tick keeps one shared copy per run instead
(``kernels.exchange_states``) and brings the receivers' own copies up to date only when a path
that reads them needs it (``BatchControllers._materialize``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import functools
import math
from types import SimpleNamespace
from typing import NamedTuple, Optional, Sequence

import numpy as np

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.area import limit_clear
from soliton_encirclement_ros.core.comms import COMMS_STREAM, TIME_EPS
from soliton_encirclement_ros.core.faults import (
    fault_plan, FAULT_STREAM, FaultPlan, no_faults, seed_sequence)
from soliton_encirclement_ros.core.geometry import target_angle
from soliton_encirclement_ros.core.law import (
    crowded, encirclement_step, fallback_command, gap_steer, limiter, NeighbourView,
    obstacle_reach, ring_obstacles, ring_offset, ring_ramp, silent_obstacles_within_reach,
    uncertainty_discs)
from soliton_encirclement_ros.core.neighbours import (
    arrived_late, NO_NEIGHBOUR, select_neighbours)
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.swarm import compiled_wide
from soliton_encirclement_ros.core.target_estimate import (
    AccelerationEstimate, estimate_acceleration, low_pass_share)
from velocity_mobility_ros.core.geometry import TWO_PI, wrap_2pi, wrap_2pi_once
from velocity_mobility_ros.core.model import step, VehicleState

# Scenario fields that may differ between the runs of one batch.
PER_RUN_FIELDS = ('seed', 'failures_per_min', 'failure_off_time', 'failure_check_period',
                  'loss', 'target_motion', 'target_speed', 'target_period', 'target_boundary',
                  'waypoints', 'arrival_times', 'placement', 'placement_distance',
                  'placement_spacing', 'placement_bearing', 'placement_spread', 'placement_file',
                  'silent_failures', 'reset_jump', 'clock_step', 'fault_time')
DRAW_BLOCK = 1024  # uniforms drawn per stream at a time


def group_key(scenario: Scenario) -> str:
    """
    Return what runs must share to be stepped together (every other scenario field).

    The fields as given, the controller and vehicle parameters they resolve to (frozen
    dataclasses, whose repr holds every field) and the safety area: without the deep copies of
    ``Scenario.as_dict``, which cost a sweep's worker a quarter of a millisecond a run.
    """
    values = {k: v for k, v in scenario.to_mapping().items() if k not in PER_RUN_FIELDS}
    values.update(controller=scenario.gains, vehicle=scenario.limits,
                  safety_area=None if scenario.area is None else scenario.area.as_dict())
    return repr(sorted((k, repr(v)) for k, v in values.items()))


class StreamDraws:
    """
    Uniform draws of many independent RNG streams, consumed in stream order.

    Stream s is ``default_rng(seed_sequence(seeds[s], agent_ids[s], stream))``, the generator
    one ``OutageProcess`` or ``ImpairedChannel`` uses, and its k-th value here is the k-th
    ``random()`` it would return: blocks are drawn ahead and read through per-stream cursors.
    """

    def __init__(self, seeds: Sequence[Optional[int]], agent_ids: Sequence[int], stream: int):
        self._rngs = [np.random.default_rng(seed_sequence(s, a, stream))
                      for s, a in zip(seeds, agent_ids)]
        self._buffer = np.stack([rng.random(DRAW_BLOCK) for rng in self._rngs])
        self._valid = np.full(len(self._rngs), DRAW_BLOCK, dtype=np.int64)
        self._cursor = np.zeros(len(self._rngs), dtype=np.int64)

    def take(self, counts: np.ndarray) -> np.ndarray:
        """Return (S, max(counts)) draws: row s holds stream s's next ``counts[s]`` values."""
        counts = np.asarray(counts, dtype=np.int64)
        width = int(counts.max(initial=0))
        for s in np.flatnonzero(self._cursor + counts > self._valid):
            self._refill(s, int(counts[s]))
        cols = np.minimum(self._cursor[:, None] + np.arange(width), self._buffer.shape[1] - 1)
        out = np.take_along_axis(self._buffer, cols, axis=1)
        self._cursor += counts
        return out

    def _refill(self, s: int, width: int) -> None:
        keep = self._buffer[s, self._cursor[s]:self._valid[s]]
        row = np.concatenate((keep, self._rngs[s].random(max(DRAW_BLOCK, width))))
        if row.size > self._buffer.shape[1]:
            grown = np.zeros((self._buffer.shape[0], row.size))
            grown[:, :self._buffer.shape[1]] = self._buffer
            self._buffer = grown
        self._buffer[s, :row.size] = row
        self._valid[s] = row.size
        self._cursor[s] = 0


class BatchOutages:
    """``SwarmOutages`` of R runs (R, N): same check grid, same draws, same recoveries."""

    def __init__(self, scenarios: Sequence[Scenario], agent_ids: np.ndarray):
        r, n = len(scenarios), agent_ids.size
        rate = np.array([s.failures_per_min for s in scenarios])
        self.check_period = np.array([s.failure_check_period for s in scenarios])
        self.off_time = np.array([s.failure_off_time for s in scenarios])
        self.probability = 1.0 - np.exp(-rate / 60.0 * self.check_period)
        self.enabled = rate > 0.0
        self.failed = np.zeros((r, n), dtype=bool)
        self.failed_at = np.full((r, n), math.nan)
        self._checks = np.zeros(r, dtype=np.int64)
        seeds = [s.seed for s in scenarios for _ in range(n)]
        self._draws = (StreamDraws(seeds, np.tile(agent_ids, r), FAULT_STREAM)
                       if self.enabled.any() else None)

    def update(self, now: float) -> np.ndarray:
        """Run the checks due up to ``now`` in every run; return ``failed`` (R, N)."""
        if self._draws is None:
            return self.failed
        while True:
            due = self.enabled & ((self._checks + 1) * self.check_period <= now + 1e-9)
            if not due.any():
                return self.failed
            self._checks[due] += 1
            check_time = (self._checks * self.check_period)[:, None]
            back = due[:, None] & self.failed & (
                check_time >= self.failed_at + self.off_time[:, None] - 1e-9)
            drawing = due[:, None] & ~self.failed & (self.probability[:, None] > 0.0)
            u = self._draws.take(drawing.ravel().astype(np.int64))
            u = u[:, 0].reshape(self.failed.shape) if u.shape[1] else np.ones(self.failed.shape)
            fail = drawing & (u < self.probability[:, None])
            self.failed = (self.failed & ~back) | fail
            self.failed_at = np.where(fail, check_time, self.failed_at)


class BatchFaults(NamedTuple):
    """The simulated faults in effect in R runs: :class:`faults.FaultPlan` fields as (R, N)."""

    killed: np.ndarray       # (R, N) bool
    shift: np.ndarray        # (R, N, 3)
    uncertainty: np.ndarray  # (R, N)
    held: np.ndarray         # (R, N) bool
    clock: np.ndarray        # (R, N) s
    failed: np.ndarray       # (R, N) bool: out of ``live`` (their presence broadcast)

    @property
    def active(self) -> bool:
        """Whether any fault is in effect."""
        return bool(self.killed.any() or self.uncertainty.any() or self.clock.any())


def stack_plans(plans: Sequence[FaultPlan]) -> BatchFaults:
    """Return the plans of R runs (each already ``at`` the tick) as one :class:`BatchFaults`."""
    return BatchFaults(*(np.stack([getattr(plan, name) for plan in plans])
                         for name in BatchFaults._fields))


class _Scratch(NamedTuple):
    """Buffers of ``BatchControllers._control_compiled`` (M rows x K senders), kept per tick."""

    entry: np.ndarray
    ring: np.ndarray
    covered: np.ndarray
    speed: np.ndarray
    others: np.ndarray
    bound: np.ndarray
    dy: np.ndarray
    dx: np.ndarray
    shared_dy: np.ndarray
    shared_dx: np.ndarray
    theta: np.ndarray
    theta_self: np.ndarray
    done: np.ndarray

    @classmethod
    def empty(cls, rows: int, cols: int) -> '_Scratch':
        """Return buffers for ``rows`` x ``cols`` (the bound 0.0: unread where d_safe is off)."""
        return cls(np.zeros((rows, cols), dtype=bool), np.zeros(rows, dtype=np.int64),
                   np.zeros(rows, dtype=bool), np.zeros(rows), np.zeros(rows), np.zeros(rows),
                   np.zeros((rows, cols + 1)), np.zeros((rows, cols + 1)),
                   np.zeros(2 * rows), np.zeros(2 * rows),
                   np.zeros((rows, cols)), np.zeros(rows), np.zeros(rows, dtype=bool))


# The controller state the compiled step reads and writes, as (R N, ...) views.
_FLAT_STATE = ('has', 'rx', 'member', 'position', 'velocity', 'nb_u', 'nb_u_ss', 'target_position',
               'target_velocity', 'target_acceleration', 'u', 'prev_cmd', 'pred', 'succ',
               'ring_size', 'ring_changed', 'ring_tick', 'u_ss')


class _InFlight:
    """
    The broadcasts in flight of ``kernels.exchange_states``: a ring of slots, oldest first.

    Each slot holds what ``BatchControllers._send`` queues (R runs x N agents); the ring grows
    (in order) when a tick would overfill it.
    """

    FIELDS = ('arrival', 'keep_target', 'keep', 't_pos', 't_vel', 't_acc', 'pos', 'vel', 'u',
              'u_ss', 'member')

    def __init__(self, runs: int, agents: int, slots: int):
        r, n = runs, agents
        shapes = {'arrival': (), 'keep_target': (r, n), 'keep': (r, n, n), 't_pos': (r, 3),
                  't_vel': (r, 3), 't_acc': (r, 3), 'pos': (r, n, 3), 'vel': (r, n, 3),
                  'u': (r, n), 'u_ss': (r, n), 'member': (r, n)}
        bools = {'keep_target', 'keep', 'member'}
        self.queue = np.zeros(4, dtype=np.int64)  # kernels.QUEUE_HEAD, _COUNT, _UNIFORM, _SHARED
        self.slots = {name: np.zeros((slots,) + shape, dtype=bool if name in bools else float)
                      for name, shape in shapes.items()}
        self.arrays = self._arrays()

    def _arrays(self) -> tuple:
        """Return the queue and the slots in ``kernels.exchange_states``' order."""
        return (self.queue,) + tuple(self.slots[name] for name in self.FIELDS)

    def make_room(self) -> None:
        """Double the ring if it is full (the oldest slot first again)."""
        size = self.slots['arrival'].shape[0]
        if self.queue[1] < size:
            return
        head, count = (int(x) for x in self.queue)
        order = (head + np.arange(count)) % size
        for name, a in self.slots.items():
            grown = np.zeros((2 * size,) + a.shape[1:], dtype=a.dtype)
            grown[:count] = a[order]
            self.slots[name] = grown
        self.queue[0] = 0
        self.arrays = self._arrays()


class BatchControllers:
    """
    The controllers of R runs x N agents, each with its own received states.

    Arrays: agent states as received, (R, N receivers, N senders, ...); the target as each
    agent received it, (R, N, ...); controller state (R, N, ...).
    """

    def __init__(self, scenarios: Sequence[Scenario], agent_ids: np.ndarray):
        s0 = scenarios[0]
        self.params = s0.controller_params()
        r, n = len(scenarios), agent_ids.size
        self.ids = agent_ids
        self.delay = s0.delay
        self.loss = np.array([s.loss for s in scenarios])
        self.omega_ref = s0.omega_ref
        self.lambdas = np.array([s0.lambdas.get(int(i), 1.0) for i in agent_ids])
        self.u = np.zeros((r, n))
        self.u_ss = np.zeros((r, n))
        self.pred = np.full((r, n), NO_NEIGHBOUR, dtype=np.int64)  # agent index, not id
        self.succ = np.full((r, n), NO_NEIGHBOUR, dtype=np.int64)
        self.prev_cmd = np.zeros((r, n, 3))
        self.ring_size = np.zeros((r, n), dtype=np.int64)  # law.ring_ramp's state
        self.ring_changed = np.full((r, n), -math.inf)
        self.ring_tick = np.full((r, n), -math.inf)
        self.has = np.zeros((r, n, n), dtype=bool)
        self.rx = np.full((r, n, n), -math.inf)
        self.position = np.full((r, n, n, 3), np.nan)
        self.velocity = np.full((r, n, n, 3), np.nan)
        self.nb_u = np.zeros((r, n, n))
        self.nb_u_ss = np.zeros((r, n, n))
        self.member = np.zeros((r, n, n), dtype=bool)  # a ring member's state, not a presence
        self.target_has = np.zeros((r, n), dtype=bool)
        self.target_rx = np.full((r, n), -math.inf)
        self.target_position = np.zeros((r, n, 3))
        self.target_velocity = np.zeros((r, n, 3))
        self.target_acceleration = np.zeros((r, n, 3))
        self.started = 0.0  # every agent works at the first tick (outage checks start later)
        # With simulated faults: what each receiver keeps of each sender besides its state
        # (the uncertainty, the stamp as kept, the last trusted state), times on its own clock.
        self.faulty = any(s.simulated_faults for s in scenarios)
        if self.faulty:
            self.uncertainty = np.zeros((r, n, n))
            self.stamp = np.full((r, n, n), -math.inf)
            self.trusted_position = np.full((r, n, n, 3), np.nan)
            self.trusted_velocity = np.full((r, n, n, 3), np.nan)
            self.trusted_uncertainty = np.zeros((r, n, n))
            self.trusted_rx = np.full((r, n, n), -math.inf)
        self._in_flight: list = []
        # A state's age when it arrives: the link's delay (none beyond max_future_stamp: a
        # state that late is aged from its arrival, neighbours.arrived_late).
        self._age_at_arrival = 0.0 if arrived_late(0.0, self.delay,
                                                   self.params.max_future_stamp) else self.delay
        seeds = [s.seed for s in scenarios for _ in range(n)]
        self._draws = (StreamDraws(seeds, np.tile(agent_ids, r), COMMS_STREAM)
                       if (self.loss > 0.0).any() else None)
        # The compiled tick where it covers this law (None: the numpy path, every tick).
        self._plan = compiled.control_plan(self.params, self.omega_ref, r, n, self.lambdas)
        self._scratch: Optional[_Scratch] = None
        self._flat: Optional[SimpleNamespace] = None  # the state's (R N, ...) views
        # The broadcasts compiled (kernels.exchange_states) where no run simulates faults.
        self._exchanges = not self.faulty and compiled.kernels() is not None
        if self._exchanges:
            period = self.params.control_period
            ahead = math.ceil(self.delay / period + 1e-9) if period > 0.0 else 0
            self._flight = _InFlight(r, n, ahead + 2)
            # each receiver's draws a tick: the target's, then one per other sender
            self._draw_counts = np.repeat(np.where(self.loss > 0.0, n, 0), n)
            self._no_draws = np.zeros((r, n, 0))
            # each run's one copy of what every receiver heard, where all heard every
            # broadcast (kernels.exchange_states): rx, member, position, velocity, u, u_ss
            self._shared = (np.full((r, n), -math.inf), np.zeros((r, n), dtype=bool),
                            np.full((r, n, 3), np.nan), np.full((r, n, 3), np.nan),
                            np.zeros((r, n)), np.zeros((r, n)))
            self._own_rows = np.arange(r * n, dtype=np.int64)  # each row reads its own table
            self._run_rows = np.repeat(np.arange(r, dtype=np.int64), n)  # ... or its run's

    def _send(self, now, live, positions, velocities, target_position, target_velocity,
              target_acceleration, faults: Optional[BatchFaults] = None):
        """
        Offer this tick's broadcasts to every receiver's channel (loss drawn here).

        Every agent sends: a working one its state, a failed one its vehicle's presence; with
        ``faults``, a killed one nothing (and hears nothing), a reset one its shifted estimate
        with its uncertainty, each stamped on its own clock, and a state stamped beyond
        ``max_future_stamp`` ahead of a receiver's clock reaches it as a presence stamped on
        its receipt (``controller.ahead_as_presence``).
        """
        r, n = live.shape
        sent = np.broadcast_to(~np.eye(n, dtype=bool), (r, n, n))  # (R, receiver, sender)
        keep_target = np.ones((r, n), dtype=bool)
        extra = None
        if faults is not None:
            quiet = faults.killed
            sent = sent & ~quiet[:, None, :] & ~quiet[:, :, None]
            keep_target = ~quiet
            local = now + faults.clock                       # (R, N) each agent's clock
            stamps = np.broadcast_to(local[:, None, :], (r, n, n))  # (R, receiver, sender)
            rejected = sent & (stamps - local[:, :, None] > self.params.max_future_stamp)
            extra = {'stamp': np.where(rejected, local[:, :, None], stamps),
                     'member': live[:, None, :] & ~rejected,
                     'rx': local + self.delay, 'uncertainty': faults.uncertainty.copy()}
            positions = positions + faults.shift
        keep = sent
        if self._draws is not None:
            lossy = self.loss > 0.0
            # Per receiver: the target's message first, then each other agent in order.
            counts = np.where(lossy[:, None] & keep_target, 1 + sent.sum(axis=2), 0)
            u = self._draws.take(counts.ravel()).reshape(r, n, -1)
            offset = np.cumsum(sent, axis=2) - sent  # earlier live senders (self excluded)
            cols = np.minimum(1 + offset, u.shape[2] - 1)
            loss = self.loss[:, None, None]
            drop = np.take_along_axis(u, cols, axis=2) < loss
            keep = sent & ~(lossy[:, None, None] & drop)
            keep_target = keep_target & ~(lossy[:, None] & (u[..., 0] < self.loss[:, None]))
        self._in_flight.append((now + self.delay, keep_target, keep,
                                target_position.copy(), target_velocity.copy(),
                                np.array(target_acceleration, dtype=float), positions.copy(),
                                velocities.copy(), self.u.copy(),
                                self.u_ss.copy(), live.copy(), extra))

    def _deliver(self, now, live):
        while self._in_flight and self._in_flight[0][0] <= now + TIME_EPS:
            (arrival, keep_target, keep, t_pos, t_vel, t_acc, pos, vel, u, u_ss, member,
             extra) = self._in_flight.pop(0)
            to_target = keep_target  # a failed agent listens too
            self.target_has |= to_target
            if extra is None:
                self.target_rx[to_target] = arrival
            else:  # on each receiver's own clock
                self.target_rx = np.where(to_target, extra['rx'], self.target_rx)
            np.copyto(self.target_position, t_pos[:, None, :], where=to_target[..., None])
            np.copyto(self.target_velocity, t_vel[:, None, :], where=to_target[..., None])
            np.copyto(self.target_acceleration, t_acc[:, None, :], where=to_target[..., None])
            got = keep
            if self.faulty:
                self._keep_faults(got, extra, pos, vel, arrival)
            self.has |= got
            if extra is None:
                self.rx[got] = arrival
                np.copyto(self.member, member[:, None, :], where=got)
            else:
                self.rx = np.where(got, extra['rx'][:, :, None], self.rx)
                np.copyto(self.member, extra['member'], where=got)
            if got.sum() == got.shape[0] * got.shape[1] * (got.shape[2] - 1):
                # Everyone heard everyone (the usual tick): plain copies. The diagonal (own
                # state) is written too but never read: ``has`` stays False there.
                self.position[...] = pos[:, None, :, :]
                self.velocity[...] = vel[:, None, :, :]
                self.nb_u[...] = u[:, None, :]
                self.nb_u_ss[...] = u_ss[:, None, :]
                continue
            np.copyto(self.position, pos[:, None, :, :], where=got[..., None])
            np.copyto(self.velocity, vel[:, None, :, :], where=got[..., None])
            np.copyto(self.nb_u, u[:, None, :], where=got)
            np.copyto(self.nb_u_ss, u_ss[:, None, :], where=got)

    def _keep_faults(self, got, extra, pos, vel, arrival):
        """
        Take in what a receiver keeps besides a state: uncertainty, stamp, trusted state.

        The rules of ``controller.merge_states``: a state no wider than ``d_safe`` (or a
        sender's first) becomes its last trusted state.
        """
        r, n = got.shape[:2]
        if extra is None:  # sent before any fault: certain, stamped on the one clock
            uncertainty = np.zeros((r, 1, n))
            stamp = np.broadcast_to(arrival - self.delay, got.shape)
            rx = np.full((r, n, 1), arrival)
        else:
            uncertainty = extra['uncertainty'][:, None, :]
            stamp = extra['stamp']
            rx = extra['rx'][:, :, None]
        stamp = np.where(arrived_late(stamp, rx, self.params.max_future_stamp), rx, stamp)
        self.uncertainty = np.where(got, uncertainty, self.uncertainty)
        self.stamp = np.where(got, stamp, self.stamp)
        trust = got & ((uncertainty <= self.params.d_safe) | ~self.has)
        self.trusted_position = np.where(trust[..., None], pos[:, None, :, :],
                                         self.trusted_position)
        self.trusted_velocity = np.where(trust[..., None], vel[:, None, :, :],
                                         self.trusted_velocity)
        self.trusted_uncertainty = np.where(trust, uncertainty, self.trusted_uncertainty)
        self.trusted_rx = np.where(trust, rx, self.trusted_rx)

    def tick(self, now, live, positions, velocities, target_position, target_velocity,
             target_acceleration=0.0, faults: Optional[BatchFaults] = None):
        """
        One control tick of every run: deliveries, broadcasts, then ``control_step``.

        ``target_acceleration`` (R, 3): what each run's target broadcasts
        (``core.target_estimate``). ``faults``: the simulated faults in effect (None: none;
        ``live`` is False for a killed agent).
        """
        if faults is not None and not faults.active:
            faults = None
        if self._exchanges and faults is None:
            self._exchange(now, live, positions, velocities, target_position, target_velocity,
                           target_acceleration)
        else:
            if self._exchanges:  # the tables no longer as the compiled exchange left them
                self._materialize()
                self._flight.queue[2] = 0
            self._deliver(now, live)
            self._send(now, live, positions, velocities, target_position, target_velocity,
                       np.broadcast_to(target_acceleration, np.shape(target_velocity)), faults)
        return self._control(now, live, positions, velocities, faults)

    def _exchange(self, now, live, positions, velocities, target_position, target_velocity,
                  target_acceleration):
        """:meth:`_deliver` and :meth:`_send` compiled (no simulated fault in any run)."""
        r, n = live.shape
        draws = self._no_draws
        if self._draws is not None:
            draws = self._draws.take(self._draw_counts).reshape(r, n, -1)
        t_acc = target_acceleration
        if not (isinstance(t_acc, np.ndarray) and t_acc.shape == (r, 3)):
            t_acc = np.ascontiguousarray(np.broadcast_to(t_acc, (r, 3)), dtype=float)
        self._flight.make_room()
        compiled.kernels().exchange_states(
            now, TIME_EPS, self.delay, *self._flight.arrays, np.asarray(live, dtype=bool),
            np.asarray(positions, dtype=float), np.asarray(velocities, dtype=float),
            np.asarray(target_position, dtype=float), np.asarray(target_velocity, dtype=float),
            np.asarray(t_acc, dtype=float), self.u, self.u_ss, self.loss, draws,
            self.target_has, self.target_rx, self.target_position, self.target_velocity,
            self.target_acceleration, self.has, self.rx, self.member, self.position,
            self.velocity, self.nb_u, self.nb_u_ss, *self._shared)

    def known(self, now, faults: Optional[BatchFaults] = None):
        """
        Return what each agent knows of the others after the tick at ``now``, by agent index.

        (positions (R, N, N, 3), counted (R, N, N)): those heard within ``obstacle_memory``
        on each agent's own clock (``area.limit_clear``'s ``known``).
        """
        self._materialize()
        clock = now if faults is None else (now + faults.clock)[..., None]
        return self.position, self.has & (clock - self.rx <= self.params.obstacle_memory)

    def _materialize(self) -> None:
        """Bring every receiver's own tables up to date (``kernels.materialize_tables``)."""
        if self._exchanges and self._flight.queue[3]:
            compiled.kernels().materialize_tables(
                self._flight.queue, *self._shared, self.rx, self.member, self.position,
                self.velocity, self.nb_u, self.nb_u_ss)

    def _control(self, now, live, positions, velocities, faults=None):
        p = self.params
        r, n = live.shape
        cmds = np.zeros((r, n, 3))
        clock = now if faults is None else now + faults.clock  # (R, N): each agent's own
        if faults is not None:
            positions = positions + faults.shift  # where each believes it is
        compiled_tick = self._plan is not None and faults is None and not self.faulty
        if compiled_tick:  # one clock: the same rows, counted as they are found
            has_target = np.empty((r, n), dtype=bool)
            found, lost_some = self._plan.kernels.target_rows(
                float(now), float(p.target_liveness), live, self.target_has, self.target_rx,
                has_target)
        else:
            has_target = live & self.target_has & (clock - self.target_rx <= p.target_liveness)
            found, lost_some = has_target.any(), (live & ~has_target).any()
        if lost_some:
            lost = live & ~has_target
            age = np.where(self.target_has, clock - self.target_rx, clock - self.started)[lost]
            last = np.where(self.target_has[lost][:, None], self.target_velocity[lost], 0.0)
            self.prev_cmd[lost] = cmds[lost] = fallback_command(last, age, positions[lost], p)
        if not found:
            return cmds, self.u
        if compiled_tick:
            # the rows the compiled kernel stepped; the numpy path steps the rest
            done, stepped = self._control_compiled(now, has_target, positions, velocities,
                                                   cmds)
            if stepped == found:  # it steps rows with a live target only
                return cmds, self.u
            has_target = has_target & ~done
        self._materialize()  # the numpy path reads every receiver's own tables
        if has_target.all():  # the usual tick: every row, as views (no gathers)
            ii = np.tile(np.arange(n), r)

            def get(a):
                return a.reshape((r * n,) + a.shape[2:])

            def put(a, value):
                a.reshape((r * n,) + a.shape[2:])[...] = value
        else:
            rr, ii = np.nonzero(has_target)

            def get(a):
                return a[rr, ii]

            def put(a, value):
                a[rr, ii] = value
        t_pos = get(self.target_position)
        t_vel = get(self.target_velocity)
        t_acc = get(self.target_acceleration)
        own = get(positions)
        local = now if faults is None else get(clock)[:, None]  # each row's own clock
        heard = get(self.has) & (local - get(self.rx) <= p.agent_timeout)  # (M, N)
        entry = heard & get(self.member)  # ring members; the rest are presence
        nb_pos = get(self.position)
        dx = nb_pos[..., 0] - t_pos[:, 0, None]
        dy = nb_pos[..., 1] - t_pos[:, 1, None]
        # target_angle's result bit for bit: np.mod(a, 2 pi) of a in (-2 pi, 2 pi) is
        # a + 2 pi where a < 0, else a (fmod is exact there); entries not heard read 0.
        theta = wrap_2pi_once(np.where(entry, np.arctan2(dy, dx), 0.0))
        theta_self = target_angle(own, t_pos)
        own_ids = self.ids[ii]
        rows = np.arange(ii.size)
        pred, succ = select_neighbours(entry, theta, theta_self, own_ids, self.ids,
                                       get(self.pred), get(self.succ),
                                       p.neighbour_hysteresis(entry.sum(axis=1) + 1))
        nb_vel = get(self.velocity)

        nb_u, nb_u_ss = get(self.nb_u), get(self.nb_u_ss)

        def view(idx):
            at = np.maximum(idx, 0)
            ok = (idx != NO_NEIGHBOUR) & entry[rows, at]
            if ok.all():
                return NeighbourView(theta[rows, at], nb_pos[rows, at], nb_vel[rows, at],
                                     nb_u[rows, at], nb_u_ss[rows, at], self.ids[at]), ok
            return NeighbourView(
                np.where(ok, theta[rows, at], np.nan),
                np.where(ok[:, None], nb_pos[rows, at], np.nan),
                np.where(ok[:, None], nb_vel[rows, at], np.nan),
                np.where(ok, nb_u[rows, at], 0.0),
                np.where(ok, nb_u_ss[rows, at], 0.0),
                np.where(ok, self.ids[at], NO_NEIGHBOUR)), ok

        pred_view, pred_ok = view(pred)
        succ_view = view(succ)[0]
        lambda_pred = np.where(pred_ok, self.lambdas[np.maximum(pred, 0)], 1.0)
        others = {}
        kept = None  # those heard within obstacle_memory (the d_safe term's, law.crowded's)
        if p.d_safe:  # states arrive ``delay`` after they were sent
            rx = get(self.rx)
            silent = kept = get(self.has) & (local - rx <= p.obstacle_memory)
            if faults is None and not self.faulty:
                d_safe = p.safety_distance(entry.sum(axis=1) + 1)
                discs = self._silent_discs(heard, silent, local - rx, entry)
                if discs is None and none_within_reach(own, get(velocities), d_safe, heard,
                                                       silent, nb_pos, nb_vel, p):
                    others = {}  # what the scan below finds then, at a fraction of its cost
                else:
                    others = silent_obstacles_within_reach(
                        own, get(velocities), d_safe, heard, silent, nb_pos, nb_vel,
                        now - rx + self._age_at_arrival,
                        shown_presence(~get(self.member), heard, silent), p, discs)
            else:
                others = self._obstacles_faults(get, own, velocities, entry, heard, silent, rx,
                                                local, nb_pos, nb_vel, faults)
            # In swarms past law.WITHIN_REACH_COLUMNS columns this path steps every row with
            # a vehicle within reach; law._take_out's passes in numpy were most of a crowd's
            # CPU. The compiled term gives the same values, bit for bit.
            wide = compiled_wide() if others else None
            if wide is not None:
                others['separation'] = wide.separation_velocity
            if p.knows_obstacles:
                known = ring_obstacles(silent & ~entry, nb_pos)
                if known is not None:
                    others = {**others, 'ring_obstacles': known}
        ring_size = entry.sum(axis=1) + 1
        tick = now if faults is None else get(clock)
        # law.crowded: where the ring's gains are off and (ring_ramp_silent, where the size
        # changed) the ramp restarts, as where a vehicle counted fell silent
        crowd = silent_now = False
        resized = p.ring_ramp_silent and np.any(ring_size != get(self.ring_size))
        if resized or (p.ring_gains_from and p.d_safe):
            if kept is None:
                kept = get(self.has) & (local - get(self.rx) <= p.obstacle_memory)
            crowd = crowded(own, nb_pos, kept, p.safety_distance(ring_size))
            if resized:
                silent_now = (kept & ~heard).any(axis=1) | crowd
        weight, ring_changed = ring_ramp(ring_size, get(self.ring_size), get(self.ring_changed),
                                         get(self.ring_tick), tick, p, silent_now)
        put(self.ring_size, ring_size)
        put(self.ring_changed, ring_changed)
        put(self.ring_tick, tick)
        u_new, u_ss, cmd = encirclement_step(
            get(self.u), own, get(velocities), get(self.prev_cmd), t_pos, t_vel,
            self.omega_ref + gap_steer(theta_self, theta, entry, others.get('ring_obstacles'),
                                       t_pos, t_vel, p) + np.zeros(ii.size),
            theta_self, pred_view, succ_view, lambda_pred,
            self.lambdas[ii], p, crowd, ring_size=ring_size, own_id=own_ids,
            target_acceleration=t_acc,
            ring_offset=self._ring_offset(theta_self, theta, entry, weight), **others)
        put(self.u, u_new)
        put(self.u_ss, u_ss)
        put(self.pred, pred)
        put(self.succ, succ)
        put(self.prev_cmd, cmd)
        put(cmds, cmd)
        return cmds, self.u

    def _control_compiled(self, now, has_target, positions, velocities,
                          cmds) -> tuple[np.ndarray, int]:
        """
        Step the rows of :meth:`_control` that the compiled kernel covers; return them (R, N).

        Also returned: how many they are. The mask is the kernel's buffer, valid until the
        next tick.

        Rows with a live target (``has_target``; the others' commands are the caller's) and
        no fault in effect (the caller checks). A row is left to the numpy path where the
        ``d_safe`` term counts what the kernel does not: a silent vehicle, none heard, or,
        with one within ``law.obstacle_reach`` of the row's agent (its speed, the fastest
        vehicle it counts, its ``d_safe``: at least every bound of the numpy path's scan),
        a swarm beyond ``plan.separate``'s size. Each row's result
        depends on its row alone (``law.encirclement_step``), so the split changes no value.
        The angles (one ``arctan2`` of every offset) and ``g(u)`` are numpy's (the
        transcendental functions' bits), the rest ``kernels.prepare_rows``,
        ``kernels.wrap_angles`` and ``kernels.control_rows`` on buffers kept between ticks.
        """
        p, plan, k = self.params, self._plan, self._plan.kernels
        r, n = self.u.shape
        rows = r * n

        f = self._flat
        if f is None:  # every array is made once (__init__): its view stays one
            f = self._flat = SimpleNamespace(**{
                name: np.reshape(a, (rows,) + a.shape[2:], copy=False)
                for name, a in ((name, getattr(self, name)) for name in _FLAT_STATE)})
        s = self._scratch
        if s is None:
            s = self._scratch = _Scratch.empty(rows, n)
        has = f.has
        if self._exchanges and self._flight.queue[3]:  # each run's one shared table
            tab = self._run_rows
            rx, member, nb_pos, nb_vel, nb_u, nb_u_ss = self._shared
        else:
            tab = self._own_rows
            rx, member, nb_pos, nb_vel, nb_u, nb_u_ss = (f.rx, f.member, f.position, f.velocity,
                                                         f.nb_u, f.nb_u_ss)
        own = positions.reshape(rows, 3)  # read only: a copy where positions is a slice
        own_v = velocities.reshape(rows, 3)
        t_pos = f.target_position
        check_reach = bool(p.d_safe)
        # every receiver of a run holds the same tables (the last broadcasts reached all)
        shared = self._exchanges and bool(self._flight.queue[2])
        covered = k.prepare_rows(plan.law, check_reach, p.obstacle_memory, now,
                                 has_target.reshape(rows), has, tab, rx, member, own, own_v,
                                 nb_pos, nb_vel, t_pos, plan.d_safe, s.entry, s.ring, s.covered,
                                 s.speed, s.others, s.bound, shared, s.dy, s.dx, s.shared_dy,
                                 s.shared_dx)
        if not covered:
            return np.zeros_like(has_target), 0
        # the angles as _control takes them: wrap_2pi_once of arctan2, target_angle's own
        if shared:
            k.wrap_shared_angles(np.arctan2(s.shared_dy, s.shared_dx), s.theta, s.theta_self)
        else:
            k.wrap_angles(np.arctan2(s.dy, s.dx), s.theta, s.theta_self)
        u = f.u
        done = s.done
        stepped = k.control_rows(
            plan.law, s.covered, check_reach, s.bound, p.obstacle_memory, now, has, tab, rx,
            s.entry, s.ring, s.theta, s.theta_self, plan.own_col, self.ids, self.lambdas, own,
            own_v, nb_pos, nb_vel, nb_u, nb_u_ss, t_pos, f.target_velocity,
            f.target_acceleration, u, limiter(u, p), f.prev_cmd, f.pred, f.succ,
            plan.hysteresis, plan.damping, f.ring_size, f.ring_changed, f.ring_tick,
            plan.separate, plan.d_safe, member, self._age_at_arrival, f.u_ss,
            cmds.reshape(rows, 3), done, plan.ring_law, plan.ring_damping, plan.ring_fade)
        return done.reshape(r, n), stepped

    def _ring_offset(self, theta_self, theta, entry, weight):
        """
        Each row's :func:`law.ring_offset` (0 when the target weights the arcs, or off).

        Times its :func:`law.ring_ramp` ``weight``.
        """
        if not self.params.k_e_ring or np.any(self.lambdas != 1.0):
            return 0.0
        return ring_offset(theta_self, theta, entry) * weight

    def _silent_discs(self, heard, silent, age, entry):
        """Return the discs of the rows' silent vehicles (None: none silent): hold_drift's."""
        silent = silent & ~heard
        if not silent.any():
            return None
        p = self.params
        return uncertainty_discs(0.0, np.where(silent, age, 0.0),
                                 p.usable_uncertainty(entry.sum(axis=1) + 1), p)

    def _obstacles_faults(self, get, own, velocities, entry, heard, silent, rx, local, nb_pos,
                          nb_vel, faults):
        """
        Return the ``d_safe`` term's inputs with simulated faults: discs, trusted, own clocks.

        What ``controller._obstacles`` makes of the receiver's table: each vehicle's disc (its
        uncertainty, growing at ``hold_drift`` while silent, at most the usable size of the
        receiver's ring), its last trusted state where its broadcast is wider, and the ages on
        the receiver's own clock.
        """
        p = self.params
        ring = entry.sum(axis=1) + 1
        usable = p.usable_uncertainty(ring)
        uncertainty = get(self.uncertainty)
        radius = np.where(silent, uncertainty_discs(uncertainty, np.where(heard, 0.0, local - rx),
                                                    usable, p), 0.0)
        own_uncertainty = (np.zeros(own.shape[0]) if faults is None
                           else get(faults.uncertainty))
        own_radius = np.minimum(own_uncertainty, usable)
        untrusted = silent & (uncertainty > np.minimum(usable, p.d_safe)[:, None])
        trusted = None
        if untrusted.any():
            since = local - get(self.trusted_rx)
            trusted = (get(self.trusted_position), get(self.trusted_velocity), since,
                       uncertainty_discs(get(self.trusted_uncertainty), since, usable, p),
                       untrusted)
        uncertain = bool(np.any(own_radius > 0.0) or np.any(radius > 0.0))
        others = silent_obstacles_within_reach(
            own, get(velocities), p.safety_distance(ring), heard, silent, nb_pos, nb_vel,
            local - get(self.stamp), shown_presence(~get(self.member), heard, silent), p,
            radius if uncertain else None,
            trusted, own_radius=own_radius if uncertain else 0.0)
        if others and uncertain:
            others['own_radius'] = own_radius
        return others


def none_within_reach(own_position, own_velocity, d_safe, heard, silent, position, velocity,
                      params) -> bool:
    """
    Whether no vehicle lies within ``law.obstacle_reach`` of any agent: one bound for all.

    ``law.silent_obstacles_within_reach`` (points: no disc, no silent vehicle) compares each
    vehicle's distance with its own bound, which grows with both speeds and ``d_safe``; the
    bound of the fastest agent, the fastest vehicle and the largest ``d_safe`` is at least every
    one of them. True: every vehicle counted (``heard`` or ``silent``) lies at least that far,
    so the scan would find none (its term adds nothing: it returns {}). False: ask the scan
    (one nearer, NaN, or a silent vehicle, which counts where ``law.silent_track`` puts it).
    """
    if np.any(silent & ~heard):
        return False
    counted = heard | silent
    if not counted.any():
        return False
    own_v = np.asarray(own_velocity, dtype=float)
    moving = np.asarray(velocity, dtype=float)
    speed = float(np.max(np.hypot(own_v[..., 0], own_v[..., 1])))
    others = float(np.max(np.where(counted, np.hypot(moving[..., 0], moving[..., 1]), 0.0)))
    bound = obstacle_reach(speed, others, 0.0, params, 0.0, float(np.max(d_safe)))
    own = np.asarray(own_position, dtype=float)
    at = np.asarray(position, dtype=float)
    distance = np.hypot(at[..., 0] - own[..., None, 0], at[..., 1] - own[..., None, 1])
    return bool(np.all(np.where(counted, distance >= bound, True)))


def shown_presence(presence, heard, silent):
    """
    Return ``presence`` (..., M) for ``law.silent_obstacles_within_reach``, or None if unused.

    A presence (a failed agent's broadcast) adds its vehicle's rest point to the ``d_safe``
    term only where the vehicle counts (``heard`` or ``silent``); where none does, its columns
    would all be empty (NaN, adding exactly nothing), so a run without failed agents skips them.
    """
    return presence if np.any(presence & (heard | silent)) else None


def batch_metrics(positions, velocities, live, target_position, target_velocity, radius):
    """
    ``compute_metrics`` of R runs at once: (R, 6) ``E_r, E_vr, rho, G_max, E_gap, d_min``.

    ``positions``/``velocities`` (R, N, 3), ``live`` (R, N), target (R, 3), ``radius`` (R,).
    Rows with no live agent are NaN; ``d_min`` is NaN below two live agents.
    """
    r, n = live.shape
    m = live.sum(axis=1)
    rel = positions[..., :2] - target_position[:, None, :2]
    dist = np.hypot(rel[..., 0], rel[..., 1])
    with np.errstate(invalid='ignore', divide='ignore'):
        e_hat = np.where(dist[..., None] > 1e-9, rel / dist[..., None], 0.0)
        v_rel = velocities[..., :2] - target_velocity[:, None, :2]
        v_r = np.sum(v_rel * e_hat, axis=-1)
        theta = wrap_2pi(np.arctan2(rel[..., 1], rel[..., 0]))
        e_r = np.sqrt(np.sum(np.where(live, (dist / radius[:, None] - 1.0) ** 2, 0.0), axis=1)
                      / m)
        e_vr = np.sqrt(np.sum(np.where(live, v_r ** 2, 0.0), axis=1) / m)
        rho = np.hypot(np.sum(np.where(live, np.cos(theta), 0.0), axis=1),
                       np.sum(np.where(live, np.sin(theta), 0.0), axis=1)) / m
        ordered = np.sort(np.where(live, theta, np.inf), axis=1)
        first = ordered[:, :1]
        last_index = np.maximum(m - 1, 0)
        nxt = np.concatenate((ordered[:, 1:], np.full((r, 1), np.inf)), axis=1)
        nxt[np.arange(r), last_index] = first[:, 0] + TWO_PI
        gaps = np.where(np.arange(n) < m[:, None], nxt - ordered, np.nan) / (TWO_PI / m[:, None])
        g_max = np.nanmax(np.where(np.isnan(gaps), -np.inf, gaps), axis=1)
        e_gap = np.sqrt(np.nansum((gaps - 1.0) ** 2, axis=1) / m)
        xy = positions[..., :2]
        dx = xy[:, :, None, 0] - xy[:, None, :, 0]
        dy = xy[:, :, None, 1] - xy[:, None, :, 1]
        both = live[:, :, None] & live[:, None, :] & ~np.eye(n, dtype=bool)
        d_min = np.sqrt(np.where(both, dx * dx + dy * dy, np.inf).min(axis=(1, 2)))
    out = np.column_stack((e_r, e_vr, rho, g_max, e_gap, np.where(m >= 2, d_min, np.nan)))
    out[m == 0] = np.nan
    return out


class SeparationTracker:
    """
    Closest approach of two vehicles after they were once farther than ``apart`` (R runs).

    The separation benchmark's figure: a start may put agents closer than the safety distance
    (a launch pad, PX4's SITL spawn line), but two vehicles that were once ``apart`` from each
    other must not come close again. ``after`` (R,) is that closest distance (inf: no such
    pair), ``overall`` (R,) the closest approach of any two vehicles at any time, both in
    the horizontal plane, as ``d_min``. Checked every control tick, over every pair of vehicles
    of which at least one is flown by its agent (``live``: working, and not held by its bridge
    after an estimator reset): a failed agent's vehicle brakes to a hover where it failed and
    announces it, so the working ones must keep clear of it, and its failure and return is no
    new start. Two vehicles flown by neither agent are not counted: neither has a controller
    that could act (both brake to a hover on their last zero command, or are held, and may
    drift together); where they are when one comes back is a start of its own.
    """

    def __init__(self, runs: int, agents: int, apart: float):
        self.apart = apart
        self.was_apart = np.zeros((runs, agents, agents), dtype=bool)
        self.after = np.full(runs, np.inf)
        self.overall = np.full(runs, np.inf)

    def update(self, positions: np.ndarray, live: np.ndarray) -> None:
        """Take in one tick: positions (R, N, 3), live (R, N)."""
        xy = positions[..., :2]
        d = np.hypot(xy[:, :, None, 0] - xy[:, None, :, 0], xy[:, :, None, 1] - xy[:, None, :, 1])
        np.einsum('rii->ri', d)[...] = np.inf  # a vehicle and itself
        either = live[:, :, None] | live[:, None, :]
        counted = np.where(either, d, np.inf)
        self.overall = np.minimum(self.overall, counted.min(axis=(1, 2)))
        self.after = np.minimum(self.after,
                                np.where(self.was_apart, counted, np.inf).min(axis=(1, 2)))
        self.was_apart |= d > self.apart
        self.was_apart &= either  # where two failed vehicles drifted, a return is a new start


@dataclass
class BatchResult:
    """The metrics series of each run, in ``batch_sim``'s (T, 7) layout."""

    metrics: list  # R arrays (T, 7): timestamp, E_r, E_vr, rho, G_max, E_gap, d_min
    sim_time: float
    separation: Optional[SeparationTracker] = None  # with simulate_runs(..., apart=d)
    final_positions: Optional[np.ndarray] = None    # (R, N, 3) the agents' at the end
    area_margin: Optional[np.ndarray] = None  # (R,) smallest margin to the area (NaN: none)


def simulate_runs(scenarios: Sequence[Scenario], apart: float = 0.0) -> BatchResult:
    """
    Run ``scenarios`` (one :func:`group_key`) together; each run's metrics series.

    With ``apart`` > 0 the result also holds the runs' :class:`SeparationTracker`.
    """
    scenarios = list(scenarios)
    keys = {group_key(s) for s in scenarios}
    if len(keys) != 1:
        raise ValueError('simulate_runs needs runs that differ only in '
                         + ', '.join(PER_RUN_FIELDS))
    s0 = scenarios[0]
    vehicle = s0.vehicle_params()
    gains = s0.controller_params()  # t_safe and a_safe, shared by the group (group_key)
    r, n, period = len(scenarios), s0.agents, s0.control_period
    ids = s0.agent_ids()
    target_start = np.array([s.target_start() for s in scenarios])
    start = np.stack([s.start_positions() for s in scenarios])
    bodies = VehicleState.at_rest(np.concatenate((start, target_start[:, None]), axis=1)
                                  .reshape(-1, 3))
    models = [s.target_model() for s in scenarios]
    moving = [k for k, s in enumerate(scenarios) if s.target_motion != 'static']
    controllers = BatchControllers(scenarios, ids)
    outages = BatchOutages(scenarios, ids)
    plans = [fault_plan(s, n, s.seed) for s in scenarios]
    faulty = any(s.simulated_faults for s in scenarios)
    none = stack_plans([no_faults(n)] * r)
    radius = np.array([s.radius for s in scenarios])
    steps_per_tick = round(period / vehicle.sim_dt)
    ticks = int(np.floor(s0.duration / period + 1e-9))
    metrics_every = max(1, round((s0.metrics_period or period) / period))
    rows = []
    times = []
    v_des = np.zeros((r, n + 1, 3))
    tracker = SeparationTracker(r, n, apart) if apart > 0.0 else None
    area_margin = np.full(r, np.inf if s0.area is not None else np.nan)
    target_estimate = None  # each run's target acceleration, as target_node estimates it
    all_live = None  # live on every tick where no run has faults or outages (read only)
    every_live = False  # ... and every agent of every run is
    kernels = compiled.kernels()
    # model.step compiled, in place on ``bodies`` (None: the numpy path or a copy each tick)
    stepper = compiled.vehicle_vector(vehicle)
    if kernels is not None:  # the metrics rows written in place, one (R, 6) block a tick
        series = np.empty((ticks // metrics_every + 1, r, 6))
    # each tick's states, contiguous (read only, and by no one after the tick: the
    # broadcasts keep copies): slices of more than one run would be strided, and numba
    # compiles and caches a second version of every kernel for that layout, so a sweep's
    # first chunks of many runs compiled again after a run of one had filled the cache
    positions, velocities = np.empty((r, n, 3)), np.empty((r, n, 3))
    t_pos, t_vel = np.empty((r, 3)), np.empty((r, 3))
    for k in range(ticks + 1):
        now = k * period
        faults = stack_plans([plan.at(now) for plan in plans]) if faulty else none
        if all_live is None:
            live = ~outages.update(now) & ~faults.killed & ~faults.failed
            all_live = None if faulty or outages.enabled.any() else live
            every_live = all_live is not None and bool(all_live.all())
        else:  # no fault and no outage in any run: every agent live on every tick
            live = all_live
        pos = bodies.position.reshape(r, n + 1, 3)
        vel = bodies.velocity.reshape(r, n + 1, 3)
        positions[...] = pos[:, :n]
        velocities[...] = vel[:, :n]
        t_pos[...] = pos[:, n]
        t_vel[...] = vel[:, n]
        if kernels is not None:
            target_estimate = _estimate_in_place(kernels, target_estimate, now, t_vel)
        else:
            target_estimate = estimate_acceleration(target_estimate, now, t_vel)
        cmds, _ = controllers.tick(now, live, positions, velocities, t_pos, t_vel,
                                   target_estimate.acceleration, faults if faulty else None)
        if faulty and faults.held.any():  # a bridge holds its vehicle after a large reset
            cmds = np.where(faults.held[..., None], 0.0, cmds)
        if s0.area is not None:
            cmds = limit_clear(cmds, positions, velocities, s0.area, gains.t_safe, gains.a_safe,
                               period, lambda: controllers.known(now, faults if faulty else None),
                               gains.d_safe)
            area_margin = np.minimum(area_margin, s0.area.clearance(positions).min(axis=1))
        if tracker is not None:  # a vehicle its bridge holds is under no controller's command
            tracker.update(positions, live & ~faults.held)
        if k % metrics_every == 0:
            if kernels is not None:
                kernels.metrics_rows(positions, velocities, live, t_pos, t_vel, radius,
                                     series[len(times)])
            else:
                rows.append(batch_metrics(positions, velocities, live, t_pos, t_vel, radius))
            times.append(now)
        if k == ticks:
            break
        v_des[:, :n] = cmds if every_live else np.where(live[..., None], cmds, 0.0)
        for j in moving:
            v_des[j, n] = models[j].desired_velocity(now, t_pos[j])
        flat = v_des.reshape(-1, 3)
        if stepper is not None:  # model.step compiled, in place
            kernels.vehicle_steps(stepper, steps_per_tick, flat, bodies.position,
                                  bodies.velocity, bodies.acceleration, bodies.yaw,
                                  bodies.yaw_rate)
        else:
            for _ in range(steps_per_tick):
                bodies = step(bodies, flat, vehicle)
    if kernels is not None:
        series = series[:len(times)].transpose(1, 0, 2)  # (R, T, 6)
    else:
        series = np.stack(rows, axis=1)
    t = np.array(times)
    return BatchResult([np.column_stack((t, series[j])) for j in range(r)], ticks * period,
                       tracker, bodies.position.reshape(r, n + 1, 3)[:, :n].copy(), area_margin)


def _estimate_in_place(kernels, previous, stamp: float, velocity):
    """
    ``estimate_acceleration`` of R targets (R, 3), the estimate updated in place (compiled).

    The same values: the first sample estimates zero, a sample not later keeps the estimate,
    and the low-pass share is ``low_pass_share`` of the step.
    """
    if previous is None:
        return estimate_acceleration(None, stamp, velocity)
    stamp = float(stamp)
    dt = stamp - previous.stamp
    if not dt > 0.0:
        return previous
    kernels.estimate_rows(velocity, previous.velocity, previous.acceleration, dt, _share(dt))
    return AccelerationEstimate(stamp, previous.velocity, previous.acceleration)


# low_pass_share of the few steps a run's ticks make (k P - (k - 1) P), computed once each
_share = functools.lru_cache(maxsize=64)(low_pass_share)


def replace_seed(scenario: Scenario, seed: int) -> Scenario:
    """Return ``scenario`` with another seed."""
    return dataclasses.replace(scenario, seed=seed)
