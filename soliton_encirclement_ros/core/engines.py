"""
The swarm controller engines behind one registry: every tick of N agents' controllers.

An engine takes each control tick's working agents, their odometry and the target's broadcast,
delivers what is due, sends this tick's broadcasts and returns every command. They run the
same law (``law.encirclement_step``) and the same neighbour selection
(``neighbours.select_neighbours``); they differ in how they hold what each agent received:

- ``per-agent``: one ``controller.control_step`` and one ``ImpairedChannel`` per agent, the
  agent node's own code path (the reference);
- ``vectorised``: ``swarm.SwarmControllers``, one shared copy of the latest broadcasts, O(N)
  memory; exact only where every receiver hears the same (:func:`swarm.vectorisable`);
- ``batch``: ``batch_engine.BatchControllers`` for one run, receiver x sender arrays, exact
  everywhere (loss, delay, outages), O(N^2) memory; the sweep steps R runs with it at once.

``test/acceptance/test_engines_acceptance.py`` runs every registered engine over one fixed set of
scenarios and checks it against the reference, the way Gymnasium checks every registered
environment. An engine registered here is picked up by ``batch_sim --engine`` and that test.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
import math
from typing import Callable, Optional, Protocol

import numpy as np

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.batch_engine import BatchControllers, stack_plans
from soliton_encirclement_ros.core.comms import ImpairedChannel, TIME_EPS
from soliton_encirclement_ros.core.controller import (
    AgentStates, ahead_as_presence, control_step, initial_state, known_vehicles, outgoing_state,
    presence_state, receive_states, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.faults import FaultPlan
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.swarm import SwarmControllers, vectorisable


class SwarmEngine(Protocol):
    """What an engine does each control tick: deliveries, broadcasts, then every command."""

    def tick(self, now: float, live: np.ndarray, positions: np.ndarray,
             velocities: np.ndarray, target_msg: TargetBroadcast,
             faults: Optional[FaultPlan] = None) -> tuple[np.ndarray, np.ndarray]:
        """
        Return the commands (N, 3) of the working agents (zero rows if failed) and u (N,).

        ``faults``: the simulated faults in effect (``faults.FaultPlan.at(now)``; None: none):
        killed agents neither broadcast nor hear (``live`` is False for them), a reset agent
        broadcasts and flies on its shifted estimate with its uncertainty, and an agent whose
        clock stepped stamps, receives and ticks on its own clock; a state stamped beyond
        ``max_future_stamp`` ahead of a receiver's clock is kept as a presence
        (``controller.ahead_as_presence``).
        """

    @property
    def u_ss(self) -> np.ndarray:
        """Return the u_ss of every agent after the last tick: what each broadcasts with u."""

    def known(self) -> tuple[np.ndarray, np.ndarray]:
        """
        Return what each agent knows of the others after the last tick, by agent index.

        (positions (N, N, 3), NaN where none; counted (N, N): those its ``d_safe`` term keeps,
        ``controller.known_vehicles``): ``area.limit_clear``'s ``known``.
        """


class PerAgentSwarm:
    """One ControllerState and one receive channel per agent: the agent node's code path."""

    def __init__(self, ids, params, loss: float, delay: float, seed: Optional[int]):
        self.ids = np.asarray(ids)
        self.params = params
        self.states = [initial_state(i) for i in self.ids]
        self.channels = [ImpairedChannel(loss, delay, seed, i) for i in self.ids]
        self._clocks = np.zeros(self.ids.size)  # each agent's own clock at the last tick
        self._column = {int(i): k for k, i in enumerate(self.ids)}

    def tick(self, now, live, positions, velocities, target_msg, faults=None):
        if faults is not None and faults.active:
            return self._tick_faults(now, live, positions, velocities, target_msg, faults)
        self._clocks[:] = now
        for i, channel in enumerate(self.channels):
            due = channel.due(now)
            if due:  # a failed agent listens too
                self.states[i] = receive_states(self.states[i], due, self.params)
        outgoing = []  # in id order: live agents' states, failed agents' presence
        for j in range(self.ids.size):
            if live[j]:
                outgoing.append(outgoing_state(self.states[j], positions[j], velocities[j], now))
            else:
                self.states[j], presence = presence_state(self.states[j], positions[j],
                                                          velocities[j], now)
                outgoing.append(presence)
        for i, channel in enumerate(self.channels):
            channel.receive(target_msg, now)
            for msg in outgoing:
                if msg.agent_id != self.ids[i]:
                    channel.receive(msg, now)
        cmds = np.zeros((self.ids.size, 3))
        for i in np.flatnonzero(live):
            self.states[i], cmds[i] = control_step(self.states[i], positions[i], velocities[i],
                                                   now, self.params)
        return cmds, np.array([s.u for s in self.states])

    def _tick_faults(self, now, live, positions, velocities, target_msg, faults):
        """:meth:`tick` with simulated faults: each agent on its own clock and estimate."""
        clocks = now + faults.clock                 # each agent's own clock
        self._clocks[:] = clocks
        estimates = positions + faults.shift        # where each believes it is
        heard = ~faults.killed
        for i, channel in enumerate(self.channels):
            if not heard[i]:
                continue
            due = channel.due(float(clocks[i]))
            if due:
                self.states[i] = receive_states(self.states[i], due, self.params)
        outgoing = []
        for j in np.flatnonzero(heard):
            if live[j]:
                outgoing.append(outgoing_state(self.states[j], estimates[j], velocities[j],
                                               float(clocks[j]), float(faults.uncertainty[j])))
            else:
                self.states[j], presence = presence_state(
                    self.states[j], estimates[j], velocities[j], float(clocks[j]),
                    float(faults.uncertainty[j]))
                outgoing.append(presence)
        for i, channel in enumerate(self.channels):
            if not heard[i]:
                continue
            local = float(clocks[i])
            channel.receive(target_msg, local)
            for msg in outgoing:
                if msg.agent_id == self.ids[i]:
                    continue
                if msg.stamp - local > self.params.max_future_stamp:  # kept as a presence
                    msg = ahead_as_presence(AgentStates.of((msg,)), seconds_to_ns(local),
                                            self.params)[0][0]
                channel.receive(msg, local)
        cmds = np.zeros((self.ids.size, 3))
        for i in np.flatnonzero(live & heard):
            self.states[i], cmds[i] = control_step(
                self.states[i], estimates[i], velocities[i], float(clocks[i]), self.params,
                float(faults.uncertainty[i]))
        return cmds, np.array([s.u for s in self.states])

    @property
    def u_ss(self) -> np.ndarray:
        return np.array([s.u_ss for s in self.states])

    def known(self):
        n = self.ids.size
        positions, counted = np.full((n, n, 3), np.nan), np.zeros((n, n), dtype=bool)
        for i, state in enumerate(self.states):
            ids, position, kept = known_vehicles(state, float(self._clocks[i]), self.params)
            for row, agent in enumerate(ids.tolist()):
                column = self._column.get(agent)
                if column is not None:
                    positions[i, column], counted[i, column] = position[row], kept[row]
        return positions, counted


