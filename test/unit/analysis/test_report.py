"""summarise and write_run_outputs: the runner's and analyze_run's shared outputs."""
import errno
import json
import math
import os

import numpy as np
import pytest

from soliton_encirclement_ros.analysis import report
from soliton_encirclement_ros.analysis.report import RunResult, summarise, write_run_outputs

NAN = math.nan


def metrics_table(e_gap, e_r=None, d_min=None):
    e_gap = np.asarray(e_gap, dtype=float)
    e_r = np.zeros_like(e_gap) if e_r is None else np.asarray(e_r, dtype=float)
    t = 0.5 * np.arange(len(e_gap))
    d_min = np.full_like(t, 3.0) if d_min is None else np.asarray(d_min, dtype=float)
    return np.column_stack((t, e_r, np.full_like(t, 0.2), np.full_like(t, 0.1),
                            np.full_like(t, 1.5), e_gap, d_min))


def test_settle_time_is_the_first_sample_after_the_last_violation():
    summary = summarise(metrics_table([0.3, 0.01, 0.2, 0.04, 0.049, 0.0],
                                      e_r=[0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    assert summary['settle_time'] == {'E_gap': 1.5, 'E_r': 0.0}


def test_settle_time_is_none_when_the_last_sample_violates_or_is_nan():
    assert summarise(metrics_table([0.0, 0.0, 0.05]))['settle_time']['E_gap'] is None
    assert summarise(metrics_table([0.0, 0.0, 0.0], e_r=[0, 0, NAN]))['settle_time']['E_r'] is None
    # A NaN before the end is a violation too.
    assert summarise(metrics_table([0.0, NAN, 0.0]))['settle_time']['E_gap'] == 1.0


def test_final_and_nan_ignoring_mean():
    summary = summarise(metrics_table([0.4, NAN, 0.2]))
    assert summary['final']['E_gap'] == pytest.approx(0.2)
    assert summary['mean']['E_gap'] == pytest.approx(0.3)
    assert summary['mean']['G_max'] == pytest.approx(1.5)
    assert set(summary['final']) == {'E_r', 'E_vr', 'rho', 'G_max', 'E_gap', 'd_min'}


def test_closest_approach_is_the_smallest_d_min_and_its_time():
    summary = summarise(metrics_table([0.1] * 5, d_min=[4.0, NAN, 1.25, 1.25, 2.0]))
    assert summary['closest'] == {'d_min': 1.25, 'time': 1.0}
    assert all(
        math.isnan(v) for v in summarise(metrics_table([0.1], d_min=[NAN]))['closest'].values()
    )


def test_outputs_are_written_with_headers_and_summary(tmp_path):
    metrics = metrics_table([0.3, 0.02, 0.01])
    agents = np.array([[1, 0.0, 0.5, 2.0], [2, 0.0, 0.4, 1.0]])
    trajectories = {'uav1': np.array([[0, 20, 0], [1, 0, 20]]),
                    'target': np.array([[0, 0, 0], [1, 0.5, 0]])}
    summary = write_run_outputs(tmp_path / 'out', RunResult(
        metrics, agents, {'radius': 20.0, 'N': 2}, trajectories))
    out = tmp_path / 'out'
    lines = (out / 'metrics.csv').read_text().splitlines()
    assert lines[0] == 'timestamp,E_r,E_vr,rho,G_max,E_gap,d_min'
    np.testing.assert_allclose(np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1), metrics)
    assert (out / 'agents.csv').read_text().splitlines()[0] == 'node_id,timestamp,u,velocity_norm'
    np.testing.assert_allclose(np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1), agents)
    for name in ('E_r', 'E_vr', 'rho', 'G_max', 'E_gap', 'd_min', 'dashboard', 'trajectories'):
        assert (out / f'{name}.png').read_bytes()[:4] == b'\x89PNG'
    written = json.loads((out / 'summary.json').read_text())
    assert written == {**summary, 'real_time_factor': None}
    assert written['settle_time'] == {'E_gap': 0.5, 'E_r': 0.0}
    assert written['params'] == {'radius': 20.0, 'N': 2}
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ['metrics.csv', 'agents.csv', 'summary.json', 'dashboard.png', 'trajectories.png']
        + [f'{n}.png' for n in ('E_r', 'E_vr', 'rho', 'G_max', 'E_gap', 'd_min')])


def test_nan_becomes_null_in_summary_json(tmp_path):
    write_run_outputs(tmp_path, RunResult(metrics_table([NAN, NAN]), np.empty((0, 4)), {},
                                          real_time_factor=1.7))
    written = json.loads((tmp_path / 'summary.json').read_text())
    assert written['final']['E_gap'] is None and written['mean']['E_gap'] is None
    assert written['real_time_factor'] == 1.7
    assert not (tmp_path / 'trajectories.png').exists()


