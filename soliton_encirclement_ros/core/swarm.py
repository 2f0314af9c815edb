"""
Vectorised controllers of a whole swarm for the batch simulator.

:class:`SwarmControllers` holds the per-agent controller state of N agents as arrays and steps
every live agent at once with the same law (``law.encirclement_step``) and the same neighbour
rules as ``controller.control_step``. Each agent's row uses only what that agent received.

It relies on every receiver hearing the same broadcasts: no packet loss, one fixed delay.
Then all receivers hold the same latest state of each sender (:class:`SharedStates`): a failed
agent listens too (:func:`vectorisable` checks the rest; otherwise use the per-agent path).
``test_batch_sim`` checks that both paths give the same trajectories.
"""
from __future__ import annotations

import math

import numpy as np

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.geometry import target_angle
from soliton_encirclement_ros.core.law import (
    encirclement_step, fallback_command, gap_steer, NeighbourView, ring_obstacles, ring_ramp)
from soliton_encirclement_ros.core.neighbours import (
    arrived_late, is_alive, NO_NEIGHBOUR, select_neighbours_shared)
from soliton_encirclement_ros.core.spatial import (
    but_own, crowded_shared, obstacles_within_reach_shared, ring_offset_shared, SHARED_COLUMNS)


def vectorisable(params: ControllerParams, loss: float, delay: float,
                 failures_per_min: float, off_time: float) -> bool:
    """
    Whether :class:`SwarmControllers` reproduces the per-agent controllers exactly.

    Without loss every broadcast reaches every receiver, a failed one too (it listens): they
    all hold the same. (The outages' rate and length no longer matter; they are arguments for
    the callers that name them.)
    """
    return loss == 0.0


# The law's d_safe columns (law.silent_obstacles_within_reach) are padded to the widest row's
# count; from GROUP_ROWS rows on, the law runs on WIDTH_GROUPS groups of rows of about the
# same width: it is elementwise over rows, and at N = 1,000 (74 columns at most, 35 on
# average) a tick took 87 to 99 ms in four groups, 97 to 102 in two, 122 in one.
GROUP_ROWS = 256
WIDTH_GROUPS = 4


def law_by_width(rows: dict, params: ControllerParams):
    """
    Return ``law.encirclement_step(**rows, params=params)`` over groups of rows: its values.

    ``rows``: every argument of the law as arrays over the M agents' rows (the neighbours'
    views too), ``others_*`` (M, C, ...) with columns of none (NaN position and velocity,
    as ``law`` fills them) beyond each row's last one. Rows are grouped by their last column
    and each group's columns cut there: the same values for each row (the law is elementwise
    over rows, and columns of none add nothing).
    """
    others = rows.get('others_position')
    m = rows['u'].shape[0]
    if others is None or m < GROUP_ROWS:
        return encirclement_step(params=params, **rows)
    used = ~(np.isnan(others[..., 0]) & np.isnan(rows['others_velocity'][..., 0]))
    last = np.where(used.any(axis=1), others.shape[1] - np.argmax(used[:, ::-1], axis=1), 1)
    order = np.argsort(last, kind='stable')
    u_new, u_ss, cmd = np.empty(m), np.empty(m), np.empty((m, 3))
    for group in np.array_split(order, WIDTH_GROUPS):
        width = int(last[group].max())
        part = {name: _rows_of(value, group, width if name.startswith('others_') else None)
                for name, value in rows.items()}
        u_new[group], u_ss[group], cmd[group] = encirclement_step(params=params, **part)
    return u_new, u_ss, cmd


def _rows_of(value, group, width):
    """Return the rows ``group`` of one law argument (a view's too), columns cut at ``width``."""
    if isinstance(value, NeighbourView):
        return NeighbourView(*(_rows_of(field, group, None) for field in value))
    if np.ndim(value) == 0:
        return value
    value = value[group]
    return value if width is None else value[:, :width]


