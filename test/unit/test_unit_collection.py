"""
The unit tier collects every one of its tests where an optional extra is missing.

In a ROS workspace (``colcon test``) launch_testing's pytest plugin turns one module-level skip
(``pytest.importorskip`` at the top of a test file) into a skip of the whole directory: the
unit tier then "passes" with nothing run. The docs extra (MkDocs) is the optional one here:
the collection below runs with ``mkdocs`` made unimportable and must still collect tests from
every test file of ``test/unit``, with nothing skipped at collection.
"""
import os
from pathlib import Path
import re
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / 'test' / 'unit'
BLOCKER = '''\
import sys


class _NoMkdocs:
    """Make ``import mkdocs`` fail as on a machine without the docs extra."""

    def find_spec(self, name, path=None, target=None):
        if name == 'mkdocs' or name.startswith('mkdocs.'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoMkdocs())
'''


def test_every_unit_test_file_is_collected_without_mkdocs(tmp_path):
    (tmp_path / 'no_mkdocs.py').write_text(BLOCKER)
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(
        [str(tmp_path), *filter(None, [os.environ.get('PYTHONPATH')])])}
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '--collect-only', '-q', '-p', 'no_mkdocs',
         '-p', 'no:cacheprovider', str(UNIT)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert not re.search(r'\b[0-9]+ skipped\b', done.stdout), done.stdout[-3000:]
    collected = {line.split('::')[0] for line in done.stdout.splitlines() if '::' in line}
    files = {str(path.relative_to(ROOT)) for path in UNIT.rglob('test_*.py')}
    assert files - collected == set(), f'collected nothing from {sorted(files - collected)}'
