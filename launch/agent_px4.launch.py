"""
One agent's controller plus the PX4 offboard bridge, for one real vehicle.

    ros2 launch soliton_encirclement_ros agent_px4.launch.py agent_name:=uav1 agent_id:=1 \
        px4_namespace:='' target_system:=1 origin:='0,0,0'

Arming and OFFBOARD are never automatic: call /<agent_name>/px4_bridge/engage when ready; the
agent then climbs to ``altitude`` and joins the ring. ``origin`` is where this PX4's local NED
origin (where its estimator initialised, usually the take-off point) lies in the shared world
ENU frame: every vehicle of the swarm must agree on that frame. With
``geo_reference:=lat,lon,alt`` (the field's shared origin) the bridge places the vehicle from its
own GPS instead (PX4's estimator reference), and a given ``origin`` is checked against it: off by
more than 3 m refuses the engage. Swarm topics are best effort
(radio links between companion computers): use the same swarm_reliability on every host.

``simulated:=<agent_name>`` flies this agent on the mobility simulation (a mobility_node starting
at ``origin``) instead of a PX4: a simulated member of a real swarm, on any host. The PX4
arguments are then unused; no bridge starts.
"""
import os

from ament_index_python.packages import get_package_share_directory

from soliton_encirclement_ros.bringup.launch_plans import (
    agent_px4_nodes, LOG_LEVEL_ARGUMENT, SAFETY_AREA_HELP)
from soliton_encirclement_ros.bringup.launch_support import plan_launch_description

SHARE = get_package_share_directory('soliton_encirclement_ros')
ARGUMENTS = {
    'agent_name': ('uav1', 'vehicle name and namespace of cmd_vel/odom'),
    'agent_id': ('1', 'integer id of this agent in the swarm'),
    'px4_namespace': ('', "PX4 uXRCE-DDS namespace: '' for /fmu/..., px4_1 for /px4_1/fmu/..."),
    'target_system': ('1', 'MAV_SYS_ID of the autopilot'),
    'origin': ('0,0,0', "x,y,z [m] of this PX4's local origin in the world ENU frame"),
    'geo_reference': ('', "the field's shared world origin 'lat,lon,alt' (deg, deg, m AMSL); "
                      'given: the bridges place the vehicles from their own GPS (origin_source '
                      'gps), and check a given origin against it'),
    'altitude': ('10.0', 'altitude hold of the agent [m, world ENU z]; nan = off'),
    'swarm_reliability': ('best_effort', 'QoS of the swarm topics (the same on every host)'),
    'radius': ('20.0', 'encirclement radius R [m]'),
    'd_safe': ('2.0', 'separation: every vehicle heard closer than this is pushed away [m]; '
               'a lower value (here or in params_file) is refused unless allow_no_separation'),
    'allow_no_separation': ('false', 'true: fly with a d_safe below 2.0 (or 0: none), each '
                            'agent warning at start-up; not for real vehicles'),
    'params_file': (os.path.join(SHARE, 'config', 'px4_bridge.yaml'), 'ROS 2 parameter YAML'),
    'simulated': ('', "this agent's name to fly it on the mobility simulation, not PX4; "
                  'empty = PX4'),
    'safety_area': ('', SAFETY_AREA_HELP),
    **LOG_LEVEL_ARGUMENT,
}


def generate_launch_description():
    return plan_launch_description(ARGUMENTS, agent_px4_nodes)
