"""``sweep_sim``: the command, from the spec to the outputs."""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import platform
import sys
import time
from typing import Iterable, Iterator, Optional

import numpy as np

from ros_support.validation import number, OneLineParser
from soliton_encirclement_ros.analysis.outputs import (
    FolderInUse, FolderLock, output_dir_problem, replace_text, write_problem)
from soliton_encirclement_ros.analysis.report import json_text
from soliton_encirclement_ros.core.area import read_area_file
from soliton_encirclement_ros.provenance import code_identity, git_commit, PACKAGE
from soliton_encirclement_ros.sim.sweep.results import (
    print_table, RowsNotWritten, RUNS_FILE, runs_header, RunsFile, RunTable, SPEC_FILE,
    SUMMARY_FILE, summary_rows, write_summary)
from soliton_encirclement_ros.sim.sweep.scheduling import (
    ClusterLost, dask_results, identity_mismatch, local_results, stream_chunks, WorkerLost)
from soliton_encirclement_ros.sim.sweep.spec import (
    Checked, Interrupted, load_spec, Run, Spec, SpecError)

EXIT_INCOMPLETE = 3  # stopped before its end: a full disk, a lost cluster or worker; rows kept


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog='sweep_sim', description='Monte-Carlo sweeps of the soliton encirclement: every '
        'grid point x seed, runs of one shape stepped together, on all cores or a Dask cluster.')
    parser.add_argument('spec', help='sweep spec YAML (scenario, grid, seeds, plot, preset)')
    parser.add_argument('--out', required=True, help='output directory')
    parser.add_argument('--workers', type=number(1, integer=True), default=None,
                        help='local worker processes (default: every core)')
    parser.add_argument('--scheduler', default=None,
                        help='Dask distributed scheduler address (e.g. tcp://host:8786)')
    parser.add_argument('--resume', action='store_true',
                        help='keep the finished runs in --out and run only the others')
    parser.add_argument('--no-plots', action='store_true', help='skip the PNG plots')
    parser.add_argument('--safety-area', metavar='FILE',
                        help='YAML safety area for every run (as swarm_sim and batch_sim take '
                        "it; replaces the scenario's safety_area:): every command keeps its "
                        'vehicle able to stop inside')
    return parser


def main(argv: Optional[Iterable[str]] = None) -> int:
    from ros_support.signals import StopRequest
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    # From here a signal only sets a flag: checked between scenarios, then between chunks.
    stop = StopRequest('sweep_sim').install()
    # One sweep at a time in --out (a fresh one or --resume): held until this process ends.
    lock = FolderLock(out)
    try:
        spec = load_spec(args.spec)
        if args.safety_area:
            try:
                area = read_area_file(args.safety_area)
            except ValueError as exc:
                raise SpecError(f'--safety-area: {exc}') from None
            spec.base['safety_area'] = area
            spec.raw = {**spec.raw, 'safety_area': area}  # --resume compares it too
        print(f'sweep_sim: {spec.run_count} runs ({spec.point_count} grid point(s) x '
              f'{len(spec.seeds)} seed(s)); checking {spec.point_count} scenario(s)', flush=True)
        problem = output_dir_problem(out, '--out')
        if problem:
            raise SpecError(problem)
        try:
            lock.acquire('sweep_sim')
        except FolderInUse as exc:
            raise SpecError(str(exc)) from None
        if (out / RUNS_FILE).exists() and not args.resume:
            raise SpecError(f'--out {out} already holds a sweep ({RUNS_FILE}); '
                            'add --resume to finish it, or choose another --out')
        if args.resume and (out / SPEC_FILE).exists():
            previous = json.loads((out / SPEC_FILE).read_text()).get('spec')
            if previous != spec.raw:
                raise SpecError(f"--resume: {out / SPEC_FILE} is another sweep's spec")
        checked = spec.check(lambda: stop.requested)
        cluster_threads = _cluster_threads(args.scheduler) if args.scheduler else None
        if stop.requested:
            raise Interrupted('interrupted before the first run; nothing was run or written')
    except SpecError as exc:
        lock.release(undo=True)
        print(f'sweep_sim: error: {exc}', file=sys.stderr)
        return 2
    except Interrupted as exc:
        lock.release(undo=True)
        print(f'sweep_sim: {exc}', file=sys.stderr)
        StopRequest.ignore_from_now()
        return 130
    except ImportError as exc:
        lock.release(undo=True)
        print(f'sweep_sim: error: --scheduler needs Dask distributed ({exc.name} is not '
              'installed): pip install "dask[distributed]"', file=sys.stderr)
        return 2
    try:
        return _sweep(spec, checked, out, args, stop, cluster_threads)
    finally:
        lock.release()


