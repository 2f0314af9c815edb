"""
A batch-simulator loop from hand-placed starts.

The simulator's own swarm engines (``core.engines.VectorisedSwarm`` / ``PerAgentSwarm``, the agent
node's code path) and mobility model, with the target's velocity and the outages given as functions
of time. For scenarios that ``batch_sim``'s random placement does not produce (a perturbed perfect
ring, crossings).
"""
from typing import Callable, NamedTuple, Optional

import numpy as np

from soliton_encirclement_ros.core.controller import seconds_to_ns, TargetBroadcast
from soliton_encirclement_ros.core.engines import PerAgentSwarm, VectorisedSwarm
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.metrics import compute_metrics
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams


class Run(NamedTuple):
    times: np.ndarray      # (T,) s
    metrics: np.ndarray    # (T, 6) the core.metrics over the live agents
    positions: np.ndarray  # (T, N, 3) agents
    target: np.ndarray     # (T, 3) target position


def run_swarm(start, params: ControllerParams, duration: float,
              target_velocity: Callable[[float], np.ndarray] = lambda t: np.zeros(3),
              down: Optional[Callable[[float], np.ndarray]] = None,
              engine: str = 'vectorised') -> Run:
    """
    Step agents from ``start`` (N, 3) at rest around a target at rest at the origin.

    They step every ``params.control_period``, for ``duration`` s; ``down(t)`` (N bool) marks
    failed agents.
    """
    start = np.asarray(start, dtype=float)
    n, period = len(start), params.control_period
    vehicle = VehicleParams()
    ids = np.arange(1, n + 1)
    swarm = (VectorisedSwarm(ids, params, 0.0) if engine == 'vectorised'
             else PerAgentSwarm(ids, params, 0.0, 0.0, 0))
    bodies = VehicleState.at_rest(np.vstack((start, np.zeros(3))))
    v_des = np.zeros((n + 1, 3))
    times, metrics, positions, target = [], [], [], []
    for k in range(int(round(duration / period)) + 1):
        now = k * period
        live = np.ones(n, dtype=bool) if down is None else ~np.asarray(down(now))
        p, v = bodies.position[:n], bodies.velocity[:n]
        cmds, _ = swarm.tick(now, live, p, v,
                             TargetBroadcast(seconds_to_ns(now), bodies.position[n],
                                             bodies.velocity[n]))
        times.append(now)
        metrics.append(compute_metrics(p[live], v[live], bodies.position[n], bodies.velocity[n],
                                       params.radius))
        positions.append(p.copy())
        target.append(bodies.position[n].copy())
        v_des[:n] = np.where(live[:, None], cmds, 0.0)
        v_des[n] = target_velocity(now)
        for _ in range(round(period / vehicle.sim_dt)):
            bodies = step(bodies, v_des, vehicle)
    return Run(np.array(times), np.array(metrics), np.array(positions), np.array(target))


def ring(n: int, radius: float = 20.0, phase=0.0) -> np.ndarray:
    """``n`` agents evenly on the circle (``phase`` [rad], scalar or per agent)."""
    theta = np.asarray(phase) + 2 * np.pi * np.arange(n) / n
    return np.column_stack((radius * np.cos(theta), radius * np.sin(theta), np.zeros(n)))
