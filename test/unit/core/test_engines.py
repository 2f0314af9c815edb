"""
Every registered controller engine's tick: failed agents at zero, commands within the limits.

An engine added to ``core.engines.ENGINES`` is run here with no further test code; against the
reference on a fixed set of scenarios: ``acceptance/test_engines_acceptance.py``.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.batch_engine import none_within_reach, shown_presence
from soliton_encirclement_ros.core.controller import TargetBroadcast
from soliton_encirclement_ros.core.engines import ENGINES
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import silent_obstacles_within_reach
from soliton_encirclement_ros.core.scenario import Scenario


@pytest.mark.parametrize('engine', list(ENGINES))
def test_engine_tick_contract(engine):
    """Commands (N, 3): zero for failed agents, within the speed limits, finite; u is (N,)."""
    s = Scenario(agents=5, seed=0, duration=5.0, control_period=0.05)
    params, ids = s.controller_params(), s.agent_ids()
    swarm = ENGINES[engine].build(ids, params, s)
    positions = s.start_positions()
    velocities = np.zeros_like(positions)
    live = np.array([True, True, False, True, True])
    for k in range(20):
        now = k * s.control_period
        target = TargetBroadcast(int(now * 1e9), np.zeros(3), np.zeros(3), s.omega_ref,
                                 s.lambdas)
        cmds, u = swarm.tick(now, live, positions, velocities, target)
        assert cmds.shape == (5, 3) and u.shape == (5,)
        assert np.all(np.isfinite(cmds)) and np.all(cmds[~live] == 0.0)
        assert np.all(np.hypot(cmds[:, 0], cmds[:, 1]) <= params.max_speed_xy + 1e-12)
        assert np.all(np.abs(cmds[:, 2]) <= params.max_speed_z + 1e-12)
        positions = positions + cmds * s.control_period
    assert np.any(cmds[live] != 0.0)  # the working agents did move


@pytest.mark.parametrize('engine', list(ENGINES))
def test_before_its_first_tick_an_engine_knows_no_vehicle(engine):
    """known(): (N, N, 3) positions and (N, N) counted, none counted before any broadcast."""
    s = Scenario(agents=4, seed=0, duration=5.0, control_period=0.05)
    swarm = ENGINES[engine].build(s.agent_ids(), s.controller_params(), s)
    positions, counted = swarm.known()
    assert positions.shape == (4, 4, 3) and counted.shape == (4, 4)
    assert not counted.any()


def test_every_engine_knows_what_the_agent_node_knows():
    """
    ``known()`` is what each agent has heard of the others, by index, the same in every engine.

    ``area.limit_clear`` holds each command's approach to those within ``d_safe``. A failed
    agent's presence counts; an agent never counts itself.
    """
    s = Scenario(agents=5, seed=0, duration=5.0, control_period=0.05)
    params, ids = s.controller_params(), s.agent_ids()
    live = np.array([True, True, False, True, True])
    seen = {}
    for engine in ENGINES:
        swarm = ENGINES[engine].build(ids, params, s)
        positions = s.start_positions()
        for k in range(12):
            now = k * s.control_period
            target = TargetBroadcast(int(now * 1e9), np.zeros(3), np.zeros(3), s.omega_ref,
                                     s.lambdas)
            cmds, _ = swarm.tick(now, live, positions, np.zeros_like(positions), target)
            positions = positions + cmds * s.control_period
        seen[engine] = swarm.known()
    reference, counted = seen['per-agent']
    assert counted.sum() == 20 and not counted.diagonal().any()
    assert np.all(np.isfinite(reference[counted]))
    for engine, (others, kept) in seen.items():
        assert others.shape == (5, 5, 3) and kept.tolist() == counted.tolist(), engine
        assert np.array_equal(others[kept], reference[counted]), engine


def test_the_scan_is_skipped_only_where_it_finds_nothing():
    """
    ``none_within_reach`` says True only where the within-reach scan returns nothing.

    The engines skip the scan then (a settled, fault-free tick); random swarms from a crowd to
    a ring spread wide, at speeds from a hover to 8 m/s, some vehicles not heard.
    """
    rng = np.random.default_rng(0)
    params = ControllerParams(d_safe=2.0)
    skipped = found = empty = 0
    for _ in range(600):
        rows, m = 4, 7
        spread, speed = rng.choice([3.0, 15.0, 60.0]), rng.choice([0.0, 1.0, 8.0])
        own = rng.uniform(-spread, spread, (rows, 3))
        own_v = rng.normal(0.0, speed + 1e-3, (rows, 3))
        position = rng.uniform(-spread, spread, (rows, m, 3))
        velocity = rng.normal(0.0, speed + 1e-3, (rows, m, 3))
        heard = rng.random((rows, m)) < 0.8
        silent = np.zeros((rows, m), dtype=bool)
        d_safe = rng.choice([1.0, 2.0], rows)
        scan = silent_obstacles_within_reach(own, own_v, d_safe, heard, silent, position,
                                             velocity, np.zeros((rows, m)), None, params)
        if none_within_reach(own, own_v, d_safe, heard, silent, position, velocity, params):
            assert scan == {}
            skipped += 1
        elif scan:
            found += 1
        else:
            empty += 1
    assert min(skipped, found, empty) > 20  # every case met, the bound not always too wide


def test_presence_columns_only_where_a_presence_counts():
    """A presence not heard (nor silent) adds no column: ``shown_presence`` is None then."""
    presence = np.array([False, True, False])
    heard = np.array([[True, False, True]])
    silent = np.zeros((1, 3), dtype=bool)
    assert shown_presence(presence, heard, silent) is None
    assert shown_presence(presence, heard | [False, True, False], silent) is presence
    assert shown_presence(presence, heard, silent | [False, True, False]) is presence


@pytest.mark.parametrize('groups', [2, 5])
def test_the_law_by_groups_of_rows_gives_the_whole_swarms_values(monkeypatch, groups):
    """
    ``swarm.law_by_width``: the law over groups of rows cut to their own d_safe width.

    A packed cluster of 80 (crowded rows of many widths), a moving target and outages (failed
    agents' presences as more columns): every tick's commands, u and u_ss equal, bit for bit,
    those of the law over all rows at the widest row's width.
    """
    from soliton_encirclement_ros.core import swarm as vectorised
    from soliton_encirclement_ros.core.swarm_run import SwarmRun

    scenario = Scenario(agents=80, seed=3, duration=3.0, control_period=0.05,
                        placement='cluster', placement_spread=6.0, target_motion='random',
                        failures_per_min=30.0, failure_off_time=1.0)

    def ticks(group_rows):
        monkeypatch.setattr(vectorised, 'GROUP_ROWS', group_rows)
        monkeypatch.setattr(vectorised, 'WIDTH_GROUPS', groups)
        run = SwarmRun(scenario, 'vectorised')
        out = []
        for _ in range(run.ticks):
            tick = run.tick()
            out.append(np.concatenate((tick.commands.ravel(), tick.u, tick.u_ss)))
            run.advance()
        return np.array(out)

    grouped, whole = ticks(2), ticks(10 ** 9)
    assert np.array_equal(grouped.view(np.uint8), whole.view(np.uint8))
    assert np.any(grouped[-1] != grouped[0])
