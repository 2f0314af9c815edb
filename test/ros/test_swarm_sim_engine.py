"""
``swarm_sim --engine``: every agent in one node, as arrays, on the same lock-step and clock.

The run is ``batch_sim``'s, byte for byte; the observers' topics carry it under the node
graph's names, types and layouts, to a listener in another DDS participant and into a bag that
``analyze_run`` reads; a listener changes nothing; options the one node cannot honour are
refused in one line before anything starts.
"""
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from nav_msgs.msg import Odometry
import numpy as np
import pytest
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64, Float64MultiArray
import yaml

from soliton_encirclement_ros.analysis.recompute import metrics_from_bag
from soliton_encirclement_ros.analysis.stream import read_rows
from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.interface import (
    agent_state_from_msg, AGENT_STATES_TOPIC, METRICS_TOPIC_PREFIX, RELIABLE, swarm_qos,
    target_state_from_msg, TARGET_STATE_TOPIC)
from soliton_encirclement_ros.sim import batch_sim, runner
from soliton_encirclement_ros.sim.engine_graph import EngineGraph
from support.outsider import Outsider
from support.waits import wait_for

DEADLINE = 180.0  # wall s (a loaded machine is slow)
# Failures (presence broadcasts), a moving target and a cluster start: every part of a tick.
SCENARIO = ['--agents', '6', '--control-period', '0.05', '--seed', '3', '--target-motion',
            'random', '--failures-per-min', '6', '--placement', 'cluster']


def _tables(out):
    return [(out / name).read_bytes() for name in ('metrics.csv', 'agents.csv')]


@pytest.mark.parametrize('engine', ['auto', 'per-agent', 'batch'])
def test_the_run_is_batch_sims_byte_for_byte(tmp_path, engine):
    argv = [*SCENARIO, '--duration', '8', '--engine', engine, '--no-plots']
    assert runner.main([*argv, '--no-progress', '--out', str(tmp_path / 'ros')]) == 0
    assert batch_sim.main([*argv, '--out', str(tmp_path / 'batch')]) == 0
    ros, batch = _tables(tmp_path / 'ros'), _tables(tmp_path / 'batch')
    assert ros == batch
    metrics = read_rows(tmp_path / 'ros' / 'metrics.csv', 1 + len(METRIC_NAMES))
    assert metrics.shape[0] == 8 / 0.05 + 1 and np.all(np.isfinite(metrics[:, 1]))
    ros, batch = ({**yaml.safe_load((tmp_path / run / 'summary.json').read_text())['params']}
                  for run in ('ros', 'batch'))
    # auto: the compiled batch engine (numba installed, N <= 16), else vectorised, exact with
    # outages longer than the liveness timeouts (every sender's broadcast, a state or a
    # presence, replaces what a returning agent cached)
    fastest = 'batch' if compiled.available() else 'vectorised'
    assert ros['engine'] == batch['engine'] == (fastest if engine == 'auto' else engine)
    assert ros['mode'] == 'in-process'


class Listener(Outsider):
    """Hears every topic the engine graph publishes, from outside the graph."""

    def __init__(self, names):
        super().__init__()
        self.heard = {topic: [] for topic in (AGENT_STATES_TOPIC, TARGET_STATE_TOPIC, 'E_gap',
                                              '/diagnostics', '/clock', *names)}
        sub = self.node.create_subscription
        sub(Float64MultiArray, AGENT_STATES_TOPIC, self.heard[AGENT_STATES_TOPIC].append,
            swarm_qos(RELIABLE))
        sub(Float64MultiArray, TARGET_STATE_TOPIC, self.heard[TARGET_STATE_TOPIC].append,
            swarm_qos(RELIABLE, TARGET_STATE_TOPIC))
        sub(Float64, METRICS_TOPIC_PREFIX + 'E_gap', self.heard['E_gap'].append, 10)
        sub(DiagnosticArray, '/diagnostics', self.heard['/diagnostics'].append, 10)
        sub(Clock, '/clock', self.heard['/clock'].append, 10)
        for name in names:
            sub(Odometry, f'/{name}/odom', self.heard[name].append, 10)


def _graph(out):
    argv = [*SCENARIO, '--duration', '6', '--engine', 'auto']
    return EngineGraph(runner.plan_from_args(runner.parse_args(argv)), 'auto', out)


