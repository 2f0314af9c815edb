"""
An agent's receive path over arrays decides as the message-by-message rules did.

``receive_states`` takes an instant's states as :class:`AgentStates` in one pass; the cache,
the duplicate-id episodes, the link figures and the loss draws must be those of taking the
states one at a time. With ``d_safe`` only the vehicles within ``obstacle_reach`` enter the
separation term, and with none the float path runs: the bits must be those of counting every
vehicle heard on the array path.
"""
from functools import partial

import numpy as np
import pytest

from soliton_encirclement_ros.core import controller
from soliton_encirclement_ros.core.comms import ImpairedChannel
from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, AgentStates, control_step, ControllerState, initial_state,
    NeighbourTable, receive_agent_state, receive_states, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.identity import DuplicateIds
from soliton_encirclement_ros.core.law import FloatRows, separation_velocity
from soliton_encirclement_ros.core.links import LinkMonitor
from soliton_encirclement_ros.core.neighbours import is_fresh

P = ControllerParams()


def _key(msg):
    return (msg.agent_id, msg.seq, msg.stamp_ns, msg.position.tobytes(), msg.velocity.tobytes(),
            msg.u, msg.u_ss, msg.incarnation, msg.member, msg.uncertainty)


def _cache(state):
    return {i: (_key(msg), rx) for i, (msg, rx) in state.neighbours.items()}


def test_one_pass_caches_what_one_message_at_a_time_does():
    rng = np.random.default_rng(4)
    batched = single = initial_state(3)
    seqs = {}
    for tick in range(300):
        now = tick * 0.01 + float(rng.choice([0.0, 0.0, -1.0]))  # sometimes a step back
        heard = []
        for agent_id in rng.integers(0, 8, size=int(rng.integers(0, 10))).tolist():
            seqs[agent_id] = seqs.get(agent_id, 0) + int(rng.integers(-2, 3))
            heard.append(AgentBroadcast(agent_id, seqs[agent_id], seconds_to_ns(now),
                                        rng.normal(size=3), rng.normal(size=3), 0.1,
                                        incarnation=int(rng.integers(1, 3)),
                                        member=bool(rng.random() < 0.9)))
        for msg in heard:
            single = receive_agent_state(single, msg, now, P)
        batched = receive_states(batched, [(AgentStates.of(heard), now)], P)
        assert _cache(batched) == _cache(single)
        assert list(batched.neighbours) == list(single.neighbours)  # the order first heard


def test_every_sender_again_in_table_order_caches_what_one_at_a_time_does(monkeypatch):
    # The usual tick: the same senders, in the order first heard; the batch becomes the table.
    taken_whole = []
    all_rows = NeighbourTable.all_rows
    monkeypatch.setattr(NeighbourTable, 'all_rows',
                        lambda table, rows: taken_whole.append(all_rows(table, rows))
                        or taken_whole[-1])
    rng = np.random.default_rng(6)
    batched = single = initial_state(3)
    for tick in range(200):
        now = tick * 0.01
        senders = [5, 1, 7, 3, 0] if rng.random() < 0.9 else [1, 5, 7, 3, 0]
        heard = [AgentBroadcast(i, tick - int(rng.random() < 0.03), seconds_to_ns(now),
                                rng.normal(size=3), rng.normal(size=3), 0.1) for i in senders]
        before = _cache(batched)
        table = batched.neighbours
        for msg in heard:
            single = receive_agent_state(single, msg, now, P)
        batched = receive_states(batched, [(AgentStates.of(heard), now)], P)
        assert _cache(batched) == _cache(single)
        assert list(batched.neighbours) == list(single.neighbours)
        assert {i: (_key(m), rx) for i, (m, rx) in table.items()} == before  # never mutated
    assert taken_whole.count(True) > 100


