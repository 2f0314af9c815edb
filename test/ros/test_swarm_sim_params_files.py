"""
swarm_sim with real rclpy: a params file means what it says, a given option wins over it.

The plan's values come after ``--params-file`` on each node's command line, so before the fix
``-p metrics_period:=0.05`` (the control period) silently beat a file's ``metrics_period``.
Observed in the outputs: metrics.csv has one row per metrics period. ``--processes`` needs a
few seconds before its children all run, hence its longer runs.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.sim import runner

PARAMS = '/swarm/metrics:\n  ros__parameters:\n    metrics_period: 0.15\n'


def metrics_step(out):
    times = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)[:, 0]
    steps = np.round(np.diff(times), 6)
    assert len(steps) > 5
    return float(np.median(steps))


@pytest.mark.parametrize('mode', [['--duration', '2'], ['--processes', '--duration', '8']],
                         ids=['in-process', 'processes'])
def test_the_file_beats_defaults_and_a_given_option_beats_the_file(tmp_path, capfd, mode):
    params = tmp_path / 'params.yaml'
    params.write_text(PARAMS)
    out = tmp_path / 'file'
    code = runner.main(['--no-progress', *mode, '--agents', '3', '--control-period', '0.05',
                        '--params-file', str(params), '--out', str(out)])
    err = capfd.readouterr().err
    assert code == 0, err
    assert metrics_step(out) == 0.15  # the file's, not the control period 0.05
    assert ' wins over ' not in err

    out = tmp_path / 'option'
    code = runner.main(['--no-progress', *mode, '--agents', '3', '--control-period', '0.05',
                        '--metrics-period', '0.1', '--params-file', str(params),
                        '--out', str(out)])
    err = capfd.readouterr().err
    assert code == 0, err
    assert metrics_step(out) == 0.1
    assert [line for line in err.splitlines() if ' wins over ' in line] == [
        'swarm_sim: metrics_period: 0.1 from swarm_sim option --metrics-period wins over 0.15 '
        f'from params file {params}']
