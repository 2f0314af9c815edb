"""Scheduling a sweep's runs: chunks of runs that share a numpy step, on a local pool or Dask."""
from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing
from multiprocessing import resource_tracker
import multiprocessing.pool
import os
import signal
import sys
import time
import traceback
from typing import Any, Iterable, Iterator

import numpy as np

from ros_support.lifeline import POOL_START_SIGNALS, start_pool_worker
from soliton_encirclement_ros.analysis.report import SETTLE_THRESHOLDS, summarise
from soliton_encirclement_ros.core import batch_engine
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.provenance import code_identity
from soliton_encirclement_ros.sim.sweep.spec import Checked, Run

# Largest R * N^2 of one chunk of the receiver x sender engine; above it, runs go one by one
# through batch_sim's own engines (O(N log N) per tick for lossless large swarms).
CHUNK_BUDGET = 10_000
SINGLE_RUN_AGENTS = 64
# Chunks handed to each worker at a time (the others wait in the run generator), and the most
# generated runs waiting for their chunk to fill: memory does not grow with the sweep.
CHUNKS_IN_FLIGHT_PER_WORKER = 2
MAX_WAITING_RUNS = 20_000


def chunk_size(agents: int, group_runs: int, workers: int) -> int:
    """
    Return the runs per chunk of a group.

    At most ``CHUNK_BUDGET / N^2``, cut so that every worker gets work; large swarms one by one.
    """
    size = 1 if agents > SINGLE_RUN_AGENTS else max(1, CHUNK_BUDGET // (agents * agents))
    return max(1, min(size, math.ceil(group_runs / max(1, workers))))


def chunks(runs: list[Run], workers: int) -> list[list[Run]]:
    """
    Split a list of ``runs`` (each with a :class:`Scenario`) into chunks stepped together.

    Runs of one :func:`batch_engine.group_key` share a chunk (see :func:`chunk_size`).
    """
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(batch_engine.group_key(run.scenario), []).append(run)
    out = []
    for members in groups.values():
        size = chunk_size(members[0].scenario.agents, len(members), workers)
        out += [members[k:k + size] for k in range(0, len(members), size)]
    return out


def stream_chunks(runs: Iterable[Run], checked: Checked, workers: int) -> Iterator[list[Run]]:
    """
    Yield the chunks of a spec's ``runs`` as they fill (or their group ends), never all at once.

    Chunk sizes as :func:`chunks` gives them for the whole group; at most
    ``MAX_WAITING_RUNS`` runs wait for their chunk to fill (the fullest goes first).
    """
    sizes = [chunk_size(n, total, workers)
             for n, total in zip(checked.group_agents, checked.group_runs)]
    filling: dict[int, list[Run]] = {}
    waiting = 0
    for run in runs:
        bucket = filling.setdefault(run.group, [])
        bucket.append(run)
        waiting += 1
        if len(bucket) >= sizes[run.group]:
            waiting -= len(bucket)
            yield filling.pop(run.group)
        elif waiting > MAX_WAITING_RUNS:
            fullest = max(filling, key=lambda g: len(filling[g]))
            waiting -= len(filling[fullest])
            yield filling.pop(fullest)
    yield from filling.values()


def run_chunk(scenarios: list[dict]) -> list[dict]:
    """
    Simulate runs (scenario mappings) together; a result row per run.

    A chunk that raises is run again one run at a time, so a run that fails is recorded with
    its error and the others are not lost. Runs in the worker process, also on a Dask worker.
    """
    start = time.perf_counter()
    try:
        built = [Scenario.from_mapping(s) for s in scenarios]
        series, margins = _simulate(built)
        wall = (time.perf_counter() - start) / len(scenarios)
        return [_row(m, wall, margin) for m, margin in zip(series, margins)]
    except Exception:  # noqa: B902 - a failing chunk is isolated run by run below
        if len(scenarios) == 1:
            return [{'error': traceback.format_exc(limit=1).strip().splitlines()[-1]}]
        return [row for s in scenarios for row in run_chunk([s])]


def run_chunk_checked(scenarios: list[dict], client: dict) -> list[dict]:
    """
    :func:`run_chunk` on a Dask worker that runs the client's code (``client``: its identity).

    A worker with another package version or commit (one that joined after the start-up check)
    gives every run of the chunk an error row instead of results that may differ silently;
    ``--resume`` runs them again.
    """
    mismatch = identity_mismatch(code_identity(), client)
    if mismatch:
        return [{'error': f'worker runs other code: {mismatch}'} for _ in scenarios]
    return run_chunk(scenarios)


def identity_mismatch(worker: dict, client: dict) -> str:
    """Say how a worker's code identity differs from the client's, or ''."""
    differ = [f'{key} {worker.get(key)} (this client: {client.get(key)})'
              for key in ('version', 'commit') if worker.get(key) != client.get(key)]
    return ', '.join(differ)


def _simulate(scenarios: list[Scenario]) -> tuple[list[np.ndarray], list[float]]:
    """Return each run's metrics series and its smallest margin to the safety area."""
    if len(scenarios) == 1 and scenarios[0].agents > SINGLE_RUN_AGENTS:
        from soliton_encirclement_ros.sim.batch_sim import simulate
        result = simulate(scenarios[0])
        return [result.metrics], [result.area_margin]
    result = batch_engine.simulate_runs(scenarios)
    return result.metrics, [float(m) for m in result.area_margin]


def _row(metrics: np.ndarray, wall: float, area_margin: float = math.nan) -> dict:
    s = summarise(metrics)
    row = {f'final_{m}': s['final'][m] for m in METRIC_NAMES}
    row.update({f'mean_{m}': s['mean'][m] for m in METRIC_NAMES})
    row.update({f'settle_{m}': s['settle_time'][m] for m in SETTLE_THRESHOLDS})
    row.update({'d_min': s['closest']['d_min'], 'd_min_time': s['closest']['time'],
                'area_margin': area_margin, 'wall_time': wall, 'error': ''})
    return row


def _results(work: Iterable[list[Run]], submit, in_flight: int, should_stop,
             check=lambda: None) -> Iterator[tuple[list[Run], Any]]:
    """
    Yield (chunk, job) as jobs finish, with at most ``in_flight`` submitted at a time.

    ``check()`` is called while no job is ready: it raises to stop the wait.
    """
    work = iter(work)
    pending: list = []
    exhausted = False
    while not should_stop():
        while not exhausted and len(pending) < in_flight:
            chunk = next(work, None)
            if chunk is None:
                exhausted = True
            else:
                pending.append((chunk, submit([r.mapping() for r in chunk])))
        if not pending:
            return
        ready = [job for job in pending if job[1].done()]
        for job in ready:
            pending.remove(job)
            yield job
        if not ready:
            check()
            time.sleep(0.05)


class _PoolJob:

    def __init__(self, result) -> None:
        self.result = result

    def done(self) -> bool:
        return self.result.ready()


def local_results(work: Iterable[list[Run]], workers: int,
                  should_stop=lambda: False) -> Iterator[tuple[list[Run], list]]:
    """Yield (chunk, rows) as a local process pool finishes them, until ``should_stop()``."""
    if workers == 1:
        for chunk in work:
            if should_stop():
                return
            yield chunk, run_chunk([r.mapping() for r in chunk])
        return
    with worker_pool(workers) as (pool, started):
        for chunk, job in _results(
                work, lambda s: _PoolJob(pool.apply_async(run_chunk, (s,))),
                CHUNKS_IN_FLIGHT_PER_WORKER * workers, should_stop,
                lambda: _check_workers(started)):
            yield chunk, job.result.get()


# The module a local pool's fork server imports before it forks any worker.
FORK_SERVER_PRELOAD = 'soliton_encirclement_ros.sim.sweep.fork_server'


@contextlib.contextmanager
def worker_pool(workers: int) -> Iterator[tuple[multiprocessing.pool.Pool, list]]:
    """
    Yield a local pool of ``workers`` processes forked from a fork server (:mod:`.server`).

    Also yielded: the processes to watch (:func:`_check_workers`): the workers, and the server.

    The workers are not forked from this process: the caller may have threads (rclpy, a test
    runner's DDS participants), and a forked child can inherit a lock one of them held, and
    hang. The server is a process with no thread that has loaded the workers' code and kernels
    once, so a worker costs no start-up of its own: a fork of this process where it has no
    other thread (``sweep_sim``: :func:`_fork_server_here`), else a fresh Python. Each worker
    dies with the server, and the server with this process, at once (a killed sweep_sim left
    them computing on). On the way out the pool is ended, and the server stopped and waited
    for (:func:`stop_fork_server`), whatever ends the block.
    """
    from multiprocessing import forkserver
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload([FORK_SERVER_PRELOAD])
    # A terminal's Ctrl-C reaches the whole process group: the server and the workers start
    # with it (and SIGTERM) blocked, until start_pool_worker ignores it. A server caught while
    # loading the code died (sweep_sim then ended in a traceback), a worker printed its
    # traceback, and one that recorded the pool's SIGTERM before its initializer was left idle
    # with the pool waiting on it. Here Ctrl-C waits for the pool to exist, then stops the sweep
    # as anywhere else. The resource tracker is started first: starting it unblocks both.
    resource_tracker.ensure_running()
    others = {child.pid for child in multiprocessing.active_children()}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, POOL_START_SIGNALS)
    pool = None
    try:
        if not _fork_server_here():
            with _server_path():
                forkserver.ensure_running()
        server = _ForkServer(forkserver._forkserver._forkserver_pid)
        with server.the_only_one():
            pool = context.Pool(workers, initializer=start_pool_worker, initargs=(server.pid,))
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C meanwhile: raised here
            # The pool replaces a worker that dies (the out-of-memory killer), but the chunk it
            # computed is lost and its result never comes: the sweep waited for ever.
            started = [child for child in multiprocessing.active_children()
                       if child.pid not in others]
            try:
                yield pool, [server] + started
                pool.close()
            finally:
                # The pool's task handler ends on the None its worker handler sends as it
                # ends, and terminate() waits for it: a worker handler that died (its server
                # gone as it replaced a worker) left terminate() waiting for ever. A second None
                # is never read.
                pool._taskqueue.put(None)
                pool.terminate()
                pool.join()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        stop_fork_server()


