"""
``sweep_sim``: Monte-Carlo parameter sweeps, many runs stepped together, on every core.

    sweep_sim SPEC.yaml --out DIR [--workers K] [--scheduler ADDRESS] [--resume]

SPEC::

    scenario: {agents: 10, duration: 60.0, target_motion: static}   # or a scenario YAML path
    grid: {k_r: [0.5, 1.0, 2.0], failures_per_min: [0.0, 1.0]}     # {} = one grid point
    seeds: 20                                                      # a count, or a list
    plot: {metric: E_gap, x: k_r, y: failures_per_min}             # optional
    preset: default                                                # optional, as batch_sim's

A grid name is a scenario field, a vehicle limit or a controller gain, looked up in that order.
The run count is printed at once; then every grid point's scenario is checked, once (the seeds
only change the seed), before any work. Runs are generated as they are needed, never all held:
runs that may share a numpy step (:func:`~soliton_encirclement_ros.core.batch_engine.group_key`)
go in chunks to a local process pool, or with ``--scheduler`` to a Dask distributed cluster, a
few chunks per worker at a time; each run's row equals ``batch_sim --seed K`` on the same
scenario. ``runs.csv`` gets each finished run at once, so Ctrl-C or a crash keeps them and
``--resume`` skips them. Ctrl-C before the first run is one line and writes nothing.
"""
from __future__ import annotations

import argparse
from array import array
import csv
import dataclasses
import difflib
import hashlib
import itertools
import json
import math
import multiprocessing
import os
from pathlib import Path
import platform
import signal
import sys
import time
import traceback
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np
import yaml

from ros_support.settings import check_value
from ros_support.validation import number, OneLineParser, read_yaml
from soliton_encirclement_ros.analysis.outputs import output_dir_problem
from soliton_encirclement_ros.analysis.report import json_text, SETTLE_THRESHOLDS, summarise
from soliton_encirclement_ros.core import batch_engine
from soliton_encirclement_ros.core.gains import ControllerParams, PRESETS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import load_scenario, Scenario
from velocity_mobility_ros.core.vehicle import VehicleParams

RUNS_FILE, SUMMARY_FILE, SPEC_FILE = 'runs.csv', 'summary.csv', 'sweep.json'
SPEC_KEYS = ('scenario', 'grid', 'seeds', 'plot', 'preset')
# Scenario fields a grid may not set: the seed has its own key, the nested mappings are
# reached through their own field names.
NOT_GRID = ('seed', 'controller', 'vehicle')
# Largest R * N^2 of one chunk of the receiver x sender engine; above it, runs go one by one
# through batch_sim's own engines (O(N log N) per tick for lossless large swarms).
CHUNK_BUDGET = 10_000
SINGLE_RUN_AGENTS = 64
# Chunks handed to each worker at a time (the others wait in the run generator), and the most
# generated runs waiting for their chunk to fill: memory does not grow with the sweep.
CHUNKS_IN_FLIGHT_PER_WORKER = 2
MAX_WAITING_RUNS = 20_000
TABLE_ROWS = 40  # grid points printed at the end (summary.csv has them all)
RESULT_COLUMNS = ([f'final_{m}' for m in METRIC_NAMES] + [f'mean_{m}' for m in METRIC_NAMES]
                  + [f'settle_{m}' for m in SETTLE_THRESHOLDS] + ['d_min', 'd_min_time'])


class SpecError(ValueError):
    """A bad sweep spec: the message is one line for the user."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) before the first run: the message is one line for the user."""


# --- the spec -----------------------------------------------------------------------------

def _fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


SCENARIO_FIELDS = [f for f in _fields(Scenario) if f not in NOT_GRID]
VEHICLE_FIELDS = _fields(VehicleParams)
CONTROLLER_FIELDS = _fields(ControllerParams)


