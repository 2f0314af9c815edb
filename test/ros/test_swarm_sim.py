"""
swarm_sim end to end with real rclpy.

The ring forms, runs are reproducible, bad starts fail cleanly.

Thresholds come from the ROS-free batch simulator on the same scenario (5 agents, seed 1,
control period 0.05 s, 25 s; the default gains, k_e_tau 50 and k_omega_own 0.4): final E_gap
3e-6, E_r 6e-9, E_gap settles (< 0.05 for good) at 6.0 s and E_r (< 0.01) at 6.25 s, run-mean
E_gap 0.078. The ROS graph delivers messages one tick later than the batch model only through
odometry, so it must land close to those numbers (it gives 6.15 s, 6.40 s and 0.0789).
"""

import json
import math
import os
from pathlib import Path
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from soliton_encirclement_ros.analysis.stream import last_row
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.sim import runner
from support.waits import wait_for


def run(tmp_path, *args, name='run'):
    out = tmp_path / name
    # 20 Hz control (the scenario default is 100 Hz) keeps the message count down.
    code = runner.main(['--no-progress', '--control-period', '0.05', '--out', str(out), *args])
    return code, out


@pytest.fixture(scope='module')
def ring(tmp_path_factory):
    code, out = run(
        tmp_path_factory.mktemp('ring'), '--agents', '5', '--duration', '25', '--seed', '1'
    )
    assert code == 0
    return out


def test_the_ros_graph_forms_the_ring_like_the_batch_simulator(ring):
    summary = strict_json(ring / 'summary.json')
    assert summary['final']['E_gap'] < 0.01
    assert summary['final']['E_r'] < 0.001
    assert abs(summary['final']['G_max'] - 1.0) < 0.02
    assert summary['settle_time']['E_gap'] is not None and summary['settle_time']['E_gap'] < 9.0
    assert summary['settle_time']['E_r'] is not None and summary['settle_time']['E_r'] < 9.0
    assert abs(summary['mean']['E_gap'] - 0.078) < 0.02
    assert summary['real_time_factor'] > 0
    assert summary['params']['agents'] == 5 and summary['params']['seed'] == 1


def test_outputs_are_written(ring):
    for name in (
        'metrics.csv',
        'agents.csv',
        'summary.json',
        'trajectories.png',
        'E_gap.png',
        'E_r.png',
    ):
        assert (ring / name).stat().st_size > 0, name
    header = (ring / 'metrics.csv').read_text().splitlines()[0]
    assert header == 'timestamp,E_r,E_vr,rho,G_max,E_gap,d_min'
    metrics = np.loadtxt(ring / 'metrics.csv', delimiter=',', skiprows=1)
    assert metrics[-1, 0] == pytest.approx(25.0, abs=0.06)
    assert np.all(np.diff(metrics[:, 0]) > 0)
    agents = np.loadtxt(ring / 'agents.csv', delimiter=',', skiprows=1)
    assert set(agents[:, 0].astype(int)) == {1, 2, 3, 4, 5}


def test_same_seed_gives_identical_metrics(tmp_path):
    # The figures of the first run only: drawing them is the dearest part of a short run, and
    # the metrics must not depend on it.
    outputs = []
    for name, plots in (('a', []), ('b', ['--no-plots'])):
        code, out = run(tmp_path, '--agents', '3', '--duration', '4', '--seed', '5', *plots,
                        name=name)
        assert code == 0
        outputs.append((out / 'metrics.csv').read_text())
    assert outputs[0] == outputs[1]
    code, out = run(tmp_path, '--agents', '3', '--duration', '4', '--seed', '6', '--no-plots',
                    name='c')
    assert (out / 'metrics.csv').read_text() != outputs[0]


