"""
What importing each module loads of some packages, each module in an interpreter of its own.

Run as ``python -c`` with this file's text (so ``sys.path`` is the tree's root alone), it reads
``{"preload": [...], "modules": [...], "watch": [...]}`` as JSON on stdin and prints
``{"preload": [watched modules], module: {"loaded": [watched modules]} or {"error":
traceback}}``. Each module is imported in a child forked from one
interpreter that has imported only ``preload`` (libraries, none of the watched packages: the
probe reports what the preload itself loaded), so no module imported for another can hide an
import; starting a fresh interpreter per module, as before, paid Python's start-up and numpy's
and matplotlib's imports once per module.
"""
import gc
import importlib
import json
import os
import sys
import traceback


def watched(packages) -> list:
    """Return the loaded modules of the given top-level packages, sorted."""
    return sorted(m for m in sys.modules if m.split('.')[0] in packages)


def probe(module: str, packages) -> dict:
    """Import ``module`` in a forked child and return what it loaded of ``packages``."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: import, report, and exit without returning to the caller
        os.close(read)
        try:
            importlib.import_module(module)
            result = {'loaded': watched(packages)}
        except BaseException:  # reported, whatever it is
            result = {'error': traceback.format_exc()}
        with os.fdopen(write, 'w') as pipe:
            pipe.write(json.dumps(result))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {'error': f'the child importing {module} ended with wait status {status}'}
    return json.loads(text)


def main() -> None:
    request = json.load(sys.stdin)
    packages = set(request['watch'])
    for name in request['preload']:
        importlib.import_module(name)
    results = {'preload': watched(packages)}
    gc.freeze()  # the children's garbage collector leaves the preloaded objects' pages shared
    for module in request['modules']:
        results[module] = probe(module, packages)
    print(json.dumps(results))


if __name__ == '__main__':
    main()
