"""
``fleet console``'s hold on the PX4 test double: from the key press to PX4's reported Hold.

    .venv/bin/python benchmarks/bench_console.py --vehicles 3 4 --runs 5 --name console_double

For each fleet size a graph of real bridges and agents runs in this process, each bridge with
the PX4 test double behind it (``test/support/fake_px4.py``, as the PX4 tests fly it: needs a
built px4_msgs), and ``fleet console FILE --plain`` runs as the operator's own process, once,
as on a field. Each run engages every vehicle through its bridge (PX4 in OFFBOARD, armed,
flying), writes ``h`` to the console's stdin and times, from that write:

- the console's own word on when its calls went out, from its reading of the key
  (``hold: called ... N ms after the key``), and when that line reached this process (so the
  calls went out at most that long after the key was written);
- the first DO_SET_MODE Hold each bridge sends its PX4 (``vehicle_command``), as a subscriber
  in this process receives it: the call reached that bridge, which acted on it;
- the first ``vehicle_status`` each double publishes with ``nav_state`` AUTO_LOITER (PX4's Hold),
  as a subscriber in this process receives it: PX4's own reported mode.

The graph takes a DDS domain of its own (the test suite's domain locks) with discovery on
loopback. Writes ``benchmarks/results/<name>.json`` (``--no-save``: print only). Wall time on a
shared machine: the load is recorded with the figures. Asserts nothing.
"""
from __future__ import annotations

import argparse
import fcntl
import os
from pathlib import Path
import re
import statistics
import sys
import tempfile
import time

from results import add_options, load_average, save, table
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / 'test')]
LOCK_DIR = Path(tempfile.gettempdir()) / 'soliton_encirclement_ros-test-domains'  # conftest's
DEADLINE = 120.0  # s for anything to happen at all
CALLED = re.compile(r'^hold: called (?P<names>.+?) (?P<ms>\d+) ms after the key')


