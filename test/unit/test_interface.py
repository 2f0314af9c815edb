"""The wire interface: exact integer stamps and ids, one clear error per bad or foreign message."""
import re

import numpy as np
import pytest
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from soliton_encirclement_ros.core.controller import AgentBroadcast, seconds_to_ns, TargetBroadcast
from soliton_encirclement_ros.interface import (
    AGENT_STATE, agent_state_array, agent_state_from_msg, agent_state_to_msg, AGENT_STATE_V2,
    agent_state_values, decode, encode, Layout, TARGET_STATE, target_state_from_msg,
    target_state_to_msg)

# 2026-11-23 09:43:20.123456789 UTC: a float64 of seconds would round this to 0.24 us.
EPOCH_NS = 1_795_426_000_123_456_789


def agent(stamp_ns=EPOCH_NS, **changes):
    fields = {'agent_id': 7, 'seq': 123456, 'stamp_ns': stamp_ns, 'position': [1.5, -2.0, 10.0],
              'velocity': [0.1, 0.2, -0.3], 'u': 0.25, 'u_ss': -0.5, 'incarnation': 2**31 - 1}
    return AgentBroadcast(**{**fields, **changes})


def labelled(values, label):
    msg = Float64MultiArray(data=[float(v) for v in values])
    msg.layout.dim = [MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    return msg


def test_agent_state_round_trip_is_exact_at_epoch_times():
    assert float(EPOCH_NS * 1e-9) * 1e9 != EPOCH_NS  # the reason for two stamp fields
    decoded = agent_state_from_msg(agent_state_to_msg(agent()))
    assert decoded.stamp_ns == EPOCH_NS and isinstance(decoded.stamp_ns, int)
    assert (decoded.agent_id, decoded.seq, decoded.incarnation) == (7, 123456, 2**31 - 1)
    assert isinstance(decoded.agent_id, int)
    np.testing.assert_array_equal(decoded.position, [1.5, -2.0, 10.0])
    np.testing.assert_array_equal(decoded.velocity, [0.1, 0.2, -0.3])
    assert (decoded.u, decoded.u_ss) == (0.25, -0.5)
    assert decoded.stamp == EPOCH_NS * 1e-9


def test_the_stamp_travels_as_sec_and_nanosec_like_builtin_interfaces_time():
    msg = agent_state_to_msg(agent())
    values = dict(zip(AGENT_STATE.fields, msg.data))
    assert (values['stamp_sec'], values['stamp_nanosec']) == (1_795_426_000, 123_456_789)
    assert msg.layout.dim[0].label == AGENT_STATE.label
    before_epoch = agent_state_from_msg(agent_state_to_msg(agent(stamp_ns=-1)))
    assert before_epoch.stamp_ns == -1  # sec -1, nanosec 999999999


def test_target_state_round_trip_is_exact_and_keeps_the_arc_weights():
    msg = target_state_to_msg(EPOCH_NS, [1.0, 2.0, 3.0], [0.5, 0.0, 0.0], 0.2, {3: 1.5, 1: 0.5})
    decoded = target_state_from_msg(msg)
    assert decoded.stamp_ns == EPOCH_NS and msg.layout.dim[0].label == TARGET_STATE.label
    np.testing.assert_array_equal(decoded.position, [1.0, 2.0, 3.0])
    assert decoded.omega_ref == 0.2 and dict(decoded.lambdas) == {1: 0.5, 3: 1.5}


@pytest.mark.parametrize('field, value, message', [
    ('agent_id', 2.5, 'agent state agent_id 2.5 is not an integer'),
    ('seq', 1e-3, 'agent state seq 0.001 is not an integer'),
    ('stamp_nanosec', 1e9, 'stamp_nanosec in [0, 1e9)'),
    ('stamp_sec', 0.5, 'both must be integers'),
    ('u', float('nan'), 'agent state has non-finite u'),
])
def test_a_malformed_agent_state_is_one_error_naming_the_field(field, value, message):
    values = list(agent_state_to_msg(agent()).data)
    values[AGENT_STATE.fields.index(field)] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        agent_state_from_msg(labelled(values, AGENT_STATE.label))


def test_a_non_integer_target_stamp_or_arc_id_is_refused():
    good = list(target_state_to_msg(EPOCH_NS, [0, 0, 0], [0, 0, 0], 0.0, {2: 1.0}).data)
    with pytest.raises(ValueError, match='arc|agent id'):
        target_state_from_msg(labelled(good[:-2] + [2.5, 1.0], TARGET_STATE.label))
    with pytest.raises(ValueError, match='stamp_nanosec'):
        target_state_from_msg(labelled([good[0], -1.0] + good[2:], TARGET_STATE.label))


def test_a_live_node_refuses_the_v2_layout_and_the_analysis_converts_it():
    v2 = [7, 9, 3, 12.25, 1.0, 2.0, 3.0, 0.0, 0.0, 0.0, 0.5, 0.0]
    msg = labelled(v2, AGENT_STATE_V2.label)
    with pytest.raises(ValueError, match='the sender speaks agent_state.v2, this node '
                                         'agent_state.v6'):
        agent_state_from_msg(msg)
    values = agent_state_array(msg, older=True)
    assert dict(zip(AGENT_STATE.fields, values)) == {
        'agent_id': 7, 'incarnation': 9, 'seq': 3, 'stamp_sec': 12, 'stamp_nanosec': 250_000_000,
        'px': 1.0, 'py': 2.0, 'pz': 3.0, 'vx': 0.0, 'vy': 0.0, 'vz': 0.0, 'u': 0.5, 'u_ss': 0.0,
        'member': 1.0, 'uncertainty': 0.0,  # every state then was a ring member's, certain,
        'landed': 0.0}                      # and in the air
    with pytest.raises(ValueError, match='expected 13 values|has 11 values, expected 12'):
        agent_state_array(labelled(v2[:-1], AGENT_STATE_V2.label), older=True)


def test_member_travels_as_0_or_1_and_anything_else_is_refused():
    presence = agent(member=False)
    values = list(agent_state_to_msg(presence).data)
    assert values[AGENT_STATE.fields.index('member')] == 0.0
    assert agent_state_from_msg(labelled(values, AGENT_STATE.label)).member is False
    values[AGENT_STATE.fields.index('member')] = 0.5
    with pytest.raises(ValueError, match=re.escape('agent state member 0.5 is neither 0 nor 1')):
        agent_state_from_msg(labelled(values, AGENT_STATE.label))


def test_landed_travels_as_0_or_1_with_presence_only_and_v5_reads_as_in_the_air():
    landed = agent(member=False, landed=True)
    values = list(agent_state_to_msg(landed).data)
    assert values[AGENT_STATE.fields.index('landed')] == 1.0
    assert agent_state_from_msg(labelled(values, AGENT_STATE.label)).landed is True
    values[AGENT_STATE.fields.index('member')] = 1.0
    with pytest.raises(ValueError, match='a landed vehicle is no ring member'):
        agent_state_from_msg(labelled(values, AGENT_STATE.label))
    with pytest.raises(ValueError, match='landed needs member False'):
        agent(landed=True)
    from soliton_encirclement_ros.interface import AGENT_STATE_V5
    v5 = list(agent_state_to_msg(agent()).data)[:-1]
    assert agent_state_array(labelled(v5, AGENT_STATE_V5.label), older=True)[-1] == 0.0


def test_seconds_passed_as_a_stamp_are_a_type_error():
    with pytest.raises(TypeError, match='stamp_ns must be an integer number of nanoseconds, '
                                        'got 1.5; convert seconds with seconds_to_ns'):
        agent(stamp_ns=1.5)
    with pytest.raises(TypeError, match='stamp_ns'):
        TargetBroadcast(0.05, np.zeros(3), np.zeros(3))
    assert TargetBroadcast(seconds_to_ns(0.05), np.zeros(3), np.zeros(3)).stamp_ns == 50_000_000


def test_the_codec_goes_by_name_so_the_field_order_is_written_once():
    """Issue 25 §4: a layout in another order (or a later interface package) changes one list."""
    state = agent()
    shuffled = Layout('agent_state', 99, tuple(reversed(AGENT_STATE.fields)))
    values = encode(shuffled, lambda name: getattr(state, name))
    assert values == list(reversed(agent_state_values(state)))
    decoded = AgentBroadcast(**decode(shuffled, values))
    assert (decoded.agent_id, decoded.seq, decoded.stamp_ns, decoded.incarnation) == (
        state.agent_id, state.seq, state.stamp_ns, state.incarnation)
    assert decoded.position.tolist() == state.position.tolist() and decoded.u_ss == state.u_ss
    # a layout without a view attribute's fields neither encodes nor decodes it
    short = Layout('agent_state', 98, ('agent_id', 'seq', 'stamp_sec', 'stamp_nanosec'))
    assert set(decode(short, encode(short, lambda name: getattr(state, name)))) == {
        'agent_id', 'seq', 'stamp_ns'}
