"""
A sweep stopped by its surroundings: a full --out, a lost Dask cluster, a killed sweep_sim.

Run as a user would: a real full tmpfs (``support.disks``, skipped without root), a real Dask
scheduler process killed with SIGKILL, a real SIGKILL of ``sweep_sim``. Each failure is one
line and exit 3 with every finished row kept whole, and ``--resume`` finishes the sweep; a
killed ``sweep_sim`` takes its pool's workers with it at once.
"""
import fcntl
import json
import os
from pathlib import Path
import signal
import subprocess
import sys

import pytest

from soliton_encirclement_ros.sim.executables import find_executable
from soliton_encirclement_ros.sim.sweep import RESULT_COLUMNS
from support.disks import tmpfs
from support.procfs import (alive, children_of, command_line, cpu_seconds, descendants_of,
                            pool_servers)
from support.sweeps import rows as _rows, write_spec as _write_spec
from support.waits import wait_for

DEADLINE = 300.0  # wall s for a sweep to end (a loaded machine is slow)
ORPHAN_DEADLINE = 5.0  # wall s for the workers of a killed sweep_sim to be gone (SIGKILL)
CPU_STARTED = 4.0  # CPU s of a pool worker: past its imports, on its chunk
GAINS = [round(0.5 + 0.05 * k, 2) for k in range(40)]  # 40 groups: 40 chunks, one by one


def _sweep(spec: Path, out: Path, *options: str) -> list[str]:
    return [find_executable('sweep_sim'), str(spec), '--out', str(out), '--no-plots', *options]


def _errors(stderr: str) -> list[str]:
    assert 'Traceback' not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith('sweep_sim: error')]


def _long_sweep(tmp_path: Path, **popen) -> tuple[subprocess.Popen, Path]:
    """Start a sweep of 4 runs of hours on 2 workers (a worker left behind computes on)."""
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 8, 'duration': 20000.0, 'control_period': 0.05},
                       grid={'k_r': GAINS[:4]})
    out = tmp_path / 'sweep'
    return subprocess.Popen(_sweep(spec, out, '--workers', '2'), **popen), out


def _all_end(pids: list[int], what: str) -> None:
    """Wait until none of ``pids`` runs (fail naming ``what`` past ORPHAN_DEADLINE); kill them."""
    try:
        wait_for(lambda: not alive(pids), f'{what} ('
                 f'{", ".join(command_line(pid)[:60] for pid in alive(pids))}) to end',
                 timeout=ORPHAN_DEADLINE)
    finally:
        for pid in alive(pids):
            os.kill(pid, signal.SIGKILL)


def _whole_rows(out: Path) -> list[dict]:
    """Return the rows of runs.csv, each checked whole (every cell there, results numbers)."""
    rows = _rows(out)
    for row in rows:
        assert None not in row and all(value is not None for value in row.values()), row
        for column in RESULT_COLUMNS:
            if row[column]:
                float(row[column])
        assert not row['error'], row
    assert (out / 'runs.csv').read_bytes().endswith(b'\r\n')
    return rows


def test_a_full_out_is_one_line_exit_3_with_every_row_kept_and_resume_finishes(tmp_path):
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 4, 'duration': 3.0, 'control_period': 0.05},
                       grid={'k_r': GAINS})
    with tmpfs(tmp_path / 'disk', '64k') as disk:
        ballast = disk / 'ballast'
        ballast.write_bytes(b'\0' * (64 - 12) * 1024)  # about 12 kB left: a few rows fit
        out = disk / 'sweep'
        result = subprocess.run(_sweep(spec, out, '--workers', '1'), capture_output=True,
                                text=True, timeout=DEADLINE)
        assert result.returncode == 3, result.stderr
        [line] = _errors(result.stderr)
        kept = _whole_rows(out)
        assert 1 <= len(kept) < len(GAINS)
        assert line.startswith(f'sweep_sim: error: {out / "runs.csv"} not written beyond row '
                               f'{len(kept) + 1}: No space left on device (its {len(kept)} '
                               'finished rows are kept)'), line
        assert line.endswith('; --resume finishes the sweep'), line
        ballast.unlink()  # space freed
        done = subprocess.run(_sweep(spec, out, '--workers', '1', '--resume'),
                              capture_output=True, text=True, timeout=DEADLINE)
        assert done.returncode == 0, done.stderr
        assert 'warning' not in done.stderr  # no row was cut: nothing to drop
        rows = _whole_rows(out)
        assert sorted(float(row['k_r']) for row in rows) == GAINS
        assert all(row in rows for row in kept)
        assert json.loads((out / 'sweep.json').read_text())['totals']['finished'] == len(GAINS)


