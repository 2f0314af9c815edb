"""
``fleet console``'s hold, from the key press to PX4's reported Hold of every vehicle.

    .venv/bin/python benchmarks/bench_console.py --vehicles 3 4 --runs 5 --name console_double
    .venv/bin/python benchmarks/bench_console.py --layout one --vehicles 3 4 --runs 5 \
        --name console_double_one
    PX4_DIR=~/PX4-Autopilot XRCE_AGENT=MicroXRCEAgent \
        .venv/bin/python benchmarks/bench_console.py --px4 --vehicles 3 4 --runs 5 \
        --name console_px4_sitl

Each fleet size runs a graph of real bridges and agents, and ``fleet console FILE --plain`` as
the operator's own process, once, as on a field. Behind the bridges is, by ``--layout``:

- ``processes`` (the default): the PX4 test double (``test/support/fake_px4.py``, as the PX4
  tests fly it: needs a built px4_msgs), each vehicle's agent, bridge and double in a process
  of its own, as each vehicle's companion computer runs them (and the target in one more);
- ``one``: the same nodes all in one process and one executor, as the PX4 tests run them;
- ``--px4``: real PX4 SITL (SIH, headless), one PX4 per vehicle, started with the project's
  ``px4_sitl_rehearsal`` (its Micro XRCE-DDS Agent, and each vehicle's bridge and agent as
  their own processes, exactly as the fleet file's launch lines start them). Needs ``PX4_DIR``
  (a PX4 tree built with ``make px4_sitl``), an agent and px4_msgs built from that PX4's
  messages; run it where no other ROS graph uses the domain (``unshare -n`` with loopback up
  keeps it alone).

Each run engages every vehicle through its bridge (PX4 in OFFBOARD, armed, flying), writes
``h`` to the console's stdin and times, from that write:

- the console's own word on when its calls went out, from its reading of the key
  (``hold: called ... N ms after the key``), and when that line reached this process (so the
  calls went out at most that long after the key was written);
- the first DO_SET_MODE Hold each bridge sends its PX4 (``vehicle_command``), as a subscriber
  in this process receives it: the call reached that bridge, which acted on it;
- the first ``vehicle_status`` each PX4 publishes with ``nav_state`` AUTO_LOITER (PX4's Hold),
  as a subscriber in this process receives it: PX4's own reported mode.

The graph takes a DDS domain of its own (the test suite's domain locks; PX4 SITL's uXRCE-DDS
client follows ``ROS_DOMAIN_ID``) with discovery on loopback. Writes
``benchmarks/results/<name>.json`` (``--no-save``: print only). Wall time on a shared machine:
the load is recorded with the figures. Asserts nothing.
"""
from __future__ import annotations

import argparse
import fcntl
import os
from pathlib import Path
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_px4_sitl import require_px4
from results import add_options, begin, save, table
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / 'test')]
LOCK_DIR = Path(tempfile.gettempdir()) / 'soliton_encirclement_ros-test-domains'  # conftest's
DEADLINE = 120.0  # s for anything to happen at all
SITL_DEADLINE = 300.0  # s, on PX4 SITL: its start, estimator and arming checks
FLY_BEFORE_HOLD = 3.0  # s the fleet flies engaged before the key
ENGAGE_RETRY = 1.0  # s between two engages of a vehicle not (or no longer) engaged
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


class OneProcess:
    """The double's graph in this process, on the observer's executor (``--layout one``)."""

    deadline = DEADLINE

    def __init__(self, vehicles: int, executor, work: Path) -> None:
        from support.px4_ring import sitl_plan, start_graph
        _, self.plan = sitl_plan(vehicles)
        self.names = list(self.plan.names)
        self._executor = executor
        self._nodes = start_graph(executor, self.plan)

    def close(self) -> None:
        for node in self._nodes.values():
            self._executor.remove_node(node)
            node.destroy_node()


class Processes:
    """
    The double's graph as a field runs it (``--layout processes``): one process per vehicle.

    Each vehicle's agent, bridge and PX4 double (``--serve uavN``), and the target
    (``--serve target``), in a process and executor of its own; each stops when its stdin
    closes.
    """

    deadline = DEADLINE

    def __init__(self, vehicles: int, executor, work: Path) -> None:
        from support.px4_ring import sitl_plan
        _, plan = sitl_plan(vehicles)
        self.names = list(plan.names)
        self._children = []
        for part in ['target', *self.names]:
            with open(work / f'{part}.log', 'w') as log:  # its nodes' log lines
                self._children.append(subprocess.Popen(
                    [sys.executable, __file__, '--serve', part, '--vehicles', str(vehicles)],
                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True))

    def close(self) -> None:
        for child in self._children:
            child.stdin.close()
        for child in self._children:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def serve(part: str, vehicles: int) -> None:
    """Run one part of the double's graph (a vehicle's companion, or the target) until EOF."""
    import threading

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from support.px4_ring import sitl_plan, start_graph

    rclpy.init(args=[])
    executor = SingleThreadedExecutor()
    _, plan = sitl_plan(vehicles)
    nodes = start_graph(executor, plan, only=lambda name: name.startswith(f'/{part}/'))
    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    try:
        while not closed.is_set():
            executor.spin_once(timeout_sec=0.1)
    finally:
        for node in nodes.values():
            executor.remove_node(node)
            node.destroy_node()
        executor.shutdown()
        rclpy.try_shutdown()