def parameter_home(name: str) -> str:
    """Return where grid parameter ``name`` goes: 'scenario', 'vehicle' or 'controller'."""
    for home, names in (('scenario', SCENARIO_FIELDS), ('vehicle', VEHICLE_FIELDS),
                        ('controller', CONTROLLER_FIELDS)):
        if name in names:
            return home
    known = SCENARIO_FIELDS + VEHICLE_FIELDS + CONTROLLER_FIELDS
    close = difflib.get_close_matches(name, known, n=1)
    hint = f' (did you mean {close[0]}?)' if close else ''
    raise SpecError(f'grid: unknown parameter {name!r}{hint}; a grid parameter is a scenario '
                    'field, a vehicle limit or a controller gain')


def with_values(base: Mapping[str, Any], values: Mapping[str, Any]) -> dict:
    """Return the scenario mapping ``base`` with the grid ``values`` put where they belong."""
    out = {**base, 'controller': dict(base.get('controller', {})),
           'vehicle': dict(base.get('vehicle', {}))}
    for name, value in values.items():
        home = parameter_home(name)
        if home == 'scenario':
            out[name] = value
        else:
            out[home][name] = value
    return out


class Spec:
    """A validated sweep: its base scenario mapping, grid, seeds and plot choice."""

    def __init__(self, raw: Any, origin: Path) -> None:
        if not isinstance(raw, Mapping):
            raise SpecError(f'a sweep spec must be a mapping with keys {", ".join(SPEC_KEYS)}')
        unknown = sorted(set(raw) - set(SPEC_KEYS))
        if unknown:
            raise SpecError(f'unknown spec key(s) {", ".join(unknown)} '
                            f'(known: {", ".join(SPEC_KEYS)})')
        self.raw = dict(raw)
        scenario = raw.get('scenario', {})
        if isinstance(scenario, str):
            path = Path(scenario)
            path = path if path.is_absolute() else origin.parent / path
            try:
                base = load_scenario(path)
            except ValueError as exc:
                raise SpecError(f'scenario: {exc}') from None
        elif isinstance(scenario, Mapping):
            try:
                base = Scenario.from_mapping(scenario)
            except ValueError as exc:
                raise SpecError(f'scenario: {exc}') from None
        else:
            raise SpecError(f'scenario must be a mapping or a YAML path, got {scenario!r}')
        preset = raw.get('preset', 'default')
        if preset not in PRESETS:
            raise SpecError(f'preset must be one of {", ".join(PRESETS)}, got {preset!r}')
        base_map = base.to_mapping()
        base_map['controller'] = {**PRESETS[preset], **base.controller}
        base_map['vehicle'] = dict(base.vehicle)
        self.base = base_map
        grid = raw.get('grid') or {}
        if not isinstance(grid, Mapping):
            raise SpecError(f'grid must be a mapping of parameter: [values], got {grid!r}')
        self.grid: dict[str, list] = {}
        for name, values in grid.items():
            if name in NOT_GRID:
                raise SpecError(f'grid: {name} cannot be a grid parameter '
                                + ('(use seeds)' if name == 'seed' else '(name the field)'))
            parameter_home(name)
            if not isinstance(values, list) or not values:
                raise SpecError(f'grid: {name} must be a non-empty list of values, '
                                f'got {values!r}')
            self.grid[name] = values
        self.seeds = _seeds(raw.get('seeds', 1))
        self.plot = self._plot(raw.get('plot') or {})

    def _plot(self, plot: Any) -> dict:
        if not isinstance(plot, Mapping):
            raise SpecError(f'plot must be a mapping {{metric, x, y}}, got {plot!r}')
        unknown = sorted(set(plot) - {'metric', 'x', 'y'})
        if unknown:
            raise SpecError(f'plot: unknown key(s) {", ".join(unknown)} (known: metric, x, y)')
        names = list(self.grid)
        out = {'metric': plot.get('metric', 'E_gap'),
               'x': plot.get('x', names[0] if names else None),
               'y': plot.get('y', names[1] if len(names) > 1 else None)}
        if out['metric'] not in METRIC_NAMES:
            raise SpecError(f'plot: metric must be one of {", ".join(METRIC_NAMES)}, '
                            f'got {out["metric"]!r}')
        for axis in ('x', 'y'):
            if out[axis] is not None and out[axis] not in self.grid:
                raise SpecError(f'plot: {axis} must be a grid parameter '
                                f'({", ".join(names) or "the grid is empty"}), '
                                f'got {out[axis]!r}')
        return out

    def points(self) -> Iterator[dict]:
        """Yield every grid point ({name: value}), in grid order."""
        names = list(self.grid)
        for combo in itertools.product(*(self.grid[n] for n in names)):
            yield dict(zip(names, combo))

    @property
    def point_count(self) -> int:
        return math.prod(len(values) for values in self.grid.values())

    @property
    def run_count(self) -> int:
        return self.point_count * len(self.seeds)

    def scenario(self, point: Mapping[str, Any]) -> Scenario:
        """Return the scenario of a grid point (first seed), validated: ``SpecError`` if bad."""
        try:
            return Scenario.from_mapping({**with_values(self.base, point), 'seed': self.seeds[0]})
        except ValueError as exc:
            where = ', '.join(f'{k}={v!r}' for k, v in point.items()) or 'scenario'
            raise SpecError(f'{where}: {exc}') from None

    def check(self, should_stop: Callable[[], bool] = lambda: False) -> 'Checked':
        """
        Validate every grid point's scenario once (the seeds, checked apart, change nothing else).

        ``SpecError`` names the first bad point; ``Interrupted`` when ``should_stop()``.
        """
        checked = Checked()
        for index, point in enumerate(self.points()):
            if should_stop():
                raise Interrupted(f'interrupted while checking the spec ({index} of '
                                  f'{self.point_count} scenarios checked); nothing was run or '
                                  'written')
            scenario = self.scenario(point)
            # Points that differ only in per-run fields may be stepped together: a finer cut
            # than batch_engine.group_key, and far cheaper than it.
            shape = [(n, repr(v)) for n, v in point.items()
                     if n not in batch_engine.PER_RUN_FIELDS]
            checked.add(repr(shape), scenario.agents, len(self.seeds))
        return checked

    def runs(self, checked: 'Checked', skip: Callable[[tuple], bool] = lambda key: False
             ) -> Iterator['Run']:
        """Yield every run of a checked spec, in grid and seed order, but those ``skip`` names."""
        for point, group in zip(self.points(), checked.point_group):
            mapping, key = with_values(self.base, point), _key(point)
            for seed in self.seeds:
                if not skip((key, seed)):
                    yield Run(point, seed, mapping, group)