def _start_scheduler(tmp_path: Path) -> tuple[subprocess.Popen, subprocess.Popen, str]:
    """Start a Dask scheduler and a worker on loopback (processes); return them, the address."""
    dask = Path(sys.executable).with_name('dask')
    if not dask.exists():
        pytest.skip('the dask command is not installed (dask[distributed])')
    file = tmp_path / 'scheduler.json'
    logs = tmp_path / 'dask_logs'
    logs.mkdir()
    scheduler = subprocess.Popen(
        [str(dask), 'scheduler', '--host', '127.0.0.1', '--port', '0', '--no-dashboard',
         '--scheduler-file', str(file)], stdout=subprocess.DEVNULL,
        stderr=(logs / 'scheduler.log').open('w'), start_new_session=True)
    wait_for(lambda: file.exists() and file.read_text().strip(), 'the scheduler file',
             timeout=DEADLINE)
    address = json.loads(file.read_text())['address']
    worker_log = logs / 'worker.log'
    worker = subprocess.Popen(
        [str(dask), 'worker', '--scheduler-file', str(file), '--nworkers', '1', '--nthreads',
         '1', '--no-dashboard'], stdout=subprocess.DEVNULL, stderr=worker_log.open('w'),
        start_new_session=True)
    wait_for(lambda: 'Registered to' in worker_log.read_text(), 'the worker to register',
             timeout=DEADLINE)
    return scheduler, worker, address


