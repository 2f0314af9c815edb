"""
Memory of the metrics over long runs: during the run, at its end (the outputs), whole swarm_sim.

    .venv/bin/python benchmarks/bench_metrics_memory.py [--seconds 900] [--agents 10]
        [--outputs 60 240 960] [--swarm-sim 60 240]

1. metrics_node during a run: RSS growth over ``--seconds`` sim-s at N = ``--agents`` (target
   < 15 MB). The node runs in this process on a simulated clock; states are handed to it
   directly at the swarm's rate (20 Hz), so the figure is the node's own memory, not DDS's.
2. The outputs written at the end of a run (issue 39, point 7), for runs of ``--outputs``
   sim-s: streamed metrics.csv (100 Hz, swarm_sim's default) and agents.csv (N = 6, a row per
   agent per metrics tick, as swarm_sim writes them today) are made up (the same figures
   whatever the length, but for their time axis), then the plots and
   summary.json are added in a fresh process, from the streamed files
   (``report.write_streamed_outputs``, what swarm_sim and metrics_node do) and, for comparison,
   by reading the whole tables back (``read_rows`` + ``write_run_outputs``, what they did
   before). Printed: the peak RSS of that process above its RSS before writing (matplotlib and
   the package imported), and its CPU seconds.
3. ``--swarm-sim``: whole ``swarm_sim --agents 6 --duration S`` runs (in-process graph), their
   peak RSS and CPU seconds measured from outside (``wait4``). A 240 sim-s run costs about 200
   CPU-s.

Prints the figures and writes them to benchmarks/results/metrics_memory.json (``--no-save``:
print only).
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path
import subprocess
import sys
import tempfile

import numpy as np
from results import add_options, begin, save, table

ROOT = Path(__file__).resolve().parents[1]
OUTPUT_AGENTS = 6
OUTPUT_RATE = 100.0  # Hz: swarm_sim's metrics rows (metrics_period 0 = every control tick)


def rss_mb(field: str = 'VmRSS') -> float:
    """Return this process's ``VmRSS`` (or ``VmHWM``: its peak) in MB."""
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith(field + ':'):
                return int(line.split()[1]) / 1024.0
    return math.nan


def node_growth(seconds: float, agents: int) -> dict:
    """Print metrics_node's RSS growth from 60 sim-s to ``seconds`` sim-s."""
    import rclpy
    from rclpy.parameter import Parameter
    from rclpy.time import Time
    from rclpy.time_source import TimeSource
    from rosgraph_msgs.msg import Clock

    from soliton_encirclement_ros.core.controller import (
        AgentBroadcast, seconds_to_ns, TargetBroadcast)
    from soliton_encirclement_ros.nodes.metrics_node import MetricsNode

    rclpy.init()
    out = tempfile.mkdtemp(prefix='bench_metrics_')
    node = MetricsNode(subscribe_swarm=False, parameter_overrides=[
        Parameter('use_sim_time', value=True), Parameter('output_dir', value=out)])
    clock = TimeSource()
    clock.ros_time_is_active = True
    clock.attach_clock(node.get_clock())
    period, n = node.settings.metrics_period, agents
    target = TargetBroadcast(0, np.zeros(3), np.zeros(3))
    samples = {}
    ticks = int(seconds / period)
    for k in range(ticks + 1):
        now = k * period
        clock.clock_callback(Clock(clock=Time(nanoseconds=round(now * 1e9)).to_msg()))
        for i in range(n):
            angle = 2 * math.pi * i / n + 0.01 * now
            node.receive_agent_state(AgentBroadcast(
                agent_id=i + 1, seq=k, stamp_ns=seconds_to_ns(now), position=np.array(
                    [20 * math.cos(angle), 20 * math.sin(angle), 0.0]),
                velocity=np.zeros(3), u=0.0))
        node._pending.append((round(now * 1e9), 'target', target))
        clock.clock_callback(Clock(clock=Time(nanoseconds=round((now + 1e-3) * 1e9)).to_msg()))
        node._on_tick()
        if k in (round(60 / period), ticks):
            samples[round(now)] = rss_mb()
    first, last = samples[60], samples[round(seconds)]
    print(
        f'metrics_node, N = {n}, {seconds:g} sim-s at {1 / period:g} Hz: RSS {first:.1f} MB '
        f'at 60 s, {last:.1f} MB at {seconds:g} s: growth {last - first:+.1f} MB '
        '(target < 15 MB)'
    )
    node.destroy_node()
    rclpy.try_shutdown()
    return {'node': table(['agents', 'sim-s', 'RSS at 60 s [MB]', f'RSS at {seconds:g} s [MB]',
                           'growth [MB]'],
                          [[n, seconds, round(first, 1), round(last, 1), round(last - first, 1)]])}


