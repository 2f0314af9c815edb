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


LOCK_FILE = '.lock'  # in a folder a writer holds (FolderLock)


class FolderInUse(Exception):
    """Another process holds the folder (:class:`FolderLock`); the message says so in one line."""


class FolderLock:
    """
    One writer at a time in ``folder``: an exclusive ``flock`` on its ``.lock`` file.

    :meth:`acquire` takes it or raises :class:`FolderInUse` naming the folder and the holder's
    pid (written into the file); it is held until :meth:`release` or the end of the process,
    however it ends: the kernel lets go of a dead process's lock, so none is ever left stale.
    The file itself stays (removing it while another process may open it would let two hold
    it), except that :meth:`release` with ``undo`` removes the folder again when
    :meth:`acquire` made it and it holds nothing else (a writer refused before it wrote).
    """

    def __init__(self, folder, option: str = '--out') -> None:
        self.folder = Path(folder)
        self.option = option
        self.path = self.folder / LOCK_FILE
        self._fd: int | None = None
        self._made = False

    def acquire(self, who: str) -> None:
        """Hold the folder (made if missing) for ``who`` (a program name, in the refusal)."""
        import fcntl
        self._made = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors='replace').strip()
            os.close(fd)
            self._made = False
            pid = f' (pid {holder})' if holder.isdigit() else ''
            raise FolderInUse(f'{self.option} {self.folder} is in use: another {who}{pid} '
                              'holds it; wait for it to end, or choose another '
                              f'{self.option}') from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f'{os.getpid()}\n'.encode(), 0)
        except OSError:
            pass  # a full disk: the lock holds all the same, its pid is not named

    def release(self, undo: bool = False) -> None:
        """Let the folder go; ``undo``: remove it if :meth:`acquire` made it and it is empty."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if undo and self._made:
                try:
                    self.path.unlink()
                    self.folder.rmdir()
                except OSError:
                    pass  # something else is in it now: it stays
        finally:
            os.close(fd)
