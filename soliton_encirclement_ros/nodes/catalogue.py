"""
Every node executable's declared parameters, by executable name (imports rclpy).

One table for what reads all of them: the parameter tables (docs/reference/parameters.md)
(``scripts/readme_parameters.py``) and the launch files' check that every parameter given is
declared by some node of the graph (``bringup.launch_support``). :func:`node_checks` is the
validation each node runs on its declared values (its settings objects), so a launch can refuse
a bad value before any node starts (``bringup.launch_plans.value_problem``).
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


@lru_cache(maxsize=1)
def node_checks() -> dict:
    """
    Return, by executable, the groups its node validates: ``((specs, validate), ...)``.

    ``validate(values)`` is what the node calls on the declared values of ``specs`` at
    start-up (its settings objects): it raises ``ValueError`` in one line naming the
    parameter and the rule.
    """
    from ros_support.validation import from_mapping
    from soliton_encirclement_ros.core.gains import ControllerParams
    from soliton_encirclement_ros.nodes import agent_node, metrics_node, target_node
    from soliton_encirclement_ros.nodes.settings import (
        AgentSettings, MetricsSettings, TargetSettings)
    from soliton_encirclement_ros.px4 import bridge_node
    from velocity_mobility_ros.core.vehicle import (
        ClockSettings, PoseSettings, split_node_params, SwarmPoseSettings)
    from velocity_mobility_ros.nodes import mobility_node, swarm_mobility_node

    def settings(cls):
        return lambda values: from_mapping(cls, values)
    vehicle = (mobility_node.MOBILITY_PARAMS, split_node_params)
    clock = (mobility_node.CLOCK_PARAMS, settings(ClockSettings))
    return {
        'mobility_node': (vehicle, (mobility_node.MobilityNode.POSE_PARAMS,
                                    settings(PoseSettings)), clock),
        'swarm_mobility_node': (vehicle, (swarm_mobility_node.SWARM_PARAMS,
                                          settings(SwarmPoseSettings)), clock),
        'agent_node': ((agent_node.CONTROLLER_SPECS, ControllerParams.from_mapping),
                       (agent_node.NODE_SPECS, AgentSettings.from_mapping)),
        'target_node': ((target_node.SPECS, TargetSettings.from_mapping),),
        'metrics_node': ((metrics_node.SPECS, MetricsSettings.from_mapping),),
        'px4_bridge_node': ((bridge_node.PARAMS, bridge_node.BridgeSettings.from_mapping),),
    }