def make_streamed_run(directory: Path, seconds: float) -> None:
    """Stream a made-up run of ``seconds`` sim-s into ``directory``, as metrics_node does."""
    from soliton_encirclement_ros.analysis.report import AGENTS_HEADER, METRICS_HEADER
    from soliton_encirclement_ros.analysis.stream import CsvStream
    rng = np.random.default_rng(0)
    metrics = CsvStream(directory / 'metrics.csv', METRICS_HEADER, flush_period=math.inf)
    agents = CsvStream(directory / 'agents.csv', AGENTS_HEADER, flush_period=math.inf)
    block = 1000
    for start in range(0, round(seconds * OUTPUT_RATE), block):
        t = (start + np.arange(block)) / OUTPUT_RATE + 0.04
        # The same picture whatever the length: converged after a tenth of the run, then
        # a noise floor (a run's figures only differ by their time axis).
        decay = np.exp(-t / (seconds / 50)) + 1e-7 * (1 + rng.random(block))
        noise = 1 + 0.05 * rng.random((block, 6))
        metrics.append(np.column_stack([t] + [c * noise[:, i] for i, c in enumerate((
            decay * 0.1, decay * 0.5, decay * 0.4, 1 + decay, decay * 0.7,
            20.0 - 15 * decay))]))
        ids = np.tile(np.arange(1, OUTPUT_AGENTS + 1), block)
        agents.append(np.column_stack([ids, np.repeat(t, OUTPUT_AGENTS),
                                       rng.random(block * OUTPUT_AGENTS),
                                       rng.random(block * OUTPUT_AGENTS)]))
    metrics.close()
    agents.close()


def write_outputs(mode: str, directory: Path) -> None:
    """(In a fresh process) add the outputs to ``directory``; print the memory it took."""
    import time

    import matplotlib.figure  # noqa: F401 - imported before the baseline, as the package

    from soliton_encirclement_ros.analysis import plots  # noqa: F401
    from soliton_encirclement_ros.analysis.report import (
        RunResult, write_run_outputs, write_streamed_outputs)
    from soliton_encirclement_ros.analysis.stream import DecimatingTrace, read_rows
    params = {'radius': 20.0, 'agents': OUTPUT_AGENTS}
    trajectories = {}
    for name in [f'agent {i}' for i in range(1, OUTPUT_AGENTS + 1)] + ['target']:
        trace = DecimatingTrace()  # what metrics_node keeps: bounded
        for k in range(4000):
            trace.append((k * 0.05, math.cos(k / 500), math.sin(k / 500)))
        trajectories[name] = trace.array()
    before, cpu = rss_mb(), time.process_time()
    if mode == 'streamed':
        write_streamed_outputs(directory, params, trajectories, 1.0)
    else:
        metrics, agents = read_rows(directory / 'metrics.csv', 7), read_rows(
            directory / 'agents.csv', 4)
        write_run_outputs(directory / 'whole', RunResult(metrics, agents, params, trajectories,
                                                         1.0))
    print(json.dumps({'growth': rss_mb('VmHWM') - before, 'before': before,
                      'cpu': time.process_time() - cpu}))


