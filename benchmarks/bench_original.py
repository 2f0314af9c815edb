r"""
Swarm_sim against the original experiment at equal work: sim-s per CPU-s, paired runs.

The original is laerciolucchesi/soliton_encirclement at commit 844f1d6 ("Baseline v1") on
GrADyS-SIM NG (gradysim 0.7.5). This script neither fetches nor installs it: set it up by hand,
in a scratch directory outside this repository (nothing of it belongs in the tree):

    ORIGINAL_SRC=/tmp/orig/src ORIGINAL_VENV=/tmp/orig/venv
    git clone https://github.com/laerciolucchesi/soliton_encirclement /tmp/orig/clone
    mkdir -p $ORIGINAL_SRC && git -C /tmp/orig/clone archive 844f1d6 | tar -x -C $ORIGINAL_SRC
    python3.11 -m venv $ORIGINAL_VENV
    $ORIGINAL_VENV/bin/pip install gradysim==0.7.5 pandas matplotlib

then, from this repository:

    .venv/bin/python benchmarks/bench_original.py --original-python $ORIGINAL_VENV/bin/python \
        --original-dir $ORIGINAL_SRC --durations 20 120 --rounds 3

The results file records the command with ``ORIGINAL_VENV`` and ``ORIGINAL_SRC`` in place of
those two paths. The original's child process runs this file under the original's Python,
which has none of this repository's packages: it imports only the standard library.

``--shell-only`` runs swarm_sim with every agent's control step a zero command (its vehicles
stay where they start): what the graph around the controller costs against the original, the
most a free controller would give.

``--engine E`` runs ``swarm_sim --engine E``: every agent's controller in one node, as arrays,
the vehicles' odometry every control period (100 Hz here, as ``--odom-rate 100``). Its agents
hear each other through shared arrays, not messages: of the work listed below, the 110 state
deliveries per tick are gone from its side; the control steps, the mobility at 100 Hz, the
metrics and the outputs remain.

Before the first round, both sides' own sources are byte-compiled (``compileall``: swarm_sim's
packages with this Python, the original's tree with its own), as pip compiles what it installs
and as their libraries already are: where ``PYTHONDONTWRITEBYTECODE`` is set, neither side then
compiles its modules again on every run.

Each round runs the original, then swarm_sim's case ``n10-odom100`` of bench_swarm_sim.py (the
next round in the other order), each in a process of its own. The figure is CPU seconds of the
whole process tree (``getrusage(RUSAGE_CHILDREN)`` of this script around the run: every thread
and child process, start-up and outputs included), which stays stable on a shared machine
where wall time does not; the 1-minute load average is printed with every run.

The original runs its own ``main.py`` (``main()``), headless and at equal work; only
``config_param`` values are changed, before the original's modules are imported:

- N = 10, control period 0.01 s (agents and target broadcast every tick), mobility step
  0.01 s with telemetry every step (100 Hz: swarm_sim's ``--odom-rate 100``), duration;
- static target (``TARGET_MOTION_SPEED_XY = 0``), no injected failures, no swarm spin
  (``omega_ref`` = 0), uniform spacing (``PROTECTION_ANGLE_DEG = 360``), seeded placement:
  swarm_sim's defaults;
- its ``VisualizationHandler`` is not built (it starts a multiprocessing manager and a
  WebSocket server) and its adversary node is not added (swarm_sim has none; it only feeds the
  spin controller, which is off).

``--original-preset shipped`` keeps the original's own scenario instead (moving target,
adversary and spin controller, failures of 1 per minute, 90-degree protection arc): more work
on one side, for reference only.

Both sides then compute per 0.01 s tick: 10 agent control steps, 10 agent and 1 target state
broadcasts (each delivered to every other node: 110 JSON decodes in the original, 100 swarm
states + the target's to 10 agents in swarm_sim), the mobility of 11 vehicles with their
100 Hz telemetry / odometry, and the 5 metrics (the original's target at every telemetry,
swarm_sim's metrics node at every control tick); both write the metrics CSV and plots at the
end. Differences left: the original logs an agent row every 0.01 s (swarm_sim every 0.1 s) and
its agents read their position from the mobility handler, not from odometry messages.
Before the rounds, one 1 s swarm_sim run fills numba's kernel cache where it is cold (once per
install; its CPU seconds are printed and saved apart as ``first_run_cpu_s``).
Writes the medians and the paired ratios to benchmarks/results/original[_ENGINE].json
(``--no-save``: print only). Asserts nothing.
"""
import argparse
import contextlib
import importlib.util
import io
import json
import os
from pathlib import Path
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# benchmarks/results.py is imported in main(), not here: this file also runs as the original's
# child (--original-child) under the original's own Python, which has no soliton_encirclement_ros.

