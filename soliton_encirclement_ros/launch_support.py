"""NodeSpec -> launch_ros.actions.Node, for the launch files (imported only by them)."""
from __future__ import annotations

from typing import Iterable

from launch_ros.actions import Node

from .graph import NodeSpec


def launch_nodes(specs: Iterable[NodeSpec], output: str = 'screen') -> list[Node]:
    """One launch_ros Node per spec: parameter files first, then the plan's explicit values."""
    return [Node(package=spec.package, executable=spec.executable, name=spec.name,
                 namespace=spec.namespace or None,
                 parameters=[*spec.params_files, dict(spec.parameters)],
                 remappings=list(spec.remappings), output=output)
            for spec in specs]
