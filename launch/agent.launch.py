"""
One agent's controller, e.g. on a companion computer next to its vehicle driver.

    ros2 launch soliton_encirclement_ros agent.launch.py agent_name:=uav3 agent_id:=3

The controller reads <agent_name>/odom and writes <agent_name>/cmd_vel; it meets the rest of
the swarm on /swarm/agent_states and the target on /target/state, best effort by default (a
radio link between hosts): the target and metrics hosts must use the same swarm_reliability.
"""
from soliton_encirclement_ros.bringup.launch_plans import (
    agent_nodes, LOG_LEVEL_ARGUMENT, SAFETY_AREA_HELP)
from soliton_encirclement_ros.bringup.launch_support import plan_launch_description

ARGUMENTS = {
    'agent_name': ('uav1', 'vehicle name and namespace'),
    'agent_id': ('1', 'integer id of this agent in the swarm'),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'params_file': ('', 'ROS 2 parameter YAML (optional)'),
    'use_sim_time': ('false', 'use /clock'),
    'swarm_reliability': ('best_effort', 'QoS of the swarm topics: best_effort over radio links, '
                          'reliable on one host; the same on every host'),
    'altitude': ('nan', 'altitude hold [m, world ENU z]; nan = off'),
    'safety_area': ('', SAFETY_AREA_HELP),
    **LOG_LEVEL_ARGUMENT,
}


def generate_launch_description():
    return plan_launch_description(ARGUMENTS, agent_nodes)
