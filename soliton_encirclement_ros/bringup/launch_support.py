"""What the launch files share (imported only by them): plan arguments -> launch_ros Nodes."""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from ament_index_python.packages import get_package_prefix
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
import launch.logging
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from ros_support.validation import unknown_parameters
from soliton_encirclement_ros.bringup.graph import (
    given_parameters, launch_plan, LaunchArguments, LaunchRefused, NodeSpec, precedence_notes)
from soliton_encirclement_ros.bringup.launch_plans import log_level, value_problem
from soliton_encirclement_ros.nodes.catalogue import node_parameters
from soliton_encirclement_ros.sim.domain import launch_problem


def launch_nodes(specs: Iterable[NodeSpec], output: str = 'screen',
                 level: str = 'info') -> list[Node]:
    """
    One launch_ros Node per spec: parameter files first, then the plan's values (which win).

    ``level``: every node's log level (``--ros-args --log-level``).
    """
    return [Node(package=spec.package, executable=spec.executable, name=spec.name,
                 namespace=spec.namespace or None,
                 parameters=[*spec.params_files, dict(spec.parameters)],
                 remappings=list(spec.remappings), output=output,
                 ros_arguments=['--log-level', level])
            for spec in specs]


# The launch arguments that start the live view (the ``live_view`` node, foxglove-sdk).
LIVE_VIEW_ARGUMENTS = {
    'foxglove': ('false', 'start the live_view node: the swarm in Foxglove at '
                 'ws://<foxglove_host>:<foxglove_port> (needs foxglove-sdk)'),
    'foxglove_port': ('8765', 'port of the live view'),
    'foxglove_host': ('127.0.0.1', "address the live view binds ('0.0.0.0': every interface, "
                      'anyone on the network can watch; it offers no command)'),
}


def live_view_nodes(values, use_sim_time: bool) -> list[Node]:
    """Return the ``live_view`` node when ``foxglove:=true``, else nothing."""
    if not values.flag('foxglove'):
        return []
    return [Node(package='soliton_encirclement_ros', executable='live_view', output='screen',
                 parameters=[{'use_sim_time': use_sim_time,
                              'port': values.integer('foxglove_port'),
                              'host': values['foxglove_host']}],
                 ros_arguments=['--log-level', log_level(values)])]


def package_found(package: str) -> bool:
    """Whether ``package`` is in the ament index (what launch_ros needs to start it)."""
    try:
        get_package_prefix(package)
    except (LookupError, OSError):
        return False
    return True


def plan_launch_description(arguments: Mapping[str, tuple[str, str]],
                            specs: Callable[[LaunchArguments], list[NodeSpec]],
                            extra: Callable[[LaunchArguments], list] = lambda values: [],
                            problem: Callable[[LaunchArguments], str | None] = lambda values: None,
                            notes: Callable[[LaunchArguments], list[str]] = lambda values: [],
                            ) -> LaunchDescription:
    """
    Declare ``arguments`` ({name: (default, description)}) and start the planned nodes.

    Then start the nodes that ``specs(values)`` plans from the argument values (a
    :class:`LaunchArguments`) and the actions ``extra(values)``, each node at the
    ``log_level`` argument's level; ``notes(values)`` are logged as warnings. When
    ``problem(values)`` names one, nothing starts: launch logs it as an error and ``ros2
    launch`` exits 1 (``graph.launch_plan`` raises ``LaunchRefused``). Nor when a node would
    refuse a parameter's name or value at start-up (a params file's ``k_r: -3.0``: the check
    each node runs, ``launch_plans.value_problem``), nor when the nodes form a swarm of their
    own and another swarm runs in the ROS domain: the one line of ``swarm_sim``
    (``sim.domain.launch_problem``).
    """
    given: set[str] = set()

    def before_defaults(context):
        # Runs before the DeclareLaunchArgument actions fill in their defaults: what is set
        # now was given (command line, or an including launch file).
        given.update(name for name in arguments if name in context.launch_configurations)

    def nodes(context):
        values = LaunchArguments(
            {name: LaunchConfiguration(name).perform(context) for name in arguments},
            given=given)
        node_specs, actions = launch_plan(values, specs, extra, problem)
        unknown = unknown_parameters(given_parameters(node_specs), {
            spec.name for node in node_specs
            for spec in node_parameters().get(node.executable, ())})
        if unknown:  # as swarm_sim: a misspelt parameter starts nothing
            raise LaunchRefused(f'unknown parameter(s): {", ".join(unknown)}')
        bad = value_problem(node_specs)
        if bad:  # a value every node of that kind would exit on: nothing starts either
            raise LaunchRefused(bad)
        level = log_level(values)
        busy = launch_problem((spec.executable for spec in node_specs), hold=True)
        if busy:  # as swarm_sim: another swarm in the domain starts nothing
            raise LaunchRefused(busy)
        for note in [*precedence_notes(node_specs), *notes(values)]:
            launch.logging.get_logger('launch').warning(note)
        return [*launch_nodes(node_specs, level=level), *actions]

    return LaunchDescription([
        OpaqueFunction(function=before_defaults),
        *[DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in arguments.items()],
        OpaqueFunction(function=nodes),
    ])
