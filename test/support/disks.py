"""
Small and read-only file systems for the tests of full disks: a tmpfs mounted for one test.

Needs root (``mount``); where it cannot mount, the test is skipped with the reason.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
import subprocess

import pytest


@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False):
    """Mount a tmpfs of ``size`` (e.g. ``'200k'``) on ``path`` while the block runs; yield it."""
    path.mkdir(parents=True, exist_ok=True)
    options = f'size={size}' + (',ro' if read_only else '')
    mounted = subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(path)],
                             capture_output=True, text=True, timeout=30)
    if mounted.returncode != 0:
        pytest.skip(f'cannot mount a tmpfs (needs root): {mounted.stderr.strip()}')
    try:
        yield path
    finally:
        subprocess.run(['umount', '-l', str(path)], capture_output=True, timeout=30)
