"""
The vehicle model, pure: limits, the vectorised step, geometry, the command buffer.

    from velocity_mobility_ros.core import step, VehicleParams, VehicleState
"""
from velocity_mobility_ros.core.commands import CommandBuffer
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import InterfaceParams, VehicleParams

__all__ = ['CommandBuffer', 'InterfaceParams', 'step', 'VehicleParams', 'VehicleState']