def _cluster_threads(address: str) -> int:
    """
    Return the worker threads of the Dask cluster at ``address``.

    ``SpecError`` (one line) if it has none, or if a worker runs another version or commit of
    this package than the client: its rows could differ silently from the client's.
    """
    from dask.distributed import Client
    try:
        with Client(address, timeout='10s') as client:
            threads = sum(client.nthreads().values())
            identities = client.run(code_identity, on_error='return') if threads else {}
    except (OSError, TimeoutError) as exc:
        raise SpecError(f'--scheduler {address}: cannot reach a Dask scheduler ({exc})') from None
    if not threads:
        raise SpecError(f'--scheduler {address}: the cluster has no workers')
    client_identity = code_identity()
    refused = {}
    for worker, identity in sorted(identities.items()):
        if isinstance(identity, BaseException):
            refused[worker] = (f'cannot run {PACKAGE} '
                               f'({type(identity).__name__}: {identity})')
        elif identity_mismatch(identity, client_identity):
            refused[worker] = identity_mismatch(identity, client_identity)
    if refused:
        worker, why = next(iter(refused.items()))
        raise SpecError(
            f'--scheduler {address}: {len(refused)} of {len(identities)} worker(s) run other '
            f'code than this client, e.g. {worker}: {why}; install the same {PACKAGE} '
            'checkout on every worker')
    return threads


def _quiet_bar(tqdm: type) -> type:
    """
    Return ``tqdm`` without its monitor thread: the progress bar of a sweep.

    The bar moves once a chunk, each time drawn (``miniters=1``), so the monitor, which
    redraws a bar that waits for more updates than come, has nothing to do; without its
    thread a local pool's fork server is a fork of this process
    (``scheduling._fork_server_here``).
    """
    class SweepBar(tqdm):
        monitor_interval = 0
    return SweepBar


