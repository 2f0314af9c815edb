"""
``sweep_sim``'s entry point, light on purpose.

It installs the stop handler before numpy, the simulator and matplotlib are imported (about a
second, longer on a loaded machine), so Ctrl-C is one line at any point, even while sweep_sim
starts. The work is in :mod:`soliton_encirclement_ros.sim.sweep`.
"""
from __future__ import annotations

from typing import Iterable, Optional

from ros_support.signals import StopRequest


def main(argv: Optional[Iterable[str]] = None) -> int:
    stop = StopRequest('sweep_sim').install()
    from soliton_encirclement_ros.sim import sweep
    return sweep.main(argv, stop)
