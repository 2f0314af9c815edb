"""
swarm_sim's in-process lock-step: simulated seconds per CPU-second and peak memory.

CPU seconds, not wall time: the figure is stable on a shared machine. Each case runs
``swarm_sim`` (in-process mode) in a child process of its own as its console script does
(``ros_support.entry.run``), so peak RSS is per run; the child times the stepping loop with
``time.process_time`` (every thread of the process, DDS included) and the whole process with
``getrusage``.

    .venv/bin/python benchmarks/bench_swarm_sim.py                 # the cases below
    .venv/bin/python benchmarks/bench_swarm_sim.py --cases n10 n32 --duration 20
    .venv/bin/python benchmarks/bench_swarm_sim.py --d-safe 0       # without the separation term
    .venv/bin/python benchmarks/bench_swarm_sim.py --cases n10 -- --loss 0.1 --delay 0.02
    .venv/bin/python benchmarks/bench_swarm_sim.py --phases --duration 0.1  # the fixed cost
    .venv/bin/python benchmarks/bench_swarm_sim.py --shell-only     # the graph without the law

Cases (swarm_sim's defaults: control period 0.01 s, mobility 0.01 s, odometry 50 Hz):

- ``n10-odom100``: N = 10, odometry 100 Hz: the issue's comparison with the original
  experiment (``bench_original.py`` runs the two paired);
- ``n10``, ``n32``, ``n100``: N = 10 / 32 / 100 with the defaults.

``--engine E`` runs the cases with ``swarm_sim --engine E``: every agent's controller in one
node, as arrays (``vectorised``, ``batch``, ``per-agent``; ``auto``: vectorised where exact), the
vehicles' odometry every control period (so 100 Hz at 0.01 s, and ``--odom-rate`` is left out).

The separation term is on, as by default (``d_safe`` 2 m, flown as at most half the even ring's
spacing: 2 m for N = 10, 1.96 m for N = 32, 0.63 m for N = 100 at R = 20 m); ``--d-safe D``
sets another (a scenario file's ``controller: {d_safe: D}``; 0: off). Options after ``--`` go to
``swarm_sim`` unchanged (``--loss``, ``--delay``, ``--failures-per-min``, ...).

Columns: loop = sim-s per CPU-s of the stepping loop; total = sim-s per CPU-s of the whole
process (start-up, DDS discovery, outputs and plots included); RSS = peak resident set. Also
prints the sha256 of metrics.csv (lock-stepped runs are byte-identical for a seed).
The package's sources are byte-compiled first (``compileall``, as pip compiles an installed
package): a run does not pay for compiling them, even where ``PYTHONDONTWRITEBYTECODE`` is set.
``--phases`` adds the fixed cost (total less the loop) and the CPU seconds of each phase:
imports, the graph's start-up (of it the agent nodes, and of those their parameter services),
the ROS-domain check, the outputs (of them the plots) and the close; nested phases are part of
their parent's figure. ``--shell-only`` replaces every agent's control step (neighbour choice,
law, separation) with a zero command: what the graph costs around the controller (nodes,
messages, receive path, link figures, mobility, metrics), the most a free controller could give
(the vehicles then stay where they start, so its hashes are its own). Writes the figures to
benchmarks/results/swarm_sim[_ENGINE][_phases][_shell_only].json (``--no-save``: print only).
Asserts nothing.
"""
import argparse
import hashlib
import importlib.abc
import importlib.util
import json
import os
from pathlib import Path
import resource
import subprocess
import sys
import tempfile
import time

from results import add_options, begin, save, table

CASES = {  # name -> (swarm_sim options, default sim duration [s])
    'n10-odom100': (['--agents', '10', '--odom-rate', '100'], 30.0),
    'n10': (['--agents', '10'], 30.0),
    'n32': (['--agents', '32'], 10.0),
    'n100': (['--agents', '100'], 2.0),
}


# The phases of a run whose CPU seconds --phases prints: (module, owner, function) -> label. A
# module the run never imports (the node graph's, with --engine) is not imported for this.
PHASES = {
    ('soliton_encirclement_ros.sim.inprocess', 'InProcessGraph', '__init__'): 'graph',
    ('soliton_encirclement_ros.sim.engine_graph', 'EngineGraph', '__init__'): 'graph',
    ('soliton_encirclement_ros.nodes.agent_node', 'AgentNode', '__init__'): 'agents',
    ('rclpy.parameter_service', 'ParameterService', '__init__'): 'param services',
    ('soliton_encirclement_ros.sim.domain', None, 'other_swarm'): 'domain check',
    ('soliton_encirclement_ros.sim.lockstep_graph', 'LockStepGraph', 'run'): 'loop',
    ('soliton_encirclement_ros.analysis.report', None, 'write_streamed_outputs'): 'outputs',
    ('soliton_encirclement_ros.analysis.report', None, '_write_plots'): 'plots',
    ('soliton_encirclement_ros.sim.lockstep_graph', 'LockStepGraph', 'close'): 'close',
}


