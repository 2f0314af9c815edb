"""
The node-graph plan (one pure function for launch files and runners) and launch helpers.

    from soliton_encirclement_ros.bringup import build_graph, SwarmPlan

``launch_support`` needs ROS 2's ``launch``/``launch_ros`` and is imported by launch files only.
"""
from soliton_encirclement_ros.bringup.graph import (
    build_graph, in_namespace, LaunchArguments, live_scenario, NodeSpec, parse_origins,
    parse_simulated, precedence_notes, SwarmPlan)

__all__ = ['build_graph', 'in_namespace', 'LaunchArguments', 'live_scenario', 'NodeSpec',
           'parse_origins', 'parse_simulated', 'precedence_notes', 'SwarmPlan']