def outputs_peak(durations) -> dict:
    """Print the peak memory of the end-of-run outputs, streamed and whole, per duration."""
    print(f'end-of-run outputs (plots + summary.json; N = {OUTPUT_AGENTS}, metrics at '
          f'{OUTPUT_RATE:g} Hz, agents.csv a row per agent per tick), peak RSS above the '
          'RSS before writing:')
    rows = []
    for seconds in durations:
        with tempfile.TemporaryDirectory(prefix='bench_outputs_') as tmp:
            make_streamed_run(Path(tmp), seconds)
            size = sum(p.stat().st_size for p in Path(tmp).iterdir()) / 1e6
            figures = {}
            for mode in ('whole', 'streamed'):
                done = subprocess.run(
                    [sys.executable, __file__, '--child', mode, tmp], check=True,
                    capture_output=True, text=True, cwd=ROOT)
                figures[mode] = json.loads(done.stdout.strip().splitlines()[-1])
        whole, streamed = figures['whole'], figures['streamed']
        print(f'  {seconds:6g} sim-s ({size:5.1f} MB of CSV): read back whole '
              f'{whole["growth"]:+5.1f} MB ({whole["cpu"]:.1f} CPU-s); streamed '
              f'{streamed["growth"]:+5.1f} MB ({streamed["cpu"]:.1f} CPU-s) '
              f'[RSS before {streamed["before"]:.0f} MB]', flush=True)
        rows.append([seconds, round(size, 1), round(streamed['growth'], 1),
                     round(streamed['cpu'], 1)])
    return {'outputs': table(['run length [sim-s]', 'CSVs [MB]',
                              'memory taken while writing the outputs [MB]', 'CPU-s'], rows)}


def swarm_sim_peak(durations, agents: int = OUTPUT_AGENTS) -> dict:
    """Run swarm_sim for each duration; print its peak RSS and CPU seconds (from outside)."""
    executable = Path(sys.executable).with_name('swarm_sim')
    rows = []
    for seconds in durations:
        with tempfile.TemporaryDirectory(prefix='bench_swarm_sim_') as tmp:
            proc = subprocess.Popen(
                [str(executable), '--agents', str(agents), '--duration', f'{seconds:g}',
                 '--no-progress', '--out', tmp], stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        print(f'swarm_sim --agents {agents} --duration {seconds:g}: peak RSS '
              f'{usage.ru_maxrss / 1024:.1f} MB, {usage.ru_utime + usage.ru_stime:.0f} CPU-s'
              f'{"" if proc.returncode == 0 else f" (exit {proc.returncode})"}', flush=True)
        rows.append([agents, seconds, round(usage.ru_maxrss / 1024, 1),
                     round(usage.ru_utime + usage.ru_stime)])
    return {'swarm_sim': table(['agents', 'sim-s', 'peak RSS [MB]', 'CPU-s'], rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--seconds', type=float, default=900.0)
    parser.add_argument('--agents', type=int, default=10)
    parser.add_argument('--outputs', type=float, nargs='*', default=[60.0, 240.0, 960.0],
                        metavar='SIM_S', help='run lengths of the end-of-run outputs figure')
    parser.add_argument('--swarm-sim', type=float, nargs='*', default=[], metavar='SIM_S',
                        help='also run swarm_sim --agents 6 for these lengths')
    parser.add_argument('--child', nargs=2, help=argparse.SUPPRESS)
    add_options(parser)
    args = parser.parse_args()
    if args.child:
        write_outputs(args.child[0], Path(args.child[1]))
        return
    load, results = begin(args), {}
    if args.seconds > 0:
        results.update(node_growth(args.seconds, args.agents))
    if args.outputs:
        results.update(outputs_peak(args.outputs))
    if args.swarm_sim:
        results.update(swarm_sim_peak(args.swarm_sim))
    save(args, 'metrics_memory', results, load)


if __name__ == '__main__':
    main()
