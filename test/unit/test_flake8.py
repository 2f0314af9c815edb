"""Code style the ament way, as `ros2 pkg create` generates the test (ament_flake8)."""
from importlib.metadata import entry_points
from pathlib import Path

from ament_flake8 import main as ament_flake8
import pytest

from support.lint_cache import LintRecord, tool_identity

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ['ros_support', 'soliton_encirclement_ros', 'velocity_mobility_ros', 'test', 'launch',
           'benchmarks', 'scripts', 'docs/hooks']
# The flake8 plugins a ROS install's ament_flake8 depends on, by the codes they add.
ROS_PLUGIN_CODES = {'A00', 'B90', 'C4', 'CNL', 'D', 'D001', 'I', 'Q0'}


def test_the_plugins_of_a_ros_install_are_loaded():
    codes = {ep.name for ep in entry_points(group='flake8.extension')}
    missing = sorted(c for c in ROS_PLUGIN_CODES if not any(k.startswith(c) for k in codes))
    assert not missing, f'flake8 plugins missing for codes {missing}: the lint would check less'


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8(request):
    # Every file, but one that passed with the same bytes, setup.cfg and flake8 plugins is not
    # checked again (support/lint_cache.py; --cache-clear checks all). flake8 runs a process per
    # core (its --jobs default).
    plugins = {ep.dist.name for group in ('flake8.extension', 'flake8.report')
               for ep in entry_points(group=group) if ep.dist is not None}
    record = LintRecord(request.config, 'flake8', ROOT, SOURCES, tool_identity(
        {'ament_flake8', 'flake8', 'pycodestyle', 'pyflakes', 'pydocstyle', *plugins},
        [ROOT / 'setup.cfg']))
    if not record.stale:
        return
    # setup.cfg's [flake8] is ament_flake8.ini plus application-import-names.
    rc, errors = ament_flake8.main_with_errors(
        argv=['--config', str(ROOT / 'setup.cfg'), *record.paths()])
    assert rc == 0, f'Found {len(errors)} code style errors / warnings:\n' + '\n'.join(errors)
    record.all_passed()