def test_an_error_in_the_figures_leaves_the_tables_and_no_figure(tmp_path, monkeypatch):
    def broken_dashboard(*_, **__):
        raise RuntimeError('a bug')
    monkeypatch.setattr(report.plots, 'dashboard', broken_dashboard)
    with pytest.raises(RuntimeError, match='a bug'):
        write_run_outputs(tmp_path / 'out', RunResult(metrics_table([0.1]), np.empty((0, 4)), {}))
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == [
        'agents.csv', 'metrics.csv', 'summary.json']  # written first; no figure in part


def test_a_full_disk_is_outputs_incomplete_with_the_summary(tmp_path, monkeypatch):
    def full_disk(*_, **__):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(report.plots, 'dashboard', full_disk)
    with pytest.raises(report.OutputsIncomplete) as raised:
        write_run_outputs(tmp_path, RunResult(metrics_table([0.1]), np.empty((0, 4)), {}))
    assert raised.value.problem == 'the figures not written: No space left on device'
    assert raised.value.summary['final']['E_gap'] == 0.1
    assert json.loads((tmp_path / 'summary.json').read_text())['final']['E_gap'] == 0.1
    assert not list(tmp_path.glob('*.png')) and not list(tmp_path.glob('.outputs-*'))


def test_wrong_shapes_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r'metrics must be an array of shape \(N, 7\)'):
        write_run_outputs(tmp_path, RunResult(np.zeros((3, 5)), np.empty((0, 4)), {}))
    with pytest.raises(ValueError, match=r'agents must be an array of shape \(N, 4\)'):
        write_run_outputs(tmp_path, RunResult(metrics_table([0.1]), np.zeros((2, 3)), {}))


def test_a_window_judges_its_rows_and_the_closest_approach_stays_the_whole_runs():
    # t = 0 .. 3.5 s; on the ground (bad), engaged 1.0-2.5 s (settling), landed (NaN)
    metrics = metrics_table([0.9, 0.9, 0.2, 0.03, 0.01, 0.02, NAN, NAN],
                            e_r=[0.3, 0.3, 0.05, 0.005, 0.004, 0.003, NAN, NAN],
                            d_min=[1.0, 1.0, 5.0, 6.0, 6.0, 6.0, NAN, NAN])
    whole = summarise(metrics)
    assert math.isnan(whole['final']['E_gap']) and whole['settle_time'] == {
        'E_gap': None, 'E_r': None}
    judged = summarise(metrics, (1.0, 2.5))
    assert judged['final']['E_gap'] == 0.02 and judged['final']['E_r'] == 0.003
    assert judged['mean']['E_gap'] == pytest.approx((0.2 + 0.03 + 0.01 + 0.02) / 4)
    assert judged['settle_time'] == {'E_gap': 1.5, 'E_r': 1.5}
    assert judged['closest'] == whole['closest'] == {'d_min': 1.0, 'time': 0.0}


def test_outputs_of_a_judged_part_of_a_run(tmp_path):
    metrics = metrics_table([0.9, 0.9, 0.2, 0.03, 0.01, 0.02, NAN, NAN],
                            d_min=[1.0, 1.0, 5.0, 6.0, 6.0, 6.0, NAN, NAN])
    phase = {'start': 1.0, 'end': 2.5, 'rule': 'px4 bridges', 'text': 'engaged 1.00–2.50 s'}
    summary = write_run_outputs(tmp_path, RunResult(metrics, np.empty((0, 4)), {},
                                                    judged=phase))
    written = json.loads((tmp_path / 'summary.json').read_text())
    assert written['final']['E_gap'] == 0.02 and written['settle_time']['E_gap'] == 1.5
    assert written['phase'] == {**phase, 'closest': {'d_min': 5.0, 'time': 1.0}}
    assert written['whole_run']['final']['E_gap'] is None
    assert written['whole_run']['settle_time']['E_gap'] is None
    assert written['closest'] == {'d_min': 1.0, 'time': 0.0} == summary['closest']
    # the whole run judged (a simulation): the summary of today, and the phase
    whole = write_run_outputs(tmp_path / 'sim', RunResult(
        metrics[:6], np.empty((0, 4)), {}, judged={**phase, 'start': 0.0, 'end': 2.5,
                                                   'rule': 'whole run'}), plots=False)
    assert {k: v for k, v in whole.items() if k != 'phase'} == {
        **summarise(metrics[:6]), 'real_time_factor': None, 'params': {}}
    assert 'whole_run' not in whole
