"""Docstring style the ament way, as `ros2 pkg create` generates the test (ament_pep257)."""
from pathlib import Path

from ament_pep257.main import main
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ['ros_support', 'soliton_encirclement_ros', 'velocity_mobility_ros', 'test', 'launch',
           'benchmarks', 'scripts']


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257():
    rc = main(argv=[str(ROOT / p) for p in SOURCES])
    assert rc == 0, 'Found code style errors / warnings'
