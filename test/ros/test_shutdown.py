"""
Every executable as a user runs it.

SIGINT/SIGTERM end it with exit 0, no traceback and no FATAL line; swarm_sim keeps its outputs
through a second Ctrl-C; --processes never leaves a node behind when one dies; bad input is one
line. Every signal is sent once a condition holds (the node is in the graph, metrics are
flowing, a line was printed), never after a fixed sleep: on a loaded machine the programs are
slower, not different.
"""
import os
from pathlib import Path
import re
import signal
import subprocess
import sys

import pytest
from std_msgs.msg import Float64

from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.interface import METRICS_TOPIC_PREFIX
from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import DEADLINE, GraphProbe, Running, wait_for

# (executable, arguments, the node's full name in the graph)
NODES = [
    ('agent_node', ['--ros-args', '-r', '__ns:=/uav1'], '/uav1/agent'),
    ('target_node', [], '/target'),
    ('metrics_node', [], '/metrics'),
    ('mobility_node', [], '/mobility'),
    ('swarm_mobility_node', ['--ros-args', '-p', 'vehicle_names:=[uav1, uav2]'],
     '/swarm_mobility'),
    ('run_recorder', ['-o', '{tmp}/bag'], '/run_recorder'),
]
UNCLEAN = ('Traceback', 'FATAL', 'Exception in', 'RuntimeError', 'RCLError')
METRIC_TOPIC = METRICS_TOPIC_PREFIX + METRIC_NAMES[0]


def start(executable, args, tmp_path):
    command = [find_executable(executable), *[a.replace('{tmp}', str(tmp_path)) for a in args]]
    return Running(command, cwd=tmp_path)


@pytest.fixture
def probe():
    with GraphProbe() as graph:
        yield graph


def unclean(err):
    return [line for line in err.splitlines() if any(w in line for w in UNCLEAN)]


@pytest.mark.parametrize('executable, args, name', NODES, ids=[n for n, _, _ in NODES])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_every_node_stops_cleanly_on_a_signal(executable, args, name, signum, tmp_path, probe):
    with start(executable, args, tmp_path) as node:
        probe.wait_for_node(name)
        code, _, err = node.stop(signum)
    assert code == 0, err[-800:]
    assert not unclean(err), err[-800:]


def test_metrics_node_writes_its_outputs_on_sigterm(tmp_path, probe):
    with start('metrics_node', ['--ros-args', '-p', f'output_dir:={tmp_path}/out'],
               tmp_path) as node:
        probe.wait_for_node('/metrics')
        code, _, err = node.stop(signal.SIGTERM)
    assert code == 0 and 'Traceback' not in err, err[-800:]
    assert (tmp_path / 'out' / 'metrics.csv').exists(), sorted(os.listdir(tmp_path))


def swarm_sim(tmp_path, *args):
    return start('swarm_sim', ['--no-progress', '--control-period', '0.05', '--out',
                               str(tmp_path / 'out'), *args], tmp_path)


def wait_for_metrics(probe, count=30):
    """Wait until ``count`` metrics have been published: the run is under way."""
    probe.collect(Float64, METRIC_TOPIC)
    probe.wait_for_messages(METRIC_TOPIC, count)


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_swarm_sim_writes_what_it_gathered_on_a_signal(signum, tmp_path, probe):
    with swarm_sim(tmp_path, '--agents', '3', '--duration', '300') as sim:
        wait_for_metrics(probe)
        code, out, err = sim.stop(signum)
    assert code == 0, err[-800:]
    assert not unclean(err), err[-800:]
    assert re.search(r'interrupted at t=[0-9.]+ s of 300 s, writing what was gathered', err), err
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10
    assert 'real-time factor' in out


def test_a_second_ctrl_c_while_writing_loses_nothing(tmp_path, probe):
    with swarm_sim(tmp_path, '--agents', '10', '--duration', '300') as sim:
        wait_for_metrics(probe)
        sim.send_signal(signal.SIGINT)
        sim.wait_for_line('writing what was gathered')
        sim.send_signal(signal.SIGINT)  # an impatient user while the outputs are being written
        sim.wait_for_line('writing outputs, please wait')
        sim.send_signal(signal.SIGINT)  # and again
        code, _, err = sim.wait()
    assert code == 0, err[-800:]
    assert not unclean(err), err[-800:]
    names = {p.name for p in (tmp_path / 'out').iterdir()}
    assert {'metrics.csv', 'agents.csv', 'summary.json', 'dashboard.png'} <= names


