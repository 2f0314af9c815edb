"""
px4_sitl_rehearsal: rehearse a field day on PX4 SITL, from the fleet file the team will fly.

    PX4_DIR=~/PX4-Autopilot px4_sitl_rehearsal fleet.yaml [--out DIR] [--record]

Given the team's own PX4 source tree, built for SITL (``make px4_sitl``), and a Micro
XRCE-DDS Agent, it starts on this machine, headless (PX4's SIH simulator, no Gazebo):

- one PX4 quadrotor per vehicle of the fleet file (SITL instance 1, 2, ... in the file's
  order): its ``MAV_SYS_ID`` the vehicle's ``target_system``, its uXRCE-DDS namespace the
  vehicle's ``px4_namespace``, its GPS home the fleet's ``geo_reference`` moved by the vehicle's
  ``origin`` (or, without one, on a line 3 m apart south of the field's origin), so that each
  bridge places its vehicle from GPS as on the field;
- one Micro XRCE-DDS Agent on UDP port 8888 (loopback) for all of them;
- each vehicle's companion computer: the nodes its ``fleet launch-commands`` line starts
  (``px4_bridge_node`` and ``agent_node``, with the same parameters; ``--no-companions``: none,
  run the launch lines yourself), and the ground station's target (``target_node``, static at
  the field's origin); with ``--record``, ``run_recorder``.

It prints when every vehicle is heard and placed; the team then rehearses from another
terminal with the same commands as on the field: ``fleet check FILE``, ``fleet engage FILE``,
``fleet land FILE`` (and ``analyze_run BAG --report``). A process that exits (a killed agent, a
crashed PX4) is named once and the rest run on. Ctrl-C (or SIGTERM) stops everything, prints
the warnings and errors each node logged, and exits 0. Every process's output is in
``OUT/logs``. A Fast DDS profile (``OUT/fastdds.xml``) lets the processes of a host whose
only network is loopback find each other (Fast DDS's default ``maxInitialPeersRange`` of 4 is
too few for a fleet's participants): export the variable it prints (Fast DDS 3, Kilted:
``FASTDDS_DEFAULT_PROFILES_FILE``; Fast DDS 2, Jazzy: ``FASTRTPS_DEFAULT_PROFILES_FILE``) to it
in the terminals of the rehearsal. Errors are one line; exit 2 for a bad fleet file or setup.
"""
from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import time
from typing import Optional

from ros_support import distro
from ros_support.lifeline import die_with_parent
from ros_support.signals import StopRequest
from soliton_encirclement_ros.fleet.fleet_file import Fleet, load_fleet

AGENT_PORT = 8888
AIRFRAME = '10040'          # PX4's SIH quadrotor (ROMFS airframe 10040_sihsim_quadx)
SPAWN_SPACING = 3.0         # m between vehicles without an origin in the fleet file
SPAWN_SOUTH = 6.0           # m south of the field's origin, that line
READY_TIMEOUT = 180.0       # s for every vehicle to be heard and placed
STOP_TIMEOUT = 10.0         # s a process gets after SIGINT/SIGTERM before SIGKILL
PEERS_RANGE = 32            # Fast DDS participants per host found on loopback
FASTDDS_PROFILE = f"""<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>rehearsal_udp</transport_id>
        <type>UDPv4</type>
        <maxInitialPeersRange>{PEERS_RANGE}</maxInitialPeersRange>
      </transport_descriptor>
    </transport_descriptors>
    <participant profile_name="rehearsal" is_default_profile="true">
      <rtps>
        <userTransports>
          <transport_id>rehearsal_udp</transport_id>
        </userTransports>
        <useBuiltinTransports>false</useBuiltinTransports>
        <builtin>
          <initialPeersList>
            <locator><udpv4><address>127.0.0.1</address></udpv4></locator>
          </initialPeersList>
        </builtin>
      </rtps>
    </participant>
  </profiles>
</dds>
"""