def _fork_server_here() -> bool:
    """
    Start the pool's fork server as a fork of this process, if it has no other thread.

    Returns False where it does not (a thread, or a server that runs): ``forkserver`` then
    starts a fresh Python (:func:`_server_path`), which imports again what this process has.
    A fork is that server as ``ensure_running`` would start it (the same listener, the same
    ``main`` and preload), with this process's imports made already: a sweep's fixed cost
    less a Python start-up and its imports. Safe only without another Python thread, which
    could hold a lock the fork copies held (numpy's OpenBLAS threads are stopped across a fork
    by OpenBLAS itself); the handlers this process set for SIGINT and SIGTERM are the defaults
    again in it, as in a fresh Python. Its output buffers are flushed first, so that nothing
    is written twice.
    """
    import socket
    import threading
    from multiprocessing import connection, forkserver, util
    served = forkserver._forkserver
    if threading.active_count() != 1 or served._forkserver_pid is not None:
        return False
    resource_tracker.ensure_running()
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address('AF_UNIX')
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):
            os.chmod(address, 0o600)
        listener.listen()
        # every client holds the write end of the "alive" pipe; the server ends at its EOF
        alive_r, alive_w = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # not written twice, by the server too
            if stream is not None:
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the server: it never returns into this process's code
            code = 1
            try:
                os.close(alive_w)
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_DFL)
                forkserver.main(listener.fileno(), alive_r, served._preload_modules)
                code = 0
            except SystemExit as exc:  # main's way out: every client has gone
                code = exc.code if isinstance(exc.code, int) else 0
            except BaseException:  # noqa: B902 - said, and the server ends
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(alive_r)
        served._forkserver_address = address
        served._forkserver_alive_fd = alive_w
        served._forkserver_pid = pid
    return True


