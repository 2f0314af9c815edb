"""d_min (closest two live agents) and the optional safety distance d_safe.

The crossing scenarios start from hand-placed rings that the batch simulator's random placement
does not produce, so they step the simulator's own swarm engines (``batch_sim.VectorisedSwarm``
and ``PerAgentSwarm``, the agent node's code path) with the mobility model here.
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.batch_sim import PerAgentSwarm, VectorisedSwarm
from soliton_encirclement_ros.core.controller import TargetStateMsg
from soliton_encirclement_ros.core.law import separation_velocity
from soliton_encirclement_ros.core.metrics import compute_metrics, min_pair_distance
from soliton_encirclement_ros.core.params import ControllerParams
from velocity_mobility_ros.model import VehicleState, step
from velocity_mobility_ros.params import VehicleParams

R = 20.0
D_SAFE = 4.0
PERIOD = 0.05


def test_min_pair_distance_is_the_closest_pair():
    rng = np.random.default_rng(1)
    for m in (2, 3, 17, 200):
        xy = rng.uniform(-30, 30, (m, 2))
        brute = min(math.dist(a, b) for i, a in enumerate(xy) for b in xy[i + 1:])
        assert min_pair_distance(xy) == pytest.approx(brute, rel=1e-12)
    ring = R * np.column_stack((np.cos(np.arange(64) * 2 * np.pi / 64),
                                np.sin(np.arange(64) * 2 * np.pi / 64)))
    assert min_pair_distance(ring) == pytest.approx(2 * R * math.sin(math.pi / 64))
    assert math.isnan(min_pair_distance(np.zeros((1, 2))))
    assert math.isnan(compute_metrics(np.zeros((1, 3)), np.zeros((1, 3)), np.ones(3),
                                      np.zeros(3), R).d_min)
    # horizontal: a height difference does not count
    assert compute_metrics([[0, 0, 0], [3, 4, 9]], np.zeros((2, 3)), [50, 0, 0], np.zeros(3),
                           R).d_min == pytest.approx(5.0)


def test_separation_velocity_values():
    params = ControllerParams(d_safe=4.0, v_safe=2.0)
    me = np.array([0.0, 0.0, 0.0])
    # one agent 1 m away on +x: pushed along -x with 2 * (1 - 1/4) = 1.5 m/s
    assert separation_velocity(me, [[1.0, 0.0, 0.0]], params) == pytest.approx([-1.5, 0.0])
    # beyond d_safe, NaN rows (not heard) and exact overlap push nothing
    assert separation_velocity(me, [[5.0, 0, 0], [np.nan] * 3, [0, 0, 0]], params) == \
        pytest.approx([0.0, 0.0])
    # two close agents on the same side: the sum is bounded to v_safe
    v = separation_velocity(me, [[0.1, 0, 0], [0.1, 0.1, 0]], params)
    assert math.hypot(*v) == pytest.approx(2.0)
    # off (the reference): exactly zero whatever is near
    assert np.all(separation_velocity(me, [[0.5, 0, 0]], ControllerParams()) == 0.0)
    # vectorised rows
    rows = separation_velocity(np.zeros((2, 3)), [[[3.0, 0, 0]], [[0, -2.0, 0]]], params)
    assert rows == pytest.approx(np.array([[-0.5, 0.0], [0.0, 1.0]]))


def _run(start, params, duration, target_velocity=lambda t: np.zeros(3),
         down=None, engine='vectorised'):
    """Step a swarm from ``start`` (N, 3) around a target at the origin; returns
    (times, d_min over live agents, E_gap, final positions)."""
    n = len(start)
    vehicle = VehicleParams()
    ids = np.arange(1, n + 1)
    swarm = (VectorisedSwarm(ids, params, 0.0) if engine == 'vectorised'
             else PerAgentSwarm(ids, params, 0.0, 0.0, 0))
    bodies = VehicleState.at_rest(np.vstack((start, np.zeros(3))))
    v_des = np.zeros((n + 1, 3))
    times, d_min, e_gap = [], [], []
    for k in range(int(round(duration / PERIOD)) + 1):
        now = k * PERIOD
        live = np.ones(n, dtype=bool) if down is None else ~down(now)
        p, v = bodies.position[:n], bodies.velocity[:n]
        msg = TargetStateMsg(now, bodies.position[n], bodies.velocity[n])
        cmds, _ = swarm.tick(now, live, p, v, msg)
        m = compute_metrics(p[live], v[live], bodies.position[n], bodies.velocity[n], R)
        times.append(now), d_min.append(m.d_min), e_gap.append(m.E_gap)
        v_des[:n] = np.where(live[:, None], cmds, 0.0)
        v_des[n] = target_velocity(now)
        for _ in range(round(PERIOD / vehicle.sim_dt)):
            bodies = step(bodies, v_des, vehicle)
    return np.array(times), np.array(d_min), np.array(e_gap), bodies.position[:n]


def _ring(n, phase=0.0):
    theta = phase + 2 * np.pi * np.arange(n) / n
    return np.column_stack((R * np.cos(theta), R * np.sin(theta), np.zeros(n)))


def _wrong_side_pairs():
    """Four pairs, each an agent inside the circle and one outside, on (almost) one ray:
    both close in on the same spot of the circle."""
    rows = []
    for theta in np.arange(4) * np.pi / 2:
        rows.append([0.6 * R * math.cos(theta), 0.6 * R * math.sin(theta), 0.0])
        rows.append([1.4 * R * math.cos(theta + 0.02), 1.4 * R * math.sin(theta + 0.02), 0.0])
    return np.array(rows)


def _failed_front_agent():
    """Target moving +x at 5 m/s; uav1 (at the front) fails at 30 s for 6 s: the ring sweeps
    over it and it re-joins from inside, across the ring, where uav5 flies."""
    return dict(start=_ring(8), duration=70.0,
                target_velocity=lambda t: np.array([5.0, 0.0, 0.0]),
                down=lambda t: np.array([30.0 <= t < 36.0] + [False] * 7))


def _reversal():
    """Target at 6 m/s along +x, reversing to -x at 25 s."""
    return dict(start=_ring(8), duration=60.0,
                target_velocity=lambda t: np.array([6.0 if t < 25.0 else -6.0, 0.0, 0.0]))


CROSSINGS = {
    'wrong side': dict(start=_wrong_side_pairs(), duration=60.0),
    'failed agent re-joins across the ring': _failed_front_agent(),
    'fast target reversal': _reversal(),
}


@pytest.mark.parametrize('name', sorted(CROSSINGS))
def test_d_safe_keeps_agents_apart_and_the_ring_settles(name):
    case = CROSSINGS[name]
    times, d_min, e_gap, _ = _run(params=ControllerParams(control_period=PERIOD, d_safe=D_SAFE),
                                  **case)
    assert np.nanmin(d_min) > 0.8 * D_SAFE, (name, float(np.nanmin(d_min)))
    assert e_gap[-1] < 0.05, (name, float(e_gap[-1]))
    _, bare, _, _ = _run(params=ControllerParams(control_period=PERIOD), **case)
    assert np.nanmin(bare) < np.nanmin(d_min)  # the scenario does bring agents close


def test_d_safe_gives_the_same_commands_on_both_engines():
    case = dict(CROSSINGS['wrong side'], duration=6.0)
    params = ControllerParams(control_period=PERIOD, d_safe=D_SAFE)
    fast = _run(params=params, **case)
    reference = _run(params=params, engine='per-agent', **case)
    np.testing.assert_allclose(fast[3], reference[3], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast[1], reference[1], rtol=0, atol=1e-9)
