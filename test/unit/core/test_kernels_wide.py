"""
The vectorised engine's compiled ``d_safe`` term (``core.kernels_wide``) against ``core.law``.

Rows of agents with their vehicles within reach, as the engine gives them to the law: random
states, and the degenerate ones a tick brings (vehicles on top of each other, exactly
``d_safe`` apart, failed vehicles' rest points, silent vehicles' discs, NaN rows of none,
swarms of one and two). The kernel must return ``law.separation_velocity``'s bytes (a zero's
sign included), and the engine must fly the same trajectories with it as without it.
"""
import importlib.util

import numpy as np
import pytest

from soliton_encirclement_ros.core import law, swarm
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.scenario import Scenario

# Each test skips without numba (a marker, not a module-level skip: under colcon's pytest that
# can skip a whole directory).
pytestmark = pytest.mark.skipif(importlib.util.find_spec('numba') is None,
                                reason='numba is not installed (the standalone extra)')


def _kernel():
    from soliton_encirclement_ros.core import kernels_wide
    return kernels_wide.separation_velocity


def _same(got, want):
    """Bitwise equality (NaN in the same places, the same signs of zero)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype
    differ = np.flatnonzero(got.view(np.uint64) != want.view(np.uint64))
    assert differ.size == 0, (got.ravel()[differ[:5]], want.ravel()[differ[:5]])


def _settings(pick) -> ControllerParams:
    """Return settings that switch the term's parts on and off (with discs' bound too)."""
    return ControllerParams(d_safe=2.0, t_safe=pick(1.0, 0.0, 0.4), a_safe=pick(4.0, 0.0, 2.5),
                            t_react=pick(0.3, 0.0, 0.5), v_safe=pick(10.0, 2.0, 0.5),
                            v_uncertain=pick(0.5, 0.0, 2.0))


def _both(*args):
    """Return (kernel, law) of the same arguments, the law's over arrays of rows."""
    return _kernel()(*args), law.separation_velocity(*args)


