"""The flight tables on small synthetic inputs: exact numbers."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.analysis import flight
from soliton_encirclement_ros.analysis.flight import Status
from soliton_encirclement_ros.core.area import SafetyArea
from soliton_encirclement_ros.core.links import LinkFigures


def test_a_gap_in_seq_is_one_lost_state():
    # log_time, agent_id, incarnation, seq, stamp
    rows = [(1.0, 7, 5, 1, 0.9), (2.0, 7, 5, 2, 1.8), (4.0, 7, 5, 4, 3.9), (5.0, 7, 5, 5, 4.6)]
    (links,) = flight.sender_links(rows)
    assert (links.sender, links.recorded, links.lost, links.restarts) == (7, 4, 1, 0)
    assert links.loss == pytest.approx(1 / 5)
    assert links.age_mean == pytest.approx((0.1 + 0.2 + 0.1 + 0.4) / 4)
    assert links.age_max == pytest.approx(0.4)
    assert links.age_p95 == pytest.approx(np.percentile([0.1, 0.2, 0.1, 0.4], 95))
    assert (links.longest_silence, links.silence_start) == (2.0, 2.0)


def test_a_restart_is_no_loss_and_senders_are_apart():
    rows = [(0.0, 1, 10, 8, 0.0), (0.1, 2, 3, 0, 0.1), (0.2, 1, 10, 9, 0.2),
            (0.3, 1, 11, 0, 0.3), (0.4, 1, 11, 3, 0.4), (0.5, 1, 11, 3, 0.5)]
    one, two = flight.sender_links(rows)
    assert (one.sender, one.recorded, one.lost, one.restarts) == (1, 5, 2, 1)
    assert (two.sender, two.recorded, two.lost, two.restarts) == (2, 1, 0, 0)
    assert two.longest_silence == 0.0 and math.isnan(two.silence_start)
    assert flight.sender_links(np.empty((0, 5))) == []


def agent(time, vehicle, agent_id, state='ok', message='ok', links=()):
    values = {'state': state, 'agent_id': str(agent_id), 'incarnation': '1'}
    values.update({f'link.{f.sender}': f.text() for f in links})
    return Status(time, f'/{vehicle}/agent', 0, message, values)


def figures(sender, heard, lost, age, offset=0.0):
    return LinkFigures(sender, heard, lost, 0, age, age + 0.01, offset, 0.0)


def test_receiver_links_take_each_pairs_last_status():
    statuses = [
        agent(2.0, 'uav1', 1, links=[figures(2, 90, 10, 0.2), figures(3, 50, 50, 0.3)]),
        agent(1.0, 'uav1', 1, links=[figures(2, 40, 10, 0.1)]),
        agent(1.5, 'uav2', 2, links=[figures(1, 30, 0, 0.05, -0.002)]),
        Status(1.7, '/uav2/px4_bridge', 0, 'active', {'phase': 'active'}),
    ]
    links = flight.receiver_links(statuses)
    assert [(p.receiver, p.sender, p.heard, p.lost, p.time) for p in links.last] == [
        (1, 2, 90, 10, 2.0), (1, 3, 50, 50, 2.0), (2, 1, 30, 0, 1.5)]
    assert links.last[0].loss == pytest.approx(0.1) and links.last[2].offset == -0.002
    assert links.receivers == [1, 2] and links.senders == [1, 2, 3]
    np.testing.assert_allclose(links.matrix('loss'), [[np.nan, 0.1, 0.5], [0.0, np.nan, np.nan]])
    np.testing.assert_allclose(links.series[(1, 2)], [[1.0, 0.2, 0.1, 0.0], [2.0, 0.1, 0.2, 0.0]])
    assert links.pooled_loss() == pytest.approx(60 / 230)


def test_timeline_spans_and_transitions():
    statuses = [agent(0.0, 'uav2', 2), agent(1.0, 'uav2', 2),
                agent(1.5, 'uav2', 2, 'failed', 'failed (injected)'),
                agent(2.5, 'uav2', 2, 'failed', 'failed (injected)'),
                agent(3.0, 'uav2', 2),
                agent(0.5, 'uav10', 10),
                Status(0.2, '/uav2/px4_bridge', 0, 'arming', {'phase': 'arm_requested'}),
                Status(9.0, '/uav2/px4_bridge', 1, 'landing: battery',
                       {'phase': 'landing', 'out_of_ring': 'landing (battery low)'}),
                Status(9.5, '/other', 0, 'x', {})]
    tl = flight.timeline(statuses, end=10.0, stale=3.0)
    assert tl.rows == [('uav2', 'agent'), ('uav2', 'px4'), ('uav10', 'agent')]
    assert [(t.time, t.vehicle, t.source, t.before, t.after) for t in tl.transitions] == [
        (0.0, 'uav2', 'agent', None, 'ok'), (0.2, 'uav2', 'px4', None, 'arm_requested'),
        (0.5, 'uav10', 'agent', None, 'ok'), (1.5, 'uav2', 'agent', 'ok', 'failed'),
        (3.0, 'uav2', 'agent', 'failed', 'ok'), (9.0, 'uav2', 'px4', 'arm_requested', 'landing')]
    assert tl.transitions[3].reason == 'failed (injected)'
    assert tl.transitions[-1].reason == 'landing: battery; out of the ring: landing (battery low)'
    spans = [(s.vehicle, s.source, s.state, s.start, s.end) for s in tl.spans]
    assert spans == [
        ('uav2', 'agent', 'ok', 0.0, 1.5), ('uav2', 'agent', 'failed', 1.5, 3.0),
        ('uav2', 'agent', 'ok', 3.0, 6.0), ('uav2', 'agent', flight.NO_STATUS, 6.0, 10.0),
        ('uav2', 'px4', 'arm_requested', 0.2, 3.2), ('uav2', 'px4', flight.NO_STATUS, 3.2, 9.0),
        ('uav2', 'px4', 'landing', 9.0, 10.0),
        ('uav10', 'agent', 'ok', 0.5, 3.5), ('uav10', 'agent', flight.NO_STATUS, 3.5, 10.0)]


def test_timeline_of_no_status_is_empty():
    tl = flight.timeline([])
    assert (tl.rows, tl.spans, tl.transitions) == ([], [], [])


def test_margins_closest_approach_and_time_below_d_safe():
    times = [0.0, 1.0, 2.0, 3.0]
    positions = {
        'a': [[0, 0, 5], [0, 0, 5], [0, 0, 5], [0, 0, 5]],
        'b': [[3, 0, 5], [1.5, 0, 0], [0, 0.8, 5], [3, 0, 5]],    # horizontal distance only
        'c': [[np.nan] * 3, [10, 0, 5], [10, 0, 5], [10, 0, 5]],  # known from t = 1
    }
    m = flight.margins(times, positions, d_safe=2.0)
    assert m.d_safe == 2.0
    assert [(p.a, p.b) for p in m.pairs] == [('a', 'b'), ('b', 'c'), ('a', 'c')]
    ab = m.pairs[0]
    assert (ab.closest, ab.time, ab.below, ab.below_half) == (pytest.approx(0.8), 2.0, 2.0, 1.0)
    bc = m.pairs[1]
    assert (bc.closest, bc.time, bc.below) == (7.0, 3.0, 0.0)
    assert m.area == []


def test_margin_to_the_safety_area_worst_first():
    area = SafetyArea(np.array([[0, 0], [10, 0], [10, 10], [0, 10]], dtype=float),
                      z_min=0.0, z_max=20.0)
    times = [0.0, 1.0, 2.0]
    positions = {
        'in': [[5, 5, 10], [5, 5, 10], [5, 4, 10]],       # 4 m horizontally, 10 vertically
        'high': [[5, 5, 10], [5, 5, 19], [5, 5, 19.5]],   # 0.5 m below z_max
        'out': [[5, 5, 10], [12, 5, 10], [9, 5, 10]],     # 2 m outside at t = 1
    }
    m = flight.margins(times, positions, d_safe=2.0, area=area)
    assert [a.agent for a in m.area] == ['out', 'high', 'in']
    out, high, inside = m.area
    assert (out.margin, out.time, out.horizontal, out.outside) == (-2.0, 1.0, -2.0, 1.0)
    assert (high.margin, high.time, high.vertical) == (0.5, 2.0, 0.5)
    assert (inside.margin, inside.time, inside.vertical, inside.outside) == (4.0, 2.0, 10.0, 0.0)


def test_d_safe_from_the_scenario():
    assert flight.d_safe_from_scenario({'controller': {'d_safe': 3.5}}) == 3.5
    assert flight.d_safe_from_scenario({'controller': {'d_safe': 0.0}}) is None
    assert flight.d_safe_from_scenario({'agents': 3}) is None
    assert flight.d_safe_from_scenario({'controller': {'d_safe': 'x'}}) is None


def bridge(time, vehicle, phase, message='x', level=0, **values):
    return Status(time, f'/{vehicle}/px4_bridge', level, message, {'phase': phase, **values})


HOLD = 'engaged, holding (zero velocity): cmd_vel stale (0.62 s old > cmd_timeout 0.5 s)'


def test_an_active_bridge_that_holds_is_holding_with_its_reason():
    statuses = [bridge(0.0, 'uav1', 'active', 'engaged: following cmd_vel'),
                bridge(1.0, 'uav1', 'active', HOLD, level=1),
                bridge(2.0, 'uav1', 'active', HOLD, level=1),
                bridge(3.0, 'uav1', 'active', 'engaged: following cmd_vel'),
                bridge(4.0, 'uav1', 'active', 'PX4 estimator reset moved the position estimate '
                       '9.00 m (> max_reset_jump 5 m): holding (zero velocity) until the '
                       'operator calls ~/engage', level=2),
                bridge(5.0, 'uav1', 'active', 'engaged, holding in words only', level=0),
                bridge(6.0, 'uav1', 'active', 'y', level=1, holding='outside the safety area'),
                bridge(7.0, 'uav1', 'active', HOLD, level=1, holding='no'),
                bridge(8.0, 'uav1', 'landing', HOLD, level=1)]
    tl = flight.timeline(statuses, end=9.0)
    assert [(t.time, t.before, t.after) for t in tl.transitions] == [
        (0.0, None, 'active'), (1.0, 'active', 'holding'), (3.0, 'holding', 'active'),
        (4.0, 'active', 'holding'), (5.0, 'holding', 'active'), (6.0, 'active', 'holding'),
        (7.0, 'holding', 'active'), (8.0, 'active', 'landing')]
    reasons = [t.reason for t in tl.transitions]
    assert reasons[1] == 'cmd_vel stale (0.62 s old > cmd_timeout 0.5 s)'
    assert reasons[3].startswith('PX4 estimator reset moved') and reasons[5] == (
        'outside the safety area')
    assert [(s.state, s.start, s.end) for s in tl.spans][:3] == [
        ('active', 0.0, 1.0), ('holding', 1.0, 3.0), ('active', 3.0, 4.0)]


def test_a_hold_from_the_operator_and_a_landing_from_hold_are_on_the_timeline():
    """The statuses a bridge publishes around a fleet hold and a landing from Hold (real PX4)."""
    held = {'out_of_ring': 'hold (operator request)'}
    statuses = [
        bridge(0.0, 'uav1', 'active', 'engaged: following cmd_vel'),
        bridge(1.0, 'uav1', 'hold_requested', 'hold requested (operator request): DO_SET_MODE '
               'Hold sent, waiting for PX4 to confirm', level=1, **held),
        bridge(1.2, 'uav1', 'idle', 'hold (operator request): PX4 reports 4 (AUTO_LOITER), '
               'ARMED; ~/engage to fly again, ~/land to land', level=1, **held),
        bridge(2.2, 'uav1', 'idle', 'hold (operator request): PX4 reports 4 (AUTO_LOITER), '
               'ARMED; ~/engage to fly again, ~/land to land', level=1, **held),
        bridge(5.0, 'uav1', 'landing', 'landing: NAV_LAND sent, waiting for PX4 to take it '
               'over', out_of_ring='landing (operator request)'),
        bridge(9.0, 'uav1', 'idle', 'landed (operator request): PX4 reports 18 (AUTO_LAND), '
               'DISARMED; ~/engage to fly again', out_of_ring='landed (operator request)'),
        bridge(10.0, 'uav2', 'idle', 'idle: PX4 reports 2 (POSCTL), DISARMED, the bridge sends '
               'it nothing; ~/engage to fly')]
    tl = flight.timeline(statuses, end=11.0)
    assert [(t.time, t.vehicle, t.before, t.after) for t in tl.transitions] == [
        (0.0, 'uav1', None, 'active'), (1.0, 'uav1', 'active', 'hold_requested'),
        (1.2, 'uav1', 'hold_requested', flight.PX4_HOLD),
        (5.0, 'uav1', flight.PX4_HOLD, 'landing'),
        (9.0, 'uav1', 'landing', flight.LANDED), (10.0, 'uav2', None, 'idle')]
    assert tl.transitions[2].reason.endswith('out of the ring: hold (operator request)')
    assert tl.transitions[4].reason.startswith('landed (operator request)')
    assert [(s.state, s.start, s.end) for s in tl.spans if s.vehicle == 'uav1'][2:4] == [
        (flight.PX4_HOLD, 1.2, 5.0), ('landing', 5.0, 8.0)]


def flown(vehicle, engaged, left, to='landing', until=60.0, offset=0.0, why='operator request'):
    """Return 1 Hz statuses of a bridge: idle, active from ``engaged`` until ``left``, ``to``."""
    out = []
    for k in range(int(until)):
        t = k + offset
        if t < engaged:
            out.append(bridge(t, vehicle, 'idle'))
        elif t < left:
            holds = 20 <= t < 40  # a hold is no phase change
            out.append(bridge(t, vehicle, 'active', HOLD if holds else 'engaged: following '
                              'cmd_vel', level=int(holds)))
        else:
            out.append(bridge(t, vehicle, to, out_of_ring=f'landing ({why})'))
    return out


def test_the_engaged_phase_runs_from_all_bridges_active_to_the_last_leaving():
    statuses = (flown('uav1', 12, 45.5, offset=0.1) + flown('uav2', 12, 45.5, offset=0.4)
                + flown('uav3', 12, 30.5, offset=0.7, why='land_after')
                + [agent(t, 'uav1', 1) for t in range(60)])
    phase = flight.engaged_phase(statuses, 0.0, 60.0)
    # uav3 is last to report active (12.7); uav2's is the last active status (45.4): uav3
    # landing alone at 30.7 leaves the ring, it does not end the phase
    assert (phase.start, phase.end, phase.rule) == (pytest.approx(12.7), pytest.approx(45.4),
                                                    flight.BRIDGES)
    assert phase.bridges == ('uav1', 'uav2', 'uav3') and phase.others == ()
    assert phase.text == (
        'engaged 12.70–45.40 s: from when all 3 PX4 bridges were active (uav1, uav2, uav3) to '
        "the last active status of any (uav2's; then landing at 46.40 s: landing (operator "
        'request)); out of the ring before: uav3 (landing at 30.70 s: landing (land_after))')
    assert phase.as_dict()['bridges'] == ['uav1', 'uav2', 'uav3']
    assert phase.as_dict()['px4_bridges'] == phase.reporting == 3


def test_the_engaged_phase_of_a_fleet_that_flew_twice_or_in_part():
    twice = [s for s in flown('uav1', 5, 20) if s.time < 30] + \
        [bridge(t, 'uav1', 'active') for t in range(30, 40)]
    phase = flight.engaged_phase(twice, 0.0, 40.0)
    assert (phase.start, phase.end, phase.others) == (5.0, 19.0, ((30.0, 39.0),))
    assert phase.text.endswith('; the first of 2 engaged phases (the others: 30.00–39.00 s)')
    # a bridge that never engaged: judged while the others were; a bridge that went silent
    part = flown('uav1', 10, 50) + [bridge(t, 'uav2', 'idle') for t in range(60)] + \
        [s for s in flown('uav3', 11, 50) if s.time < 30]
    phase = flight.engaged_phase(part, 0.0, 60.0)
    assert (phase.start, phase.end, phase.bridges) == (11.0, 49.0, ('uav1', 'uav3'))
    assert phase.text.startswith('engaged 11.00–49.00 s: from when 2 of 3 PX4 bridges were '
                                 'active together (uav1, uav3; never active: uav2)')
    assert 'out of the ring before: uav3 (its bridge silent after 29.00 s)' in phase.text


def test_without_an_engaged_bridge_the_whole_run_is_judged():
    for statuses, why, reporting in (
            ([agent(1.0, 'uav1', 1)], 'no PX4 bridge status in the bag', 0),
            ([bridge(1.0, 'uav1', 'idle')], 'no PX4 bridge was ever active (1 reported)', 1)):
        phase = flight.engaged_phase(statuses, 0.5, 12.0)
        assert (phase.start, phase.end, phase.rule) == (0.5, 12.0, flight.WHOLE_RUN)
        assert phase.reporting == reporting
        assert phase.text == f'the whole run, 0.50–12.00 s: {why}'
