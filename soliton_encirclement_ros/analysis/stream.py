"""
Outputs written as a run goes, so a crash, an OOM kill or a second Ctrl-C never loses them.

And memory stays bounded however long the run is (no rclpy).

:class:`CsvStream` appends rows in the format of the finished outputs (``report``), flushing at
least every ``flush_period`` s of wall time; :func:`read_rows` reads such a file back, whole rows
only (a process killed mid-write can leave half a row). :func:`read_row_chunks` reads it in
chunks of at most ``CHUNK_ROWS`` rows (:func:`unmeasured_spans` finds where it has none) and
:class:`Envelope` thins a column for a plot as it goes, so the outputs written at the end of a
run take the same memory however long the run was. :class:`DecimatingTrace` keeps a bounded,
evenly thinned trace for plots. :class:`WritingMarker` tells a supervisor that the final outputs
are being written (``swarm_sim --processes`` waits while it is fresh).
"""
from __future__ import annotations

import io
from itertools import islice
import math
import os
from pathlib import Path
import threading
import time

import numpy as np

from soliton_encirclement_ros.analysis.outputs import write_problem

CSV_FORMAT = '%.9g'  # the number format of every CSV output
CHUNK_ROWS = 2048    # rows parsed at a time by read_row_chunks (about 1 MB, whatever the file)
PLOT_BUCKETS = 1000  # an Envelope keeps 4 points per bucket, 2 buckets per pixel column
WRITING_MARKER = '.writing'  # in an output directory while its final outputs are written
HEARTBEAT_PERIOD = 1.0       # s between two touches of the marker


class CsvStream:
    """
    A CSV file that grows by whole rows; :meth:`read` returns everything written so far.

    A write that fails (a full or read-only disk) does not stop the caller: the file is closed
    as it is (a half row at its end is cut off by its readers), later rows are dropped, and
    :attr:`failure` says what happened in one line (it is '' while all is well).
    """

    def __init__(self, path, header: tuple[str, ...], flush_period: float = 1.0) -> None:
        self.path = Path(path)
        self.width = len(header)
        self._line = ','.join([CSV_FORMAT] * self.width) + '\n'
        self.flush_period = flush_period
        self.failure = ''
        self._handle = None
        self._flushed_at = time.monotonic()
        try:
            self._handle = open(self.path, 'w')
            self._handle.write(','.join(header) + '\n')
            self._handle.flush()
        except OSError as error:
            self._failed(error)

    def _failed(self, error: OSError) -> None:
        self.failure = write_problem(f'{self.path.name} not written beyond its last whole row',
                                     error)
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()  # flushes what it can, then releases the file
            except OSError:
                pass

    def append(self, rows) -> None:
        if self._handle is None:
            return
        rows = np.asarray(rows, dtype=float).reshape(-1, self.width)
        try:
            if rows.size:  # what np.savetxt(fmt=CSV_FORMAT, delimiter=',') writes, faster
                self._handle.write(''.join(self._line % tuple(row) for row in rows.tolist()))
            if time.monotonic() - self._flushed_at >= self.flush_period:
                self.flush()
        except OSError as error:
            self._failed(error)

    def flush(self) -> None:
        if self._handle is not None and not self._handle.closed:
            try:
                self._handle.flush()
            except OSError as error:
                self._failed(error)
            self._flushed_at = time.monotonic()

    def read(self) -> np.ndarray:
        self.flush()
        return read_rows(self.path, self.width)

    def close(self) -> None:
        if self._handle is not None and not self._handle.closed:
            try:
                self._handle.close()
            except OSError as error:
                self._handle = None
                self.failure = self.failure or write_problem(
                    f'{self.path.name} not written beyond its last whole row', error)


class DecimatingTrace:
    """
    At most ``capacity`` rows.

    When full, every other row is dropped and only every ``stride``-th new row is kept from then
    on, so the trace spans the whole run evenly.
    """

    def __init__(self, capacity: int = 4000) -> None:
        self.capacity = max(2, int(capacity))
        self.stride = 1
        self._seen = 0
        self._rows: list[tuple] = []

    def append(self, row: tuple) -> None:
        if self._seen % self.stride == 0:
            self._rows.append(row)
            if len(self._rows) >= self.capacity:
                self._rows = self._rows[::2]
                self.stride *= 2
        self._seen += 1

    def array(self) -> np.ndarray:
        return np.array(self._rows, dtype=float)


def read_rows(path, width: int) -> np.ndarray:
    """
    Return the rows of a streamed CSV file as an (N, ``width``) array, without the header.

    A last line without its newline (the writer was killed mid-row) is left out.
    """
    text = Path(path).read_text()
    complete = text[:text.rfind('\n') + 1]
    body = complete.split('\n', 1)[1] if '\n' in complete else ''
    if not body.strip():
        return np.empty((0, width))
    return np.loadtxt(io.StringIO(body), delimiter=',', ndmin=2).reshape(-1, width)


def read_row_chunks(path, width: int, chunk_rows: int = CHUNK_ROWS):
    """
    Yield the rows of a streamed CSV file as (n <= ``chunk_rows``, ``width``) arrays, in order.

    The numbers are those :func:`read_rows` returns (same parser); the header is skipped and a
    last line without its newline (the writer was killed mid-row) is left out. Memory: one chunk.
    """
    with open(path) as handle:
        handle.readline()  # the header
        while True:
            read = list(islice(handle, chunk_rows))
            lines = [line for line in read if line.endswith('\n') and line.strip()]
            if lines:  # (a line without its newline is half a row: the end of the file)
                yield np.loadtxt(lines, delimiter=',', ndmin=2).reshape(-1, width)
            if len(read) < chunk_rows:
                return


