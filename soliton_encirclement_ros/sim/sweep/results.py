"""A sweep's results: the resumable runs.csv, the per-point summary and its table."""
from __future__ import annotations

from array import array
import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from soliton_encirclement_ros.analysis.outputs import replace_text, write_problem
from soliton_encirclement_ros.analysis.report import SETTLE_THRESHOLDS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.sim.sweep.spec import _key, Run, Spec, SpecError

RUNS_FILE, SUMMARY_FILE, SPEC_FILE = 'runs.csv', 'summary.csv', 'sweep.json'
TABLE_ROWS = 40  # grid points printed at the end (summary.csv has them all)
RESULT_COLUMNS = ([f'final_{m}' for m in METRIC_NAMES] + [f'mean_{m}' for m in METRIC_NAMES]
                  + [f'settle_{m}' for m in SETTLE_THRESHOLDS] + ['d_min', 'd_min_time',
                                                                  'area_margin'])


def runs_header(spec: Spec) -> list[str]:
    return list(spec.grid) + ['seed'] + RESULT_COLUMNS + ['wall_time', 'error']


def _cell(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ''
    if isinstance(value, float):
        return repr(value)
    return str(value) if not isinstance(value, (list, dict)) else json.dumps(value)


class RowsNotWritten(Exception):
    """``runs.csv`` could not take a row (a full disk); the message says so in one line."""


class RunsFile:
    """
    ``runs.csv``, appended and synced a row per finished run.

    With ``resume``, the finished rows are kept (the failed ones dropped, to be tried again)
    through a temporary file that replaces the old one whole, so that no interruption loses
    them; only their keys stay in memory (:attr:`done`). A row that cannot be written whole (a
    full disk) is cut off again, so the file ends with the last whole row, and
    :class:`RowsNotWritten` says so.
    """

    def __init__(self, path: Path, header: list[str], resume: bool) -> None:
        self.path, self.header = path, header
        self._grid_names = header[:header.index('seed')]
        self.done: set[tuple] = set()
        # What resume dropped: the last row of a runs.csv cut short (a full disk, a kill)
        # (one line to show the user), or ''.
        self.dropped = ''
        if resume and path.exists():
            self._keep_finished(path, header)
        # Unbuffered: a write that fails leaves nothing behind to be written later.
        self._file = path.open('ab' if resume and path.exists() else 'wb', buffering=0)
        self.rows = 0  # the rows in the file
        if os.fstat(self._file.fileno()).st_size == 0:
            self._write(header, 'its header')
        else:
            self.rows = len(self.done)

    def _keep_finished(self, path: Path, header: list[str]) -> None:
        """
        Keep the finished rows of ``path`` (resume), through a file that replaces it whole.

        A last row that was cut short (no line end, missing cells, a cell that does not parse)
        is dropped and its run done again (:attr:`dropped` says so); such a row anywhere else
        is not a cut: ``SpecError`` naming its line.
        """
        keys: dict[tuple, str] = {}  # the grid cells of a point -> its key, read once
        cut = not _ends_with_line_end(path)
        tmp = path.with_name(path.name + '.tmp')
        try:
            self._copy_finished(path, tmp, header, keys, cut)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(path)

    def _copy_finished(self, path: Path, tmp: Path, header: list[str], keys: dict,
                       cut: bool) -> None:
        with path.open(newline='') as f, tmp.open('w', newline='') as kept:
            reader = csv.DictReader(f)
            if reader.fieldnames != header:
                raise SpecError(f'--resume: {path} has other columns than this spec gives')
            writer = csv.writer(kept)
            writer.writerow(header)
            pending = None  # (line, row): each row is kept once the next one is read
            for row in reader:
                if pending is not None:
                    self._keep(*pending, keys, writer, path)
                pending = (reader.line_num, row)
            if pending is not None:
                line, row = pending
                if cut or self._problem(row):
                    self.dropped = (f'{path}: its last row (line {line}) was cut short; it is '
                                    'dropped and its run done again')
                else:
                    self._keep(line, row, keys, writer, path)
            kept.flush()
            os.fsync(kept.fileno())

    def _problem(self, row: Mapping[str, Any]) -> str:
        """Return why ``row`` (from ``csv.DictReader``) is not a whole row of runs.csv, or ''."""
        if None in row or any(row[name] is None for name in self.header):
            return 'it has another number of cells than the header'
        try:
            int(row['seed'])
            for name in RESULT_COLUMNS + ['wall_time']:
                if row[name]:
                    float(row[name])
        except ValueError as error:
            return str(error)
        return ''

    def _keep(self, line: int, row: Mapping[str, str], keys: dict, writer, path: Path) -> None:
        problem = self._problem(row)
        if problem:
            raise SpecError(f'--resume: {path} line {line} is not a row of this sweep '
                            f'({problem}); move the file away to start the sweep again')
        if row['error']:  # failed runs are tried again
            return
        cells = tuple(row[name] for name in self._grid_names)
        if cells not in keys:
            keys[cells] = _key(self._point(row))
        self.done.add((keys[cells], int(row['seed'])))
        writer.writerow([row[h] for h in self.header])

    def _point(self, row: Mapping[str, str]) -> dict:
        return {name: yaml.safe_load(row[name]) for name in self._grid_names}

    def add(self, run: Run, result: Mapping[str, Any]) -> None:
        values = {**run.point, 'seed': run.seed, **result}
        self._write([_cell(values.get(h)) for h in self.header], f'row {self.rows + 1}')
        self.rows += 1

    def _write(self, cells: list[str], what: str) -> None:
        """Append one CSV line and sync it, or cut the file back to where it was."""
        line = io.StringIO()
        csv.writer(line).writerow(cells)
        data = memoryview(line.getvalue().encode())
        handle = self._file.fileno()
        whole = os.fstat(handle).st_size
        try:
            while data:
                data = data[self._file.write(data):]
            os.fsync(handle)
        except OSError as error:
            os.ftruncate(handle, whole)
            kept = f'its {self.rows} finished rows are kept' if self.rows else 'it has no rows'
            raise RowsNotWritten(write_problem(f'{self.path} not written beyond {what}',
                                               error) + f' ({kept})') from None

    def close(self) -> None:
        self._file.close()


def _ends_with_line_end(path: Path) -> bool:
    """Whether the file ``path`` ends with a line end (every row written whole), or is empty."""
    with path.open('rb') as f:
        f.seek(0, os.SEEK_END)
        if f.tell() == 0:
            return True
        f.seek(-1, os.SEEK_END)
        return f.read(1) in (b'\n', b'\r')


class RunTable:
    """
    The rows of a ``runs.csv`` as columns, so that millions of runs fit in memory.

    ``cells[name]``: a grid parameter's cells (strings, one object per distinct value);
    ``values[column]``: a result column (or ``wall_time``) as floats, empty cells NaN;
    ``failed``: the runs with an error.
    """

    def __init__(self, path: Path, grid_names: Sequence[str]) -> None:
        self.grid_names = list(grid_names)
        numbers = RESULT_COLUMNS + ['wall_time']
        cells: dict[str, list[str]] = {name: [] for name in self.grid_names}
        values = {name: array('d') for name in numbers}
        failed = array('b')
        distinct: dict[str, str] = {}
        with path.open(newline='') as f:
            for row in csv.DictReader(f):
                for name in self.grid_names:
                    cells[name].append(distinct.setdefault(row[name], row[name]))
                for name in numbers:
                    values[name].append(float(row[name]) if row[name] else math.nan)
                failed.append(bool(row['error']))
        self.cells = cells
        self.values = {name: np.array(column, dtype=float) for name, column in values.items()}
        self.failed = np.array(failed, dtype=bool)

    def __len__(self) -> int:
        return len(self.failed)

    def rows_by(self, names: Sequence[str]) -> dict[tuple, np.ndarray]:
        """Return the row indices of each distinct tuple of cells of ``names``."""
        if not names:
            return {(): np.arange(len(self))}
        out: dict[tuple, list[int]] = {}
        for index, key in enumerate(zip(*(self.cells[name] for name in names))):
            out.setdefault(key, []).append(index)
        return {key: np.array(rows, dtype=np.int64) for key, rows in out.items()}


def summary_rows(spec: Spec, table: RunTable) -> list[dict]:
    """One row per grid point: runs, errors, and median and IQR over seeds of every result."""
    names = list(spec.grid)
    by_point = table.rows_by(names)
    none = np.zeros(0, dtype=np.int64)
    out = []
    for point in spec.points():
        mine = by_point.get(tuple(_cell(point[n]) for n in names), none)
        ok = mine[~table.failed[mine]]
        row = {**point, 'runs': len(ok), 'errors': len(mine) - len(ok)}
        for name in RESULT_COLUMNS:
            values = table.values[name][ok]
            finite = values[np.isfinite(values)]
            if finite.size:
                q1, median, q3 = np.percentile(finite, [25, 50, 75])
            else:
                q1 = median = q3 = math.nan
            row[f'{name}_median'] = median
            row[f'{name}_iqr'] = q3 - q1
            if name.startswith('settle_'):
                row[f'{name}_settled'] = finite.size
        out.append(row)
    return out


def write_summary(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    header = list(rows[0])
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    for row in rows:
        writer.writerow([_cell(row[h]) for h in header])
    replace_text(path, text.getvalue())  # whole or not at all (a full disk)


def print_table(spec: Spec, rows: list[dict], metric: str) -> None:
    names = list(spec.grid)
    cols = names + ['runs', f'final_{metric} median', f'final_{metric} IQR',
                    'settle_E_gap median', 'd_min median']
    table = [[_fmt(r[n]) for n in names] + [
        str(r['runs']), _fmt(r[f'final_{metric}_median']), _fmt(r[f'final_{metric}_iqr']),
        _fmt(r['settle_E_gap_median']), _fmt(r['d_min_median'])] for r in rows[:TABLE_ROWS]]
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    print('  '.join(c.rjust(w) for c, w in zip(cols, widths)))
    for t in table:
        print('  '.join(c.rjust(w) for c, w in zip(t, widths)))
    if len(rows) > TABLE_ROWS:
        print(f'... and {len(rows) - TABLE_ROWS} more grid points in {SUMMARY_FILE}')


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return 'none' if math.isnan(value) else f'{value:.4g}'
    return str(value)
