"""
The fork server of a sweep's local pool: it loads the workers' code once, and forks them.

``sweep_sim --workers K`` runs its chunks on a ``forkserver`` pool (``scheduling.worker_pool``)
whose server imports :mod:`.fork_server` before it forks any worker, which calls
:func:`start`. A spawned worker paid its own start-up: the imports, and numba loading its
kernels from the on-disk cache (about 0.9 CPU-s a worker, most of the fixed cost of a short
sweep). The server pays it once: it runs one tiny chunk, which loads the batch engine's
kernels, and each worker forked from it starts with them loaded. The server is one process with
no thread (forking it is safe, as forking a caller that holds threads is not): a fork of
``sweep_sim`` where that has no other thread, with its imports made, else a fresh Python. It
dies with ``sweep_sim`` at once (``lifeline.serve_pool``), and its workers die with it.
"""
from __future__ import annotations

import gc
import os

from ros_support import lifeline
from soliton_encirclement_ros.core import compiled
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim.sweep import scheduling

# The tiny chunk run at the start: one run of 3 agents over 5 control ticks (its kernels are a
# sweep's: the array types do not depend on the runs' or agents' count).
WARM_SCENARIO = {'agents': 3, 'duration': 0.05, 'control_period': 0.01}
_WARM = False


def start() -> None:
    """Make this process the pool's fork server (it dies with its parent) and load the code."""
    global _WARM
    lifeline.serve_pool()
    try:
        rows = scheduling.run_chunk([Scenario(**WARM_SCENARIO).to_mapping()])
    except Exception:  # noqa: B902 - a failure only leaves the kernels to load in each worker
        return
    _WARM = not rows[0].get('error')
    # What is loaded now stays out of the collector's passes: a pass in a worker would write to
    # every object's page it visits, copying the server's memory page by page into each worker.
    gc.freeze()


def state() -> dict:
    """
    Return what a worker started with: its parent (the server), and the kernels loaded.

    ``kernels``: the names of the batch engine's compiled kernels that hold a compiled (or
    cached) version in this process; empty without numba or before any run.
    """
    module = compiled.kernels()
    loaded = sorted(name for name, value in vars(module).items()
                    if getattr(value, 'signatures', None)) if module is not None else []
    return {'parent': os.getppid(), 'warm': _WARM, 'kernels': loaded}
