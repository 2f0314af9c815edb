"""
Run a console script with one of its phases marked, so a test can signal it in that phase.

``command(executable, [(module, attribute, hold)], *args)`` is the command line of a Python
that replaces ``module.attribute`` (a function, a class or ``Class.method``) with a wrapper, then
runs the executable as its console script does (``ros_support.entry.run``). The wrapper prints
``phase: <attribute>`` to stderr the first time it is called; with ``hold`` it then waits for a
signal (``signal.pause``: the tool's handler runs, and returns or raises) before calling the
original, so a signal sent once the line is seen lands inside that phase however fast the phase
is. The test waits for the line (``Running.wait_for_line``), never for a time. ``hold='skip'``
returns None instead of calling the original (a check that finds nothing).
"""
from __future__ import annotations

import json
import sys

from ros_support.entry import EXECUTABLES

_PROGRAM = """
import importlib, json, signal, sys
sys.path[:0] = {paths}
for module, attribute, hold in json.loads({marks!r}):
    target = importlib.import_module(module)
    *owners, attribute = attribute.split('.')  # 'Class.method' too
    for owner in owners:
        target = getattr(target, owner)
    original = getattr(target, attribute)

    def wrapper(*args, _original=original, _name=attribute, _hold=hold, _said=[], **kwargs):
        if not _said:
            _said.append(1)
            print('phase: ' + _name, file=sys.stderr, flush=True)
            if _hold is True:
                signal.pause()
        if _hold == 'skip':
            return None
        return _original(*args, **kwargs)
    setattr(target, attribute, wrapper)
from ros_support.entry import run
sys.argv[0] = {name!r}
sys.exit(run({name!r}, {module!r}))
"""


def command(executable: str, marks: list[tuple[str, str, bool | str]], *args: str) -> list[str]:
    """Return the command line running ``executable`` with ``args`` and its phases marked."""
    program = _PROGRAM.format(paths=repr(sys.path), marks=json.dumps(marks),
                              name=executable, module=EXECUTABLES[executable])
    return [sys.executable, '-c', program, *args]
