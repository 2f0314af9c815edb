"""
The fail-safe rules of one agent, pure (no rclpy).

Stale odometry, a lost target, future stamps, restarted senders, duplicate ids and altitude hold.
"""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.controller import (
    agent_tick, AgentBroadcast, BLIND, future_stamp_reason, initial_state, live_neighbours, OK,
    receive_agent_state, receive_target_state, seconds_to_ns, STARTING, TARGET_LOST,
    TargetBroadcast)
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.identity import DuplicateIds, EPISODE_MARGIN, new_incarnation
from soliton_encirclement_ros.core.law import vertical_velocity

P = ControllerParams(control_period=0.05)  # liveness: agents 0.15 s, target 0.25 s
HERE = np.array([25.0, 0.0, 0.0])
TARGET_V = np.array([1.0, 0.5, 0.0])


def target(stamp, position=(0.0, 0.0, 0.0), velocity=TARGET_V):
    return TargetBroadcast(seconds_to_ns(stamp), np.array(position, dtype=float),
                           np.array(velocity, dtype=float))


def neighbour(seq, incarnation=1, stamp=0.0):
    return AgentBroadcast(agent_id=2, seq=seq, stamp_ns=seconds_to_ns(stamp),
                          position=np.array([-20.0, 0.0, 0.0]),
                          velocity=np.zeros(3), u=0.0, incarnation=incarnation)


def run(state, t0, t1, odom_until=math.inf, target_until=math.inf, params=P):
    """
    Tick from t0 to t1 with odometry and the target.

    Odometry is fresh until ``odom_until``, then frozen; the target is heard every tick until
    ``target_until``; returns the ticks.
    """
    ticks, odometry = [], None
    for k in range(round((t1 - t0) / params.control_period)):
        now = t0 + k * params.control_period
        if now <= odom_until:
            odometry = (now, HERE, np.zeros(3))
        if now <= target_until:
            state = receive_target_state(state, target(now), now, params)
        tick = agent_tick(state, odometry, now, params)
        state = tick.state
        ticks.append((now, tick))
    return state, ticks


def test_stale_odometry_makes_the_agent_blind_silent_and_still_then_it_resumes():
    state, ticks = run(initial_state(1), 0.0, 3.0, odom_until=1.0)
    for now, tick in ticks:
        age = now - min(now, 1.0)
        if age > P.odom_timeout:
            assert tick.broadcast is None and tick.status.kind == BLIND
            assert np.array_equal(tick.command, np.zeros(3))
            assert f'odometry {age:.1f} s old' in str(tick.status)
        else:
            assert tick.broadcast is not None and tick.broadcast.stamp == now
            assert tick.status.kind == OK
    # a broadcast never carries a position older than odom_timeout under a fresh stamp
    state, ticks = run(state, 3.0, 3.5)
    assert all(t.status.kind == OK and t.broadcast is not None for _, t in ticks)


def test_no_odometry_at_all_is_blind_after_odom_timeout_from_the_first_tick():
    state = receive_target_state(initial_state(1), target(0.0), 0.0, P)
    first = agent_tick(state, None, 10.0, P)
    assert first.command is None and first.broadcast is None and first.status.kind == STARTING
    later = agent_tick(first.state, None, 10.0 + P.odom_timeout + 0.05, P)
    assert later.status.kind == BLIND and np.array_equal(later.command, np.zeros(3))


def test_lost_target_flies_its_last_velocity_until_target_timeout_then_holds():
    state, ticks = run(initial_state(1), 0.0, 3.0, target_until=1.0)
    for now, tick in ticks:
        silent = now - 1.0
        if silent <= P.target_liveness:
            continue  # the encirclement law itself
        if silent <= P.target_timeout:
            assert np.allclose(tick.command, TARGET_V) and tick.status.kind == OK
        else:
            assert np.array_equal(tick.command, np.zeros(3))
            assert tick.status.kind == TARGET_LOST and 'last heard' in str(tick.status)
            assert tick.broadcast is not None  # odometry is fresh: neighbours still see it
    state, ticks = run(state, 3.0, 3.2)
    assert ticks[-1][1].status.kind == OK and not np.allclose(ticks[-1][1].command, 0.0)


