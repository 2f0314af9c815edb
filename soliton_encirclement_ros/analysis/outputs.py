"""Checks made before a run starts, so a long run never ends in an unusable output path."""
from __future__ import annotations

import os
from pathlib import Path
import stat
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


def new_dir_problem(path, option: str) -> str | None:
    """
    One line saying why ``path`` cannot become a new directory (a bag), or None.

    It must not exist yet, and the directory it is made in must take a file
    (:func:`output_dir_problem`'s probe), so a read-only or missing place is found before a run.
    """
    path = Path(path)
    if path.exists() or path.is_symlink():
        return f'{option} {path} exists already; choose a new directory'
    return output_dir_problem(path, option)


def write_problem(what: str, error: Exception) -> str:
    """Return one line naming what could not be written and why (a full disk, a read-only one)."""
    return f'{what}: {getattr(error, "strerror", None) or error}'


def replace_text(path, text: str) -> None:
    """
    Replace the file ``path`` by ``text`` whole, or leave it as it was (``OSError``).

    Written beside it first, then renamed over it: a full disk never leaves it empty or cut.
    """
    path = Path(path)
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    handle, staged = tempfile.mkstemp(prefix=f'.{path.name}-', dir=path.parent)
    try:
        os.fchmod(handle, mode)  # the file's own permissions, not mkstemp's 0600
        with os.fdopen(handle, 'w') as file:
            file.write(text)
        os.replace(staged, path)
    except BaseException:
        os.unlink(staged)
        raise
