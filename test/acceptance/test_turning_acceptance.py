"""A ring that holds on a turning target, in every engine (issue 35): minutes of simulation."""
import numpy as np
import pytest

from soliton_encirclement_ros.core.engines import ENGINES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate

# A target turning steadily at 5 m/s on a 30 m circle (0.17 rad/s), 8 agents at R = 20 m.
TURNING = Scenario(agents=8, seed=0, duration=90.0, control_period=0.05, target_motion='circle',
                   target_speed=5.0, target_boundary=30.0)


def _steady(scenario: Scenario, engine: str) -> tuple[float, float]:
    metrics = simulate(scenario, engine).metrics
    late = metrics[metrics[:, 0] >= 45.0]
    return float(np.nanmean(late[:, 1])), float(np.nanmean(late[:, 5]))  # E_r, E_gap


@pytest.mark.parametrize('engine', list(ENGINES))
def test_the_ring_settles_around_a_turning_target(engine):
    e_r, e_gap = _steady(TURNING, engine)
    assert e_gap < 0.05 and e_r < 0.02, (e_r, e_gap)  # measured: 0.0264, 0.0079
    # Without the lead (target_lead 0, as the reference law) the ring stays uneven as long as
    # the target turns, missing the goal: the vehicles lag its turn by their velocity time
    # constant. (The damping by the agent's own rate, k_omega_own, lowers that E_gap: 0.1335
    # without it; so do the even-ring term and the ring's gains, here off as the lead's own
    # effect is measured: 0.037 with the term, 0.039 with the ring's gains.)
    e_r, e_gap = _steady(TURNING.with_changes(controller={
        'target_lead': 0.0, 'k_e_ring': 0.0, 'ring_gains_from': 0.0}), engine)
    assert e_gap > 0.06 and e_r > 0.025, (e_r, e_gap)  # measured: 0.0747, 0.0328