def test_a_plain_mapping_becomes_a_table_and_reads_back():
    msg = AgentBroadcast(2, 5, 10, [1.0, 2.0, 3.0], [0.0, 0.0, 1.0], 0.5, 0.1, 7, False, 0.2)
    state = ControllerState(agent_id=1, neighbours={2: (msg, 0.25)})
    assert isinstance(state.neighbours, NeighbourTable)
    assert _cache(state) == {2: (_key(msg), 0.25)}
    with pytest.raises(KeyError):
        state.neighbours[3]
    assert [_key(m) for m in AgentStates.of([msg])] == [_key(msg)]


def test_duplicates_observed_together_start_the_same_episodes():
    rng = np.random.default_rng(8)
    together, alone = DuplicateIds(0.05), DuplicateIds(0.05)
    for tick in range(400):
        now = tick * 0.01
        ids = rng.integers(0, 6, size=int(rng.integers(0, 8)))
        incs = np.where(rng.random(ids.size) < 0.03, 2, 1)
        started = together.observe_many(ids, incs, now)
        want = [(int(i), d) for i, k in zip(ids, incs)
                if (d := alone.observe(int(i), int(k), now)) is not None]
        assert sorted(started) == sorted(want)
        assert together.duplicated == alone.duplicated


def test_one_record_per_sender_counts_as_the_general_path():
    rng = np.random.default_rng(2)
    fast, general = LinkMonitor(1.0), LinkMonitor(1.0)
    seq = np.zeros(6, dtype=np.int64)
    for tick in range(1, 300):
        senders = rng.permutation(6)[:int(rng.integers(1, 6))]
        seq[senders] += rng.integers(1, 3, size=senders.size)
        incs = np.where(rng.random(senders.size) < 0.02, 9, 1)
        rx = np.full(senders.size, tick * 0.01)
        stamp = rx - rng.uniform(0.0, 0.02, size=senders.size)
        taken = np.where(rng.random(senders.size) < 0.1, -1, seq[senders])
        fast.record(senders, incs, taken, stamp, rx, rx + 0.01)
        for k in range(senders.size):  # one state a call: the .at path of a single row
            general.record(senders[k:k + 1], incs[k:k + 1], taken[k:k + 1], stamp[k:k + 1],
                           rx[k:k + 1], rx[k:k + 1] + 0.01)
        if tick % 50 == 0:
            assert fast.figures(tick * 0.01) == general.figures(tick * 0.01)


def test_a_batch_takes_the_same_loss_draws_as_its_messages():
    one, batch = (ImpairedChannel(loss=0.3, delay=0.02, seed=5, agent_id=2) for _ in range(2))
    states = AgentStates.of([AgentBroadcast(i, 0, 0, np.zeros(3), np.zeros(3), 0.0)
                             for i in range(40)])
    for k in range(5):
        for msg in states:
            one.receive(msg, k * 0.01)
        batch.receive_many(states, k * 0.01)
    kept = [msg.agent_id for msg, _ in one.due(1.0)]
    assert [msg.agent_id for states, _ in batch.due(1.0) for msg in states] == kept


# --- d_safe: only the vehicles within reach; none within reach: the float path -------------
def _crowd(rng, params):
    now = 5.0
    own = rng.normal(size=3) * 3.0
    ids = rng.permutation(40)[:int(rng.integers(0, 20))].tolist()
    neighbours = {}
    for i in ids:
        spread = rng.choice([1.0, 3.0, 10.0, 30.0, 60.0])
        msg = AgentBroadcast(i + 1, 1, seconds_to_ns(now - float(rng.choice([0.0, 0.05, 0.5]))),
                             own + rng.normal(size=3) * spread,
                             rng.normal(size=3) * rng.choice([0.0, 1.0, 8.0]),
                             float(rng.normal()) * 0.3, 0.0,
                             member=bool(rng.random() < 0.8),
                             uncertainty=float(rng.choice([0.0, 0.0, 0.5])))
        neighbours[i + 1] = (msg, now - float(rng.choice([0.0, 0.01, 0.2, 5.0, 20.0])))
    target = TargetBroadcast(seconds_to_ns(now - 0.01), rng.normal(size=3) * 2,
                             rng.normal(size=3))
    state = ControllerState(agent_id=0, u=float(rng.normal()), target=(target, now - 0.01),
                            neighbours=neighbours, prev_cmd=rng.normal(size=3), seq=1,
                            started=0.0)
    return state, own, rng.normal(size=3) * rng.choice([0.0, 2.0, 9.0]), now


