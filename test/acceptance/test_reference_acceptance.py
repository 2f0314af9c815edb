"""The reference gains in batch_sim: the original's static N = 10 figures (120 sim-s)."""
import pytest

from soliton_encirclement_ros.analysis.report import summarise
from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.gains import REFERENCE_GAINS
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate


def test_static_n10_meets_reference_acceptance():
    """The reference gains (the preset) reproduce the original's figures."""
    result = simulate(Scenario(agents=10, seed=0, duration=120.0, control_period=0.01,
                               controller=REFERENCE_GAINS))
    summary = summarise(result.metrics)
    assert result.params['engine'] == ('batch' if compiled.available() else 'vectorised')
    assert result.metrics.shape == (12001, 7) and result.metrics[-1, 0] == pytest.approx(120.0)
    assert summary['mean']['E_r'] <= 0.003
    assert summary['mean']['E_gap'] <= 0.035
    assert summary['mean']['G_max'] <= 1.09
    assert summary['settle_time']['E_gap'] <= 13.0
    assert summary['settle_time']['E_r'] <= 7.0
    # the reference figures exactly: the preset is the reference law, unchanged
    assert summary['settle_time']['E_gap'] == pytest.approx(12.15)
    assert summary['settle_time']['E_r'] == pytest.approx(6.14)
    assert summary['mean']['E_gap'] == pytest.approx(0.0316, abs=5e-5)
