"""
Start one mobility_node in a vehicle namespace with the default (reference) parameters.

ros2 launch soliton_encirclement_ros mobility.launch.py namespace:=uav1 \
    params_file:=/path/to/mobility.yaml use_sim_time:=false log_level:=debug
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from soliton_encirclement_ros.bringup.launch_plans import LOG_LEVELS

PACKAGE = 'soliton_encirclement_ros'


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription([
        DeclareLaunchArgument('namespace', default_value='uav1',
                              description='Vehicle name: namespace of cmd_vel and odom'),
        DeclareLaunchArgument(
            'params_file',
            default_value=PathJoinSubstitution([FindPackageShare(PACKAGE), 'config',
                                                'mobility.yaml']),
            description='mobility_node parameter YAML'),
        DeclareLaunchArgument('use_sim_time', default_value='false',
                              description='Step and stamp on /clock'),
        DeclareLaunchArgument('log_level', default_value='info',
                              choices=list(LOG_LEVELS),
                              description='log level of the node: ' + ', '.join(LOG_LEVELS)),
        Node(
            package=PACKAGE,
            executable='mobility_node',
            name='mobility',
            namespace=LaunchConfiguration('namespace'),
            parameters=[LaunchConfiguration('params_file'),
                        {'use_sim_time': LaunchConfiguration('use_sim_time')}],
            ros_arguments=['--log-level', LaunchConfiguration('log_level')],
            output='screen',
        ),
    ])
