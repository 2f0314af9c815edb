"""
Stop requests from SIGINT/SIGTERM that only set a flag (no rclpy: the ROS-free tools use it too).

The main loop of a node, ``swarm_sim`` or ``sweep_sim`` notices the flag between steps, so an
interrupt never surfaces as a traceback in the middle of the work; a second signal while the
outputs are being written only prints "writing outputs, please wait". SIGUSR1 prints every
thread's Python stack to stderr (``faulthandler``, which works while the main thread is blocked
in C): a parent that waited too long for a process to stop asks for it, so the log says where
it hung.

A computation that does not look at the flag (a plan, a domain check, reading a bag) runs inside
:meth:`StopRequest.raising`: a request then also raises :class:`Interrupted` there, which the
tool turns into one line and its exit status.
"""
from __future__ import annotations

from contextlib import contextmanager
import faulthandler
import os
import signal
import sys
import threading
from typing import Callable

# The exit status of a tool stopped by SIGINT or SIGTERM before it finished (128 + SIGINT, as
# a shell reports a Ctrl-C): sweep_sim, batch_sim, analyze_run, fit_mobility, and swarm_sim
# before its run starts.
EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """A stop requested inside :meth:`StopRequest.raising`; ``str`` is the signal's name."""


class StopRequest:
    """SIGINT/SIGTERM handlers that only record the request (safe at any point of a callback)."""

    _handed_over: 'StopRequest | None' = None  # see hand_over

    def __init__(self, name: str) -> None:
        self.name = name
        self._event = threading.Event()
        self.writing = False
        self._raising = False

    def install(self, requested: bool = False) -> 'StopRequest':
        """
        Handle SIGINT/SIGTERM from now on; ``requested``: a stop was asked for already.

        A request to the StopRequest of :meth:`hand_over` counts as one too.
        """
        previous, StopRequest._handed_over = StopRequest._handed_over, None
        if requested or (previous is not None and previous.requested):
            self._event.set()  # asked to stop before this one was installed
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
        if self._raising and not self.writing:
            self._raising = False  # once: cleaning up is not interrupted again
            raise Interrupted(signal.Signals(signum).name)

    @contextmanager
    def raising(self):
        """
        Inside, a stop request also raises :class:`Interrupted` (at once if one came before).

        For the work that does not poll :attr:`requested`: what it holds is released by its
        ``finally`` blocks as the exception passes. Only in the main thread, where Python runs
        signal handlers.
        """
        if self.requested:
            raise Interrupted('stop requested')
        self._raising = True
        try:
            yield self
        finally:
            self._raising = False

    def hand_over(self) -> None:
        """
        Let the next :meth:`install` (in this process) inherit a request made to this one.

        ``ros_support.entry`` calls it before an executable's ``main``, whose own StopRequest
        then knows of a signal received while ``main`` was getting ready.
        """
        StopRequest._handed_over = self

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


STDOUT_FLUSH_WAIT = 0.5  # s give_up_after waits for stdout's last flush


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # none, closed, or a broken pipe
        pass


def give_up_after(limit: float, line: str, status: int = 0,
                  backstop: float = 1.0) -> Callable[[], None]:
    """
    In ``limit`` s from now, print ``line`` and end the process with ``status``; the cancel.

    For work after a stop request that must not keep the process alive forever (an rmw call or
    a library's exit handler that never returns). It takes a Python thread to print the line:
    should the work hang holding the GIL, ``backstop`` s later faulthandler's watchdog (a thread
    that needs no GIL) prints every thread's stack to stderr and exits 1 instead.
    """
    def give_up():
        print(line, file=sys.stderr, flush=True)
        # What the program printed and still holds goes out too, unless the hung work holds
        # stdout itself (a full pipe): then it is left after a short wait.
        flushing = threading.Thread(target=_flush_stdout, daemon=True)
        flushing.start()
        flushing.join(STDOUT_FLUSH_WAIT)
        os._exit(status)
    timer = threading.Timer(limit, give_up)
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(limit + backstop, exit=True, file=sys.stderr)

    def cancel() -> None:
        faulthandler.cancel_dump_traceback_later()
        timer.cancel()
    return cancel
