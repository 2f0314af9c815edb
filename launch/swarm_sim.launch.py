"""
N simulated UAVs encircling a target: the graph of soliton_encirclement_ros.bringup.graph.

    ros2 launch soliton_encirclement_ros swarm_sim.launch.py num_agents:=10 rviz:=true
    ros2 launch soliton_encirclement_ros swarm_sim.launch.py foxglove:=true   # Foxglove, port 8765

The swarm mobility node simulates every vehicle and, with use_sim_time, publishes /clock.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch_ros.actions import Node

from soliton_encirclement_ros.bringup.graph import rviz_problem
from soliton_encirclement_ros.bringup.launch_plans import (
    log_level, LOG_LEVEL_ARGUMENT, SAFETY_AREA_HELP, swarm_sim_nodes)
from soliton_encirclement_ros.bringup.launch_support import (
    LIVE_VIEW_ARGUMENTS, live_view_nodes, package_found, plan_launch_description)

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'num_agents': ('10', 'number of simulated UAVs'),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'params_file': (
        os.path.join(SHARE, 'config', 'swarm.yaml'),
        'ROS 2 parameter YAML for every node',
    ),
    'use_sim_time': ('true', 'run on the simulated /clock published by the swarm mobility node'),
    'real_time_factor': ('1.0', 'sim seconds per wall second of the simulated clock'),
    'seed': ('0', 'seed of initial poses, target motion and failures'),
    'control_period': ('0.05', 'agent control period [s]'),
    'target_motion': ('static', 'static, random or waypoints'),
    'rviz': ('false', 'start RViz with config/swarm.rviz'),
    **LIVE_VIEW_ARGUMENTS,
    'safety_area': ('', SAFETY_AREA_HELP),
    **LOG_LEVEL_ARGUMENT,
}


def _wants_rviz(value):
    return value.flag('rviz')


def _rviz(value):
    if not _wants_rviz(value):
        return []
    return [Node(package='rviz2', executable='rviz2',
                 arguments=['-d', os.path.join(SHARE, 'config', 'swarm.rviz')],
                 parameters=[{'use_sim_time': value.flag('use_sim_time')}],
                 ros_arguments=['--log-level', log_level(value)])]


def _extra(value):
    return _rviz(value) + live_view_nodes(value, value.flag('use_sim_time'))


def generate_launch_description():
    return plan_launch_description(
        ARGUMENTS, swarm_sim_nodes, extra=_extra,
        problem=lambda value: rviz_problem(_wants_rviz(value), package_found))