# The default term, one without the following gap and braking, and one on a ring so small that
# the d_safe flown (safety_distance) is below d_safe.
DEFAULT_AND_NO_REACT = pytest.mark.parametrize('params', [
    ControllerParams(d_safe=2.0),
    ControllerParams(d_safe=4.0, t_react=0.0, a_safe=0.0, t_safe=0.5),
    ControllerParams(d_safe=2.0, radius=4.0),
], ids=['default', 'no-react', 'small-ring'])


def _every_vehicle(table, position, velocity, now, params, own_uncertainty=0.0, d_safe=None,
                   usable=None):
    """Return the rows the term counted before: every vehicle heard within memory."""
    return np.flatnonzero(is_fresh(table.rx, now, params.obstacle_memory))


def _recorded(function, results: list):
    """Return ``function``, which also appends each of its results to ``results``."""
    def call(*args):
        results.append(function(*args))
        return results[-1]
    return call


def _patched(monkeypatch, replaced: dict, call):
    """Return ``call()`` with the controller's attributes in ``replaced`` replaced meanwhile."""
    with monkeypatch.context() as patch:
        for name, value in replaced.items():
            patch.setattr(controller, name, value)
        return call()


@pytest.mark.parametrize('params', [
    ControllerParams(d_safe=2.0),
    ControllerParams(d_safe=4.0, t_react=0.0, a_safe=0.0, t_safe=0.5),
    ControllerParams(d_safe=1.0, t_safe=0.0, v_safe=3.0),
], ids=['default', 'no-react', 'no-look-ahead'])
def test_the_reach_and_the_float_path_change_no_bit(params, monkeypatch):
    rng = np.random.default_rng(11)
    fast_taken = []
    counted = _recorded(controller._control_step_floats, fast_taken)
    for _ in range(300):
        state, position, velocity, now = _crowd(rng, params)
        own_uncertainty = float(rng.choice([0.0, 0.3]))
        step = partial(control_step, state, position, velocity, now, params, own_uncertainty)
        got_state, got = _patched(monkeypatch, {'_control_step_floats': counted}, step)
        want_state, want = _patched(  # what the term counted before: everyone, as arrays
            monkeypatch, {'obstacle_rows': _every_vehicle, 'FLOAT_ROWS': 0,
                          '_control_step_floats': lambda *args: None}, step)
        assert got.tobytes() == want.tobytes()
        assert (got_state.pred, got_state.succ) == (want_state.pred, want_state.succ)
        assert np.float64(got_state.u).tobytes() == np.float64(want_state.u).tobytes()
    assert len(fast_taken) >= 25  # the float path ran with d_safe on


@DEFAULT_AND_NO_REACT
def test_obstacles_in_floats_are_the_arrays_values(params, monkeypatch):
    """The term's inputs gathered as float rows: the arrays' values, to the bit, and its sum."""
    rng = np.random.default_rng(13)
    gathered = pushed = 0
    for _ in range(400):
        state, position, velocity, now = _crowd(rng, params)
        table = state.neighbours
        if rng.random() < 0.8:  # most silent ones at rest (one that flew takes the arrays)
            floats = table.floats.copy()
            floats[~is_fresh(table.rx, now, params.agent_timeout), 3:6] = 0.0
            table = controller.NeighbourTable(table.ints, floats, table.rx)
        rows = np.flatnonzero(rng.random(len(table)) < 0.7)
        if rows.size == 0 or 2 * rows.size > controller.FLOAT_ROWS:
            continue
        own_uncertainty = float(rng.choice([0.0, 0.3]))
        floats = controller._obstacles(table, rows, now, params, own_uncertainty,
                                       position=position)
        arrays = _patched(monkeypatch, {'FLOAT_ROWS': 0}, partial(
            controller._obstacles, table, rows, now, params, own_uncertainty,
            position=position))
        assert floats.keys() == arrays.keys()
        if type(floats['others_position']) is not FloatRows:
            continue  # a row silent while it flew: the arrays' way (law.silent_nearest)
        for name in ('others_position', 'others_velocity'):
            assert (np.asarray(floats[name]).tobytes()
                    == np.ascontiguousarray(arrays[name][:, :2]).tobytes())
        assert np.asarray(floats['others_age']).tobytes() == arrays['others_age'].tobytes()
        if 'others_radius' in arrays:
            assert (np.asarray(floats['others_radius']).tobytes()
                    == np.asarray(arrays['others_radius'], dtype=float).tobytes())
        v_law = rng.normal(size=2) * 3.0
        term = [separation_velocity(position, velocity, params=params, v_law=v_law, **obstacles)
                for obstacles in (floats, arrays)]
        assert term[0].tobytes() == term[1].tobytes()
        gathered += 1
        pushed += bool(np.any(term[0] != 0.0))
    assert gathered >= 200 and pushed >= 50, (gathered, pushed)


