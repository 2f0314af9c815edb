"""
A failed agent's presence: out of the ring, still an obstacle for the others' ``d_safe``.

An injected failure takes an agent's controller out, not its vehicle: the vehicle holds in the
air. Before presence broadcasts an agent that failed before another had heard it was invisible
to that one, which could fly into it at full speed (issue 21's separation benchmark).
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.controller import (
    agent_tick, AgentBroadcast, control_step, FAILED, failed_tick, initial_state,
    live_neighbours, receive_agent_state, receive_target_state, seconds_to_ns, TargetBroadcast)
from soliton_encirclement_ros.core.engines import ENGINES
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.interface import agent_state_from_msg, agent_state_to_msg

PARAMS = ControllerParams(d_safe=2.0)


def test_a_failed_tick_broadcasts_presence_in_sequence_and_commands_nothing():
    state = initial_state(3, incarnation=9)
    tick = agent_tick(state, (0.0, np.array([20.0, 0, 5]), np.zeros(3)), 0.0, PARAMS)
    assert tick.broadcast.member and tick.broadcast.seq == 0
    failed = failed_tick(tick.state, (0.05, np.array([20.0, 0, 5]), np.ones(3)), 0.05, PARAMS)
    assert failed.command is None and failed.status.kind == FAILED
    presence = failed.broadcast
    assert not presence.member and presence.seq == 1 and presence.incarnation == 9
    assert presence.position.tolist() == [20.0, 0.0, 5.0] and presence.velocity.tolist() == [1] * 3
    # Stale odometry: nothing to announce (as a blind agent), and no command either.
    stale = failed_tick(failed.state, (0.05, np.zeros(3), np.zeros(3)), 5.0, PARAMS)
    assert stale.broadcast is None and stale.command is None
    # On the wire and back.
    decoded = agent_state_from_msg(agent_state_to_msg(presence))
    assert (decoded.member, decoded.seq, decoded.position.tolist()) == (False, 1, [20, 0, 5])


def test_a_presence_is_no_neighbour_but_is_kept_clear_of():
    me = receive_target_state(initial_state(1), TargetBroadcast(0, np.zeros(3), np.zeros(3)),
                              0.0, PARAMS)
    presence = AgentBroadcast(2, 0, seconds_to_ns(0.0), [21.0, 0, 0], [0, 0, 0], 0.0,
                              member=False)
    heard = receive_agent_state(me, presence, 0.0, PARAMS)
    assert live_neighbours(heard, 0.05, PARAMS) == {}
    _, alone = control_step(me, np.array([20.0, 0, 0]), np.zeros(3), 0.05, PARAMS)
    state, cmd = control_step(heard, np.array([20.0, 0, 0]), np.zeros(3), 0.05, PARAMS)
    assert state.pred is None and state.succ is None  # not in the ring
    assert cmd[0] < alone[0] - 1.0  # pushed away from the vehicle 1 m to its +x
    # The agent comes back: its next broadcast (the sequence goes on) makes it a member again.
    back = receive_agent_state(heard, AgentBroadcast(2, 1, seconds_to_ns(0.1), [21.0, 0, 0],
                                                     [0, 0, 0], 0.0), 0.1, PARAMS)
    assert list(live_neighbours(back, 0.1, PARAMS)) == [2]


@pytest.mark.parametrize('engine', list(ENGINES))
def test_every_engine_keeps_clear_of_an_agent_failed_before_it_was_ever_heard(engine):
    """Agent 2 fails at the first tick, 1 m off agent 1: agent 1 is pushed away all the same."""
    s = Scenario(agents=2, seed=0, control_period=0.05, controller={'d_safe': 2.0})
    swarm = ENGINES[engine].build(s.agent_ids(), s.controller_params(), s)
    positions = np.array([[20.0, 0.0, 0.0], [21.0, 0.0, 0.0]])
    live = np.array([True, False])
    for k in range(6):
        now = k * s.control_period
        target = TargetBroadcast(seconds_to_ns(now), np.zeros(3), np.zeros(3))
        cmds, _ = swarm.tick(now, live, positions, np.zeros_like(positions), target)
    assert cmds[1].tolist() == [0.0, 0.0, 0.0]
    assert cmds[0, 0] < -1.0  # away from agent 2, along -x


def test_a_braking_vehicle_stops_where_the_lag_and_the_braking_limit_say():
    from soliton_encirclement_ros.core.law import stopping_offset
    # Below braking x lag (4 m/s) a first-order lag of 1 s goes v x lag; above it brakes at
    # 4 m/s^2 down to 4 m/s first: (9^2 - 4^2) / 8 + 4 = 12.125 m.
    offsets = stopping_offset(np.array([[0.0, 3.0, 1.0], [-9.0, 0.0, 0.0], [0, 0, 0]]), 1.0, 4.0)
    np.testing.assert_allclose(offsets, [[0, 3.0, 0], [-12.125, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(stopping_offset(np.array([0.0, 9.0, 0.0]), 1.0, 0.0), [0, 9.0, 0])


def test_an_agent_behind_a_failed_one_brakes_for_where_it_will_stop():
    """Both at 9 m/s in a row on the circle, 8 m apart: the one ahead fails, stops 12.1 m on."""
    # Without the damping of its own 0.45 rad/s about the target, the law alone commands nothing
    # along the circle: what is left is the d_safe term's (the crowd's gains on the ring too).
    params = PARAMS.with_changes(k_omega_own=0.0, ring_gains_from=0.0)
    me = receive_target_state(initial_state(1), TargetBroadcast(0, np.zeros(3), np.zeros(3)),
                              0.0, params)
    ahead = AgentBroadcast(2, 0, 0, [20.0, 8.0, 0], [0.0, 9.0, 0], 0.0, member=False)
    own = (np.array([20.0, 0.09, 0]), np.array([0.0, 9.0, 0]))  # 0.01 s later
    _, braking = control_step(receive_agent_state(me, ahead, 0.0, params), *own, 0.01, params)
    _, alone = control_step(me, *own, 0.01, params)
    assert abs(alone[1]) < 0.01
    # Where it is, 8 m ahead at the same speed, it is not closing in; where it will stop, 20.0 m
    # on, it is: 20.0 - 9 m/s x 1 s - 9^2 / (2 x 4) = 0.9 m < d_safe, a push of 5.5 m/s back.
    assert braking[1] == pytest.approx(-5.45, abs=0.05)
