"""swarm_sim --no-plots (issue 34): the tables and summary.json, no figure, as batch_sim's."""
import json
import subprocess
import sys

from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.sim import runner

TABLES = ['agents.csv', 'metrics.csv', 'summary.json']


def test_no_plots_writes_the_tables_and_never_loads_matplotlib(tmp_path):
    out = tmp_path / 'run'
    code = (
        'import sys\n'
        'from soliton_encirclement_ros.sim.runner import main\n'
        f'assert main(["--no-progress", "--agents", "3", "--duration", "2", "--control-period", '
        f'"0.05", "--no-plots", "--out", {str(out)!r}]) == 0\n'
        'print("matplotlib" in sys.modules)\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == 'False'
    assert sorted(p.name for p in out.iterdir()) == TABLES
    summary = json.loads((out / 'summary.json').read_text())
    assert set(summary['final']) == set(METRIC_NAMES) and summary['params']['agents'] == 3


def test_no_plots_with_processes_leaves_no_figure(tmp_path):
    """metrics_node, its own process, is told to draw no figure (``plots`` false)."""
    out = tmp_path / 'run'
    assert runner.main(['--no-progress', '--processes', '--agents', '2', '--duration', '2',
                        '--control-period', '0.05', '--real-time-factor', '1', '--no-plots',
                        '--out', str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == TABLES
    assert json.loads((out / 'summary.json').read_text())['params']['mode'] == 'processes'


def test_no_plots_is_in_the_help(capsys):
    try:
        runner.parse_args(['--help'])
    except SystemExit:
        pass
    assert '--no-plots' in capsys.readouterr().out
