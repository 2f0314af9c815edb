"""
Waiting on conditions, never on time: a process's output lines, a node in the graph, messages.

Every wait has a generous deadline (``DEADLINE``) so that a loaded machine (CI on a busy
laptop, two spinning cores) is slow but not red; a wait that times out says what it waited for.
"""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from typing import Callable

DEADLINE = 120.0  # s: generous, only a broken program gets near it
STACKS_WAIT = 5.0  # s a hung program is given to print its stacks (SIGUSR1) before it is killed


def wait_for(condition: Callable[[], object], what: str, timeout: float = DEADLINE,
             period: float = 0.05):
    """Poll ``condition()`` until it is truthy (returned) or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f'timed out after {timeout:.0f} s waiting for {what}')
        time.sleep(period)


class _Stream:
    """The text read so far from a pipe, by a thread of its own (so the pipe never fills)."""

    def __init__(self, pipe):
        self._chunks: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self._thread.start()

    def _read(self, pipe) -> None:
        for line in iter(pipe.readline, ''):
            with self._lock:
                self._chunks.append(line)
        pipe.close()

    @property
    def text(self) -> str:
        with self._lock:
            return ''.join(self._chunks)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


class Running:
    """
    A program started by a test, whose stdout and stderr are read as it runs.

    ``wait_for_line`` waits until a text appears on stderr (or stdout); ``stop`` signals it and
    waits for the exit. Use it as a context manager: the process is killed if the test fails.
    """

    def __init__(self, command: list[str], **popen):
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        stdin=subprocess.DEVNULL, text=True, **popen)
        self._out = _Stream(self.process.stdout)
        self._err = _Stream(self.process.stderr)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def out(self) -> str:
        return self._out.text

    @property
    def err(self) -> str:
        return self._err.text

    def wait_for_line(self, text: str, timeout: float = DEADLINE) -> None:
        """Wait until ``text`` is on stderr or stdout; fail early if the program exits."""
        def seen():
            if text in self.err or text in self.out:
                return True
            if self.process.poll() is not None:
                self._drain(5.0)
                if text in self.err or text in self.out:
                    return True
                raise AssertionError(f'exited with {self.process.returncode} before printing '
                                     f'{text!r}: {self.err[-800:]}')
            return False
        wait_for(seen, f'{text!r} from {self.process.args[0]}: {self.err[-400:]}', timeout)

    def send_signal(self, signum: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self, timeout: float = DEADLINE) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once it has exited; fail if it has not within timeout."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stacks = self._stacks()
            self.process.kill()
            self.process.wait()
            raise AssertionError(f'{self.process.args[0]} did not exit within {timeout:.0f} s: '
                                 f'{self.err[-800:]}{stacks}') from None
        self._drain(10.0)
        return self.process.returncode, self.out, self.err

    def stop(self, signum: int = signal.SIGINT, timeout: float = DEADLINE):
        """Send ``signum`` and wait for the exit: (exit code, stdout, stderr)."""
        self.send_signal(signum)
        try:
            return self.wait(timeout)
        except AssertionError as error:
            raise AssertionError(f'after {signal.Signals(signum).name}: {error}') from None

    def _stacks(self, timeout: float = STACKS_WAIT) -> str:
        """
        Return the Python stacks of every thread of a program that hangs, or ''.

        Asked for with SIGUSR1: this package's programs print them then (``faulthandler``,
        registered by ``ros_support.signals.StopRequest``, which works while the main thread is
        blocked in C), so a test that fails on a hang says where it hung.
        """
        before = len(self.err)
        self.send_signal(signal.SIGUSR1)
        sizes = []

        def dumped() -> bool:  # the dump begun, and no more of it for two polls
            text = self.err[before:]
            if self.process.poll() is not None:
                return True
            sizes.append(len(text) if 'most recent call first' in text else -1)
            return len(sizes) >= 3 and sizes[-1] >= 0 and sizes[-1] == sizes[-3]
        try:
            wait_for(dumped, 'its stacks', timeout, period=0.1)
        except AssertionError:
            return ''
        dump = self.err[before:]
        return (f'\nits threads, asked with SIGUSR1 after the deadline:\n{dump[-4000:]}'
                if dump else '')

    def _drain(self, timeout: float) -> None:
        self._out.join(timeout)
        self._err.join(timeout)

    def __enter__(self) -> 'Running':
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._drain(5.0)


class GraphProbe:
    """
    A node of its own rclpy context in this test's DDS domain, to wait on the graph.

    ``wait_for_node`` waits until a node is discovered; ``collect`` records a topic's messages
    and ``wait_for_messages`` waits until enough have arrived. Close it (context manager).
    """

    def __init__(self, name: str = 'test_probe'):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        self._rclpy = rclpy
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = Node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.received: dict[str, list] = {}

    def node_names(self) -> set[str]:
        """Full names (namespace/name) of the nodes discovered so far."""
        return {(ns.rstrip('/') + '/' + name) for name, ns in
                self.node.get_node_names_and_namespaces()}

    def wait_for_node(self, full_name: str, timeout: float = DEADLINE) -> None:
        wait_for(lambda: full_name in self.node_names(),
                 f'node {full_name} in the graph (seen: {sorted(self.node_names())})', timeout)

    def collect(self, msg_type, topic: str) -> list:
        """Record ``topic`` (best effort, so it matches reliable and best-effort publishers)."""
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        self.received[topic] = []
        self.node.create_subscription(
            msg_type, topic, self.received[topic].append,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.BEST_EFFORT))
        return self.received[topic]

    def wait_until(self, condition: Callable[[], object], what: str,
                   timeout: float = DEADLINE) -> None:
        """Spin the probe until ``condition()`` holds; fail naming ``what`` past ``timeout``."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f'timed out after {timeout:.0f} s waiting for {what}')
            self.executor.spin_once(timeout_sec=0.05)

    def wait_for_messages(self, topic: str, count: int, timeout: float = DEADLINE) -> None:
        self.wait_until(lambda: len(self.received[topic]) >= count,
                        f'{count} messages on {topic} (got {len(self.received[topic])})',
                        timeout)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        self._rclpy.try_shutdown(context=self.context)

    def __enter__(self) -> 'GraphProbe':
        return self

    def __exit__(self, *exc) -> None:
        self.close()