class VectorisedSwarm:
    """All agents' controllers as arrays; broadcasts reach every receiver after ``delay``."""

    def __init__(self, ids, params, delay: float):
        self.controllers = SwarmControllers(ids, params)
        self.delay = delay
        self._in_flight: deque = deque()
        self._now = math.nan  # the last tick's clock (NaN before the first: known() counts none)

    def tick(self, now, live, positions, velocities, target_msg, faults=None):
        if faults is not None and faults.active:
            raise ValueError('the vectorised engine models no simulated faults')
        c = self.controllers
        c.mark_live(live, now)
        while self._in_flight and self._in_flight[0][0] <= now + TIME_EPS:
            arrival, target, agents = self._in_flight.popleft()
            c.deliver_target(target, arrival, np.ones(live.shape, dtype=bool))
            c.deliver_agents(*agents, rx_time=arrival, now=now, sent=arrival - self.delay)
        self._in_flight.append((now + self.delay, target_msg,  # failed agents: presence
                                (c.ids, positions.copy(), velocities.copy(), c.u.copy(),
                                 c.u_ss.copy(), live.copy())))
        self._now = now
        return c.step(live, positions, velocities, now), c.u

    @property
    def u_ss(self) -> np.ndarray:
        return self.controllers.u_ss

    def known(self):
        return self.controllers.known(self._now)


