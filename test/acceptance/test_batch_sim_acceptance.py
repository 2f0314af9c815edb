"""
batch_sim over a 40 s lossy run and through its CLI with every figure.

The multi-second part of ``unit/sim/test_batch_sim.py``; the static N = 10 figures:
``test_reference_acceptance.py``.
"""
import json
import math

import numpy as np

from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import choose_engine, main, simulate


def test_lossy_run_is_seeded_and_still_encircles():
    scenario = Scenario(agents=6, seed=5, duration=40.0, control_period=0.05, loss=0.3,
                        delay=0.05)
    assert choose_engine(scenario) == 'per-agent'
    first, second = simulate(scenario), simulate(scenario)
    np.testing.assert_array_equal(first.metrics, second.metrics)
    final = dict(zip(METRIC_NAMES, first.metrics[-1, 1:]))
    assert final['E_r'] < 0.01 and final['E_gap'] < 0.1
    other = simulate(scenario.with_changes(seed=6))
    assert not np.array_equal(first.metrics, other.metrics)


def test_cli_writes_outputs_and_summary(tmp_path):
    out = tmp_path / 'run'
    code = main(['--agents', '4', '--duration', '2', '--seed', '1', '--control-period', '0.05',
                 '--target-motion', 'waypoints', '--failures-per-min', '0', '--loss', '0',
                 '--delay', '0', '--radius', '15', '--out', str(out)])
    assert code == 0
    for name in ('metrics.csv', 'agents.csv', 'summary.json', 'trajectories.png',
                 *[f'{m}.png' for m in METRIC_NAMES]):
        assert (out / name).is_file(), name
    assert (out / 'metrics.csv').read_text().splitlines()[
        0
    ] == 'timestamp,E_r,E_vr,rho,G_max,E_gap,d_min'
    assert (out / 'agents.csv').read_text().splitlines()[0] == 'node_id,timestamp,u,velocity_norm'
    summary = json.loads((out / 'summary.json').read_text())
    assert set(summary) >= {'final', 'mean', 'settle_time', 'real_time_factor', 'params'}
    assert set(summary['final']) == set(METRIC_NAMES)
    assert summary['params']['radius'] == 15.0 and summary['params']['agents'] == 4
    rows = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)
    assert rows.shape == (41, 7) and math.isclose(rows[-1, 0], 2.0)


def test_cli_scenario_file_with_overrides(tmp_path):
    scenario = tmp_path / 's.yaml'
    scenario.write_text('agents: 3\nduration: 1.0\ncontrol_period: 0.05\n')
    out = tmp_path / 'run'
    assert main(['--scenario', str(scenario), '--agents', '5', '--out', str(out)]) == 0
    ids = np.unique(np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1)[:, 0])
    assert ids.tolist() == [1, 2, 3, 4, 5]