def test_a_slow_control_period_cannot_keep_a_lost_target_live_past_target_timeout():
    """5 periods of 0.25 s would keep the target live 1.25 s: longer than target_timeout 1 s."""
    slow = ControllerParams(control_period=0.25)
    assert slow.target_liveness == slow.target_timeout == 1.0
    assert ControllerParams(target_state_timeout=3.0).target_liveness == 1.0
    assert P.target_liveness == 5 * P.control_period  # the defaults are unchanged
    state, ticks = run(initial_state(1), 0.0, 4.0, target_until=1.0, params=slow)
    lost = [(now, tick) for now, tick in ticks if tick.status.kind == TARGET_LOST]
    assert [now for now, _ in lost] == [2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75]
    for now, tick in lost:  # says it holds, and does: exactly zero, never the encirclement law
        assert np.array_equal(tick.command, np.zeros(3)), now


def test_a_clock_stepped_back_never_flies_on_what_was_heard_before_it():
    """A simulator reset or a looped bag: cached inputs would have negative ages."""
    state, ticks = run(initial_state(1), 990.0, 1000.0)
    assert ticks[-1][1].status.kind == OK and not np.allclose(ticks[-1][1].command, 0.0)
    state = receive_agent_state(state, neighbour(seq=5, stamp=999.99), 999.99, P)
    assert set(live_neighbours(state, 1000.0, P)) == {2}
    # odometry stamped ahead of the clock: blind, silent, still
    tick = agent_tick(state, (1000.0, HERE, np.zeros(3)), 900.0, P)
    assert tick.status.kind == BLIND and 'ahead of this clock' in str(tick.status)
    assert tick.broadcast is None and np.array_equal(tick.command, np.zeros(3))
    # fresh odometry on the new clock, target heard at 1000 s: the target is lost (hold)
    tick = agent_tick(state, (900.0, HERE, np.zeros(3)), 900.0, P)
    assert np.array_equal(tick.command, np.zeros(3)) and tick.status.kind == TARGET_LOST
    assert live_neighbours(state, 900.0, P) == {}
    # the target heard again on the new clock replaces the cached one at once
    state = receive_target_state(tick.state, target(899.95, position=[50.0, 0.0, 0.0]), 899.95,
                                 P)
    assert state.target[0].position[0] == 50.0
    state, ticks = run(state, 900.0, 901.0)
    assert all(t.status.kind == OK for _, t in ticks)


def test_a_target_never_heard_is_lost_target_timeout_after_the_first_tick():
    state, ticks = run(initial_state(1), 5.0, 7.0, target_until=-1.0)
    kinds = [(round(now - 5.0, 2), t.status.kind) for now, t in ticks]
    assert all(kind == OK for t, kind in kinds if t <= P.target_timeout)
    assert all(kind == TARGET_LOST for t, kind in kinds if t > P.target_timeout)
    assert 'never heard' in str(ticks[-1][1].status)


def test_states_stamped_too_far_ahead_are_rejected_with_the_reason():
    assert future_stamp_reason('target', 10.5, 10.0, P) is None
    reason = future_stamp_reason('target', 42.0, 10.0, P)
    assert '32.000 s ahead' in reason and 'max_future_stamp 0.5' in reason


def test_a_future_stamped_target_blocks_earlier_stamps_only_while_it_is_live():
    state = receive_target_state(initial_state(1), target(10.4, position=(9.0, 9.0, 0.0)), 10.0, P)
    real = target(10.05)
    blocked = receive_target_state(state, real, 10.05, P)
    assert blocked.target[0].stamp == 10.4  # earlier stamp, cached one still live
    accepted = receive_target_state(state, real, 10.0 + P.target_liveness + 0.01, P)
    assert accepted.target[0] is real


def test_a_restarted_sequence_is_heard_again_after_the_liveness_timeout():
    state = receive_agent_state(initial_state(1), neighbour(seq=500), 0.0, P)
    assert receive_agent_state(state, neighbour(seq=0), 0.1, P).neighbours[2][0].seq == 500
    assert receive_agent_state(state, neighbour(seq=0), 0.2, P).neighbours[2][0].seq == 0
    # a new incarnation (the sender restarted) is taken at once
    restarted = receive_agent_state(state, neighbour(seq=0, incarnation=2), 0.05, P)
    assert restarted.neighbours[2][0].incarnation == 2


