"""
Every node executable's declared parameters, by executable name (imports rclpy).

One table for what reads all of them: the parameter tables (docs/reference/parameters.md)
(``scripts/readme_parameters.py``) and the launch files' check that every parameter given is
declared by some node of the graph (``bringup.launch_support``).
"""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def node_parameters() -> dict:
    """Return every node's parameter specs, in declaration order, by executable name."""
    from soliton_encirclement_ros.nodes import agent_node, metrics_node, target_node
    from soliton_encirclement_ros.px4 import bridge_node
    from velocity_mobility_ros.nodes import mobility_node, swarm_mobility_node
    return {
        'mobility_node': mobility_node.PARAMETERS,
        'swarm_mobility_node': swarm_mobility_node.PARAMETERS,
        'agent_node': agent_node.PARAMETERS,
        'target_node': target_node.PARAMETERS,
        'metrics_node': metrics_node.PARAMETERS,
        'px4_bridge_node': bridge_node.PARAMETERS,
    }
