"""
Large rings settle fast from random starts with the defaults (batch engine, P = 0.01 s).

E_gap < 0.05 for good within 12 s for N = 32 and within 20 s for N = 100, seeds 0-2: the
law's even-ring term (``k_e_ring`` 0.4 by default) closes the ring's long waves at a rate
that does not fall with N. The distributions over 20 seeds are
``benchmarks/bench_stability.py distribution``.
"""
import pytest

from soliton_encirclement_ros.analysis.report import summarise
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario


@pytest.mark.parametrize('agents, within', [(32, 12.0), (100, 20.0)])
def test_large_ring_settles_within_target(agents, within):
    result = simulate_runs([Scenario(agents=agents, seed=seed, control_period=0.01,
                                     duration=40.0)
                            for seed in (0, 1, 2)])
    settled = [summarise(m)['settle_time']['E_gap'] for m in result.metrics]
    assert all(t is not None and t <= within for t in settled), settled
