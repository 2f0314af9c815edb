"""
Failure injection: a per-agent Poisson outage process with a seeded RNG, and simulated faults.

Every ``check_period`` s a working agent fails with probability ``1 - exp(-lambda*dt)``,
``lambda = failures_per_min/60``; a failed agent recovers ``off_time`` s after failing and
draws nothing while failed (nor at the check where it comes back). The agent node uses one
:class:`OutageProcess`; the batch
simulator uses :class:`SwarmOutages` (one process per agent, same seeds, same draws), so a
ROS run and a batch run with the same seed fail the same agents at the same times.

:class:`SimulatedFaults` are the faults a real flight meets that no agent announces, for the
simulators (``batch_sim``, ``swarm_sim --engine``, the sweep and the separation benchmark):
agent processes killed (silent), an estimator reset (a jump of the broadcast position with its
uncertainty, the vehicle held where it is) and a companion's clock stepping ahead. Each run
draws which agents they strike from its seed (:func:`fault_plan`); every engine models them
(``core.engines``, ``core.batch_engine``).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Optional, Sequence

import numpy as np

from ros_support.settings import setting
from ros_support.validation import bounded

FAULT_STREAM = 1  # RNG stream id of the outage process (see seed_sequence)
FAULT_PICK_STREAM = 3  # RNG stream id of which agents the simulated faults strike
# A PX4 bridge holds its vehicle after an estimator reset larger than this (its max_reset_jump
# default); a smaller one it flies on, on the new estimate (after reset_hold).
RESET_HOLD_JUMP = 2.0


@dataclass(frozen=True)
class Impairments:
    """
    A run's injected failures and link impairments, defined once for a scenario and an agent.

    ``Scenario`` and ``agent_node``'s settings inherit these fields, so each is one scenario
    field, one ``--option``, one sweep grid name and one agent parameter, with one description,
    unit and rule; the graph passes every one of them to the agents.
    """

    failures_per_min: float = setting(0.0, 'Poisson rate of injected outages per agent', '1/min',
                                      0.0)
    failure_off_time: float = setting(8.0, 'length of an injected outage', 's', 0.0)
    failure_check_period: float = setting(0.1, 'period of the failure draw', 's', 1e-3)
    loss: float = setting(0.0, 'probability that a received swarm or target message is lost',
                          low=0.0, high=1.0, high_strict=True, rule='a probability in [0, 1)')
    delay: float = setting(0.0, 'delay of every swarm and target message', 's', 0.0)


def seed_sequence(seed: Optional[int], agent_id: int, stream: int):
    """Seed material for agent ``agent_id``'s RNG of a given stream (None = unseeded)."""
    return None if seed is None else [int(seed), int(agent_id), int(stream)]


class OutageProcess:
    """
    One agent's outage process.

    ``update(now)`` advances it and returns ``failed``.
    """

    def __init__(self, failures_per_min: float = 1.0, off_time: float = 8.0,
                 check_period: float = 0.1, seed: Optional[int] = None, agent_id: int = 0):
        self.failures_per_min = bounded('failures_per_min', failures_per_min, 0.0)
        self.off_time = bounded('off_time', off_time, 0.0)
        self.check_period = bounded('check_period', check_period, 0.0, strict=True)
        self.probability = 1.0 - math.exp(-self.failures_per_min / 60.0 * self.check_period)
        self._rng = np.random.default_rng(seed_sequence(seed, agent_id, FAULT_STREAM))
        self._origin = None       # checks run at origin + k*check_period, k = 1, 2, ...
        self._checks = 0          # checks done so far
        self.failed = False
        self.failed_at = math.nan

    def update(self, now: float) -> bool:
        """
        Run the checks due up to ``now`` (non-decreasing); return whether the agent is failed.

        The check grid starts at the multiple of ``check_period`` at or before the first ``now``:
        0 for a simulation (as in the batch simulator), the start time on a wall clock.
        """
        if self._origin is None:
            self._origin = math.floor(now / self.check_period + 1e-9) * self.check_period
        while self._origin + (self._checks + 1) * self.check_period <= now + 1e-9:
            self._checks += 1
            check_time = self._origin + self._checks * self.check_period
            if self.failed:
                if check_time >= self.failed_at + self.off_time - 1e-9:
                    self.failed = False  # back; the next check may fail it again
            elif self.probability > 0.0 and self._rng.random() < self.probability:
                self.failed = True
                self.failed_at = check_time
        return self.failed


class SwarmOutages:
    """
    The outage processes of many agents, stepped together.

    ``update(now) -> failed (N,)``.
    """

    def __init__(self, agent_ids: Sequence[int], failures_per_min: float = 1.0,
                 off_time: float = 8.0, check_period: float = 0.1,
                 seed: Optional[int] = None):
        self.processes = [OutageProcess(failures_per_min, off_time, check_period, seed, i)
                          for i in agent_ids]
        self.enabled = failures_per_min > 0.0
        self.failed = np.zeros(len(self.processes), dtype=bool)

    def update(self, now: float) -> np.ndarray:
        if self.enabled:
            self.failed = np.fromiter((p.update(now) for p in self.processes), dtype=bool,
                                      count=len(self.processes))
        return self.failed


