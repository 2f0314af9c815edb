"""
Stop requests from SIGINT/SIGTERM that only set a flag (no rclpy: the ROS-free tools use it too).

The main loop of a node, ``swarm_sim`` or ``sweep_sim`` notices the flag between steps, so an
interrupt never surfaces as a traceback in the middle of the work; a second signal while the
outputs are being written only prints "writing outputs, please wait". SIGUSR1 prints every
thread's Python stack to stderr (``faulthandler``, which works while the main thread is blocked
in C): a parent that waited too long for a process to stop asks for it, so the log says where
it hung.
"""
from __future__ import annotations

import faulthandler
import signal
import sys
import threading


class StopRequest:
    """SIGINT/SIGTERM handlers that only record the request (safe at any point of a callback)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()
        self.writing = False

    def install(self) -> 'StopRequest':
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._handle)
        if hasattr(signal, 'SIGUSR1'):
            for stream in (sys.stderr, sys.__stderr__):  # one with a file descriptor
                try:
                    faulthandler.register(signal.SIGUSR1, file=stream, all_threads=True)
                    break
                except (AttributeError, ValueError, OSError):  # None, or captured (pytest)
                    continue
        return self

    def _handle(self, signum, frame) -> None:
        if self.writing:
            print(f'{self.name}: writing outputs, please wait', file=sys.stderr, flush=True)
        self._event.set()

    @staticmethod
    def ignore_from_now() -> None:
        """
        Ignore SIGINT/SIGTERM for the rest of the process.

        The work is done, and a signal in the interpreter's own shutdown (which restores default
        handlers) must not turn a clean exit into death by signal.
        """
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)

    @property
    def requested(self) -> bool:
        return self._event.is_set()
