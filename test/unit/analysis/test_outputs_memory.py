"""
The outputs added at the end of a streamed run (swarm_sim, metrics_node): the same summary.

``write_streamed_outputs`` reads metrics.csv in chunks and thins the plotted series (issue 39,
point 7: memory at exit that does not grow with the run). What it writes must be what
``write_run_outputs`` writes for the same rows. No rclpy.
"""
import json
import math

import numpy as np
import pytest

from soliton_encirclement_ros.analysis.report import (
    AGENTS_HEADER, METRICS_HEADER, RunningSummary, RunResult, summarise, write_run_outputs,
    write_streamed_outputs)
from soliton_encirclement_ros.analysis.stream import (
    CHUNK_ROWS, count_rows, CsvStream, Envelope, last_row, read_row_chunks, read_rows,
    trim_half_row)
from soliton_encirclement_ros.core.metrics import METRIC_NAMES

NAN = math.nan


def long_run(rows=3 * CHUNK_ROWS + 123, seed=0):
    """Return a run of several chunks: converging, noisy, NaNs, a late E_gap violation."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows) * 0.01 + 0.04
    decay = np.exp(-t / 3.0)
    table = np.column_stack([t] + [decay * (1 + 0.1 * rng.random(rows)) for _ in METRIC_NAMES])
    e_gap, d_min = METRIC_NAMES.index('E_gap') + 1, METRIC_NAMES.index('d_min') + 1
    table[:, d_min] = 10.0 + rng.random(rows)
    table[CHUNK_ROWS + 7, d_min] = 0.5   # the closest approach, reached twice: the first counts
    table[2 * CHUNK_ROWS + 1, d_min] = 0.5
    table[2 * CHUNK_ROWS - 1, e_gap] = 0.2  # the last violation ends a chunk
    table[100:110, 1:] = NAN              # no live agents for a while
    return table


def stream_into(directory, metrics, agents=np.empty((0, 4))):
    """Write the tables as metrics_node streams them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, header, rows in (('metrics.csv', METRICS_HEADER, metrics),
                               ('agents.csv', AGENTS_HEADER, agents)):
        stream = CsvStream(directory / name, header, flush_period=0.0)
        stream.append(rows)
        stream.close()
    return read_rows(directory / 'metrics.csv', len(METRICS_HEADER))  # as written (%.9g)


def assert_same_summary(running, whole):
    """Equal, the means to the last digit (summed exactly over chunks, pairwise by numpy)."""
    assert json.dumps({k: v for k, v in running.items() if k != 'mean'}) == json.dumps(
        {k: v for k, v in whole.items() if k != 'mean'})  # exactly (NaN as NaN)
    assert running['mean'] == pytest.approx(whole['mean'], rel=1e-14, nan_ok=True)


def test_streamed_outputs_summarise_as_the_whole_series_did(tmp_path):
    written = stream_into(tmp_path / 'streamed', long_run(),
                          np.array([[1, 0.04, 0.5, 1.0], [2, 0.04, -0.5, 2.0]]))
    agents_before = (tmp_path / 'streamed' / 'agents.csv').read_text()
    params = {'radius': 20.0, 'agents': 6}
    streamed = write_streamed_outputs(tmp_path / 'streamed', params, None, 0.5, plots=False)
    whole = write_run_outputs(tmp_path / 'whole', RunResult(
        written, read_rows(tmp_path / 'streamed' / 'agents.csv', 4), params, None, 0.5),
        plots=False)
    on_disk = json.loads((tmp_path / 'streamed' / 'summary.json').read_text())
    assert list(on_disk) == list(whole)  # the same keys, in the same order
    assert_same_summary(streamed, whole)
    assert streamed['settle_time']['E_gap'] == written[2 * CHUNK_ROWS, 0]
    assert streamed['closest'] == {'d_min': 0.5, 'time': written[CHUNK_ROWS + 7, 0]}
    for name in ('metrics.csv', 'agents.csv'):  # the streamed tables are the finished ones
        assert ((tmp_path / 'streamed' / name).read_text()
                == (tmp_path / 'whole' / name).read_text()), name
    assert (tmp_path / 'streamed' / 'agents.csv').read_text() == agents_before
    assert sorted(p.name for p in (tmp_path / 'streamed').iterdir()) == [
        'agents.csv', 'metrics.csv', 'summary.json']


