"""Streamed outputs (no rclpy): whole rows on disk, the finished format, a bounded trace."""
from pathlib import Path

import numpy as np
import pytest

from soliton_encirclement_ros.analysis.report import (
    AGENTS_HEADER, METRICS_HEADER, RunResult, write_run_outputs)
from soliton_encirclement_ros.analysis.stream import (
    CHUNK_ROWS, CsvStream, DecimatingTrace, unmeasured_spans)


def test_streamed_rows_read_back_as_the_finished_outputs_write_them(tmp_path):
    stream = CsvStream(tmp_path / 'agents.csv', AGENTS_HEADER, flush_period=0.0)
    rows = np.array([[1, 0.1, 0.123456789012, 2.5], [2, 0.1, -1e-12, 0.0]])
    stream.append(rows)
    assert (tmp_path / 'agents.csv').read_text().count('\n') == 3  # flushed, whole lines
    back = stream.read()
    np.testing.assert_allclose(back, rows, rtol=1e-8)
    stream.close()
    streamed = (tmp_path / 'agents.csv').read_text()
    write_run_outputs(tmp_path / 'out', RunResult(np.empty((0, len(METRICS_HEADER))), back, {}))
    assert (tmp_path / 'out' / 'agents.csv').read_text() == streamed


def test_a_decimating_trace_stays_bounded_and_spans_the_run():
    trace = DecimatingTrace(capacity=100)
    for k in range(100_000):
        trace.append((k * 0.05, float(k), 0.0))
    rows = trace.array()
    assert len(rows) < 100
    assert rows[0, 0] == 0.0 and rows[-1, 0] > 0.95 * 99_999 * 0.05
    assert np.allclose(np.diff(rows[:, 0]), np.diff(rows[:, 0])[0])  # evenly thinned


def test_a_stream_without_rows_reads_empty_and_quietly(tmp_path, recwarn):
    stream = CsvStream(tmp_path / 'metrics.csv', METRICS_HEADER, flush_period=0.0)
    assert stream.read().shape == (0, len(METRICS_HEADER))  # a run stopped before any metric
    stream.close()
    assert [str(w.message) for w in recwarn] == []


def test_a_stream_on_a_full_disk_stops_writing_and_says_so(tmp_path):
    if not Path('/dev/full').exists():
        pytest.skip('needs /dev/full')
    stream = CsvStream('/dev/full', METRICS_HEADER, flush_period=0.0)
    stream.append([[1.0] * len(METRICS_HEADER)])  # no exception: the caller's run goes on
    stream.append([[2.0] * len(METRICS_HEADER)])
    stream.close()
    assert stream.failure == 'full not written beyond its last whole row: No space left on device'


def metrics_file(path: Path, times) -> Path:
    stream = CsvStream(path, METRICS_HEADER, flush_period=0.0)
    stream.append(np.column_stack([times, np.zeros((len(times), len(METRICS_HEADER) - 1))]))
    stream.close()
    return path


def test_the_spans_without_metrics_rows_are_found_at_the_start_between_rows_and_at_the_end(
        tmp_path):
    width = len(METRICS_HEADER)
    whole = metrics_file(tmp_path / 'whole.csv', np.arange(1, 1201) * 0.01)  # 0.01 .. 12 s
    assert unmeasured_spans(whole, width, 12.0, 1.0) == []
    # rows until 4.45 s, none until 8.15 s, then until 9.43 s of a 12 s run; from 3.28 s on
    times = np.concatenate([np.arange(328, 446), np.arange(815, 944)]) * 0.01
    spans = unmeasured_spans(metrics_file(tmp_path / 'gaps.csv', times), width, 12.0, 1.0)
    assert np.allclose(spans, [(0.0, 3.28), (4.45, 8.15), (9.43, 12.0)])
    assert unmeasured_spans(metrics_file(tmp_path / 'gaps.csv', times), width, 12.0, 4.0) == []
    # a gap that falls between two chunks of the reader, and a file without rows
    times = np.delete(np.arange(1, 3 * CHUNK_ROWS) * 0.01, np.s_[CHUNK_ROWS:CHUNK_ROWS + 300])
    spans = unmeasured_spans(metrics_file(tmp_path / 'chunks.csv', times), width, times[-1], 1.0)
    # between the last row of the first chunk and the first row of the second
    assert np.allclose(spans, [(CHUNK_ROWS * 0.01, (CHUNK_ROWS + 301) * 0.01)])
    assert unmeasured_spans(metrics_file(tmp_path / 'none.csv', []), width, 5.0, 1.0) == [
        (0.0, 5.0)]


def test_the_warning_names_the_spans_and_the_pace_only_when_the_run_fell_behind():
    from soliton_encirclement_ros.sim.runner import unmeasured_text
    spans = [[0.0, 3.28], [4.45, 8.15], [9.43, 12.0], [12.5, 14.0]]
    summary = {'unmeasured': {'spans': spans, 'count': 4, 'seconds': 10.05},
               'real_time_factor': 0.84}
    text = unmeasured_text(summary, 2.0)
    assert text.startswith('the metrics miss t=0.00-3.28 s, 4.45-8.15 s, 9.43-12.00 s and 1 '
                           'more (10.05 s in all')
    assert text.endswith('real-time factor of 0.84 of the 2 asked: a lower --real-time-factor '
                         'lets the nodes keep up')
    assert 'real-time factor' not in unmeasured_text({**summary, 'real_time_factor': 1.95}, 2.0)
