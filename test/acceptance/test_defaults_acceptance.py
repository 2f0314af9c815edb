"""
Acceptance of the shipped defaults (issue 13) and of the reference preset, in batch_sim.

The defaults settle a static ring of every size listed (E_gap < 0.05 for good within 120 s,
seeds 0-2, P = 0.05 s), N = 10 settles at least as fast as with the reference gains, and the
moving target with failures is no worse. Each run is seconds on the vectorised engine; the
figures themselves are printed by benchmarks/bench_stability.py.
"""
import json
from pathlib import Path
import statistics

import numpy as np
import pytest
import yaml

from soliton_encirclement_ros.analysis.report import summarise
from soliton_encirclement_ros.core.gains import ControllerParams, REFERENCE_GAINS
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import main, simulate

MOVING = Scenario(agents=10, duration=300.0, control_period=0.01, target_motion='random',
                  target_speed=5.0, target_period=1.0, target_boundary=20.0,
                  failures_per_min=1.0, failure_off_time=8.0)


def _settle_time(scenario):
    return summarise(simulate(scenario).metrics)['settle_time']['E_gap']


@pytest.mark.parametrize('agents', [3, 5, 8, 10, 16, 32, 64, 100])
def test_defaults_settle_every_ring_size(agents):
    for seed in (0, 1, 2):
        settled = _settle_time(Scenario(agents=agents, seed=seed, control_period=0.05))
        assert settled is not None and settled <= 120.0, (agents, seed)


def test_reference_gains_do_not_settle_n32():
    """What the defaults fix: the reference preset leaves the 32-ring oscillating."""
    assert _settle_time(Scenario(agents=32, seed=0, control_period=0.05,
                                 controller=REFERENCE_GAINS)) is None


def test_defaults_settle_n10_as_fast_as_the_reference():
    times = [_settle_time(Scenario(agents=10, seed=seed, control_period=0.01))
             for seed in range(5)]
    assert None not in times
    assert statistics.median(times) <= 10.0  # reference gains: 10.73 s


def test_defaults_moving_target_with_failures_is_no_worse():
    means = []
    for seed in (0, 1, 2):
        # the batch engine: exact with failures (auto would take the per-agent one, 10x dearer)
        metrics = simulate(MOVING.with_changes(seed=seed), 'batch').metrics
        late = metrics[metrics[:, 0] >= 60.0]
        means.append((np.nanmean(late[:, 1]), np.nanmean(late[:, 5])))
    assert statistics.median(m[0] for m in means) <= 0.065  # E_r 0.0524; reference 0.0704
    assert statistics.median(m[1] for m in means) <= 0.17   # E_gap 0.1483; reference 0.1956


def test_reference_preset_file_cli_and_python_agree(tmp_path):
    path = Path(__file__).parents[2] / 'config' / 'reference.yaml'
    assert yaml.safe_load(path.read_text())['/**']['ros__parameters'] == REFERENCE_GAINS
    reference = ControllerParams.preset('reference')
    assert (reference.k_tau, reference.k_omega_damp_n) == (0.2, 0.0)
    assert (ControllerParams().k_tau, ControllerParams().k_omega_damp_n) == (0.25, 0.025)
    assert (reference.k_e_tau, reference.k_omega_own) == (25.0, 0.0)
    assert (ControllerParams().k_e_tau, ControllerParams().k_omega_own) == (50.0, 0.4)
    scenario = tmp_path / 's.yaml'
    scenario.write_text('controller: {beta_u: 6.0}\n')
    assert main(['--scenario', str(scenario), '--preset', 'reference', '--agents', '3',
                 '--duration', '0.1', '--out', str(tmp_path / 'run')]) == 0
    params = json.loads((tmp_path / 'run' / 'summary.json').read_text())['params']['controller']
    assert params['k_tau'] == 0.2 and params['k_omega_damp_n'] == 0.0
    assert params['beta_u'] == 6.0  # the scenario's overrides apply on top of the preset
