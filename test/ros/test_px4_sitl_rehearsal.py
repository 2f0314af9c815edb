"""
px4_sitl_rehearsal against real PX4 SITL (SIH): a field day rehearsed, as a team runs it.

Needs what no registry serves, so it skips without it, saying what is missing: a PX4 tree built
for SITL (``PX4_DIR``), a Micro XRCE-DDS Agent (``XRCE_AGENT`` or ``MicroXRCEAgent`` on PATH)
and a px4_msgs built from that firmware's messages (docs: Fly on PX4). CI has none of them.

Three vehicles from a fleet file: the rehearsal starts PX4, the agent and the fleet's nodes;
``fleet check`` passes, ``fleet engage`` arms all three and the ring forms, ``fleet land``
lands them (PX4 reports each landed and disarmed), and the same fleet engages, flies and lands
again. Ctrl-C stops the rehearsal with exit 0.
"""
import importlib.util
import os
from pathlib import Path
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from ros_support import distro
from support.harness import default_context_executor, spin_until
from support.px4_ring import every, RING_E_GAP
from support.waits import Running

PX4_DIR = os.environ.get('PX4_DIR', '')
AGENT = os.environ.get('XRCE_AGENT', 'MicroXRCEAgent')
MISSING = [what for what, ok in (
    ('PX4_DIR (a PX4 tree built with `make px4_sitl`)',
     PX4_DIR and (Path(PX4_DIR) / 'build/px4_sitl_default/bin/px4').is_file()),
    ('a Micro XRCE-DDS Agent (XRCE_AGENT, or MicroXRCEAgent on PATH)', shutil.which(AGENT)),
    ('px4_msgs', importlib.util.find_spec('px4_msgs') is not None)) if not ok]
pytestmark = pytest.mark.skipif(bool(MISSING), reason='real PX4 SITL needs ' + '; '.join(MISSING))

NAMES = ('uav1', 'uav2', 'uav3')
RADIUS, ALTITUDE = 20.0, 10.0
FLIGHT = 180.0  # s for a ring to form or a fleet to land, on a loaded machine

ros = pytest.fixture(default_context_executor)


def fleet_file(tmp_path):
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({
        'geo_reference': [47.397742, 8.545594, 488.0], 'radius': RADIUS, 'altitude': ALTITUDE,
        'vehicles': [{'name': name, 'agent_id': i + 1, 'px4_namespace': f'px4_{i + 1}',
                      'target_system': i + 1, 'host': f'c{i + 1}'}
                     for i, name in enumerate(NAMES)]}))
    return path


def fleet(action, path, env):
    done = subprocess.run([sys.executable, '-m', 'soliton_encirclement_ros.fleet.cli', action,
                           str(path)], capture_output=True, text=True, env=env, timeout=FLIGHT)
    return done.returncode, done.stdout + done.stderr


def test_a_field_day_rehearsed_on_px4_sitl_flies_lands_and_flies_again(ros, tmp_path):
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from rclpy.time import Time

    from soliton_encirclement_ros.core.metrics import compute_metrics
    path = fleet_file(tmp_path)
    out = tmp_path / 'rehearsal'
    command = [sys.executable, '-m', 'soliton_encirclement_ros.fleet.rehearsal', str(path),
               '--px4-dir', PX4_DIR, '--agent', AGENT, '--out', str(out)]
    with Running(command) as rehearsal:
        rehearsal.wait_for_line('every vehicle is heard and placed', timeout=FLIGHT)
        env = {**os.environ,
               **distro.current().fast_dds.profile_environment(str(out / 'fastdds.xml'))}
        odoms = {}
        observer = Node('rehearsal_observer')
        for name in NAMES:
            observer.create_subscription(Odometry, f'/{name}/odom',
                                         lambda msg, n=name: odoms.__setitem__(n, msg), 10)
        ros.add_node(observer)

        def ring():
            # odometry stamped after the engage: what came before is still queued
            fresh = {n: m for n, m in odoms.items() if Time.from_msg(
                m.header.stamp).nanoseconds * 1e-9 > engaged_wall}
            if len(fresh) < len(NAMES):
                return False
            p = np.array([[getattr(fresh[n].pose.pose.position, c) for c in 'xyz']
                          for n in NAMES])
            metrics = compute_metrics(p, np.zeros_like(p), np.zeros(3), np.zeros(3), RADIUS)
            return metrics.E_gap < RING_E_GAP and np.all(np.abs(p[:, 2] - ALTITUDE) < 0.5)
        code, text = fleet('check', path, env)
        assert code == 0 and 'all 27 checks passed' in text, text
        for flight in (1, 2):
            engaged, engaged_wall = time.monotonic(), time.time()
            code, text = fleet('engage', path, env)
            assert code == 0 and text.count(': engage ok:') == 3, text
            assert spin_until(ros, every(0.1, ring), timeout=FLIGHT), f'flight {flight}: no ring'
            formed = time.monotonic() - engaged
            started = time.monotonic()
            code, text = fleet('land', path, env)
            landed = time.monotonic() - started
            assert code == 0 and text.count(': land ok: landed: PX4 reports') == 3, text
            assert text.count('arming_state=1 (DISARMED), landed') == 3, text
            print(f'\nflight {flight}: ring {formed:.1f} s after the engage; every vehicle '
                  f'landed and disarmed {landed:.1f} s after fleet land\n{text}')
        rehearsal.send_signal(signal.SIGINT)
        code, stdout, stderr = rehearsal.wait(timeout=60.0)
    assert code == 0, stderr
    assert 'stopped;' in stdout