class Checked:
    """What the validation learned, compactly: each point's chunk group, each group's size."""

    def __init__(self) -> None:
        self.point_group: list[int] = []
        self.group_agents: list[int] = []
        self.group_runs: list[int] = []
        self._groups: dict[bytes, int] = {}

    def add(self, shape: str, agents: int, runs: int) -> None:
        """Add a grid point of chunk group ``shape`` (equal shapes may share a numpy step)."""
        digest = hashlib.sha1(shape.encode()).digest()
        group = self._groups.setdefault(digest, len(self._groups))
        if group == len(self.group_runs):
            self.group_agents.append(agents)
            self.group_runs.append(0)
        self.group_runs[group] += runs
        self.point_group.append(group)


SEED_FIELD = next(f for f in dataclasses.fields(Scenario) if f.name == 'seed')


def _seeds(value: Any) -> Sequence[int]:
    if isinstance(value, bool):
        raise SpecError(f'seeds must be a count or a list of integers >= 0, got {value!r}')
    if isinstance(value, int):
        if value < 1:
            raise SpecError(f'seeds must be a count >= 1 or a list, got {value}')
        _check_seed(value - 1)
        return range(value)  # not a list: a count of millions costs nothing
    if (isinstance(value, list) and value
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)):
        if len(set(value)) != len(value):
            raise SpecError(f'seeds lists a seed twice: {value}')
        _check_seed(max(value))
        return list(value)
    raise SpecError(f'seeds must be a count or a list of integers >= 0, got {value!r}')