def unmeasured_spans(path, width: int, end: float, longest: float) -> list[tuple[float, float]]:
    """
    Return the spans of ``[0, end]`` s longer than ``longest`` s without a row of a CSV stream.

    The file's first column is the time: the spans are before its first row, between two rows,
    and after its last one up to ``end``. Read in chunks (:func:`read_row_chunks`): the memory
    is one chunk whatever the file's length.
    """
    spans, last = [], 0.0
    for chunk in read_row_chunks(path, width):
        times = chunk[:, 0]
        starts = np.concatenate(([last], times[:-1]))
        for i in np.flatnonzero(times - starts > longest):
            spans.append((float(starts[i]), float(times[i])))
        last = max(last, float(times[-1]))
    if end - last > longest:
        spans.append((last, float(end)))
    return spans


def count_rows(path) -> int:
    """Return the number of whole rows of a streamed CSV file (its header left out)."""
    newlines, block = 0, 1 << 20
    with open(path, 'rb') as handle:
        while chunk := handle.read(block):
            newlines += chunk.count(b'\n')
    return max(0, newlines - 1)


def last_row(path, width: int) -> np.ndarray | None:
    """Return the last whole row of a streamed CSV file, or None when it has none."""
    with open(path, 'rb') as handle:
        end = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, end - 4096))
        tail = handle.read().decode(errors='replace')
    lines = tail[:tail.rfind('\n') + 1].splitlines()
    if len(lines) < 2:  # the header (or a line cut by the 4 kB read) and a row
        return None
    return np.loadtxt(lines[-1:], delimiter=',', ndmin=2).reshape(width)


def trim_half_row(path) -> None:
    """Cut a last line without its newline (a writer killed mid-row) off a streamed file."""
    with open(path, 'rb+') as handle:
        end = handle.seek(0, os.SEEK_END)
        position = end
        while position > 0:
            start = max(0, position - 4096)
            handle.seek(start)
            block = handle.read(position - start)
            if position == end and block.endswith(b'\n'):
                return  # whole rows only
            newline = block.rfind(b'\n')
            if newline >= 0:
                handle.truncate(start + newline + 1)
                return
            position = start
        handle.truncate(0)


class Envelope:
    """
    A column of ``rows`` values thinned for a line plot that looks the same, in bounded memory.

    The rows are split into about ``buckets`` runs of consecutive rows; of each run the first,
    last, smallest and largest value are kept (M4 aggregation), and the first value that is not
    drawn (NaN, or not > 0 on a ``log`` axis), so a gap stays a gap. With at most 4 rows per
    bucket nothing is dropped. Feed the rows in order with :meth:`append`, in chunks of any size.
    """

    def __init__(self, rows: int, buckets: int = PLOT_BUCKETS, log: bool = False) -> None:
        self.size = max(1, math.ceil(rows / max(1, buckets)))
        if self.size <= 4:
            self.size = 1  # nothing to gain: every row is kept
        self.log = log
        self._seen = 0
        self._carry = np.empty((0, 2))
        self._kept: list[np.ndarray] = []

    def append(self, t, values) -> None:
        """Take the next rows: times ``t`` and their ``values`` (1-D, same length)."""
        rows = np.column_stack([np.asarray(t, dtype=float), np.asarray(values, dtype=float)])
        rows = np.concatenate([self._carry, rows]) if len(self._carry) else rows
        whole = len(rows) - len(rows) % self.size
        self._carry = rows[whole:]
        if whole:
            self._kept.append(self._thin(rows[:whole]))

    def array(self) -> np.ndarray:
        """Return the (M, 2) rows ``t, value`` kept so far, in order."""
        tail = [self._thin(self._carry)] if len(self._carry) else []
        kept = self._kept + tail
        return np.concatenate(kept) if kept else np.empty((0, 2))

    def _thin(self, rows: np.ndarray) -> np.ndarray:
        if self.size == 1:
            return rows
        b, n = self.size, len(rows)
        buckets = math.ceil(n / b)
        pad = buckets * b - n
        v = rows[:, 1]
        drawn = np.isfinite(v) & (v > 0 if self.log else True)
        low = np.concatenate([np.where(drawn, v, np.inf), np.full(pad, np.inf)])
        high = np.concatenate([np.where(drawn, v, -np.inf), np.full(pad, -np.inf)])
        gap = np.concatenate([~drawn, np.zeros(pad, dtype=bool)])
        starts = np.arange(buckets) * b
        ends = np.minimum(starts + b, n) - 1
        keep = np.concatenate([
            starts, ends,
            starts + low.reshape(buckets, b).argmin(axis=1),
            starts + high.reshape(buckets, b).argmax(axis=1),
            starts + gap.reshape(buckets, b).argmax(axis=1)])
        return rows[np.unique(keep)]


class WritingMarker:
    """
    ``with WritingMarker(path):`` the file ``path`` exists and is touched every ``period`` s.

    A thread touches it while the block runs (a process that is stopped or hung stops touching
    it); it is removed at the end of the block.
    """

    def __init__(self, path, period: float = HEARTBEAT_PERIOD) -> None:
        self.path = Path(path)
        self.period = period
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name='writing-marker', daemon=True)

    def _touch(self) -> None:
        try:
            self.path.touch()
        except OSError:
            pass  # the directory went away: nobody is waiting for this marker any more

    def _beat(self) -> None:
        while not self._done.wait(self.period):
            self._touch()

    def __enter__(self) -> 'WritingMarker':
        self._touch()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        try:
            os.unlink(self.path)
        except OSError:
            pass


def marker_age(path) -> float | None:
    """Seconds since a :class:`WritingMarker` file was last touched; None if there is none."""
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return None
