"""
The layers the tree states: the pure modules never import rclpy.

Each module is imported in an interpreter of its own, so what another test imported cannot
hide an import of rclpy (or of a module that imports it): a child forked from one interpreter
that has imported only the libraries below (``support/import_probe.py``), not a fresh
interpreter per module, which paid Python's start-up and numpy's and matplotlib's imports 62
times (13 s of CPU).
"""
import importlib.util
import json
import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parents[1] / 'support' / 'import_probe.py'
# Every module of these packages is pure; the modules listed singly are the pure ones of a
# package that also holds shells.
PURE_PACKAGES = ['velocity_mobility_ros/core', 'soliton_encirclement_ros/core',
                 'soliton_encirclement_ros/analysis', 'soliton_encirclement_ros/sim',
                 'soliton_encirclement_ros/sim/sweep', 'soliton_encirclement_ros/px4/sequencer']
PURE_MODULES = ['ros_support.validation', 'ros_support.signals', 'ros_support.entry',
                'soliton_encirclement_ros.interface', 'soliton_encirclement_ros.bringup.graph',
                'soliton_encirclement_ros.px4.frames', 'soliton_encirclement_ros.px4.offboard',
                'soliton_encirclement_ros.px4.geo', 'soliton_encirclement_ros.fleet.fleet_file',
                'soliton_encirclement_ros.fleet.checks', 'soliton_encirclement_ros.fleet.cli',
                'soliton_encirclement_ros.fleet.board',
                'soliton_encirclement_ros.nodes.settings', 'ros_support.settings',
                'soliton_encirclement_ros.provenance', 'soliton_encirclement_ros.live.authority']
# The sim modules that run a ROS graph; the runner imports them only when it starts one.
SHELL_MODULES = {'soliton_encirclement_ros.sim.inprocess', 'soliton_encirclement_ros.sim.lockstep',
                 'soliton_encirclement_ros.sim.processes', 'soliton_encirclement_ros.sim.domain',
                 'soliton_encirclement_ros.sim.engine_graph',
                 'soliton_encirclement_ros.sim.lockstep_graph'}
ROS_PACKAGES = ['rclpy', 'rosbag2_py']
# Libraries the pure modules import, imported once before the children fork (every module
# fails if one of them loads a ROS package).
PRELOAD = ['numpy', 'scipy.optimize', 'yaml', 'matplotlib.pyplot',
           'matplotlib.backends.backend_agg', 'rosbags.highlevel', 'rosbags.rosbag2',
           'rosbags.typesys', 'mcap.reader', 'mcap_ros2.decoder', 'pymap3d', 'shapely',
           'transforms3d.euler', 'transforms3d.quaternions']
# A module that does import rclpy, probed alongside: the probe must see it.
CONTROL = 'rclpy.node'


def pure_modules() -> list[str]:
    names = list(PURE_MODULES)
    for package in PURE_PACKAGES:
        for path in sorted((ROOT / package).glob('*.py')):
            name = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
            names.append(name.removesuffix('.__init__'))
    return [n for n in names if n not in SHELL_MODULES]


@pytest.fixture(scope='module')
def imported():
    """Probe every pure module in one run: what each loads of the ROS packages."""
    request = {'preload': PRELOAD, 'modules': [*pure_modules(), CONTROL], 'watch': ROS_PACKAGES}
    result = subprocess.run([sys.executable, '-c', PROBE.read_text()], cwd=ROOT,
                            input=json.dumps(request), capture_output=True, text=True,
                            env={**os.environ, 'PYTHONPATH': str(ROOT)}, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found['preload'] == [], f'the preloaded libraries import {found["preload"]}'
    return found


@pytest.mark.parametrize('module', pure_modules())
def test_pure_module_does_not_import_rclpy(imported, module):
    error = imported[module].get('error', '')
    if "No module named 'numba'" in error and importlib.util.find_spec('numba') is None:
        pytest.skip(f'{module} needs numba (the standalone extra), not installed here')
    assert 'error' not in imported[module], error
    assert imported[module]['loaded'] == [], f'{module} imports {imported[module]["loaded"]}'


def test_the_probe_sees_a_module_that_imports_rclpy(imported):
    assert 'rclpy' in imported[CONTROL]['loaded'], imported[CONTROL]