def _timed(phases: dict, label: str, function):
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            phases[label] = phases.get(label, 0.0) + time.process_time() - start
    return timed


def _time_phases(module, phases: dict) -> None:
    """Time the functions of ``module`` that PHASES names."""
    for (name, owner, function), label in PHASES.items():
        if name == module.__name__:
            holder = getattr(module, owner) if owner else module
            setattr(holder, function, _timed(phases, label, getattr(holder, function)))


class _TimeOnImport(importlib.abc.MetaPathFinder):
    """Time PHASES' functions of a module when the run imports it (never import it here)."""

    def __init__(self, phases: dict) -> None:
        self.phases = phases
        self.pending = {module for module, _, _ in PHASES} - set(sys.modules)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.pending:
            return None
        self.pending.discard(fullname)
        spec = importlib.util.find_spec(fullname)  # by the other finders: it is no longer pending
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_time(module):
            exec_module(module)
            _time_phases(module, self.phases)
        spec.loader.exec_module = exec_and_time
        return spec


def child(argv: list[str], shell_only: bool = False) -> None:
    """
    Run swarm_sim here as its console script does; print one JSON line.

    The console script's ``ros_support.entry.run`` (its stop handler, then ``runner.main``, then
    what it does before the process exits), timing the stepping loop and the phases.
    """
    start = time.process_time()
    from ros_support import entry
    from soliton_encirclement_ros.sim import lockstep_graph, runner  # noqa: F401 (entry.run)
    if shell_only:
        from soliton_encirclement_ros.core import controller
        controller.control_step = zero_control_step
    phases = {'imports': time.process_time() - start}
    loop = {}
    run = lockstep_graph.LockStepGraph.run

    def sim_time(self, *args, **kwargs):
        try:
            return run(self, *args, **kwargs)
        finally:
            loop['sim'] = self.sim_time

    lockstep_graph.LockStepGraph.run = sim_time
    for module in {module for module, _, _ in PHASES} & set(sys.modules):
        _time_phases(sys.modules[module], phases)
    sys.meta_path.insert(0, _TimeOnImport(phases))
    with open(os.devnull, 'w') as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            sys.argv = ['swarm_sim', *argv]
            code = entry.run('swarm_sim', 'soliton_encirclement_ros.sim.runner')
        finally:
            sys.stdout = stdout
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({'code': code, 'loop_cpu': phases.get('loop'), 'sim': loop.get('sim'),
                      'total_cpu': usage.ru_utime + usage.ru_stime,
                      'rss_mib': usage.ru_maxrss / 1024, 'phases': phases}))


def zero_control_step(state, own_position, own_velocity, now, params, own_uncertainty=0.0):
    """``controller.control_step`` of ``--shell-only``: the state kept, a zero command."""
    import numpy as np
    return state, np.zeros(3)


def add_engine_option(parser: argparse.ArgumentParser) -> None:
    """Add ``--engine`` (swarm_sim's; here and in bench_original.py)."""
    from soliton_encirclement_ros.sim.runner import GRAPH_ENGINES, NODES
    parser.add_argument('--engine', choices=GRAPH_ENGINES, default=NODES,
                        help="swarm_sim's --engine: nodes (default: one agent_node per agent), "
                        'or auto, per-agent, vectorised, batch (every agent in one node; their '
                        'odometry every control period, so --odom-rate is left out)')


def with_engine(options: list[str], engine: str) -> list[str]:
    """Return swarm_sim ``options`` run with ``--engine engine`` (no ``--odom-rate`` but nodes)."""
    if engine == 'nodes':
        return options
    kept, skip = [], False
    for option in options:
        if skip or option == '--odom-rate':
            skip = not skip
            continue
        kept.append(option)
    return [*kept, '--engine', engine]


def d_safe_scenario(d_safe: float, path: Path) -> list[str]:
    """Swarm_sim options of a scenario file with ``d_safe`` (sized to the ring by the law)."""
    path.write_text(f'controller:\n  d_safe: {d_safe!r}\n')
    return ['--scenario', str(path)]


PACKAGES = ('ros_support', 'soliton_encirclement_ros', 'velocity_mobility_ros')


