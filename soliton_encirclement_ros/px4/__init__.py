"""
PX4 offboard: frame conversions and the engage sequencer (pure), and the bridge node (shell).

    from soliton_encirclement_ros.px4 import OffboardConfig, OffboardSequencer
"""
from soliton_encirclement_ros.px4.offboard import OffboardConfig, OffboardSequencer, Phase

__all__ = ['OffboardConfig', 'OffboardSequencer', 'Phase']