def _sweep(spec: Spec, checked: Checked, out: Path, args, stop, cluster_threads=None) -> int:
    from tqdm import tqdm

    from ros_support.signals import StopRequest
    out.mkdir(parents=True, exist_ok=True)
    workers = cluster_threads or args.workers or os.cpu_count() or 1
    try:
        runs_file = RunsFile(out / RUNS_FILE, runs_header(spec), args.resume)
    except SpecError as exc:
        print(f'sweep_sim: error: {exc}', file=sys.stderr)
        return 2
    except (RowsNotWritten, OSError) as exc:  # a full disk before the first run
        problem = (str(exc) if isinstance(exc, RowsNotWritten)
                   else write_problem(str(out / RUNS_FILE), exc))
        print(f'sweep_sim: error: {problem}; nothing was run', file=sys.stderr)
        return EXIT_INCOMPLETE
    if runs_file.dropped:
        print(f'sweep_sim: warning: {runs_file.dropped}', file=sys.stderr)
    total = spec.run_count
    todo = total - min(len(runs_file.done), total)
    started = time.time()
    try:
        _write_spec(out, spec, args, total, None, started)
    except OSError as exc:
        runs_file.close()
        print(f'sweep_sim: error: {write_problem(f"{out / SPEC_FILE} not written", exc)}; '
              'nothing was run', file=sys.stderr)
        return EXIT_INCOMPLETE
    n_chunks = 0

    def work() -> Iterator[list[Run]]:
        nonlocal n_chunks
        for chunk in stream_chunks(spec.runs(checked, runs_file.done.__contains__), checked,
                                   workers):
            n_chunks += 1
            yield chunk
    errors = finished = 0
    bar = _quiet_bar(tqdm)(total=total, initial=total - todo, unit='run', desc='sweep_sim',
                           file=sys.stderr, dynamic_ncols=True, miniters=1)
    cpu_start = time.process_time()
    should_stop = (lambda: stop.requested)
    results = (dask_results(work(), args.scheduler, workers, should_stop) if args.scheduler
               else local_results(work(), workers, should_stop))
    failure = ''  # what stopped the sweep before its end (a full disk, a lost cluster)
    try:
        for chunk, rows in results:
            for run, row in zip(chunk, rows):
                runs_file.add(run, row)
                errors += bool(row.get('error'))
                finished += 1
            bar.update(len(chunk))
            if stop.requested:
                break
    except (RowsNotWritten, ClusterLost, WorkerLost) as error:
        failure = str(error)
    finally:
        stop.writing = True
        results.close()
        runs_file.close()
        bar.close()
    interrupted = stop.requested or finished < todo
    table = RunTable(out / RUNS_FILE, list(spec.grid))
    summary = summary_rows(spec, table)
    totals = {'runs': total, 'finished': len(table), 'errors': int(table.failed.sum()),
              'this_session': {'runs': finished, 'errors': errors,
                               'wall_time': time.time() - started,
                               'parent_cpu_time': time.process_time() - cpu_start,
                               'chunks': n_chunks, 'workers': workers,
                               'scheduler': args.scheduler},
              'interrupted': interrupted, **({'stopped_by': failure} if failure else {})}
    not_written = _write_outputs(out, spec, args, (summary, table, totals, started))
    print_table(spec, summary, spec.plot['metric'])
    print(f'sweep_sim: {len(table)}/{total} runs in {out} ({totals["errors"]} failed); '
          f'{finished} this session in {time.time() - started:.1f} s'
          + ('; interrupted: --resume finishes it' if interrupted else ''))
    StopRequest.ignore_from_now()
    if failure or not_written:
        print(f'sweep_sim: error: {failure or not_written}'
              + (f'; {not_written}' if failure and not_written else '')
              + ('; --resume finishes the sweep' if interrupted else ''), file=sys.stderr)
        return EXIT_INCOMPLETE
    return 130 if interrupted else (1 if totals['errors'] else 0)


def _write_outputs(out: Path, spec: Spec, args, done) -> str:
    """
    Write summary.csv, the plots and sweep.json from the finished runs; say what failed, or ''.

    ``done``: (summary rows, :class:`RunTable`, totals, start time). A full disk stops this at
    the first write that fails; what is written stays whole (runs.csv is never touched here).
    """
    summary, table, totals, started = done
    steps = [(SPEC_FILE, lambda: _write_spec(out, spec, args, totals['runs'], totals, started)),
             (SUMMARY_FILE, lambda: write_summary(out / SUMMARY_FILE, summary))]
    if not args.no_plots:
        from soliton_encirclement_ros.analysis.sweep_plots import write_sweep_plots
        steps.append(('the plots', lambda: write_sweep_plots(out, spec, table, summary)))
    for index, (name, write) in enumerate(steps):
        try:
            write()
        except OSError as error:
            names = [name for name, _ in steps[index:]]
            return write_problem(f'{", ".join(names[:-1])}{" and " if names[1:] else ""}'
                                 f'{names[-1]} not written', error)
    return ''


def _write_spec(out: Path, spec: Spec, args, total: int, totals: Optional[dict],
                started: float) -> None:
    import importlib.metadata as md
    versions = {'python': platform.python_version(), 'numpy': np.__version__}
    for package in ('soliton_encirclement_ros', 'dask', 'distributed'):
        try:
            versions[package] = md.version(package)
        except md.PackageNotFoundError:
            pass
    versions['soliton_encirclement_ros_commit'] = git_commit()
    doc = {'spec': spec.raw, 'spec_file': str(Path(args.spec).absolute()), 'runs': total,
           'started': time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(started)),
           'versions': versions, 'totals': totals}
    replace_text(out / SPEC_FILE, json_text(doc))  # whole or not at all


if __name__ == '__main__':
    sys.exit(main())
