"""
Figures fit for a paper: run identity in titles, log axes, thresholds, markers.

Vector files, the animation and batch_sim --format: ``acceptance/test_figures_acceptance.py``.
"""
import json
from pathlib import Path
import shutil
import subprocess

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.colors import to_rgba
import numpy as np
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
from support.metric_tables import converging_metrics


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


def test_many_unnamed_agents_keep_their_paths_markers_and_colours_in_three_artists(tmp_path):
    # Above plots.NAMED_TRACKS_MAX tracks the agents go unnamed and are drawn as one
    # LineCollection and two scatters: every path, start and end must still be there, at its
    # values, in the agent's own colour of the cycle, and the legend must explain the markers.
    t = np.linspace(0.0, 10.0, 40)[:, None]
    tracks = {f'uav{i}': np.hstack([t, np.cos(i + t / 10) * (30 - t) + 0.1 * i,
                                    np.sin(i + t / 10) * (30 - t)]) for i in range(20)}
    tracks['target'] = np.hstack([t, 0.5 * t, 0.0 * t])
    fig = plots.trajectory_plot(tmp_path / 'trajectories.png', tracks, 20.0, 'N = 20')
    ax = fig.axes[0]
    agents = [track for name, track in tracks.items() if name != 'target']
    cycle = [to_rgba(c) for c in matplotlib.rcParams['axes.prop_cycle'].by_key()['color']]
    colours = np.array([cycle[i % len(cycle)] for i in range(len(agents))])
    paths, = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(paths.get_segments()) == len(agents)
    for segment, track in zip(paths.get_segments(), agents):
        np.testing.assert_array_equal(segment, track[:, 1:3])  # every point, in order
    np.testing.assert_array_equal(paths.get_colors(), colours)
    starts, ends = [c for c in ax.collections if isinstance(c, PathCollection)]
    np.testing.assert_array_equal(starts.get_offsets(), [track[0, 1:3] for track in agents])
    np.testing.assert_array_equal(ends.get_offsets(), [track[-1, 1:3] for track in agents])
    np.testing.assert_array_equal(starts.get_edgecolors(), colours)  # open circles...
    assert not starts.get_facecolors()[:, 3].any()
    np.testing.assert_array_equal(ends.get_facecolors(), colours)    # ...and filled dots
    np.testing.assert_array_equal(starts.get_sizes(), [36.0])  # the markers' 6 and 5 pt
    np.testing.assert_array_equal(ends.get_sizes(), [25.0])
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels == ['target', 'desired circle (R=20 m)', 'start', 'end']
    # every point of every agent lies inside the axes' view
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    every = np.vstack(agents)
    assert x0 <= every[:, 1].min() and every[:, 1].max() <= x1
    assert y0 <= every[:, 2].min() and every[:, 2].max() <= y1
    # the target keeps its own line, start and end markers
    target, = [line for line in ax.get_lines() if line.get_label() == 'target']
    np.testing.assert_array_equal(target.get_xydata(), tracks['target'][:, 1:3])


def test_a_few_agents_are_each_named_in_the_legend(tmp_path):
    t = np.linspace(0.0, 10.0, 5)[:, None]
    tracks = {f'uav{i}': np.hstack([t, t + i, t - i]) for i in range(3)}
    fig = plots.trajectory_plot(tmp_path / 'trajectories.png', tracks, None)
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert labels == ['uav0', 'uav1', 'uav2', 'start', 'end']


def shaded(ax):
    """Return (start, end, alpha, label) of each span shaded on ``ax`` (axvspan), in time order."""
    return sorted((round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6), p.get_alpha(),
                   p.get_label()) for p in ax.patches)


def kept_figures(monkeypatch) -> dict:
    """Return a dict that every metric plot and dashboard drawn from now on is put in, by name."""
    figures = {}

    def keep(draw):
        def drawn(path, *args, **kwargs):
            figures[Path(path).stem] = draw(path, *args, **kwargs)
            return figures[Path(path).stem]
        return drawn
    monkeypatch.setattr(plots, 'metric_plot', keep(plots.metric_plot))
    monkeypatch.setattr(plots, 'dashboard', keep(plots.dashboard))
    return figures


