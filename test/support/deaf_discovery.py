"""
Make one process deaf to DDS discovery for a while: its participant learns new endpoints late.

Fast DDS receives a participant's discovery traffic (its metatraffic unicast port,
``7400 + 250 * domain + 10 + 2 * participant_id``) on a thread of its own named
``dds.udp.<port>``, apart from the threads that receive the data (odd ports, shared memory).
:class:`DeafDiscovery` stops that thread alone (``ptrace``: ``PTRACE_SEIZE`` and
``PTRACE_INTERRUPT``, which stop one thread and not its process) and lets it go again: while it
is stopped, the process still publishes, and hears what its readers were matched with, but none
of its writers matches a reader made meanwhile, so a volatile writer's samples are lost for that
reader, as under load when one participant hears of a new reader late. Everything happens on one
thread of the caller's (ptrace's rule: one tracer thread), started by :meth:`start`.
"""
from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path
import re
import threading

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000  # __WALL: wait for a thread that is not its process's leader
PORT_BASE, DOMAIN_GAIN, METATRAFFIC_OFFSET = 7400, 250, 10


def discovery_threads(pid: int, domain: int) -> list[int]:
    """Return the ids of ``pid``'s threads that receive its participant's discovery traffic."""
    base = PORT_BASE + DOMAIN_GAIN * domain
    found = []
    for task in Path(f'/proc/{pid}/task').iterdir():
        try:
            name = (task / 'comm').read_text().strip()
        except OSError:
            continue
        match = re.fullmatch(r'dds\.udp\.(\d+)', name)
        offset = int(match[1]) - base if match else -1
        if offset >= METATRAFFIC_OFFSET and offset % 2 == 0:
            found.append(int(task.name))
    return found


class DeafDiscovery:
    """Stop the discovery threads of ``pid`` (see the module's doc) until :meth:`release`."""

    def __init__(self, pid: int, domain: int) -> None:
        self.pid, self.domain = pid, domain
        self.threads: list[int] = []
        self.error = ''
        self._stopped = threading.Event()
        self._release = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self, timeout: float = 10.0) -> 'DeafDiscovery':
        """Stop the threads; return once they are stopped or cannot be (:attr:`problem`)."""
        self._thread.start()
        self._stopped.wait(timeout)
        return self

    @property
    def problem(self) -> str:
        """Say why the process could not be made deaf ('' if it was)."""
        if self.error or not self.threads:
            return (f'could not stop the discovery threads of process {self.pid}: '
                    f'{self.error or "no Fast DDS thread dds.udp.<metatraffic port> found"}')
        return ''

    def release(self) -> None:
        """Let the threads run again (idempotent)."""
        self._release.set()
        self._thread.join(10.0)

    def _run(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        libc.ptrace.restype = ctypes.c_long
        seized = []
        try:
            for tid in discovery_threads(self.pid, self.domain):
                if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
                    self.error = f'PTRACE_SEIZE {tid}: {os.strerror(ctypes.get_errno())}'
                    break
                seized.append(tid)
                libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
                os.waitpid(tid, WALL)  # the thread is in its ptrace stop now
            self.threads = list(seized) if not self.error else []
            self._stopped.set()
            self._release.wait()
        finally:
            for tid in seized:
                if libc.ptrace(PTRACE_DETACH, tid, None, None) != 0:
                    if ctypes.get_errno() != errno.ESRCH:  # a thread gone meanwhile is fine
                        self.error = f'PTRACE_DETACH {tid}: {os.strerror(ctypes.get_errno())}'
            self._stopped.set()