@pytest.mark.parametrize('splits', [[1], [2, 3], [4], [5], [1, 2, 3, 4, 5]])
def test_a_running_summary_over_any_chunks_is_summarise(splits):
    """Settle times across chunk borders: a violation last in a chunk, none in a chunk."""
    e_gap = [0.3, 0.01, 0.2, 0.04, 0.049, 0.0]
    table = np.column_stack([np.arange(6.0)] + [
        e_gap if name in ('E_gap', 'E_r') else [4.0, NAN, 1.25, 1.25, 2.0, 3.0]
        for name in METRIC_NAMES])
    running = RunningSummary()
    for chunk in np.split(table, splits):
        running.add(chunk)
    assert_same_summary(running.result(), summarise(table))


@pytest.mark.parametrize('table', [
    np.column_stack([np.arange(3.0)] + [[0.0, 0.0, 0.05]] * len(METRIC_NAMES)),  # unsettled
    np.column_stack([np.arange(3.0)] + [[NAN] * 3] * len(METRIC_NAMES)),         # nothing live
    np.empty((0, len(METRICS_HEADER)))])
def test_a_running_summary_of_edge_cases_is_summarise(table):
    running = RunningSummary()
    for chunk in np.array_split(table, 3):
        running.add(chunk)
    assert_same_summary(running.result(), summarise(table))


def test_chunks_read_the_rows_read_rows_reads_and_leave_a_half_row_out(tmp_path):
    table = long_run(rows=2 * CHUNK_ROWS + 5)
    written = stream_into(tmp_path, table)
    with open(tmp_path / 'metrics.csv', 'a') as handle:
        handle.write('99.5,0.1,0.')  # a writer killed mid-row
    chunks = list(read_row_chunks(tmp_path / 'metrics.csv', len(METRICS_HEADER)))
    assert [len(c) for c in chunks] == [CHUNK_ROWS, CHUNK_ROWS, 5]
    np.testing.assert_array_equal(np.concatenate(chunks), written)
    assert count_rows(tmp_path / 'metrics.csv') == len(written)
    np.testing.assert_array_equal(last_row(tmp_path / 'metrics.csv', 7), written[-1])
    trim_half_row(tmp_path / 'metrics.csv')
    assert (tmp_path / 'metrics.csv').read_text().endswith('\n')
    np.testing.assert_array_equal(read_rows(tmp_path / 'metrics.csv', 7), written)


def test_a_file_without_rows_writes_nothing(tmp_path):
    stream_into(tmp_path, np.empty((0, len(METRICS_HEADER))))
    assert write_streamed_outputs(tmp_path, {}) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ['agents.csv', 'metrics.csv']
    assert last_row(tmp_path / 'metrics.csv', 7) is None


def test_an_envelope_keeps_every_extreme_and_gap_in_bounded_rows():
    rows = 100_000
    t = np.arange(rows) * 0.01
    v = np.sin(t) + 0.01 * np.cos(37 * t)
    v[5_000] = 7.0     # a spike
    v[60_000] = -0.5   # not drawn on a log axis: a gap
    v[70_000] = NAN
    whole = Envelope(rows, buckets=1000, log=True)
    whole.append(t, v)
    pieces = Envelope(rows, buckets=1000, log=True)
    for start in range(0, rows, 777):  # chunks that do not follow the buckets
        pieces.append(t[start:start + 777], v[start:start + 777])
    kept = whole.array()
    np.testing.assert_array_equal(pieces.array(), kept)
    assert len(kept) <= 5 * 1000 and np.all(np.diff(kept[:, 0]) > 0)
    assert kept[0].tolist() == [t[0], v[0]] and kept[-1].tolist() == [t[-1], v[-1]]
    assert 7.0 in kept[:, 1] and -0.5 in kept[:, 1] and np.isnan(kept[:, 1]).any()
    drawn = v[np.isfinite(v) & (v > 0)]
    assert np.nanmin(np.where(kept[:, 1] > 0, kept[:, 1], NAN)) == drawn.min()
    short = Envelope(3000, buckets=1000)
    short.append(t[:3000], v[:3000])
    np.testing.assert_array_equal(short.array(), np.column_stack([t[:3000], v[:3000]]))


def test_plots_of_a_thinned_series_mark_the_settle_times_of_every_row(tmp_path, monkeypatch):
    from soliton_encirclement_ros.analysis import plots
    drawn = {}

    def dashboard(path, runs, title, settled=None):
        drawn.update(runs=runs, settled=settled)
    monkeypatch.setattr(plots, 'dashboard', dashboard)
    monkeypatch.setattr(plots, 'metric_plot', lambda *args, **kwargs: None)
    table = stream_into(tmp_path, long_run(rows=20 * CHUNK_ROWS))
    summary = write_streamed_outputs(tmp_path, {'radius': 20.0})
    assert drawn['settled'] == {'': summary['settle_time']}
    for name, series in drawn['runs'][''].items():
        assert len(series) < 6000 and series[-1, 0] == table[-1, 0], name