def _check_seed(seed: int) -> None:
    """Check the largest seed by the scenario's own rule (the points are checked with one)."""
    try:
        check_value(SEED_FIELD, seed)
    except ValueError as exc:
        raise SpecError(f'seeds: {exc}') from None


def load_spec(path) -> Spec:
    """Read and validate a sweep spec file."""
    try:
        raw = read_yaml(path, 'sweep spec')
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    return Spec(raw, Path(path))


class Run:
    """
    One run of the sweep: its grid point, seed and scenario.

    ``scenario`` is a :class:`Scenario` or the grid point's scenario mapping (shared by its
    seeds); ``group`` the chunk group, if known.
    """

    def __init__(self, point: dict, seed: int, scenario, group: Optional[int] = None) -> None:
        self.point, self.seed, self.scenario, self.group = point, seed, scenario, group

    def key(self) -> tuple:
        return (_key(self.point), self.seed)

    def mapping(self) -> dict:
        """Return the scenario mapping the worker builds this run from."""
        base = (self.scenario if isinstance(self.scenario, Mapping)
                else self.scenario.to_mapping())
        return {**base, 'seed': self.seed}


def _key(point: Mapping[str, Any]) -> str:
    return json.dumps(point, sort_keys=True)


# --- the work -----------------------------------------------------------------------------

