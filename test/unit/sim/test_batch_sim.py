"""Batch simulator: engine equivalence, seeds, CLI (the static N = 10 figures: acceptance/)."""
import json
import math
import subprocess
import sys

import numpy as np
import pytest

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


def test_vectorised_engine_refuses_where_not_exact():
    with pytest.raises(ValueError, match='engine vectorised needs loss 0'):
        choose_engine(Scenario(loss=0.1), 'vectorised')


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


def test_no_plots_writes_the_tables_and_never_loads_matplotlib_or_the_bag_readers(tmp_path):
    """A short run's fixed cost: matplotlib, rosbags and mcap only when used (issue 23)."""
    out = tmp_path / 'run'
    code = (
        'import sys\n'
        'from soliton_encirclement_ros.sim.batch_sim import main\n'
        f'assert main(["--agents", "3", "--duration", "1", "--no-plots", "--out", {str(out)!r}])'
        ' == 0\n'
        'print(sorted(m for m in ("matplotlib", "rosbags", "mcap") if m in sys.modules))\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip().splitlines()[-1] == '[]'
    assert sorted(p.name for p in out.iterdir()) == ['agents.csv', 'metrics.csv', 'summary.json']
    summary = json.loads((out / 'summary.json').read_text())
    assert set(summary['final']) == set(METRIC_NAMES)


def test_cli_scenario_file_with_overrides(tmp_path):
    scenario = tmp_path / 's.yaml'
    scenario.write_text('agents: 3\nduration: 1.0\ncontrol_period: 0.05\n')
    out = tmp_path / 'run'
    assert main(['--scenario', str(scenario), '--agents', '5', '--out', str(out)]) == 0
    ids = np.unique(np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1)[:, 0])
    assert ids.tolist() == [1, 2, 3, 4, 5]


@pytest.mark.parametrize('args, message', [
    (['--agents', '0'], 'argument --agents: must be an integer >= 1, got 0'),
    (['--loss', '1.5'], r'argument --loss: must be a probability in \[0, 1\), got 1.5'),
    (['--loss', '1.0'], r'argument --loss: must be a probability in \[0, 1\), got 1.0'),
    (['--seed', '1.5'], "argument --seed: expected an integer, got '1.5'"),
    (['--radius', 'nan'], 'argument --radius: must be finite, got nan'),
    (['--control-period', '0.015'], 'control_period must be a multiple'),
    (['--target-motion', 'orbit'], "invalid choice: 'orbit'"),
])
def test_cli_rejects_bad_arguments(tmp_path, capsys, args, message):
    try:
        code = main(args + ['--duration', '1', '--out', str(tmp_path / 'x')])
    except SystemExit as exit_info:  # argparse's own checks (choices, types)
        code = exit_info.code
    assert code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and __import__('re').search(message, err[0])
    assert not (tmp_path / 'x' / 'summary.json').exists()


def test_cli_rejects_bad_scenario_yaml(tmp_path, capsys):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('agents: 4\nwind: 3\n')
    assert main(['--scenario', str(bad), '--out', str(tmp_path / 'x')]) == 2
    assert 'unknown scenario key(s): wind' in capsys.readouterr().err
