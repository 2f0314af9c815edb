"""
The swarm graph in one process, stepped in lock-step on a simulated clock.

All nodes share one rclpy context and one EventsExecutor, stepped by the lock-step core
(``sim.lockstep.LockStep``): after each clock step the executor runs until the graph is
quiescent (every timer due at that time has fired and every message published inside the graph
has reached each of its in-graph subscriptions) before the clock moves on. The runner's own
node publishes ``/clock`` for tools outside. Nodes apply messages at their next tick, so the
order of callbacks within one step does not matter and a run is a function of its seed. What it
shares with ``engine_graph.EngineGraph`` (the context, the lock-step, ``/clock``, the bag and the
live view) is ``lockstep_graph.LockStepGraph``.
"""
from __future__ import annotations

from typing import Callable

import rclpy
from rclpy.context import Context
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Float64MultiArray

from ros_support.ros_parameters import declared_names, given_names
from ros_support.validation import unknown_parameters
from soliton_encirclement_ros.bringup.graph import build_graph, NodeSpec, SwarmPlan
from soliton_encirclement_ros.interface import (
    agent_state_array, agent_states_from_values, AGENT_STATES_TOPIC, RELIABLE, swarm_qos,
    target_state_from_msg, TARGET_STATE_TOPIC)
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from soliton_encirclement_ros.nodes.target_node import TargetNode
from soliton_encirclement_ros.sim.lockstep_graph import LockStepGraph
from velocity_mobility_ros.nodes.swarm_mobility_node import SwarmMobilityNode

NODE_CLASSES = {
    'swarm_mobility_node': SwarmMobilityNode,
    'target_node': TargetNode,
    'agent_node': AgentNode,
    'metrics_node': MetricsNode,
}
# Nodes whose swarm- and target-state subscriptions the graph replaces with one shared,
# decode-once subscription per topic.
FANOUT_CLASSES = (AgentNode, MetricsNode)


class InProcessGraph(LockStepGraph):
    """Build every node of ``plan`` in this process; ``run`` steps the clock."""

    def __init__(self, plan: SwarmPlan, record: str = '', storage: str = 'mcap',
                 live: tuple[str, int] | None = None) -> None:
        self._open_context()
        try:
            for spec in build_graph(plan):
                self.nodes.append(_make_node(spec, self.context))
            check_unknown_parameters(self.nodes)
            self.metrics = next(n for n in self.nodes if isinstance(n, MetricsNode))
            for agent in (n for n in self.nodes if isinstance(n, AgentNode)):
                tell_radius(agent, self.metrics)
            self._make_clock_node()
            fanout = [n for n in self.nodes if type(n) in FANOUT_CLASSES]
            # (receive, whether it takes the states as arrays): the agents' receive path is
            # over arrays (core.controller.AgentStates); the metrics node takes the broadcasts.
            self._swarm_receivers = [(n.receive_agent_states, isinstance(n, AgentNode))
                                     for n in fanout]
            self._heard: list = []  # swarm states of this instant not yet handed out
            self._target_receivers = [n.receive_target_state for n in fanout]
            self.clock_node.create_subscription(
                Float64MultiArray, AGENT_STATES_TOPIC, self._fan_out, swarm_qos(RELIABLE)
            )
            self.clock_node.create_subscription(
                Float64MultiArray, TARGET_STATE_TOPIC, self._fan_out_target,
                swarm_qos(RELIABLE, TARGET_STATE_TOPIC))
            self._start_lock_step(plan.scenario, record, storage, live)
        except BaseException:
            self.close()
            raise

    def _after_delivery(self) -> list[Callable[[], None]]:
        return [self._hand_out_heard]

    @property
    def radius(self) -> float:
        """Return the radius the metrics were measured against (the agents')."""
        return self.metrics.radius

    def write_failures(self) -> list[str]:
        return [*self.metrics.write_failures(), *super().write_failures()]

    def trajectories(self) -> dict:
        """Return the metrics node's traces so far, thinned to a bound."""
        return self.metrics.trajectories()

    def _fan_out(self, msg: Float64MultiArray) -> None:
        """
        One subscription for all in-process agents and the metrics node: decode once.

        With direct delivery the states of an instant are gathered (their values, the layout
        checked) and decoded together into arrays once the instant's messages are delivered
        (``_hand_out_heard``); each receiver takes them in one call.
        """
        values = self._decoded(msg, agent_state_array, 'agent')
        if values is not None:
            self._heard.append(values)
            if not self.lockstep.direct:
                self._hand_out_heard()

    def _hand_out_heard(self) -> None:
        if not self._heard:
            return
        rows, self._heard = self._heard, []
        arrays, errors = agent_states_from_values(rows)  # once, for every agent
        for error in errors:
            self.clock_node.get_logger().warning(f'ignoring agent state: {error}',
                                                 throttle_duration_sec=5.0)
        if not len(arrays):
            return
        states = list(arrays)  # the broadcasts, for the metrics node
        now_ns = self.sim_time_ns  # every clock of the graph reads this instant
        for receive, as_arrays in self._swarm_receivers:
            receive(arrays if as_arrays else states, now_ns)

    def _fan_out_target(self, msg: Float64MultiArray) -> None:
        state = self._decoded(msg, target_state_from_msg, 'target')
        if state is not None:
            for receive in self._target_receivers:
                receive(state, self.sim_time_ns)

    def _decoded(self, msg, decode, kind: str):
        """Return ``decode(msg)``, or None after a (throttled) warning naming what is wrong."""
        try:
            return decode(msg)
        except ValueError as error:
            self.clock_node.get_logger().warning(
                f'ignoring {kind} state: {error}', throttle_duration_sec=5.0
            )
            return None


