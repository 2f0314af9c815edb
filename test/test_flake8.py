"""Code style the ament way, as `ros2 pkg create` generates the test (ament_flake8, line length
99; the configuration is setup.cfg's [flake8] section)."""
from pathlib import Path

import pytest
from ament_flake8 import main as ament_flake8

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ['soliton_encirclement_ros', 'velocity_mobility_ros', 'test', 'launch', 'benchmarks']


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8():
    rc, errors = ament_flake8.main_with_errors(
        argv=['--config', str(ROOT / 'setup.cfg'), *[str(ROOT / p) for p in SOURCES]])
    assert rc == 0, f'Found {len(errors)} code style errors / warnings:\n' + '\n'.join(errors)