CASE = 'n10-odom100'  # bench_swarm_sim.py's case: N = 10, P = 0.01 s, odometry 100 Hz
PERIOD = 0.01  # control period, mobility step and telemetry period of both sides [s]
EQUAL = {  # the original's config_param values at swarm_sim's n10-odom100 scenario
    'NUM_AGENTS': 10,
    'CONTROL_PERIOD': PERIOD,
    'TARGET_STATE_BROADCAST_PERIOD': PERIOD,
    'AGENT_STATE_TIMEOUT': 3.0 * PERIOD,
    'TARGET_STATE_TIMEOUT': 5.0 * PERIOD,
    'VM_UPDATE_RATE': PERIOD,
    'VM_SEND_TELEMETRY': True,
    'VM_TELEMETRY_DECIMATION': 1,
    'COMMUNICATION_TRANSMISSION_RANGE': 200.0,
    'COMMUNICATION_DELAY': 0.0,
    'COMMUNICATION_FAILURE_RATE': 0.0,
    'ENCIRCLEMENT_RADIUS': 20.0,
    'TARGET_MOTION_SPEED_XY': 0.0,
    'FAILURE_ENABLE': False,
    'TARGET_SWARM_SPIN_ENABLE': False,
    'TARGET_SWARM_OMEGA_REF': 0.0,
    'PROTECTION_ANGLE_DEG': 360.0,
    'EXPERIMENT_REPRODUCIBLE': True,
    'SIM_REAL_TIME': False,
    'SIM_DEBUG': False,
}
SHIPPED = {key: EQUAL[key] for key in ('NUM_AGENTS', 'CONTROL_PERIOD', 'VM_UPDATE_RATE',
                                       'VM_TELEMETRY_DECIMATION', 'EXPERIMENT_REPRODUCIBLE',
                                       'SIM_REAL_TIME', 'SIM_DEBUG')}


def original_child(spec: dict) -> None:
    """Run the original's main() headless in this process; print one JSON line."""
    sys.path[:0] = [spec['dir'], os.path.join(spec['dir'], 'src')]
    import config_param
    for key, value in spec['config'].items():
        if not hasattr(config_param, key):
            raise SystemExit(f'the original has no config_param.{key}: another commit?')
        setattr(config_param, key, value)
    import main as original  # the original's main.py; binds the values above

    cpu = {}

    class Headless(original.SimulationBuilder):

        def add_handler(self, handler):
            return self if handler is None else super().add_handler(handler)

        def add_node(self, protocol, position):
            if spec['no_adversary'] and protocol is original.AdversaryProtocol:
                return -1
            return super().add_node(protocol, position)

        def build(self):
            sim = super().build()
            finalize = sim._finalize_simulation

            def timed_finalize():
                cpu.setdefault('loop_end', time.process_time())
                cpu['sim'] = sim._current_timestamp
                finalize()

            sim._finalize_simulation = timed_finalize
            cpu['loop_start'] = time.process_time()
            return sim

    original.VisualizationHandler = lambda *args, **kwargs: None
    original.SimulationBuilder = Headless
    with contextlib.redirect_stdout(io.StringIO()):
        original.main()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({'sim': cpu['sim'], 'loop_cpu': cpu['loop_end'] - cpu['loop_start'],
                      'total_cpu': usage.ru_utime + usage.ru_stime,
                      'rss_mib': usage.ru_maxrss / 1024}))


