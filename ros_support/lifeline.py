"""
Child processes that die with their parent, at once, however the parent ends (no rclpy).

A parent that starts a process per node (``swarm_sim --processes``) or a pool of workers
(``sweep_sim``) and is then killed (SIGKILL, an OOM kill) left them running on: simulating,
publishing, keeping its ROS domain busy. Two mechanisms, so that neither a race nor another
kernel can leave an orphan:

- Linux's ``PR_SET_PDEATHSIG`` delivers a signal to the child when its parent ends: set between
  fork and exec by :func:`die_with_parent` (``Popen(preexec_fn=...)``), or first thing in a
  worker by :func:`bind_to_parent` (a pool's initializer). Both then look at the parent: one
  that ended before the setting was made sends no signal, so the child ends there and then.
- :func:`watch_parent` in the child (``ros_support.entry`` starts it when ``PARENT_ENV`` names
  the parent): a thread that sees the parent gone (where ``prctl`` is missing) kills the
  process.

The nodes of ``swarm_sim --processes`` and the sweep's workers get SIGKILL: an orphan has no
one to hand its outputs to, and writing them (metrics_node's figures) took tens of seconds on
a loaded machine; what the nodes streamed (metrics.csv, agents.csv) is on disk up to their last
flush, as when an in-process run is killed. ``die_with_parent`` sends SIGTERM by default (the
processes of ``px4_sitl_rehearsal`` stop as on any SIGTERM).
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from typing import Callable

PARENT_ENV = 'SOLITON_PARENT_PID'  # the pid of the process a child must not outlive
PR_SET_PDEATHSIG = 1               # linux/prctl.h
WATCH_PERIOD = 0.5                 # s between two looks at the parent


def _prctl():
    """Return the C library's ``prctl``, or None where there is none (not Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """
    Return a ``preexec_fn`` by which the child gets ``signum`` when this process ends (Linux).

    None where the C library has no ``prctl``. The function is looked up here, in the parent:
    the child only calls it between fork and exec. A child whose parent ended before the call
    (it was re-parented: no signal will come) exits there, with status 128 + ``signum``.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()
    signum = int(signum)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(128 + signum)
    return preexec


def bind_to_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """
    Make this process get ``signum`` when ``parent`` (its parent's pid) ends; end now if it has.

    For a process that cannot take a ``preexec_fn`` (a ``multiprocessing`` worker: call it
    from the pool's initializer with the pid of the process that made the pool).
    """
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:  # gone already, before the setting could see it go
        os._exit(128 + int(signum))


# Blocked while a pool's workers are started, unblocked by start_pool_worker once they are set.
POOL_START_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


def serve_pool() -> None:
    """
    Make this process a pool's fork server: it dies with its parent at once, SIGKILL.

    Called on import of the module a ``forkserver`` pool preloads. The workers forked from this
    process bind to it (``start_pool_worker(server_pid)``), and die with it. Without it the
    server would end only once it found its parent's pipe closed.
    """
    bind_to_parent(os.getppid(), signal.SIGKILL)


def start_pool_worker(parent: int) -> None:
    """
    Start a ``multiprocessing`` pool worker: it dies with ``parent`` at once, ignores Ctrl-C.

    SIGTERM ends it, as the pool expects.

    The pool's ``initializer`` (``initargs=(os.getpid(),)``, or the pid of the fork server the
    workers are forked from: :func:`serve_pool`). It lives here, in a module that
    imports next to nothing, so that a worker is bound before any heavy import; the parent
    decides what Ctrl-C means.
    """
    bind_to_parent(parent, signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM ends it (``Pool.terminate``): a spawned worker imports the parent's console
    # script, whose ``ros_support.entry`` records SIGTERM instead, and the pool waited on it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The pool's owner started it with these blocked (a Ctrl-C to the terminal's process group
    # during its imports printed a traceback); now a pending SIGINT is dropped, a SIGTERM ends it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, POOL_START_SIGNALS)


def child_environment(environment: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``environment`` (default: this one) naming this process as the children's parent."""
    return {**(os.environ if environment is None else environment), PARENT_ENV: str(os.getpid())}


def watch_parent(period: float = WATCH_PERIOD) -> threading.Thread | None:
    """
    Kill this process once the parent named by ``PARENT_ENV`` is gone; None when none is named.

    A daemon thread compares the parent pid with the named one every ``period`` s: once they
    differ, SIGKILL to this process (see the module's doc for why not SIGTERM).
    """
    try:
        parent = int(os.environ.pop(PARENT_ENV, ''))  # this process's own: not its children's
    except ValueError:
        return None

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os.kill(os.getpid(), signal.SIGKILL)
    thread = threading.Thread(target=watch, name='parent-watch', daemon=True)
    thread.start()
    return thread