def test_duplicate_incarnations_are_reported_once_per_episode_and_a_restart_is_not():
    ids = DuplicateIds(window=0.15)
    assert ids.observe(3, 11, 0.0) is None
    assert ids.observe(3, 11, 0.05) is None
    assert ids.observe(3, 22, 0.1) == [11, 22]
    assert ids.observe(3, 11, 0.15) is None and ids.observe(3, 22, 0.2) is None  # same episode
    assert ids.duplicated == {3}
    # 11 quiet for longer than the window, not yet the margin: the same episode
    assert ids.observe(3, 22, 0.6) is None and ids.duplicated == {3}
    assert ids.observe(3, 11, 0.62) is None
    # 11 quiet for the window plus the margin: the episode ends; a new one is reported again
    assert ids.observe(3, 22, 0.62 + 0.15 + EPISODE_MARGIN + 0.01) is None
    assert ids.duplicated == frozenset()
    assert ids.observe(3, 11, 5.85) == [11, 22]
    restart = DuplicateIds(window=0.15)
    restart.observe(4, 1, 0.0)
    assert restart.observe(4, 2, 0.5) is None  # old incarnation expired: a restart


def test_a_duplicate_heard_in_bursts_under_load_is_reported_once():
    """Under load the two incarnations' states arrive in bursts, gaps longer than the window."""
    ids = DuplicateIds(window=0.15)
    reports = []
    for k in range(120):  # a minute: each incarnation heard once a second, alternately
        now = 0.5 * k
        reports.append(ids.observe(7, 11 if k % 2 == 0 else 22, now))
        reports.append(ids.observe(7, 11 if k % 2 == 0 else 22, now + 0.01))
    assert [r for r in reports if r is not None] == []  # never both within the window
    ids = DuplicateIds(window=0.15)
    reports = [ids.observe(7, 11, 0.0), ids.observe(7, 22, 0.05)]  # the episode starts
    for k in range(1, 120):
        now = 0.5 * k  # then a gap of 0.5 s (> window) between every message
        reports.append(ids.observe(7, 11 if k % 2 == 0 else 22, now))
    assert [r for r in reports if r is not None] == [[11, 22]]
    assert ids.duplicated == {7}


def test_incarnations_are_random_and_exact_in_float64():
    draws = {new_incarnation() for _ in range(100)}
    assert len(draws) == 100
    assert all(0 < d < 2**31 and float(d) == d for d in draws)


def test_altitude_hold_climbs_at_the_vertical_limit_and_settles_at_altitude():
    params = P.with_changes(altitude=10.0, k_z=1.0, max_speed_z=2.0)
    assert vertical_velocity(4.0, 0.5, params) == pytest.approx(6.5)
    assert vertical_velocity(4.0, 0.5, P) == 0.5  # NaN altitude: the target's vz
    state = receive_target_state(initial_state(1), target(0.0, velocity=(0, 0, 0)), 0.0, params)
    z, zs = 0.0, []
    for k in range(400):
        now = k * params.control_period
        state = receive_target_state(state, target(now, velocity=(0, 0, 0)), now, params)
        tick = agent_tick(state, (now, np.array([25.0, 0.0, z]), np.zeros(3)), now, params)
        state = tick.state
        assert abs(tick.command[2]) <= params.max_speed_z + 1e-12
        z += tick.command[2] * params.control_period
        zs.append(z)
    assert zs[round(2.0 / params.control_period)] == pytest.approx(4.0, abs=0.11)  # at 2 m/s
    assert zs[-1] == pytest.approx(10.0, abs=1e-3)


def test_altitude_hold_also_holds_while_flying_the_last_target_velocity():
    params = P.with_changes(altitude=10.0)
    state = receive_target_state(initial_state(1), target(0.0), 0.0, params)
    tick = agent_tick(state, (0.5, np.array([25.0, 0.0, 7.0]), np.zeros(3)), 0.5, params)
    assert tick.command == pytest.approx([1.0, 0.5, 3.0])


def test_the_new_parameters_are_validated_by_name():
    with pytest.raises(ValueError, match='odom_timeout must be > 0'):
        ControllerParams(odom_timeout=0.0)
    with pytest.raises(ValueError, match='altitude must be finite'):
        ControllerParams(altitude=math.inf)
    with pytest.raises(ValueError, match='control_period must be >= 0.001'):
        ControllerParams(control_period=1e-6)
    assert math.isnan(ControllerParams().altitude) and not ControllerParams().altitude_hold


def test_batch_ring_forms_at_the_hold_altitude():
    from soliton_encirclement_ros.core.scenario import Scenario
    from soliton_encirclement_ros.sim.batch_sim import simulate
    result = simulate(Scenario(agents=6, duration=40.0, control_period=0.05, radius=10.0,
                               controller={'altitude': 12.0}))
    assert result.metrics[-1, 5] < 0.05 and result.metrics[-1, 1] < 0.01  # E_gap, E_r
    assert result.final_positions[:6, 2] == pytest.approx(np.full(6, 12.0), abs=0.01)
    assert result.final_positions[6, 2] == pytest.approx(0.0)  # the target stays on the ground
