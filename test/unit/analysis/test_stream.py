"""Streamed outputs (no rclpy): whole rows on disk, the finished format, a bounded trace."""
from pathlib import Path

import numpy as np
import pytest

from soliton_encirclement_ros.analysis.report import (
    AGENTS_HEADER, METRICS_HEADER, RunResult, write_run_outputs)
from soliton_encirclement_ros.analysis.stream import CsvStream, DecimatingTrace


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
