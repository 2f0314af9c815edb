"""Docstring style the ament way, as `ros2 pkg create` generates the test (ament_pep257)."""
from pathlib import Path

from ament_pep257.main import main
import pytest

from support.lint_cache import LintRecord, tool_identity

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ['ros_support', 'soliton_encirclement_ros', 'velocity_mobility_ros', 'test', 'launch',
           'benchmarks', 'scripts', 'docs/hooks']


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257(request):
    # Every file, but one that passed with the same bytes and linter versions is not checked
    # again (support/lint_cache.py; --cache-clear checks all).
    record = LintRecord(request.config, 'pep257', ROOT, SOURCES, tool_identity(
        {'ament_pep257', 'pydocstyle'}, [ROOT / 'setup.cfg']))
    if not record.stale:
        return
    rc = main(argv=record.paths())
    assert rc == 0, 'Found code style errors / warnings'
    record.all_passed()
