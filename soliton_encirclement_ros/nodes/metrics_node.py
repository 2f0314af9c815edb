"""
metrics_node: the encirclement metrics (METRIC_NAMES) from the swarm's broadcasts, live.

Listens to ``/swarm/agent_states`` and ``/target/state``; every ``metrics_period`` it computes
E_r, E_vr, rho, G_max, E_gap and d_min over the live agents (``core.metrics``) and publishes
each on ``/swarm/metrics/<name>`` (std_msgs/Float64, plottable as is). It also publishes RViz
markers on ``/swarm/markers``. ``metrics.csv`` and ``agents.csv`` are streamed into
``output_dir`` as the run goes (flushed every second, readable at any moment); plots and
``summary.json`` are added on shutdown, while a ``.writing`` marker there is touched every
second (``swarm_sim --processes`` waits for a node that is still writing). Memory stays
bounded: the tables live on disk, the plotted traces are thinned. The files are created with
the first row, so a node that never measures (a refused start) writes nothing.

One radius: the metrics are measured against the radius the agents fly. The agents' ``radius``
(nodes named ``agent`` in any namespace) is read from ``/parameter_events`` (a declaration at
start-up as well as a later ``ros2 param set``) and, for an agent whose declaration went by
before this node heard it, asked of the agent once (its ``get_parameters`` service). When all
agents agree on a radius other than this node's own ``radius``, it is adopted (one INFO line);
when they disagree, one WARN names them and the most common radius is used. summary.json's
``radius`` is the radius measured against.
"""
from __future__ import annotations

from collections import Counter, deque
from pathlib import Path
import shutil
import tempfile

import numpy as np
from rcl_interfaces.msg import ParameterEvent, ParameterType
from rcl_interfaces.srv import GetParameters
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python
from rclpy.qos import qos_profile_parameter_events
from std_msgs.msg import Float64, Float64MultiArray
from visualization_msgs.msg import MarkerArray

from ros_support.publishing import Publishing
from ros_support.ros_parameters import declare, specs_of
from ros_support.spin import spin_node
from soliton_encirclement_ros.analysis.report import (
    AGENTS_HEADER, METRICS_HEADER, OutputsIncomplete, RunResult, write_run_outputs,
    write_streamed_outputs)
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
PARAMETERS = tuple(SPECS)  # everything metrics_node declares (docs/reference/parameters.md)
PARAMETER_EVENTS_TOPIC = '/parameter_events'
AGENT_NODE_NAME = 'agent'   # the agents' node name, in any namespace
ASK_PERIOD = 1.0            # s between two looks for agents whose radius was not heard


def is_agent(node_name: str) -> bool:
    """Whether the fully qualified ``node_name`` is an agent (``/<ns>/agent``)."""
    return node_name.rsplit('/', 1)[-1] == AGENT_NODE_NAME


def radius_of(parameters) -> float | None:
    """Return the ``radius`` among rcl_interfaces Parameter messages (a number), or None."""
    for parameter in parameters:
        if parameter.name == 'radius' and parameter.value.type in (
                ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_INTEGER):
            return float(parameter_value_to_python(parameter.value))
    return None


def common_radius(radii: dict, current: float) -> tuple[float, dict]:
    """
    Return (the most common of the agents' ``radii``, {radius: [agents]}).

    ``radii`` maps an agent to its radius; a tie goes to ``current`` if among the most
    common, else to the smallest.
    """
    by_radius: dict = {}
    for agent, radius in sorted(radii.items()):
        by_radius.setdefault(radius, []).append(agent)
    counts = Counter(radii.values())
    best = max(counts.values())
    tied = sorted(radius for radius, count in counts.items() if count == best)
    return (current if current in tied else tied[0]), by_radius