def test_a_listener_hears_the_run_on_the_graphs_topics_and_changes_nothing(tmp_path):
    alone = _graph(tmp_path / 'alone')
    try:
        alone.run(6.0)
    finally:
        alone.close()
    names = ['uav1', 'uav6']
    outsider = Listener(names)
    graph = _graph(tmp_path / 'heard')
    try:
        publishers = [graph._states.publisher, graph._diagnostics.publisher,
                      *(graph._odom.publishers[i] for i in (0, 5))]
        wait_for(lambda: all(p.get_subscription_count() for p in publishers),
                 'the listener to match', timeout=DEADLINE)
        for end in np.arange(0.25, 6.01, 0.25):  # heard as it goes: depth 10 on odometry
            graph.run(end)
            wait_for(lambda: outsider.spin() or len(outsider.heard['uav6']) >= round(end / 0.05),
                     'the odometry so far', timeout=DEADLINE)
        wait_for(lambda: outsider.spin() or all(outsider.heard.values())
                 and len(outsider.heard[AGENT_STATES_TOPIC]) == 6 * 121,
                 'every topic outside', timeout=DEADLINE)
    finally:
        graph.close()
        outsider.close()
    assert _tables(tmp_path / 'heard') == _tables(tmp_path / 'alone')
    states = [agent_state_from_msg(m) for m in outsider.heard[AGENT_STATES_TOPIC]]
    assert {s.agent_id for s in states} == set(range(1, 7))
    assert any(not s.member for s in states) and any(s.member for s in states)  # presences
    # One odometry per tick and vehicle, where that vehicle's broadcast of the tick says.
    by_stamp = {(s.agent_id, s.stamp_ns): s for s in states}
    for agent_id, name in ((1, 'uav1'), (6, 'uav6')):
        odoms = outsider.heard[name]
        assert len(odoms) == 121
        assert {(o.header.frame_id, o.child_frame_id) for o in odoms} == {
            ('world', f'{name}/base_link')}
        for odom in odoms:
            stamp = odom.header.stamp.sec * 10**9 + odom.header.stamp.nanosec
            p = odom.pose.pose.position
            np.testing.assert_array_equal(by_stamp[agent_id, stamp].position, [p.x, p.y, p.z])
    target = [target_state_from_msg(m) for m in outsider.heard[TARGET_STATE_TOPIC]]
    assert len(target) == 121 and np.ptp([t.position[0] for t in target]) > 0.5  # it moves
    arrays = outsider.heard['/diagnostics']
    assert len(arrays) == 7  # 1 Hz over 0..6 s
    assert all([s.name for s in a.status] == [f'/uav{i}/agent' for i in range(1, 7)]
               for a in arrays)
    levels = {s.level for a in arrays for s in a.status}
    assert levels == {DiagnosticStatus.OK, DiagnosticStatus.ERROR}  # a failure shows
    gaps = [m.data for m in outsider.heard['E_gap']]
    metrics = read_rows(tmp_path / 'heard' / 'metrics.csv', 1 + len(METRIC_NAMES))
    # The CSV's %.9g against the published float64.
    np.testing.assert_allclose(gaps, metrics[:, 1 + METRIC_NAMES.index('E_gap')], rtol=1e-8)


def test_a_recorded_run_is_analysed_from_its_bag(tmp_path):
    bag = tmp_path / 'bag'
    code = runner.main(['--agents', '4', '--control-period', '0.05', '--duration', '6',
                        '--seed', '2', '--engine', 'auto', '--no-plots', '--no-progress',
                        '--out', str(tmp_path / 'run'), '--record', str(bag)])
    assert code == 0
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    counts = {t['topic_metadata']['name']: t['message_count']
              for t in info['topics_with_message_count']}
    ticks = round(6 / 0.05) + 1
    assert counts[AGENT_STATES_TOPIC] == 4 * ticks
    assert counts['/uav1/odom'] == counts['/uav4/odom'] == counts['/target/odom'] == ticks
    assert counts['/swarm/markers'] > 0 and counts['/clock'] >= ticks
    ran = read_rows(tmp_path / 'run' / 'metrics.csv', 1 + len(METRIC_NAMES))
    # At the bag's times (ns; the CSV's 9 digits can fall a hair before a sample).
    recomputed = metrics_from_bag(bag, times=np.round(ran[:, 0] * 1e9) * 1e-9)
    # From the odometry the run measured at each tick: the same figures.
    np.testing.assert_allclose(recomputed[:, 1:], ran[:, 1:], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize('extra, rule', [
    (['--processes'], '--engine vectorised runs every agent in one node of this process: '
                      'drop --processes, or run the node graph (--engine nodes)'),
    (['--odom-rate', '100'], 'drop --odom-rate'),
    (['--params-file', 'config/swarm.yaml'], 'has no agent nodes to take --params-file'),
    (['--loss', '0.1'], '--engine: engine vectorised needs loss 0'),
])
def test_what_one_node_cannot_honour_is_refused_in_one_line(tmp_path, capsys, extra, rule):
    code = runner.main(['--agents', '4', '--duration', '1', '--engine', 'vectorised', *extra,
                        '--out', str(tmp_path / 'run')])
    err = capsys.readouterr().err
    assert code == 2 and rule in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / 'run').exists()


def test_simulated_faults_run_in_the_engines_and_the_node_graph_refuses_them(tmp_path, capfd):
    """A killed agent, a reset, a clock step: the engines' to simulate, not the nodes'."""
    code = runner.main(['--agents', '4', '--duration', '1', '--silent-failures', '1',
                        '--out', str(tmp_path / 'run')])
    err = capfd.readouterr().err
    assert code == 2 and 'simulated by the engines: add --engine auto' in err, err
    assert len(err.strip().splitlines()) == 1
    code = runner.main(['--agents', '4', '--duration', '2', '--control-period', '0.05',
                        '--silent-failures', '1', '--fault-time', '0.5', '--engine', 'auto',
                        '--no-plots', '--no-progress', '--out', str(tmp_path / 'engine')])
    assert code == 0, capfd.readouterr().err
    import json
    summary = json.loads((tmp_path / 'engine' / 'summary.json').read_text())
    assert summary['params']['engine'] == 'per-agent'  # not vectorisable with faults
    assert summary['params']['silent_failures'] == 1