def test_every_timer_fires_once_per_step_at_the_mobility_rate(tmp_path):
    """
    At control_period = sim_dt (0.01 s) every metrics row sits on its own 10 ms step.

    rclpy's EventsExecutor can dispatch a timer twice at one instant and skip its next slot
    (the metrics tick at 0.02 s twice, none at 0.03 s; the mobility step likewise): runs of one
    seed then differed. The lock-step runs a timer once per instant; three runs of one seed
    must be identical (figures drawn by the first only: they are most of a short run's cost).
    """
    outputs = []
    for name, plots in (('a', []), ('b', ['--no-plots']), ('c', ['--no-plots'])):
        code, out = run(tmp_path, '--agents', '4', '--duration', '1.5', '--seed', '0',
                        '--control-period', '0.01', *plots, name=name)
        assert code == 0
        outputs.append((out / 'metrics.csv').read_text())
        times = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)[:, 0]
        # from the first tick that has heard the target and the agents, one row every step
        assert times[0] <= 0.05 and times[-1] == pytest.approx(1.5, abs=1e-9)
        np.testing.assert_allclose(np.diff(times), 0.01, rtol=0, atol=1e-9)
    assert outputs[0] == outputs[1] == outputs[2]


@pytest.mark.parametrize('args, message', [
    (['--agents', '0'], 'argument --agents: must be an integer >= 1, got 0'),
    (['--agents', '2', '--names', 'a,a'], 'duplicate agent names: a'),
    (['--duration', '-1'], 'argument --duration: must be > 0, got -1'),
    (['--real-time-factor', 'x'], "argument --real-time-factor: expected a number, got 'x'"),
    (['--format', 'jpg'], "argument --format: invalid choice: 'jpg'"),
])
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, args, message):
    try:
        code, out = run(tmp_path, *args)
    except SystemExit as exit_info:  # argparse's checks
        code, out = exit_info.code, tmp_path / 'run'
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_format_svg_writes_vector_figures_titled_with_the_run(tmp_path):
    code, out = run(tmp_path, '--agents', '3', '--duration', '2', '--seed', '4', '--format', 'svg')
    assert code == 0
    assert not list(out.glob('*.png'))
    for name in ('dashboard', 'trajectories', 'E_gap', 'E_r', 'rho', 'E_vr', 'G_max', 'd_min'):
        svg = (out / f'{name}.svg').read_text()
        assert svg.lstrip().startswith('<?xml') and '<svg' in svg and '<image' not in svg, name
    assert 'N = 3, seed 4, R = 20 m, preset default' in (out / 'dashboard.svg').read_text()


def test_bad_params_file_and_unknown_parameter_are_reported(tmp_path, capsys):
    bad_yaml = tmp_path / 'bad.yaml'
    bad_yaml.write_text('/**: {ros__parameters: {k_r: [1, 2}\n')
    code, out = run(tmp_path, '--params-file', str(bad_yaml))
    assert code == 2 and 'is not valid YAML' in capsys.readouterr().err and not out.exists()

    unknown = tmp_path / 'unknown.yaml'
    unknown.write_text('/**/agent:\n  ros__parameters:\n    k_rr: 2.0\n')
    code, out = run(tmp_path, '--agents', '2', '--params-file', str(unknown))
    err = capsys.readouterr().err
    assert code == 2 and 'unknown parameter(s): k_rr' in err and not out.exists()

    out_of_range = tmp_path / 'range.yaml'
    out_of_range.write_text('/**/agent:\n  ros__parameters:\n    k_r: -1.0\n')
    code, out = run(tmp_path, '--agents', '2', '--params-file', str(out_of_range))
    err = capsys.readouterr().err
    assert code == 2 and 'k_r' in err and not out.exists()


def test_params_file_values_reach_the_nodes(tmp_path):
    slow = tmp_path / 'slow.yaml'
    slow.write_text('/swarm_mobility:\n  ros__parameters:\n    max_speed_xy: 1.0\n')
    code, out = run(tmp_path, '--agents', '3', '--duration', '3', '--params-file', str(slow))
    assert code == 0
    agents = np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1)
    assert agents[:, 3].max() <= 1.0 + 1e-6


