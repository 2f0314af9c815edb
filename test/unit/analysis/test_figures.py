"""Figures fit for a paper: run identity in titles, log axes, thresholds, markers, vectors."""
import json
from pathlib import Path
import shutil
import subprocess
import xml.etree.ElementTree as ElementTree

from matplotlib.backends.backend_agg import FigureCanvasAgg
import numpy as np
from PIL import Image
import pytest

from soliton_encirclement_ros.analysis import plots
from soliton_encirclement_ros.analysis.animation import (
    animation_file, frame_indices, write_animation)
from soliton_encirclement_ros.analysis.report import RunResult, summarise, write_run_outputs
from soliton_encirclement_ros.core.gains import REFERENCE_GAINS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.provenance import package_version
from soliton_encirclement_ros.sim import batch_sim


def converging_metrics(duration=20.0, dt=0.1):
    """Exponential convergence over decades: E_gap < 0.05 from 4 s, E_r < 0.01 from 6 s."""
    t = np.arange(0.0, duration + 1e-9, dt)
    decay = np.exp(-t / 1.3)
    columns = {'E_r': 1.0 * decay, 'E_vr': 0.5 * decay, 'rho': 0.3 * decay, 'G_max': 1 + decay,
               'E_gap': 2.0 * decay * np.exp(-t / 6.0), 'd_min': 5.0 - decay}
    return np.column_stack([t] + [columns[name] for name in METRIC_NAMES])


def axes_by_metric(fig):
    return {ax.get_ylabel().split()[0]: ax for ax in fig.axes if ax.get_ylabel()}


def horizontal_levels(ax):
    return sorted({float(line.get_ydata()[0]) for line in ax.get_lines()
                   if len(set(line.get_ydata())) == 1 and list(line.get_xdata()) == [0, 1]})


def vertical_times(ax):
    return sorted({float(line.get_xdata()[0]) for line in ax.get_lines()
                   if len(set(line.get_xdata())) == 1 and list(line.get_ydata()) == [0, 1]})


def test_dashboard_has_log_axes_thresholds_settle_times_and_the_run_in_its_title(tmp_path):
    metrics = converging_metrics()
    params = Scenario(agents=7, seed=42, radius=15.0).as_dict()
    title = plots.run_title(params)
    fig = plots.dashboard(tmp_path / 'dashboard.png', {'': metrics}, title)
    axes = axes_by_metric(fig)
    assert {name: axes[name].get_yscale() for name in METRIC_NAMES} == {
        'E_r': 'log', 'E_vr': 'linear', 'rho': 'log', 'G_max': 'linear', 'E_gap': 'log',
        'd_min': 'linear'}
    assert horizontal_levels(axes['E_gap']) == [0.05]
    assert horizontal_levels(axes['E_r']) == [0.01]
    settle = summarise(metrics)['settle_time']
    assert vertical_times(axes['E_gap']) == [pytest.approx(settle['E_gap'])]
    assert vertical_times(axes['E_r']) == [pytest.approx(settle['E_r'])]
    assert 3.0 < settle['E_gap'] < settle['E_r'] < 10.0
    assert fig._suptitle.get_text() == title
    assert title == f'N = 7, seed 42, R = 15 m, preset default, ' \
                    f'soliton_encirclement_ros {package_version()}'
    # 2e-7 and 0.05 are six decades apart on the E_gap axis, not both "at 0"
    low, high = axes['E_gap'].get_ylim()
    assert low < metrics[-1, METRIC_NAMES.index('E_gap') + 1] and high > 1.0


def test_a_run_that_never_settles_has_the_threshold_but_no_settle_time(tmp_path):
    metrics = converging_metrics()
    metrics[-1, 1:] = 1.0  # the last sample is above every threshold
    fig = plots.dashboard(tmp_path / 'd.png', {'': metrics})
    axes = axes_by_metric(fig)
    assert horizontal_levels(axes['E_gap']) == [0.05] and vertical_times(axes['E_gap']) == []


def test_the_title_names_the_preset_and_leaves_out_what_a_bag_does_not_say():
    reference = Scenario(agents=3, seed=1, controller=REFERENCE_GAINS).as_dict()
    assert 'preset reference' in plots.run_title(reference)
    assert 'preset custom' in plots.run_title(Scenario(controller={'k_r': 2.0}).as_dict())
    bag_title = plots.run_title({'bag': '/x/runs/demo-bag', 'radius': 20.0,
                                 'agents': ['uav1', 'uav2']})
    assert bag_title.startswith('demo-bag, N = 2, R = 20 m, soliton_encirclement_ros ')
    assert 'seed' not in bag_title
    described = {'bag': 'b', 'radius': 20.0, 'agents': ['uav1'], 'bag_custom_data': {
        'seed': '7', 'scenario': json.dumps({'seed': 7, 'controller': REFERENCE_GAINS})}}
    assert plots.run_title(described).startswith('b, N = 1, seed 7, R = 20 m, preset reference, ')