@dataclass(frozen=True)
class SimulatedFaults:
    """
    Faults that no agent announces, for the simulators: the scenario fields of each.

    Every one strikes at ``fault_time``; which agents, and the reset's direction, are drawn
    from the run's seed (:func:`fault_plan`), each agent struck by one fault at most.
    """

    silent_failures: int = setting(0, 'agents whose process is killed at fault_time: silent '
                                   'from then (no state, no presence), their vehicles holding '
                                   'where they are (the bridge or the mobility node holds a '
                                   'vehicle whose cmd_vel stops)', low=0)
    failed_agents: int = setting(0, 'agents whose controller fails at fault_time for good: '
                                 "each commands zero once and broadcasts its vehicle's "
                                 'presence (an obstacle, no ring member) while the vehicle '
                                 'brakes to a hover where it failed', low=0)
    reset_jump: float = setting(0.0, "an estimator reset of one agent's position at fault_time: "
                                'its estimate (what it broadcasts and flies on) jumps this far, '
                                'in a direction drawn from the seed, with that much '
                                'uncertainty; its vehicle stays where it is, held beyond 2 m '
                                "(a PX4 bridge's max_reset_jump); 0 = none", 'm', low=0.0)
    clock_step: float = setting(0.0, "one agent's clock steps this far ahead at fault_time (a "
                                "companion's clock): beyond max_future_stamp, the others "
                                'receive its states stamped in their future; 0 = none', 's',
                                low=0.0)
    fault_time: float = setting(20.0, 'when the simulated faults (silent_failures, '
                                'failed_agents, reset_jump, clock_step) strike', 's', low=0.0)

    @property
    def simulated_faults(self) -> bool:
        """Whether any simulated fault strikes."""
        return bool(self.silent_failures or self.failed_agents or self.reset_jump
                    or self.clock_step)


@dataclass(frozen=True)
class FaultPlan:
    """
    Which agents (by index) one run's simulated faults strike, from ``time`` on.

    ``killed`` (N,) silent from then; ``shift`` (N, 3) added to the position an agent
    broadcasts and flies on (its estimate), with ``uncertainty`` (N,); ``held`` (N,) vehicles
    held where they are (a reset beyond :data:`RESET_HOLD_JUMP`); ``clock`` (N,) the offset of
    each agent's clock [s]; ``failed`` (N,) controllers out from then (their vehicles' presence
    broadcast: the simulators take them out of ``live``).
    """

    time: float
    killed: np.ndarray
    shift: np.ndarray
    uncertainty: np.ndarray
    held: np.ndarray
    clock: np.ndarray
    failed: np.ndarray

    def at(self, now: float) -> 'FaultPlan':
        """Return the faults in effect at ``now``: this plan from ``time`` on, else none."""
        return self if now >= self.time - 1e-9 else no_faults(self.killed.size, self.time)

    @property
    def active(self) -> bool:
        """Whether any fault is in this plan."""
        return bool(self.killed.any() or self.uncertainty.any() or self.clock.any())


def no_faults(n: int, time: float = math.inf) -> FaultPlan:
    """Return the plan of a run of ``n`` agents without simulated faults."""
    return FaultPlan(time, np.zeros(n, dtype=bool), np.zeros((n, 3)), np.zeros(n),
                     np.zeros(n, dtype=bool), np.zeros(n), np.zeros(n, dtype=bool))


def fault_plan(faults: SimulatedFaults, n: int, seed: Optional[int]) -> FaultPlan:
    """
    Return which of ``n`` agents the simulated ``faults`` strike, drawn from ``seed``.

    One permutation of the agents: the first ``silent_failures`` are killed, the next is reset
    (in a uniform direction), the one after that has its clock stepped, the next
    ``failed_agents`` fail; an agent count too small for all leaves the later ones out.
    """
    plan = no_faults(n, faults.fault_time)
    if not faults.simulated_faults:
        return plan
    rng = np.random.default_rng(seed_sequence(seed, 0, FAULT_PICK_STREAM))
    order = rng.permutation(n)
    heading = rng.uniform(0.0, 2.0 * math.pi)
    killed = order[:min(faults.silent_failures, n)]
    rest = list(order[killed.size:])
    plan.killed[killed] = True
    if faults.reset_jump and rest:
        k = rest.pop(0)
        plan.shift[k, :2] = faults.reset_jump * np.array([math.cos(heading), math.sin(heading)])
        plan.uncertainty[k] = faults.reset_jump
        plan.held[k] = faults.reset_jump > RESET_HOLD_JUMP
    if faults.clock_step and rest:
        plan.clock[rest.pop(0)] = faults.clock_step
    plan.failed[rest[:faults.failed_agents]] = True
    return plan