def test_sigint_still_writes_the_outputs_gathered_so_far(tmp_path):
    out = tmp_path / 'interrupted'
    proc = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'soliton_encirclement_ros.sim.runner',
            '--agents',
            '3',
            '--control-period',
            '0.05',
            '--duration',
            '600',
            '--real-time-factor',
            '1',
            '--no-progress',
            '--out',
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        import time
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stderr.readline()
            if 'simulating' in line:
                break
        # Interrupt once the streamed metrics are past 1.5 s of the run (flushed every second).
        wait_for(lambda: streamed_until(out / 'metrics.csv') > 1.5, 'metrics past t = 1.5 s')
        proc.send_signal(subprocess.signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert 'interrupted' in stderr
    metrics = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)
    assert 1.0 < metrics[-1, 0] < 30.0
    assert json.loads((out / 'summary.json').read_text())['final']['E_r'] >= 0


def streamed_until(path) -> float:
    """Return the time of the last whole row of a streamed metrics.csv (0 before any)."""
    last = last_row(path, len(METRIC_NAMES) + 1) if path.exists() else None
    return 0.0 if last is None else float(last[0])


def strict_json(path):
    """Parse ``path`` as strict JSON: NaN and Infinity, which JSON lacks, are an error."""
    def reject(constant):
        raise ValueError(f'{path}: {constant} is not JSON')
    return json.loads(path.read_text(), parse_constant=reject)


@pytest.fixture(scope='module')
def processes_ring(tmp_path_factory):
    """
    One --processes run read by the two tests below (a --processes run is the dearest here).

    At half real time, for 20 s; figures as PDFs. The clock runs on wall time whatever the
    nodes do: on a loaded machine agent processes that lag it past the agent timeout are left
    out by the others, and the ring re-spaces (seen at twice real time: still moving at 20 s,
    E_gap 0.28; at real time with three busy sessions on two cores, the run at 0.67 of real
    time: E_gap never below 0.05 for more than 0.8 s).
    """
    code, out = run(tmp_path_factory.mktemp('processes'), '--processes', '--agents', '4',
                    '--duration', '20', '--seed', '1', '--real-time-factor', '0.5',
                    '--format', 'pdf')
    assert code == 0
    return out


def test_one_process_per_node_also_forms_the_ring(processes_ring):
    """
    --processes: every node its own OS process, the swarm mobility node owns /clock.

    The ring forms and holds for seconds on end. Not asked: that it still holds at the end. On a
    machine starved of CPU (the run at 0.75 of real time) an agent process that misses its
    broadcasts for longer than the agent timeout is left out by the others, as it must be, and
    the ring re-spaces round it (seen: formed to 1e-9 from 6 s, then E_gap 0.06 at 25 s).
    """
    out = processes_ring
    summary = strict_json(out / 'summary.json')
    assert summary['params']['mode'] == 'processes'
    assert summary['params']['controller']['altitude'] is None  # NaN (off): null, not NaN
    with open(out / 'metrics.csv') as csv:
        columns = csv.readline().strip().split(',')
    metrics = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)
    assert metrics[-1, 0] > 18.0
    t = metrics[:, columns.index('timestamp')]
    formed = ((metrics[:, columns.index('E_gap')] < 0.05)
              & (metrics[:, columns.index('E_r')] < 0.01))
    longest, since = 0.0, None  # the longest stretch formed, in sim s
    for at, yes in zip(t, formed):
        since = (since if since is not None else at) if yes else None
        longest = max(longest, at - since) if yes else longest
    assert longest > 5.0, (longest, metrics[-1])


