"""
Child processes that die with their parent, however the parent ends (no rclpy).

A parent that starts a process per node (``swarm_sim --processes``) and is then killed
(SIGKILL, an OOM kill) left every node running on: simulating, publishing, keeping its ROS
domain busy. Two mechanisms, so that neither a race nor another kernel can leave an orphan:

- :func:`die_with_parent` (``Popen(preexec_fn=...)``): Linux's ``PR_SET_PDEATHSIG`` delivers
  SIGTERM to the child when its parent ends; the child then stops as on any SIGTERM (a node
  writes its outputs on the way out).
- :func:`watch_parent` in the child (``ros_support.entry`` starts it when ``PARENT_ENV`` names
  the parent): a thread that sees the parent gone (the child was re-parented, e.g. the parent
  died before the kernel setting was made) sends the same SIGTERM, and SIGKILL if the process
  is still there ``ORPHAN_GRACE`` s later.
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
ORPHAN_GRACE = 120.0               # s an orphan gets to stop on SIGTERM (writing its outputs)


def die_with_parent() -> Callable[[], None] | None:
    """
    Return a ``preexec_fn`` that makes the child get SIGTERM when its parent ends (Linux).

    None where the C library has no ``prctl``. The function is looked up here, in the parent:
    the child only calls it between fork and exec.
    """
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    signum = int(signal.SIGTERM)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    return preexec


def child_environment(environment: dict[str, str] | None = None) -> dict[str, str]:
    """Return ``environment`` (default: this one) naming this process as the children's parent."""
    return {**(os.environ if environment is None else environment), PARENT_ENV: str(os.getpid())}


def watch_parent(period: float = WATCH_PERIOD, grace: float = ORPHAN_GRACE,
                 ) -> threading.Thread | None:
    """
    Stop this process when the parent named by ``PARENT_ENV`` is gone; None when none is named.

    A daemon thread compares the parent pid with the named one every ``period`` s: once they
    differ, SIGTERM to this process, then SIGKILL after ``grace`` s if it is still running.
    """
    try:
        parent = int(os.environ.pop(PARENT_ENV, ''))  # this process's own: not its children's
    except ValueError:
        return None

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os.kill(os.getpid(), signal.SIGKILL)
    thread = threading.Thread(target=watch, name='parent-watch', daemon=True)
    thread.start()
    return thread
