"""agent_node, target_node and metrics_node as real rclpy nodes on a simulated clock."""
import math

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import pytest
import rclpy
from rclpy.parameter import Parameter
from rclpy.time import Time
from std_msgs.msg import Float64, Float64MultiArray
from std_srvs.srv import SetBool

from soliton_encirclement_ros.core.controller import AgentBroadcast, seconds_to_ns
from soliton_encirclement_ros.interface import (
    agent_state_from_msg, agent_state_to_msg, target_state_from_msg, target_state_to_msg)
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode
from soliton_encirclement_ros.nodes.target_node import TargetNode
from support.harness import agent_node_harness, Harness, SIM, target_node_harness
from support.waits import wait_for
from velocity_mobility_ros.nodes.messages import to_odometry


@pytest.fixture
def agent_harness():
    harness = agent_node_harness(control_period=0.05)
    harness.record(Twist, '/uav1/cmd_vel')
    harness.record(Float64MultiArray, '/swarm/agent_states')
    odom = harness.publisher(Odometry, '/uav1/odom')
    states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
    target = harness.publisher(Float64MultiArray, '/target/state')
    harness.settle()
    seq = iter(range(10**6))

    def feed(now):
        stamp = Time(nanoseconds=round(now * 1e9)).to_msg()
        odom.publish(
            to_odometry([25.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0, stamp, 'world', 'uav1/base_link')
        )
        other = AgentBroadcast(
            agent_id=2,
            seq=next(seq),
            stamp_ns=seconds_to_ns(now),
            position=np.array([-20.0, 0.0, 0.0]),
            velocity=np.zeros(3),
            u=0.0,
            u_ss=0.0,
        )
        states.publish(agent_state_to_msg(other))
        target.publish(target_state_to_msg(seconds_to_ns(now), [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]))

    harness.feed = feed
    yield harness
    harness.close()


def own_states(harness):
    return [
        s
        for s in map(agent_state_from_msg, harness.received['/swarm/agent_states'])
        if s.agent_id == 1
    ]


def test_agent_commands_the_radial_pd_correction_and_broadcasts_its_state(agent_harness):
    agent_harness.advance(1.0, before_step=agent_harness.feed)
    cmd = agent_harness.received['/uav1/cmd_vel'][-1]
    # r = 25, R = 20: v_r_corr = -K_R*(r - R) = -5 along +x; the other agent sits opposite,
    # so both gaps are pi, e_tau = 0 and u stays 0: no tangential term.
    assert cmd.linear.x == pytest.approx(-5.0, abs=1e-9)
    assert cmd.linear.y == pytest.approx(0.0, abs=1e-9)
    mine = own_states(agent_harness)
    assert len(mine) == pytest.approx(20, abs=1)  # one per 0.05 s control tick
    assert [s.seq for s in mine] == list(range(mine[0].seq, mine[0].seq + len(mine)))
    assert mine[-1].position.tolist() == [25.0, 0.0, 0.0]


def test_failure_service_takes_the_agent_out_of_the_ring_and_recovery_resumes(agent_harness):
    agent_harness.advance(0.5, before_step=agent_harness.feed)
    client = agent_harness.driver.create_client(SetBool, '/uav1/agent/inject_failure')
    assert client.wait_for_service(timeout_sec=5.0)

    def call(data):
        future = client.call_async(SetBool.Request(data=data))
        agent_harness.executor.spin_until_future_complete(future, timeout_sec=5.0)
        return future.result()

    assert call(True).success
    broadcasts_before = len(own_states(agent_harness))
    commands_before = len(agent_harness.received['/uav1/cmd_vel'])
    agent_harness.advance(1.0, before_step=agent_harness.feed)
    # While failed: one zero command, then none; only its vehicle's presence is broadcast.
    assert len(agent_harness.received['/uav1/cmd_vel']) <= commands_before + 1
    last = agent_harness.received['/uav1/cmd_vel'][-1]
    assert (last.linear.x, last.linear.y, last.linear.z) == (0.0, 0.0, 0.0)
    failed = own_states(agent_harness)[broadcasts_before:]
    assert len(failed) == pytest.approx(20, abs=2) and not any(s.member for s in failed)
    assert failed[-1].position.tolist() == [25.0, 0.0, 0.0]
    assert call(False).success
    agent_harness.advance(0.5, before_step=agent_harness.feed)
    mine = own_states(agent_harness)
    back = [s for s in mine[broadcasts_before:] if s.member]
    assert back and mine[-1].member
    seqs = [s.seq for s in mine]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # one sequence throughout
    assert agent_harness.received['/uav1/cmd_vel'][-1].linear.x == pytest.approx(-5.0, abs=1e-9)


def test_malformed_states_are_ignored_and_bad_gains_rejected(agent_harness):
    bad = agent_harness.publisher(Float64MultiArray, '/swarm/agent_states')
    agent_harness.settle(0.2)
    bad.publish(Float64MultiArray(data=[3.0, 0.0, 0.0, math.nan] + [0.0] * 7))
    bad.publish(Float64MultiArray(data=[1.0, 2.0]))
    agent_harness.advance(0.5, before_step=agent_harness.feed)
    assert agent_harness.received['/uav1/cmd_vel'][-1].linear.x == pytest.approx(-5.0, abs=1e-9)
    agent = agent_harness.nodes[0]
    result = agent.set_parameters([Parameter('k_r', value=-1.0)])[0]
    assert not result.successful and 'k_r' in result.reason
    assert agent.get_parameter('k_r').value == 1.0
    assert agent.set_parameters([Parameter('k_r', value=2.0)])[0].successful
    agent_harness.advance(0.2, before_step=agent_harness.feed)
    assert agent_harness.received['/uav1/cmd_vel'][-1].linear.x == pytest.approx(-10.0, abs=1e-9)


def test_random_target_moves_at_its_speed_and_broadcasts_state():
    harness = target_node_harness(target_motion='random', target_speed=3.0, seed=4)
    try:
        harness.record(Odometry, '/target/odom')
        harness.record(Float64MultiArray, '/target/state')
        harness.settle()
        harness.advance(6.0)
        states = [target_state_from_msg(m) for m in harness.received['/target/state']]
        assert len(states) == pytest.approx(6.0 / 0.05, abs=2)
        speeds = [np.linalg.norm(s.velocity[:2]) for s in states]
        assert max(speeds) <= 3.0 + 1e-9 and max(speeds) > 2.0  # tracks 3 m/s through a 1 s lag
        headings = {
            round(math.atan2(s.velocity[1], s.velocity[0]), 1)
            for s in states
            if np.linalg.norm(s.velocity) > 1
        }
        assert len(headings) > 3  # a new random heading every second
        assert np.linalg.norm(states[-1].position[:2]) > 1.0
        odom = harness.received['/target/odom'][-1]
        assert odom.header.frame_id == 'world' and odom.child_frame_id == 'target/base_link'
    finally:
        harness.close()


def test_a_target_node_run_without_a_namespace_publishes_target_odom():
    """``ros2 run ... target_node`` on a ground station: the recorder finds /target/odom."""
    from support.harness import _node_harness
    harness = _node_harness(TargetNode, '/', {'target_motion': 'static'})
    try:
        harness.record(Odometry, '/target/odom')
        harness.settle()
        harness.advance(0.5)
        assert harness.received['/target/odom']
    finally:
        harness.close()


def test_unreachable_waypoint_time_is_a_startup_error():
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        with pytest.raises(ValueError, match='cannot be reached'):
            TargetNode(context=context, parameter_overrides=[
                Parameter('target_motion', value='waypoints'),
                Parameter('target_speed', value=2.0),
                Parameter('waypoints', value=[0.0, 0.0, 0.0, 100.0, 0.0, 0.0]),
                Parameter('arrival_times', value=[0.0, 5.0])])
    finally:
        rclpy.try_shutdown(context=context)


def test_metrics_node_publishes_zero_errors_for_a_perfect_ring():
    harness = Harness(
        lambda ctx: MetricsNode(context=ctx, namespace='/swarm', parameter_overrides=SIM)
    )
    try:
        for name in ('E_r', 'E_gap', 'rho', 'G_max'):
            harness.record(Float64, f'/swarm/metrics/{name}')
        states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
        target = harness.publisher(Float64MultiArray, '/target/state')
        harness.settle()
        seq = iter(range(10**6))

        def ring(now):
            k = next(seq)
            for i in range(6):
                angle = 2 * math.pi * i / 6 + 0.3
                states.publish(
                    agent_state_to_msg(
                        AgentBroadcast(
                            agent_id=i + 1,
                            seq=k,
                            stamp_ns=seconds_to_ns(now),
                            position=np.array([5 + 20 * math.cos(angle), 20 * math.sin(angle), 0]),
                            velocity=np.zeros(3),
                            u=0.0,
                            u_ss=0.0,
                        )
                    )
                )
            target.publish(target_state_to_msg(seconds_to_ns(now), [5.0, 0.0, 0.0],
                                               [0.0, 0.0, 0.0]))

        harness.advance(0.5, before_step=ring)
        assert harness.received['/swarm/metrics/E_gap'][-1].data == pytest.approx(0.0, abs=1e-9)
        assert harness.received['/swarm/metrics/E_r'][-1].data == pytest.approx(0.0, abs=1e-9)
        assert harness.received['/swarm/metrics/rho'][-1].data == pytest.approx(0.0, abs=1e-9)
        assert harness.received['/swarm/metrics/G_max'][-1].data == pytest.approx(1.0, abs=1e-9)
        metrics, agents, _ = harness.nodes[0].series()
        assert set(agents[:, 0].astype(int)) == set(range(1, 7))
    finally:
        harness.close()


def two_agents_publisher(harness):
    """Return a ``before_step`` that publishes two agents 40 m apart round a target at rest."""
    states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
    target = harness.publisher(Float64MultiArray, '/target/state')
    harness.settle()

    def two_agents(now):
        for i in (1, 2):
            states.publish(agent_state_to_msg(AgentBroadcast(
                agent_id=i, seq=round(now * 100), stamp_ns=seconds_to_ns(now),
                position=np.array([20.0 * (3 - 2 * i), 0.0, 0.0]), velocity=np.zeros(3),
                u=0.0)))
        target.publish(target_state_to_msg(seconds_to_ns(now), [0.0, 0.0, 0.0],
                                           [0.0, 0.0, 0.0]))
    return two_agents


def test_metrics_node_streams_its_tables_during_the_run(tmp_path):
    """
    Check that metrics.csv and agents.csv grow on disk during the run.

    They are flushed within a second, so a SIGKILL or an OOM kill loses at most the last second;
    plots and summary come at the end.
    """
    out = tmp_path / 'metrics'
    harness = Harness(
        lambda ctx: MetricsNode(
            context=ctx,
            namespace='/swarm',
            parameter_overrides=SIM + [Parameter('output_dir', value=str(out))],
        )
    )
    try:
        two_agents = two_agents_publisher(harness)
        harness.advance(1.0, before_step=two_agents)

        def on_disk():  # a row written a flush period (1 s of wall time) after the last flushes
            harness.advance(0.05, before_step=two_agents)
            if not (out / 'metrics.csv').exists():
                return False
            lines = (out / 'metrics.csv').read_text().splitlines()[1:]
            return len(lines) >= 18 and float(lines[-1].split(',')[0]) > 0.9

        wait_for(on_disk, 'metrics.csv on disk past t = 0.9 s while the run goes on', period=0.1)
        rows = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1, ndmin=2)
        assert len(rows) >= 18 and rows[-1, 0] > 0.9  # 20 Hz for 1 s, on disk already
        agents = np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1, ndmin=2)
        assert set(agents[:, 0].astype(int)) == {1, 2}
        assert not (out / 'summary.json').exists()  # written on shutdown only
        trace = harness.nodes[0].series()[2]['agent 1']
        assert trace.shape[1] == 3
        saved = harness.nodes[0].save(str(tmp_path / 'saved'))
        assert saved['params'] == {'radius': 20.0, 'agents': ['agent 1', 'agent 2']}  # N = 2
    finally:
        harness.close()