def compiled_wide():
    """
    Return ``core.kernels_wide`` (the ``d_safe`` term's work compiled), or None (numpy's).

    numba is imported on the first call (:func:`compiled.kernels`: its cache, and
    ``SOLITON_COMPILED=0`` to turn it off). The engine uses it for swarms of more than
    ``spatial.SHARED_COLUMNS`` agents: in smaller ones, loading the kernels (about 0.7 CPU-s)
    costs more than they save. The batch engine uses it for the rows its compiled tick leaves
    (past ``law.WITHIN_REACH_COLUMNS`` columns, a row with a vehicle within reach).
    """
    if compiled.kernels() is None:
        return None
    from soliton_encirclement_ros.core import kernels_wide
    return kernels_wide


class SharedStates:
    """Latest delivered broadcast of each agent (row = agent index), as every receiver has it."""

    def __init__(self, n: int):
        self.has = np.zeros(n, dtype=bool)
        self.position = np.full((n, 3), np.nan)
        self.velocity = np.full((n, 3), np.nan)
        self.u = np.zeros(n)
        self.u_ss = np.zeros(n)
        self.member = np.zeros(n, dtype=bool)    # a ring member's state (False: presence)
        self.rx_time = np.full(n, -math.inf)     # arrival (receive) time
        self.sent = np.full(n, -math.inf)        # sender stamp
        self.delivered = np.full(n, -math.inf)   # tick at which receivers took it in

    def deliver(self, rows, position, velocity, u, u_ss, member, rx_time, now, sent=None):
        self.has[rows] = True
        self.member[rows] = member
        self.position[rows] = position
        self.velocity[rows] = velocity
        self.u[rows] = u
        self.u_ss[rows] = u_ss
        self.rx_time[rows] = rx_time
        self.sent[rows] = rx_time if sent is None else sent
        self.delivered[rows] = now


