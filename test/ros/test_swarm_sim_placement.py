"""
swarm_sim from PX4's SITL spawn line: the real nodes spread into the ring, reproducibly.

Four agents start on one bearing from a static target, 1 m apart (``--placement collinear``,
as ``swarm_px4_sitl.launch.py`` spawns vehicles). Before the tie-break of equal angles the
nodes flew all four to one point (E_gap 1.73, d_min 0).
"""
import json

import numpy as np

from soliton_encirclement_ros.sim import runner


def test_collinear_start_forms_the_ring_and_a_seed_gives_one_output(tmp_path):
    outs = []
    for name, plots in (('a', []), ('b', ['--no-plots'])):  # figures once: they cost the most
        out = tmp_path / name
        assert runner.main(['--no-progress', '--control-period', '0.05',
                            '--agents', '4', '--placement', 'collinear', '--duration', '30',
                            *plots, '--out', str(out)]) == 0
        outs.append(out)
    summary = json.loads((outs[0] / 'summary.json').read_text())
    assert summary['params']['placement'] == 'collinear'
    assert summary['final']['E_gap'] < 0.01
    assert summary['final']['d_min'] > 25.0  # 2 R sin(pi/4) = 28.3 m on the settled ring
    metrics = np.genfromtxt(outs[0] / 'metrics.csv', delimiter=',', names=True)
    assert abs(metrics['d_min'][0] - 1.0) < 0.01  # it did start on the 1 m spawn line
    assert (outs[0] / 'metrics.csv').read_bytes() == (outs[1] / 'metrics.csv').read_bytes()


def test_sitl_defaults_in_the_ros_graph_climb_and_never_come_back_within_d_safe(tmp_path):
    """
    PX4's SITL launch defaults in swarm_sim: spawn line 1 m apart, climb to 10 m, d_safe 2 m.

    The agent nodes run the d_safe term from their first tick, before they hear anybody (that
    tick raised once, which killed every agent under the PX4 launch files).
    """
    scenario = tmp_path / 'sitl.yaml'
    scenario.write_text('controller:\n  d_safe: 2.0\n  altitude: 10.0\n')
    out = tmp_path / 'run'
    assert runner.main(['--no-progress', '--control-period', '0.05', '--agents', '3',
                        '--placement', 'collinear', '--scenario', str(scenario),
                        '--duration', '25', '--out', str(out)]) == 0
    metrics = np.genfromtxt(out / 'metrics.csv', delimiter=',', names=True)
    assert abs(metrics['d_min'][0] - 1.0) < 0.01  # the spawn line, inside d_safe
    apart = np.flatnonzero(metrics['d_min'] > 2.0)[0]
    assert metrics['d_min'][apart:].min() > 2.0 * 0.99  # 2.007 m measured
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['final']['E_gap'] < 0.01
    assert summary['params']['controller']['d_safe'] == 2.0
