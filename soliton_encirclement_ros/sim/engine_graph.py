"""
``swarm_sim --engine``: the swarm as arrays in one node, on the same lock-step and clock.

The controllers, vehicles, target and failures are one ``core.swarm_run.SwarmRun`` (the control
tick of ``batch_sim``, with the controller engine asked for: ``per-agent``, ``vectorised``,
``batch`` or ``auto``), stepped by the node ``swarm_sim`` on the simulated clock, one control
tick per period. No agent is a node: there are no per-agent parameters, services or
``cmd_vel`` topics, and nothing crosses DDS between agents.

The node publishes what the node graph's observers read, under the same names, types and
layouts (``interface``): ``/swarm/agent_states`` (every agent's broadcast of each tick, failed
agents' presence), ``/<name>/odom``, ``/target/state``, ``/target/odom``,
``/swarm/metrics/<metric>``, ``/swarm/markers``, ``/diagnostics`` (one status per agent at
1 Hz) and ``/clock``. A topic's messages are built only while something subscribes to it
(a bag, the live view, ``ros2 topic echo``; ``lockstep.Audience``, asked every 0.1 sim-s), so a
run nobody watches costs what ``batch_sim`` does. metrics.csv and agents.csv are streamed into
the output directory as the run goes, and are those ``batch_sim`` writes for the scenario.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from nav_msgs.msg import Odometry
import numpy as np
from rclpy.time import Time
from std_msgs.msg import Float64, Float64MultiArray
from visualization_msgs.msg import MarkerArray

from ros_support.publishing import Publishing
from soliton_encirclement_ros.analysis.report import RunTables
from soliton_encirclement_ros.analysis.stream import DecimatingTrace
from soliton_encirclement_ros.bringup.graph import SwarmPlan
from soliton_encirclement_ros.core.controller import AgentBroadcast
from soliton_encirclement_ros.core.identity import new_incarnation
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.swarm_run import SwarmRun, Tick
from soliton_encirclement_ros.interface import (
    AGENT_ODOM_TOPIC, agent_state_to_msg, AGENT_STATES_TOPIC, DIAGNOSTICS_TOPIC,
    MARKERS_TOPIC, METRICS_TOPIC_PREFIX, RELIABLE, swarm_qos, TARGET_ODOM_TOPIC,
    target_state_to_msg, TARGET_STATE_TOPIC)
from soliton_encirclement_ros.nodes.markers import swarm_markers
from soliton_encirclement_ros.nodes.settings import MetricsSettings
from soliton_encirclement_ros.sim.lockstep import Audience, OUTSIDE_CHECK_NS
from soliton_encirclement_ros.sim.lockstep_graph import LockStepGraph
from velocity_mobility_ros.nodes.messages import fill_odometry, new_odometry, to_odometry

STATUS_PERIOD_NS = 1_000_000_000  # /diagnostics: each agent's status at 1 Hz
WORLD_FRAME = 'world'
MARKER_PERIOD_NS = round(MetricsSettings.marker_period * 1e9)
TRAIL_LENGTH = MetricsSettings.trail_length


class EngineGraph(LockStepGraph):
    """Run ``plan``'s scenario with the controller engine ``engine`` in the node ``swarm_sim``."""

    # Its one node hears nothing over DDS: an executor turn (its parameter services, messages
    # from outside the graph) as often as it asks who listens is enough.
    turn_period_ns = OUTSIDE_CHECK_NS

    def __init__(self, plan: SwarmPlan, engine: str, out_dir: Path, record: str = '',
                 storage: str = 'mcap', live: tuple[str, int] | None = None) -> None:
        self._open_context()
        self._tables = RunTables(out_dir)  # opened with the first row, after the runner cleared
        try:
            self.swarm = SwarmRun(plan.scenario, engine)
            self.radius = plan.scenario.radius
            self.out_dir = Path(out_dir)
            node = self._make_clock_node()
            self._names = plan.names
            self._incarnations = [new_incarnation() for _ in self._names]
            self._area = plan.scenario.area
            reliable = swarm_qos(RELIABLE)
            self._send = Publishing(node.get_logger())  # drops a refused sample
            pub = node.create_publisher
            self._states = Audience([pub(Float64MultiArray, AGENT_STATES_TOPIC, reliable)])
            self._target = Audience([pub(Float64MultiArray, TARGET_STATE_TOPIC,
                                         swarm_qos(RELIABLE, TARGET_STATE_TOPIC))])
            self._target_odom = Audience([pub(Odometry, TARGET_ODOM_TOPIC, 10)])
            self._odom = Audience([pub(Odometry, f'/{name}/{AGENT_ODOM_TOPIC}', 10)
                                   for name in self._names])
            self._odom_msgs = [new_odometry(WORLD_FRAME, f'{name}/base_link')
                               for name in self._names]
            self._metrics = Audience([pub(Float64, METRICS_TOPIC_PREFIX + name, 10)
                                      for name in METRIC_NAMES])
            self._markers = Audience([pub(MarkerArray, MARKERS_TOPIC, 10)])
            self._diagnostics = Audience([pub(DiagnosticArray, DIAGNOSTICS_TOPIC, 10)])
            self._trails: dict = {}
            # Bounded (t, x, y) traces for trajectories.png: every agent's, then the target's.
            self._trace_names = [f'agent {i}' for i in self.swarm.ids.tolist()] + ['target']
            self._traces = [DecimatingTrace() for _ in self._trace_names]
            self._next_markers_ns = self._next_status_ns = 0
            self._start_lock_step(plan.scenario, record, storage, live)
        except BaseException:
            self.close()
            raise

    @property
    def engine(self) -> str:
        return self.swarm.engine

    @property
    def area_margin(self) -> float | None:
        """Return the smallest margin of any agent to the safety area so far [m], if any."""
        return self.swarm.area_margin if self._area is not None else None

    def _before_drain(self) -> None:
        """Run the control tick due at this instant and publish what is listened to."""
        swarm = self.swarm
        now_ns = self.sim_time_ns
        if swarm.index > swarm.ticks or self._tick_ns(swarm.index) > now_ns:
            return
        tick = swarm.tick()
        self._write(tick)
        self._publish(tick, now_ns)
        swarm.advance()

    def _tick_ns(self, index: int) -> int:
        return round(index * self.swarm.period * 1e9)

    def _next_due_ns(self) -> int:
        return self._tick_ns(self.swarm.index)

    def _write(self, tick: Tick) -> None:
        self._tables.add(tick, self.swarm.ids)
        if tick.telemetry:
            xy = np.vstack((tick.positions[:, :2], tick.target.position[:2])).tolist()
            for trace, (x, y) in zip(self._traces, xy):
                trace.append((tick.now, x, y))

    def trajectories(self) -> dict[str, np.ndarray]:
        """Return {name: (T, 3) rows t, x, y} so far, thinned to a bound."""
        return {name: trace.array() for name, trace in zip(self._trace_names, self._traces)}

    def _publish(self, tick: Tick, now_ns: int) -> None:
        stamp = Time(nanoseconds=now_ns).to_msg()
        swarm = self.swarm
        if self._states(now_ns):
            publisher = self._states.publisher
            for i, agent_id in enumerate(swarm.ids.tolist()):
                if tick.silent is not None and tick.silent[i]:
                    continue  # a killed agent: nothing
                self._send(publisher, agent_state_to_msg(AgentBroadcast(
                    agent_id, swarm.index, now_ns, tick.positions[i], tick.velocities[i],
                    float(tick.u[i]), float(tick.u_ss[i]), self._incarnations[i],
                    bool(tick.live[i]))))
        target = tick.target
        if self._target(now_ns):
            self._send(self._target.publisher, target_state_to_msg(
                target.stamp_ns, target.position, target.velocity, target.omega_ref,
                target.lambdas, target.acceleration))
        if self._target_odom(now_ns):
            self._send(self._target_odom.publisher, to_odometry(
                target.position, target.velocity, float(swarm.bodies.yaw[swarm.n]), stamp,
                WORLD_FRAME, 'target/base_link'))
        listened = self._odom(now_ns)
        if listened:
            msgs = [self._odom_msgs[i] for i in listened]
            bodies = swarm.bodies
            fill_odometry(msgs, bodies.position[listened], bodies.velocity[listened],
                          bodies.yaw[listened], stamp, bodies.yaw_rate[listened])
            for i, msg in zip(listened, msgs):
                self._send(self._odom.publishers[i], msg)
        if tick.metrics is not None:
            for i in self._metrics(now_ns):
                self._send(self._metrics.publishers[i], Float64(data=float(tick.metrics[i])))
            if self._markers(now_ns):  # a trail point per metrics tick, as metrics_node keeps
                for agent_id, xy in zip(self.swarm.ids.tolist(), tick.positions[:, :2].tolist()):
                    self._trails.setdefault(agent_id, deque(maxlen=max(TRAIL_LENGTH, 1))).append(
                        tuple(xy))
        if MARKER_PERIOD_NS > 0 and now_ns >= self._next_markers_ns:
            self._next_markers_ns = now_ns + MARKER_PERIOD_NS
            self._publish_markers(tick, now_ns, stamp)
        if now_ns >= self._next_status_ns:
            self._next_status_ns = now_ns + STATUS_PERIOD_NS
            if self._diagnostics(now_ns):
                self._send(self._diagnostics.publisher, self._statuses(tick, stamp))

    def _publish_markers(self, tick: Tick, now_ns: int, stamp) -> None:
        if not self._markers(now_ns):
            return
        agents = {agent_id: (position, live) for agent_id, position, live in zip(
            self.swarm.ids.tolist(), tick.positions, tick.live.tolist())}
        self._send(self._markers.publisher, swarm_markers(
            agents, tick.target.position, self.radius, self._trails, WORLD_FRAME, stamp,
            self._area))

    def _statuses(self, tick: Tick, stamp) -> DiagnosticArray:
        """Return one status per agent: what its node's ``~/status`` would say."""
        statuses = [DiagnosticStatus(
            level=DiagnosticStatus.OK if live else DiagnosticStatus.ERROR,
            name=f'/{name}/agent', hardware_id=name,
            message='ok' if live else 'failed (injected)')
            for name, live in zip(self._names, tick.live.tolist())]
        array = DiagnosticArray(status=statuses)
        array.header.stamp = stamp
        return array

    def write_failures(self) -> list[str]:
        return [*self._tables.failures(), *super().write_failures()]

    def close(self) -> None:
        """Close metrics.csv and agents.csv (whole rows), then the graph; safe to call twice."""
        self._tables.close()
        super().close()
