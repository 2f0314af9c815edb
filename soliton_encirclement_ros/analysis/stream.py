"""
Outputs written as a run goes, so a crash, an OOM kill or a second Ctrl-C never loses them.

And memory stays bounded however long the run is (no rclpy).

:class:`CsvStream` appends rows in the format of the finished outputs (``report``), flushing at
least every ``flush_period`` s of wall time; the file always holds the header and whole rows.
:class:`DecimatingTrace` keeps a bounded, evenly thinned trace for plots.
"""
from __future__ import annotations

from pathlib import Path
import time
import warnings

import numpy as np

CSV_FORMAT = '%.9g'  # the number format of every CSV output


class CsvStream:
    """A CSV file that grows by whole rows; :meth:`read` returns everything written so far."""

    def __init__(self, path, header: tuple[str, ...], flush_period: float = 1.0) -> None:
        self.path = Path(path)
        self.width = len(header)
        self.flush_period = flush_period
        self._handle = open(self.path, 'w')
        self._handle.write(','.join(header) + '\n')
        self._handle.flush()
        self._flushed_at = time.monotonic()

    def append(self, rows) -> None:
        rows = np.asarray(rows, dtype=float).reshape(-1, self.width)
        if rows.size:
            np.savetxt(self._handle, rows, delimiter=',', fmt=CSV_FORMAT)
        if time.monotonic() - self._flushed_at >= self.flush_period:
            self.flush()

    def flush(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            self._flushed_at = time.monotonic()

    def read(self) -> np.ndarray:
        self.flush()
        with warnings.catch_warnings():  # no rows yet (a run stopped early) is not a warning
            warnings.filterwarnings('ignore', 'loadtxt: input contained no data')
            rows = np.loadtxt(self.path, delimiter=',', skiprows=1, ndmin=2)
        return rows.reshape(-1, self.width)

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
