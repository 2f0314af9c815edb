"""
Every executable as a user runs it.

SIGINT/SIGTERM end it with exit 0, no traceback and no FATAL line; swarm_sim keeps its outputs
through a second Ctrl-C; --processes never leaves a node behind when one dies; bad input is one
line.
"""
import os
from pathlib import Path
import signal
import subprocess
import time

import pytest

from soliton_encirclement_ros.sim.executables import find_executable

NODES = [
    ('agent_node', ['--ros-args', '-r', '__ns:=/uav1']),
    ('target_node', []),
    ('metrics_node', []),
    ('mobility_node', []),
    ('swarm_mobility_node', ['--ros-args', '-p', 'vehicle_names:=[uav1, uav2]']),
    ('run_recorder', ['-o', '{tmp}/bag']),
]
UNCLEAN = ('Traceback', 'FATAL', 'Exception in', 'RuntimeError', 'RCLError')


def start(executable, args, tmp_path):
    command = [find_executable(executable), *[a.replace('{tmp}', str(tmp_path)) for a in args]]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)


def stop(process, signum, after):
    time.sleep(after)
    process.send_signal(signum)
    try:
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f'did not stop within 30 s of {signal.Signals(signum).name}: {err[-500:]}')
    return out, err


@pytest.mark.parametrize('executable, args', NODES, ids=[n for n, _ in NODES])
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_every_node_stops_cleanly_on_a_signal(executable, args, signum, tmp_path):
    process = start(executable, args, tmp_path)
    _, err = stop(process, signum, after=2.5)
    assert process.returncode == 0, err[-800:]
    assert not [line for line in err.splitlines() if any(w in line for w in UNCLEAN)], err[-800:]


def test_metrics_node_writes_its_outputs_on_sigterm(tmp_path):
    process = start('metrics_node', ['--ros-args', '-p', f'output_dir:={tmp_path}/out'], tmp_path)
    _, err = stop(process, signal.SIGTERM, after=2.5)
    assert process.returncode == 0 and 'Traceback' not in err, err[-800:]


def swarm_sim(tmp_path, *args):
    return start('swarm_sim', ['--no-progress', '--control-period', '0.05', '--out',
                               str(tmp_path / 'out'), *args], tmp_path)


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_swarm_sim_writes_what_it_gathered_on_a_signal(signum, tmp_path):
    process = swarm_sim(tmp_path, '--agents', '3', '--duration', '300')
    out, err = stop(process, signum, after=8.0)
    assert process.returncode == 0, err[-800:]
    assert not [line for line in err.splitlines() if any(w in line for w in UNCLEAN)], err[-800:]
    assert 'interrupted, writing what was gathered' in err
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10
    assert 'real-time factor' in out


def test_a_second_ctrl_c_while_writing_loses_nothing(tmp_path):
    process = swarm_sim(tmp_path, '--agents', '10', '--duration', '300')
    time.sleep(8.0)
    process.send_signal(signal.SIGINT)
    for _ in range(5):  # an impatient user while the plots are being written
        time.sleep(0.3)
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err[-800:]
    assert 'writing outputs, please wait' in err
    names = {p.name for p in (tmp_path / 'out').iterdir()}
    assert {'metrics.csv', 'agents.csv', 'summary.json', 'dashboard.png'} <= names


def test_an_unusable_out_is_one_line_before_any_simulation(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    for program in ('swarm_sim', 'batch_sim'):
        started = time.monotonic()
        result = subprocess.run([find_executable(program), '--out', str(blocker / 'run'),
                                 '--duration', '600'], capture_output=True, text=True,
                                timeout=120)
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and '--out' in lines[0] and 'not a directory' in lines[0], lines
        assert time.monotonic() - started < 30  # refused before a 600 s simulation


def running_with(marker):
    """Pids of processes whose command line contains ``marker``."""
    pids = []
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / 'cmdline').read_bytes().decode(errors='replace'):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def test_processes_mode_stops_every_node_when_one_dies(tmp_path):
    """
    A node killed mid-run (as the OOM killer would).

    The runner stops every other node, keeps the metrics gathered so far and exits 1 naming the
    node.
    """
    marker = write_marker(tmp_path)
    process = swarm_sim(tmp_path, '--processes', '--agents', '2', '--duration', '300',
                        '--params-file', str(marker))
    deadline = time.monotonic() + 60
    target = []
    while not target and time.monotonic() < deadline:
        target = [pid for pid in running_with(str(marker)) if '__node:=target' in
                  Path(f'/proc/{pid}/cmdline').read_bytes().decode(errors='replace')]
        time.sleep(0.2)
    assert target, 'the target node never started'
    time.sleep(10.0)  # the run is under way, metrics are being written
    os.kill(target[0], signal.SIGKILL)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 1, err[-800:]
    last = err.strip().splitlines()[-1]
    assert last.startswith('swarm_sim: error: /target/target exited with code -9'), err[-800:]
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10  # outputs kept
    time.sleep(0.5)
    assert running_with(str(marker)) == [], 'nodes left running after swarm_sim exited'


def test_processes_mode_terminal_ctrl_c_keeps_the_outputs(tmp_path):
    process = swarm_sim(tmp_path, '--processes', '--agents', '2', '--duration', '300',
                        '--params-file', str(write_marker(tmp_path)))
    deadline = time.monotonic() + 60
    while not running_with(str(tmp_path / 'marker.yaml')) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(10.0)
    # A terminal Ctrl-C goes to the whole foreground process group: here, the runner alone
    # (its nodes have groups of their own and are stopped by it, in order).
    os.kill(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0, err[-800:]
    assert (tmp_path / 'out' / 'metrics.csv').read_text().count('\n') > 10
    time.sleep(0.5)
    assert running_with(str(tmp_path / 'marker.yaml')) == []


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
        timeout=60,
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and 'not valid YAML (line' in lines[0], lines


def test_an_unknown_parameter_is_named_with_the_closest_one(tmp_path):
    process = start('mobility_node', ['--ros-args', '-p', 'max_acc_xyz:=3.0'], tmp_path)
    _, err = stop(process, signal.SIGINT, after=2.5)
    assert process.returncode == 0
    assert err.count("parameter 'max_acc_xyz' is not a parameter of this node and is ignored; "
                     'did you mean max_acc_xy?') == 1, err


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
