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
