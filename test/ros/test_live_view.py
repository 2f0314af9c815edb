"""
The live view, headless: ``swarm_sim --foxglove`` serves the run to a Foxglove client.

A Python websocket client speaking ``foxglove.sdk.v1`` (``live.client``) subscribes and gets
odometry, markers and metrics stamped in sim time; a client offering only the older
``foxglove.websocket.v1`` is refused with HTTP 400; and the view does not change the run: its
metrics.csv is byte-identical to the one of the same run without the view.
"""
import asyncio
import importlib.util
import json
import socket
import subprocess
import sys
import time

import pytest

from support.waits import DEADLINE, wait_for

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec('foxglove') and importlib.util.find_spec('websockets')),
    reason='the live extra (foxglove-sdk, websockets) is not installed')

RUN = ['--agents', '4', '--control-period', '0.05', '--duration', '8', '--real-time-factor',
       '1', '--no-progress']
DURATION_NS = 8_000_000_000
WANTED = ('/uav1/odom', '/target/odom', '/swarm/markers', '/swarm/metrics/E_gap',
          '/swarm/metrics/d_min', '/uav2/agent/status', '/diagnostics')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def swarm_sim(*args):
    return subprocess.Popen([sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', *RUN,
                             *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_port(port: int, process) -> None:
    def serving():
        assert process.poll() is None, f'swarm_sim exited ({process.poll()}) before serving'
        try:
            socket.create_connection(('127.0.0.1', port), timeout=1.0).close()
        except OSError:
            return False
        return True
    wait_for(serving, f'the live view on port {port}')


def old_client_status(port: int) -> int:
    import websockets

    async def connect():
        try:
            async with websockets.connect(f'ws://127.0.0.1:{port}',
                                          subprotocols=['foxglove.websocket.v1']):
                return 101
        except websockets.InvalidStatus as refused:
            return refused.response.status_code
    return asyncio.run(connect())


def viewed_run(out, port: int, wanted, *args, before=lambda: True):
    """
    Run swarm_sim with the live view on ``port`` until a client got 2 of each ``wanted`` topic.

    ``before()`` (true when it holds) is asked once the view serves. Returns what the client
    received and swarm_sim's stderr, after it exited 0.
    """
    from soliton_encirclement_ros.live.client import receive
    viewed = swarm_sim('--out', str(out), '--foxglove', str(port), *args)
    try:
        wait_for_port(port, viewed)
        assert before()
        received = asyncio.run(receive(
            f'ws://127.0.0.1:{port}', DEADLINE,
            until=lambda r: all(len(r.messages.get(t, ())) >= 2 for t in wanted)))
        _, err = viewed.communicate(timeout=DEADLINE)
    finally:
        viewed.kill()
        viewed.wait()
    assert viewed.returncode == 0, err
    return received, err


def test_swarm_sim_serves_the_run_in_sim_time_and_the_results_do_not_change(tmp_path):
    from soliton_encirclement_ros.live.client import plot_frame
    port = free_port()
    received, err = viewed_run(tmp_path / 'viewed', port, WANTED,
                               before=lambda: old_client_status(port) == 400)
    assert f'swarm_sim: live view on ws://127.0.0.1:{port}' in err
    assert received.server_info['capabilities'] == ['time', 'services']
    for topic in WANTED:
        assert len(received.messages.get(topic, ())) >= 2, (topic, sorted(received.messages))
    assert received.channels['/uav1/odom']['schemaName'] == 'nav_msgs/msg/Odometry'
    assert received.channels['/swarm/markers']['encoding'] == 'cdr'
    # Sim time: log times within the 8 s run (wall time would be ~1.8e18 ns), the messages'
    # own stamps equal to them, the server's time too.
    for topic, messages in received.messages.items():
        assert all(0 <= t <= DURATION_NS for t, _ in messages), topic
    for t, odom in received.messages['/uav1/odom']:
        stamp = odom.header.stamp.sec * 10**9 + odom.header.stamp.nanosec
        assert abs(stamp - t) <= 20_000_000 and odom.child_frame_id == 'uav1/base_link'
    markers = received.messages['/swarm/markers'][-1][1].markers
    assert {m.ns for m in markers} >= {'agents', 'target', 'desired_circle'}
    assert sum(m.ns == 'agents' for m in markers) == 4
    assert all(0 <= m.data < 1.0 for _, m in received.messages['/swarm/metrics/E_gap'])
    assert received.server_times and max(received.server_times) <= DURATION_NS
    assert received.messages['/uav2/agent/status'][-1][1].name == '/uav2/agent'
    plot_frame(received, tmp_path / 'frame.png')
    assert (tmp_path / 'frame.png').stat().st_size > 10_000

    plain = swarm_sim('--out', str(tmp_path / 'plain'))
    try:
        _, err = plain.communicate(timeout=DEADLINE)
    finally:
        plain.kill()
        plain.wait()
    assert plain.returncode == 0, err
    viewed_csv = (tmp_path / 'viewed' / 'metrics.csv').read_bytes()
    assert len(viewed_csv.splitlines()) > 100
    assert viewed_csv == (tmp_path / 'plain' / 'metrics.csv').read_bytes()
    assert json.loads((tmp_path / 'viewed' / 'summary.json').read_text())['final'] == (
        json.loads((tmp_path / 'plain' / 'summary.json').read_text())['final'])


def test_swarm_sim_engine_serves_its_one_node_graph_in_sim_time(tmp_path):
    """``--engine``: the same topics from the one node, built because the view listens."""
    port = free_port()
    wanted = [topic for topic in WANTED if not topic.endswith('/agent/status')]
    received, _ = viewed_run(tmp_path / 'viewed', port, wanted, '--engine', 'auto')
    for topic in wanted:
        assert len(received.messages.get(topic, ())) >= 2, (topic, sorted(received.messages))
        assert all(0 <= t <= DURATION_NS for t, _ in received.messages[topic]), topic
    for t, odom in received.messages['/uav1/odom']:
        stamp = odom.header.stamp.sec * 10**9 + odom.header.stamp.nanosec
        assert abs(stamp - t) <= 20_000_000 and odom.child_frame_id == 'uav1/base_link'
    markers = received.messages['/swarm/markers'][-1][1].markers
    assert sum(m.ns == 'agents' for m in markers) == 4
    statuses = received.messages['/diagnostics'][-1][1].status
    assert [s.name for s in statuses] == [f'/uav{i}/agent' for i in range(1, 5)]


def test_a_port_in_use_is_one_line_and_nothing_runs(tmp_path):
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', *RUN, '--out',
             str(tmp_path / 'run'), '--foxglove', str(port)],
            capture_output=True, text=True, timeout=DEADLINE)
    assert result.returncode == 2
    assert f'swarm_sim: error: cannot start the Foxglove server on 127.0.0.1:{port}' in (
        result.stderr)
    assert 'Traceback' not in result.stderr
    assert not (tmp_path / 'run').exists()