def take_domain():
    """Take a DDS domain no test or other benchmark holds (the suite's lock files); its lock."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    for domain in range(232, 0, -1):
        handle = open(LOCK_DIR / f'{domain}.lock', 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        os.environ['ROS_DOMAIN_ID'] = str(domain)
        os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
        return handle
    raise SystemExit('bench_console: every DDS domain is taken')


def spin_until(executor, condition, timeout=DEADLINE) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        executor.spin_once(timeout_sec=0.005)
    return True


def measure(vehicles: int, runs: int, work: Path) -> list[list]:
    """Return per run [vehicles, run, calls out, said, [each bridge's command], [each Hold]]."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.px4.bridge_node import px4_topic
    from support.console_process import ConsoleProcess
    from support.fake_px4 import READER_QOS
    from support.px4_ring import FIELD, sitl_plan, start_graph

    executor = SingleThreadedExecutor()
    _, plan = sitl_plan(vehicles)
    nodes = start_graph(executor, plan)
    fakes = [nodes[f'fake px4_{i + 1}'] for i in range(vehicles)]
    status_cls = fakes[0].m['VehicleStatus']
    hold = status_cls.NAVIGATION_STATE_AUTO_LOITER
    observer = Node('bench_console_observer')
    executor.add_node(observer)
    first_hold: dict[int, float] = {}   # vehicle index -> steady time its Hold was received
    first_command: dict[int, float] = {}  # vehicle index -> its bridge's DO_SET_MODE Hold
    armed = {}
    command_cls = fakes[0].m['VehicleCommand']
    for i in range(vehicles):
        def on_command(msg, i=i):
            if (msg.command == command_cls.VEHICLE_CMD_DO_SET_MODE and msg.param2 == 4.0
                    and msg.param3 == 3.0 and i not in first_command):
                first_command[i] = time.monotonic()
        observer.create_subscription(
            command_cls, px4_topic(f'px4_{i + 1}', 'in', 'vehicle_command',
                                   getattr(command_cls, 'MESSAGE_VERSION', 0)),
            on_command, READER_QOS)

        def on_status(msg, i=i):
            armed[i] = (msg.nav_state == status_cls.NAVIGATION_STATE_OFFBOARD
                        and msg.arming_state == status_cls.ARMING_STATE_ARMED)
            if msg.nav_state == hold and i not in first_hold:
                first_hold[i] = time.monotonic()
        observer.create_subscription(
            status_cls, px4_topic(f'px4_{i + 1}', 'out', 'vehicle_status',
                                  getattr(status_cls, 'MESSAGE_VERSION', 0)),
            on_status, READER_QOS)
    engage = [observer.create_client(Trigger, f'/{name}/px4_bridge/engage')
              for name in plan.names]
    path = work / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': list(FIELD), 'vehicles': [
        {'name': name, 'agent_id': i + 1, 'px4_namespace': f'px4_{i + 1}', 'host': f'c{i + 1}'}
        for i, name in enumerate(plan.names)]}))
    console = ConsoleProcess(path)
    rows = []
    try:
        if not spin_until(executor, lambda: console.count('fleet console: discovery took')):
            raise SystemExit(f'bench_console: the console did not discover the fleet:\n'
                             f'{console.text}')
        for run in range(runs):
            if not spin_until(executor, lambda: all(c.service_is_ready() for c in engage)):
                raise SystemExit("bench_console: the bridges' ~/engage not found")
            answers = {}

            def engaged():  # an engage a starved graph lost (offboard-loss failsafe) goes again
                for i, client in enumerate(engage):
                    future = answers.get(i)
                    if future is None or (future.done() and not future.result().success):
                        answers[i] = client.call_async(Trigger.Request())
                return all(f.done() and f.result().success for f in answers.values()) and all(
                    armed.get(i) for i in range(vehicles))
            if not spin_until(executor, engaged):
                raise SystemExit('bench_console: the vehicles did not engage: ' + '; '.join(
                    f.result().message for f in answers.values() if f.done()))
            first_hold.clear()
            first_command.clear()
            said = console.count('hold: confirmed by every vehicle')
            pressed = console.press('h')
            if not spin_until(executor, lambda: len(first_hold) == len(first_command) == vehicles
                              and console.count('hold: confirmed by every vehicle') > said):
                raise SystemExit(f'bench_console: not every vehicle held:\n{console.text}')
            called = [(int(m.group('ms')), round((read - pressed) * 1e3, 1))
                      for read, line in console.lines if (m := CALLED.match(line))
                      and read >= pressed]
            rows.append([vehicles, run + 1, max(c[0] for c in called) if called else None,
                         max(c[1] for c in called) if called else None,
                         [round((first_command[i] - pressed) * 1e3, 1) for i in range(vehicles)],
                         [round((first_hold[i] - pressed) * 1e3, 1) for i in range(vehicles)]])
            print(f'N={vehicles} run {run + 1}: calls out {rows[-1][2]} ms after the console '
                  f'read the key, said {rows[-1][3]} ms after the key was written; DO_SET_MODE '
                  f'Hold from each bridge {rows[-1][4]} ms and PX4 Hold {rows[-1][5]} ms after '
                  'the key was written', flush=True)
        console.press_quit()
    finally:
        console.close()
        for node in [*nodes.values(), observer]:
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    parser.add_argument('--vehicles', type=int, nargs='+', default=[3, 4],
                        help='fleet sizes (default 3 4)')
    parser.add_argument('--runs', type=int, default=5, help='holds per fleet size (default 5)')
    parser.add_argument('--name', default='console_double',
                        help='the results file: benchmarks/results/NAME.json')
    add_options(parser)
    args = parser.parse_args()
    load = load_average()
    lock = take_domain()
    import rclpy
    rclpy.init(args=[])
    runs, summary = [], []
    try:
        for vehicles in args.vehicles:
            with tempfile.TemporaryDirectory(prefix='bench_console_') as work:
                rows = measure(vehicles, args.runs, Path(work))
            runs += [[n, run, called, said, ', '.join(f'{ms:.0f}' for ms in commands),
                      ', '.join(f'{ms:.0f}' for ms in holds)]
                     for n, run, called, said, commands, holds in rows]
            every = [ms for row in rows for ms in row[5]]
            slowest = [max(row[5]) for row in rows]
            reached = [max(row[4]) for row in rows]
            calls = [row[2] for row in rows if row[2] is not None]
            said = [row[3] for row in rows if row[3] is not None]
            summary.append([vehicles, len(rows), max(calls) if calls else None,
                            max(said) if said else None, round(max(reached), 1),
                            round(statistics.median(every), 1), round(max(slowest), 1),
                            f'{sum(s <= 1000.0 for s in slowest)} of {len(rows)}'])
    finally:
        rclpy.try_shutdown()
        lock.close()
    results = {
        'hold': table(['vehicles', 'runs', 'console: key read to every call out, worst [ms]',
                       'key written to the console saying so, worst [ms]',
                       "key to every bridge's DO_SET_MODE Hold, worst [ms]",
                       "key to PX4's Hold, median vehicle [ms]",
                       "key to PX4's Hold, slowest vehicle of any run [ms]",
                       'runs with every vehicle in Hold within 1 s'], summary),
        'runs': table(['vehicles', 'run', 'console: key read to every call out [ms]',
                       'key written to the console saying so [ms]',
                       "key to each bridge's DO_SET_MODE Hold [ms]",
                       "key to each vehicle's PX4 Hold [ms]"], runs)}
    for name, t in results.items():
        print(name, t['columns'])
        for row in t['rows']:
            print('  ', row)
    save(args, args.name, results, load)


if __name__ == '__main__':
    main()
