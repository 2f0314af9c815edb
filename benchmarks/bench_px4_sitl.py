"""
A field day on real PX4 SITL, measured in PX4's own topics: engage, ring, land, fly again, faults.

    export PX4_DIR=~/PX4-Autopilot XRCE_AGENT=MicroXRCEAgent
    .venv/bin/python benchmarks/bench_px4_sitl.py --vehicles 3 --runs 3

Needs the team's PX4 tree built for SITL, a Micro XRCE-DDS Agent and a px4_msgs built from that
firmware's messages (docs: Fly on PX4); nothing here builds or fetches them. Run it where no
other ROS graph shares the domain (``ip netns exec`` a namespace with only loopback keeps it
alone). Each run, with ``px4_sitl_rehearsal`` (PX4 SIH, one XRCE agent, the fleet's nodes) and
the ``fleet`` command as a team types it:

1. ``fleet check`` then ``fleet engage``; the ring forms; ``fleet land``;
2. ``fleet engage`` again (the same fleet, landed); the ring forms again;
3. uav2's agent process is killed (SIGKILL): its bridge lands it after ``land_after``;
4. a ground station switches uav3 to Hold (DO_SET_MODE from MAVLink id 255/190);
5. ``fleet land``.

Measured from PX4's own topics (``vehicle_status``, ``vehicle_land_detected``,
``vehicle_local_position`` with its GPS reference, placed in the fleet's world frame) and the
setpoints each PX4 received (``/fmu/in/trajectory_setpoint``, with the mode PX4 was in): per
flight, the command to every vehicle armed, to the ring (E_gap < 0.05, all within 0.5 m of the
altitude), ``fleet land`` to every vehicle disarmed, the closest pair once farther apart than
``d_safe``, and the setpoints received while armed in a mode other than OFFBOARD more than 0.3 s
after PX4 entered it (what kept PX4 from detecting its landings: must be 0); for the faults,
the killed agent's vehicle's NAV_LAND, landing and disarm, and the setpoints in the ground
station's Hold. Writes benchmarks/results/px4_sitl_N<vehicles>.json (``--no-save``: print only).
Asserts nothing.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from results import add_options, begin, save, table
import yaml

FIELD = [47.397742, 8.545594, 488.0]
RADIUS, ALTITUDE, D_SAFE = 20.0, 10.0, 2.0
OFFBOARD, ARMED, DISARMED = 14, 2, 1
GRACE = 0.3      # s after a mode change a setpoint already on its way may still arrive
RING_TIMEOUT = 120.0
KILL_WAIT = 40.0  # s after the kill: land_after (10 s) and PX4's landing


def fleet_file(directory: Path, n: int) -> Path:
    path = directory / 'fleet.yaml'
    path.write_text(yaml.safe_dump({
        'geo_reference': FIELD, 'radius': RADIUS, 'altitude': ALTITUDE, 'd_safe': D_SAFE,
        'vehicles': [{'name': f'uav{i}', 'agent_id': i, 'px4_namespace': f'px4_{i}',
                      'target_system': i, 'host': f'c{i}'} for i in range(1, n + 1)]}))
    return path


class Px4Watch:
    """PX4's own topics of every vehicle, on a thread: modes, landings, positions, setpoints."""

    def __init__(self, names: list[str]) -> None:
        import pymap3d
        import px4_msgs.msg as m
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import qos_profile_sensor_data
        from rclpy.signals import SignalHandlerOptions
        self.names = names
        self.events: list[tuple[float, str, str, int]] = []  # (t, vehicle, kind, value)
        self.state = {n: {'nav': None, 'arming': None, 'ref': None, 'pos': None} for n in names}
        self.setpoints: dict[str, list] = {n: [] for n in names}  # (t, nav, arming)
        self.samples: list[tuple[float, np.ndarray]] = []
        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
        self._rclpy, self._node = rclpy, Node('bench_px4_sitl_watch')
        sensor = qos_profile_sensor_data

        def on_status(name, msg):
            s = self.state[name]
            if msg.nav_state != s['nav']:
                self.events.append((time.time(), name, 'nav', int(msg.nav_state)))
            if msg.arming_state != s['arming']:
                self.events.append((time.time(), name, 'arming', int(msg.arming_state)))
            s['nav'], s['arming'] = msg.nav_state, msg.arming_state

        def on_land(name, msg):
            if msg.landed != self.state[name].get('landed'):
                self.events.append((time.time(), name, 'landed', int(msg.landed)))
            self.state[name]['landed'] = msg.landed

        def on_local(name, msg):
            s = self.state[name]
            if msg.xy_global and msg.z_global:
                s['ref'] = pymap3d.geodetic2enu(msg.ref_lat, msg.ref_lon, msg.ref_alt, *FIELD)
            if s['ref'] is not None:
                s['pos'] = np.array(s['ref']) + [msg.y, msg.x, -msg.z]  # NED -> world ENU

        def on_setpoint(name, msg):
            s = self.state[name]
            self.setpoints[name].append((time.time(), s['nav'], s['arming']))

        def version(cls):
            v = getattr(cls, 'MESSAGE_VERSION', 0)
            return f'_v{v}' if v else ''
        for i, name in enumerate(names, start=1):
            p = f'/px4_{i}/fmu'
            node = self._node
            node.create_subscription(m.VehicleStatus, f'{p}/out/vehicle_status'
                                     + version(m.VehicleStatus),
                                     lambda msg, n=name: on_status(n, msg), sensor)
            node.create_subscription(m.VehicleLandDetected, f'{p}/out/vehicle_land_detected'
                                     + version(m.VehicleLandDetected),
                                     lambda msg, n=name: on_land(n, msg), sensor)
            node.create_subscription(m.VehicleLocalPosition, f'{p}/out/vehicle_local_position'
                                     + version(m.VehicleLocalPosition),
                                     lambda msg, n=name: on_local(n, msg), sensor)
            node.create_subscription(m.TrajectorySetpoint, f'{p}/in/trajectory_setpoint'
                                     + version(m.TrajectorySetpoint),
                                     lambda msg, n=name: on_setpoint(n, msg), sensor)
        self._command = self._node.create_publisher(
            m.VehicleCommand, '/px4_3/fmu/in/vehicle_command' + version(m.VehicleCommand),
            sensor)
        self._cmd_cls = m.VehicleCommand
        self._node.create_timer(0.05, self._sample)
        self._executor = SingleThreadedExecutor()
        self._executor.add_node(self._node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        p = [self.state[n]['pos'] for n in self.names]
        if all(x is not None for x in p):
            self.samples.append((time.time(), np.array(p)))

    def ground_station_hold(self, system: int, seconds: float = 4.0) -> None:
        """Switch PX4 ``system`` (px4_3) to Hold as a ground station would (255/190)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = self._cmd_cls(command=176, param1=1.0, param2=4.0, param3=3.0,
                                target_system=system, target_component=1, source_system=255,
                                source_component=190, from_external=True)
            msg.timestamp = self._node.get_clock().now().nanoseconds // 1000
            self._command.publish(msg)
            time.sleep(0.2)

    def first(self, vehicle: str, kind: str, value: int, after: float) -> float:
        return next((t for t, v, k, x in list(self.events)
                     if v == vehicle and k == kind and x == value and t >= after), math.nan)

    def ring(self, after: float, timeout: float) -> float:
        """Wait for the ring; return when it formed (NaN: not within ``timeout``)."""
        from soliton_encirclement_ros.core.metrics import compute_metrics
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.samples and self.samples[-1][0] > after:
                t, p = self.samples[-1]
                metrics = compute_metrics(p, np.zeros_like(p), np.zeros(3), np.zeros(3), RADIUS)
                if metrics.E_gap < 0.05 and np.all(np.abs(p[:, 2] - ALTITUDE) < 0.5):
                    return t
            time.sleep(0.1)
        return math.nan

    def closest(self, after: float, until: float) -> tuple[float, str]:
        """Return the closest horizontal pair once farther apart than d_safe, in the window."""
        rows = [(t, p) for t, p in self.samples if after <= t <= until]
        best, pair = math.inf, ''
        for i in range(len(self.names)):
            for j in range(i + 1, len(self.names)):
                d = np.array([np.hypot(*(p[i, :2] - p[j, :2])) for _, p in rows])
                apart = np.flatnonzero(d > D_SAFE)
                if apart.size and d[apart[0]:].min() < best:
                    best, pair = float(d[apart[0]:].min()), f'{self.names[i]}-{self.names[j]}'
        return best, pair

    def stray_setpoints(self, after: float, until: float) -> int:
        """Setpoints received armed, in a mode other than OFFBOARD, GRACE after entering it."""
        count = 0
        for name in self.names:
            modes = [(t, x) for t, v, k, x in self.events if v == name and k == 'nav']
            for t, nav, arming in self.setpoints[name]:
                if after <= t <= until and arming == ARMED and nav not in (None, OFFBOARD):
                    entered = max((mt for mt, mn in modes if mt <= t and mn == nav), default=t)
                    count += t - entered > GRACE
        return count

    def close(self) -> None:
        self._executor.shutdown()
        self._thread.join()  # the spin thread may still be in a handler: destroy after it
        self._node.destroy_node()
        self._rclpy.try_shutdown()


def fleet(action: str, path: Path, env: dict) -> str:
    done = subprocess.run([sys.executable, '-m', 'soliton_encirclement_ros.fleet.cli', action,
                           str(path)], capture_output=True, text=True, env=env, timeout=300)
    print(done.stdout, end='', flush=True)
    if done.returncode != 0:
        raise RuntimeError(f'fleet {action} exited {done.returncode}: {done.stdout[-400:]}')
    return done.stdout


def child_pid(parent: int, *words: str) -> int:
    """Return the pid of the rehearsal's node whose command line holds every word."""
    import psutil
    for child in psutil.Process(parent).children(recursive=True):
        line = ' '.join(child.cmdline())
        if all(word in line for word in words):
            return child.pid
    raise RuntimeError(f'no process of the rehearsal runs {" ".join(words)}')


def one_run(args, n: int, work: Path) -> tuple[list, list, int]:
    names = [f'uav{i}' for i in range(1, n + 1)]
    path = fleet_file(work, n)
    out = work / 'rehearsal'
    rehearsal = subprocess.Popen(
        [sys.executable, '-m', 'soliton_encirclement_ros.fleet.rehearsal', str(path),
         '--px4-dir', args.px4_dir, '--agent', args.agent, '--out', str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(rehearsal.stdout), daemon=True).start()
    deadline = time.monotonic() + 180.0
    while not any('every vehicle is heard' in line for line in lines):
        if rehearsal.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError('the rehearsal did not get ready: ' + ''.join(lines)[-800:])
        time.sleep(0.5)
    env = {**os.environ, 'FASTDDS_DEFAULT_PROFILES_FILE': str(out / 'fastdds.xml')}
    os.environ['FASTDDS_DEFAULT_PROFILES_FILE'] = env['FASTDDS_DEFAULT_PROFILES_FILE']
    watch = Px4Watch(names)
    flights, faults = [], []
    try:
        fleet('check', path, env)
        for flight in (1, 2):
            engage = time.time()
            fleet('engage', path, env)
            armed = max(watch.first(v, 'arming', ARMED, engage) for v in names) - engage
            ring = watch.ring(engage, RING_TIMEOUT) - engage
            if flight == 2:  # faults while the ring flies
                kill = time.time()
                os.kill(child_pid(rehearsal.pid, 'agent_node', '__ns:=/uav2'), signal.SIGKILL)
                time.sleep(3.0)
                hold = time.time()
                watch.ground_station_hold(3)
                time.sleep(KILL_WAIT)
                held = watch.first('uav3', 'nav', 4, hold)
                faults.append([
                    round(watch.first('uav2', 'nav', 18, kill) - kill, 1),
                    round(watch.first('uav2', 'landed', 1, kill) - kill, 1),
                    round(watch.first('uav2', 'arming', DISARMED, kill) - kill, 1),
                    round(held - hold, 1), watch.stray_setpoints(held, time.time())])
            land = time.time()
            fleet('land', path, env)
            landed = time.time()
            disarmed = max(watch.first(v, 'arming', DISARMED, land) for v in names
                           if flight == 1 or v != 'uav2') - land
            closest, pair = watch.closest(engage, landed)
            flights.append([n, flight, round(armed, 1), round(ring, 1), round(disarmed, 1),
                            f'{closest:.2f} ({pair})', watch.stray_setpoints(engage, landed)])
    finally:
        watch.close()
        rehearsal.send_signal(signal.SIGINT)
        rehearsal.wait(60)
    warnings = [re.sub(r'\[\d+\.\d+\] ', '', line.strip()) for line in lines
                if '[WARN]' in line or '[ERROR]' in line or 'WARN  [' in line
                or 'ERROR [' in line]
    return flights, faults, warnings


def require_px4(parser, px4_dir: str | None = None, agent: str | None = None) -> None:
    """
    Refuse in one line (``parser.error``) what no registry serves and a run needs.

    px4_msgs always; with ``px4_dir`` and ``agent`` (real PX4 SITL) also a SITL build of that
    tree and a Micro XRCE-DDS Agent, by the rehearsal's own checks. Checked before any run.
    """
    from soliton_encirclement_ros.fleet.rehearsal import agent_binary, px4_binary, RehearsalError
    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs
    try:
        if px4_dir is not None:
            px4_binary(px4_dir)
            agent_binary(agent)
        load_px4_msgs()
    except RehearsalError as error:
        parser.error(str(error))
    except ImportError as error:
        parser.error(f"needs px4_msgs built from PX4's messages and sourced: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    parser.add_argument('--vehicles', type=int, default=3, help='fleet size (3 or more)')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--px4-dir', default=os.environ.get('PX4_DIR', ''))
    parser.add_argument('--agent', default=os.environ.get('XRCE_AGENT', 'MicroXRCEAgent'))
    add_options(parser)
    args = parser.parse_args()
    require_px4(parser, args.px4_dir, args.agent)
    load = begin(args)
    flights, faults, warnings, lines = [], [], [], set()
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix='bench_px4_sitl_') as work:
            f, k, w = one_run(args, args.vehicles, Path(work))
        flights += [[run + 1, *row] for row in f]
        faults += [[run + 1, *row] for row in k]
        warnings.append([run + 1, len(w)])
        lines.update(w)
        print(f'run {run + 1}: {f} {k}', flush=True)
    results = {
        'flights': table(['run', 'vehicles', 'flight', 'command to all armed [s]',
                          'to the ring [s]', 'fleet land to all disarmed [s]',
                          'closest pair once apart [m]', 'setpoints outside OFFBOARD, armed'],
                         flights),
        'faults': table(['run', 'killed agent: to NAV_LAND [s]', 'to landed [s]',
                         'to disarmed [s]', 'ground station Hold: to Hold [s]',
                         'setpoints in that Hold'], faults),
        'warnings': table(['run', 'WARN/ERROR lines of the nodes and PX4'], warnings),
        'warning_lines': sorted(lines)}
    for name, t in results.items():
        if name == 'warning_lines':
            print(name, *t, sep='\n  ')
            continue
        print(name, t['columns'])
        for row in t['rows']:
            print('  ', row)
    save(args, f'px4_sitl_N{args.vehicles}', results, load)


if __name__ == '__main__':
    main()
