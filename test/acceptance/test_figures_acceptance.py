"""
Figures written whole: vector formats, the animation's size and pace, batch_sim --format svg.

The multi-second part of ``unit/analysis/test_figures.py``.
"""
import json
import xml.etree.ElementTree as ElementTree

import numpy as np
from PIL import Image
import pytest

from soliton_encirclement_ros.analysis.animation import write_animation
from soliton_encirclement_ros.analysis.report import RunResult, write_run_outputs
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim import batch_sim
from support.metric_tables import converging_metrics


@pytest.mark.parametrize('fmt', ['pdf', 'svg'])
def test_vector_formats_write_vector_files_and_no_png(tmp_path, fmt):
    params = Scenario(agents=5, seed=2).as_dict()
    result = RunResult(converging_metrics(), np.empty((0, 4)), params,
                       {'uav1': np.array([[0.0, 1.0, 0.0], [1.0, 2.0, 0.0]]),
                        'target': np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])})
    write_run_outputs(tmp_path, result, fmt=fmt)
    assert not list(tmp_path.glob('*.png'))
    for name in ('dashboard', 'trajectories', *METRIC_NAMES):
        data = (tmp_path / f'{name}.{fmt}').read_bytes()
        if fmt == 'pdf':
            assert data.startswith(b'%PDF-1.') and data.rstrip().endswith(b'%%EOF')
            # TrueType-based fonts (CIDFontType2 or TrueType), no Type 3 that publishers refuse
            assert (b'/CIDFontType2' in data or b'/TrueType' in data) and b'/Type3' not in data
        else:
            root = ElementTree.fromstring(data)
            assert root.tag == '{http://www.w3.org/2000/svg}svg'
            paths = root.iter('{http://www.w3.org/2000/svg}path')
            assert sum(1 for _ in paths) > 20  # drawn as vectors
            assert not list(root.iter('{http://www.w3.org/2000/svg}image'))  # not a raster inside
    if fmt == 'svg':
        root = ElementTree.fromstring((tmp_path / 'dashboard.svg').read_bytes())
        texts = [''.join(t.itertext()) for t in root.iter('{http://www.w3.org/2000/svg}text')]
        assert any(t.startswith('N = 5, seed 2') for t in texts)  # real, editable text


def test_batch_sim_format_svg_writes_titled_vector_figures(tmp_path, capsys):
    out = tmp_path / 'run'
    assert batch_sim.main(['--agents', '3', '--seed', '5', '--duration', '2', '--format', 'svg',
                           '--out', str(out)]) == 0
    assert sorted(p.suffix for p in out.iterdir() if p.suffix in ('.png', '.svg')) == ['.svg'] * 8
    assert 'N = 3, seed 5, R = 20 m, preset default' in (out / 'dashboard.svg').read_text()
    assert json.loads((out / 'summary.json').read_text())['params']['seed'] == 5


def test_animation_is_readable_in_size_and_pace_with_one_frame_per_tenth_second(tmp_path):
    times = np.arange(0.0, 60.0 + 1e-9, 0.05)
    n = 6
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)[None, :] + times[:, None] / 20
    agent_xy = np.stack([20 * np.cos(angle), 20 * np.sin(angle)], axis=2)
    live = np.ones((len(times), n), dtype=bool)
    live[len(times) // 2:, 0] = False
    path = tmp_path / 'a.gif'
    frames = write_animation(path, times, agent_xy, live, np.zeros((len(times), 2)), 20.0,
                             max_frames=200, labels=[f'{i}' for i in range(1, n + 1)],
                             title='N = 6')
    with Image.open(path) as gif:
        assert gif.size[0] >= 700 and gif.size[1] >= 700
        assert gif.n_frames == frames == 200
        assert gif.info['duration'] == 100
        # 60 s of run in 20 s of video: about 3 sim-s per second, not the whole run in 1-2 s
        assert gif.n_frames * gif.info['duration'] / 1000.0 == pytest.approx(20.0)
