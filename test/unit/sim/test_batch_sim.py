"""
Batch simulator: engine choice, CLI arguments, outputs without plots.

A 40 s lossy run, the CLI with figures: ``acceptance/test_batch_sim_acceptance.py``; the static
N = 10 figures: ``acceptance/test_reference_acceptance.py``.
"""
import json
import signal
import subprocess
import sys

import numpy as np
import pytest

from soliton_encirclement_ros.analysis.report import AGENTS_HEADER, METRICS_HEADER
from soliton_encirclement_ros.analysis.stream import read_rows
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import choose_engine, main, simulate
from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import wait_for

ROWS = 40  # metrics rows streamed before the kill


def test_vectorised_engine_refuses_where_not_exact():
    with pytest.raises(ValueError, match='engine vectorised needs loss 0'):
        choose_engine(Scenario(loss=0.1), 'vectorised')


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


def test_a_start_below_the_altitude_band_holds_and_is_said(tmp_path, capsys):
    """
    Agents started below z_min hold (not fly the ring horizontally), and batch_sim says so.

    Before, they flew the ring below the band without a word, and the run's figures read as
    an encirclement's.
    """
    field = {'polygon': [[-40, -40], [40, -40], [40, 40], [-40, 40]], 'z_min': 2.0,
             'z_max': 40.0}
    (tmp_path / 'field.yaml').write_text(json.dumps(field))
    out = tmp_path / 'run'
    assert main(['--agents', '4', '--duration', '3', '--control-period', '0.05', '--no-plots',
                 '--safety-area', str(tmp_path / 'field.yaml'), '--out', str(out)]) == 0
    said, err = capsys.readouterr()
    warnings = [line for line in err.splitlines() if 'outside the safety area' in line]
    assert len(warnings) == 1 and '4 of 4 agents start outside' in warnings[0], err
    assert 'below z_min 2 m' in warnings[0]
    assert 'no settle time: 4 agents started outside the safety area' in said
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['params']['outside_start'] == ['uav1', 'uav2', 'uav3', 'uav4']
    scenario = Scenario(agents=4, duration=3.0, control_period=0.05, safety_area=field)
    held = simulate(scenario).final_positions[:4]
    np.testing.assert_allclose(held[:, :2], scenario.start_positions()[:, :2], atol=1e-9)


def _rows_in(path, width: int = len(METRICS_HEADER)) -> int:
    try:
        return len(read_rows(path, width))
    except (OSError, ValueError):
        return 0


def test_a_killed_batch_sim_keeps_its_streamed_rows_and_says_it_did_not_finish(tmp_path):
    # A SIGKILLed batch_sim left nothing on disk: it wrote its outputs only at the end.
    out = tmp_path / 'run'
    assert main(['--agents', '3', '--duration', '1', '--control-period', '0.05', '--no-plots',
                 '--out', str(out)]) == 0
    assert 'final' in json.loads((out / 'summary.json').read_text())  # a whole run's, before
    assert _rows_in(out / 'metrics.csv') < ROWS
    proc = subprocess.Popen(
        [find_executable('batch_sim'), '--agents', '3', '--duration', '20000',
         '--control-period', '0.05', '--no-plots', '--out', str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (_rows_in(out / 'metrics.csv') >= ROWS
                          and _rows_in(out / 'agents.csv', len(AGENTS_HEADER)) >= 3)
                 or proc.poll() is not None,
                 f'{ROWS} metrics rows in {out / "metrics.csv"} and agents.csv rows',
                 timeout=120.0)
        assert proc.poll() is None, proc.communicate()[1]
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    metrics = read_rows(out / 'metrics.csv', len(METRICS_HEADER))
    assert len(metrics) >= ROWS and np.all(np.diff(metrics[:, 0]) > 0)
    assert metrics[0, 0] == 0.0 and np.isfinite(metrics[:, 1:]).any()
    assert (out / 'metrics.csv').read_text().startswith(','.join(METRICS_HEADER) + '\n')
    agents = read_rows(out / 'agents.csv', len(AGENTS_HEADER))
    assert set(agents[:, 0].tolist()) == {1.0, 2.0, 3.0}
    # the folder says the run did not finish: no older summary, none that reads as whole
    summary = json.loads((out / 'summary.json').read_text())
    assert 'final' not in summary and 'did not finish' in summary['unfinished']
    assert summary['params']['duration'] == 20000.0


def test_auto_picks_the_compiled_batch_engine_where_it_runs_the_whole_law(monkeypatch):
    """Same values (test_engines_acceptance), a third of the vectorised engine's CPU at N = 10."""
    from soliton_encirclement_ros.core import compiled
    if not compiled.available():
        pytest.skip('numba is not installed (the standalone extra)')
    assert choose_engine(Scenario(agents=10)) == 'batch'
    assert choose_engine(Scenario(agents=16)) == 'batch'
    # above 16 agents the receiver x sender arrays cost more than the vectorised engine's sort
    assert choose_engine(Scenario(agents=17)) == 'vectorised'
    assert choose_engine(Scenario(agents=40, controller={'d_safe': 0.0})) == 'vectorised'
    # a term the kernel does not compute, or loss (where only per-agent is the default)
    assert choose_engine(Scenario(agents=10, controller={'k_gap_steer': 1.0})) == 'vectorised'
    assert choose_engine(Scenario(agents=10, loss=0.1)) == 'per-agent'
    monkeypatch.setenv('SOLITON_COMPILED', '0')
    monkeypatch.setattr(compiled, '_KERNELS', None)
    assert choose_engine(Scenario(agents=10)) == 'vectorised'
