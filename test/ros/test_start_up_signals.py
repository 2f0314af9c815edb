"""
SIGINT/SIGTERM to a node executable while it starts: exit 0 and no traceback, in every phase.

Each node is signalled 0.1 s, 0.3 s and 1 s after it was started (inside its imports, rclpy's
start, its construction: which phase depends on the machine's load) and once it is in the
graph. The earliest moment is also held until the entry shim (``ros_support.entry``) is imported
(the interpreter says so with ``PYTHONPROFILEIMPORTTIME``): before that run the interpreter's
own start-up and the console script pip wrote (``import re``, ``import sys``), which no code of
the package can reach (Python's defaults apply there).
"""
import os
import signal
import time

import pytest
import yaml

from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import GraphProbe, Running, wait_for

# (executable, arguments, the node's full name in the graph)
NODES = [
    ('agent_node', ['--ros-args', '-r', '__ns:=/uav1'], '/uav1/agent'),
    ('target_node', [], '/target'),
    ('metrics_node', ['--ros-args', '-p', 'output_dir:={tmp}/out'], '/metrics'),
    ('mobility_node', [], '/mobility'),
    ('swarm_mobility_node', ['--ros-args', '-p', 'vehicle_names:=[uav1, uav2]'],
     '/swarm_mobility'),
    ('run_recorder', ['-o', '{tmp}/bag'], '/run_recorder'),
    ('fleet_node', ['--ros-args', '-p', 'fleet_file:={tmp}/fleet.yaml'], '/fleet'),
    ('live_view', ['--ros-args', '-p', 'port:=0'], '/live_view'),
    ('px4_bridge_node', ['--ros-args', '-r', '__ns:=/uav1'], '/uav1/px4_bridge'),
]
DELAYS = [0.1, 0.3, 1.0]


def shim_in_place(node: Running) -> bool:
    """Whether the entry shim's stop handler is in place: it was imported (or it exited)."""
    return node.process.poll() is not None or any(
        line.rstrip().endswith('| ros_support.entry') for line in node.err.splitlines())


def start(executable, args, tmp_path) -> Running:
    if executable == 'px4_bridge_node':
        pytest.importorskip('px4_msgs', reason='px4_bridge_node runs only with px4_msgs')
    (tmp_path / 'fleet.yaml').write_text(yaml.safe_dump({  # for fleet_node
        'geo_reference': [47.0, 8.0, 400.0],
        'vehicles': [{'name': 'uav1', 'agent_id': 1, 'host': 'c1'}]}))
    command = [find_executable(executable), *[a.replace('{tmp}', str(tmp_path)) for a in args]]
    return Running(command, cwd=tmp_path, env={**os.environ, 'PYTHONPROFILEIMPORTTIME': '1'})


def assert_clean_exit(node: Running, signum: int, when: str) -> None:
    code, _, err = node.stop(signum)
    assert code == 0, f'{when}: exit {code}: {err[-1200:]}'
    assert 'Traceback' not in err and 'KeyboardInterrupt' not in err, f'{when}: {err[-1200:]}'


@pytest.mark.parametrize('delay', DELAYS, ids=[f'{d:g}s' for d in DELAYS])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
@pytest.mark.parametrize('executable, args, name', NODES, ids=[n for n, _, _ in NODES])
def test_a_node_signalled_while_it_starts_exits_0(executable, args, name, signum, delay,
                                                  tmp_path):
    started = time.monotonic()
    with start(executable, args, tmp_path) as node:
        wait_for(lambda: time.monotonic() - started >= delay and shim_in_place(node),
                 f'{executable} past its entry shim, {delay:g} s after its start')
        assert_clean_exit(node, signum, f'{signal.Signals(signum).name} after {delay:g} s')


@pytest.mark.parametrize('executable, args, name', NODES, ids=[n for n, _, _ in NODES])
def test_a_node_signalled_once_up_exits_0(executable, args, name, tmp_path):
    with GraphProbe() as probe, start(executable, args, tmp_path) as node:
        probe.wait_for_node(name)
        assert_clean_exit(node, signal.SIGINT, 'SIGINT once up')
