"""
Every executable from its first instant: ``--help`` answers, an early signal is a clean exit.

- ``--help`` prints the usage and, for a node, every parameter it declares (name, default,
  description), starts nothing and exits 0.
- A SIGINT or SIGTERM while the executable is still importing rclpy, matplotlib or rosbags
  ends it with one line, never a ``KeyboardInterrupt`` traceback: exit 0 for a node, 130
  ("interrupted") for a tool whose job it stops.
"""
from importlib.metadata import entry_points
import os
from pathlib import Path
import signal
import subprocess
import time

import pytest

from ros_support.entry import EXECUTABLES
from soliton_encirclement_ros.sim.executables import find_executable

NODES = ['mobility_node', 'swarm_mobility_node', 'agent_node', 'target_node', 'metrics_node',
         'run_recorder', 'px4_bridge_node', 'live_view']  # bridge: without px4_msgs too
TOOLS = ['swarm_sim', 'sweep_sim', 'batch_sim', 'analyze_run', 'fit_mobility']
DEADLINE_S = 120.0  # generous: the suite must pass on a busy machine


def run(executable, *args, cwd):
    try:
        return subprocess.run([find_executable(executable), *args], capture_output=True,
                              text=True, cwd=cwd, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f'{executable} {" ".join(args)} still running after {DEADLINE_S} s: it '
                    f'started instead of answering ({(expired.stderr or b"")[-300:]!r})')


def test_every_console_script_starts_under_the_early_stop_handler():
    ours = {ep.name: ep.value for ep in entry_points(group='console_scripts')
            if ep.value.startswith(('ros_support.', 'soliton_encirclement_ros.',
                                    'velocity_mobility_ros.'))}
    assert ours == {name: f'ros_support.entry:{name}' for name in EXECUTABLES}


@pytest.mark.parametrize('executable', NODES)
def test_a_node_answers_help_with_its_parameters(executable, tmp_path):
    import importlib
    result = run(executable, '--help', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f'usage: {executable} '), result.stdout[:200]
    specs = importlib.import_module(EXECUTABLES[executable]).PARAMETERS
    assert specs
    for spec in specs:
        assert f'\n  {spec.name} (' in result.stdout, spec.name
    for spec in specs[:3]:  # the description follows the name
        first_words = ' '.join(spec.description.split()[:3])
        assert first_words in result.stdout, spec.description
    assert 'default ' in result.stdout
    assert '[INFO]' not in result.stderr and 'invalid configuration' not in result.stderr
    assert not list(tmp_path.iterdir())  # started nothing (run_recorder: no bag)


def test_a_help_names_the_defaults_and_ranges(tmp_path):
    out = run('mobility_node', '--help', cwd=tmp_path).stdout
    assert '  cmd_timeout (double, default 0.5, >= 0, <= 3600)' in out
    assert '  initial_position (double array, default [0.0, 0.0, 0.0]' in out
    assert 'one simulated vehicle driven by cmd_vel' in out


@pytest.mark.parametrize('executable', TOOLS)
def test_a_tool_answers_help(executable, tmp_path):
    result = run(executable, '--help', cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('usage: '), result.stdout[:200]


# --- a signal during the imports ------------------------------------------------------------
EARLY = [  # (executable, arguments, exit status)
    ('metrics_node', ['--ros-args', '-p', 'output_dir:={tmp}/out'], 0),
    ('run_recorder', ['-o', '{tmp}/bag'], 0),
    ('mobility_node', [], 0),
    ('agent_node', ['--ros-args', '-r', '__ns:=/uav1'], 0),
    # The tools whose job was interrupted exit 130 ("interrupted"), as when stopped later.
    ('swarm_sim', ['--duration', '5', '--out', '{tmp}/out'], 130),
    ('sweep_sim', ['{tmp}/spec.yaml', '--out', '{tmp}/out'], 130),
    ('batch_sim', ['--duration', '5', '--out', '{tmp}/out'], 130),
    ('analyze_run', ['{tmp}/bag', '--out', '{tmp}/out'], 130),
    ('fit_mobility', ['{tmp}/bag', '--out', '{tmp}/out'], 130),
]
# Extension modules whose mapping shows that the heavy imports are under way.
HEAVY = ('_multiarray_umath', '_rclpy_pybind11')


def wait_until_importing(process):
    """
    Wait until numpy's or rclpy's extension is mapped into ``process``.

    Its heavy imports are then under way. A signal sent before the interpreter has started
    would meet the kernel's default action (no program can handle it); this is the first
    moment the fix is about.
    """
    maps = Path(f'/proc/{process.pid}/maps')
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if any(name in maps.read_text() for name in HEAVY):
                return
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
        time.sleep(0.001)
    pytest.fail('the process never imported numpy or rclpy')


@pytest.mark.skipif(not os.path.exists('/proc/self/maps'), reason='needs /proc')
@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
@pytest.mark.parametrize('executable, args, status', EARLY, ids=[e for e, _, _ in EARLY])
def test_a_signal_while_importing_is_a_clean_exit(executable, args, status, signum, tmp_path):
    command = [find_executable(executable), *[a.replace('{tmp}', str(tmp_path)) for a in args]]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    try:
        wait_until_importing(process)
        process.send_signal(signum)
        out, err = process.communicate(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert 'Traceback' not in err and 'KeyboardInterrupt' not in err, err
    assert process.returncode == status, err
    assert f'{executable}: stopped while starting' in err, err
    assert not list(tmp_path.iterdir())  # nothing was started, so nothing was written


def test_help_is_read_outside_the_ros_arguments_only():
    from ros_support.spin import help_requested
    assert help_requested(['x', '--help']) and help_requested(['x', '-h', '--ros-args'])
    assert help_requested(['x', '--ros-args', '-p', 'a:=1', '--', '-h'])
    assert not help_requested(['x', '--ros-args', '-p', 'a:=1', '--help'])
    assert not help_requested(['--help'])  # argv[0] is the program
