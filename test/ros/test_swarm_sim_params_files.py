"""
swarm_sim with real rclpy: a params file means what it says, a given option wins over it.

The plan's values come after ``--params-file`` on each node's command line, so before the fix
``-p metrics_period:=0.05`` (the control period) silently beat a file's ``metrics_period``.
Observed in the outputs: metrics.csv has one row per metrics period (figures are not drawn:
not read here, and most of an in-process run's cost). ``--processes`` starts its clock once
every node has subscribed to it, but metrics_node's first row may still come a second or more
late on a loaded machine, hence its longer runs.
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


@pytest.mark.parametrize('mode', [['--duration', '2'], ['--processes', '--duration', '5']],
                         ids=['in-process', 'processes'])
def test_the_file_beats_defaults_and_a_given_option_beats_the_file(tmp_path, capfd, mode):
    params = tmp_path / 'params.yaml'
    params.write_text(PARAMS)
    out = tmp_path / 'file'
    code = runner.main(['--no-progress', '--no-plots', *mode, '--agents', '3',
                        '--control-period', '0.05', '--params-file', str(params),
                        '--out', str(out)])
    err = capfd.readouterr().err
    assert code == 0, err
    assert metrics_step(out) == 0.15  # the file's, not the control period 0.05
    assert ' wins over ' not in err

    out = tmp_path / 'option'
    code = runner.main(['--no-progress', '--no-plots', *mode, '--agents', '3',
                        '--control-period', '0.05', '--metrics-period', '0.1',
                        '--params-file', str(params), '--out', str(out)])
    err = capfd.readouterr().err
    assert code == 0, err
    assert metrics_step(out) == 0.1
    assert [line for line in err.splitlines() if ' wins over ' in line] == [
        'swarm_sim: metrics_period: 0.1 from swarm_sim option --metrics-period wins over 0.15 '
        f'from params file {params}']


def test_the_launch_files_refuse_a_parameter_no_node_of_theirs_declares(tmp_path):
    """The check launch_support runs before a launch starts anything (launch itself not needed)."""
    from ros_support.validation import unknown_parameters
    from soliton_encirclement_ros.bringup.graph import given_parameters, LaunchArguments
    from soliton_encirclement_ros.bringup.launch_plans import swarm_sim_nodes
    from soliton_encirclement_ros.nodes.catalogue import node_parameters
    params = tmp_path / 'params.yaml'
    defaults = {'num_agents': '2', 'radius': '20.0', 'use_sim_time': 'true',
                'real_time_factor': '1.0', 'seed': '0', 'control_period': '0.05',
                'target_motion': 'static', 'rviz': 'false', 'params_file': str(params),
                'safety_area': ''}

    def unknown():
        specs = swarm_sim_nodes(LaunchArguments(defaults, given={'num_agents'}))
        return unknown_parameters(given_parameters(specs), {
            spec.name for node in specs for spec in node_parameters()[node.executable]})
    params.write_text('/**:\n  ros__parameters:\n    k_r: 2.0\n    marker_period: 1.0\n')
    assert unknown() == []  # a shared /** file: each name is some node's
    params.write_text('/**/agent:\n  ros__parameters:\n    k_rr: 2.0\n')
    assert unknown() == ['k_rr (given to /uav1/agent; did you mean k_r?)']


@pytest.mark.parametrize('mode', [['--duration', '2'], ['--processes', '--duration', '4']],
                         ids=['in-process', 'processes'])
def test_a_params_file_that_turns_separation_off_is_reported_as_flown(tmp_path, capfd, mode):
    """
    ``d_safe: 0.0`` in a params file: the summary says separation is off, and one line why.

    Before, swarm_sim printed ``separation: d_safe 2 m flown`` and summary.json recorded
    ``d_safe_flown: 2.0`` while every agent flew without separation.
    """
    import json
    params = tmp_path / 'params.yaml'
    params.write_text('/**/agent:\n  ros__parameters:\n    d_safe: 0.0\n')
    out = tmp_path / 'run'
    code = runner.main(['--no-progress', '--no-plots', *mode, '--agents', '3',
                        '--control-period', '0.05', '--params-file', str(params),
                        '--out', str(out)])
    captured = capfd.readouterr()
    assert code == 0, captured.err
    said = captured.out + captured.err
    assert [line for line in said.splitlines() if 'lowered' in line] == [
        f'swarm_sim: separation lowered by params file {params}: uav1, uav2, uav3 fly d_safe '
        '0 m (separation off), the scenario 2 m']
    assert 'separation: off (d_safe 0)' in said and 'd_safe 2 m flown' not in said
    summary = json.loads((out / 'summary.json').read_text())['params']
    assert summary['d_safe_flown'] == 0.0 and summary['controller']['d_safe'] == 0.0
    assert summary['d_safe_flown_by_agent'] == {'uav1': 0.0, 'uav2': 0.0, 'uav3': 0.0}
