"""
What a swarm size will cost, said before anything is built (no rclpy).

Every agent hears every other: the batch and per-agent engines hold what each receiver heard
of each sender, so their memory and time grow with the square of the number of agents N; the
vectorised engine holds one shared copy (its fit has no per-pair memory); a node graph adds a
node (or a process) per agent. :data:`COSTS` holds, per
way of running, the figures ``benchmarks/bench_sizes.py`` measured (its
``benchmarks/results/sizes.json``)::

    peak memory        = base + per_agent * N + per_pair * N^2   (+ batch_sim's telemetry)
    CPU time per tick  = tick_per_agent * N + tick_per_pair * N^2

:func:`size_problem` refuses a run that cannot fit in :data:`MEMORY_MARGIN` of the memory
available now (one line naming ``--agents``, the value, the rule and the largest N that fits);
:func:`size_note` says what a big run will cost before it is built.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from pathlib import Path

from soliton_encirclement_ros.core.scenario import Scenario

BENCHMARK = 'benchmarks/bench_sizes.py'
# A run is announced (memory and time, one line) from this much memory or time on.
NOTE_MEMORY = 1 << 30   # bytes
NOTE_SECONDS = 600.0    # s of CPU time
MEMORY_MARGIN = 0.9     # the share of the available memory a run may plan to take
ENGINE_NOTE_SLOWDOWN = 2.0  # the node graph's CPU s per sim s from which --engine auto is named
TELEMETRY_ROW = 32 * 2  # bytes per agent per telemetry row batch_sim keeps (and copies once)


@dataclass(frozen=True)
class Cost:
    """One way of running N agents: its memory and CPU time per control tick (see the module)."""

    base: float            # bytes
    per_agent: float       # bytes per agent
    per_pair: float        # bytes per agent pair
    tick_per_agent: float  # CPU s per control tick and agent
    tick_per_pair: float   # CPU s per control tick and agent pair

    def memory(self, n: int) -> float:
        return self.base + self.per_agent * n + self.per_pair * n * n

    def tick(self, n: int) -> float:
        return self.tick_per_agent * n + self.tick_per_pair * n * n


# Measured by benchmarks/bench_sizes.py (benchmarks/results/sizes.json; test_sizes.py keeps
# them equal): batch_sim's engines, swarm_sim's node graph in one process ('nodes') and its
# --processes (memory per node process).
COSTS = {
    'vectorised': Cost(2.132e+08, 1.357e+04, 0, 3.418e-05, 1.335e-08),
    'per-agent': Cost(4.634e+07, 1.933e+04, 67.72, 0.001395, 1.916e-07),
    'batch': Cost(2.171e+08, 860.2, 267.9, 7.208e-05, 3.266e-08),
    'nodes': Cost(9.919e+07, 2.045e+06, 2449, 0.0009642, 0),
    'processes': Cost(3.336e+08, 9.747e+07, 0, 0.0193, 0),
}


# swarm_sim --engine auto against the node graph, measured by benchmarks/bench_swarm_sim.py
# (benchmarks/results/swarm_sim.json and swarm_sim_auto.json, case n100: the control loop's
# sim-s per CPU-s, observers' topics included; test_sizes.py keeps them equal): (N, nodes, auto).
AUTO_MEASURED = (100, 0.13, 2.63)
AUTO_BENCHMARK = 'benchmarks/bench_swarm_sim.py'


@dataclass(frozen=True)
class Estimate:
    """What one run will take: ``memory`` [bytes] and ``seconds`` of CPU time."""

    agents: int
    duration: float
    mode: str
    memory: float
    seconds: float


def telemetry_rows(scenario: Scenario) -> int:
    """Return how many telemetry rows per agent a run keeps (batch_sim keeps them in memory)."""
    return int(scenario.duration / scenario.telemetry_period) + 1


def estimate(scenario: Scenario, mode: str, telemetry_in_memory: bool = False) -> Estimate:
    """
    Return what ``scenario`` will cost run in ``mode`` (a key of :data:`COSTS`).

    ``telemetry_in_memory``: the per-agent rows are kept until the end (batch_sim), not
    streamed to disk (swarm_sim).
    """
    cost, n = COSTS[mode], scenario.agents
    memory = cost.memory(n)
    if telemetry_in_memory:
        memory += TELEMETRY_ROW * n * telemetry_rows(scenario)
    ticks = scenario.duration / scenario.control_period
    return Estimate(n, scenario.duration, mode, memory, cost.tick(n) * ticks)


def largest_fit(scenario: Scenario, mode: str, budget: float,
                telemetry_in_memory: bool = False) -> int:
    """Return the most agents whose run of ``scenario`` in ``mode`` fits in ``budget`` bytes."""
    cost = COSTS[mode]
    linear = cost.per_agent + (TELEMETRY_ROW * telemetry_rows(scenario)
                               if telemetry_in_memory else 0.0)
    room = budget - cost.base
    if room <= 0:
        return 0
    if cost.per_pair > 0:
        n = (-linear + math.sqrt(linear * linear + 4 * cost.per_pair * room)) / (2 * cost.per_pair)
    else:
        n = room / linear if linear > 0 else math.inf
    return int(n) if math.isfinite(n) else 10 ** 12


def available_memory() -> float | None:
    """
    Return the memory this process may still take [bytes], or None when unknown.

    The kernel's ``MemAvailable``, and a cgroup's limit (a container) when lower.
    """
    found = []
    try:
        for line in Path('/proc/meminfo').read_text().splitlines():
            if line.startswith('MemAvailable:'):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path('/sys/fs/cgroup/memory.max').read_text().strip()
        used = int(Path('/sys/fs/cgroup/memory.current').read_text())
        if limit != 'max':
            found.append(int(limit) - used)
    except (OSError, ValueError):
        pass
    return float(min(found)) if found else None


def size_problem(scenario: Scenario, mode: str, telemetry_in_memory: bool = False,
                 available: float | None = None, name: str = '--agents') -> str | None:
    """
    One line refusing ``scenario`` when it cannot fit in the memory available, else None.

    ``available`` [bytes] defaults to :func:`available_memory` (None: nothing is refused). A
    run may plan to take :data:`MEMORY_MARGIN` of it; the line says so, and names ``name``
    (the option or argument that set the number of agents) with its value.
    """
    available = available_memory() if available is None else available
    if available is None:
        return None
    needed = estimate(scenario, mode, telemetry_in_memory)
    budget = MEMORY_MARGIN * available
    if needed.memory <= budget:
        return None
    fit = largest_fit(scenario, mode, budget, telemetry_in_memory)
    digits = next((d for d in range(1, 7) if _bytes(needed.memory, d) != _bytes(budget, d)),
                  6)  # just past: as many digits as show how far
    return (f'{name} {scenario.agents} needs about {_bytes(needed.memory, digits)} of memory '
            f'({_way(mode)}), more than the {_bytes(budget, digits)} a run may take here '
            f'({MEMORY_MARGIN:.0%} of the {_bytes(available)} available): at most about '
            f'{fit} agents fit (estimate from {BENCHMARK})')


def batch_size_problem(scenario: Scenario, engine: str = 'auto', name: str = '--agents',
                       available: float | None = None) -> str | None:
    """
    :func:`size_problem` of one ``batch_sim`` run of ``scenario`` with ``engine``, or None.

    The check of ``batch_sim`` (the engine ``auto`` picks; its telemetry kept in memory), and
    of every grid point of a sweep, whose large runs go through ``batch_sim``'s ``simulate``.
    """
    from soliton_encirclement_ros.core.engines import choose_engine
    return size_problem(scenario, choose_engine(scenario, engine), telemetry_in_memory=True,
                        available=available, name=name)


def size_note(scenario: Scenario, mode: str, telemetry_in_memory: bool = False) -> str | None:
    """One line saying what a big run will cost (memory, CPU time), or None for a small one."""
    needed = estimate(scenario, mode, telemetry_in_memory)
    if needed.memory < NOTE_MEMORY and needed.seconds < NOTE_SECONDS:
        return None
    return (f'{scenario.agents} agents for {scenario.duration:g} s ({_way(mode)}): about '
            f'{_bytes(needed.memory)} of memory and {_duration(needed.seconds)} of CPU time '
            f'(estimate from {BENCHMARK}); Ctrl-C stops it')


def engine_note(scenario: Scenario, mode: str) -> str | None:
    """
    One line when the node graph will run slower than real time, pointing at ``--engine auto``.

    None for another ``mode`` or a graph that keeps up. The node graph costs a node per agent a
    tick; ``--engine auto`` runs the same controllers as arrays (its vectorised engine).
    """
    if mode != 'nodes':
        return None
    per_sim_second = COSTS['nodes'].tick(scenario.agents) / scenario.control_period
    if per_sim_second < ENGINE_NOTE_SLOWDOWN:
        return None
    n, nodes, auto = AUTO_MEASURED
    return (f'{scenario.agents} agents on the node graph (one node per agent) run about '
            f'{per_sim_second:.0f}x slower than real time (estimate from {BENCHMARK}); '
            f'--engine auto flies the same controllers as arrays, with the same topics for the '
            f'observers but no per-agent nodes: {auto / nodes:.0f}x the sim-s per CPU-s of the '
            f'node graph at N = {n} (measured by {AUTO_BENCHMARK})')


def _way(mode: str) -> str:
    return {'nodes': 'one node per agent', 'processes': 'one process per node'}.get(
        mode, f'engine {mode}')


def _bytes(value: float, digits: int = 1) -> str:
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'):
        if value < 1024 or unit == 'PiB':
            return f'{value:.0f} {unit}' if unit == 'B' else f'{value:.{digits}f} {unit}'
        value /= 1024
    return f'{value:.{digits}f} PiB'


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f'{seconds:.0f} s'
    if seconds < 5400:
        return f'{seconds / 60:.0f} min'
    if seconds < 48 * 3600:
        return f'{seconds / 3600:.1f} h'
    return f'{seconds / 86400:.0f} days'
