"""
Start one mobility_node in a vehicle namespace with the default (reference) parameters.

ros2 launch soliton_encirclement_ros mobility.launch.py namespace:=uav1 \
    params_file:=/path/to/mobility.yaml use_sim_time:=false log_level:=debug

A params file value the node would refuse (``max_speed_xy: -1.0``), or a parameter it does not
have, ends the launch with one line before the node starts.
"""
import os

from ament_index_python.packages import get_package_share_directory

from soliton_encirclement_ros.bringup.launch_plans import LOG_LEVEL_ARGUMENT, mobility_nodes
from soliton_encirclement_ros.bringup.launch_support import plan_launch_description

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'namespace': ('uav1', 'Vehicle name: namespace of cmd_vel and odom'),
    'params_file': (os.path.join(SHARE, 'config', 'mobility.yaml'),
                    'mobility_node parameter YAML'),
    'use_sim_time': ('false', 'Step and stamp on /clock'),
    **LOG_LEVEL_ARGUMENT,
}


def generate_launch_description():
    return plan_launch_description(ARGUMENTS, mobility_nodes)