class SwarmControllers:
    """Controller state of N agents (ids ``ids``) as arrays, stepped together."""

    def __init__(self, ids, params: ControllerParams):
        self.ids = np.asarray(ids, dtype=np.int64)
        n = self.ids.size
        self.params = params
        self.index_of = np.full(int(self.ids.max()) + 1, -1, dtype=np.int64)
        self.index_of[self.ids] = np.arange(n)
        self.u = np.zeros(n)
        self.u_ss = np.zeros(n)
        self.pred = np.full(n, NO_NEIGHBOUR, dtype=np.int64)
        self.succ = np.full(n, NO_NEIGHBOUR, dtype=np.int64)
        self.prev_cmd = np.zeros((n, 3))
        self.ring_size = np.zeros(n, dtype=np.int64)  # law.ring_ramp's state
        self.ring_changed = np.full(n, -math.inf)
        self.ring_tick = np.full(n, -math.inf)
        self.seq = np.zeros(n, dtype=np.int64)
        self._live = np.ones(n, dtype=bool)
        self.agents = SharedStates(n)
        self.target_has = np.zeros(n, dtype=bool)
        self.target_rx = np.full(n, -math.inf)
        self.target_position = np.zeros((n, 3))
        self.target_velocity = np.zeros((n, 3))
        self.target_acceleration = np.zeros((n, 3))
        self.target_omega_ref = np.zeros(n)
        self.lambdas = np.ones(n)  # arc weights of the latest target message, by agent index
        self._wide = False  # core.kernels_wide once looked up (None: numpy's)

    def mark_live(self, live: np.ndarray, now: float) -> None:
        """Record which agents are working at tick ``now`` (a failed one listens on)."""
        self._live = live.copy()

    def deliver_agents(self, ids, position, velocity, u, u_ss, member, rx_time, now,
                       sent=None):
        """
        Broadcasts from agents ``ids``, sent at ``sent``, reaching every receiver at ``now``.

        ``member`` (per sender) is False for a failed agent's presence broadcast. One sent
        :func:`neighbours.arrived_late` is aged from its arrival.
        """
        if sent is not None and arrived_late(sent, rx_time, self.params.max_future_stamp):
            sent = rx_time
        self.agents.deliver(self.index_of[np.asarray(ids)], position, velocity, u, u_ss,
                            member, rx_time, now, sent)

    def deliver_target(self, msg, rx_time, receivers: np.ndarray):
        """Deliver a TargetBroadcast to the agents where ``receivers`` (bool, N) is true."""
        self.target_has[receivers] = True
        self.target_rx[receivers] = rx_time
        self.target_position[receivers] = msg.position
        self.target_velocity[receivers] = msg.velocity
        self.target_acceleration[receivers] = msg.acceleration
        self.target_omega_ref[receivers] = msg.omega_ref
        self.lambdas = np.ones(self.ids.size)
        for agent_id, weight in msg.lambdas.items():
            if 0 <= agent_id < self.index_of.size and self.index_of[agent_id] >= 0:
                self.lambdas[self.index_of[agent_id]] = weight

    def known(self, now: float):
        """
        Return what each agent knows of the others at ``now`` (``engines.SwarmEngine.known``).

        Every receiver holds the same states: positions (N, N, 3), counted (N, N) (not its own).
        """
        a, n = self.agents, self.ids.size
        kept = a.has & is_alive(a.rx_time, now, self.params.obstacle_memory)
        counted = np.broadcast_to(kept, (n, n)) & ~np.eye(n, dtype=bool)
        return np.broadcast_to(a.position, (n, n, 3)), counted

    def _column(self, chosen):
        """Return the agent indices of neighbour ids (NO_NEIGHBOUR stays)."""
        return np.where(chosen != NO_NEIGHBOUR, self.index_of[np.maximum(chosen, 0)],
                        NO_NEIGHBOUR)

    def _neighbour(self, chosen, visible, theta_all):
        """Return the NeighbourView rows of the chosen neighbour ids (NO_NEIGHBOUR -> missing)."""
        idx = np.where(chosen != NO_NEIGHBOUR, self.index_of[np.maximum(chosen, 0)], 0)
        ok = (chosen != NO_NEIGHBOUR) & visible(idx)
        a = self.agents
        return NeighbourView(np.where(ok, theta_all[idx], np.nan),
                             np.where(ok[:, None], a.position[idx], np.nan),
                             np.where(ok[:, None], a.velocity[idx], np.nan),
                             np.where(ok, a.u[idx], 0.0), np.where(ok, a.u_ss[idx], 0.0),
                             np.where(ok, chosen, NO_NEIGHBOUR)), idx, ok

    def step(self, live: np.ndarray, positions: np.ndarray, velocities: np.ndarray,
             now: float) -> np.ndarray:
        """``control_step`` for every live agent; the commands (N, 3) (zero rows if failed)."""
        p = self.params
        cmds = np.zeros_like(self.prev_cmd)
        self.seq[live] += 1
        has_target = live & self.target_has & is_alive(self.target_rx, now, p.target_liveness)
        lost = live & ~has_target
        if lost.any():
            last = np.where(self.target_has[lost, None], self.target_velocity[lost], 0.0)
            self.prev_cmd[lost] = cmds[lost] = fallback_command(last, now - self.target_rx[lost],
                                                                positions[lost], p)
        rows = np.flatnonzero(has_target)
        if rows.size == 0:
            return cmds
        target_position = self.target_position[rows]
        target_velocity = self.target_velocity[rows]
        shared_target = target_position[0]
        if not np.array_equal(
            target_position, np.broadcast_to(shared_target, target_position.shape)
        ):
            raise RuntimeError('receivers with a live target disagree on it: the vectorised '
                               'swarm needs no loss and outages longer than the timeouts')
        a = self.agents
        heard = a.has & is_alive(a.rx_time, now, p.agent_timeout)  # a member or a presence
        entry = heard & a.member
        entries = np.flatnonzero(entry)
        theta_all = np.full(self.ids.size, np.nan)
        theta_all[entries] = target_angle(a.position[entries], shared_target)
        own_ids = self.ids[rows]
        theta_self = target_angle(positions[rows], target_position)
        # What each row may use: every entry but its own (its column ``rows``), found by
        # sorting and a k-d tree (core.spatial), never as rows x N arrays.
        ring_size = np.count_nonzero(entry) - entry[rows] + 1  # agents heard, self included
        pred_col, succ_col = select_neighbours_shared(
            entry, theta_all, theta_self, own_ids, self.ids, rows,
            self._column(self.pred[rows]), self._column(self.succ[rows]),
            p.neighbour_hysteresis(ring_size))
        pred = np.where(pred_col != NO_NEIGHBOUR, self.ids[pred_col], NO_NEIGHBOUR)
        succ = np.where(succ_col != NO_NEIGHBOUR, self.ids[succ_col], NO_NEIGHBOUR)

        def visible(idx):
            return entry[idx]

        pred_view, pred_idx, pred_ok = self._neighbour(pred, visible, theta_all)
        succ_view = self._neighbour(succ, visible, theta_all)[0]
        lambda_pred = np.where(pred_ok, self.lambdas[pred_idx], 1.0)
        others = {}
        kept = None  # those heard within obstacle_memory (the d_safe term's, law.crowded's)
        if p.d_safe:  # every other vehicle each row hears, within reach of its d_safe term
            if self._wide is False:  # compiled past the k-d tree's size (smaller: no gain)
                self._wide = compiled_wide() if self.ids.size > SHARED_COLUMNS else None
            kept = a.has & is_alive(a.rx_time, now, p.obstacle_memory)
            silent = kept & ~heard
            discs = but_own(silent, rows)  # silent ones count as discs growing at hold_drift
            others = obstacles_within_reach_shared(
                positions[rows], velocities[rows], p.safety_distance(ring_size), heard, silent,
                rows, a.position, a.velocity, now - a.sent,
                ~a.member if but_own(~a.member & (heard | silent), rows) else None, p,
                now - a.rx_time if discs else None,
                p.usable_uncertainty(ring_size) if discs else None,
                self._wide and self._wide.obstacles_within_reach)
            if others and self._wide:  # the term compiled where numba is (the same values)
                others['separation'] = self._wide.separation_velocity
            if p.knows_obstacles:  # rows x N: only where the ring's radius or turn uses them
                usable = self.ids != own_ids[:, None]
                known = ring_obstacles(kept & ~entry & usable,
                                       np.broadcast_to(a.position, usable.shape + (3,)))
                if known is not None:
                    others = {**others, 'ring_obstacles': known}
        # law.crowded: where the ring's gains are off and (ring_ramp_silent, where the size
        # changed) the ramp restarts, as where a vehicle counted fell silent
        crowd, silent_now = np.zeros(rows.size, dtype=bool), False
        resized = p.ring_ramp_silent and np.any(ring_size != self.ring_size[rows])
        if resized or (p.ring_gains_from and p.d_safe):
            if kept is None:
                kept = a.has & is_alive(a.rx_time, now, p.obstacle_memory)
            crowd = crowded_shared(positions[rows], kept, a.position, rows,
                                   p.safety_distance(ring_size))
            if resized:
                fallen = kept & ~heard
                silent_now = (np.count_nonzero(fallen) - fallen[rows] > 0) | crowd
        weight, changed = ring_ramp(ring_size, self.ring_size[rows], self.ring_changed[rows],
                                    self.ring_tick[rows], now, p, silent_now)
        self.ring_size[rows], self.ring_changed[rows] = ring_size, changed
        self.ring_tick[rows] = now
        steer = 0.0
        if others.get('ring_obstacles') is not None:
            seen = entry & (self.ids != own_ids[:, None])
            steer = gap_steer(theta_self, np.where(seen, theta_all, 0.0), seen,
                              others['ring_obstacles'], target_position, target_velocity, p)
        offset = (ring_offset_shared(theta_self, theta_all, entry, rows) * weight
                  if p.k_e_ring and np.all(self.lambdas == 1.0) else 0.0)
        u_new, u_ss, cmd = law_by_width(dict(
            u=self.u[rows], position=positions[rows], velocity=velocities[rows],
            prev_cmd=self.prev_cmd[rows], target_position=target_position,
            target_velocity=target_velocity,
            omega_ref=np.broadcast_to(self.target_omega_ref[rows] + steer, rows.shape),
            theta_self=theta_self, pred=pred_view, succ=succ_view, lambda_pred=lambda_pred,
            lambda_self=self.lambdas[rows], crowd=crowd, ring_size=ring_size, own_id=own_ids,
            target_acceleration=self.target_acceleration[rows],
            ring_offset=np.broadcast_to(offset, rows.shape), **others), p)
        self.u[rows], self.u_ss[rows] = u_new, u_ss
        self.pred[rows], self.succ[rows] = pred, succ
        self.prev_cmd[rows] = cmds[rows] = cmd
        return cmds
