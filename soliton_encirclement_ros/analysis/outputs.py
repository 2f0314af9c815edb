"""Checks made before a run starts, so a long run never ends in an unusable output path."""
from __future__ import annotations

import os
from pathlib import Path
import tempfile

# Formats of the figures a run writes: PNG, or vector PDF/SVG for papers (``--format``).
FIGURE_FORMATS = ('png', 'pdf', 'svg')


def output_dir_problem(path, option: str = '--out') -> str | None:
    """
    One line saying why ``path`` cannot receive outputs, or None; nothing is left behind.

    A probe is written where the outputs will go (in ``path`` if it exists, else in its nearest
    existing parent, where the writers would create it), so permissions, a file in the way or a
    read-only file system show up before the run instead of after it.
    """
    path = Path(path).absolute()
    if path.exists() and not path.is_dir():
        return f'{option} {path} exists and is not a directory'
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f'{option} {path}: {parent} is not a directory'
    try:
        probe = tempfile.mkdtemp(prefix='.write-check-', dir=parent)
        os.rmdir(probe)
    except OSError as error:
        return f'{option} {path} is not writable: {error.strerror or error}'
    return None
