"""
Every registered controller engine's tick: failed agents at zero, commands within the limits.

An engine added to ``core.engines.ENGINES`` is run here with no further test code; against the
reference on a fixed set of scenarios: ``acceptance/test_engines_acceptance.py``.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.controller import TargetBroadcast
from soliton_encirclement_ros.core.engines import ENGINES
from soliton_encirclement_ros.core.scenario import Scenario


@pytest.mark.parametrize('engine', list(ENGINES))
def test_engine_tick_contract(engine):
    """Commands (N, 3): zero for failed agents, within the speed limits, finite; u is (N,)."""
    s = Scenario(agents=5, seed=0, duration=5.0, control_period=0.05)
    params, ids = s.controller_params(), s.agent_ids()
    swarm = ENGINES[engine].build(ids, params, s)
    positions = s.start_positions()
    velocities = np.zeros_like(positions)
    live = np.array([True, True, False, True, True])
    for k in range(20):
        now = k * s.control_period
        target = TargetBroadcast(int(now * 1e9), np.zeros(3), np.zeros(3), s.omega_ref,
                                 s.lambdas)
        cmds, u = swarm.tick(now, live, positions, velocities, target)
        assert cmds.shape == (5, 3) and u.shape == (5,)
        assert np.all(np.isfinite(cmds)) and np.all(cmds[~live] == 0.0)
        assert np.all(np.hypot(cmds[:, 0], cmds[:, 1]) <= params.max_speed_xy + 1e-12)
        assert np.all(np.abs(cmds[:, 2]) <= params.max_speed_z + 1e-12)
        positions = positions + cmds * s.control_period
    assert np.any(cmds[live] != 0.0)  # the working agents did move