def _make_node(spec: NodeSpec, context: Context) -> Node:
    try:
        cls = NODE_CLASSES[spec.executable]
        extra = ({'subscribe_swarm': False, 'subscribe_target': False}
                 if cls in FANOUT_CLASSES else {})
        if cls is MetricsNode:  # the agents' radius: from tell_radius
            extra['subscribe_parameters'] = False
        return cls(cli_args=spec.ros_args(), context=context, **extra)
    except (ValueError, TypeError, ParameterException) as error:
        raise ValueError(f'{spec.full_name}: {error}') from None


def tell_radius(agent: Node, metrics: MetricsNode) -> None:
    """
    Hand ``metrics`` the radius ``agent`` flies: now, and whenever it is set.

    What ``/parameter_events`` tells a metrics_node of its own (the agents declared theirs
    before the metrics node existed), without DDS.
    """
    name = agent.get_fully_qualified_name()
    metrics.receive_agent_radius(name, agent.get_parameter('radius').value, 'their parameters')

    def changed(parameters) -> None:
        for parameter in parameters:
            if parameter.name == 'radius':
                metrics.receive_agent_radius(name, parameter.value, 'parameter events')
    agent.add_post_set_parameters_callback(changed)


def check_plan(plan: SwarmPlan) -> None:
    """
    Build every node of ``plan`` in a private context and destroy it again.

    ``ValueError`` names the first node that refuses its configuration or a parameter no node
    declares. What ``--processes`` checks before it starts anything (each child alone could only
    warn).
    """
    context = Context()
    rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    nodes: list[Node] = []
    try:
        for spec in build_graph(plan):
            nodes.append(_make_node(spec, context))
        check_unknown_parameters(nodes)
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
        context.destroy()  # the participant leaves the domain now, not at garbage collection


def check_unknown_parameters(nodes: list[Node]) -> None:
    """Reject a parameter given (YAML or -p) that no node of the graph declares (the policy)."""
    unknown = unknown_parameters(
        {node.get_fully_qualified_name(): given_names(node) for node in nodes},
        set().union(*(declared_names(node) for node in nodes)))
    if unknown:
        raise ValueError(f'unknown parameter(s): {", ".join(unknown)}')
