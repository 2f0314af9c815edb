"""
The console scripts' entry points: a stop handler first, then the executable's heavy imports.

A console script imports its module before it calls ``main``, and those imports (rclpy, numpy,
matplotlib, rosbags) take up to a few seconds on a busy machine. A SIGINT or SIGTERM in that
time used to end in a ``KeyboardInterrupt`` traceback and exit -2. Every executable of
``setup.py`` therefore starts here: this module imports nothing heavy (no YAML, no rclpy), and
:func:`run` installs a :class:`~ros_support.signals.StopRequest` first thing, imports the
module, and

- if a stop was requested meanwhile, says so in one line and exits 0 (nothing was started,
  nothing is lost); the tools that report an interrupted job (``sweep_sim``, ``swarm_sim``,
  ``batch_sim``, ``analyze_run``, ``fit_mobility``) exit 130, as when stopped later;
- else calls the module's ``main`` with that handler still in place: the ``StopRequest`` that
  ``main`` installs (``ros_support.spin.spin_node`` does, every tool does) takes over a request
  that came in between, so a node stopped while it builds itself still ends with exit 0.

Only the interpreter's own start (before this module runs) is outside this: a signal there
meets Python's defaults.

A process started by a parent that names itself in ``lifeline.PARENT_ENV`` (the nodes of
``swarm_sim --processes``) also watches that parent from here on and stops when it is gone.

``setup.py`` names each executable ``ros_support.entry:<name>``; :data:`EXECUTABLES` says which
``main`` that is.
"""
from __future__ import annotations

import os
import signal
import sys

# Executable name -> the module whose ``main()`` it runs.
EXECUTABLES = {
    'mobility_node': 'velocity_mobility_ros.nodes.mobility_node',
    'swarm_mobility_node': 'velocity_mobility_ros.nodes.swarm_mobility_node',
    'agent_node': 'soliton_encirclement_ros.nodes.agent_node',
    'target_node': 'soliton_encirclement_ros.nodes.target_node',
    'metrics_node': 'soliton_encirclement_ros.nodes.metrics_node',
    'run_recorder': 'soliton_encirclement_ros.nodes.recorder_node',
    'sweep_sim': 'soliton_encirclement_ros.sim.sweep',
    'swarm_sim': 'soliton_encirclement_ros.sim.runner',
    'batch_sim': 'soliton_encirclement_ros.sim.batch_sim',
    'analyze_run': 'soliton_encirclement_ros.analysis.cli',
    'fit_mobility': 'soliton_encirclement_ros.analysis.fit_mobility',
    'px4_bridge_node': 'soliton_encirclement_ros.px4.bridge_node',
    'live_view': 'soliton_encirclement_ros.nodes.live_view_node',
    'fleet': 'soliton_encirclement_ros.fleet.cli',
    'fleet_node': 'soliton_encirclement_ros.nodes.fleet_node',
    'px4_sitl_rehearsal': 'soliton_encirclement_ros.fleet.rehearsal',
}


def _record_early_stop(signum, frame) -> None:
    _EARLY_STOPS.append(signum)


# Before any other import: a console script of EXECUTABLES records SIGINT/SIGTERM from here on
# (run() hands the record to its StopRequest). Only there: importing this module elsewhere (a
# test) changes no handler.
_EARLY_STOPS: list[int] = []
if os.path.basename(sys.argv[0] if sys.argv else '') in EXECUTABLES:
    for _signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_signum, _record_early_stop)

import functools  # noqa: E402, I100  (after the handlers: imports take time on a busy machine)
import gc  # noqa: E402
import importlib  # noqa: E402
from typing import Callable  # noqa: E402

from ros_support.lifeline import watch_parent  # noqa: E402
from ros_support.signals import EXIT_INTERRUPTED, give_up_after, StopRequest  # noqa: E402

# Exit status of a stop before main ran: 0 (a node stopped by a signal ends normally), except
# for the tools whose job was interrupted before it was done (as they exit when stopped later).
EARLY_STOP_STATUS = {name: EXIT_INTERRUPTED for name in (
    'sweep_sim', 'swarm_sim', 'batch_sim', 'analyze_run', 'fit_mobility')}

# The executables that join no ROS domain, or check ROS_DOMAIN_ID themselves (swarm_sim: its
# --domain-id wins over it); every other one is refused before rclpy reads a bad one.
DOMAIN_FREE = ('sweep_sim', 'swarm_sim', 'batch_sim', 'analyze_run', 'fit_mobility')
EXIT_REFUSED = 2  # refused before starting
# How long the interpreter's exit (atexit handlers, its teardown) may take once main returned.
EXIT_LIMIT_S = 10.0


def run(name: str, module: str):
    """Import ``module`` under a stop handler, then return its ``main()`` (see the module doc)."""
    # First: the imports below take time (YAML, rclpy...). A signal since the module's own
    # handlers were installed counts as a request.
    stop = StopRequest(name).install(requested=bool(_EARLY_STOPS))
    from ros_support.validation import domain_id_problem  # imports yaml
    problem = (name not in DOMAIN_FREE and not {'-h', '--help'} & set(sys.argv[1:])
               and domain_id_problem(os.environ.get('ROS_DOMAIN_ID')))
    if problem:  # before rclpy reads it: a traceback, a raw DDS error or a silent domain
        print(f'{name}: error: {problem}', file=sys.stderr, flush=True)
        return EXIT_REFUSED
    watch_parent()  # a node started by swarm_sim --processes ends with it (lifeline)
    main = importlib.import_module(module).main
    if stop.requested:
        print(f'{name}: stopped while starting (signal received before it ran); exiting',
              file=sys.stderr, flush=True)
        StopRequest.ignore_from_now()
        return EARLY_STOP_STATUS.get(name, 0)
    stop.hand_over()  # the StopRequest main installs inherits a request made until then
    status = main()
    # The process ends next. The interpreter's exit would run the cyclic collector over every
    # object two or three times (0.25-0.3 CPU-s after swarm_sim's figures, a tenth of a short
    # run's cost); frozen, they are left to the OS. Nothing that must happen waits for it:
    # main closed what it opened, and atexit handlers and the flush of stdout/stderr still run.
    gc.freeze()
    # Those handlers and the interpreter's own teardown are libraries' code (the Foxglove
    # server's runtime, rclpy's C++ objects): one that never returns must not leave a process
    # that has done its work and ignores SIGINT/SIGTERM (see StopRequest.ignore_from_now).
    give_up_after(EXIT_LIMIT_S, f'{name}: the interpreter did not finish exiting within '
                  f'{EXIT_LIMIT_S:g} s; exiting without it', exit_status(status))
    return status


def exit_status(status: object) -> int:
    """Return the exit status of what ``main`` returned, as ``sys.exit`` takes it."""
    if status is None:
        return 0
    return status if isinstance(status, int) else 1


def __getattr__(name: str) -> Callable[[], object]:
    """``ros_support.entry:<executable>`` (what ``setup.py`` names) for each of EXECUTABLES."""
    if name in EXECUTABLES:
        return functools.partial(run, name, EXECUTABLES[name])
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
