"""
The per-agent controller's float path decides exactly as the array path.

``control_step`` without ``d_safe`` runs the neighbour choice and the law in Python floats
(``select_neighbours_one``, ``encirclement_step_one``); the array path (``select_neighbours``,
``encirclement_step``) is what the batch engine vectorises. Both must give the same neighbours
and the same bits of ``u``, ``u_ss`` and the command, on random states with the awkward cases
drawn often: exact ties of angle (one bearing, one point), an agent at the target, a current
neighbour gone, crossed neighbours, lambdas, soft limiter, altitude hold, saturation.
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core import controller, neighbours
from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, control_step, ControllerState, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.neighbours import (
    ring_choice, select_neighbours, select_neighbours_one)

PARAMS = [  # without d_safe (test_receive_arrays checks the float path with it)
    ControllerParams(d_safe=0.0),
    ControllerParams.preset('reference'),
    ControllerParams(soft_limiter=True, u_lim=0.5, altitude=10.0, hysteresis=0.5, d_safe=0.0),
    ControllerParams(k_omega_damp=0.0, k_omega_damp_n=0.0, max_speed_xy=2.0, max_speed_z=0.5,
                     altitude=3.0, d_safe=0.0),
    # the tangential speed capped (law.turn_capped) on most of the random states
    ControllerParams(k_tau=1.0, k_e_tau=100.0, ring_turn_acc=0.05, d_safe=0.0),
    # the ring's gains blended in from 0.3 R to 1.2 R (law.ring_gain_share)
    ControllerParams(ring_gains_from=0.3, ring_gains_full=1.2, d_safe=0.0),
]


def _random_state(rng, params):
    now = 5.0
    own_id = int(rng.integers(0, 6))
    target = rng.normal(size=3) * rng.choice([0.0, 3.0])
    kind = rng.choice(['ring', 'bearing', 'point', 'random'])
    n = int(rng.integers(0, 7))
    ids = [i for i in rng.permutation(8).tolist() if i != own_id][:n]

    def place():
        if kind == 'bearing':
            return target + np.array([1.0, 1.0, 0.0]) * rng.choice([0.0, 2.0, 5.0, 9.0])
        if kind == 'point':
            return target + np.array([4.0, -3.0, 1.0])
        if kind == 'ring':
            angle = 2 * math.pi * rng.integers(0, 8) / 8
            return target + 20.0 * np.array([math.cos(angle), math.sin(angle), 0.5])
        return target + rng.normal(size=3) * 20.0

    neighbours = {}
    for i in ids:
        msg = AgentBroadcast(agent_id=i, seq=1, stamp_ns=seconds_to_ns(now - 0.01),
                             position=place(), velocity=rng.normal(size=3) * 3,
                             u=float(rng.normal()) * rng.choice([0.0, 1.0]),
                             u_ss=float(rng.normal()) * 0.1)
        neighbours[i] = (msg, now - rng.choice([0.01, 0.2, 10.0]))  # some expired
    lambdas = {i: float(rng.uniform(0.5, 2.0)) for i in ids + [own_id] if rng.random() < 0.4}
    heard = TargetBroadcast(seconds_to_ns(now - 0.01), target, rng.normal(size=3) * 2,
                            omega_ref=float(rng.choice([0.0, 0.1])), lambdas=lambdas)
    others = list(neighbours) + [None, 99]
    state = ControllerState(
        agent_id=own_id, u=float(rng.normal()) * rng.choice([0.0, 1.0, 30.0]),
        pred=others[rng.integers(0, len(others))], succ=others[rng.integers(0, len(others))],
        prev_cmd=rng.normal(size=3) * 5, neighbours=neighbours, target=(heard, now - 0.01),
        seq=3, started=0.0)
    own = place() if rng.random() < 0.7 else target.copy()  # sometimes at the target
    return state, own, rng.normal(size=3) * 3, now


def _both(state, position, velocity, now, params, monkeypatch):
    fast = control_step(state, position, velocity, now, params)
    with monkeypatch.context() as patch:
        patch.setattr(controller, '_control_step_floats', lambda *args: None)
        arrays = control_step(state, position, velocity, now, params)
    return fast, arrays


@pytest.mark.parametrize('params', PARAMS,
                         ids=['default', 'reference', 'soft', 'slow', 'turn capped',
                              'ring gains'])
def test_float_path_gives_the_array_paths_bits(params, monkeypatch):
    rng = np.random.default_rng(23)
    calls = []
    real = controller._control_step_floats

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(controller, '_control_step_floats', spy)
    for _ in range(400):
        state, position, velocity, now = _random_state(rng, params)
        (fast, cmd_fast), (arrays, cmd_arrays) = _both(state, position, velocity, now, params,
                                                       monkeypatch)
        assert (fast.pred, fast.succ) == (arrays.pred, arrays.succ)
        assert np.float64(fast.u).tobytes() == np.float64(arrays.u).tobytes()
        assert np.float64(fast.u_ss).tobytes() == np.float64(arrays.u_ss).tobytes()
        assert cmd_fast.tobytes() == cmd_arrays.tobytes()
        assert fast.prev_cmd.tobytes() == arrays.prev_cmd.tobytes()
    assert len(calls) >= 350  # the float path was the one exercised


def test_one_row_selection_matches_the_array_selection():
    rng = np.random.default_rng(5)
    for _ in range(2000):
        k = int(rng.integers(1, 7))
        ids = rng.permutation(10)[:k].tolist()
        own_id = 10
        thetas = rng.choice([0.0, 1.0, 2.0, 3.0, 6.0], size=k).tolist() if rng.random() < 0.5 \
            else rng.uniform(0, 2 * math.pi, size=k).tolist()
        theta_self = float(rng.choice(thetas + [float(rng.uniform(0, 2 * math.pi))]))
        options = ids + [None, 42]
        cur_pred = options[rng.integers(0, len(options))]
        cur_succ = options[rng.integers(0, len(options))]
        hysteresis = float(rng.choice([0.0, 0.05, 1.0]))
        column = {i: c for c, i in enumerate(ids)}
        pred_col, succ_col = select_neighbours(
            np.ones((1, k), dtype=bool), np.array(thetas), [theta_self], [own_id],
            np.array(ids), [column.get(cur_pred, -1)], [column.get(cur_succ, -1)], hysteresis)
        want = tuple(ids[c[0]] for c in (pred_col, succ_col))
        assert select_neighbours_one(theta_self, own_id, ids, thetas, cur_pred, cur_succ,
                                     hysteresis) == want
    assert select_neighbours_one(1.0, 3, [], [], 2, None, 0.05) == (None, None)


def test_ring_choice_in_python_is_its_array_pass():
    rng = np.random.default_rng(11)
    for _ in range(2000):
        k = int(rng.integers(1, 12)) if rng.random() < 0.8 else int(rng.integers(12, 130))
        ids = rng.permutation(200)[:k].astype(np.int64)
        own_id = int(rng.choice([200, int(rng.integers(0, 200))]))
        thetas = (rng.choice([0.0, 1.0, 3.0, 6.0], size=k) if rng.random() < 0.5
                  else rng.uniform(0, 2 * math.pi, size=k))
        theta_self = float(rng.choice([*thetas.tolist(), float(rng.uniform(0, 2 * math.pi))]))
        options = [*ids.tolist(), None, 999]
        cur_pred, cur_succ = (options[rng.integers(0, len(options))] for _ in range(2))
        hysteresis = float(rng.choice([0.0, 0.05, 1.0]))
        args = (theta_self, own_id, ids, thetas, cur_pred, cur_succ, hysteresis)
        assert ring_choice(*args) == neighbours._ring_choice_arrays(*args)
