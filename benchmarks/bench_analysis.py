"""
Benchmark analyze_run on a 10-agent, 300 s run with 50 Hz odometry (issue #5).

    python benchmarks/bench_analysis.py [--agents 10] [--duration 300] [--rate 50] [--storage mcap]

Writes a synthetic bag with rosbags' Writer (agents circling a moving target, 50 Hz odometry,
agent states at the same rate, metrics at 10 Hz), then times each analysis stage and the
whole ``analyze_run`` command. Prints the figures and writes them to
benchmarks/results/analysis.json (``--no-save``: print only); asserts nothing.
"""
import argparse
import math
from pathlib import Path
import tempfile
import time

import numpy as np
from results import add_options, begin, save, table
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_typestore, Stores

from soliton_encirclement_ros.analysis import cli
from soliton_encirclement_ros.analysis.recompute import load_run, metric_times, recompute_metrics
from soliton_encirclement_ros.core.controller import AgentBroadcast, seconds_to_ns
from soliton_encirclement_ros.interface import AGENT_STATE, agent_state_values, AGENT_STATES_TOPIC

TS = get_typestore(Stores.ROS2_KILTED)
T = TS.types


def odometry(t, xy, yaw, speed):
    sec, nsec = divmod(int(t * 1e9), 10**9)
    vector = T['geometry_msgs/msg/Vector3']
    return T['nav_msgs/msg/Odometry'](
        header=T['std_msgs/msg/Header'](
            stamp=T['builtin_interfaces/msg/Time'](sec=sec, nanosec=nsec), frame_id='world'
        ),
        child_frame_id='base_link',
        pose=T['geometry_msgs/msg/PoseWithCovariance'](
            pose=T['geometry_msgs/msg/Pose'](
                position=T['geometry_msgs/msg/Point'](x=xy[0], y=xy[1], z=5.0),
                orientation=T['geometry_msgs/msg/Quaternion'](
                    x=0.0, y=0.0, z=math.sin(yaw / 2), w=math.cos(yaw / 2)
                ),
            ),
            covariance=np.zeros(36),
        ),
        twist=T['geometry_msgs/msg/TwistWithCovariance'](
            twist=T['geometry_msgs/msg/Twist'](
                linear=vector(x=speed, y=0.0, z=0.0), angular=vector(x=0.0, y=0.0, z=0.0)
            ),
            covariance=np.zeros(36),
        ),
    )


def write_bag(path, agents, duration, rate, storage):
    rng = np.random.default_rng(1)
    phase = rng.uniform(0, 2 * np.pi, agents)
    size = len(AGENT_STATE.fields)  # the wire layout, from the interface (not a copy of it)
    layout = T['std_msgs/msg/MultiArrayLayout'](dim=[T['std_msgs/msg/MultiArrayDimension'](
        label=AGENT_STATE.label, size=size, stride=size)], data_offset=0)
    plugin = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}[storage]
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        conn = {}

        def write(topic, msgtype, t, msg):
            if topic not in conn:
                conn[topic] = writer.add_connection(topic, msgtype, typestore=TS)
            writer.write(conn[topic], int(t * 1e9), TS.serialize_cdr(msg, msgtype))

        for k in range(int(duration * rate)):
            t = k / rate
            target = np.array([5.0 * math.sin(0.02 * t), 3.0 * math.cos(0.03 * t)])
            write('/target/odom', 'nav_msgs/msg/Odometry', t, odometry(t, target, 0.0, 0.0))
            spread = math.exp(-t / 60.0)  # converging from a clump to equal spacing
            for i in range(agents):
                angle = (1 - spread) * 2 * np.pi * i / agents + spread * phase[i] + 0.1 * t
                radius = 20.0 + 8.0 * spread * math.cos(phase[i])
                xy = target + radius * np.array([math.cos(angle), math.sin(angle)])
                write(f'/uav{i + 1}/odom', 'nav_msgs/msg/Odometry', t,
                      odometry(t, xy, angle + math.pi / 2, 0.1 * radius))
                state = AgentBroadcast(i + 1, k, seconds_to_ns(t), [xy[0], xy[1], 5.0],
                                       np.zeros(3), 0.5, 0.5, incarnation=i + 1)
                write(AGENT_STATES_TOPIC, 'std_msgs/msg/Float64MultiArray', t,
                      T['std_msgs/msg/Float64MultiArray'](
                          layout=layout, data=np.array(agent_state_values(state))))
            if k % max(1, int(rate / 10)) == 0:
                for name in ('E_r', 'E_vr', 'rho', 'G_max', 'E_gap'):
                    write(f'/swarm/metrics/{name}', 'std_msgs/msg/Float64', t,
                          T['std_msgs/msg/Float64'](data=0.0))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--agents', type=int, default=10)
    parser.add_argument('--duration', type=float, default=300.0)
    parser.add_argument('--rate', type=float, default=50.0)
    parser.add_argument('--storage', default='mcap', choices=['mcap', 'sqlite3'])
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        bag = Path(tmp) / 'bench'
        start = time.perf_counter()
        write_bag(bag, args.agents, args.duration, args.rate, args.storage)
        size = sum(f.stat().st_size for f in bag.iterdir()) / 2**20
        print(f'bag: {args.agents} agents, {args.duration:g} s, {args.rate:g} Hz odometry, '
              f'{args.storage}, {size:.1f} MiB (written in {time.perf_counter() - start:.1f} s)')

        start, cpu = time.perf_counter(), time.process_time()
        run = load_run(bag, relative_time=True)
        read = time.perf_counter() - start, time.process_time() - cpu
        start, cpu = time.perf_counter(), time.process_time()
        times = metric_times(run)
        recompute_metrics(run, times)
        recompute = time.perf_counter() - start, time.process_time() - cpu
        print(f'read + decode bag:          {read[0]:6.2f} s ({read[1]:.2f} CPU-s)')
        print(f'recompute metrics ({len(times)} steps): {recompute[0]:6.2f} s '
              f'({recompute[1]:.2f} CPU-s)')
        rows += [['read and decode the bag', *(round(x, 1) for x in read)],
                 [f'recompute the metrics ({len(times)} steps)',
                  *(round(x, 1) for x in recompute)]]
        for label, extra in (('analyze_run, no animation', ['--max-frames', '0']),
                             ('analyze_run with the animation', [])):
            start, cpu = time.perf_counter(), time.process_time()
            status = cli.main([str(bag), '--out', str(Path(tmp) / 'out'), *extra])
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(f'{label + ":":27s} {wall:6.2f} s ({cpu:.2f} CPU-s, exit {status})', flush=True)
            rows.append([label, round(wall, 1), round(cpu, 1)])
    save(args, 'analysis', {
        'bag': f'{args.agents} agents, {args.duration:g} s, {args.rate:g} Hz odometry and agent '
               f'states, {args.storage}, {size:.0f} MiB',
        'stages': table(['stage', 'wall [s]', 'CPU [s]'], rows)}, load)


if __name__ == '__main__':
    main()