@pytest.mark.parametrize('plots', [True, False])
def test_metrics_node_draws_its_plots_on_save_unless_told_not_to(tmp_path, plots):
    """swarm_sim --processes --no-plots sets ``plots`` false: the tables and summary.json only."""
    out = tmp_path / 'metrics'
    harness = Harness(lambda ctx: MetricsNode(
        context=ctx, namespace='/swarm', parameter_overrides=SIM + [
            Parameter('output_dir', value=str(out)), Parameter('plots', value=plots)]))
    try:
        two_agents = two_agents_publisher(harness)
        harness.advance(0.5, before_step=two_agents)
        summary = harness.nodes[0].save(str(out))
        assert summary['params']['agents'] == ['agent 1', 'agent 2']
        figures = sorted(p.name for p in out.iterdir() if p.suffix == '.png')
        names = {p.name for p in out.iterdir()}
        assert {'metrics.csv', 'agents.csv', 'summary.json'} <= names
        if plots:
            assert 'E_gap.png' in figures and 'trajectories.png' in figures
        else:
            assert figures == []
    finally:
        harness.close()


def test_metrics_node_writes_agent_rows_every_telemetry_period():
    """swarm_sim --telemetry-period reaches agents.csv as batch_sim's does; metrics stay."""
    harness = Harness(lambda ctx: MetricsNode(
        context=ctx, namespace='/swarm', parameter_overrides=SIM + [
            Parameter('metrics_period', value=0.05), Parameter('telemetry_period', value=0.25)]))
    try:
        states = harness.publisher(Float64MultiArray, '/swarm/agent_states')
        target = harness.publisher(Float64MultiArray, '/target/state')
        harness.settle()

        def one_agent(now):
            states.publish(agent_state_to_msg(AgentBroadcast(
                agent_id=1, seq=round(now * 100), stamp_ns=seconds_to_ns(now),
                position=np.array([20.0, 0.0, 0.0]), velocity=np.zeros(3), u=0.0)))
            target.publish(target_state_to_msg(seconds_to_ns(now), [0.0, 0.0, 0.0],
                                               [0.0, 0.0, 0.0]))

        harness.advance(2.0, before_step=one_agent)
        metrics, agents, _ = harness.nodes[0].series()
        assert np.diff(metrics[:, 0]) == pytest.approx(0.05)
        assert len(agents) >= 7 and np.diff(agents[:, 1]) == pytest.approx(0.25)
    finally:
        harness.close()


def test_target_follows_an_external_odometry_topic():
    harness = target_node_harness(follow_topic='/tracked/odom')
    try:
        harness.record(Float64MultiArray, '/target/state')
        tracked = harness.publisher(Odometry, '/tracked/odom')
        harness.settle()

        def moving_target(now):
            stamp = Time(nanoseconds=round(now * 1e9)).to_msg()
            # yaw pi/2: body-frame twist (2, 0) is world-frame (0, 2)
            tracked.publish(to_odometry([3.0, 2.0 * now, 1.0], [0.0, 2.0, 0.0], math.pi / 2, stamp,
                                        'world', 'tracked/base_link'))

        harness.advance(1.0, before_step=moving_target)
        last = target_state_from_msg(harness.received['/target/state'][-1])
        assert last.position[0] == pytest.approx(3.0) and last.position[2] == pytest.approx(1.0)
        assert 1.9 < last.position[1] <= 2.0
        np.testing.assert_allclose(last.velocity, [0.0, 2.0, 0.0], atol=1e-9)
    finally:
        harness.close()
