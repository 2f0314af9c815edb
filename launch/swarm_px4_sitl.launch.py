"""
N agents against N PX4 SITL instances px4_1..px4_N (MAV_SYS_ID 2..N+1), plus target and metrics.

    ros2 launch soliton_encirclement_ros swarm_px4_sitl.launch.py num_agents:=3
    ros2 launch soliton_encirclement_ros swarm_px4_sitl.launch.py num_agents:=3 \
        origins:='0,1,0;0,2,0;0,3,0'

``origins`` are the SITL spawn positions (PX4_GZ_MODEL_POSE x,y,z in the Gazebo/ENU world), one
per vehicle: every PX4 measures from its own spawn point, and the bridge shifts odometry into the
shared frame. The default matches PX4's Tools/simulation/gz_multi_vehicle.sh: instance i at
(0, i * spawn_spacing, 0). Engage each vehicle (/<name>/px4_bridge/engage): it arms, climbs to
``altitude`` and joins the ring.

``simulated:=uav3,uav4`` flies those agents on the mobility simulation (one mobility_node each,
starting at their origin) instead of PX4 instances px4_3, px4_4 (not needed then); the others
keep their PX4 (agent i: px4_i). A name that is not an agent, or is listed twice, is refused.
With every agent simulated there is no SITL and no /clock: use_sim_time is then false unless
given (and given true, one warning says that nothing of this launch publishes /clock).
"""
import os

from ament_index_python.packages import get_package_share_directory

from soliton_encirclement_ros.bringup.launch_plans import (
    LOG_LEVEL_ARGUMENT, SAFETY_AREA_HELP, sitl_use_sim_time, swarm_px4_sitl_nodes)
from soliton_encirclement_ros.bringup.launch_support import (
    LIVE_VIEW_ARGUMENTS, live_view_nodes, plan_launch_description)

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'num_agents': ('3', 'number of PX4 SITL vehicles (px4_1..px4_N)'),
    'origins': (
        '',
        "spawn positions 'x,y,z;x,y,z;...' (ENU, one per vehicle); empty = "
        "instance i at (0, i * spawn_spacing, 0) as PX4's gz_multi_vehicle.sh places them",
    ),
    'spawn_spacing': ('1.0', 'y spacing of the default origins [m] (gz_multi_vehicle.sh)'),
    'geo_reference': ('', "the field's shared world origin 'lat,lon,alt' (deg, deg, m AMSL); "
                      'given: the bridges place the vehicles from their own GPS (origin_source '
                      'gps), and check a given origin against it'),
    'altitude': ('10.0', 'altitude hold of the agents [m, world ENU z]; nan = off'),
    'swarm_reliability': ('best_effort', 'QoS of the swarm topics'),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'd_safe': ('2.0', 'separation: every vehicle heard closer than this is pushed away [m]; '
               'a lower value (here or in params_file) is refused unless allow_no_separation'),
    'allow_no_separation': ('false', 'true: fly with a d_safe below 2.0 (or 0: none), each '
                            'agent warning at start-up; not for real vehicles'),
    'target_motion': ('static', 'static, random or waypoints'),
    'params_file': (os.path.join(SHARE, 'config', 'px4_bridge.yaml'), 'ROS 2 parameter YAML'),
    'use_sim_time': ('true', 'follow the SITL /clock (bridge it from Gazebo); false by default '
                     'when every agent is simulated (no SITL then)'),
    'simulated': ('', "agents flown on the mobility simulation, not PX4, e.g. 'uav3,uav4'; "
                  'empty = none'),
    **LIVE_VIEW_ARGUMENTS,
    'safety_area': ('', SAFETY_AREA_HELP),
    **LOG_LEVEL_ARGUMENT,
}


def generate_launch_description():
    return plan_launch_description(
        ARGUMENTS, swarm_px4_sitl_nodes,
        extra=lambda value: live_view_nodes(value, sitl_use_sim_time(value)[0]),
        notes=lambda value: [note for note in sitl_use_sim_time(value)[1:] if note])