class RehearsalError(ValueError):
    """A fleet file or a setup the rehearsal cannot run: one line, exit 2."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='px4_sitl_rehearsal',
                                description=__doc__.split('\n\n')[0].strip())
    p.add_argument('fleet_file', metavar='FILE', help='the fleet file (YAML) to rehearse')
    p.add_argument('--px4-dir', default=os.environ.get('PX4_DIR', ''), metavar='DIR',
                   help='PX4 source tree built with `make px4_sitl` (default: $PX4_DIR)')
    p.add_argument('--agent', default=os.environ.get('XRCE_AGENT', 'MicroXRCEAgent'),
                   metavar='PATH', help='the Micro XRCE-DDS Agent (default: $XRCE_AGENT, '
                   'else MicroXRCEAgent on PATH)')
    p.add_argument('--out', default='', metavar='DIR',
                   help='logs, PX4 working directories and the bag (default: '
                   'runs/rehearsal-<time>)')
    p.add_argument('--record', action='store_true',
                   help='record the flight (run_recorder) into OUT/bag for analyze_run')
    p.add_argument('--no-companions', action='store_true',
                   help="start PX4, the XRCE agent and the ground station's target only: run "
                   "each companion's `fleet launch-commands` line yourself, as on the field")
    p.add_argument('--ready-timeout', type=float, default=READY_TIMEOUT, metavar='S',
                   help='wait this long for every vehicle to be heard and placed (default '
                   f'{READY_TIMEOUT:g})')
    return p


# ---- the plan (no processes) ---------------------------------------------------------------
def px4_binary(px4_dir: str) -> tuple[Path, Path]:
    """Return (the px4 binary, its etc directory) of a PX4 tree built for SITL."""
    if not px4_dir:
        raise RehearsalError('no PX4 tree: give --px4-dir or set PX4_DIR to a PX4-Autopilot '
                             'source tree built with `make px4_sitl`')
    build = Path(px4_dir).expanduser() / 'build' / 'px4_sitl_default'
    binary, etc = build / 'bin' / 'px4', build / 'etc'
    if not binary.is_file() or not (etc / 'init.d-posix' / 'rcS').is_file():
        raise RehearsalError(f'{px4_dir} has no SITL build ({binary} missing): run `make '
                             'px4_sitl` in it first')
    return binary, etc


def agent_binary(agent: str) -> str:
    """Return the Micro XRCE-DDS Agent's path, or say how to get one."""
    found = shutil.which(agent)
    if found is None:
        raise RehearsalError(f"no Micro XRCE-DDS Agent at {agent!r}: build eProsima's "
                             'Micro-XRCE-DDS-Agent (v2 or v3) and give --agent PATH or set '
                             'XRCE_AGENT')
    return found


def spawns(fleet: Fleet) -> dict[str, tuple[float, float, float]]:
    """
    Return each vehicle's spawn in world ENU: its fleet-file origin, or a line 3 m apart.

    Checks what one machine needs of the file: a geo_reference (the homes are GPS points), a
    MAV_SYS_ID (target_system) and a uXRCE-DDS namespace of its own for each vehicle, spawns
    at least d_safe apart, inside the safety area.
    """
    if not fleet.geo_reference:
        raise RehearsalError('the fleet file has no geo_reference: the rehearsal places each '
                             "PX4's GPS home about it")
    seen: dict = {}
    for vehicle in fleet.vehicles:
        for key, value in (('target_system', vehicle.target_system),
                           ('px4_namespace', vehicle.px4_namespace)):
            if (key, value) in seen:
                raise RehearsalError(
                    f'{seen[(key, value)]} and {vehicle.name} share {key} {value!r}: on one '
                    'machine every vehicle needs its own (one PX4 each, on one XRCE agent)')
            seen[(key, value)] = vehicle.name
    n = len(fleet.vehicles)
    places = {v.name: tuple(v.origin) if v.origin else
              (SPAWN_SPACING * (k - (n - 1) / 2.0), -SPAWN_SOUTH, 0.0)
              for k, v in enumerate(fleet.vehicles)}
    names = list(places)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            gap = math.dist(places[a][:2], places[b][:2])
            if gap < fleet.d_safe:
                raise RehearsalError(f'{a} and {b} would spawn {gap:.2f} m apart, closer than '
                                     f'd_safe {fleet.d_safe:g} m: give them origins apart')
    if fleet.area is not None:
        from soliton_encirclement_ros.core.area import outside_text
        for name, place in places.items():
            outside = outside_text(fleet.area, place)
            if outside is not None:
                raise RehearsalError(f'{name} would spawn outside the safety area ({outside})'
                                     ': give it an origin inside')
    return places


