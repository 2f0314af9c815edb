"""
``sweep_sim``: Monte-Carlo parameter sweeps, many runs stepped together, on every core.

    sweep_sim SPEC.yaml --out DIR [--workers K] [--scheduler ADDRESS] [--resume]

SPEC::

    scenario: {agents: 10, duration: 60.0, target_motion: static}   # or a scenario YAML path
    grid: {k_r: [0.5, 1.0, 2.0], failures_per_min: [0.0, 1.0]}     # {} = one grid point
    seeds: 20                                                      # a count, or a list
    plot: {metric: E_gap, x: k_r, y: failures_per_min}             # optional
    preset: default                                                # optional, as batch_sim's

A grid name is a scenario field, a vehicle limit or a controller gain, looked up in that order.
The run count is printed at once; then every grid point's scenario is checked, once (the seeds
only change the seed), before any work. Runs are generated as they are needed, never all held:
runs that may share a numpy step (:func:`~soliton_encirclement_ros.core.batch_engine.group_key`)
go in chunks to a local process pool, or with ``--scheduler`` to a Dask distributed cluster, a
few chunks per worker at a time; each run's row equals ``batch_sim --seed K`` on the same
scenario. ``runs.csv`` gets each finished run at once, so Ctrl-C or a crash keeps them and
``--resume`` skips them. Ctrl-C before the first run is one line and writes nothing.

The package: ``spec`` (the spec, grid routing, seeds, runs), ``scheduling`` (chunks, the local
pool and Dask), ``results`` (runs.csv, summary.csv and the table) and ``cli`` (the command).
"""
from soliton_encirclement_ros.sim.sweep.cli import build_parser, main
from soliton_encirclement_ros.sim.sweep.results import (
    print_table, RESULT_COLUMNS, RUNS_FILE, runs_header, RunsFile, RunTable, SPEC_FILE,
    SUMMARY_FILE, summary_rows, write_summary)
from soliton_encirclement_ros.sim.sweep.scheduling import (
    chunk_size, chunks, dask_results, identity_mismatch, local_results, run_chunk,
    run_chunk_checked, stream_chunks)
from soliton_encirclement_ros.sim.sweep.spec import (
    Checked, Interrupted, load_spec, parameter_home, Run, Spec, SpecError, with_values)

__all__ = ['build_parser', 'Checked', 'chunk_size', 'chunks', 'dask_results', 'Interrupted',
           'identity_mismatch', 'load_spec', 'local_results', 'main', 'parameter_home',
           'print_table', 'RESULT_COLUMNS', 'Run', 'run_chunk', 'run_chunk_checked', 'RUNS_FILE',
           'runs_header', 'RunsFile', 'RunTable', 'SPEC_FILE', 'Spec', 'SpecError',
           'stream_chunks', 'SUMMARY_FILE', 'summary_rows', 'with_values', 'write_summary']
