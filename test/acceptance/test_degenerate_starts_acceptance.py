"""
Degenerate starts spread into the ring in every engine, over 40 s runs.

The multi-second part of ``unit/core/test_degenerate_starts.py``, which says why.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate


@pytest.mark.parametrize('placement', ['collinear', 'coincident', 'cluster'])
def test_degenerate_starts_spread_into_the_ring_in_every_engine(placement):
    scenario = Scenario(agents=5, duration=40.0, control_period=0.05, placement=placement,
                        seed=1)
    per_agent = simulate(scenario, 'per-agent').metrics
    vectorised = simulate(scenario, 'vectorised').metrics
    runs = simulate_runs([scenario, scenario.with_changes(seed=2)]).metrics
    for metrics in (per_agent, vectorised, runs[0]):
        assert metrics[-1, 5] < 0.05            # E_gap: an evenly spaced ring
        assert metrics[-1, 1] < 0.01            # E_r: on the circle
        assert metrics[-1, 6] > 20.0            # d_min: 2 R sin(pi/5) = 23.5 m apart
    np.testing.assert_allclose(vectorised, per_agent, rtol=0, atol=1e-9)
    np.testing.assert_allclose(runs[0], per_agent, rtol=0, atol=1e-9)
