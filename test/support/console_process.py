"""
``fleet console --plain`` as an operator drives it: keys written to its stdin, lines read back.

Every line the console prints is kept with the steady time it was read; :meth:`press` writes a
key (a line) and returns the steady time it was written.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time


class ConsoleProcess:
    """A running ``fleet console FILE --plain`` and what it has printed so far."""

    def __init__(self, fleet_file, *args) -> None:
        self.process = subprocess.Popen(
            [sys.executable, '-m', 'soliton_encirclement_ros.fleet.cli', 'console',
             str(fleet_file), '--plain', *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            bufsize=1, env=os.environ.copy())
        self.lines: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in iter(self.process.stdout.readline, ''):
            with self._lock:
                self.lines.append((time.monotonic(), line.rstrip('\n')))

    @property
    def text(self) -> str:
        with self._lock:
            return '\n'.join(line for _, line in self.lines)

    def count(self, fragment: str) -> int:
        """Return how many printed lines contain ``fragment``."""
        with self._lock:
            return sum(1 for _, line in self.lines if fragment in line)

    def press(self, key: str) -> float:
        """Write ``key`` as one line; return the steady time just before it was written."""
        pressed = time.monotonic()
        self.process.stdin.write(key + '\n')
        self.process.stdin.flush()
        return pressed

    def press_quit(self, timeout: float = 60.0) -> int:
        """Press ``q`` and return the exit status."""
        self.press('q')
        self.process.wait(timeout=timeout)
        self._reader.join(10.0)
        return self.process.returncode

    def close(self) -> None:
        """Kill it if it still runs (a failed test)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(5.0)
