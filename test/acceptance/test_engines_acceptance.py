"""
Every registered controller engine against the reference on one fixed set of scenarios.

The way Gymnasium checks every registered environment: an engine added to
``core.engines.ENGINES`` is run here with no further test code. Where it claims to be exact
it must give the per-agent path's (the agent node's code) metrics, per-agent telemetry and
trajectories; where it does not, asking for it is refused in one line. Its tick's contract
(failed agents at zero, commands within the speed limits): ``unit/core/test_engines.py``.
"""
from functools import lru_cache

import numpy as np
import pytest

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.engines import choose_engine, ENGINES, REFERENCE
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate


SCENARIOS = {
    'static': Scenario(agents=7, seed=1, duration=6.0),
    'moving target, outages, delay': Scenario(
        agents=7, seed=3, duration=8.0, target_motion='random', failures_per_min=30.0,
        failure_off_time=1.0, delay=0.02, telemetry_period=0.01),
    'loss and delay': Scenario(agents=6, seed=5, duration=8.0, control_period=0.05, loss=0.3,
                               delay=0.05),
    'short outages': Scenario(agents=5, seed=2, duration=8.0, control_period=0.05,
                              failures_per_min=40.0, failure_off_time=0.3),
    'collinear start, d_safe': Scenario(agents=5, seed=0, duration=8.0, control_period=0.05,
                                        placement='collinear', controller={'d_safe': 1.0}),
    # Failed agents' presence broadcasts in the d_safe term, near each other from the start.
    'collinear start, d_safe, outages': Scenario(
        agents=6, seed=4, duration=8.0, control_period=0.05, placement='collinear',
        failures_per_min=30.0, failure_off_time=2.0, controller={'d_safe': 1.0}),
    # Lost first states: each agent's table in its own arrival order, a crowd within d_safe.
    'collinear start, d_safe, loss': Scenario(
        agents=8, seed=0, duration=3.0, control_period=0.05, placement='collinear', loss=0.2,
        controller={'d_safe': 2.0}),
    # Over law.WITHIN_REACH_COLUMNS columns: the engines count only the vehicles within reach.
    'cluster start, N = 20': Scenario(agents=20, seed=6, duration=8.0, control_period=0.05,
                                      placement='cluster'),
    'cluster start, N = 20, outages': Scenario(
        agents=20, seed=7, duration=8.0, control_period=0.05, placement='cluster',
        failures_per_min=20.0, failure_off_time=2.0),
    # Simulated faults: an agent killed (silent), an estimate jumped 44.72 m with its
    # uncertainty (held), a clock stepped 2 s ahead (its states kept as presence).
    'collinear start, moving target, simulated faults': Scenario(
        agents=8, seed=1, duration=10.0, control_period=0.05, placement='collinear',
        target_motion='random', silent_failures=2, reset_jump=44.72, clock_step=2.0,
        fault_time=4.0),
    'simulated faults, outages, loss and delay': Scenario(
        agents=5, seed=2, duration=8.0, control_period=0.05, loss=0.2, delay=0.05,
        failures_per_min=30.0, failure_off_time=2.0, silent_failures=1, reset_jump=1.5,
        clock_step=2.0, fault_time=2.0),
    # Agents failed for good on a circling target's ring: the ring's radius bulges round them.
    'failed agents hovering, circling target': Scenario(
        agents=6, seed=0, duration=14.0, control_period=0.05, target_motion='circle',
        target_speed=5.0, target_boundary=30.0, failed_agents=2, fault_time=3.0,
        controller={'obstacle_clearance': 3.0}),
    # The same with the ring turned to meet them with gaps, and the even-ring term (ramped in
    # after the two are lost).
    'failed agents hovering, gaps steered, even-ring term': Scenario(
        agents=6, seed=0, duration=14.0, control_period=0.05, target_motion='circle',
        target_speed=5.0, target_boundary=30.0, failed_agents=2, fault_time=3.0,
        controller={'k_gap_steer': 1.0, 'k_e_ring': 0.4}),
    # A crowd from one point through the band where the ring's gains take over, with outages.
    "cluster start, the ring's gains, outages": Scenario(
        agents=8, seed=3, duration=10.0, control_period=0.05, placement='cluster',
        failures_per_min=20.0, failure_off_time=2.0,
        controller={'ring_gains_from': 0.3, 'ring_gains_full': 0.9, 'ring_ramp': 0.0}),
    # A line start: agents within d_safe of another fly the crowd's gains in the band.
    "line start, the ring's gains gated in the crowd": Scenario(
        agents=8, seed=2, duration=8.0, control_period=0.05, placement='collinear',
        failures_per_min=20.0, failure_off_time=2.0,
        controller={'ring_gains_from': 0.3, 'ring_gains_full': 0.9, 'ring_ramp_silent': True}),
    # The even-ring term ramped in again only where a vehicle fell silent: announced outages
    # re-space at once; with a killed agent and outages, both kinds of change.
    'outages, ramp on silence only': Scenario(
        agents=8, seed=4, duration=8.0, control_period=0.05, failures_per_min=30.0,
        failure_off_time=2.0, controller={'ring_ramp_silent': True}),
    'a killed agent and outages, ramp on silence only': Scenario(
        agents=6, seed=5, duration=8.0, control_period=0.05, failures_per_min=30.0,
        failure_off_time=2.0, silent_failures=1, fault_time=2.0,
        controller={'ring_ramp_silent': True}),
    # ... and where a vehicle is within d_safe: outages in a crowd leaving one point.
    'outages in a crowd, ramp on silence or crowd': Scenario(
        agents=8, seed=6, duration=8.0, control_period=0.05, placement='coincident',
        failures_per_min=40.0, failure_off_time=2.0, controller={'ring_ramp_silent': True}),
}


@lru_cache(maxsize=None)
def reference(name):
    return simulate(SCENARIOS[name], REFERENCE)


@pytest.mark.parametrize('scenario', SCENARIOS)
@pytest.mark.parametrize('engine', [e for e in ENGINES if e != REFERENCE])
def test_engine_equals_reference_where_exact(engine, scenario):
    s = SCENARIOS[scenario]
    if not ENGINES[engine].exact(s):
        with pytest.raises(ValueError, match=f'engine {engine} needs'):
            choose_engine(s, engine)
        return
    got, want = simulate(s, engine), reference(scenario)
    assert got.params['engine'] == engine
    np.testing.assert_allclose(got.metrics, want.metrics, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.agents, want.agents, rtol=0, atol=1e-9)
    for name, trace in want.trajectories.items():
        np.testing.assert_allclose(got.trajectories[name], trace, rtol=0, atol=1e-9)


def test_fixed_set_exercises_every_engine_and_the_refusal():
    """Each engine is exact on some scenario here; the set also holds one it must refuse."""
    for engine, spec in ENGINES.items():
        assert any(spec.exact(s) for s in SCENARIOS.values()), engine
    assert any(not spec.exact(s) for spec in ENGINES.values() for s in SCENARIOS.values())
    fastest = 'batch' if compiled.available() else 'vectorised'  # the same values
    assert choose_engine(SCENARIOS['static']) == fastest
    assert choose_engine(SCENARIOS['loss and delay']) == REFERENCE