def test_a_killed_dask_scheduler_is_one_line_exit_3_and_resume_finishes(tmp_path):
    pytest.importorskip('dask.distributed', reason='dask[distributed] missing')
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 8, 'duration': 15.0, 'control_period': 0.05},
                       grid={'k_r': GAINS})
    out = tmp_path / 'sweep'
    scheduler, worker, address = _start_scheduler(tmp_path)
    try:
        sweep = subprocess.Popen(_sweep(spec, out, '--scheduler', address),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: (out / 'runs.csv').exists() and _rows(out), 'a first row',
                     timeout=DEADLINE)
            scheduler.kill()  # SIGKILL
            scheduler.wait()
            _, stderr = sweep.communicate(timeout=DEADLINE)
        finally:
            sweep.kill()
    finally:
        for process in (scheduler, worker):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    assert sweep.returncode == 3, stderr
    [line] = _errors(stderr)
    # one line: nothing of Dask's own (its client's logs, their tracebacks), only the progress
    # bar's and that line
    said = [text for text in stderr.replace('\r', '\n').splitlines() if text.strip()]
    assert all(text.startswith('sweep_sim:') for text in said), stderr
    kept = _whole_rows(out)
    assert 1 <= len(kept) < len(GAINS)
    assert line.startswith(f'sweep_sim: error: lost the Dask cluster at {address} ('), line
    assert line.endswith('; --resume finishes the sweep'), line
    assert json.loads((out / 'sweep.json').read_text())['totals']['interrupted'] is True
    # the rest on this machine's cores (a cluster's rows equal the local ones)
    done = subprocess.run(_sweep(spec, out, '--resume', '--workers', '2'),
                          capture_output=True, text=True, timeout=DEADLINE * 2)
    assert done.returncode == 0, done.stderr
    rows = _whole_rows(out)
    assert sorted(float(row['k_r']) for row in rows) == GAINS
    assert all(row in rows for row in kept)


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_a_killed_sweep_takes_its_workers_with_it_at_once(tmp_path):
    sweep, _ = _long_sweep(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: _computing_workers(sweep.pid), 'two pool workers computing',
                 timeout=DEADLINE)
        below = descendants_of(sweep.pid)
    finally:
        sweep.kill()  # SIGKILL
        sweep.wait()
    _all_end(below, 'the processes of the killed sweep_sim')


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_a_second_sweep_into_a_held_folder_is_refused_before_any_work(tmp_path):
    # Two `sweep_sim --resume` into one folder at once both ran every missing run.
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 8, 'duration': 20000.0, 'control_period': 0.05},
                       grid={'k_r': GAINS[:2]})
    out = tmp_path / 'sweep'
    first = subprocess.Popen(_sweep(spec, out, '--workers', '1'),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # its header written (the file exists a moment before): the runs take hours, so the
        # rows stay as they are from then unless the second sweep touches them
        wait_for(lambda: first.poll() is not None or (
            (out / 'runs.csv').exists() and b'\n' in (out / 'runs.csv').read_bytes()),
            'the first sweep to start its runs', timeout=DEADLINE)
        assert first.poll() is None
        runs_before = (out / 'runs.csv').read_bytes()
        second = subprocess.Popen(_sweep(spec, out, '--workers', '1', '--resume'),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = second.communicate(timeout=DEADLINE)
        finally:  # a second sweep that ran would compute for hours
            second.kill()
            second.wait()
        assert second.returncode == 2, stderr
        assert stderr.strip() == (
            f'sweep_sim: error: --out {out} is in use: another sweep_sim (pid {first.pid}) '
            'holds it; wait for it to end, or choose another --out'), stderr
        assert first.poll() is None  # the first sweep goes on, its rows untouched
        assert (out / 'runs.csv').read_bytes() == runs_before
    finally:
        first.kill()  # SIGKILL: the kernel lets go of its lock
        first.wait()
    with open(out / '.lock') as lock:  # nothing stale: the next sweep may take the folder
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _computing_workers(pid: int) -> list[int]:
    """Return the pool workers once two have run for CPU_STARTED s each, else []."""
    workers = [child for server in pool_servers(pid)
               for child in children_of(server, zombies=False)]
    busy = [child for child in workers if cpu_seconds(child) >= CPU_STARTED]
    return busy if len(busy) >= 2 else []


def _starting_workers(pid: int) -> list[int]:
    """
    Return the pool's processes still starting (not yet ignoring Ctrl-C, as they do once up).

    The fork server while it loads the code, a worker before its initializer.
    """
    servers = pool_servers(pid)
    pool = servers + [child for server in servers for child in children_of(server, zombies=False)]
    return [child for child in pool if not _ignores(child, signal.SIGINT)]


def _ignores(pid: int, signum: int) -> bool:
    try:
        status = Path(f'/proc/{pid}/status').read_text()
    except OSError:
        return False
    ignored = next(line.split()[1] for line in status.splitlines() if line.startswith('SigIgn:'))
    return bool(int(ignored, 16) >> (signum - 1) & 1)


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
@pytest.mark.parametrize('when', ['workers starting', 'workers computing'])
def test_ctrl_c_in_a_terminal_stops_a_sweep_with_one_line_and_no_worker_left(tmp_path, when):
    # A terminal's Ctrl-C reaches the whole process group, the pool's workers too. One caught
    # while starting (before it ignored Ctrl-C) printed its KeyboardInterrupt traceback.
    sweep, out = _long_sweep(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    below: list[int] = []
    try:
        ready = _starting_workers if when == 'workers starting' else _computing_workers
        wait_for(lambda: ready(sweep.pid) or sweep.poll() is not None, f'pool {when}',
                 timeout=DEADLINE, period=0.002)
        below = descendants_of(sweep.pid)
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGINT)
        stdout, stderr = sweep.communicate(timeout=DEADLINE)
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, signal.SIGKILL)
            sweep.wait()
    try:
        assert sweep.returncode == 130, stderr
        assert 'Traceback' not in stderr and 'KeyboardInterrupt' not in stderr, stderr
        assert 'interrupted: --resume finishes it' in stdout, stdout
    finally:
        _all_end(below, 'the pool workers of the stopped sweep_sim')


def _server_of(workers: list[int]) -> int:
    """Return the fork server the pool's ``workers`` were forked from."""
    [server] = {int(Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[1])
                for pid in workers}
    return server


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
@pytest.mark.parametrize('victim', ['a worker', 'the fork server'])
def test_a_worker_killed_under_the_sweep_is_one_line_exit_3_not_a_wait_for_ever(tmp_path,
                                                                                victim):
    # The out-of-memory killer picks a pool worker: the pool replaced it, its chunk was lost,
    # and sweep_sim waited for its result for ever, at no CPU. Killing the fork server kills
    # its workers: the pool's worker handler died replacing them (a traceback), and the pool
    # then waited for ever as it ended.
    sweep, out = _long_sweep(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    below: list[int] = []
    try:
        workers = wait_for(lambda: _computing_workers(sweep.pid), 'two pool workers '
                           'computing', timeout=DEADLINE)
        below = descendants_of(sweep.pid)
        killed = workers[0] if victim == 'a worker' else _server_of(workers)
        os.kill(killed, signal.SIGKILL)
        stdout, stderr = sweep.communicate(timeout=DEADLINE)
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    try:
        assert sweep.returncode == 3, stderr
        [line] = _errors(stderr)
        if victim == 'a worker':
            assert line == (f'sweep_sim: error: a worker process of the sweep (pid {killed}) '
                            'was killed by SIGKILL; the runs it was computing are lost; '
                            '--resume finishes the sweep'), line
        else:  # not replaced by a second server (which started its workers without our path)
            assert line == (f"sweep_sim: error: the fork server of the sweep's workers (pid "
                            f'{killed}) was killed by SIGKILL; the runs its workers were '
                            'computing are lost; --resume finishes the sweep'), line
        assert 'Warning' not in stderr, stderr  # e.g. a plot's legend with no curve in it
        assert 'interrupted: --resume finishes it' in stdout, stdout
        assert json.loads((out / 'sweep.json').read_text())['totals']['interrupted'] is True
        _whole_rows(out)
    finally:
        _all_end(below, 'the other processes of the pool')
