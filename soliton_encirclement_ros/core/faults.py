"""
Failure injection: a per-agent Poisson outage process with a seeded RNG.

Every ``check_period`` s a working agent fails with probability ``1 - exp(-lambda*dt)``,
``lambda = failures_per_min/60``; a failed agent recovers ``off_time`` s after failing and
draws nothing while failed (nor at the check where it comes back). The agent node uses one
:class:`OutageProcess`; the batch
simulator uses :class:`SwarmOutages` (one process per agent, same seeds, same draws), so a
ROS run and a batch run with the same seed fail the same agents at the same times.
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Optional, Sequence

import numpy as np

from ros_support.settings import setting
from ros_support.validation import bounded

FAULT_STREAM = 1  # RNG stream id of the outage process (see seed_sequence)


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
