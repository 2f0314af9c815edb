"""
The safety area over whole runs: random commands, a runaway target in every engine, a sweep.

The multi-second part of ``unit/core/test_area.py`` (issue 37 §2).
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.area import limit_to_area, SafetyArea
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.batch_sim import simulate
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

# A non-convex field: a square with a notch, 1 m margin, 0-40 m altitude band.
FIELD = {'polygon': [[-40, -40], [40, -40], [40, 40], [0, 10], [-40, 40]], 'z_min': 0.0,
         'z_max': 40.0}


@pytest.mark.parametrize('control_period', [0.01, 0.05])
def test_commands_towards_the_boundary_never_take_a_vehicle_out(control_period):
    """A vehicle model with lag and an acceleration limit, commanded at random, stays in."""
    area = SafetyArea.from_mapping(FIELD)
    vehicle = VehicleParams()
    rng = np.random.default_rng(7)
    state = VehicleState.at_rest(np.column_stack((rng.uniform(-30, 30, 20),
                                                  rng.uniform(-35, 0, 20), np.full(20, 10.0))))
    every = round(control_period / vehicle.sim_dt)
    closest = math.inf
    for k in range(round(40.0 / vehicle.sim_dt)):
        if k % round(3.0 / vehicle.sim_dt) == 0:  # a new wish every 3 s, up to 10 m/s
            wish = np.column_stack((rng.normal(0, 7, (20, 2)), rng.normal(0, 3, 20)))
        if k % every == 0:
            cmd = limit_to_area(wish, state.position, state.velocity, area, 1.0, 4.0)
        state = step(state, cmd, vehicle)
        closest = min(closest, float(area.distance(state.position).min()),
                      float(state.position[:, 2].min()), float(40.0 - state.position[:, 2].max()))
    assert closest > 0.0  # never outside, horizontally or vertically


# The target walks off the field at 4 m/s; the ring must stop at the boundary, inside.
RUNAWAY = {'agents': 6, 'radius': 10.0, 'duration': 50.0, 'control_period': 0.05,
           'target_motion': 'waypoints', 'waypoints': ((0.0, 0.0, 0.0), (150.0, 0.0, 0.0)),
           'target_speed': 4.0, 'altitude': 5.0,
           'safety_area': {'polygon': [[-30, -30], [30, -30], [30, 30], [-30, 30]],
                           'z_min': 0.0, 'z_max': 30.0}}


@pytest.mark.parametrize('engine', ['per-agent', 'vectorised', 'batch'])
def test_a_target_leaving_the_area_leaves_the_ring_stopped_inside_it(engine):
    result = simulate(Scenario(**RUNAWAY), engine)
    xy = np.concatenate([rows[:, 1:3] for name, rows in result.trajectories.items()
                         if name != 'target'])
    assert np.abs(xy).max() < 30.0             # never outside
    assert xy[:, 0].max() > 25.0               # the ring followed the target to the edge
    assert result.trajectories['target'][-1, 1] > 100.0  # the target is long gone
    assert result.params['safety_area']['polygon'][1] == [30, -30]
    assert 0.5 < result.area_margin <= 1.0 + 1e-6  # pressed against the stop line, 1 m inside


def test_the_sweep_engine_keeps_the_area_too():
    runs = simulate_runs([Scenario(**RUNAWAY, seed=s) for s in (0, 1)])
    assert np.abs(runs.final_positions[..., :2]).max() < 30.0
    assert runs.final_positions[..., 0].max() > 25.0
    assert np.all((runs.area_margin > 0.5) & (runs.area_margin <= 1.0 + 1e-6))


def test_a_sweep_shows_that_every_run_stays_inside(tmp_path):
    """sweep_sim --safety-area: each run's smallest margin to the area is in runs.csv."""
    import csv
    import yaml
    from soliton_encirclement_ros.sim.sweep import main
    scenario = {k: v for k, v in RUNAWAY.items() if k != 'safety_area'}
    scenario['waypoints'] = [list(p) for p in scenario['waypoints']]
    (tmp_path / 'spec.yaml').write_text(yaml.safe_dump(
        {'scenario': {**scenario, 'duration': 40.0}, 'grid': {'agents': [4, 6]}, 'seeds': 2}))
    (tmp_path / 'field.yaml').write_text(yaml.safe_dump(RUNAWAY['safety_area']))
    out = tmp_path / 'out'
    assert main([str(tmp_path / 'spec.yaml'), '--out', str(out), '--workers', '1',
                 '--no-plots', '--safety-area', str(tmp_path / 'field.yaml')]) == 0
    with open(out / 'runs.csv') as stream:
        margins = [float(row['area_margin']) for row in csv.DictReader(stream)]
    assert len(margins) == 4 and all(0.5 < m <= 1.0 + 1e-6 for m in margins), margins
    bad = tmp_path / 'bad.yaml'
    bad.write_text('polygon: [[0, 0], [1, 0]]\n')
    assert main([str(tmp_path / 'spec.yaml'), '--out', str(tmp_path / 'o2'),
                 '--safety-area', str(bad)]) == 2
