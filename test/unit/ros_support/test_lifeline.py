"""A child bound to its parent dies with it, also when the parent died before the binding."""
import os
from pathlib import Path
import subprocess
import sys
import textwrap

import pytest

from support.procfs import alive
from support.waits import wait_for

DEADLINE = 60.0  # wall s (a loaded machine is slow)

# The child waits until its parent is gone, then binds to it, as a pool worker whose sweep
# was killed during its start-up would; it must end there and never write its marker.
CHILD = textwrap.dedent("""
    import os, sys, time
    from ros_support.lifeline import bind_to_parent
    parent = int(sys.argv[1])
    while os.getppid() == parent:
        time.sleep(0.01)
    open(sys.argv[2] + '.reached', 'w').write('about to bind')
    bind_to_parent(parent)
    open(sys.argv[2], 'w').write('survived')
""")
# The parent starts the child and ends at once.
PARENT = textwrap.dedent("""
    import os, subprocess, sys
    child = subprocess.Popen([sys.executable, '-c', sys.argv[1], str(os.getpid()), sys.argv[2]])
    print(child.pid, flush=True)
""")


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_a_child_whose_parent_ended_before_it_was_bound_ends_at_once(tmp_path):
    marker = tmp_path / 'survived'
    started = subprocess.run([sys.executable, '-c', PARENT, CHILD, str(marker)],
                             capture_output=True, text=True, timeout=DEADLINE,
                             cwd=Path(__file__).parents[3])
    child = int(started.stdout.split()[0])
    try:
        wait_for(lambda: not alive([child]), 'the orphaned child to end', timeout=DEADLINE)
    finally:
        if alive([child]):
            os.kill(child, 9)
    assert Path(f'{marker}.reached').exists() and not marker.exists()


# A console script's pool: its spawned worker imports the script (ros_support.entry, which
# records SIGTERM in an executable), then says whether it still catches SIGTERM; the pool is
# then terminated.
POOL_SCRIPT = textwrap.dedent("""
    import multiprocessing, os
    from ros_support.entry import EXECUTABLES
    from ros_support.lifeline import start_pool_worker

    def sigterm_caught():
        mask = open(f'/proc/{os.getpid()}/status').read().split('SigCgt:')[1].split()[0]
        return bool(int(mask, 16) >> 14 & 1)  # bit 14: signal 15, SIGTERM

    if __name__ == '__main__':
        pool = multiprocessing.get_context('spawn').Pool(
            1, initializer=start_pool_worker, initargs=(os.getpid(),))
        print(pool.apply(sigterm_caught), flush=True)
        pool.terminate()
        pool.join()
        print('terminated', flush=True)
""")


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_a_pool_worker_of_a_console_script_ends_on_terminate(tmp_path):
    # sweep_sim --resume --workers 2 hung at its end: Pool.terminate sent SIGTERM to a worker
    # that had taken the entry shim's early handler, which only records it.
    script = tmp_path / 'sweep_sim'  # an executable's name: the entry shim installs its handler
    script.write_text(POOL_SCRIPT)
    try:
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=DEADLINE, start_new_session=True)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f'the pool did not terminate its worker: {expired.stdout!r}')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['False', 'terminated']
