"""
One radius: metrics_node measures against the radius the agents fly (issue 39, part 7, defect 1).

Before the fix, a params file giving the agents ``radius: 12.0`` (or ``ros2 param set`` on every
agent) moved the ring, while metrics_node kept measuring against its own ``radius`` (20): E_r
read 0.40 and summary.json said 20.0, with no warning.
"""
import json
from pathlib import Path
import time

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter

from soliton_encirclement_ros.bringup.graph import build_graph
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from soliton_encirclement_ros.sim import runner
from support.waits import DEADLINE

ADOPTED = ('metrics_node: the agents fly radius 12 m ({}); measuring against it instead of '
           '20 m')


def params_file(tmp_path: Path) -> Path:
    path = tmp_path / 'radius.yaml'
    path.write_text('/**/agent:\n  ros__parameters:\n    radius: 12.0\n')
    return path


def swarm_sim_args(tmp_path: Path, *mode: str, duration: str = '20') -> list[str]:
    # 3 agents: the radius is under test, not the count (a process fewer in --processes)
    return ['--no-progress', '--control-period', '0.05', '--agents', '3', '--duration', duration,
            '--params-file', str(params_file(tmp_path)), '--out', str(tmp_path / 'out'), *mode]


def test_the_agents_fly_another_radius_than_metrics_node_is_given(tmp_path):
    """The case under test: the file reaches the agents only, metrics_node gets its 20 m."""
    plan = runner.plan_from_args(runner.parse_args(swarm_sim_args(tmp_path)))
    specs = {spec.executable: spec for spec in build_graph(plan)}
    assert specs['metrics_node'].parameters['radius'] == 20.0
    assert 'radius' not in specs['agent_node'].parameters  # from the file: 12
    assert not specs['metrics_node'].notes and not specs['agent_node'].notes


# --processes runs on wall time (jitter): it is held to 5 % only (0.40 before). 20 s: with both
# cores busy its E_r stayed below 0.05 from 7.3 s on (3 agents, 4x real time), but at load 5 a
# 4x run ended above it once; at 2x real time the processes keep up (the same CPU seconds).
@pytest.mark.parametrize('mode, duration, e_r', [
    ((), '20', 0.01), (('--processes', '--real-time-factor', '2'), '20', 0.05)],
    ids=['in-process', 'processes'])
def test_swarm_sim_measures_against_the_radius_of_the_params_file(tmp_path, capfd, mode,
                                                                  duration, e_r):
    code = runner.main(swarm_sim_args(tmp_path, *mode, duration=duration))
    err = capfd.readouterr().err
    assert code == 0, err
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    assert summary['params']['radius'] == 12.0
    assert summary['final']['E_r'] < e_r  # 0.40 against 20 m
    if not mode:  # the processes' logs are kept only when a node fails
        assert err.count(ADOPTED.format('their parameters')) == 1, err


class Graph:
    """Nodes in two rclpy contexts (two DDS participants), spun in turn from the test."""

    def __init__(self):
        self.contexts, self.executors = [], []
        for _ in range(2):
            context = Context()
            rclpy.init(args=[], context=context)
            self.contexts.append(context)
            self.executors.append(SingleThreadedExecutor(context=context))

    def add(self, index: int, node):
        self.executors[index].add_node(node)
        return node

    def wait_until(self, condition, what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        while not condition():
            assert time.monotonic() < deadline, f'timed out waiting for {what}'
            for executor in self.executors:
                executor.spin_once(timeout_sec=0.01)

    def close(self) -> None:
        for executor, context in zip(self.executors, self.contexts):
            for node in list(executor.get_nodes()):
                node.destroy_node()
            executor.shutdown()
            rclpy.try_shutdown(context=context)


def test_metrics_node_follows_the_agents_radius_over_parameter_events(capfd, tmp_path):
    """Declarations at start-up, then ``ros2 param set`` one agent after the other."""
    graph = Graph()
    try:
        metrics = graph.add(0, MetricsNode(namespace='/swarm', context=graph.contexts[0]))
        assert metrics.radius == 20.0
        agents = [graph.add(1, AgentNode(
            namespace=f'/uav{i}', context=graph.contexts[1],
            parameter_overrides=[Parameter('agent_id', value=i),
                                 Parameter('radius', value=12.0)])) for i in (1, 2, 3)]
        graph.wait_until(lambda: metrics.radius == 12.0, 'metrics_node to adopt 12 m')
        err = capfd.readouterr().err
        assert 'measuring against it instead of 20 m' in err, err

        agents[0].set_parameters([Parameter('radius', value=10.0)])
        warning = ('metrics_node: the agents fly different radii: 10 m (/uav1/agent); 12 m '
                   '(/uav2/agent, /uav3/agent); measuring against the most common, 12 m')
        graph.wait_until(lambda: warning in capfd.readouterr().err, 'the warning')
        assert metrics.radius == 12.0

        for agent in agents[1:]:
            agent.set_parameters([Parameter('radius', value=10.0)])
        graph.wait_until(lambda: metrics.radius == 10.0, 'metrics_node to adopt 10 m')
        # instead of 12 m, or of 20 m when uav3's event came before uav2's (10 m adopted
        # while they disagreed)
        graph.wait_until(lambda: ('metrics_node: the agents fly radius 10 m (parameter events)'
                                  '; measuring against it instead of ')
                         in capfd.readouterr().err, 'the line saying so')
        saved = metrics.save(str(tmp_path / 'saved'))  # says the radius measured against
        assert saved['params']['radius'] == 10.0
    finally:
        graph.close()


def test_metrics_node_started_after_the_agents_asks_them(capfd):
    """Their declarations went by before it subscribed: it asks each agent for its radius."""
    graph = Graph()
    try:
        for i in (1, 2):
            graph.add(1, AgentNode(namespace=f'/uav{i}', context=graph.contexts[1],
                                   parameter_overrides=[Parameter('agent_id', value=i),
                                                        Parameter('radius', value=12.0)]))
        metrics = graph.add(0, MetricsNode(namespace='/swarm', context=graph.contexts[0]))
        graph.wait_until(lambda: metrics.radius == 12.0, 'metrics_node to adopt 12 m')
        graph.wait_until(lambda: ADOPTED.format('asked the agent') in capfd.readouterr().err,
                         'the line saying so')
    finally:
        graph.close()
