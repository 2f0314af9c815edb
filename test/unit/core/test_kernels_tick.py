"""
The batch engine's compiled tick around the law, against the numpy code it replaces.

Value for value, bit for bit: the broadcasts delivered and sent (``kernels.exchange_states``:
loss, delay, outages, several ticks in flight) into every receiver's tables, the ``d_safe``
term's test for a near vehicle (``kernels._any_near``) against its count of near columns, the
target's acceleration estimated in place, and the metrics kernel's sort.
"""
import importlib.util

import numpy as np
import pytest

from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.batch_engine import (
    _estimate_in_place, BatchControllers, simulate_runs)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.target_estimate import estimate_acceleration

# Each test skips without numba (a marker, not a module-level skip: under colcon's pytest that
# can skip a whole directory).
pytestmark = pytest.mark.skipif(importlib.util.find_spec('numba') is None,
                                reason='numba is not installed (the standalone extra)')

TABLES = ('has', 'rx', 'member', 'position', 'velocity', 'nb_u', 'nb_u_ss', 'target_has',
          'target_rx', 'target_position', 'target_velocity', 'target_acceleration')


@pytest.mark.parametrize('loss, delay', [(0.0, 0.0), (0.3, 0.025), (0.2, 0.0), (0.0, 0.05),
                                         (0.01, 0.0), (0.01, 0.025)],
                         ids=['lossless', 'loss, 3 ticks in flight', 'loss', '5 ticks in flight',
                              'a message lost now and then', 'now and then, 3 in flight'])
def test_compiled_exchange_equals_deliver_and_send(loss, delay):
    """
    Every receiver's tables after each tick as ``_deliver`` then ``_send`` leave them.

    Where every receiver heard every broadcast, each run's one shared copy (brought into the
    receivers' own tables, as the numpy path does before it reads them); where a message is
    lost now and then, from shared tables to the receivers' own and back, many times.
    """
    runs, agents, period = 3, 5, 0.01
    scenarios = [Scenario(agents=agents, seed=seed, control_period=period, loss=loss,
                          delay=delay) for seed in range(runs)]
    ids = scenarios[0].agent_ids()
    got, want = BatchControllers(scenarios, ids), BatchControllers(scenarios, ids)
    assert got._exchanges
    rng = np.random.default_rng(7)
    lost = 0
    shared = []
    for k in range(60):
        now = k * period
        live = rng.random((runs, agents)) < 0.9  # outages: a failed agent sends its presence
        positions = rng.normal(0.0, 10.0, (runs, agents + 1, 3))[:, :agents]  # a slice
        velocities = rng.normal(0.0, 3.0, (runs, agents, 3))
        target = rng.normal(0.0, 5.0, (3, runs, 3))
        for c in (got, want):
            c.u[...] = np.sin(now + np.arange(agents))
            c.u_ss[...] = np.cos(now * 3 + np.arange(agents))
        got._exchange(now, live, positions, velocities, *target)
        shared.append(bool(got._flight.queue[3]))
        got._materialize()
        want._deliver(now, live)
        want._send(now, live, positions, velocities, *target)
        for name in TABLES:
            a, b = getattr(got, name), getattr(want, name)
            np.testing.assert_array_equal(a, b, err_msg=f'{name} at tick {k}')
        lost += np.sum(~got.has[:, ~np.eye(agents, dtype=bool)])
    assert got.has.sum() > 0 and got.target_has.all()
    if loss:
        assert lost > 0  # some pair never heard at first: drawn and lost
    assert got._flight.queue[1] == len(want._in_flight) >= round(delay / period)  # in flight
    if not loss:
        assert sum(shared) >= 60 - 1 - round(delay / period)  # all but before a first arrival
    elif loss < 0.1:  # from shared tables to the receivers' own and back, many times
        assert np.sum(np.diff(shared)) >= 5 and 10 < sum(shared) < 50
    else:
        assert not any(shared)


def _row_inputs(rng, agents, close):
    """Random inputs of one row's d_safe columns: vehicles within a few metres, some a presence."""
    position = rng.normal(0.0, 1.0, (1, 3))
    velocity = rng.normal(0.0, 3.0, (1, 3))
    nb_position = position[:, None, :] + rng.normal(0.0, close, (1, agents, 3))
    nb_velocity = rng.normal(0.0, 3.0, (1, agents, 3))
    has = rng.random((1, agents)) < 0.9
    rx = np.where(rng.random((1, agents)) < 0.9, 0.99, -5.0)  # heard, or long ago
    member = rng.random((1, agents)) < 0.8
    return has, rx, member, position, velocity, nb_position, nb_velocity


