"""
metrics_node: the encirclement metrics (METRIC_NAMES) from the swarm's broadcasts, live.

Listens to ``/swarm/agent_states`` and ``/target/state``; every ``metrics_period`` it computes
E_r, E_vr, rho, G_max, E_gap and d_min over the live agents (``core.metrics``) and publishes
each on ``/swarm/metrics/<name>`` (std_msgs/Float64, plottable as is). It also publishes RViz
markers on ``/swarm/markers``. ``metrics.csv`` and ``agents.csv`` are streamed into
``output_dir`` as the run goes (flushed every second, readable at any moment); plots and
``summary.json`` are added on shutdown, while a ``.writing`` marker there is touched every
second (``swarm_sim --processes`` waits for a node that is still writing). Memory stays
bounded: the tables live on disk, the plotted traces are thinned.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
import shutil
import tempfile

import numpy as np
from rclpy.node import Node
from std_msgs.msg import Float64, Float64MultiArray
from visualization_msgs.msg import MarkerArray

from ros_support.ros_parameters import declare, specs_of
from ros_support.spin import spin_node
from soliton_encirclement_ros.analysis.report import (
    AGENTS_HEADER, METRICS_HEADER, RunResult, write_run_outputs)
from soliton_encirclement_ros.analysis.stream import (
    CsvStream, DecimatingTrace, WRITING_MARKER, WritingMarker)
from soliton_encirclement_ros.core.controller import AgentBroadcast, TargetBroadcast
from soliton_encirclement_ros.core.identity import DuplicateIds
from soliton_encirclement_ros.core.metrics import compute_metrics, METRIC_NAMES
from soliton_encirclement_ros.interface import (
    agent_state_from_msg, AGENT_STATES_TOPIC, MARKERS_TOPIC, METRICS_TOPIC_PREFIX,
    target_state_from_msg, TARGET_STATE_TOPIC)
from soliton_encirclement_ros.nodes.markers import swarm_markers
from soliton_encirclement_ros.nodes.settings import MetricsSettings
from soliton_encirclement_ros.nodes.swarm_topics import create_swarm_subscription

SPECS = specs_of(MetricsSettings)
PARAMETERS = tuple(SPECS)  # everything metrics_node declares (docs/parameters.md)


class MetricsNode(Node):
    """
    Every parameter is read-only (periods and timeouts are fixed at start-up).

    ``subscribe_swarm=False`` / ``subscribe_target=False``: states come through
    :meth:`receive_agent_state` / :meth:`receive_target_state` instead.
    """

    def __init__(self, subscribe_swarm: bool = True, subscribe_target: bool = True,
                 **kwargs) -> None:
        super().__init__('metrics', **kwargs)
        self.settings = MetricsSettings.from_mapping(declare(self, SPECS))
        self._timeout_ns = int(self.settings.agent_timeout * 1e9)
        self._pending: list = []          # (rx_ns, kind, state) not yet in effect
        self._agents: dict = {}           # id -> (AgentBroadcast, rx_ns)
        self._target = None               # TargetBroadcast
        self._trails: dict = {}           # id -> deque of (x, y)
        self._ticks = 0                   # metrics ticks so far (agents.csv every n-th)
        # Rows go to disk as they come (readable during the run, bounded memory): into
        # output_dir when given, else into a private directory removed with the node.
        self._own_dir = None if self.settings.output_dir else tempfile.mkdtemp(
            prefix='metrics_node_')
        rows_dir = Path(self.settings.output_dir or self._own_dir)
        rows_dir.mkdir(parents=True, exist_ok=True)
        self._metric_rows = CsvStream(rows_dir / 'metrics.csv', METRICS_HEADER)
        self._agent_rows = CsvStream(rows_dir / 'agents.csv', AGENTS_HEADER)
        self._traces: dict[str, DecimatingTrace] = {}  # name -> bounded (t, x, y) for plots
        self._duplicates = DuplicateIds(self._timeout_ns * 1e-9)
        self._metric_pubs = {
            name: self.create_publisher(Float64, METRICS_TOPIC_PREFIX + name, 10)
            for name in METRIC_NAMES
        }
        self._marker_pub = self.create_publisher(MarkerArray, MARKERS_TOPIC, 10)
        reliability = self.settings.swarm_reliability
        if subscribe_swarm:
            create_swarm_subscription(self, Float64MultiArray, AGENT_STATES_TOPIC,
                                      self._on_agent_state, reliability)
        if subscribe_target:
            create_swarm_subscription(self, Float64MultiArray, TARGET_STATE_TOPIC,
                                      self._on_target_state, reliability)
        self.create_timer(self.settings.metrics_period, self._on_tick)
        if self.settings.marker_period > 0:
            self.create_timer(self.settings.marker_period, self._publish_markers)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_agent_state(self, msg: Float64MultiArray) -> None:
        try:
            self.receive_agent_state(agent_state_from_msg(msg))
        except ValueError as error:
            self.get_logger().warning(f'ignoring agent state: {error}', throttle_duration_sec=5.0)

    def receive_agent_state(self, state: AgentBroadcast, now_ns: int | None = None) -> None:
        """Take a decoded swarm state heard at ``now_ns`` (default: this node's clock now)."""
        self.receive_agent_states((state,), self._now_ns() if now_ns is None else now_ns)

    def receive_agent_states(self, states, now_ns: int) -> None:
        """Take decoded swarm states heard at ``now_ns``, in arrival order."""
        for state in states:
            duplicate = self._duplicates.observe(state.agent_id, state.incarnation,
                                                 now_ns * 1e-9)
            if duplicate is not None:
                self.get_logger().error(
                    f'duplicate agent_id {state.agent_id}: broadcast by incarnations '
                    f'{", ".join(map(str, duplicate))}; two vehicles were started with the '
                    'same agent_id, and the metrics of that id mix both')
            self._pending.append((now_ns, 'agent', state))

    def _on_target_state(self, msg: Float64MultiArray) -> None:
        try:
            self.receive_target_state(target_state_from_msg(msg))
        except ValueError as error:
            self.get_logger().warning(f'ignoring target state: {error}', throttle_duration_sec=5.0)

    def receive_target_state(self, state: TargetBroadcast, now_ns: int | None = None) -> None:
        """Take a decoded target state heard at ``now_ns`` (default: this node's clock now)."""
        self._pending.append((self._now_ns() if now_ns is None else now_ns, 'target', state))

    def _apply_pending(self, now_ns: int) -> None:
        """States received before this tick take effect; this tick's wait for the next one."""
        keep = []
        for rx_ns, kind, state in self._pending:
            if rx_ns >= now_ns:
                keep.append((rx_ns, kind, state))
            elif kind == 'target':
                self._target = state
            elif state.member:  # a presence broadcast (controller out) is no live agent
                self._agents[state.agent_id] = (state, rx_ns)
        self._pending = keep

    def live_agents(self, now_ns: int) -> list:
        return [state for _, (state, rx_ns) in sorted(self._agents.items())
                if now_ns - rx_ns <= self._timeout_ns]

    def _on_tick(self) -> None:
        tick, self._ticks = self._ticks, self._ticks + 1
        now_ns = self._now_ns()
        self._apply_pending(now_ns)
        live = self.live_agents(now_ns)
        if self._target is None or not live:
            return
        now = now_ns * 1e-9
        positions = np.array([s.position for s in live])
        velocities = np.array([s.velocity for s in live])
        metrics = compute_metrics(positions, velocities, self._target.position,
                                  self._target.velocity, self.settings.radius)
        for name, value in zip(METRIC_NAMES, metrics):
            self._metric_pubs[name].publish(Float64(data=value))
        self._metric_rows.append([now, *metrics])
        if tick % self.settings.telemetry_every == 0:
            self._agent_rows.append([[state.agent_id, now, state.u,
                                      float(np.linalg.norm(state.velocity))] for state in live])
        for state in live:
            self._trace(f'agent {state.agent_id}', now, state.position)
            self._trails.setdefault(state.agent_id, deque(
                maxlen=max(self.settings.trail_length, 1))).append(tuple(state.position[:2]))
        self._trace('target', now, self._target.position)

    def _trace(self, name: str, now: float, position) -> None:
        if name not in self._traces:
            self._traces[name] = DecimatingTrace()
        self._traces[name].append((now, float(position[0]), float(position[1])))

    def _publish_markers(self) -> None:
        if self._target is None:
            return
        now_ns = self._now_ns()
        live_ids = {s.agent_id for s in self.live_agents(now_ns)}
        agents = {agent_id: (state.position, agent_id in live_ids)
                  for agent_id, (state, _) in self._agents.items()}
        self._marker_pub.publish(swarm_markers(
            agents, self._target.position, self.settings.radius, self._trails,
            self.settings.world_frame, self.get_clock().now().to_msg(), self.settings.area))

    def series(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """
        (metrics (T, 1 + metrics), agents (K,4), trajectories {name: (T,3) t,x,y}) gathered so far.

        The tables read back from the streamed files, the traces thinned to a bound.
        """
        return (self._metric_rows.read(), self._agent_rows.read(),
                {name: trace.array() for name, trace in self._traces.items()})

    def destroy_node(self) -> None:
        self._metric_rows.close()
        self._agent_rows.close()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        super().destroy_node()

    def save(self, output_dir: str) -> dict:
        """Write the run outputs (CSV, plots, summary.json) of the series gathered so far."""
        metrics, agents, trajectories = self.series()
        seen = sorted(name for name in trajectories if name != 'target')  # N in the figures' title
        return write_run_outputs(output_dir, RunResult(
            metrics, agents, {'radius': self.settings.radius, 'agents': seen}, trajectories),
            fmt=self.settings.figure_format)


def _save_on_shutdown(node: MetricsNode) -> None:
    """
    Write the outputs into output_dir, saying so.

    A ``.writing`` marker in output_dir is touched every second while they are written (a
    supervisor such as ``swarm_sim --processes`` waits for a node that is still writing).
    """
    if node.settings.output_dir:
        out = Path(node.settings.output_dir)
        node.get_logger().info(f'writing outputs to {out}')
        with WritingMarker(out / WRITING_MARKER):
            node.save(out)


def main(args=None) -> None:
    spin_node(MetricsNode, args, on_shutdown=_save_on_shutdown)


if __name__ == '__main__':
    main()
