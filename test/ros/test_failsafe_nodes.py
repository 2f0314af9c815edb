"""
The fail-safe rules through real rclpy nodes on a simulated clock.

What is published (no broadcast, zero velocity, ~/status and /diagnostics) and what is logged,
once per episode.
"""
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter
from rclpy.qos import ReliabilityPolicy
from rclpy.time import Time
from std_msgs.msg import Float64MultiArray

from soliton_encirclement_ros.core.controller import AgentBroadcast, seconds_to_ns
from soliton_encirclement_ros.interface import (
    agent_state_from_msg, agent_state_to_msg, target_state_to_msg)
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from support.harness import agent_node_harness, Harness, SIM, target_node_harness
from velocity_mobility_ros.nodes.messages import to_odometry

PERIOD = 0.05
TARGET_V = (1.0, 0.0, 0.0)


class Feeds:
    """Switchable inputs of agent 1: its odometry, the target and neighbour 2."""

    def __init__(self, harness):
        self.odom = harness.publisher(Odometry, '/uav1/odom')
        self.states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
        self.target = harness.publisher(Float64MultiArray, '/target/state')
        self.odom_on = self.target_on = self.neighbour_on = True
        self.target_stamp_offset = 0.0
        self.neighbour_stamp_offset = 0.0  # its companion's clock, off this one's
        self.neighbour_position = (-20.0, 0.0, 0.0)
        self.seq = 0

    def __call__(self, now):
        stamp = Time(nanoseconds=round(now * 1e9)).to_msg()
        if self.odom_on:
            self.odom.publish(to_odometry([25.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0, stamp, 'world',
                                          'uav1/base_link'))
        if self.neighbour_on:
            self.seq += 1
            self.states.publish(agent_state_to_msg(AgentBroadcast(
                agent_id=2, seq=self.seq,
                stamp_ns=seconds_to_ns(now + self.neighbour_stamp_offset),
                position=np.array(self.neighbour_position),
                velocity=np.zeros(3), u=0.0, incarnation=5)))
        if self.target_on:
            self.target.publish(target_state_to_msg(seconds_to_ns(now + self.target_stamp_offset),
                                                    [0.0, 0.0, 0.0], TARGET_V))


@pytest.fixture
def agent():
    harness = agent_node_harness(control_period=PERIOD)
    harness.record(Twist, '/uav1/cmd_vel')
    harness.record(Float64MultiArray, '/swarm/agent_states')
    harness.record(DiagnosticStatus, '/uav1/agent/status')
    harness.record(DiagnosticArray, '/diagnostics')
    harness.feeds = Feeds(harness)
    harness.settle()
    yield harness
    harness.close()


def mark(harness):
    """Index of the next message on each recorded topic."""
    return {topic: len(msgs) for topic, msgs in harness.received.items()}


def since(harness, start, topic):
    return harness.received[topic][start[topic]:]


def own_broadcasts(harness, start):
    return [s for s in map(agent_state_from_msg, since(harness, start, '/swarm/agent_states'))
            if s.agent_id == 1]


def commands(harness, start):
    return [(m.linear.x, m.linear.y, m.linear.z) for m in since(harness, start, '/uav1/cmd_vel')]


def statuses(harness, start):
    return [(m.level, m.message) for m in since(harness, start, '/uav1/agent/status')]


def test_odometry_pause_silences_the_broadcast_holds_and_says_why_once(agent, capfd):
    agent.advance(1.0, before_step=agent.feeds)
    assert own_broadcasts(agent, {'/swarm/agent_states': 0})  # healthy: it broadcasts
    agent.feeds.odom_on = False
    start = mark(agent)
    agent.advance(0.5, before_step=agent.feeds)  # up to odom_timeout: still flying
    blind = mark(agent)
    agent.advance(1.5, before_step=agent.feeds)
    assert not own_broadcasts(agent, blind)  # no ghost in the neighbours' ring
    zero = commands(agent, blind)
    assert len(zero) >= 25 and all(c == (0.0, 0.0, 0.0) for c in zero)
    assert own_broadcasts(agent, start)  # the first 0.5 s were still fresh
    changes = [s for s in statuses(agent, start) if 'blind' in s[1]]
    assert changes and changes[0][0] == DiagnosticStatus.WARN
    assert 'odometry 0.5 s old' in changes[0][1] or 'odometry 0.6 s old' in changes[0][1]
    err = capfd.readouterr().err
    assert err.count('blind (odometry') == 1 and 'holding (zero velocity)' in err

    agent.feeds.odom_on = True
    resumed = mark(agent)
    agent.advance(0.5, before_step=agent.feeds)
    assert own_broadcasts(agent, resumed)
    assert any(c != (0.0, 0.0, 0.0) for c in commands(agent, resumed))
    assert statuses(agent, resumed)[0] == (DiagnosticStatus.OK, 'ok')
    assert 'blind episode over, resuming control' in capfd.readouterr().err


def test_a_neighbour_whose_clock_stepped_ahead_is_kept_clear_of(agent, capfd):
    """
    A companion whose clock stepped 2 s ahead: its states say where its vehicle is.

    Neighbour 2 is 1.5 m from agent 1, inside d_safe, its states stamped 2 s ahead of this
    clock (beyond max_future_stamp 0.5 s). Before, they were dropped and its vehicle was
    invisible: agent 1 flew on toward its ring at 20 m, through it. Now each is kept as its
    vehicle's presence, aged from its receipt, and agent 1 keeps off it.
    """
    agent.feeds.neighbour_position = (23.5, 0.0, 0.0)  # agent 1 is at (25, 0, 0)
    agent.feeds.neighbour_stamp_offset = 2.0
    start = mark(agent)
    agent.advance(1.0, before_step=agent.feeds)
    flown = commands(agent, start)[-10:]
    assert len(flown) == 10 and all(x > 0.5 for x, _, _ in flown), flown  # away, not inward
    err = capfd.readouterr().err
    assert err.count('agent state stamped 2.0') == 1, err  # throttled (5 s)
    assert ('ahead of this clock (max_future_stamp 0.5 s): rejected as a state, kept as its '
            "vehicle's presence; ") in err


def diagnostics(harness, start):
    """(stamp s, level, message, values) of each /diagnostics status since ``start``."""
    return [(Time.from_msg(a.header.stamp).nanoseconds * 1e-9, s.level, s.message,
             {v.key: v.value for v in s.values})
            for a in since(harness, start, '/diagnostics') for s in a.status
            if s.name == '/uav1/agent']


def test_diagnostics_say_the_status_on_change_and_at_one_hertz_not_per_tick(agent):
    start = mark(agent)
    t0 = agent.now_ns * 1e-9
    agent.advance(3.0, before_step=agent.feeds)  # 60 control ticks
    healthy = diagnostics(agent, start)
    assert 3 <= len(healthy) <= 5  # 1 Hz (and a change from 'starting'), not 20 Hz
    assert all(level == DiagnosticStatus.OK for _, level, _, _ in healthy)
    assert healthy[-1][2] == 'ok' and healthy[-1][3]['agent_id'] == '1'
    assert healthy[-1][3]['duplicate_id'] == 'false'
    assert all(t0 <= t <= t0 + 3.0 for t, *_ in healthy)  # stamped with the sim clock
    agent.feeds.odom_on = False
    blind = mark(agent)
    agent.advance(1.0, before_step=agent.feeds)
    assert [(level, message.split(' (')[0]) for _, level, message, _ in diagnostics(
        agent, blind)][:1] == [(DiagnosticStatus.WARN, 'blind')]
    # ~/status carries the same statuses
    assert [m for _, _, m, _ in diagnostics(agent, start)] == [
        m for _, m in statuses(agent, start)]


def test_target_silence_flies_its_velocity_then_holds_and_recovers(agent, capfd):
    agent.advance(1.0, before_step=agent.feeds)
    agent.feeds.target_on = False
    silent = mark(agent)
    agent.advance(2.0, before_step=agent.feeds)
    cmds = commands(agent, silent)  # one command per 0.05 s tick since the target went quiet
    times = PERIOD * np.arange(1, len(cmds) + 1)
    flying = [c for t, c in zip(times, cmds) if 0.3 < t < 0.95]
    holding = [c for t, c in zip(times, cmds) if t > 1.1]
    assert flying and all(c == pytest.approx(TARGET_V) for c in flying)
    assert holding and all(c == (0.0, 0.0, 0.0) for c in holding)
    assert own_broadcasts(agent, silent)  # odometry is fresh: it still shows in the ring
    assert any(level == DiagnosticStatus.WARN and msg.startswith('target lost')
               for level, msg in statuses(agent, silent))
    assert capfd.readouterr().err.count('target lost (last heard') == 1

    agent.feeds.target_on = True
    back = mark(agent)
    agent.advance(0.5, before_step=agent.feeds)
    assert commands(agent, back)[-1] != (0.0, 0.0, 0.0)
    assert 'target lost episode over' in capfd.readouterr().err


def test_a_future_stamped_target_is_rejected_and_real_ones_keep_flowing(agent, capfd):
    agent.advance(0.5, before_step=agent.feeds)
    agent.feeds.target_stamp_offset = 100.0  # one burst from a skewed clock
    agent.advance(0.2, before_step=agent.feeds)
    assert 'target state stamped 100.000 s ahead' in capfd.readouterr().err
    agent.feeds.target_stamp_offset = 0.4  # within max_future_stamp: accepted, then expires
    agent.advance(0.05, before_step=agent.feeds)
    agent.feeds.target_stamp_offset = 0.0
    start = mark(agent)
    agent.advance(2.0, before_step=agent.feeds)
    assert all(s[1] == 'ok' for s in statuses(agent, start))
    node = agent.nodes[0]
    cached, rx = node._state.target
    assert abs(cached.stamp - agent.now_ns * 1e-9) < 0.1  # following the real target again


def test_a_neighbour_whose_sequence_restarts_is_heard_again(agent):
    agent.advance(0.5, before_step=agent.feeds)
    node = agent.nodes[0]
    before = node._state.neighbours[2][0].seq
    assert before > 40
    agent.feeds.seq = 0  # the neighbour's process restarted its counter (same incarnation)
    agent.advance(0.4, before_step=agent.feeds)
    cached, _ = node._state.neighbours[2]
    assert cached.seq < before and cached.stamp == pytest.approx(agent.now_ns * 1e-9 - 0.01)


def test_duplicate_incarnations_of_one_id_are_an_error_once(agent, capfd):
    other = agent.publisher(Float64MultiArray, '/swarm/agent_states')
    own = agent.nodes[0]

    def twin(now):
        agent.feeds(now)
        other.publish(agent_state_to_msg(AgentBroadcast(
            agent_id=2, seq=1000 + round(now * 100), stamp_ns=seconds_to_ns(now),
            position=np.array([0.0, 20.0, 0.0]), velocity=np.zeros(3), u=0.0, incarnation=6)))
        other.publish(agent_state_to_msg(AgentBroadcast(
            agent_id=1, seq=1, stamp_ns=seconds_to_ns(now), position=np.array([0.0, -20.0, 0.0]),
            velocity=np.zeros(3), u=0.0, incarnation=own.incarnation + 1)))

    agent.advance(1.0, before_step=twin)
    err = capfd.readouterr().err
    assert err.count('duplicate agent_id 2: agent_id 2 is broadcast by incarnations 5, 6') == 1
    assert err.count("duplicate agent_id 1: this agent's own id") == 1
    _, level, message, values = diagnostics(agent, {'/diagnostics': 0})[-1]
    assert level == DiagnosticStatus.ERROR and values['duplicate_id'] == 'true'
    assert message.startswith('duplicate id: agent_id 1 is broadcast by another process too')


def test_metrics_node_reports_a_duplicate_id(capfd):
    harness = Harness(lambda ctx: MetricsNode(context=ctx, namespace='/swarm',
                                              parameter_overrides=SIM))
    states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
    harness.settle()

    def publish(now):
        for incarnation, y in ((1, 20.0), (2, -20.0)):
            states.publish(agent_state_to_msg(AgentBroadcast(
                agent_id=3, seq=round(now * 100), stamp_ns=seconds_to_ns(now),
                position=np.array([0.0, y, 0.0]),
                velocity=np.zeros(3), u=0.0, incarnation=incarnation)))

    try:
        harness.advance(0.5, before_step=publish)
    finally:
        harness.close()
    assert (
        capfd.readouterr().err.count('duplicate agent_id 3: broadcast by incarnations 1, 2') == 1
    )


def test_follow_mode_stops_broadcasting_a_stale_track_and_resumes(capfd):
    harness = target_node_harness(follow_topic='/tracked/odom', broadcast_period=0.05)
    harness.record(Float64MultiArray, '/target/state')
    harness.record(Odometry, '/target/odom')
    tracked = harness.publisher(Odometry, '/tracked/odom')
    harness.settle()
    track_on = [True]

    def feed(now):
        if track_on[0]:
            tracked.publish(to_odometry([3.0, 4.0, 0.0], [0.0, 0.0, 0.0], 0.0,
                                        Time(nanoseconds=round(now * 1e9)).to_msg(), 'world', 'x'))

    try:
        harness.advance(1.0, before_step=feed)
        assert len(harness.received['/target/state']) >= 15
        track_on[0] = False
        harness.advance(0.5, before_step=feed)  # follow_timeout
        start = mark(harness)
        harness.advance(1.5, before_step=feed)
        assert not since(harness, start, '/target/state')
        assert not since(harness, start, '/target/odom')
        assert capfd.readouterr().err.count('not broadcasting the target') == 1
        track_on[0] = True
        back = mark(harness)
        harness.advance(0.5, before_step=feed)
        assert len(since(harness, back, '/target/state')) >= 8
    finally:
        harness.close()


def test_follow_mode_rejects_a_track_stamped_in_the_future(capfd):
    """A tracker whose clock runs 3 s ahead: no phantom target for 3.5 s after it stops."""
    harness = target_node_harness(follow_topic='/tracked/odom', broadcast_period=0.05)
    harness.record(Float64MultiArray, '/target/state')
    tracked = harness.publisher(Odometry, '/tracked/odom')
    harness.settle()
    offset = [3.0]

    def feed(now):
        if offset[0] is not None:
            stamp = Time(nanoseconds=round((now + offset[0]) * 1e9)).to_msg()
            tracked.publish(to_odometry([3.0, 4.0, 0.0], [0.0] * 3, 0.0, stamp, 'world', 'x'))

    try:
        harness.advance(1.0, before_step=feed)
        offset[0] = None  # the tracker stops
        harness.advance(1.0, before_step=feed)
        assert not harness.received['/target/state']
        err = capfd.readouterr().err
        assert err.count('tracked target state stamped 3.') == 1, err  # throttled (5 s)
        assert 'ahead of this clock (max_future_stamp 0.5 s): rejected' in err
        offset[0] = 0.4  # within max_future_stamp: accepted
        harness.advance(0.5, before_step=feed)
        assert len(harness.received['/target/state']) >= 8
    finally:
        harness.close()


def test_follow_mode_drops_a_track_heard_before_the_clock_stepped_back(capfd):
    harness = target_node_harness(follow_topic='/tracked/odom', broadcast_period=0.05)
    harness.record(Float64MultiArray, '/target/state')
    tracked = harness.publisher(Odometry, '/tracked/odom')
    harness.settle()
    track_on = [True]

    def feed(now):
        if track_on[0]:
            stamp = Time(nanoseconds=round(now * 1e9)).to_msg()
            tracked.publish(to_odometry([3.0, 4.0, 0.0], [0.0] * 3, 0.0, stamp, 'world', 'x'))

    try:
        harness.advance(6.0, before_step=feed)
        track_on[0] = False  # a simulator reset: the clock steps back 5 s, the tracker is gone
        harness.lockstep.set_time(harness.now_ns - 5 * 10**9)
        harness.drain()
        start = mark(harness)
        harness.advance(1.0, before_step=feed)
        assert not since(harness, start, '/target/state')  # not the frozen track for 5.5 s
        err = capfd.readouterr().err
        assert err.count('tracked target odometry is stamped') == 1, err
        assert 'ahead of this clock (max_future_stamp 0.5 s; did the clock step back?)' in err
    finally:
        harness.close()


def test_follow_mode_says_once_when_no_track_arrives(capfd):
    harness = target_node_harness(follow_topic='/typo/odom', broadcast_period=0.05)
    harness.record(Float64MultiArray, '/target/state')
    harness.settle()
    try:
        harness.advance(0.4)  # within follow_timeout of start: still starting, nothing said
        assert 'no tracked target odometry' not in capfd.readouterr().err
        harness.advance(2.0)
        assert not harness.received['/target/state']
        err = capfd.readouterr().err
        assert err.count('no tracked target odometry on /typo/odom within follow_timeout 0.5 s '
                         'of start (0 publisher(s); is follow_topic right?)') == 1, err
    finally:
        harness.close()


def test_swarm_reliability_sets_the_qos_and_a_mismatch_is_reported(capfd):
    def best_effort_agent(ctx):
        return AgentNode(context=ctx, namespace='/uav4', parameter_overrides=SIM + [
            Parameter('swarm_reliability', value='best_effort')])

    harness = Harness(
        best_effort_agent,
        lambda ctx: MetricsNode(context=ctx, namespace='/swarm', parameter_overrides=SIM),
    )
    try:
        harness.settle(1.5)
        offered = harness.driver.get_publishers_info_by_topic('/swarm/agent_states')
        assert [p.qos_profile.reliability for p in offered] == [ReliabilityPolicy.BEST_EFFORT]
        assert harness.nodes[0]._state_pub.qos_profile.depth == 5  # depth is not on the graph
        err = capfd.readouterr().err
        assert ('/swarm/agent_states: a publisher offers QoS this reliable subscription cannot '
                'receive') in err and '/uav4/agent (best_effort)' in err
    finally:
        harness.close()
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ValueError, match='swarm_reliability must be one of reliable, '
                                             "best_effort, got 'radio'"):
            AgentNode(context=context, namespace='/uav5',
                      parameter_overrides=[Parameter('swarm_reliability', value='radio')])
    finally:
        rclpy.try_shutdown(context=context)


