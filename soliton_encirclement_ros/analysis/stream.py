"""
Outputs written as a run goes, so a crash, an OOM kill or a second Ctrl-C never loses them.

And memory stays bounded however long the run is (no rclpy).

:class:`CsvStream` appends rows in the format of the finished outputs (``report``), flushing at
least every ``flush_period`` s of wall time; :func:`read_rows` reads such a file back, whole rows
only (a process killed mid-write can leave half a row). :class:`DecimatingTrace` keeps a
bounded, evenly thinned trace for plots. :class:`WritingMarker` tells a supervisor that the
final outputs are being written (``swarm_sim --processes`` waits while it is fresh).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
import threading
import time

import numpy as np

CSV_FORMAT = '%.9g'  # the number format of every CSV output
WRITING_MARKER = '.writing'  # in an output directory while its final outputs are written
HEARTBEAT_PERIOD = 1.0       # s between two touches of the marker


class CsvStream:
    """A CSV file that grows by whole rows; :meth:`read` returns everything written so far."""

    def __init__(self, path, header: tuple[str, ...], flush_period: float = 1.0) -> None:
        self.path = Path(path)
        self.width = len(header)
        self._line = ','.join([CSV_FORMAT] * self.width) + '\n'
        self.flush_period = flush_period
        self._handle = open(self.path, 'w')
        self._handle.write(','.join(header) + '\n')
        self._handle.flush()
        self._flushed_at = time.monotonic()

    def append(self, rows) -> None:
        rows = np.asarray(rows, dtype=float).reshape(-1, self.width)
        if rows.size:  # what np.savetxt(fmt=CSV_FORMAT, delimiter=',') writes, without its cost
            self._handle.write(''.join(self._line % tuple(row) for row in rows.tolist()))
        if time.monotonic() - self._flushed_at >= self.flush_period:
            self.flush()

    def flush(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            self._flushed_at = time.monotonic()

    def read(self) -> np.ndarray:
        self.flush()
        return read_rows(self.path, self.width)

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()


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
