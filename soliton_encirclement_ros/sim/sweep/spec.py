"""The sweep spec: parsing, grid routing (which name goes where), seeds and runs."""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import itertools
import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence


from ros_support.settings import check_value
from ros_support.validation import read_yaml
from soliton_encirclement_ros.core import batch_engine
from soliton_encirclement_ros.core.gains import ControllerParams, PRESETS
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import load_scenario, Scenario
from soliton_encirclement_ros.sim.sizes import available_memory, batch_size_problem
from velocity_mobility_ros.core.vehicle import VehicleParams

SPEC_KEYS = ('scenario', 'grid', 'seeds', 'plot', 'preset')
# Scenario fields a grid may not set: the seed has its own key, the nested mappings are
# reached through their own field names.
NOT_GRID = ('seed', 'controller', 'vehicle')


class SpecError(ValueError):
    """A bad sweep spec: the message is one line for the user."""


class Interrupted(Exception):
    """Ctrl-C (or SIGTERM) before the first run: the message is one line for the user."""


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

        ``SpecError`` names the first bad point, or the first too big to fit in memory as
        ``batch_sim`` checks it (``sim.sizes``); ``Interrupted`` when ``should_stop()``.
        """
        checked = Checked()
        available = available_memory()  # once: the same budget for every point
        for index, point in enumerate(self.points()):
            if should_stop():
                raise Interrupted(f'interrupted while checking the spec ({index} of '
                                  f'{self.point_count} scenarios checked); nothing was run or '
                                  'written')
            scenario = self.scenario(point)
            problem = batch_size_problem(scenario, name='agents', available=available)
            if problem:  # before any worker starts
                where = ', '.join(f'{k}={v!r}' for k, v in point.items()) or 'scenario'
                raise SpecError(f'grid point {where}: {problem}')
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