def test_a_processes_recording_holds_the_run_from_its_first_instants(tmp_path, capsys):
    """
    The clock waits for every node and the bag: the bag holds the run from its start.

    Each vehicle's odometry, the target's and the agent states are in the bag from the first
    second of the run. The clock used to start once as many /clock subscriptions
    as the plan has nodes were seen, the clock's own and this runner's among them, and the
    recorder subscribed to the topics only at its next look for them: under load a bag
    started seconds into the run, without the target (analyze_run then refused it).
    """
    from soliton_encirclement_ros.analysis.bag_reader import Bag
    from soliton_encirclement_ros.interface import AGENT_STATES_TOPIC, TARGET_ODOM_TOPIC
    bag = tmp_path / 'bag'
    code, _ = run(tmp_path, '--processes', '--agents', '3', '--duration', '1.5',
                  '--real-time-factor', '2', '--no-plots', '--record', str(bag))
    # exit 3 only for what a loaded machine can do to --processes: a recorder that fell behind
    # later in the run (it says so); the start of the run is in the bag all the same
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith('swarm_sim: error')]
    assert code == 0 or (code == 3 and len(lines) == 1
                         and lines[0].endswith('the recorder did not keep up with them')), err
    wanted = ['/uav1/odom', '/uav2/odom', '/uav3/odom', TARGET_ODOM_TOPIC, AGENT_STATES_TOPIC]
    first = {}  # by each message's own stamp (see _sent_at)
    with Bag(bag) as reader:
        for topic, _, msg in reader.messages(wanted):
            first[topic] = min(first.get(topic, math.inf), _sent_at(topic, msg))
    assert sorted(first) == sorted(wanted), first
    # The mobility and target nodes publish from the first instant; an agent broadcasts its state
    # once it holds fresh odometry and the target, on a control tick. Each is a process of its
    # own, which a loaded machine can start on its ticks a few ticks late (0.27 s seen for the
    # agent states, 0.26 s for the target, both on Jazzy at twice real time). A bag that missed
    # the start began seconds in.
    late = {topic: t for topic, t in first.items() if t > 1.0}
    assert not late, first


