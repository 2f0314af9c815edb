"""
``ros2 launch`` into a busy domain is refused in one line (issue 39, part 7, defect 3).

``swarm_sim`` refused a domain where a swarm already runs; the launch files started the graph
anyway and flooded duplicate-id errors. ``plan_launch_description`` (only importable where the
launch package is) now asks ``sim.domain.launch_problem``: the call's wiring is read from
launch_support's source here; the refusal with a real agent_node process in the test's domain
(seconds of discovery) is in ``acceptance/test_busy_domain_acceptance.py``.
"""
import ast
from pathlib import Path

from soliton_encirclement_ros.bringup.graph import build_graph, in_namespace, SwarmPlan
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.domain import launch_problem, starts_a_swarm, suggested_domain

LAUNCH_SUPPORT = (Path(__file__).resolve().parents[3]
                  / 'soliton_encirclement_ros' / 'bringup' / 'launch_support.py')


def executables(specs) -> list[str]:
    return [spec.executable for spec in specs]


def test_a_whole_swarm_is_checked_one_vehicle_joining_is_not():
    swarm = build_graph(SwarmPlan(scenario=Scenario(agents=2)))
    assert starts_a_swarm(executables(swarm))  # swarm_sim.launch.py, swarm_px4_sitl.launch.py
    # agent.launch.py and agent_px4.launch.py: one vehicle's nodes (graph.in_namespace)
    assert not starts_a_swarm(executables(in_namespace(swarm, '/uav1')))
    assert launch_problem(executables(in_namespace(swarm, '/uav1')), wait=0.0) is None


def test_plan_launch_description_refuses_what_launch_problem_names():
    """Read from the source: the launch package (launch_support's imports) is not here."""
    tree = ast.parse(LAUNCH_SUPPORT.read_text())
    imported = {(node.module, alias.name) for node in tree.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert ('soliton_encirclement_ros.sim.domain', 'launch_problem') in imported
    describe = next(node for node in tree.body if isinstance(node, ast.FunctionDef)
                    and node.name == 'plan_launch_description')
    nodes = next(node for node in ast.walk(describe) if isinstance(node, ast.FunctionDef)
                 and node.name == 'nodes')
    body = [ast.unparse(statement) for statement in nodes.body]
    checked = next(i for i, text in enumerate(body)
                   if text == 'busy = launch_problem((spec.executable for spec in node_specs), '
                   'hold=True)')
    assert body[checked + 1] == 'if busy:\n    raise LaunchRefused(busy)'
    started = next(i for i, text in enumerate(body) if text.startswith('return'))
    assert checked < started and 'launch_nodes(node_specs, ' in body[started]


def test_a_run_announces_itself_on_a_roster_topic_that_orders_runs_by_start():
    from soliton_encirclement_ros.sim.domain import new_roster_topic, roster_order
    first, first_order = new_roster_topic()
    second, second_order = new_roster_topic()
    assert roster_order(first) == first_order and roster_order(second) == second_order
    assert first_order < second_order  # started earlier wins; a tie goes by pid, then nonce
    assert roster_order('/clock') is None and roster_order('/_swarm_run_x_1_a') is None


def test_the_domain_suggested_instead_is_the_next_one_and_wraps_past_the_last():
    """A swarm refused in the last domain Fast DDS takes (232) is not told to use 233."""
    assert suggested_domain(0) == 1
    assert suggested_domain(41) == 42
    assert suggested_domain(231) == 232
    assert suggested_domain(232) == 1