@contextlib.contextmanager
def _server_path() -> Iterator[None]:
    """
    Within the block, a Python started here imports this package from where this process does.

    Python 3.11's fork server ignores the ``sys_path`` it is given (python/cpython#117378,
    fixed in 3.12) and puts its current directory first: started in a folder that holds
    another checkout, it loaded that code, its workers failed, and the pool replaced them for
    ever. So the server starts with ``PYTHONSAFEPATH`` (no current directory) and this code's
    roots first on ``PYTHONPATH``.
    """
    import ros_support
    import soliton_encirclement_ros
    roots = list(dict.fromkeys(os.path.dirname(os.path.dirname(os.path.abspath(m.__file__)))
                               for m in (soliton_encirclement_ros, ros_support)))
    saved = {name: os.environ.get(name) for name in ('PYTHONSAFEPATH', 'PYTHONPATH')}
    os.environ['PYTHONSAFEPATH'] = '1'
    os.environ['PYTHONPATH'] = os.pathsep.join(
        roots + ([saved['PYTHONPATH']] if saved['PYTHONPATH'] else []))
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class _ForkServer:
    """The fork server, watched as the workers are (:func:`_check_workers`), not reaped."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def how_ended(self, wait: float = 0.0) -> str | None:
        """
        Return how the server ended (``was killed by SIGKILL``), or None while it runs.

        ``wait``: so long for it to end, at most (its workers see it gone as it closes its
        files, a moment before it has ended).
        """
        deadline = time.monotonic() + wait
        while True:
            try:
                ended = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:  # reaped: not by the_only_one's rules
                return 'has ended'
            if ended is not None:
                return _how_ended(ended.si_status if ended.si_code == os.CLD_EXITED
                                  else -ended.si_status)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)

    @contextlib.contextmanager
    def the_only_one(self) -> Iterator[None]:
        """
        Within the block, no second server replaces this one, and the pool says nothing.

        ``multiprocessing`` starts a new server where it finds its server dead (as it replaces
        a dead worker), without this code's path (:func:`_server_path`), and the pool's worker
        handler printed its traceback where the server died under it. Here a dead server stays
        dead (the sweep stops on it, :func:`_check_workers`, in one line), and the handler's
        errors are left to that line.
        """
        import threading
        from multiprocessing import forkserver
        served = forkserver._forkserver

        def ensure_running() -> None:
            if self.how_ended() is not None:
                raise WorkerLost(f'the fork server (pid {self.pid}) has ended')
        previous = threading.excepthook

        def excepthook(args) -> None:
            if args.thread is None or '_handle_workers' not in args.thread.name:
                previous(args)
        served.ensure_running = ensure_running  # this instance's, not the class's
        threading.excepthook = excepthook
        try:
            yield
        finally:
            threading.excepthook = previous
            del served.ensure_running


def stop_fork_server() -> None:
    """
    Stop the fork server of :func:`worker_pool` and wait for it, if one runs.

    Its CPU time (and its workers') is then this process's children's, as ``time`` and
    ``getrusage`` count a process tree; left running, it would end only with this process,
    unwaited. ``multiprocessing`` has no public call for it: its own tests' ``_stop``.
    """
    from multiprocessing import forkserver
    stop = getattr(getattr(forkserver, '_forkserver', None), '_stop', None)
    if stop is not None:
        stop()


class WorkerLost(Exception):
    """A local pool's worker process ended during the sweep (killed): its chunk is lost."""


def _check_workers(workers: list) -> None:
    """Raise :class:`WorkerLost` (one line) if a pool's worker, or its server, has ended."""
    servers = [worker for worker in workers if isinstance(worker, _ForkServer)]
    ended = [worker for worker in workers
             if not isinstance(worker, _ForkServer) and worker.exitcode is not None]
    # A worker whose server is gone reads its end (status 255) a moment before the server ends.
    wait = 1.0 if any(worker.exitcode == 255 for worker in ended) else 0.0
    for server in servers:
        how = server.how_ended(wait)
        if how is not None:
            raise WorkerLost(f"the fork server of the sweep's workers (pid {server.pid}) {how}; "
                             'the runs its workers were computing are lost')
    for worker in ended:
        raise WorkerLost(f'a worker process of the sweep (pid {worker.pid}) '
                         f'{_how_ended(worker.exitcode)}; the runs it was computing are lost')


def _how_ended(code: int | None) -> str | None:
    """Return how a process with exit code ``code`` ended (None: it runs)."""
    if code is None:
        return None
    return f'was killed by {_signal_name(-code)}' if code < 0 else f'exited with status {code}'


def _signal_name(signum: int) -> str:
    """Return ``SIGKILL`` for 9, ``signal 40`` for a number Python does not name."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f'signal {signum}'


class ClusterLost(Exception):
    """The Dask cluster went away during the sweep (its scheduler killed, the network cut)."""


def dask_results(work: Iterable[list[Run]], address: str, workers: int = 1,
                 should_stop=lambda: False) -> Iterator[tuple[list[Run], list]]:
    """
    Yield (chunk, rows) as the Dask cluster at ``address`` (``workers`` threads) ends them.

    :class:`ClusterLost` (one line naming the cluster) when the client loses its scheduler,
    whichever call finds it out (a result, a submission). Dask's own log records (its client's
    reconnection attempts, a comm closed under it, with their tracebacks) are held while the
    cluster is in use: a lost cluster's are dropped, as is all Dask says after it (the one
    line says it all); otherwise they are passed on at the end.
    """
    from concurrent.futures import CancelledError

    from dask.distributed import Client
    from distributed.client import ClosedClientError
    lost = (CancelledError, OSError, TimeoutError, ClosedClientError)
    held = HeldLogs(DASK_LOGGERS)
    with held:
        client = Client(address, timeout='10s')
    in_flight: set = set()  # only these are held: a finished chunk's result is let go

    identity = code_identity()

    def submit(scenarios):
        future = client.submit(run_chunk_checked, scenarios, identity, pure=False)
        in_flight.add(future)
        return future
    why = ''
    try:
        with held:
            jobs = _results(work, submit, CHUNKS_IN_FLIGHT_PER_WORKER * workers, should_stop)
            while True:
                try:
                    chunk, future = next(jobs)
                    rows = future.result()
                except StopIteration:
                    break
                except lost as error:  # a lost scheduler cancels every future, closes the client
                    held.drop_from_now()  # before the block ends: nothing of it is printed
                    why = getattr(error, 'reason', None) or f'{type(error).__name__}: {error}'
                    raise ClusterLost(f'lost the Dask cluster at {address} ({why})') from None
                in_flight.discard(future)
                yield chunk, rows
    finally:
        if why:  # nothing to cancel; the client's reconnection is not news (held: dropped)
            try:
                client.close(timeout=10)
            except Exception:  # noqa: B902 - a lost cluster's client may fail to close: no news
                pass
        else:
            with held:
                client.cancel(list(in_flight))
                client.close()


DASK_LOGGERS = ('distributed', 'tornado', 'asyncio')  # what a Dask client logs through


class HeldLogs:
    """
    ``with held:`` the log records of ``names`` (and their children) are held, not printed.

    (Dask gives some of its loggers, ``distributed.client`` among them, a handler of their own.)

    After the block they are passed on to the loggers' own handlers (the last ``capacity``),
    unless :meth:`drop_from_now` was called: then they, and every later record of those
    loggers in this process, are dropped.
    """

    def __init__(self, names: tuple[str, ...], capacity: int = 200) -> None:
        import collections
        self.names = names
        self.records: collections.deque = collections.deque(maxlen=capacity)
        self._dropping = False
        self._saved: list | None = None
        self._handler = _Holder(self)

    def __enter__(self) -> 'HeldLogs':
        if self._saved is None:
            self._saved = []
            for log in self._loggers():
                self._saved.append((log, log.handlers[:], log.propagate))
                log.handlers = [self._handler]
                log.propagate = False
        return self

    def _loggers(self) -> list[logging.Logger]:
        """Return the loggers named, and each child that has handlers of its own."""
        tops = [logging.getLogger(name) for name in self.names]
        children = [log for name, log in list(logging.root.manager.loggerDict.items())
                    if isinstance(log, logging.Logger) and (log.handlers or not log.propagate)
                    and any(name.startswith(top + '.') for top in self.names)]
        return tops + children

    def __exit__(self, *exc) -> None:
        if self._dropping or self._saved is None:
            return
        saved, self._saved = self._saved, None
        for log, handlers, propagate in saved:
            log.handlers, log.propagate = handlers, propagate
        records = list(self.records)
        self.records.clear()
        for record in records:
            logging.getLogger(record.name).handle(record)

    def drop_from_now(self) -> None:
        """Drop every record held and every later one of these loggers, for good."""
        self.__enter__()
        self._dropping = True
        self.records.clear()


class _Holder(logging.Handler):

    def __init__(self, held: HeldLogs) -> None:
        super().__init__(logging.NOTSET)
        self.held = held

    def emit(self, record: logging.LogRecord) -> None:
        if not self.held._dropping:
            self.held.records.append(record)