def px4_environment(fleet: Fleet, vehicle, spawn) -> dict[str, str]:
    """
    Return the environment PX4 SITL's rcS reads for one vehicle: airframe, id, namespace, home.

    ``PX4_PARAM_<NAME>`` sets a PX4 parameter after rcS's own defaults (rcS sets MAV_SYS_ID to
    the instance + 1 first).
    """
    import pymap3d
    lat, lon, alt = pymap3d.enu2geodetic(*spawn, *fleet.geo_reference)
    return {'PX4_SYS_AUTOSTART': AIRFRAME, 'PX4_SIMULATOR': 'sihsim',
            'PX4_SIM_MODEL': 'sihsim_quadx', 'HEADLESS': '1',
            'PX4_PARAM_MAV_SYS_ID': str(vehicle.target_system),
            'PX4_UXRCE_DDS_NS': vehicle.px4_namespace, 'PX4_UXRCE_DDS_PORT': str(AGENT_PORT),
            'PX4_HOME_LAT': f'{lat:.9f}', 'PX4_HOME_LON': f'{lon:.9f}',
            'PX4_HOME_ALT': f'{alt:.3f}'}


def companion_nodes(fleet: Fleet, vehicle) -> list:
    """Return the NodeSpecs of one vehicle's companion: what its launch line starts."""
    from soliton_encirclement_ros.bringup.graph import LaunchArguments
    from soliton_encirclement_ros.bringup.launch_plans import agent_px4_nodes
    from soliton_encirclement_ros.fleet.fleet_file import launch_arguments
    given = dict(argument.split(':=', 1) for argument in launch_arguments(fleet, vehicle))
    values = {'origin': '0,0,0', 'geo_reference': '', 'allow_no_separation': 'false',
              'params_file': '', 'simulated': '', 'safety_area': '', **given}
    return agent_px4_nodes(LaunchArguments(values, given=given))


def ground_nodes(fleet: Fleet) -> list:
    """Return the ground station's nodes: the target, static at the field's origin."""
    from soliton_encirclement_ros.bringup.graph import NodeSpec
    return [NodeSpec('target_node', 'target', '/target', parameters={
        'target_motion': 'static', 'swarm_reliability': fleet.swarm_reliability})]


# ---- the processes ---------------------------------------------------------------------------
class Processes:
    """The rehearsal's processes, each with its log; stopped in reverse order."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.running: list[tuple[str, subprocess.Popen, Path]] = []
        self._reported: set[str] = set()

    def start(self, name: str, command: list[str], cwd: Optional[Path] = None,
              env: Optional[dict] = None, stop_signal=signal.SIGINT) -> subprocess.Popen:
        log = self.logs / f'{name}.log'
        with open(log, 'w') as out:
            process = subprocess.Popen(command, cwd=cwd, env={**self.env, **(env or {})},
                                       stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=die_with_parent())
        process.stop_signal = stop_signal
        self.running.append((name, process, log))
        return process

    def newly_dead(self) -> list[str]:
        """Return the processes that exited since the last call, with their exit codes."""
        dead = []
        for name, process, _ in self.running:
            if process.poll() is not None and name not in self._reported:
                self._reported.add(name)
                dead.append(f'{name} (exit {process.returncode})')
        return dead

    def stop(self) -> None:
        for name, process, _ in reversed(self.running):
            if process.poll() is None:
                process.send_signal(process.stop_signal)
        deadline = time.monotonic() + STOP_TIMEOUT
        for name, process, _ in self.running:
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def warnings(self) -> list[str]:
        """Return every WARN or ERROR line the processes logged, prefixed with their name."""
        lines = []
        for name, _, log in self.running:
            for line in log.read_text(errors='replace').splitlines():
                if '[WARN]' in line or '[ERROR]' in line or 'ERROR [' in line \
                        or 'WARN  [' in line:
                    lines.append(f'{name}: {line.strip()}')
        return lines


def _say(text: str) -> None:
    print(f'px4_sitl_rehearsal: {text}', flush=True)


def run(args, fleet: Fleet, stop: StopRequest) -> int:
    binary, etc = px4_binary(args.px4_dir)
    agent = agent_binary(args.agent)
    places = spawns(fleet)
    from soliton_encirclement_ros.sim.executables import find_executable
    out = Path(args.out or f'runs/rehearsal-{time.strftime("%Y%m%d-%H%M%S")}').resolve()
    (out / 'logs').mkdir(parents=True, exist_ok=True)
    profile = out / 'fastdds.xml'
    profile.write_text(FASTDDS_PROFILE)
    env = {**os.environ, **distro.current().fast_dds.profile_environment(str(profile))}
    processes = Processes(out / 'logs', env)
    try:
        processes.start('xrce_agent', [agent, 'udp4', '-p', str(AGENT_PORT)],
                        stop_signal=signal.SIGTERM)
        for instance, vehicle in enumerate(fleet.vehicles, start=1):
            work = out / 'px4' / vehicle.name
            if work.exists():
                shutil.rmtree(work)  # a fresh PX4: its parameters and dataman from scratch
            work.mkdir(parents=True)
            processes.start(f'px4_{vehicle.name}', [str(binary), '-i', str(instance), '-d',
                                                    str(etc)], cwd=work,
                            env=px4_environment(fleet, vehicle, places[vehicle.name]),
                            stop_signal=signal.SIGTERM)
            _say(f'{vehicle.name}: PX4 SITL instance {instance} (MAV_SYS_ID '
                 f'{vehicle.target_system}, namespace {vehicle.px4_namespace!r}) at '
                 + ', '.join(f'{c:.1f}' for c in places[vehicle.name]) + ' m from the origin')
        specs = [] if args.no_companions else [
            spec for v in fleet.vehicles for spec in companion_nodes(fleet, v)]
        specs += ground_nodes(fleet)
        for spec in specs:
            processes.start(spec.full_name.strip('/').replace('/', '_'),
                            [find_executable(spec.executable, spec.package), *spec.ros_args()])
        if args.record:
            processes.start('recorder', [find_executable('run_recorder'), '-o',
                                         str(out / 'bag')])
        _say(f'{len(fleet.vehicles)} PX4, the agent and {len(specs)} nodes started; logs in '
             f'{out / "logs"}')
        if args.no_companions:
            _say(f'now run each line of `fleet launch-commands {fleet.path}` (with '
                 f'{profile_variable()}={profile} exported)')
        return watch(args, fleet, processes, profile, stop)
    finally:
        processes.stop()
        warnings = processes.warnings()
        _say(f'stopped; {len(warnings)} WARN/ERROR line(s) logged'
             + (':' if warnings else ''))
        for line in warnings:
            print(f'  {line}', flush=True)


def profile_variable() -> str:
    """Return the variable this distribution's Fast DDS reads the profile file from."""
    return distro.current().fast_dds.profiles_variable


