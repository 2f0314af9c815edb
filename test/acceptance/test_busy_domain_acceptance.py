"""
``ros2 launch`` into a busy domain is refused in one line, with a real swarm node running.

The part of ``unit/bringup/test_busy_domain.py`` that starts an agent_node process in the test's
domain and waits for discovery (seconds).
"""
import os

from soliton_encirclement_ros.bringup.graph import build_graph, SwarmPlan
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.interface import AGENT_STATES_TOPIC
from soliton_encirclement_ros.sim.domain import launch_problem, suggested_domain
from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import GraphProbe, Running


def executables(specs) -> list[str]:
    return [spec.executable for spec in specs]


def test_launch_problem_refuses_a_domain_where_a_swarm_runs_in_one_line():
    domain = int(os.environ['ROS_DOMAIN_ID'])  # this module's own (conftest)
    swarm = executables(build_graph(SwarmPlan(scenario=Scenario(agents=2))))
    assert launch_problem(swarm) is None  # an empty domain
    command = [find_executable('agent_node', 'soliton_encirclement_ros'),
               '--ros-args', '-r', '__ns:=/uav1']
    with Running(command) as agent, GraphProbe() as probe:
        probe.wait_until(lambda: any(
            info.node_name == 'agent' and info.node_namespace == '/uav1'
            for info in probe.node.get_publishers_info_by_topic(AGENT_STATES_TOPIC)),
            f'/uav1/agent publishing {AGENT_STATES_TOPIC}')
        problem = launch_problem(swarm)
        assert problem == (
            f'another swarm is running in ROS domain {domain}: /uav1/agent publishes '
            f'{AGENT_STATES_TOPIC}; run this one in another domain with ROS_DOMAIN_ID=N, '
            f'e.g. ROS_DOMAIN_ID={suggested_domain(domain)} ros2 launch ...')
        assert launch_problem(['agent_node']) is None  # a vehicle joins that swarm
        assert agent.process.poll() is None