def test_trajectories_mark_start_and_end_and_the_legend_stays_off_the_target(tmp_path):
    t = np.linspace(0.0, 10.0, 50)[:, None]
    tracks = {f'uav{i}': np.hstack([t, np.cos(i + t / 10) * (30 - t),
                                    np.sin(i + t / 10) * (30 - t)]) for i in range(1, 5)}
    tracks['target'] = np.hstack([t, 0.0 * t, 0.0 * t])
    fig = plots.trajectory_plot(tmp_path / 'trajectories.png', tracks, 20.0, 'N = 4, seed 3')
    ax = fig.axes[0]
    points = {(round(float(line.get_xdata()[0]), 6), round(float(line.get_ydata()[0]), 6),
               line.get_marker(), line.get_markerfacecolor() == 'none')
              for line in ax.get_lines() if len(line.get_xdata()) == 1}
    for name, track in tracks.items():
        if name == 'target':
            continue
        start = (round(track[0, 1], 6), round(track[0, 2], 6))
        end = (round(track[-1, 1], 6), round(track[-1, 2], 6))
        assert start + ('o', True) in points    # open circle at the start
        assert end + ('o', False) in points     # filled dot at the end
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert {'start', 'end', 'target'} <= set(labels)
    renderer = FigureCanvasAgg(fig).get_renderer()
    legend_box = ax.get_legend().get_window_extent(renderer)
    target_xy = ax.transData.transform((0.0, 0.0))
    assert not legend_box.contains(*target_xy)
    assert not legend_box.overlaps(ax.get_window_extent(renderer))  # outside the axes
    assert ax.get_title() == 'N = 4, seed 3'


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


def test_a_bad_format_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match='format must be one of png, pdf, svg'):
        write_run_outputs(tmp_path / 'out', RunResult(converging_metrics(), np.empty((0, 4)), {}),
                          fmt='jpg')
    assert not (tmp_path / 'out').exists()


def test_batch_sim_format_svg_writes_titled_vector_figures(tmp_path, capsys):
    out = tmp_path / 'run'
    assert batch_sim.main(['--agents', '3', '--seed', '5', '--duration', '2', '--format', 'svg',
                           '--out', str(out)]) == 0
    assert sorted(p.suffix for p in out.iterdir() if p.suffix in ('.png', '.svg')) == ['.svg'] * 8
    assert 'N = 3, seed 5, R = 20 m, preset default' in (out / 'dashboard.svg').read_text()
    assert json.loads((out / 'summary.json').read_text())['params']['seed'] == 5


def test_batch_sim_refuses_an_unknown_format_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        batch_sim.main(['--format', 'jpg', '--out', str(tmp_path / 'x')])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format: invalid choice: 'jpg'" in err[0]
    assert not (tmp_path / 'x').exists()


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


def test_frame_indices_follow_the_pace_and_the_cap():
    times = np.arange(0.0, 30.0 + 1e-9, 0.05)
    assert len(frame_indices(times, 1000)) == 101       # 30 s at 3 sim-s/s, 10 frames/s
    assert len(frame_indices(times, 50)) == 50
    assert frame_indices(times, 0).size == 0


def test_analysis_title_on_a_bag_does_not_need_a_seed(tmp_path):
    path = Path(tmp_path) / 'x.png'
    fig = plots.dashboard(path, {'a': converging_metrics(), 'b': converging_metrics()}, 'a vs b')
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert fig._suptitle.get_text() == 'a vs b'


@pytest.mark.skipif(shutil.which('ffmpeg') is None, reason='ffmpeg is not on the PATH')
def test_with_ffmpeg_the_animation_is_an_h264_mp4_of_the_same_frames(tmp_path):
    assert animation_file() == 'encirclement.mp4'
    times = np.arange(0.0, 12.0 + 1e-9, 0.05)
    angle = np.linspace(0, 2 * np.pi, 4, endpoint=False)[None, :] + times[:, None] / 5
    agent_xy = np.stack([10 * np.cos(angle), 10 * np.sin(angle)], axis=2)
    path = tmp_path / 'a.mp4'
    frames = write_animation(path, times, agent_xy, np.ones((len(times), 4), dtype=bool),
                             np.zeros((len(times), 2)), 10.0)
    assert frames == 41  # 12 s at 3 sim-s per second, 10 frames/s
    probe = subprocess.run(
        [shutil.which('ffprobe') or 'ffprobe', '-v', 'error', '-select_streams', 'v:0',
         '-count_frames', '-show_entries',
         'stream=codec_name,width,height,avg_frame_rate,nb_read_frames', '-of', 'json',
         str(path)], capture_output=True, text=True, check=True)
    stream = json.loads(probe.stdout)['streams'][0]
    assert stream['codec_name'] == 'h264' and stream['avg_frame_rate'] == '10/1'
    assert stream['width'] >= 700 and stream['height'] >= 700
    assert int(stream['nb_read_frames']) == frames