def watch(args, fleet: Fleet, processes: Processes, profile: Path, stop: StopRequest) -> int:
    """
    Say when the fleet is heard and placed, then run until stopped.

    A process that exits is named once (a killed agent, a crashed PX4 are what a rehearsal
    may rehearse); the others run on.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.signals import SignalHandlerOptions

    from soliton_encirclement_ros.fleet.checks import render
    from soliton_encirclement_ros.fleet.live import FleetOperator

    os.environ.update(distro.current().fast_dds.profile_environment(str(profile)))
    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = Node(f'px4_sitl_rehearsal_{os.getpid()}')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    operator = FleetOperator(node, fleet)
    started, said = time.monotonic(), False
    try:
        while not stop.requested:
            executor.spin_once(timeout_sec=0.2)
            dead = processes.newly_dead()
            if dead:
                _say(f'{", ".join(dead)} exited (its log is in {processes.logs}); the rest run '
                     'on')
            placed = all(v.get('origin_enu', 'none') != 'none' for v in (
                (operator.status_since(x.bridge, 0.0) or {}) for x in fleet.vehicles))
            if not said and operator.heard_all() and placed and operator.positions_known():
                said = True
                _say(f'every vehicle is heard and placed by GPS '
                     f'({time.monotonic() - started:.0f} s). In another terminal:\n'
                     f'  export {profile_variable()}={profile}\n'
                     f'  fleet check {fleet.path}\n  fleet engage {fleet.path}\n'
                     f'  fleet land {fleet.path}\n'
                     'Ctrl-C here stops the rehearsal.')
            elif not said and time.monotonic() - started > args.ready_timeout:
                said = True
                _say(f'not every vehicle is ready after {args.ready_timeout:g} s; the fleet '
                     'check as heard now:\n' + render(operator.check()))
        return 0
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


def main(argv=None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    stop = StopRequest('px4_sitl_rehearsal').install()
    try:
        fleet = load_fleet(args.fleet_file)
        return run(args, fleet, stop)
    except (RehearsalError, ValueError) as error:
        print(f'px4_sitl_rehearsal: error: {error}', file=sys.stderr)
        return 2
    finally:
        StopRequest.ignore_from_now()


if __name__ == '__main__':
    sys.exit(main())