def compile_sources(python: str, *paths: Path) -> None:
    """
    Byte-compile ``paths`` with ``python``, as an installed package is (pip compiles it).

    Without it, where ``PYTHONDONTWRITEBYTECODE`` is set (or the tree is read-only), every run
    compiles each module it imports again: 0.2 CPU-s of swarm_sim's start-up, no part of it.
    """
    subprocess.run([python, '-m', 'compileall', '-q', *map(str, paths)], check=True,
                   stdout=subprocess.DEVNULL)


def measure(options: list[str], duration: float, seed: int, out: Path,
            shell_only: bool = False) -> dict:
    argv = [*options, '--duration', str(duration), '--seed', str(seed), '--no-progress',
            '--out', str(out)]
    mode = '--child-shell-only' if shell_only else '--child'
    done = subprocess.run([sys.executable, __file__, mode, *argv], check=True,
                          stdout=subprocess.PIPE, text=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result['sha256'] = hashlib.sha256((out / 'metrics.csv').read_bytes()).hexdigest()
    return result


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ('--child', '--child-shell-only'):
        child(sys.argv[2:], shell_only=sys.argv[1] == '--child-shell-only')
        return
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cases', nargs='+', choices=tuple(CASES), default=list(CASES))
    parser.add_argument('--duration', type=float, default=None,
                        help='sim seconds of every case (default: per case, see --help)')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--repeat', type=int, default=1, help='runs per case')
    parser.add_argument('--d-safe', type=float, default=None,
                        help="separation distance [m] (default: the controller's, 2 m; 0: off); "
                        'the law flies at most half the ring spacing')
    parser.add_argument('--phases', action='store_true',
                        help='also print the CPU seconds of each phase of a run (start-up, '
                        'loop, outputs, close): the fixed cost per process')
    parser.add_argument('--shell-only', action='store_true',
                        help="replace the agents' control step with a zero command: what the "
                        'graph costs around the controller')
    add_engine_option(parser)
    parser.add_argument('swarm_sim', nargs='*', help='more swarm_sim options, after --')
    add_options(parser)
    args = parser.parse_args()
    load = begin(args)
    rows, phase_rows = [], []
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    compile_sources(sys.executable, *(Path(__file__).resolve().parents[1] / p for p in PACKAGES))
    print(f'{"case":<13}{"sim s":>7}{"loop CPU s":>12}{"sim-s/CPU-s":>13}{"total CPU s":>13}'
          f'{"sim-s/CPU-s (total)":>21}{"peak RSS MiB":>14}  metrics.csv sha256')
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.cases:
            options, duration = CASES[name]
            duration = args.duration or duration
            options = with_engine([*options, *args.swarm_sim], args.engine)
            if args.d_safe is not None:
                options += d_safe_scenario(args.d_safe, Path(tmp) / f'{name}.yaml')
            for run in range(args.repeat):
                r = measure(options, duration, args.seed, Path(tmp) / f'{name}_{run}',
                            args.shell_only)
                print(f'{name:<13}{r["sim"]:>7.1f}{r["loop_cpu"]:>12.1f}'
                      f'{r["sim"] / r["loop_cpu"]:>13.2f}{r["total_cpu"]:>13.1f}'
                      f'{r["sim"] / r["total_cpu"]:>21.2f}{r["rss_mib"]:>14.0f}  '
                      f'{r["sha256"][:16]}', flush=True)
                rows.append([name, round(r['sim'], 1), round(r['sim'] / r['loop_cpu'], 2),
                             round(r['sim'] / r['total_cpu'], 2), round(r['rss_mib'])])
                if args.phases:
                    phases = r['phases']
                    fixed = r['total_cpu'] - phases.get('loop', 0.0)
                    labels = [label for label in dict.fromkeys(('imports', *PHASES.values()))
                              if label in phases and label != 'loop']
                    print(f'  fixed {fixed:.2f} CPU-s: ' + ', '.join(
                        f'{label} {phases[label]:.2f}' for label in labels), flush=True)
                    phase_rows.append([name, round(fixed, 2),
                                       *(round(phases[label], 2) for label in labels)])
                    phase_labels = labels
    results = {'engine': args.engine, 'runs': table(
        ['case', 'sim-s', 'loop: sim-s per CPU-s', 'whole process: sim-s per CPU-s',
         'peak RSS [MiB]'], rows)}
    name = 'swarm_sim' + ('' if args.engine == 'nodes' else f'_{args.engine}')
    if args.phases:
        results['phases'] = table(['case', 'fixed CPU-s', *phase_labels], phase_rows)
        name += '_phases'
    save(args, name + ('_shell_only' if args.shell_only else ''), results, load)


if __name__ == '__main__':
    main()
