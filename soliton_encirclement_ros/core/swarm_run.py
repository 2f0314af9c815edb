"""
One run of a scenario, one control tick at a time: target, vehicles, outages and controllers.

The lock-step of ``batch_sim`` (and of ``swarm_sim --engine``), defined once and free of ROS:
every control period P, :meth:`SwarmRun.tick` takes the outages and simulated faults due
(``core.faults``), builds the target's broadcast, asks the engine (``core.engines``) for every
working agent's command, keeps each command inside the safety area, and measures;
:meth:`SwarmRun.advance` then flies target and
vehicles on those commands to the next tick (``round(P / sim_dt)`` mobility steps).
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Optional

import numpy as np

from soliton_encirclement_ros.core.area import limit_clear
from soliton_encirclement_ros.core.controller import seconds_to_ns, TargetBroadcast
from soliton_encirclement_ros.core.engines import choose_engine, ENGINES
from soliton_encirclement_ros.core.faults import fault_plan, SwarmOutages
from soliton_encirclement_ros.core.metrics import compute_metrics
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.target_estimate import estimate_acceleration
from velocity_mobility_ros.core.model import step, VehicleState


@dataclass(frozen=True)
class Tick:
    """What one control tick decided and measured (arrays over the N agents)."""

    index: int
    now: float                      # s of sim time
    live: np.ndarray                # (N,) bool: working agents (neither failed nor killed)
    positions: np.ndarray           # (N, 3) world ENU [m]
    velocities: np.ndarray          # (N, 3) [m/s]
    u: np.ndarray                   # (N,) each controller's u
    u_ss: np.ndarray                # (N,) and its u_ss
    commands: np.ndarray            # (N, 3) desired velocities (zero rows: failed, killed, held)
    target: TargetBroadcast         # the target's broadcast of this tick
    metrics: Optional[tuple]        # compute_metrics of the working agents, on metrics ticks
    telemetry: bool                 # an agents.csv row per working agent is due
    silent: Optional[np.ndarray] = None  # (N,) bool: killed, broadcasting nothing (None: none)


class SwarmRun:
    """Step ``scenario`` with the controller engine ``engine`` (``auto``: see choose_engine)."""

    def __init__(self, scenario: Scenario, engine: str = 'auto') -> None:
        self.scenario = scenario
        self.engine = choose_engine(scenario, engine)
        self.params = scenario.controller_params()
        self.vehicle = scenario.vehicle_params()
        self.n = scenario.agents
        self.period = scenario.control_period
        self.ids = scenario.agent_ids()
        self.bodies = VehicleState.at_rest(np.vstack((scenario.start_positions(),
                                                      scenario.target_start())))
        self._target_model = scenario.target_model()
        self._swarm = ENGINES[self.engine].build(self.ids, self.params, scenario)
        self._outages = SwarmOutages(self.ids, scenario.failures_per_min,
                                     scenario.failure_off_time, scenario.failure_check_period,
                                     scenario.seed)
        self._faults = fault_plan(scenario, self.n, scenario.seed)
        self._steps_per_tick = round(self.period / self.vehicle.sim_dt)
        self.ticks = int(np.floor(scenario.duration / self.period + 1e-9))  # the last index
        self._metrics_every = max(1, round((scenario.metrics_period or self.period)
                                           / self.period))
        self.telemetry_every = max(1, round(scenario.telemetry_period / self.period))
        self.area_margin = math.inf  # the smallest margin of any agent to the safety area [m]
        self._target_estimate = None  # the target's acceleration, as target_node estimates it
        self._v_des = np.zeros((self.n + 1, 3))
        self._last: Optional[Tick] = None
        self.index = 0

    def tick(self) -> Tick:
        """Decide and measure the control tick ``index``; :meth:`advance` flies to the next."""
        k, scenario, n = self.index, self.scenario, self.n
        now = k * self.period
        faults = self._faults.at(now)
        live = ~self._outages.update(now) & ~faults.killed & ~faults.failed
        bodies = self.bodies
        positions, velocities = bodies.position[:n], bodies.velocity[:n]
        target_position, target_velocity = bodies.position[n], bodies.velocity[n]
        self._target_estimate = estimate_acceleration(self._target_estimate, now,
                                                      target_velocity)
        target_msg = TargetBroadcast(seconds_to_ns(now), target_position, target_velocity,
                                     scenario.omega_ref, scenario.lambdas,
                                     self._target_estimate.acceleration)
        cmds, u = self._swarm.tick(now, live, positions, velocities, target_msg,
                                   faults if faults.active else None)
        if faults.held.any():  # a bridge holds its vehicle after a large estimator reset
            cmds = np.where(faults.held[:, None], 0.0, cmds)
        cmds = limit_clear(cmds, positions, velocities, scenario.area, self.params.t_safe,
                           self.params.a_safe, self.period, self._swarm.known,
                           self.params.d_safe)
        if scenario.area is not None:
            self.area_margin = min(self.area_margin,
                                   float(scenario.area.clearance(positions).min()))
        metrics = None
        if k % self._metrics_every == 0:
            metrics = compute_metrics(positions[live], velocities[live], target_position,
                                      target_velocity, scenario.radius)
        self._last = Tick(k, now, live, positions, velocities, np.array(u, dtype=float),
                          np.array(self._swarm.u_ss, dtype=float),
                          np.where(live[:, None], cmds, 0.0), target_msg, metrics,
                          k % self.telemetry_every == 0,
                          faults.killed if faults.killed.any() else None)
        return self._last

    def advance(self) -> None:
        """Fly the target and the vehicles on the last tick's commands to the next tick."""
        tick = self._last
        if tick is None:
            raise RuntimeError('advance() before tick()')
        self._v_des[:self.n] = tick.commands
        self._v_des[self.n] = self._target_model.desired_velocity(tick.now,
                                                                  self.bodies.position[self.n])
        for _ in range(self._steps_per_tick):
            self.bodies = step(self.bodies, self._v_des, self.vehicle)
        self.index += 1
        self._last = None
