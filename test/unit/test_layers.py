"""
The layers the tree states: the pure modules never import rclpy.

Each module is imported in a fresh interpreter, so what another test imported cannot hide an
import of rclpy (or of a module that imports it).
"""
import os
from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Every module of these packages is pure; the modules listed singly are the pure ones of a
# package that also holds shells.
PURE_PACKAGES = ['velocity_mobility_ros/core', 'soliton_encirclement_ros/core',
                 'soliton_encirclement_ros/analysis', 'soliton_encirclement_ros/sim',
                 'soliton_encirclement_ros/sim/sweep']
PURE_MODULES = ['ros_support.validation', 'ros_support.signals', 'ros_support.entry',
                'soliton_encirclement_ros.interface', 'soliton_encirclement_ros.bringup.graph',
                'soliton_encirclement_ros.px4.frames', 'soliton_encirclement_ros.px4.offboard',
                'soliton_encirclement_ros.px4.geo', 'soliton_encirclement_ros.fleet.fleet_file',
                'soliton_encirclement_ros.fleet.checks', 'soliton_encirclement_ros.fleet.cli',
                'soliton_encirclement_ros.nodes.settings', 'ros_support.settings',
                'soliton_encirclement_ros.provenance']
# The sim modules that run a ROS graph; the runner imports them only when it starts one.
SHELL_MODULES = {'soliton_encirclement_ros.sim.inprocess', 'soliton_encirclement_ros.sim.lockstep',
                 'soliton_encirclement_ros.sim.processes', 'soliton_encirclement_ros.sim.domain'}


def pure_modules() -> list[str]:
    names = list(PURE_MODULES)
    for package in PURE_PACKAGES:
        for path in sorted((ROOT / package).glob('*.py')):
            name = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
            names.append(name.removesuffix('.__init__'))
    return [n for n in names if n not in SHELL_MODULES]


@pytest.mark.parametrize('module', pure_modules())
def test_pure_module_does_not_import_rclpy(module):
    probe = (f'import sys, importlib; importlib.import_module({module!r}); '
             'print(sorted(m for m in sys.modules if m.split(".")[0] in ("rclpy", "rosbag2_py")))')
    result = subprocess.run([sys.executable, '-c', probe], cwd=ROOT, capture_output=True,
                            text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)}, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '[]', f'{module} imports {result.stdout.strip()}'
