"""
``swarm_mobility_node``: many simulated vehicles in one node, one vectorised step per tick.

Each vehicle keeps its own ``/<name>/cmd_vel`` and ``/<name>/odom`` topics and
``<name>/base_link`` frame, exactly as a ``mobility_node`` in namespace ``<name>`` would.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from rclpy.parameter import Parameter

from ros_support.params import declare, ParamSpec
from ros_support.spin import spin_node
from velocity_mobility_ros.core.model import VehicleState
from velocity_mobility_ros.nodes.mobility_node import (
    CLOCK_PARAMS, MOBILITY_PARAMS, MobilityNodeBase, VehicleIO)

SWARM_PARAMS = (
    ParamSpec('vehicle_names', [], 'Vehicle names; each gets /<name>/cmd_vel, /<name>/odom and '
              'frame <name>/base_link', read_only=True, value_type=Parameter.Type.STRING_ARRAY),
    ParamSpec('initial_positions', [], 'Initial positions, flat [x1, y1, z1, x2, ...] in '
              'vehicle_names order [m]; empty = all at the origin', read_only=True,
              value_type=Parameter.Type.DOUBLE_ARRAY),
    ParamSpec('initial_yaws', [], 'Initial yaws [rad] in vehicle_names order; empty = all 0',
              read_only=True, value_type=Parameter.Type.DOUBLE_ARRAY),
)
# Everything swarm_mobility_node declares, in order (the README table comes from it).
PARAMETERS = (*MOBILITY_PARAMS, *SWARM_PARAMS, *CLOCK_PARAMS)


def swarm_initial_state(names: Sequence[str], initial_positions: Sequence[float],
                        initial_yaws: Sequence[float]) -> VehicleState:
    """Return the validated initial state of the named vehicles from the flat pose parameters."""
    n = len(names)
    if n == 0:
        raise ValueError('vehicle_names must list at least one vehicle, got []')
    duplicates = sorted({name for name in names if list(names).count(name) > 1})
    if duplicates:
        raise ValueError(f'vehicle_names must be unique, got duplicates {duplicates}')
    positions = np.zeros((n, 3)) if len(initial_positions) == 0 else np.asarray(
        initial_positions, dtype=float)
    if positions.size != 3 * n:
        raise ValueError(f'initial_positions must hold 3 values per vehicle ({3 * n} for '
                         f'{n} vehicles), got {positions.size}')
    yaws = np.zeros(n) if len(initial_yaws) == 0 else np.asarray(initial_yaws, dtype=float)
    if yaws.size != n:
        raise ValueError(f'initial_yaws must hold one value per vehicle ({n}), got {yaws.size}')
    return VehicleState.at_rest(positions.reshape(n, 3), yaws)


class SwarmMobilityNode(MobilityNodeBase):
    """Node ``swarm_mobility``: simulates every vehicle of ``vehicle_names``."""

    def __init__(self, node_name: str = 'swarm_mobility', **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)

    def _declare_vehicles(self) -> tuple[list[VehicleIO], VehicleState]:
        values = declare(self, SWARM_PARAMS)
        names = values['vehicle_names']
        state = swarm_initial_state(names, values['initial_positions'], values['initial_yaws'])
        vehicles = [VehicleIO(name, f'/{name}/cmd_vel', f'/{name}/odom', f'{name}/base_link')
                    for name in names]
        return vehicles, state


def main(args: list[str] | None = None) -> None:
    spin_node(SwarmMobilityNode, args)


if __name__ == '__main__':
    main()
