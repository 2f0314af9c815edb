"""One agent's controller plus the PX4 offboard bridge, for one real vehicle.

    ros2 launch soliton_encirclement_ros agent_px4.launch.py agent_name:=uav1 agent_id:=1 \
        px4_namespace:='' target_system:=1

Arming and OFFBOARD are never automatic: call /<agent_name>/px4_bridge/engage when ready.
"""
import os

from ament_index_python.packages import get_package_share_directory

from soliton_encirclement_ros.graph import SwarmPlan, build_graph, in_namespace
from soliton_encirclement_ros.launch_support import plan_launch_description

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'agent_name': ('uav1', 'vehicle name and namespace of cmd_vel/odom'),
    'agent_id': ('1', 'integer id of this agent in the swarm'),
    'px4_namespace': ('', "PX4 uXRCE-DDS namespace: '' for /fmu/..., px4_1 for /px4_1/fmu/..."),
    'target_system': ('1', 'MAV_SYS_ID of the autopilot'),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'params_file': (os.path.join(SHARE, 'config', 'px4_bridge.yaml'), 'ROS 2 parameter YAML'),
}


def _specs(value):
    plan = SwarmPlan(num_agents=1, names=(value['agent_name'],), ids=(int(value['agent_id']),),
                     mode='px4', use_sim_time=False, radius=float(value['radius']),
                     params_files=(value['params_file'],) if value['params_file'] else (),
                     px4_namespaces=(value['px4_namespace'],),
                     px4_target_systems=(int(value['target_system']),))
    return in_namespace(build_graph(plan), f'/{value["agent_name"]}')


def generate_launch_description():
    return plan_launch_description(ARGUMENTS, _specs)