def test_an_unusable_out_is_one_line_before_any_simulation(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    for program in ('swarm_sim', 'batch_sim'):
        result = subprocess.run([find_executable(program), '--out', str(blocker / 'run'),
                                 '--duration', '600'], capture_output=True, text=True,
                                timeout=DEADLINE)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and '--out' in lines[0] and 'not a directory' in lines[0], lines
        assert result.stdout == ''  # refused before a 600 s simulation: no summary


def running_with(marker):
    """Pids of live (not zombie) processes whose command line contains ``marker``."""
    pids = []
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                if (marker in (entry / 'cmdline').read_bytes().decode(errors='replace')
                        and (entry / 'stat').read_text().rsplit(')', 1)[1].split()[0] != 'Z'):
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                pass
    return pids


def test_processes_mode_stops_every_node_when_one_dies(tmp_path, probe):
    """
    A node killed mid-run (as the OOM killer would).

    The runner stops every other node, keeps the metrics gathered so far and exits 1 naming the
    node.
    """
    marker = str(write_marker(tmp_path))
    with swarm_sim(tmp_path, '--processes', '--agents', '2', '--duration', '300',
                   '--params-file', marker) as sim:
        probe.wait_for_node('/target/target')
        target = wait_for(lambda: [pid for pid in running_with(marker) if '__node:=target' in
                                   Path(f'/proc/{pid}/cmdline').read_bytes().decode('utf-8',
                                                                                    'replace')],
                          'the target node process')
        wait_for_metrics(probe)  # the run is under way, metrics are being written
        os.kill(target[0], signal.SIGKILL)
        code, _, err = sim.wait()
    assert code == 1, err[-800:]
    last = err.strip().splitlines()[-1]
    assert last.startswith('swarm_sim: error: /target/target exited with code -9'), err[-800:]
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10  # outputs kept
    assert running_with(marker) == [], 'nodes left running after swarm_sim exited'


def test_processes_mode_terminal_ctrl_c_keeps_the_outputs(tmp_path, probe):
    marker = str(write_marker(tmp_path))
    with swarm_sim(tmp_path, '--processes', '--agents', '2', '--duration', '300',
                   '--params-file', marker) as sim:
        wait_for_metrics(probe)
        # A terminal Ctrl-C goes to the whole foreground process group: here, the runner alone
        # (its nodes have groups of their own and are stopped by it, in order).
        code, _, err = sim.stop(signal.SIGINT)
    assert code == 0, err[-800:]
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10
    assert running_with(marker) == [], 'nodes left running after swarm_sim exited'


def write_marker(tmp_path):
    marker = tmp_path / 'marker.yaml'
    marker.write_text('/**:\n  ros__parameters: {}\n')
    return marker


def test_a_malformed_params_file_is_one_line_naming_the_file(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**:\n  ros__parameters:\n    k_r: [1, 2\n')
    result = subprocess.run(
        [find_executable('agent_node'), '--ros-args', '-r', '__ns:=/uav1',
         '--params-file', str(bad)],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and 'not valid YAML (line' in lines[0], lines


def test_an_unknown_parameter_is_named_with_the_closest_one(tmp_path):
    with start('mobility_node', ['--ros-args', '-p', 'max_acc_xyz:=3.0'], tmp_path) as node:
        node.wait_for_line('unknown parameter max_acc_xyz')
        code, _, err = node.stop(signal.SIGINT)
    assert code == 0, err[-800:]
    assert err.count('unknown parameter max_acc_xyz (given to /mobility; did you mean '
                     'max_acc_xy?): not a parameter of this node, ignored') == 1, err


def test_params_files_are_checked_for_syntax_only(tmp_path):
    from ros_support.spin import params_file_problem
    tagged = tmp_path / 'launch_params.yaml'  # what launch_ros writes; rcl accepts it
    tagged.write_text('/**:\n  ros__parameters:\n    names: !!python/tuple [a, b]\n')
    assert params_file_problem(['x', '--params-file', str(tagged)]) is None
    broken = tmp_path / 'broken.yaml'
    broken.write_text('/**: {ros__parameters: {k_r: [1, 2}\n')
    assert 'not valid YAML (line 1' in params_file_problem(['--params-file', str(broken)])
    assert 'cannot read params file' in params_file_problem(
        ['--params-file', str(tmp_path / 'missing.yaml')]
    )


HUNG_NODE = """
import ctypes, sys, threading
from rclpy.node import Node
import ros_support.spin as spin
spin.TEARDOWN_LIMIT_S = 1.0

class Hung(Node):
    def __init__(self):
        super().__init__('hung')
        print('started', file=sys.stderr, flush=True)

    def destroy_node(self):
        HANG
spin.spin_node(Hung, ['hung'])
"""
# An rmw call that never returns, and one that never returns while it holds the GIL (waiting on
# a middleware lock): a mutex locked twice through PyDLL, which keeps the GIL.
RELEASING = 'threading.Event().wait()'
HOLDING = ('libc, mutex = ctypes.PyDLL(None), ctypes.create_string_buffer(64); '
           'libc.pthread_mutex_lock(mutex); libc.pthread_mutex_lock(mutex)')


def stop_hung_node(tmp_path, hang: str, signum: int) -> tuple[int, str]:
    """Start a node whose destroy_node runs ``hang``, signal it; (exit code, stderr)."""
    from support.waits import Running
    script = tmp_path / 'hung.py'
    script.write_text(HUNG_NODE.replace('HANG', hang))
    with Running([sys.executable, str(script)]) as proc:
        proc.wait_for_line('started')
        proc.send_signal(signum)
        code, _, err = proc.wait()
    return code, err


def test_a_node_whose_teardown_hangs_still_stops_on_sigterm(tmp_path):
    """A destroy_node that never returns: one line, exit 0, not a process deaf to SIGTERM."""
    code, err = stop_hung_node(tmp_path, RELEASING, signal.SIGTERM)
    assert code == 0, err
    assert ('Hung: destroy_node did not return within 1 s of the stop request; exiting without '
            'it') in err


def test_a_node_whose_teardown_hangs_holding_the_gil_still_ends_with_its_stacks(tmp_path):
    """No Python timer can run then: faulthandler's watchdog dumps the stacks and exits 1."""
    code, err = stop_hung_node(tmp_path, HOLDING, signal.SIGINT)
    assert code == 1, err
    assert 'Timeout (0:00:02)!' in err and 'in destroy_node' in err, err
