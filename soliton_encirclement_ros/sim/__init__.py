"""
Simulation drivers without ROS: one run (``batch_sim``) and parameter sweeps (``sweep_sim``).

    from soliton_encirclement_ros.sim import simulate
    result = simulate(Scenario(agents=10, duration=60.0))

``swarm_sim`` (``sim.runner``, with ``sim.inprocess`` and ``sim.processes``) runs the ROS graph.
The names are imported when first used, so ``python -m soliton_encirclement_ros.sim.batch_sim``
does not import the module it runs twice.
"""
__all__ = ['RunResult', 'simulate']


def __getattr__(name: str):
    if name == 'simulate':
        from soliton_encirclement_ros.sim.batch_sim import simulate
        return simulate
    if name == 'RunResult':
        from soliton_encirclement_ros.analysis.report import RunResult
        return RunResult
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
