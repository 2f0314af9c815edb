"""
``swarm_mobility_node``: many simulated vehicles in one node, one vectorised step per tick.

Each vehicle keeps its own ``/<name>/cmd_vel`` and ``/<name>/odom`` topics and
``<name>/base_link`` frame, exactly as a ``mobility_node`` in namespace ``<name>`` would.
"""
from __future__ import annotations

from typing import Any, Sequence

from ros_support.ros_parameters import declare, specs_of
from ros_support.spin import spin_node
from ros_support.validation import from_mapping
from velocity_mobility_ros.core.model import VehicleState
from velocity_mobility_ros.core.vehicle import SwarmPoseSettings
from velocity_mobility_ros.nodes.mobility_node import (
    CLOCK_PARAMS, MOBILITY_PARAMS, MobilityNodeBase, VehicleIO)

SWARM_PARAMS = tuple(specs_of(SwarmPoseSettings))
# Everything swarm_mobility_node declares, in order (docs/reference/parameters.md).
PARAMETERS = (*MOBILITY_PARAMS, *SWARM_PARAMS, *CLOCK_PARAMS)


def swarm_initial_state(names: Sequence[str], initial_positions: Sequence[float],
                        initial_yaws: Sequence[float]) -> VehicleState:
    """Return the validated initial state of the named vehicles from the flat pose parameters."""
    poses = SwarmPoseSettings(names, initial_positions, initial_yaws)
    return VehicleState.at_rest(poses.positions(), poses.yaws())


class SwarmMobilityNode(MobilityNodeBase):
    """Node ``swarm_mobility``: simulates every vehicle of ``vehicle_names``."""

    def __init__(self, node_name: str = 'swarm_mobility', **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)

    def _declare_vehicles(self) -> tuple[list[VehicleIO], VehicleState]:
        poses = from_mapping(SwarmPoseSettings, declare(self, SWARM_PARAMS))
        names = poses.vehicle_names
        state = VehicleState.at_rest(poses.positions(), poses.yaws())
        vehicles = [VehicleIO(name, f'/{name}/cmd_vel', f'/{name}/odom', f'{name}/base_link')
                    for name in names]
        return vehicles, state


def main(args: list[str] | None = None) -> None:
    spin_node(SwarmMobilityNode, args)


if __name__ == '__main__':
    main()
