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


HANGS_AT_EXIT = """
import atexit, threading

def main():
    print('done', flush=True)
    print('held in the buffer')  # no flush: the exit's own flush never comes
    atexit.register(threading.Event().wait)  # a library's exit handler that never returns
    return STATUS
"""


def test_an_exit_handler_that_never_returns_does_not_keep_the_process(tmp_path):
    """
    Once ``main`` returned, a hung interpreter exit ends after ``EXIT_LIMIT_S`` with one line.

    The exit status is still main's, and what it printed still reaches stdout.
    """
    for status in (0, 3):
        (tmp_path / 'hangs_at_exit.py').write_text(HANGS_AT_EXIT.replace('STATUS', str(status)))
        code = ('import sys\n'
                'from ros_support import entry\n'
                'entry.EXIT_LIMIT_S = 0.5\n'
                'sys.exit(entry.run("hangs_at_exit", "hangs_at_exit"))\n')
        done = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120,
                              env={**os.environ, 'PYTHONPATH': f'{ROOT}{os.pathsep}{tmp_path}'})
        assert done.returncode == status, done.stderr
        assert done.stdout.splitlines() == ['done', 'held in the buffer']
        assert done.stderr.strip() == ('hangs_at_exit: the interpreter did not finish exiting '
                                       'within 0.5 s; exiting without it')