class BatchSwarm:
    """``BatchControllers`` of one run: every receiver's own copy, exact with loss and outages."""

    def __init__(self, ids, scenario: Scenario):
        self.controllers = BatchControllers([scenario], np.asarray(ids, dtype=np.int64))
        self._now, self._faults = math.nan, None  # the last tick's (NaN: known() counts none)

    def tick(self, now, live, positions, velocities, target_msg, faults=None):
        self._now = now
        self._faults = None if faults is None or not faults.active else stack_plans([faults])
        cmds, u = self.controllers.tick(
            now, live[None], positions[None], velocities[None],
            np.asarray(target_msg.position, dtype=float)[None],
            np.asarray(target_msg.velocity, dtype=float)[None],
            np.asarray(target_msg.acceleration, dtype=float)[None], self._faults)
        return cmds[0], u[0]

    @property
    def u_ss(self) -> np.ndarray:
        return self.controllers.u_ss[0]

    def known(self):
        positions, counted = self.controllers.known(self._now, self._faults)
        return positions[0], counted[0]


@dataclass(frozen=True)
class EngineSpec:
    """One registered engine: how to build it and where it reproduces the reference."""

    build: Callable[..., SwarmEngine]    # (agent ids, ControllerParams, Scenario) -> engine
    exact: Callable[[Scenario], bool]    # equals the per-agent path on this scenario
    summary: str


def _vectorisable(scenario: Scenario) -> bool:
    return not scenario.simulated_faults and vectorisable(
        scenario.controller_params(), scenario.loss, scenario.delay, scenario.failures_per_min,
        scenario.failure_off_time)


# The one registry of engines, by name; the first is the reference.
ENGINES: dict[str, EngineSpec] = {
    'per-agent': EngineSpec(
        lambda ids, params, scenario: PerAgentSwarm(ids, params, scenario.loss,
                                                    scenario.delay, scenario.seed),
        lambda scenario: True, "the agent node's controller, one agent at a time"),
    'vectorised': EngineSpec(
        lambda ids, params, scenario: VectorisedSwarm(ids, params, scenario.delay),
        _vectorisable, 'shared latest broadcasts, O(N) memory: no loss, no simulated faults'),
    'batch': EngineSpec(
        lambda ids, params, scenario: BatchSwarm(ids, scenario),
        lambda scenario: True, "each receiver's own copy, O(N^2) memory: the sweep's engine"),
}
REFERENCE = 'per-agent'
# auto's batch engine up to this many agents: its receiver x sender arrays grow with N^2, the
# vectorised engine's sort and k-d tree do not (and the kernel's d_safe term stops at 16).
AUTO_BATCH_AGENTS = 16
# What a user may ask for (batch_sim --engine, swarm_sim --engine): auto, then every engine.
ENGINE_CHOICES = ('auto', *ENGINES)


def choose_engine(scenario: Scenario, engine: str = 'auto') -> str:
    """
    Return the engine to use; ``auto``: the fastest that is exact on ``scenario``.

    That is ``batch`` where the vectorised engine is exact and the batch engine's tick runs
    compiled on every row (:func:`compiled.compiles_whole`: numba installed, the law's every
    term compiled) for up to ``AUTO_BATCH_AGENTS``: its values are the same, at about a third
    of the vectorised engine's CPU for N = 10. Else ``vectorised`` where exact, else
    ``per-agent``. Asking for an engine that is not exact on ``scenario`` is an error (one
    line).
    """
    if engine != 'auto' and engine not in ENGINES:
        raise ValueError(f'engine must be one of auto, {", ".join(ENGINES)}, got {engine!r}')
    if engine == 'auto':
        if not ENGINES['vectorised'].exact(scenario):
            return REFERENCE
        if (scenario.agents <= AUTO_BATCH_AGENTS
                and compiled.compiles_whole(scenario.controller_params(), scenario.agents)):
            return 'batch'
        return 'vectorised'
    if not ENGINES[engine].exact(scenario):
        raise ValueError(f'engine {engine} needs loss 0 and no simulated faults '
                         '(silent_failures, reset_jump, clock_step); use auto, per-agent or '
                         'batch')
    return engine
