"""docs/reference/parameters.md's tables are the nodes' own specs; every parameter is in one."""
import importlib.util
from pathlib import Path

import rclpy
from rclpy.context import Context

from ros_support.ros_parameters import declared_names
from ros_support.validation import BUILTIN_PARAMETERS
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from soliton_encirclement_ros.nodes.target_node import TargetNode
from velocity_mobility_ros.nodes.mobility_node import MobilityNode
from velocity_mobility_ros.nodes.swarm_mobility_node import SwarmMobilityNode

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location('readme_parameters',
                                               ROOT / 'scripts' / 'readme_parameters.py')
readme_parameters = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readme_parameters)


def test_the_readme_tables_are_generated_from_the_specs():
    text = (ROOT / 'docs' / 'reference' / 'parameters.md').read_text()
    assert readme_parameters.render(text) == text, (
        'docs/reference/parameters.md is stale: run .venv/bin/python scripts/readme_parameters.py')
    shown = [m.group('node') for m in readme_parameters.BLOCK.finditer(text)]
    assert sorted(shown) == sorted(readme_parameters.blocks())  # each table once


def test_every_parameter_a_node_declares_is_in_its_table():
    """Started nodes: what they really declare, against PARAMETERS (which the tables show)."""
    context = Context()
    rclpy.init(context=context)
    nodes = {
        'mobility_node': MobilityNode(context=context, namespace='/uav9'),
        'swarm_mobility_node': SwarmMobilityNode(context=context, parameter_overrides=[
            rclpy.parameter.Parameter('vehicle_names', value=['a'])]),
        'agent_node': AgentNode(context=context, namespace='/uav9'),
        'target_node': TargetNode(context=context, namespace='/target'),
        'metrics_node': MetricsNode(context=context),
    }
    try:
        specs = readme_parameters.node_parameters()
        for name, node in nodes.items():
            declared = declared_names(node) - set(BUILTIN_PARAMETERS)
            listed = {spec.name for spec in specs[name]}
            assert declared == listed, (name, declared ^ listed)
    finally:
        for node in nodes.values():
            node.destroy_node()
        rclpy.try_shutdown(context=context)
