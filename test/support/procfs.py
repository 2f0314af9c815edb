"""The processes of a test's children, read from Linux's /proc."""
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
