"""What a console script leaves to its process's exit: the cyclic collector's work on it."""
import json
import os
from pathlib import Path
import subprocess
import sys

ROOT = Path(__file__).resolve().parents[3]


def test_an_executable_freezes_its_objects_once_main_returns(tmp_path):
    """
    After ``main``, ``entry.run`` freezes every object: the exit does not collect over them.

    (batch_sim: a short run in a fresh interpreter; the exit status and outputs are main's.)
    """
    out = tmp_path / 'run'
    code = ('import gc, json, sys\n'
            'from ros_support import entry\n'
            f'sys.argv = ["batch_sim", "--agents", "2", "--duration", "0.2", "--no-plots", '
            f'"--out", {str(out)!r}]\n'
            'before = gc.get_freeze_count()\n'
            'status = entry.run("batch_sim", "soliton_encirclement_ros.sim.batch_sim")\n'
            'print(json.dumps([status, before, gc.get_freeze_count()]))\n')
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, 'PYTHONPATH': str(ROOT)}, timeout=120)
    assert done.returncode == 0, done.stderr
    status, before, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert (status, before) == (0, 0)
    assert after > 10_000  # every module, function and class made until then
    assert (out / 'metrics.csv').read_text().count('\n') > 1
