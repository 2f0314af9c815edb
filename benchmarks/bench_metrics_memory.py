"""
metrics_node memory over a long run: RSS growth over 900 sim-s at N = 10 (target < 15 MB).

    .venv/bin/python benchmarks/bench_metrics_memory.py [--seconds 900] [--agents 10]

The node runs in this process on a simulated clock; states are handed to it directly at the
swarm's rate (20 Hz), so the figure is the node's own memory, not DDS's. Prints figures only.
"""
from __future__ import annotations

import argparse
import math
import tempfile

import numpy as np
import rclpy
from rclpy.parameter import Parameter
from rclpy.time import Time
from rclpy.time_source import TimeSource
from rosgraph_msgs.msg import Clock

from soliton_encirclement_ros.core.controller import AgentBroadcast, seconds_to_ns, TargetBroadcast
from soliton_encirclement_ros.nodes.metrics_node import MetricsNode


def rss_mb() -> float:
    with open('/proc/self/status') as status:
        for line in status:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) / 1024.0
    return math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--seconds', type=float, default=900.0)
    parser.add_argument('--agents', type=int, default=10)
    args = parser.parse_args()
    rclpy.init()
    out = tempfile.mkdtemp(prefix='bench_metrics_')
    node = MetricsNode(subscribe_swarm=False, parameter_overrides=[
        Parameter('use_sim_time', value=True), Parameter('output_dir', value=out)])
    clock = TimeSource()
    clock.ros_time_is_active = True
    clock.attach_clock(node.get_clock())
    period, n = node.config['metrics_period'], args.agents
    target = TargetBroadcast(0, np.zeros(3), np.zeros(3))
    samples = {}
    ticks = int(args.seconds / period)
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
    first, last = samples[60], samples[round(args.seconds)]
    print(
        f'metrics_node, N = {n}, {args.seconds:g} sim-s at {1 / period:g} Hz: RSS {first:.1f} MB '
        f'at 60 s, {last:.1f} MB at {args.seconds:g} s: growth {last - first:+.1f} MB '
        '(target < 15 MB)'
    )
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
