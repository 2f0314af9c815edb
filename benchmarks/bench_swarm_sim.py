"""
Real-time factor of the swarm simulation through ROS 2 and of the batch simulator.

The ROS 2 one is swarm_sim's in-process lock-step; both run the same scenarios: N =
4, 10, 32 agents, control period 0.05 s, mobility 0.01 s, odometry 50 Hz, 60 sim-s. Prints figures;
asserts nothing.

    .venv/bin/python benchmarks/bench_swarm_sim.py [--agents 4 10 32] [--duration 60]

Each run is its own process, so peak memory (max RSS) is per run.
"""
import argparse
import json
import os
from pathlib import Path
import resource
import subprocess
import sys
import tempfile
import time

BIN = Path(sys.executable).parent


def run(command):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        wall,
        after.ru_maxrss / 1024,
        (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--agents', type=int, nargs='+', default=[4, 10, 32])
    parser.add_argument('--duration', type=float, default=60.0)
    args = parser.parse_args()
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    common = ['--duration', str(args.duration), '--control-period', '0.05', '--seed', '0']
    print(
        f'{"simulator":<10}{"N":>4}{"RTF":>8}{"wall s":>9}{"CPU s":>8}'
        f'{"max RSS MB":>12}{"final E_gap":>13}'
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.agents:
            for name, command in (
                (
                    'swarm_sim',
                    [str(BIN / 'swarm_sim'), '--agents', str(n), '--no-progress', *common],
                ),
                ('batch_sim', [str(BIN / 'batch_sim'), '--agents', str(n), *common]),
            ):
                out = Path(tmp) / f'{name}_{n}'
                wall, rss, cpu = run([*command, '--out', str(out)])
                summary = json.loads((out / 'summary.json').read_text())
                print(f'{name:<10}{n:>4}{summary["real_time_factor"]:>8.2f}{wall:>9.1f}{cpu:>8.1f}'
                      f'{rss:>12.0f}{summary["final"]["E_gap"]:>13.4f}', flush=True)
    print(
        'RTF = simulated seconds per wall second of the stepping loop '
        '(start-up and plots excluded);'
        ' max RSS is the largest of the runs so far (getrusage of children).'
    )


if __name__ == '__main__':
    main()