OWN_ROW = np.zeros(1, dtype=np.int64)  # the row reads its own table


@pytest.mark.parametrize('gains', [{}, {'t_react': 0.0}, {'a_safe': 0.0}],
                         ids=['default', 't_react 0', 'a_safe 0'])
def test_the_near_test_equals_the_count_of_near_columns(gains):
    """``_any_near`` is True exactly where ``_separation_columns`` counts a near column."""
    k = compiled.kernels()
    params = ControllerParams().with_changes(**gains)
    agents = 6
    law = compiled.control_plan(params, 0.0, 1, agents).law
    units, near = np.empty((2 * agents, 2)), np.empty(2 * agents, dtype=np.int64)
    weights, pushes, closings = (np.empty(2 * agents) for _ in range(3))
    rng = np.random.default_rng(11)
    outcomes = []
    for _ in range(3000):
        close = rng.choice([0.5, 2.0, 5.0, 20.0])
        has, rx, member, *state = _row_inputs(rng, agents, close)
        lawx, lawy = rng.normal(0.0, 4.0, 2)
        reach = rng.choice([1.0, 2.0, 3.0])
        bound2 = rng.choice([np.inf, 100.0, 9.0])
        rests = not k._no_presence(0, has, OWN_ROW, rx, member, 1.0, law[k.AGENT_TIMEOUT])
        args = (0, law, 1.0, has, OWN_ROW, rx, 0.0, member, rests, *state, lawx, lawy, reach,
                bound2)
        count = k._separation_columns(*args, units, weights, pushes, closings, near)
        assert k._any_near(*args) == (count > 0), (args, count)
        outcomes.append(count > 0)
    assert 300 < sum(outcomes) < 2700  # near and not near, both many times


def test_the_estimate_in_place_equals_estimate_acceleration():
    """Bit for bit, with samples not finite (kept), not later (ignored) and steps that vary."""
    k = compiled.kernels()
    rng = np.random.default_rng(5)
    stamps = np.cumsum(rng.choice([0.01, 0.02, 0.0, 0.03], 200))
    want = got = None
    for stamp in stamps:
        velocity = rng.normal(0.0, 2.0, (4, 3))
        velocity[rng.random(4) < 0.1, rng.integers(0, 3)] = rng.choice([np.nan, np.inf])
        want = estimate_acceleration(want, stamp, velocity)
        got = _estimate_in_place(k, got, stamp, velocity)
        assert got.stamp == want.stamp
        np.testing.assert_array_equal(got.velocity, want.velocity)
        np.testing.assert_array_equal(got.acceleration, want.acceleration)
    assert np.isfinite(got.acceleration).all() and np.any(got.acceleration != 0.0)


def test_the_metrics_sort_is_numpys():
    """The metrics kernel's sort without allocation: np.sort's array, ties and NaN included."""
    k = compiled.kernels()
    rng = np.random.default_rng(6)
    for m in range(0, 40):
        values = np.round(rng.uniform(0.0, 6.0, 40), 1)  # ties
        if m % 5 == 4:
            values[rng.integers(0, m)] = np.nan
        got = k._sorted(values, m, np.empty(40))
        np.testing.assert_array_equal(got, np.sort(values[:m]))


@pytest.mark.parametrize('loss', [0.0, 0.3], ids=['lossless', 'loss 0.3'])
def test_shared_angles_equal_the_numpy_path(monkeypatch, loss):
    """
    Where every broadcast reached every receiver, one arctan2 per run and sender serves all.

    Lossless runs take that path on every tick after the first delivery; lossy ones only
    on ticks whose last broadcasts all arrived. Either way the trajectories are the numpy
    path's, bit for bit.
    """
    k = compiled.kernels()
    scenarios = [Scenario(agents=6, seed=seed, duration=4.0, control_period=0.02, loss=loss,
                          target_motion='circle', target_speed=3.0)
                 for seed in range(3)]
    calls = {'shared': 0, 'each': 0}
    for name, key in (('wrap_shared_angles', 'shared'), ('wrap_angles', 'each')):
        def counted(*args, _kernel=getattr(k, name), _key=key):
            calls[_key] += 1
            return _kernel(*args)
        monkeypatch.setattr(k, name, counted)
    got = simulate_runs(scenarios)
    monkeypatch.setattr(compiled, '_KERNELS', False)  # the numpy path
    want = simulate_runs(scenarios)
    np.testing.assert_array_equal(got.final_positions, want.final_positions)
    for a, b in zip(got.metrics, want.metrics):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    if loss:
        assert calls['each'] > 150 and calls['shared'] == 0  # some message lost every tick
    else:
        assert calls['shared'] == 200 and calls['each'] == 0  # the first tick hears nothing
