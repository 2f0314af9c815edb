"""What the launch files share (imported only by them): plan arguments -> launch_ros Nodes."""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from .graph import NodeSpec


def launch_nodes(specs: Iterable[NodeSpec], output: str = 'screen') -> list[Node]:
    """One launch_ros Node per spec: parameter files first, then the plan's explicit values."""
    return [Node(package=spec.package, executable=spec.executable, name=spec.name,
                 namespace=spec.namespace or None,
                 parameters=[*spec.params_files, dict(spec.parameters)],
                 remappings=list(spec.remappings), output=output)
            for spec in specs]


def plan_launch_description(arguments: Mapping[str, tuple[str, str]],
                            specs: Callable[[dict[str, str]], list[NodeSpec]],
                            *actions) -> LaunchDescription:
    """Declare ``arguments`` ({name: (default, description)}), then start the nodes that
    ``specs(values)`` plans from the argument values; ``actions`` are appended as they are."""
    def nodes(context):
        return launch_nodes(specs({name: LaunchConfiguration(name).perform(context) for name in arguments}))

    return LaunchDescription([
        *[DeclareLaunchArgument(name, default_value=default, description=description)
          for name, (default, description) in arguments.items()],
        OpaqueFunction(function=nodes),
        *actions,
    ])
