"""The controller state and step (core/controller.py) against hand-computed values."""
import dataclasses
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.controller import (
    AgentBroadcast, control_step, initial_state, outgoing_state, receive_agent_state)
from support.core_cases import agent_msg, on_circle, P, with_target


def test_four_agents_step_gives_hand_computed_e_tau_and_command():
    state = with_target(initial_state(1))
    for agent_id, angle in ((2, 1.0), (3, 2.0), (4, 4.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle), 0.0, P)
    state, cmd = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    e_tau = (1.0 - (2 * math.pi - 4.0)) / (1.0 + 2 * math.pi - 4.0)
    u = 0.01 * 25.0 * e_tau  # omega damping: everyone at rest -> no change
    assert (state.pred, state.succ) == (4, 2)
    assert state.u == pytest.approx(u)
    assert cmd == pytest.approx([0.0, 0.2 * u * 20.0, 0.0])
    assert state.seq == 1


def test_omega_self_is_previous_command_tangential_rate_relative_to_target():
    # Symmetric neighbours (e_tau = 0) moving with the target (omega_j = 0); target moves at
    # (1, 2). Previous command (3, 6): relative to the target (2, 4), tangential part 4 m/s
    # at r = 20 -> omega_self = 0.2 (the absolute command would give 0.3).
    vt = (1.0, 2.0, 0.0)
    state = with_target(initial_state(1), velocity=vt)
    for agent_id, angle in ((2, 1.0), (3, 2 * math.pi - 1.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle, velocity=vt), 0.0, P)
    state = dataclasses.replace(state, prev_cmd=np.array([3.0, 6.0, 0.0]))
    state, cmd = control_step(state, on_circle(0.0), np.array(vt), 0.0, P)
    u = 0.01 * 25.0 * (0.0 - 0.1 * (0.2 - 0.0))
    assert state.u == pytest.approx(u)
    assert cmd == pytest.approx([1.0, 2.0 + 0.2 * u * 20.0, 0.0])


def test_one_agent_alone_gets_no_tangential_term():
    state = with_target(initial_state(1))
    state, cmd = control_step(state, [22.0, 0.0, 0.0], np.zeros(3), 0.0, P)
    assert (state.pred, state.succ) == (None, None)
    assert state.u == 0.0
    assert cmd == pytest.approx([-2.0, 0.0, 0.0])  # radial only


def test_one_other_agent_is_pred_and_succ():
    state = with_target(initial_state(1))
    state = receive_agent_state(state, agent_msg(2, 1.0), 0.0, P)
    state, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    assert (state.pred, state.succ) == (2, 2)
    # gaps 2pi-1 back and 1 forward -> e_tau = (1 - (2pi-1)) / 2pi
    assert state.u == pytest.approx(0.01 * 25.0 * (2.0 - 2 * math.pi) / (2 * math.pi))


def test_receive_drops_own_id_and_out_of_order_seq():
    state = initial_state(1)
    assert receive_agent_state(state, agent_msg(1, 0.0), 0.0, P) is state
    state = receive_agent_state(state, agent_msg(2, 1.0, seq=5), 0.0, P)
    stale = receive_agent_state(state, agent_msg(2, 2.0, seq=4), 0.01, P)
    assert stale.neighbours[2][0].seq == 5 and stale.neighbours[2][1] == 0.0
    newer = receive_agent_state(state, agent_msg(2, 2.0, seq=6), 0.01, P)
    assert newer.neighbours[2][0].seq == 6 and newer.neighbours[2][1] == 0.01
    assert state.neighbours[2][0].seq == 5  # the input state is never mutated


def test_expired_neighbours_are_ignored_and_pruned():
    live = P.agent_timeout                                             # 0.03 s
    state = with_target(initial_state(1), rx=live + 0.1)
    state = receive_agent_state(state, agent_msg(2, 1.0), 0.0, P)     # expires after 0.03 s
    state = receive_agent_state(state, agent_msg(3, 4.0), live + 0.09, P)
    stepped, _ = control_step(state, on_circle(0.0), np.zeros(3), live + 0.1, P)
    assert (stepped.pred, stepped.succ) == (3, 3)
    assert set(stepped.neighbours) == {3}
    kept, _ = control_step(state, on_circle(0.0), np.zeros(3), live + 0.1,
                           P.with_changes(prune_expired=False))
    assert set(kept.neighbours) == {2, 3} and (kept.pred, kept.succ) == (3, 3)


def test_no_live_target_falls_back_to_target_velocity_or_zero():
    state, cmd = control_step(initial_state(1), on_circle(0.0), np.zeros(3), 0.0, P)
    assert np.all(cmd == 0.0) and state.u == 0.0
    state = with_target(initial_state(1), rx=0.0, velocity=(1.0, 2.0, 0.5))
    state, cmd = control_step(state, on_circle(0.0), np.zeros(3), 1.0, P)  # 1 s > 0.05 s
    assert cmd == pytest.approx([1.0, 2.0, 0.5]) and state.u == 0.0


def test_outgoing_state_carries_seq_u_and_u_ss():
    state = with_target(initial_state(3))
    state = receive_agent_state(state, agent_msg(2, 1.0, u=0.4), 0.0, P)
    msg0 = outgoing_state(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.0)
    assert (msg0.agent_id, msg0.seq, msg0.u) == (3, 0, 0.0)
    state, _ = control_step(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.0, P)
    msg1 = outgoing_state(state, on_circle(0.0), [0.0, 1.0, 0.0], 0.01)
    assert msg1.seq == 1 and msg1.u == state.u and msg1.u_ss == pytest.approx(0.8)
    assert msg1.velocity == pytest.approx([0.0, 1.0, 0.0])


def test_lambdas_from_target_weight_the_spacing():
    state = with_target(initial_state(1), lambdas={4: 2.0})
    for agent_id, angle in ((2, 1.0), (4, 5.0)):
        state = receive_agent_state(state, agent_msg(agent_id, angle), 0.0, P)
    state, _ = control_step(state, on_circle(0.0), np.zeros(3), 0.0, P)
    gap_pred, gap_succ = 2 * math.pi - 5.0, 1.0
    e = (2.0 * gap_succ - gap_pred) / (2.0 * gap_succ + gap_pred)
    assert state.pred == 4 and state.u == pytest.approx(0.25 * e)


def test_messages_validate_vectors():
    with pytest.raises(ValueError, match='position must have 3 components, got 2'):
        AgentBroadcast(1, 0, 0, [1.0, 2.0], [0, 0, 0], 0.0)