def tree_cpu() -> float:
    """Return the CPU seconds of this process's waited-for children and their descendants."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_original(python: str, directory: str, config: dict, no_adversary: bool,
                 duration: float, cwd: Path) -> dict:
    spec = {'dir': os.path.abspath(directory), 'no_adversary': no_adversary,
            'config': {**config, 'SIM_DURATION': duration}}
    cwd.mkdir()
    done = subprocess.run([python, os.path.abspath(__file__), '--original-child',
                           json.dumps(spec)], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise SystemExit(f'the original failed ({done.returncode}):\n{done.stderr[-3000:]}')
    return json.loads(done.stdout.strip().splitlines()[-1])


def load_bench_swarm_sim(tree: Path):
    path = tree / 'benchmarks' / 'bench_swarm_sim.py'
    spec = importlib.util.spec_from_file_location('bench_swarm_sim', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(run, *args) -> tuple[dict, float, float]:
    """Call run(*args); return its result, the tree's CPU seconds and the load before."""
    load = os.getloadavg()[0]
    before = tree_cpu()
    result = run(*args)
    return result, tree_cpu() - before, load


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == '--original-child':
        original_child(json.loads(sys.argv[2]))
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # results.py, beside this
    from results import add_options, begin, command_line, save, table
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--original-python', required=True,
                        help="python of the scratch venv holding gradysim and the original's "
                        'dependencies')
    parser.add_argument('--original-dir', required=True,
                        help="the original's source tree (main.py, config_param.py, src/)")
    parser.add_argument('--original-preset', choices=('equal', 'shipped'), default='equal',
                        help='equal: at swarm_sim n10-odom100 work (default); shipped: the '
                        "original's own scenario, N and period as above")
    parser.add_argument('--durations', type=float, nargs='+', default=[20.0, 120.0],
                        help='sim seconds of the runs (default 20 120)')
    parser.add_argument('--rounds', type=int, default=3, help='pairs of runs per duration')
    parser.add_argument('--seed', type=int, default=0, help="swarm_sim's seed")
    parser.add_argument('--tree', type=Path, default=Path(__file__).resolve().parents[1],
                        help='source tree of swarm_sim to measure (default: this checkout); '
                        'another one, e.g. a `git archive` snapshot, goes first on PYTHONPATH')
    parser.add_argument('--shell-only', action='store_true',
                        help="swarm_sim with its agents' control step a zero command "
                        '(bench_swarm_sim.py --shell-only): the most a free controller gives')
    here = load_bench_swarm_sim(Path(__file__).resolve().parents[1])  # its --engine
    here.add_engine_option(parser)
    add_options(parser)
    args = parser.parse_args()
    load_before = begin(args)
    rows = []
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    tree = args.tree.resolve()
    if tree != Path(__file__).resolve().parents[1]:
        os.environ['PYTHONPATH'] = os.pathsep.join(
            [str(tree), *filter(None, [os.environ.get('PYTHONPATH')])])
    bench = load_bench_swarm_sim(tree)
    # Both sides' own sources byte-compiled, as installed packages are (their libraries are).
    here.compile_sources(sys.executable, *(tree / p for p in here.PACKAGES))
    here.compile_sources(args.original_python, Path(args.original_dir))
    options = here.with_engine(bench.CASES[CASE][0], args.engine)
    config = EQUAL if args.original_preset == 'equal' else SHIPPED
    no_adversary = args.original_preset == 'equal'
    commit = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=tree,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True).stdout.strip() or 'no git'
    print(f'swarm_sim {CASE}{" --shell-only" if args.shell_only else ""} --engine {args.engine} '
          f'of {tree} ({commit}) '
          f'vs the original ({args.original_preset}); '
          f'load {" ".join(f"{x:.2f}" for x in os.getloadavg())}; {os.cpu_count()} CPUs')
    print(f'{"run":<10}{"sim s":>7}{"tree CPU s":>12}{"sim-s/CPU-s":>13}{"loop":>7}'
          f'{"RSS MiB":>9}{"load":>7}')
    ratios = {}
    with tempfile.TemporaryDirectory() as tmp:
        # Once per install, the first run whose engine is compiled fills numba's kernel cache
        # (core/compiled.py); every run after loads it. Said apart, not in the rounds.
        _, first_cpu, _ = timed(bench.measure, options, 1.0, args.seed, Path(tmp) / 'first',
                                *((args.shell_only,) if args.shell_only else ()))
        print(f'first swarm_sim (a 1 s run: start-up, and the one-off compile where the kernel '
              f'cache is cold): {first_cpu:.1f} CPU-s', flush=True)
        for duration in args.durations:
            rates = {'original': [], 'swarm_sim': []}
            for round_ in range(args.rounds):
                sides = ['original', 'swarm_sim']
                if round_ % 2:  # ABBA: neither side always runs first
                    sides.reverse()
                paired = {}
                for side in sides:
                    out = Path(tmp) / f'{side}_{duration:g}_{round_}'
                    if side == 'original':
                        result, cpu, load = timed(run_original, args.original_python,
                                                  args.original_dir, config, no_adversary,
                                                  duration, out)
                    else:
                        # Passed only when asked: an older --tree's measure() lacks it.
                        shell = (args.shell_only,) if args.shell_only else ()
                        result, cpu, load = timed(bench.measure, options, duration,
                                                  args.seed, out, *shell)
                    rate = result['sim'] / cpu
                    rates[side].append(rate)
                    paired[side] = rate
                    print(f'{side:<10}{result["sim"]:>7.1f}{cpu:>12.1f}{rate:>13.2f}'
                          f'{result["sim"] / result["loop_cpu"]:>7.2f}'
                          f'{result["rss_mib"]:>9.0f}{load:>7.2f}', flush=True)
                ratio = paired['swarm_sim'] / paired['original']
                ratios.setdefault(duration, []).append(ratio)
                print(f'  round {round_ + 1}, {duration:g} s: swarm_sim / original = '
                      f'{ratio:.2f}x', flush=True)
            print(f'{duration:g} s runs, median sim-s per CPU-s of the tree: original '
                  f'{statistics.median(rates["original"]):.2f}, swarm_sim '
                  f'{statistics.median(rates["swarm_sim"]):.2f}; paired ratios '
                  f'{", ".join(f"{r:.2f}" for r in ratios[duration])}x (median '
                  f'{statistics.median(ratios[duration]):.2f}x)', flush=True)
            rows.append([f'{duration:g} s', round(statistics.median(rates['original']), 2),
                         round(statistics.median(rates['swarm_sim']), 2),
                         ', '.join(f'{r:.2f}x' for r in ratios[duration])])
    print(f'load {" ".join(f"{x:.2f}" for x in os.getloadavg())} at the end')
    name = 'original' + ('' if args.engine == 'nodes' else f'_{args.engine}')
    # The command in the reader's terms: the original's venv and tree as the docs name them.
    argv = list(sys.argv)
    for option, placeholder in (('--original-python', 'ORIGINAL_VENV/bin/python'),
                                ('--original-dir', 'ORIGINAL_SRC')):
        if option in argv[:-1]:
            argv[argv.index(option) + 1] = placeholder
    save(args, name + ('_shell_only' if args.shell_only else ''), {
        'engine': args.engine, 'original_preset': args.original_preset,
        'first_run_cpu_s': round(first_cpu, 1),
        'pairs': table(['runs', 'original: sim-s per CPU-s', 'swarm_sim: sim-s per CPU-s',
                        'swarm_sim / original, each pair'], rows)}, load_before,
         command=command_line(argv))


if __name__ == '__main__':
    main()