def test_a_processes_recording_holds_the_start_of_a_node_that_hears_of_the_bag_late(
        tmp_path, capsys, monkeypatch):
    """
    The clock waits until every node hears it and its writers reach the bag's readers.

    The recorder's reader of a topic matches its writer when the recorder hears of the writer;
    the writer matches the reader when the writer's participant hears of the reader, which can
    come later (seen under load: the target's odometry in the bag from 0.37 s, 0.68 s). Until
    then the writer sends its samples to no one there, and they are lost for the bag. Here the
    target's participant hears no discovery traffic from the moment the recorder subscribes to
    its odometry until the run's clock has passed 0.5 s, or for deaf_s once every node is up if
    the clock waits: the clock must wait, and the bag hold every topic from the first instants.
    A target that was deaf before it heard of the clock's writer answered all the same and
    published from 0.51 s (seen on Jazzy under load): a node answers once it hears the clock.
    """
    from soliton_encirclement_ros.analysis.bag_reader import Bag
    from soliton_encirclement_ros.interface import (
        AGENT_STATES_TOPIC, CLOCK_TOPIC, TARGET_ODOM_TOPIC, TARGET_STATE_TOPIC)
    from soliton_encirclement_ros.recording.recorder import BagRecorder
    from soliton_encirclement_ros.sim.processes import ProcessGraph
    from support.deaf_discovery import DeafDiscovery
    deaf_s = 3.0  # wall s once every node is up: the clock used to start within a second
    deaf, nodes_up, half_a_second = [], threading.Event(), threading.Event()
    subscribe, on_clock = BagRecorder._subscribe, ProcessGraph._on_clock
    spin_ready = ProcessGraph._spin_ready

    def deaf_target_then_subscribe(self, topic, *args):
        if topic == TARGET_ODOM_TOPIC and not deaf:
            deaf.append(DeafDiscovery(_child_pid('target_node'),
                                      int(os.environ['ROS_DOMAIN_ID'])).start())
            threading.Thread(target=hear_again, args=(deaf[0],), daemon=True).start()
        return subscribe(self, topic, *args)

    events = {}  # wall s since the deafness began, for a failure's message

    def hear_again(fault):
        began = time.monotonic()
        if nodes_up.wait(60.0):
            events['nodes up'] = round(time.monotonic() - began, 3)
            events['released at 0.5 sim-s'] = half_a_second.wait(deaf_s)
        events['released'] = round(time.monotonic() - began, 3)
        fault.release()

    def look_at_the_roster(self):  # on the runner's thread, as it watches the run
        if deaf and not nodes_up.is_set() and len(self.roster.ready) > len(self.processes):
            nodes_up.set()
        spin_ready(self)

    def clock_seen(self, msg):
        on_clock(self, msg)
        if self.sim_time_ns >= 0.5e9:
            half_a_second.set()
    monkeypatch.setattr(BagRecorder, '_subscribe', deaf_target_then_subscribe)
    monkeypatch.setattr(ProcessGraph, '_on_clock', clock_seen)
    monkeypatch.setattr(ProcessGraph, '_spin_ready', look_at_the_roster)
    bag = tmp_path / 'bag'
    try:
        code, _ = run(tmp_path, '--processes', '--agents', '3', '--duration', '1.5',
                      '--real-time-factor', '2', '--no-plots', '--record', str(bag))
    finally:
        for fault in deaf:
            fault.release()
    assert deaf, 'the recorder never subscribed to the target odometry'
    if deaf[0].problem:  # not Fast DDS's threads, or ptrace refused (a container's seccomp)
        pytest.skip(deaf[0].problem)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith('swarm_sim: error')]
    assert code == 0 or (code == 3 and len(lines) == 1
                         and lines[0].endswith('the recorder did not keep up with them')), err
    wanted = ['/uav1/odom', '/uav2/odom', '/uav3/odom', TARGET_ODOM_TOPIC, TARGET_STATE_TOPIC,
              CLOCK_TOPIC, AGENT_STATES_TOPIC]
    # When each topic's earliest message in the bag was sent, by its sender's clock: a bag's log
    # time is the recorder's clock at receipt, which runs ahead of messages that wait in its
    # queue on a busy machine (seen: every topic's first message logged at 0.37 s, none of them
    # counted missing).
    first = {}
    with Bag(bag) as reader:
        for topic, _, msg in reader.messages(wanted):
            first[topic] = min(first.get(topic, math.inf), _sent_at(topic, msg))
    assert sorted(first) == sorted(wanted), first
    late = {topic: t for topic, t in first.items()
            if t > (1.0 if topic == AGENT_STATES_TOPIC else 0.25)}
    assert not late, (first, events, err[-1500:])


def _sent_at(topic: str, msg) -> float:
    """Return the sim time [s] a recorded message was sent at, by its own stamp."""
    from soliton_encirclement_ros.interface import (
        AGENT_STATES_TOPIC, agent_state_from_msg, CLOCK_TOPIC, TARGET_STATE_TOPIC,
        target_state_from_msg)
    if topic == AGENT_STATES_TOPIC:
        return agent_state_from_msg(msg).stamp_ns * 1e-9
    if topic == TARGET_STATE_TOPIC:
        return target_state_from_msg(msg).stamp_ns * 1e-9
    stamp = msg.clock if topic == CLOCK_TOPIC else msg.header.stamp
    return stamp.sec + stamp.nanosec * 1e-9


def _child_pid(executable: str) -> int:
    """Return the pid of this process's child that runs ``executable`` (a node of --processes)."""
    for task in Path('/proc').iterdir():
        try:
            if not task.name.isdigit():
                continue
            ppid = int((task / 'stat').read_text().rsplit(')', 1)[1].split()[1])
            cmdline = (task / 'cmdline').read_bytes().split(b'\0')
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and any(Path(os.fsdecode(arg)).name == executable
                                       for arg in cmdline[:2]):
            return int(task.name)
    raise AssertionError(f'no child process runs {executable}')