class MetricsNode(Node):
    """
    Every parameter is read-only (periods and timeouts are fixed at start-up).

    ``subscribe_swarm=False`` / ``subscribe_target=False``: states come through
    :meth:`receive_agent_state` / :meth:`receive_target_state` instead;
    ``subscribe_parameters=False``: the agents' radius comes through
    :meth:`receive_agent_radius` (``swarm_sim``'s in-process graph).
    """

    def __init__(self, subscribe_swarm: bool = True, subscribe_target: bool = True,
                 subscribe_parameters: bool = True, **kwargs) -> None:
        super().__init__('metrics', **kwargs)
        self.settings = MetricsSettings.from_mapping(declare(self, SPECS))
        self.radius = self.settings.radius  # the radius measured against (the agents')
        self._agent_radii: dict = {}      # agent node -> the radius it flies
        self._radius_said = None          # what was last logged about the agents' radii
        self._asking: dict = {}           # agent node -> (client, future) of get_parameters
        self._timeout_ns = int(self.settings.agent_timeout * 1e9)
        self._pending: list = []          # (rx_ns, kind, state) not yet in effect
        self._agents: dict = {}           # id -> (AgentBroadcast, rx_ns)
        self._target = None               # TargetBroadcast
        self._trails: dict = {}           # id -> deque of (x, y)
        self._ticks = 0                   # metrics ticks so far (agents.csv every n-th)
        # Rows go to disk as they come (readable during the run, bounded memory): into
        # output_dir when given, else into a private directory removed with the node. The
        # files are opened with the first row (:meth:`_streams`).
        self._own_dir = None if self.settings.output_dir else tempfile.mkdtemp(
            prefix='metrics_node_')
        self._rows_dir = Path(self.settings.output_dir or self._own_dir)
        self._metric_rows = self._agent_rows = None
        self._failures_said: set[str] = set()  # the write failures logged
        self._traces: dict[str, DecimatingTrace] = {}  # name -> bounded (t, x, y) for plots
        self._duplicates = DuplicateIds(self._timeout_ns * 1e-9)
        self._publish = Publishing(self.get_logger())  # drops a sample the middleware refuses
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
        if subscribe_parameters:
            self.create_subscription(ParameterEvent, PARAMETER_EVENTS_TOPIC,
                                     self._on_parameter_event, qos_profile_parameter_events)
            self.create_timer(ASK_PERIOD, self._ask_unheard_agents)
        self.create_timer(self.settings.metrics_period, self._on_tick)
        if self.settings.marker_period > 0:
            self.create_timer(self.settings.marker_period, self._publish_markers)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _streams(self) -> tuple[CsvStream, CsvStream]:
        """Return (metrics.csv, agents.csv), created in the rows directory on first use."""
        if self._metric_rows is None:
            self._rows_dir.mkdir(parents=True, exist_ok=True)
            self._metric_rows = CsvStream(self._rows_dir / 'metrics.csv', METRICS_HEADER)
            self._agent_rows = CsvStream(self._rows_dir / 'agents.csv', AGENTS_HEADER)
        return self._metric_rows, self._agent_rows

    def _on_parameter_event(self, event: ParameterEvent) -> None:
        if not is_agent(event.node):
            return
        radius = radius_of([*event.new_parameters, *event.changed_parameters])
        if radius is not None:
            self.receive_agent_radius(event.node, radius, 'parameter events')

    def receive_agent_radius(self, agent: str, radius: float, source: str) -> None:
        """Take the ``radius`` the agent node ``agent`` flies (heard through ``source``)."""
        self._agent_radii[agent] = float(radius)
        self._drop_question(agent)
        measured, by_radius = common_radius(self._agent_radii, self.radius)
        logger = self.get_logger()
        if len(by_radius) > 1 and self._radius_said != by_radius:
            self._radius_said = by_radius
            fly = '; '.join(f'{value:g} m ({", ".join(agents)})'
                            for value, agents in sorted(by_radius.items()))
            logger.warning(f'metrics_node: the agents fly different radii: {fly}; measuring '
                           f'against the most common, {measured:g} m')
        previous, self.radius = self.radius, measured
        if len(by_radius) > 1:
            return
        # All agree: said when the radius changes, or once they agree again on one adopted
        # while they disagreed.
        instead = previous if measured != previous else (
            self.settings.radius if self._radius_said is not None else measured)
        self._radius_said = None
        if instead != measured:
            logger.info(f'metrics_node: the agents fly radius {measured:g} m ({source}); '
                        f'measuring against it instead of {instead:g} m')

    def _ask_unheard_agents(self) -> None:
        """Ask each agent whose radius was not heard (its declaration went by) for it, once."""
        for name, namespace in self.get_node_names_and_namespaces():
            agent = f'{namespace.rstrip("/")}/{name}'
            if (name != AGENT_NODE_NAME or agent in self._agent_radii
                    or agent in self._asking):
                continue
            client = self.create_client(GetParameters, f'{agent}/get_parameters')
            if not client.service_is_ready():
                self.destroy_client(client)  # not discovered yet: next time
                continue
            future = client.call_async(GetParameters.Request(names=['radius']))
            self._asking[agent] = (client, future)
            future.add_done_callback(lambda done, agent=agent: self._on_answer(agent, done))

    def _on_answer(self, agent: str, future) -> None:
        try:
            values = future.result().values
        except Exception:  # noqa: B902 - the agent went away: ask again later
            values = []
        self._drop_question(agent)
        if values and agent not in self._agent_radii and values[0].type in (
                ParameterType.PARAMETER_DOUBLE, ParameterType.PARAMETER_INTEGER):
            self.receive_agent_radius(agent, parameter_value_to_python(values[0]),
                                      'asked the agent')

    def _drop_question(self, agent: str) -> None:
        asked = self._asking.pop(agent, None)
        if asked is not None:
            self.destroy_client(asked[0])

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
                                  self._target.velocity, self.radius)
        for name, value in zip(METRIC_NAMES, metrics):
            self._publish(self._metric_pubs[name], Float64(data=value))
        metric_rows, agent_rows = self._streams()
        metric_rows.append([now, *metrics])
        if tick % self.settings.telemetry_every == 0:
            agent_rows.append([[state.agent_id, now, state.u,
                                float(np.linalg.norm(state.velocity))] for state in live])
        for failure in self.write_failures():
            if failure not in self._failures_said:  # once each; the metrics are still published
                self._failures_said.add(failure)
                self.get_logger().error(f'{failure} (at t={now:.2f} s); the run goes on')
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
        self._publish(self._marker_pub, swarm_markers(
            agents, self._target.position, self.radius, self._trails,
            self.settings.world_frame, self.get_clock().now().to_msg(), self.settings.area))

    def series(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """
        (metrics (T, 1 + metrics), agents (K,4), trajectories {name: (T,3) t,x,y}) gathered so far.

        The tables read back from the streamed files, the traces thinned to a bound.
        """
        if self._metric_rows is None:  # nothing measured yet
            tables = (np.empty((0, len(METRICS_HEADER))), np.empty((0, len(AGENTS_HEADER))))
        else:
            tables = (self._metric_rows.read(), self._agent_rows.read())
        return (*tables, self.trajectories())

    def trajectories(self) -> dict[str, np.ndarray]:
        """Return {name: (T, 3) rows t, x, y} gathered so far, thinned to a bound."""
        return {name: trace.array() for name, trace in self._traces.items()}

    def write_failures(self) -> list[str]:
        """Return what could not be written of metrics.csv and agents.csv (a full disk), if any."""
        return [stream.failure for stream in (self._metric_rows, self._agent_rows)
                if stream is not None and stream.failure]

    def flush(self) -> None:
        """Put every row gathered so far into metrics.csv and agents.csv."""
        for stream in (self._metric_rows, self._agent_rows):
            if stream is not None:
                stream.flush()

    def destroy_node(self) -> None:
        for stream in (self._metric_rows, self._agent_rows):
            if stream is not None:
                stream.close()
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)
        super().destroy_node()

    def save(self, output_dir: str) -> dict:
        """
        Write the run outputs (CSV, plots unless ``plots`` is false, summary.json) so far.

        From the streamed files (``report.write_streamed_outputs``): the memory this takes does
        not grow with the run's length. Into another directory than the rows', the CSV files
        are copied there first.
        """
        trajectories = self.trajectories()
        seen = sorted(name for name in trajectories if name != 'target')  # N in the figures' title
        params = {'radius': self.radius, 'agents': seen}
        fmt = self.settings.figure_format
        if self._metric_rows is None:  # nothing measured: tables with their header only
            return write_run_outputs(output_dir, RunResult(
                np.empty((0, len(METRICS_HEADER))), np.empty((0, len(AGENTS_HEADER))), params,
                trajectories), plots=self.settings.plots, fmt=fmt)
        self.flush()
        out = Path(output_dir)
        if out.absolute() != self._rows_dir.absolute():
            out.mkdir(parents=True, exist_ok=True)
            for stream in (self._metric_rows, self._agent_rows):
                shutil.copyfile(stream.path, out / stream.path.name)
        return write_streamed_outputs(out, params, trajectories, plots=self.settings.plots,
                                      fmt=fmt, incomplete=tuple(self.write_failures()))


def _save_on_shutdown(node: MetricsNode) -> None:
    """
    Write the outputs into output_dir, saying so.

    A ``.writing`` marker in output_dir is touched every second while they are written (a
    supervisor such as ``swarm_sim --processes`` waits for a node that is still writing).
    """
    if node.settings.output_dir:
        out = Path(node.settings.output_dir)
        node.get_logger().info(f'writing outputs to {out}')
        try:
            with WritingMarker(out / WRITING_MARKER):
                node.save(out)
        except (OutputsIncomplete, OSError) as error:  # a full or read-only disk
            node.get_logger().error(f'outputs incomplete in {out}: {error}')


def main(args=None) -> None:
    spin_node(MetricsNode, args, on_shutdown=_save_on_shutdown)


if __name__ == '__main__':
    main()
