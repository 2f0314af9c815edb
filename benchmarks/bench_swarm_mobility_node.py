"""
CPU share of swarm_mobility_node simulating N vehicles with odometry at R Hz in real time.

Starts ``swarm_mobility_node`` as its own process (default 100 vehicles, odom 50 Hz, sim_dt
0.01 s), drives every vehicle with a 10 Hz cmd_vel stream from this process, subscribes to all
odometry, and after a warm-up reports over the measurement window: the node's CPU time as a
share of one core (utime+stime from /proc), the odometry rate received, and the rate expected.
Prints figures and writes them to benchmarks/results/swarm_mobility_node.json (``--no-save``:
print only); asserts nothing.

    ROS_DOMAIN_ID=11 ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST \
        .venv/bin/python benchmarks/bench_swarm_mobility_node.py [--vehicles 100] [--seconds 10]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import rclpy
from rclpy.experimental import EventsExecutor
from rclpy.node import Node
from results import add_options, begin, save, table
import yaml

from velocity_mobility_ros.nodes.mobility_node import SIM_QOS


def process_cpu_seconds(pid: int) -> float:
    """Utime + stime of a process, from /proc/<pid>/stat."""
    fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def write_params(path: Path, names: list[str], odom_rate: float, sim_dt: float) -> None:
    positions = [float(c) for i in range(len(names)) for c in (3.0 * i, 0.0, 10.0)]
    params = {'vehicle_names': names, 'initial_positions': positions,
              'odom_rate': odom_rate, 'sim_dt': sim_dt}
    path.write_text(yaml.safe_dump({'/swarm_mobility': {'ros__parameters': params}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--vehicles', type=int, default=100)
    parser.add_argument('--odom-rate', type=float, default=50.0)
    parser.add_argument('--sim-dt', type=float, default=0.01)
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--warmup', type=float, default=3.0)
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)

    names = [f'bench{i + 1}' for i in range(args.vehicles)]
    workdir = Path(tempfile.mkdtemp(prefix='bench_swarm_'))
    params_file = workdir / 'swarm.yaml'
    write_params(params_file, names, args.odom_rate, args.sim_dt)
    exe = shutil.which('swarm_mobility_node', path=str(Path(sys.executable).parent))
    command = ([exe] if exe else [sys.executable, '-m',
                                  'velocity_mobility_ros.nodes.swarm_mobility_node'])
    node_proc = subprocess.Popen(command + ['--ros-args', '--params-file', str(params_file)])

    rclpy.init()
    node = Node('bench_swarm_driver')
    counts = {'odom': 0}

    def on_odom(_msg: Odometry) -> None:
        counts['odom'] += 1

    subs = [node.create_subscription(Odometry, f'/{n}/odom', on_odom, SIM_QOS) for n in names]
    pubs = [node.create_publisher(Twist, f'/{n}/cmd_vel', SIM_QOS) for n in names]
    command_msg = Twist()
    command_msg.linear.x, command_msg.linear.y = 2.0, 1.0

    def send_commands() -> None:
        for pub in pubs:
            pub.publish(command_msg)

    node.create_timer(0.1, send_commands)
    executor = EventsExecutor()
    executor.add_node(node)
    try:
        deadline = time.monotonic() + args.warmup
        while time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
        counts['odom'] = 0
        cpu0, wall0 = process_cpu_seconds(node_proc.pid), time.monotonic()
        while time.monotonic() - wall0 < args.seconds:
            executor.spin_once(timeout_sec=0.05)
        cpu1, wall1 = process_cpu_seconds(node_proc.pid), time.monotonic()
    finally:
        node_proc.send_signal(signal.SIGINT)
        try:
            node_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            node_proc.kill()
            node_proc.wait()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
        shutil.rmtree(workdir)
    wall = wall1 - wall0
    decimation = round(1.0 / (args.odom_rate * args.sim_dt))
    expected = args.vehicles / (decimation * args.sim_dt)
    print(f'swarm_mobility_node: {args.vehicles} vehicles, sim_dt {args.sim_dt} s, odometry '
          f'{1.0 / (decimation * args.sim_dt):g} Hz each, {wall:.1f} s measured, '
          f'{len(subs)} odom subscribers + {len(pubs)} cmd_vel publishers (10 Hz) in the driver')
    print(f'  node CPU: {100.0 * (cpu1 - cpu0) / wall:.1f} % of one core')
    print(f'  odometry received: {counts["odom"] / wall:.0f} msg/s '
          f'(expected {expected:.0f} msg/s, {100.0 * counts["odom"] / wall / expected:.0f} %)')
    save(args, 'swarm_mobility_node', {'cost': table(
        ['vehicles', 'odometry per vehicle [Hz]', 'node CPU [% of one core]',
         'odometry received [% of expected]'],
        [[args.vehicles, round(1.0 / (decimation * args.sim_dt), 1),
          round(100.0 * (cpu1 - cpu0) / wall, 1),
          round(100.0 * counts['odom'] / wall / expected)]])}, load)


if __name__ == '__main__':
    main()