class Sitl:
    """PX4 SITL (SIH) behind each bridge, started by ``px4_sitl_rehearsal`` (``--px4``)."""

    deadline = SITL_DEADLINE

    def __init__(self, vehicles: int, executor, work: Path, px4_dir: str, agent: str) -> None:
        from bench_px4_sitl import fleet_file
        self.names = [f'uav{i}' for i in range(1, vehicles + 1)]
        self.path = fleet_file(work, vehicles)
        self._process = subprocess.Popen(
            [sys.executable, '-m', 'soliton_encirclement_ros.fleet.rehearsal', str(self.path),
             '--px4-dir', px4_dir, '--agent', agent, '--out', str(work / 'rehearsal')],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        import threading
        threading.Thread(target=lambda: self.lines.extend(self._process.stdout),
                         daemon=True).start()
        deadline = time.monotonic() + SITL_DEADLINE
        while not any('every vehicle is heard' in line for line in self.lines):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise SystemExit('bench_console: the rehearsal did not get ready:\n'
                                 + ''.join(self.lines)[-2000:])
            time.sleep(0.5)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


def measure(vehicles: int, runs: int, work: Path, args) -> list[list]:
    """Return per run [vehicles, run, calls out, said, [each bridge's command], [each Hold]]."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs, px4_topic
    from support.console_process import ConsoleProcess
    from support.fake_px4 import READER_QOS
    from support.px4_ring import FIELD

    executor = SingleThreadedExecutor()
    observer = Node('bench_console_observer')
    executor.add_node(observer)
    if args.px4:
        graph = Sitl(vehicles, executor, work, args.px4_dir, args.agent)
        path = graph.path
    else:
        graph = (OneProcess if args.layout == 'one' else Processes)(vehicles, executor, work)
        path = work / 'fleet.yaml'
        path.write_text(yaml.safe_dump({'geo_reference': list(FIELD), 'vehicles': [
            {'name': name, 'agent_id': i + 1, 'px4_namespace': f'px4_{i + 1}',
             'host': f'c{i + 1}'} for i, name in enumerate(graph.names)]}))
    m = load_px4_msgs()
    status_cls, command_cls = m['VehicleStatus'], m['VehicleCommand']
    hold = status_cls.NAVIGATION_STATE_AUTO_LOITER
    first_hold: dict[int, float] = {}   # vehicle index -> steady time its Hold was received
    first_command: dict[int, float] = {}  # vehicle index -> its bridge's DO_SET_MODE Hold
    armed = {}
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
              for name in graph.names]
    # the console starts once every bridge is up, as the operator's does on a field
    if not spin_until(executor, lambda: all(c.service_is_ready() for c in engage),
                      graph.deadline):
        graph.close()
        raise SystemExit("bench_console: the bridges' ~/engage not found")
    console = ConsoleProcess(path)
    rows = []
    try:
        if not spin_until(executor, lambda: console.count('fleet console: discovery took'),
                          graph.deadline):
            raise SystemExit(f'bench_console: the console did not discover the fleet:\n'
                             f'{console.text}')
        for run in range(runs):
            if not spin_until(executor, lambda: all(c.service_is_ready() for c in engage),
                              graph.deadline):
                raise SystemExit("bench_console: the bridges' ~/engage not found")
            answers, asked = {}, {}

            def engaged():  # an engage lost or refused (PX4 not ready yet, a failsafe) goes again
                for i, client in enumerate(engage):
                    future = answers.get(i)
                    if future is None or (future.done() and not (future.result().success
                                                                 and armed.get(i))
                                          and time.monotonic() - asked[i] > ENGAGE_RETRY):
                        answers[i] = client.call_async(Trigger.Request())
                        asked[i] = time.monotonic()
                return all(f.done() and f.result().success for f in answers.values()) and all(
                    armed.get(i) for i in range(vehicles))
            flying = False
            give_up = time.monotonic() + graph.deadline
            while not flying:  # every vehicle in OFFBOARD, armed, still so after a while
                if not spin_until(executor, engaged, max(0.0, give_up - time.monotonic())):
                    raise SystemExit('bench_console: the vehicles did not engage: ' + '; '.join(
                        f.result().message for f in answers.values() if f.done()))
                # flying for a while, as when the operator stops them (the ring forming)
                settle = time.monotonic() + FLY_BEFORE_HOLD
                spin_until(executor, lambda: time.monotonic() > settle, FLY_BEFORE_HOLD + 1.0)
                flying = all(armed.get(i) for i in range(vehicles))
            first_hold.clear()
            first_command.clear()
            said = console.count('hold: confirmed by every vehicle')
            pressed = console.press('h')
            if not spin_until(executor, lambda: len(first_hold) == len(first_command) == vehicles
                              and console.count('hold: confirmed by every vehicle') > said,
                              graph.deadline):
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
        graph.close()
        executor.remove_node(observer)
        observer.destroy_node()
        executor.shutdown()
    return rows


def px4_version(px4_dir: str) -> str:
    """Return which PX4 was measured: its commit, and what of its SITL build was changed."""
    def git(*words):
        return subprocess.run(['git', '-C', px4_dir, *words], capture_output=True, text=True,
                              timeout=30).stdout.rstrip('\n')
    board = 'boards/px4/sitl/default.px4board'
    left_out = [line[len('-CONFIG_'):].split('=')[0] for line in
                git('diff', '-U0', '--', board).splitlines() if line.startswith('-CONFIG_')]
    changed = git('status', '--short', '--', 'boards', 'ROMFS', 'src', 'msg').splitlines()
    return (f'PX4-Autopilot {git("rev-parse", "--short=10", "HEAD")} '
            f'({git("log", "-1", "--format=%cs %s")})'
            + (f'; changed here: {", ".join(line[3:] for line in changed)}' if changed else '')
            + (f'; modules left out: {", ".join(left_out)}' if left_out else ''))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    parser.add_argument('--vehicles', type=int, nargs='+', default=[3, 4],
                        help='fleet sizes (default 3 4)')
    parser.add_argument('--runs', type=int, default=5, help='holds per fleet size (default 5)')
    parser.add_argument('--name', default='console_double',
                        help='the results file: benchmarks/results/NAME.json')
    parser.add_argument('--layout', choices=('processes', 'one'), default='processes',
                        help="the double's graph: a process per vehicle (default), or one")
    parser.add_argument('--px4', action='store_true',
                        help='real PX4 SITL (SIH) behind the bridges, not the double')
    parser.add_argument('--px4-dir', default=os.environ.get('PX4_DIR', ''),
                        help='with --px4: a PX4 tree built with make px4_sitl (PX4_DIR)')
    parser.add_argument('--agent', default=os.environ.get('XRCE_AGENT', 'MicroXRCEAgent'),
                        help='with --px4: the Micro XRCE-DDS Agent (XRCE_AGENT)')
    parser.add_argument('--serve', help=argparse.SUPPRESS)  # one part of --layout processes
    add_options(parser)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.vehicles[0])
        return
    require_px4(parser, *((args.px4_dir, args.agent) if args.px4 else ()))
    load = begin(args)
    lock = take_domain()
    profile = None
    if args.px4:  # the rehearsal's Fast DDS profile: its processes find each other on loopback
        from ros_support import distro
        from soliton_encirclement_ros.fleet.rehearsal import FASTDDS_PROFILE
        profile = tempfile.NamedTemporaryFile('w', suffix='.xml', prefix='bench_console_')
        profile.write(FASTDDS_PROFILE)
        profile.flush()
        os.environ.update(distro.current().fast_dds.profile_environment(profile.name))
    import rclpy
    rclpy.init(args=[])
    runs, summary = [], []
    try:
        for vehicles in args.vehicles:
            with tempfile.TemporaryDirectory(prefix='bench_console_') as work:
                rows = measure(vehicles, args.runs, Path(work), args)
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
                            sum(r <= 200.0 for r in reached),
                            round(statistics.median(every), 1), round(max(slowest), 1),
                            sum(s <= 1000.0 for s in slowest)])
    finally:
        rclpy.try_shutdown()
        lock.close()
        if profile is not None:
            profile.close()
    behind = (f'PX4 SITL (SIH), one PX4 per vehicle, started by px4_sitl_rehearsal: '
              f'{px4_version(args.px4_dir)}' if args.px4
              else 'the PX4 test double, ' + ('a process per vehicle' if args.layout ==
                                              'processes' else 'every vehicle in one process'))
    results = {
        'graph': behind,
        'hold': table(['vehicles', 'runs', 'console: key read to every call out, worst [ms]',
                       'key written to the console saying so, worst [ms]',
                       "key to every bridge's DO_SET_MODE Hold, worst [ms]",
                       'runs with Hold at every bridge within 0.2 s',
                       "key to PX4's Hold, median vehicle [ms]",
                       "key to PX4's Hold, slowest vehicle of any run [ms]",
                       'runs with every vehicle in Hold within 1 s'], summary),
        'runs': table(['vehicles', 'run', 'console: key read to every call out [ms]',
                       'key written to the console saying so [ms]',
                       "key to each bridge's DO_SET_MODE Hold [ms]",
                       "key to each vehicle's PX4 Hold [ms]"], runs)}
    print('graph:', behind)
    for name, t in results.items():
        if isinstance(t, dict):
            print(name, t['columns'])
            for row in t['rows']:
                print('  ', row)
    save(args, args.name, results, load)


if __name__ == '__main__':
    main()
