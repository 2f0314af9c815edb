"""The processes of a test's children, read from Linux's /proc."""
import os
from pathlib import Path


def children_of(pid: int, zombies: bool = True) -> list[int]:
    """Pids of the direct child processes of ``pid`` (``zombies`` False: the live ones only)."""
    found = []
    for entry in Path('/proc').iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / 'status').read_text()
            except OSError:
                continue
            if f'\nPPid:\t{pid}\n' in status and (zombies or '\nState:\tZ' not in status):
                found.append(int(entry.name))
    return found


def descendants_of(pid: int) -> list[int]:
    """Return the pids of every live process below ``pid`` (its children, theirs, ...)."""
    found, frontier = [], [pid]
    while frontier:
        children = [child for parent in frontier for child in children_of(parent, zombies=False)]
        found += children
        frontier = children
    return found


def alive(pids: list[int]) -> list[int]:
    """Return the pids of ``pids`` still running (neither gone nor a zombie)."""
    running = []
    for pid in pids:
        try:
            status = Path(f'/proc/{pid}/status').read_text()
        except OSError:
            continue
        if '\nState:\tZ' not in status:
            running.append(pid)
    return running


def command_line(pid: int) -> str:
    """Return the command line of ``pid`` ('' once it is gone)."""
    try:
        return Path(f'/proc/{pid}/cmdline').read_bytes().replace(b'\0', b' ').decode().strip()
    except OSError:
        return ''


def cpu_seconds(pid: int) -> float:
    """Return the CPU time (user and system) ``pid`` has used, in s (0 once it is gone)."""
    try:
        fields = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def pool_servers(pid: int) -> list[int]:
    """
    Return the live fork servers of the local pools ``pid`` started.

    A fresh Python (``multiprocessing.forkserver`` on its command line) or, where ``pid`` had no
    other thread, a fork of ``pid`` itself (its command line).
    """
    own = command_line(pid)
    return [child for child in children_of(pid, zombies=False)
            if 'multiprocessing.forkserver' in command_line(child)
            or (own and command_line(child) == own)]
