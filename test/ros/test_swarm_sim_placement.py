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
    for name in ('a', 'b'):
        out = tmp_path / name
        assert runner.main(['--no-progress', '--control-period', '0.05',
                            '--agents', '4', '--placement', 'collinear', '--duration', '30',
                            '--out', str(out)]) == 0
        outs.append(out)
    summary = json.loads((outs[0] / 'summary.json').read_text())
    assert summary['params']['placement'] == 'collinear'
    assert summary['final']['E_gap'] < 0.01
    assert summary['final']['d_min'] > 25.0  # 2 R sin(pi/4) = 28.3 m on the settled ring
    metrics = np.genfromtxt(outs[0] / 'metrics.csv', delimiter=',', names=True)
    assert abs(metrics['d_min'][0] - 1.0) < 0.01  # it did start on the 1 m spawn line
    assert (outs[0] / 'metrics.csv').read_bytes() == (outs[1] / 'metrics.csv').read_bytes()