def test_the_live_view_node_serves_a_live_graph_with_its_clock():
    """live_view (ros2 launch, flights): what a graph publishes reaches the client."""
    import threading

    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64

    from soliton_encirclement_ros.live.client import receive
    from soliton_encirclement_ros.nodes.live_view_node import LiveViewNode
    port = free_port()
    rclpy.init()
    executor = SingleThreadedExecutor()
    view = LiveViewNode(parameter_overrides=[Parameter('port', value=port),
                                             Parameter('discovery_period', value=0.1)])
    graph = rclpy.create_node('graph')
    metric = graph.create_publisher(Float64, '/swarm/metrics/E_r', 10)
    diagnostics = graph.create_publisher(DiagnosticArray, '/diagnostics', 10)
    ignored = graph.create_publisher(Float64, '/uav1/battery', 10)
    for node in (view, graph):
        executor.add_node(node)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)

    def publish():
        sent = [0]
        while not stop.is_set():
            sent[0] += 1
            metric.publish(Float64(data=0.5))
            ignored.publish(Float64(data=1.0))
            diagnostics.publish(DiagnosticArray(status=[DiagnosticStatus(
                name='/uav1/agent', message='ok')]))
            stop.wait(0.05)

    threads = [threading.Thread(target=spin), threading.Thread(target=publish)]
    for thread in threads:
        thread.start()
    try:
        wanted = ('/swarm/metrics/E_r', '/diagnostics')
        received = asyncio.run(receive(
            f'ws://127.0.0.1:{port}', DEADLINE,
            until=lambda r: all(len(r.messages.get(t, ())) >= 3 for t in wanted)))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        executor.shutdown()
        view.destroy_node()
        graph.destroy_node()
        rclpy.shutdown()
    assert [m.data for _, m in received.messages['/swarm/metrics/E_r'][:3]] == [0.5] * 3
    assert received.messages['/diagnostics'][-1][1].status[0].name == '/uav1/agent'
    assert '/uav1/battery' not in received.channels  # not a swarm topic
    now = time.time_ns()  # no use_sim_time: the node's clock is the system clock
    assert all(abs(t - now) < 60e9 for t, _ in received.messages['/swarm/metrics/E_r'])
    assert received.server_times and abs(received.server_times[-1] - now) < 60e9