def outputs_figures(tmp_path, monkeypatch, judged, phases):
    """Write a run's outputs judged over ``judged`` and ``phases``; return its figures by name."""
    figures = kept_figures(monkeypatch)
    write_run_outputs(tmp_path, RunResult(converging_metrics(), np.empty((0, 4)), {},
                                          judged=judged, phases=phases))
    return figures


def drawn_series(ax):
    """Return the (t, value) rows of the one metric line on ``ax`` (not a threshold or mark)."""
    line, = [line for line in ax.get_lines() if len(line.get_xdata()) > 2]
    return np.column_stack([line.get_xdata(), line.get_ydata()])


def noisy_metrics(rows, seed=0):
    """Return a long run's metrics: converging, noisy, with a spike, a zero and a NaN gap."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows) * 0.01
    values = np.exp(-t / 30.0)[:, None] * rng.lognormal(0.0, 0.5, (rows, len(METRIC_NAMES)))
    values[rows // 3] *= 40.0          # one sample far above the rest
    values[rows // 2, 0] = 0.0         # an exact zero: no place on E_r's log axis
    values[2 * rows // 3: 2 * rows // 3 + 5, 1] = np.nan  # a gap in E_vr
    return np.column_stack([t, values])


def test_a_long_run_is_drawn_thinned_keeping_its_extremes_ends_gaps_and_settle_times(
        tmp_path, monkeypatch):
    # 20,001 rows (200 s at 0.01 s) on a figure a few hundred pixels wide: what is drawn is
    # thinned, yet every extreme, both ends, each gap and the settle time of every row stay.
    metrics = noisy_metrics(20001)
    metrics[:, METRIC_NAMES.index('E_gap') + 1] = np.where(metrics[:, 0] > 150.0, 1e-3, 0.5)
    figures = kept_figures(monkeypatch)
    summary = write_run_outputs(tmp_path, RunResult(metrics, np.empty((0, 4)), {}))
    dashboard = axes_by_metric(figures['dashboard'])
    for i, name in enumerate(METRIC_NAMES):
        full = metrics[:, [0, i + 1]]
        if name in plots.LOG_METRICS:
            full = np.column_stack([full[:, 0], np.where(full[:, 1] > 0, full[:, 1], np.nan)])
        for ax in (figures[name].axes[0], dashboard[name]):
            drawn = drawn_series(ax)
            assert len(drawn) < len(full) / 2, name  # thinned
            rows = {tuple(row) for row in full[~np.isnan(full[:, 1])]}
            # every point drawn is a row of the run, at its own time
            assert {tuple(row) for row in drawn[~np.isnan(drawn[:, 1])]} <= rows, name
            np.testing.assert_array_equal(drawn[[0, -1]], full[[0, -1]])
            assert np.nanmax(drawn[:, 1]) == np.nanmax(full[:, 1]), name
            assert np.nanmin(drawn[:, 1]) == np.nanmin(full[:, 1]), name
        settle = summary['settle_time'].get(name)
        if settle is not None:
            assert vertical_times(figures[name].axes[0]) == [settle], name
            assert vertical_times(dashboard[name]) == [settle], name
    assert summary['settle_time']['E_gap'] == pytest.approx(150.01)
    # the zero on E_r's log axis and the NaN gap of E_vr are still drawn as gaps
    gap = drawn_series(figures['E_vr'].axes[0])
    first, last = metrics[2 * 20001 // 3, 0], metrics[2 * 20001 // 3 + 4, 0]
    inside = (gap[:, 0] >= first) & (gap[:, 0] <= last)
    assert inside.any() and np.isnan(gap[inside, 1]).all()
    zero = drawn_series(figures['E_r'].axes[0])
    at = metrics[20001 // 2, 0]
    assert np.isnan(zero[zero[:, 0] == at, 1]).all() and (zero[:, 0] == at).any()


def test_a_run_of_a_few_thousand_rows_is_drawn_whole(tmp_path, monkeypatch):
    metrics = noisy_metrics(4000)
    columns = {}
    monkeypatch.setattr(plots, 'dashboard', lambda path, runs, *a, **k: columns.update(runs['']))
    write_run_outputs(tmp_path, RunResult(metrics, np.empty((0, 4)), {}))
    for i, name in enumerate(METRIC_NAMES):
        np.testing.assert_array_equal(columns[name], metrics[:, [0, i + 1]])


def judged_part(number, start, end, count):
    return {'start': start, 'end': end, 'rule': 'px4 bridges', 'number': number,
            'count': count, 'text': f'engaged {start:.2f}–{end:.2f} s'}


def test_every_part_of_a_run_judged_is_shaded_the_summarys_darker(tmp_path, monkeypatch):
    # A flight engaged three times: each phase is judged on its own (summary.json's phases),
    # and the plots used to shade the first only, the one the summary's top level judges.
    phases = [judged_part(1, 1.0, 4.5, 3), judged_part(2, 7.0, 11.0, 3),
              judged_part(3, 13.5, 19.0, 3)]
    figures = outputs_figures(tmp_path, monkeypatch, phases[0], phases)
    want = [(1.0, 4.5, 0.12, 'phase 1 (judged): 1.0–4.5 s'),
            (7.0, 11.0, 0.06, 'phase 2: 7.0–11.0 s'),
            (13.5, 19.0, 0.06, 'phase 3: 13.5–19.0 s')]
    axes = axes_by_metric(figures['dashboard'])
    assert {name: shaded(axes[name]) for name in METRIC_NAMES} == {
        name: want for name in METRIC_NAMES}
    for name in METRIC_NAMES:
        ax = figures[name].axes[0]
        assert shaded(ax) == want, name
        legend = [text.get_text() for text in ax.get_legend().get_texts()]
        assert [label for *_, label in want] == legend[:3]
    # the settle times marked are still the judged phase's (the summary's top level)
    settle = summarise(converging_metrics(), (1.0, 4.5))['settle_time']
    assert vertical_times(axes['E_gap']) == [pytest.approx(settle['E_gap'])]


def test_one_part_judged_is_shaded_as_before_and_a_whole_run_not_at_all(tmp_path, monkeypatch):
    phase = judged_part(1, 1.0, 4.5, 1)
    one = outputs_figures(tmp_path / 'one', monkeypatch, phase, [phase])
    assert shaded(axes_by_metric(one['dashboard'])['E_r']) == [
        (1.0, 4.5, 0.12, 'judged 1.0–4.5 s')]
    assert shaded(one['E_gap'].axes[0]) == [(1.0, 4.5, 0.12, 'judged 1.0–4.5 s')]
    whole = outputs_figures(tmp_path / 'whole', monkeypatch, {
        **phase, 'start': 0.0, 'end': 20.0, 'rule': 'whole run'}, [])
    assert all(shaded(ax) == [] for ax in whole['dashboard'].axes)


def test_a_bad_format_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match='format must be one of png, pdf, svg'):
        write_run_outputs(tmp_path / 'out', RunResult(converging_metrics(), np.empty((0, 4)), {}),
                          fmt='jpg')
    assert not (tmp_path / 'out').exists()


def test_batch_sim_refuses_an_unknown_format_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        batch_sim.main(['--format', 'jpg', '--out', str(tmp_path / 'x')])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--format: invalid choice: 'jpg'" in err[0]
    assert not (tmp_path / 'x').exists()


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


@pytest.mark.parametrize('low, high, want', [
    (1e-6, 0.5, {'10⁻⁶', '10⁻⁵', '10⁻⁴', '10⁻³', '10⁻²', '10⁻¹', '10⁰'}),
    (0.15, 0.6, {'2×10⁻¹', '3×10⁻¹', '4×10⁻¹'}),  # under a decade: minor labels too
])
def test_log_axes_are_labelled_as_matplotlib_would_in_plain_text(low, high, want):
    from matplotlib.figure import Figure
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    plots._draw_series(ax, {'': np.array([[0.0, low], [1.0, high]])}, 'rho')  # no threshold
    fig.canvas.draw()
    labels = {t.get_text() for t in ax.get_yticklabels(minor=False) + ax.get_yticklabels(
        minor=True) if t.get_text() and low <= t.get_position()[1] <= high}
    assert labels >= want - {'10⁰'} and not any('$' in label for label in labels), labels