def test_before_the_first_odometry_the_agent_waits_quietly_then_warns(monkeypatch, capfd):
    """A start-up without odometry yet is no warning; one that lasts STARTUP_ODOMETRY is."""
    import time

    from soliton_encirclement_ros.nodes import agent_node
    monkeypatch.setattr(agent_node, 'STARTUP_ODOMETRY', 1.0)
    harness = agent_node_harness(control_period=PERIOD)
    try:
        started = time.monotonic()
        harness.settle()
        harness.advance(0.8)  # past odom_timeout (0.5 s) of starting: blind
        err = capfd.readouterr().err
        assert "waiting for its vehicle's first odometry" in err and 'WARN' not in err
        while time.monotonic() - started < 2.5:  # its 1 Hz status period, on the wall clock
            harness.advance(0.1)
        err = capfd.readouterr().err
        assert err.count('for 1 s since the start: holding (zero velocity)') == 1, err
    finally:
        harness.close()


def test_a_vehicle_out_for_a_fault_then_for_the_operator_is_logged_at_each_level(agent, capfd):
    """A warning for a fault, a report for what the operator asked: the agent runs on."""
    from std_msgs.msg import String

    from soliton_encirclement_ros.nodes.swarm_topics import VEHICLE_FAILURE_QOS
    from support.harness import spin_until
    failure = agent.driver.create_publisher(String, '/uav1/vehicle_failure', VEHICLE_FAILURE_QOS)
    assert spin_until(agent.executor, lambda: failure.get_subscription_count() == 1)
    node = agent.nodes[0]
    reasons = ('PX4 left OFFBOARD (nav_state=4 (AUTO_LOITER))', 'landing (operator request)',
               'landed (operator request)', 'battery 20% remaining')
    for reason in reasons:
        failure.publish(String(data=reason))
        agent.advance(0.3, before_step=agent.feeds)
        assert node.failed and node.status.detail == f'vehicle: {reason}'
        failure.publish(String(data=''))
        agent.advance(0.3, before_step=agent.feeds)
        assert not node.failed
    err = capfd.readouterr().err
    assert 'Logger severity cannot be changed' not in err
    said = {line.split('the vehicle left the ring: ')[1]: line.split(']')[0].strip('[')
            for line in err.splitlines() if 'the vehicle left the ring: ' in line}
    assert said == {reasons[0]: 'WARN', reasons[1]: 'INFO', reasons[2]: 'INFO',
                    reasons[3]: 'WARN'}