@DEFAULT_AND_NO_REACT
def test_obstacle_rows_in_floats_returns_the_array_paths_rows(params, monkeypatch):
    """The float shortcut of a small table picks the rows the array pass picks, to the row."""
    rng = np.random.default_rng(12)
    answers = []
    counted = _recorded(controller._all_beyond_reach, answers)
    for k in range(300):
        state, position, velocity, now = _crowd(rng, params)
        table = state.neighbours
        if len(table) and k % 3 == 0:  # the fastest and widest at its reach, to the last bits
            floats = table.floats.copy()
            fastest = int(np.argmax(np.hypot(floats[:, 3], floats[:, 4])))
            floats[0, 3:5], floats[0, 9] = floats[fastest, 3:5], floats[:, 9].max()
            reach = controller.obstacle_reach(float(np.hypot(*velocity[:2])),
                                              float(np.hypot(*floats[0, 3:5])), floats[0, 9],
                                              params)
            floats[:, 0] = position[0] + 10.0 * reach  # the others far off
            floats[0, 0:2] = position[:2] + [reach * (1.0 + float(rng.choice(
                [-1e-11, -1e-15, 0.0, 1e-15, 1e-11, 1e-8]))), 0.0]
            if k % 15 == 0:
                floats[-1, 3] = np.nan  # a state that is not finite
            table = NeighbourTable(table.ints, floats, np.full(len(table), now))
        rows = partial(controller.obstacle_rows, table, position, velocity, now, params)
        got = _patched(monkeypatch, {'_all_beyond_reach': counted}, rows)
        want = _patched(monkeypatch, {'FLOAT_OBSTACLE_ROWS': -1}, rows)  # the array pass only
        assert got.tolist() == want.tolist()
        assert got.dtype == want.dtype
    assert 15 <= sum(answers) <= 285  # the shortcut answered some tables, not all


def test_rows_decode_at_once_as_one_at_a_time():
    from soliton_encirclement_ros.interface import (
        agent_state_from_values, agent_state_values, agent_states_from_values)
    rng = np.random.default_rng(6)
    rows = []
    for k in range(300):
        msg = AgentBroadcast(int(rng.integers(0, 50)), int(rng.integers(0, 10 ** 6)),
                             int(rng.integers(-10 ** 12, 10 ** 18)), rng.normal(size=3),
                             rng.normal(size=3), float(rng.normal()), float(rng.normal()),
                             int(rng.integers(1, 2 ** 31)), bool(rng.random() < 0.5),
                             float(rng.choice([0.0, 0.7])))
        row = agent_state_values(msg)
        if rng.random() < 0.2:  # break one field
            row[int(rng.integers(0, len(row)))] = float(rng.choice([np.nan, 0.5, -1.0, 2.0,
                                                                    1e9, np.inf]))
        rows.append(row)
    states, errors = agent_states_from_values(rows)
    want, why = [], []
    for row in rows:
        try:
            want.append(_key(agent_state_from_values(row)))
        except ValueError as error:
            why.append(str(error))
    assert [_key(msg) for msg in states] == want and errors == why
