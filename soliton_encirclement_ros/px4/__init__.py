"""
PX4 offboard: frame conversions and the engage sequencer (pure), and the bridge node (shell).

    from soliton_encirclement_ros.px4 import OffboardConfig, OffboardSequencer

The sequencer is imported on first use: a tool that needs only ``px4.geo`` (the simulators'
geo reference check) does not load it.
"""

__all__ = ['OffboardConfig', 'OffboardSequencer', 'Phase']


def __getattr__(name: str):
    if name in __all__:
        from soliton_encirclement_ros.px4 import offboard
        return getattr(offboard, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