def chunk_size(agents: int, group_runs: int, workers: int) -> int:
    """
    Return the runs per chunk of a group.

    At most ``CHUNK_BUDGET / N^2``, cut so that every worker gets work; large swarms one by one.
    """
    size = 1 if agents > SINGLE_RUN_AGENTS else max(1, CHUNK_BUDGET // (agents * agents))
    return max(1, min(size, math.ceil(group_runs / max(1, workers))))


def chunks(runs: list[Run], workers: int) -> list[list[Run]]:
    """
    Split a list of ``runs`` (each with a :class:`Scenario`) into chunks stepped together.

    Runs of one :func:`batch_engine.group_key` share a chunk (see :func:`chunk_size`).
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(batch_engine.group_key(run.scenario), []).append(run)
    out = []
    for members in groups.values():
        size = chunk_size(members[0].scenario.agents, len(members), workers)
        out += [members[k:k + size] for k in range(0, len(members), size)]
    return out


def stream_chunks(runs: Iterable[Run], checked: Checked, workers: int) -> Iterator[list[Run]]:
    """
    Yield the chunks of a spec's ``runs`` as they fill (or their group ends), never all at once.

    Chunk sizes as :func:`chunks` gives them for the whole group; at most
    ``MAX_WAITING_RUNS`` runs wait for their chunk to fill (the fullest goes first).
    """
    sizes = [chunk_size(n, total, workers)
             for n, total in zip(checked.group_agents, checked.group_runs)]
    filling: dict[int, list[Run]] = {}
    waiting = 0
    for run in runs:
        bucket = filling.setdefault(run.group, [])
        bucket.append(run)
        waiting += 1
        if len(bucket) >= sizes[run.group]:
            waiting -= len(bucket)
            yield filling.pop(run.group)
        elif waiting > MAX_WAITING_RUNS:
            fullest = max(filling, key=lambda g: len(filling[g]))
            waiting -= len(filling[fullest])
            yield filling.pop(fullest)
    yield from filling.values()


def run_chunk(scenarios: list[dict]) -> list[dict]:
    """
    Simulate runs (scenario mappings) together; a result row per run.

    A chunk that raises is run again one run at a time, so a run that fails is recorded with
    its error and the others are not lost. Runs in the worker process, also on a Dask worker.
    """
    start = time.perf_counter()
    try:
        built = [Scenario.from_mapping(s) for s in scenarios]
        series = _simulate(built)
        wall = (time.perf_counter() - start) / len(scenarios)
        return [_row(m, wall) for m in series]
    except Exception:  # noqa: B902 - a failing chunk is isolated run by run below
        if len(scenarios) == 1:
            return [{'error': traceback.format_exc(limit=1).strip().splitlines()[-1]}]
        return [row for s in scenarios for row in run_chunk([s])]


def _simulate(scenarios: list[Scenario]) -> list[np.ndarray]:
    if len(scenarios) == 1 and scenarios[0].agents > SINGLE_RUN_AGENTS:
        from soliton_encirclement_ros.sim.batch_sim import simulate
        return [simulate(scenarios[0]).metrics]
    return batch_engine.simulate_runs(scenarios).metrics


def _row(metrics: np.ndarray, wall: float) -> dict:
    s = summarise(metrics)
    row = {f'final_{m}': s['final'][m] for m in METRIC_NAMES}
    row.update({f'mean_{m}': s['mean'][m] for m in METRIC_NAMES})
    row.update({f'settle_{m}': s['settle_time'][m] for m in SETTLE_THRESHOLDS})
    row.update({'d_min': s['closest']['d_min'], 'd_min_time': s['closest']['time'],
                'wall_time': wall, 'error': ''})
    return row


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means


def _results(work: Iterable[list[Run]], submit, in_flight: int,
             should_stop) -> Iterator[tuple[list[Run], Any]]:
    """Yield (chunk, job) as jobs finish, with at most ``in_flight`` submitted at a time."""
    work = iter(work)
    pending: list = []
    exhausted = False
    while not should_stop():
        while not exhausted and len(pending) < in_flight:
            chunk = next(work, None)
            if chunk is None:
                exhausted = True
            else:
                pending.append((chunk, submit([r.mapping() for r in chunk])))
        if not pending:
            return
        ready = [job for job in pending if job[1].done()]
        for job in ready:
            pending.remove(job)
            yield job
        if not ready:
            time.sleep(0.05)


class _PoolJob:

    def __init__(self, result) -> None:
        self.result = result

    def done(self) -> bool:
        return self.result.ready()


def local_results(work: Iterable[list[Run]], workers: int,
                  should_stop=lambda: False) -> Iterator[tuple[list[Run], list]]:
    """Yield (chunk, rows) as a local process pool finishes them, until ``should_stop()``."""
    if workers == 1:
        for chunk in work:
            if should_stop():
                return
            yield chunk, run_chunk([r.mapping() for r in chunk])
        return
    # spawn, not fork: the caller may have threads (tqdm's monitor, rclpy, a test runner's DDS
    # participants), and a forked child can inherit a lock one of them held, and hang.
    pool = multiprocessing.get_context('spawn').Pool(workers, initializer=_ignore_interrupts)
    try:
        for chunk, job in _results(
                work, lambda s: _PoolJob(pool.apply_async(run_chunk, (s,))),
                CHUNKS_IN_FLIGHT_PER_WORKER * workers, should_stop):
            yield chunk, job.result.get()
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def dask_results(work: Iterable[list[Run]], address: str, workers: int = 1,
                 should_stop=lambda: False) -> Iterator[tuple[list[Run], list]]:
    """Yield (chunk, rows) as the Dask cluster at ``address`` (``workers`` threads) ends them."""
    from dask.distributed import Client
    client = Client(address, timeout='10s')
    in_flight: set = set()  # only these are held: a finished chunk's result is let go

    def submit(scenarios):
        future = client.submit(run_chunk, scenarios, pure=False)
        in_flight.add(future)
        return future
    try:
        for chunk, future in _results(work, submit, CHUNKS_IN_FLIGHT_PER_WORKER * workers,
                                      should_stop):
            rows = future.result()
            in_flight.discard(future)
            yield chunk, rows
    finally:
        client.cancel(list(in_flight))
        client.close()


# --- the outputs --------------------------------------------------------------------------

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


class RunsFile:
    """
    ``runs.csv``, appended and flushed a row per finished run.

    With ``resume``, the finished rows are kept (the failed ones dropped, to be tried again)
    through a temporary file that replaces the old one whole, so that no interruption loses
    them; only their keys stay in memory (:attr:`done`).
    """

    def __init__(self, path: Path, header: list[str], resume: bool) -> None:
        self.path, self.header = path, header
        self._grid_names = header[:header.index('seed')]
        self.done: set[tuple] = set()
        if resume and path.exists():
            keys: dict[tuple, str] = {}  # the grid cells of a point -> its key, read once
            tmp = path.with_name(path.name + '.tmp')
            with path.open(newline='') as f, tmp.open('w', newline='') as kept:
                reader = csv.DictReader(f)
                if reader.fieldnames != header:
                    raise SpecError(f'--resume: {path} has other columns than this spec gives')
                writer = csv.writer(kept)
                writer.writerow(header)
                for row in reader:
                    if row['error']:  # failed runs are tried again
                        continue
                    cells = tuple(row[name] for name in self._grid_names)
                    if cells not in keys:
                        keys[cells] = _key(self._point(row))
                    self.done.add((keys[cells], int(row['seed'])))
                    writer.writerow([row[h] for h in header])
                kept.flush()
                os.fsync(kept.fileno())
            tmp.replace(path)
        self._file = path.open('a' if resume and path.exists() else 'w', newline='')
        self._writer = csv.writer(self._file)
        if self._file.tell() == 0:
            self._writer.writerow(header)
            self._file.flush()

    def _point(self, row: Mapping[str, str]) -> dict:
        return {name: yaml.safe_load(row[name]) for name in self._grid_names}

    def add(self, run: Run, result: Mapping[str, Any]) -> None:
        values = {**run.point, 'seed': run.seed, **result}
        self._writer.writerow([_cell(values.get(h)) for h in self.header])
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


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
    with path.open('w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for row in rows:
            writer.writerow([_cell(row[h]) for h in header])


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


# --- the command --------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog='sweep_sim', description='Monte-Carlo sweeps of the soliton encirclement: every '
        'grid point x seed, runs of one shape stepped together, on all cores or a Dask cluster.')
    parser.add_argument('spec', help='sweep spec YAML (scenario, grid, seeds, plot, preset)')
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--workers', type=number(1, integer=True), default=None,
                        help='local worker processes (default: every core)')
    parser.add_argument('--scheduler', default=None,
                        help='Dask distributed scheduler address (e.g. tcp://host:8786)')
    parser.add_argument('--resume', action='store_true',
                        help='keep the finished runs in --out and run only the others')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    return parser


def main(argv: Optional[Iterable[str]] = None) -> int:
    from ros_support.signals import StopRequest
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    # From here a signal only sets a flag: checked between scenarios, then between chunks.
    stop = StopRequest('sweep_sim').install()
    try:
        spec = load_spec(args.spec)
        print(f'sweep_sim: {spec.run_count} runs ({spec.point_count} grid point(s) x '
              f'{len(spec.seeds)} seed(s)); checking {spec.point_count} scenario(s)', flush=True)
        problem = output_dir_problem(out, '--out')
        if problem:
            raise SpecError(problem)
        if (out / RUNS_FILE).exists() and not args.resume:
            raise SpecError(f'--out {out} already holds a sweep ({RUNS_FILE}); '
                            'add --resume to finish it, or choose another --out')
        if args.resume and (out / SPEC_FILE).exists():
            previous = json.loads((out / SPEC_FILE).read_text()).get('spec')
            if previous != spec.raw:
                raise SpecError(f"--resume: {out / SPEC_FILE} is another sweep's spec")
        checked = spec.check(lambda: stop.requested)
        cluster_threads = _cluster_threads(args.scheduler) if args.scheduler else None
        if stop.requested:
            raise Interrupted('interrupted before the first run; nothing was run or written')
    except SpecError as exc:
        print(f'sweep_sim: error: {exc}', file=sys.stderr)
        return 2
    except Interrupted as exc:
        print(f'sweep_sim: {exc}', file=sys.stderr)
        StopRequest.ignore_from_now()
        return 130
    except ImportError as exc:
        print(f'sweep_sim: error: --scheduler needs Dask distributed ({exc.name} is not '
              'installed): pip install "dask[distributed]"', file=sys.stderr)
        return 2
    return _sweep(spec, checked, out, args, stop, cluster_threads)


def _cluster_threads(address: str) -> int:
    """Return the worker threads of the Dask cluster at ``address``; ``SpecError`` if none."""
    from dask.distributed import Client
    try:
        with Client(address, timeout='10s') as client:
            threads = sum(client.nthreads().values())
    except (OSError, TimeoutError) as exc:
        raise SpecError(f'--scheduler {address}: cannot reach a Dask scheduler ({exc})') from None
    if not threads:
        raise SpecError(f'--scheduler {address}: the cluster has no workers')
    return threads


def _sweep(spec: Spec, checked: Checked, out: Path, args, stop, cluster_threads=None) -> int:
    from tqdm import tqdm

    from ros_support.signals import StopRequest
    out.mkdir(parents=True, exist_ok=True)
    workers = cluster_threads or args.workers or os.cpu_count() or 1
    runs_file = RunsFile(out / RUNS_FILE, runs_header(spec), args.resume)
    total = spec.run_count
    todo = total - min(len(runs_file.done), total)
    started = time.time()
    _write_spec(out, spec, args, total, None, started)
    n_chunks = 0

    def work() -> Iterator[list[Run]]:
        nonlocal n_chunks
        for chunk in stream_chunks(spec.runs(checked, runs_file.done.__contains__), checked,
                                   workers):
            n_chunks += 1
            yield chunk
    errors = finished = 0
    bar = tqdm(total=total, initial=total - todo, unit='run', desc='sweep_sim',
               file=sys.stderr, dynamic_ncols=True)
    cpu_start = time.process_time()
    should_stop = (lambda: stop.requested)
    results = (dask_results(work(), args.scheduler, workers, should_stop) if args.scheduler
               else local_results(work(), workers, should_stop))
    try:
        for chunk, rows in results:
            for run, row in zip(chunk, rows):
                runs_file.add(run, row)
                errors += bool(row.get('error'))
                finished += 1
            bar.update(len(chunk))
            if stop.requested:
                break
    finally:
        stop.writing = True
        results.close()
        runs_file.close()
        bar.close()
    interrupted = stop.requested or finished < todo
    table = RunTable(out / RUNS_FILE, list(spec.grid))
    summary = summary_rows(spec, table)
    write_summary(out / SUMMARY_FILE, summary)
    if not args.no_plots:
        from soliton_encirclement_ros.analysis.sweep_plots import write_sweep_plots
        write_sweep_plots(out, spec, table, summary)
    totals = {'runs': total, 'finished': len(table), 'errors': int(table.failed.sum()),
              'this_session': {'runs': finished, 'errors': errors,
                               'wall_time': time.time() - started,
                               'parent_cpu_time': time.process_time() - cpu_start,
                               'chunks': n_chunks, 'workers': workers,
                               'scheduler': args.scheduler},
              'interrupted': interrupted}
    _write_spec(out, spec, args, total, totals, started)
    print_table(spec, summary, spec.plot['metric'])
    print(f'sweep_sim: {len(table)}/{total} runs in {out} ({totals["errors"]} failed); '
          f'{finished} this session in {time.time() - started:.1f} s'
          + ('; interrupted: --resume finishes it' if interrupted else ''))
    StopRequest.ignore_from_now()
    return 130 if interrupted else (1 if totals['errors'] else 0)


def _write_spec(out: Path, spec: Spec, args, total: int, totals: Optional[dict],
                started: float) -> None:
    import importlib.metadata as md
    versions = {'python': platform.python_version(), 'numpy': np.__version__}
    for package in ('soliton_encirclement_ros', 'dask', 'distributed'):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    doc = {'spec': spec.raw, 'spec_file': str(Path(args.spec).absolute()), 'runs': total,
           'started': time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(started)),
           'versions': versions, 'totals': totals}
    tmp = out / (SPEC_FILE + '.tmp')
    tmp.write_text(json_text(doc))
    tmp.replace(out / SPEC_FILE)


if __name__ == '__main__':
    sys.exit(main())
