"""
Simulation drivers without ROS: one run (``batch_sim``) and parameter sweeps (``sweep_sim``).

    from soliton_encirclement_ros.sim import simulate
    result = simulate(Scenario(agents=10, duration=60.0))

``swarm_sim`` (``sim.runner``, with ``sim.inprocess`` and ``sim.processes``) runs the ROS graph.
"""
from soliton_encirclement_ros.sim.batch_sim import RunResult, simulate

__all__ = ['RunResult', 'simulate']