def test_random_rows_are_laws():
    """
    Random rows give law's bytes.

    Coincident vehicles, NaN rows, signed zeros, ages outside [0, t_safe], discs (NaN radii
    among them), rows whose d_safe is 0, law commands of zero, several settings.
    """
    rng = np.random.default_rng(63)

    def pick(*options):
        return options[rng.integers(len(options))]

    pushed = 0
    for _ in range(300):
        params = _settings(pick)
        m, k = int(rng.integers(1, 40)), int(rng.integers(0, 30))
        position = rng.normal(size=(m, 3)) * pick(0.0, 1.0, 3.0)
        velocity = rng.normal(size=(m, 3)) * pick(0.0, 1.0, 8.0)
        others = position[:, None, :] + rng.normal(size=(m, k, 3)) * pick(0.5, 2.0, 5.0)
        others_v = rng.normal(size=(m, k, 3)) * pick(0.0, 1.0, 8.0)
        if k:
            rows = rng.integers(m, size=m // 3 + 1)
            others[rows, rng.integers(k, size=rows.size)] = position[rows]  # on top
            rows = rng.integers(m, size=m // 3 + 1)
            others[rows, rng.integers(k, size=rows.size)] = np.nan         # none there
            if rng.random() < 0.3:
                others_v[rng.integers(m), rng.integers(k)] = np.nan
        if rng.random() < 0.3:
            others_v = -others_v * 0.0
        age = pick(None, rng.uniform(-0.1, 1.5, (m, k)), np.zeros((m, k)))
        radius = pick(None, rng.uniform(0.0, 1.0, (m, k)),
                      np.where(rng.random((m, k)) < 0.5, np.nan, 0.3))
        v_law = pick(rng.normal(size=(m, 2)) * 6.0, np.zeros((m, 2)),
                     -velocity[:, :2] * 0.0)
        d_safe = pick(np.full(m, 2.0), np.where(rng.random(m) < 0.3, 0.0, 0.63))
        own_radius = pick(0.0, rng.uniform(0.0, 0.4, m))
        slide = bool(rng.random() < 0.3)  # a slide's pass (law.slide)
        got, want = _both(position, velocity, others, others_v, params, v_law, age, radius,
                          own_radius, d_safe, False, slide)
        _same(got, want)
        pushed += int(np.count_nonzero(np.any(want != 0.0, axis=-1)))
    assert pushed > 1000  # the term pushed in many rows: the values were compared, not zeros


def test_vehicles_on_top_and_exactly_d_safe_apart_are_laws():
    """Vehicles at the agent's very point, and exactly d_safe from it, at rest and moving."""
    params = ControllerParams(d_safe=2.0, t_react=0.3)
    d = 2.0
    position = np.array([[0.0, 0.0, 10.0], [5.0, 5.0, 10.0], [-3.0, 1.0, 10.0]])
    offsets = np.array([[0.0, 0.0, 0.0], [d, 0.0, 0.0], [0.0, -d, 0.0], [-0.0, 0.0, 0.0],
                        [d * 0.6, d * 0.8, 0.0], [np.nan, np.nan, np.nan]])
    others = position[:, None, :] + offsets[None]
    for own_v, their_v in (((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)), ((2.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
                           ((0.0, 0.0, 0.0), (-1.0, 0.5, 0.0)), ((3.0, -1.0, 0.0),
                                                                 (3.0, -1.0, 0.0))):
        velocity = np.broadcast_to(own_v, position.shape)
        others_v = np.broadcast_to(their_v, others.shape)
        for v_law in (np.zeros((3, 2)), np.array([[1.0, 0.0], [-2.0, 2.0], [0.0, -0.0]])):
            for t_safe, a_safe in ((0.0, 0.0), (0.4, 4.0)):
                p = ControllerParams(d_safe=2.0, t_react=params.t_react, t_safe=t_safe,
                                     a_safe=a_safe)
                got, want = _both(position, velocity, others, others_v, p, v_law,
                                  np.zeros(others.shape[:2]), None, 0.0, np.full(3, d))
                _same(got, want)


def test_failed_and_silent_vehicles_columns_are_laws():
    """
    The columns law.silent_obstacles makes give law's bytes.

    Presences' rest points after the vehicles, silent vehicles at their tracks with discs,
    NaN rows of none, as the engine hands them on.
    """
    rng = np.random.default_rng(7)
    params = ControllerParams()
    for _ in range(40):
        m, n = int(rng.integers(1, 12)), int(rng.integers(1, 12))
        own = rng.uniform(-4.0, 4.0, (m, 3))
        own_v = rng.normal(size=(m, 3)) * 3.0
        position = rng.uniform(-4.0, 4.0, (n, 3))
        velocity = rng.normal(size=(n, 3)) * rng.choice([0.0, 3.0])
        live = rng.random((m, n)) < 0.6
        silent = ~live & (rng.random((m, n)) < 0.5)
        presence = rng.random(n) < 0.5
        age = rng.uniform(0.0, 3.0, n)
        radius = np.where(rng.random((m, n)) < 0.5, rng.uniform(0.0, 0.8, (m, n)), 0.0)
        columns = law.silent_obstacles(live, silent, np.broadcast_to(position, (m, n, 3)),
                                       np.broadcast_to(velocity, (m, n, 3)),
                                       np.broadcast_to(age, (m, n)),
                                       np.broadcast_to(presence, (m, n)), params, radius,
                                       own_position=own)
        d_safe = params.safety_distance(np.full(m, n + 1))
        v_law = rng.normal(size=(m, 2)) * 4.0
        got, want = _both(own, own_v, columns['others_position'], columns['others_velocity'],
                          params, v_law, columns['others_age'], columns.get('others_radius'),
                          0.0, d_safe)
        _same(got, want)


@pytest.mark.parametrize('k', [0, 1])
def test_swarms_of_one_and_two_are_laws(k):
    """One agent (no other column) and two (one column), near and far, at rest and moving."""
    params = ControllerParams()
    for gap in (0.0, 0.5, 1.999, 2.0, 30.0):
        position = np.array([[1.0, 2.0, 10.0]])
        others = (position + [gap, 0.0, 0.0])[:, None, :][:, :k]
        for v in (0.0, 2.5):
            velocity = np.array([[v, 0.0, 0.0]])
            got, want = _both(position, velocity, others, np.zeros_like(others), params,
                              np.array([[v, 1.0]]), np.zeros((1, k)), None, 0.0,
                              np.array([2.0]))
            _same(got, want)


def test_what_the_kernel_does_not_cover_is_laws_own():
    """One agent's row (no rows axis), no law command, d_safe 0: law's own function."""
    params = ControllerParams()
    position, velocity = np.zeros(3), np.array([1.0, 0.0, 0.0])
    others = np.array([[0.5, 0.0, 0.0]])
    kernel = _kernel()
    _same(kernel(position, velocity, others, np.zeros((1, 3)), params, np.ones(2)),
          law.separation_velocity(position, velocity, others, np.zeros((1, 3)), params,
                                  np.ones(2)))
    rows = (position[None], velocity[None], others[None], np.zeros((1, 1, 3)), params)
    _same(kernel(*rows), law.separation_velocity(*rows))
    _same(kernel(*rows, np.ones((1, 2)), d_safe=np.zeros(1)),
          law.separation_velocity(*rows, np.ones((1, 2)), d_safe=np.zeros(1)))


def _crowd(rng, n, rows):
    """Return a crowd none of which is silent: rows' states, broadcasts, some presences."""
    spread = rng.choice([2.0, 8.0, 40.0, 2000.0])
    speed = rng.choice([0.0, 1.0, 6.0])
    position = rng.uniform(-spread, spread, (n, 3))
    if rng.random() < 0.3:  # coincident vehicles
        position[rng.integers(0, n, n // 3)] = position[0]
    velocity = rng.normal(0.0, speed + 1e-3, (n, 3))
    if rng.random() < 0.3:  # at rest, signed zeros
        velocity[rng.integers(0, n, n // 3)] = (-0.0, 0.0, -0.0)
    own_cols = rng.permutation(n)[:rows]
    own = position[own_cols] + rng.normal(0.0, 0.05, (rows, 3)) * rng.choice([0.0, 1.0])
    own_v = velocity[own_cols] + rng.normal(0.0, 0.1, (rows, 3))
    heard = rng.random(n) < rng.choice([0.85, 1.0])
    presence = (rng.random(n) < 0.3) if rng.random() < 0.6 else None
    return own, own_v, own_cols, position, velocity, heard, rng.uniform(0.0, 0.3, n), presence


def test_the_candidates_compiled_give_spatials_dict(monkeypatch):
    """
    The vehicles within reach found on the compiled grid give spatial's numpy dict.

    Crowds from packed to spread wide, at rest to 6 m/s, vehicles on each other and on the
    rows' own points, presences' rest points, rows of one and two, several settings.
    """
    from soliton_encirclement_ros.core import kernels_wide, spatial
    rng = np.random.default_rng(1063)
    taken = []

    def counted(*args):
        taken.append(True)
        return kernels_wide.obstacles_within_reach(*args)

    found = empty = 0
    for trial in range(120):
        params = ControllerParams(d_safe=2.0, t_safe=rng.choice([0.4, 0.0]),
                                  a_safe=rng.choice([4.0, 0.0]), t_react=rng.choice([0.3, 0.0]))
        n = int(rng.integers(spatial.SHARED_COLUMNS + 1, 300))
        rows = int(rng.choice([1, 2, rng.integers(1, n + 1)]))
        own, own_v, own_cols, position, velocity, heard, age, presence = _crowd(rng, n, rows)
        d_safe = rng.choice([0.5, 2.0, 0.0625], rows)
        silent = np.zeros(n, dtype=bool)
        args = (own, own_v, d_safe, heard, silent, own_cols, position, velocity, age, presence,
                params)
        want = spatial.obstacles_within_reach_shared(*args)
        got = spatial.obstacles_within_reach_shared(*args, compiled=counted)
        assert got.keys() == want.keys()
        for name in want:
            _same(got[name], want[name])
        found += bool(want)
        empty += not want
    assert len(taken) > 100 and found > 40 and empty > 5


def test_the_engine_flies_the_same_with_the_kernels(monkeypatch):
    """
    A vectorised run flies the same with the kernels as without them.

    Past SHARED_COLUMNS vehicles, close enough for the term to push, with failed vehicles:
    the same metrics, telemetry and trajectories, bit for bit.
    """
    from soliton_encirclement_ros.core import kernels_wide
    from soliton_encirclement_ros.sim.batch_sim import simulate
    scenario = Scenario(agents=80, duration=2.0, control_period=0.05, radius=6.0,
                        failures_per_min=20.0, failure_off_time=1.0)
    calls = {'separation_velocity': 0, 'obstacles_within_reach': 0}
    pushed = []

    def counted(name):
        kernel = getattr(kernels_wide, name)

        def call(*args, **kwargs):
            calls[name] += 1
            out = kernel(*args, **kwargs)
            if name == 'separation_velocity':
                v_sep = out[0] if kwargs.get('kept') else out
                pushed.append(int(np.count_nonzero(np.any(v_sep != 0.0, axis=-1))))
            return out
        return call

    for name in calls:
        monkeypatch.setattr(kernels_wide, name, counted(name))
    compiled = simulate(scenario, 'vectorised')
    assert all(calls.values()) and sum(pushed) > 100  # both kernels ran, the term pushed
    monkeypatch.setattr(swarm, 'compiled_wide', lambda: None)
    numpy_path = simulate(scenario, 'vectorised')
    _same(compiled.metrics, numpy_path.metrics)
    _same(compiled.agents, numpy_path.agents)
    for name, track in numpy_path.trajectories.items():
        _same(compiled.trajectories[name], track)


@pytest.mark.parametrize('faults', [{}, {'silent_failures': 3, 'fault_time': 1.0}])
def test_the_batch_engine_flies_the_same_with_the_kernels(monkeypatch, faults):
    """
    Runs of the batch engine fly the same with the compiled term as with numpy's.

    Past ``law.WITHIN_REACH_COLUMNS`` columns, the rows with a vehicle within reach take the
    numpy path; its ``d_safe`` term is ``kernels_wide``'s. A crowd from one point with
    failures (and agents falling silent): the same metrics, closest approaches and final
    positions, bit for bit.
    """
    from types import SimpleNamespace
    from soliton_encirclement_ros.core import batch_engine, kernels_wide
    scenarios = [Scenario(agents=24, duration=3.0, control_period=0.05, placement='coincident',
                          failures_per_min=20.0, failure_off_time=1.0, seed=seed, **faults)
                 for seed in (0, 1)]
    calls = []

    def counted(*args, **kwargs):
        calls.append(len(args[0]))
        return kernels_wide.separation_velocity(*args, **kwargs)

    monkeypatch.setattr(batch_engine, 'compiled_wide',
                        lambda: SimpleNamespace(separation_velocity=counted))
    got = batch_engine.simulate_runs(scenarios, apart=2.0)
    monkeypatch.setattr(batch_engine, 'compiled_wide',
                        lambda: SimpleNamespace(separation_velocity=law.separation_velocity))
    want = batch_engine.simulate_runs(scenarios, apart=2.0)
    assert len(calls) > 20 and sum(calls) > 500  # the compiled term flew many rows
    for a, b in zip(got.metrics, want.metrics):
        assert a.tobytes() == b.tobytes()
    assert got.final_positions.tobytes() == want.final_positions.tobytes()
    assert np.asarray(got.separation.after).tobytes() == \
        np.asarray(want.separation.after).tobytes()
