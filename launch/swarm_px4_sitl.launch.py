"""N agents against N PX4 SITL instances px4_1..px4_N (MAV_SYS_ID 2..N+1), plus target and metrics.

    ros2 launch soliton_encirclement_ros swarm_px4_sitl.launch.py num_agents:=3 \
        origins:='0,0,0;0,3,0;0,6,0'

``origins`` are the SITL spawn positions (PX4_GZ_MODEL_POSE x,y,z in ENU), one per vehicle:
every PX4 measures from its own spawn point, the bridge shifts odometry into the shared frame.
"""
import os

from ament_index_python.packages import get_package_share_directory

from soliton_encirclement_ros.graph import SwarmPlan, build_graph
from soliton_encirclement_ros.launch_support import plan_launch_description

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'num_agents': ('3', 'number of PX4 SITL vehicles (px4_1..px4_N)'),
    'origins': ('', "spawn positions 'x,y,z;x,y,z;...' (ENU, one per vehicle); empty = all at 0"),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'target_motion': ('static', 'static, random or waypoints'),
    'params_file': (os.path.join(SHARE, 'config', 'px4_bridge.yaml'), 'ROS 2 parameter YAML'),
    'use_sim_time': ('true', 'follow the SITL /clock (bridge it from Gazebo)'),
}


def _specs(value):
    origins = tuple(tuple(float(c) for c in item.split(',')) for item in value['origins'].split(';') if item)
    plan = SwarmPlan(num_agents=int(value['num_agents']), mode='px4', radius=float(value['radius']),
                     target_motion=value['target_motion'], px4_origins=origins,
                     use_sim_time=value['use_sim_time'].lower() == 'true',
                     params_files=(value['params_file'],) if value['params_file'] else ())
    return build_graph(plan)


def generate_launch_description():
    return plan_launch_description(ARGUMENTS, _specs)