def test_processes_mode_writes_the_figures_in_the_format_asked(processes_ring):
    """--processes --format pdf: metrics_node draws the figures, as PDFs titled with N and R."""
    out = processes_ring
    assert not list(out.glob('*.png'))
    for name in ('dashboard', 'trajectories', 'E_gap', 'E_r', 'rho', 'E_vr', 'G_max', 'd_min'):
        assert (out / f'{name}.pdf').read_bytes()[:7] == b'%PDF-1.', name


def test_injected_failures_silence_agents_and_the_ring_recovers(tmp_path):
    code, out = run(tmp_path, '--agents', '5', '--duration', '30', '--seed', '3',
                    '--failures-per-min', '6', '--failure-off-time', '3')
    assert code == 0
    agents = np.loadtxt(out / 'agents.csv', delimiter=',', skiprows=1)
    metrics = np.loadtxt(out / 'metrics.csv', delimiter=',', skiprows=1)
    times = np.unique(agents[:, 1])  # a row per live agent every telemetry_period (0.1 s)
    assert np.allclose(np.diff(times), 0.1) and times[-1] > metrics[-1, 0] - 0.1
    rows_per_agent = {i: np.sum(agents[:, 0] == i) for i in range(1, 6)}
    assert min(rows_per_agent.values()) < len(times) - 10  # someone was out for > 1 s
    assert set(rows_per_agent) == {1, 2, 3, 4, 5} and min(rows_per_agent.values()) > 0
    live_counts = [np.sum(agents[:, 1] == t) for t in times]
    assert min(live_counts) < 5 and live_counts[-1] >= 4
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['final']['E_r'] < 0.05


def test_processes_mode_rejects_an_unknown_parameter_before_starting(tmp_path, capsys):
    unknown = tmp_path / 'unknown.yaml'
    unknown.write_text('/**:\n  ros__parameters:\n    max_acc_xyz: 3.0\n')
    code, out = run(tmp_path, '--processes', '--agents', '2', '--params-file', str(unknown))
    err = capsys.readouterr().err
    assert code == 2 and 'unknown parameter(s): max_acc_xyz' in err and not out.exists()


def test_a_scenario_file_runs_unchanged_in_swarm_sim_and_batch_sim(tmp_path):
    """The same --scenario, gains and vehicle limits included, drive both simulators."""
    from soliton_encirclement_ros.sim import batch_sim
    scenario = tmp_path / 'scenario.yaml'
    scenario.write_text('agents: 4\nseed: 2\nduration: 15.0\ncontrol_period: 0.05\n'
                        'target_motion: random\ntarget_speed: 2.0\ncontroller: {k_r: 1.5}\n'
                        'vehicle: {max_speed_xy: 6.0}\n')
    code, ros = run(tmp_path, '--scenario', str(scenario), name='ros')
    assert code == 0
    assert batch_sim.main(['--scenario', str(scenario), '--out', str(tmp_path / 'batch')]) == 0
    ros_summary = json.loads((ros / 'summary.json').read_text())
    batch_summary = json.loads((tmp_path / 'batch' / 'summary.json').read_text())
    graph_only = {'names', 'odom_rate', 'params_files', 'mode', 'engine',
                  'd_safe_flown_by_agent'}
    assert {k: v for k, v in ros_summary['params'].items() if k not in graph_only} == {
        k: v for k, v in batch_summary['params'].items() if k not in graph_only}
    assert ros_summary['params']['controller']['k_r'] == 1.5
    # The ROS graph sees odometry one tick later than the batch model: close, not equal
    # (measured: run means within 3 %).
    for metric in ('E_r', 'E_gap', 'G_max', 'd_min'):
        assert ros_summary['mean'][metric] == pytest.approx(batch_summary['mean'][metric],
                                                            rel=0.08), metric
    speeds = np.loadtxt(ros / 'agents.csv', delimiter=',', skiprows=1)[:, 3]
    assert 5.0 < speeds.max() <= 6.0 + 1e-6  # the scenario's vehicle limit binds in ROS too
