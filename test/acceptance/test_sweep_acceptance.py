"""
sweep_sim at scale, as a process and on Dask: equal to batch_sim, Ctrl-C and resume, huge specs.

The multi-second and minute-scale part of ``unit/sim/test_sweep.py``: the run-axis engine
against the per-agent controllers, outputs and plots, resume, a Dask cluster.
"""
import csv
import json
import math
import os
from pathlib import Path
import signal
import subprocess

import numpy as np
import pytest
import yaml

from soliton_encirclement_ros.analysis.report import SETTLE_THRESHOLDS
from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim import sweep
from soliton_encirclement_ros.sim.batch_sim import main as batch_sim_main, simulate
from soliton_encirclement_ros.sim.executables import find_executable
from soliton_encirclement_ros.sim.sweep import main, RESULT_COLUMNS
from support.sweeps import (
    IMPAIRED, results as _results, rows as _rows, write_spec as _write_spec)
from support.waits import wait_for


def test_sweep_rows_equal_batch_sim_runs_of_the_same_scenario(tmp_path):
    scenario_file = tmp_path / 'scenario.yaml'
    scenario_file.write_text(yaml.safe_dump(IMPAIRED))
    spec = _write_spec(tmp_path / 'spec.yaml', scenario='scenario.yaml',
                       grid={'k_r': [0.5, 1.5]}, seeds=[3, 4], plot={'metric': 'E_r'})
    assert main([str(spec), '--out', str(tmp_path / 'sweep'), '--workers', '2',
                 '--no-plots']) == 0
    rows = _rows(tmp_path / 'sweep')
    assert [(r['k_r'], r['seed']) for r in sorted(rows, key=lambda r: (r['k_r'], r['seed']))] \
        == [('0.5', '3'), ('0.5', '4'), ('1.5', '3'), ('1.5', '4')]
    for k_r in (0.5, 1.5):
        for seed in (3, 4):
            out = tmp_path / f'batch_{k_r}_{seed}'
            scenario_file.write_text(yaml.safe_dump({**IMPAIRED, 'controller': {'k_r': k_r}}))
            assert batch_sim_main(['--scenario', str(scenario_file), '--seed', str(seed),
                                   '--out', str(out)]) == 0
            summary = json.loads((out / 'summary.json').read_text())
            expected = ([summary['final'][m] for m in METRIC_NAMES]
                        + [summary['mean'][m] for m in METRIC_NAMES]
                        + [summary['settle_time'][m] for m in SETTLE_THRESHOLDS]
                        + [summary['closest']['d_min'], summary['closest']['time'],
                           summary['area_margin']])  # no area: NaN (null) in both
            expected = np.array([math.nan if v is None else v for v in expected], dtype=float)
            [row] = [r for r in rows if float(r['k_r']) == k_r and int(r['seed']) == seed]
            np.testing.assert_allclose(_results(row), expected, rtol=0, atol=1e-9)
    assert float(rows[0]['final_E_gap']) != float(rows[1]['final_E_gap'])  # seeds differ


def test_ctrl_c_keeps_the_finished_runs_and_resume_completes_them(tmp_path):
    # 40 gains: 40 groups, so 40 chunks finishing one after another.
    gains = [round(0.5 + 0.05 * k, 2) for k in range(40)]
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 8, 'duration': 40.0, 'control_period': 0.05},
                       grid={'k_r': gains})
    out = tmp_path / 'out'
    # Beside Python (pip) or in the ament prefix (colcon test), as the runner finds nodes.
    cmd = [find_executable('sweep_sim'), str(spec), '--out', str(out), '--workers', '1',
           '--no-plots']
    _interrupt_after_first_chunk(_start(cmd), out)
    kept = _rows(out)
    assert 1 <= len(kept) < 40 and (out / 'summary.csv').exists()
    assert json.loads((out / 'sweep.json').read_text())['totals']['interrupted'] is True
    done = subprocess.run(cmd + ['--resume'], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert sorted(float(r['k_r']) for r in rows) == gains
    assert all(r in rows for r in kept)


def _start(cmd):
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _interrupt_after_first_chunk(proc, out, probe=lambda: None):
    """SIGINT a running sweep once its first rows are written; check it stopped as asked."""
    try:
        wait_for(lambda: (out / 'runs.csv').exists() and _rows(out), 'rows of the first chunk')
        measured = probe()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert 'Traceback' not in stderr and 'interrupted: --resume finishes it' in stdout
    return measured


def _first_line(proc, deadline_s: float) -> str:
    """Return the first stdout line, or fail if it does not come within the deadline."""
    lines = []
    reader = __import__('threading').Thread(target=lambda: lines.append(proc.stdout.readline()),
                                            daemon=True)
    reader.start()
    reader.join(deadline_s)
    assert lines, f'no line within {deadline_s} s'
    return lines[0]


def test_a_huge_spec_says_its_run_count_at_once_and_ctrl_c_is_one_line(tmp_path):
    # 100,000 grid points x 20 seeds: 2,000,000 runs, 100,000 scenarios to check.
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 1.0},
                       grid={'k_r': [round(0.5 + 0.001 * k, 3) for k in range(1000)],
                             'loss': [round(0.001 * k, 3) for k in range(100)]},
                       seeds=20)
    out = tmp_path / 'out'
    proc = _start([find_executable('sweep_sim'), str(spec), '--out', str(out), '--workers',
                   '1', '--no-plots'])
    try:
        line = _first_line(proc, 60.0)  # it used to be silent for minutes
        assert line.startswith('sweep_sim: 2000000 runs (100000 grid point(s) x 20 seed(s))')
        proc.send_signal(signal.SIGINT)  # while the scenarios are checked
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert stdout == '' and 'Traceback' not in stderr
    assert stderr.count('\n') == 1 and stderr.startswith(
        'sweep_sim: interrupted while checking the spec (')
    assert 'nothing was run or written' in stderr
    assert not out.exists()


def test_the_runs_of_a_huge_spec_are_streamed_not_held(tmp_path):
    # 2 grid points x 1,000,000 seeds: two scenarios to check, then runs as they are needed.
    spec = _write_spec(tmp_path / 'spec.yaml',
                       scenario={'agents': 2, 'duration': 0.1, 'control_period': 0.02},
                       grid={'k_r': [0.5, 1.0]}, seeds=1_000_000)
    out = tmp_path / 'out'
    proc = _start([find_executable('sweep_sim'), str(spec), '--out', str(out), '--workers',
                   '1', '--no-plots'])
    try:
        assert _first_line(proc, 60.0).startswith('sweep_sim: 2000000 runs')
    except BaseException:
        proc.kill()
        raise
    peak_kb = _interrupt_after_first_chunk(proc, out, probe=lambda: int(next(
        line.split()[1] for line in Path(f'/proc/{proc.pid}/status').read_text().splitlines()
        if line.startswith('VmHWM:'))))
    assert 1 <= len(_rows(out)) < 2_000_000
    assert peak_kb < 400_000  # holding 2,000,000 runs took about 2 GB


def test_the_summary_of_a_huge_sweep_is_read_as_columns(tmp_path):
    """200,000 finished runs: the summary equals numpy's over the column, in bounded memory."""
    import tracemalloc
    spec_path = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 1.0},
                            grid={'k_r': [0.5, 1.0]}, seeds=100_000)
    spec = sweep.load_spec(spec_path)
    header = sweep.runs_header(spec)
    rng = np.random.default_rng(0)
    finals = rng.random((2, 100_000))
    path = tmp_path / 'runs.csv'
    with path.open('w', newline='') as f:
        writer = csv.writer(f)
        writer.writerow(header)
        for i, k_r in enumerate((0.5, 1.0)):
            for seed in range(100_000):
                row = {'k_r': repr(k_r), 'seed': str(seed), 'error': '',
                       'final_E_gap': repr(float(finals[i, seed])), 'wall_time': '0.01'}
                writer.writerow([row.get(h, '1.0') for h in header])
    tracemalloc.start()
    try:
        table = sweep.RunTable(path, ['k_r'])
        summary = sweep.summary_rows(spec, table)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(table) == 200_000 and [s['runs'] for s in summary] == [100_000, 100_000]
    for i in range(2):
        q1, median, q3 = np.percentile(finals[i], [25, 50, 75])
        assert summary[i]['final_E_gap_median'] == pytest.approx(median, abs=1e-15)
        assert summary[i]['final_E_gap_iqr'] == pytest.approx(q3 - q1, abs=1e-15)
    assert peak < 150e6  # 58 MB; rows as dicts took 320 MB here, over 3 GB at 2e6 runs


def test_the_run_axis_engine_equals_the_per_agent_controllers():
    """Every metric at every tick, with loss, delay, short outages and a moving target."""
    scenarios = [Scenario.from_mapping({**IMPAIRED, 'seed': s}) for s in (0, 1, 2)]
    together = simulate_runs(scenarios).metrics
    assert sum(np.isnan(m[:, 1:]).any() for m in together) == 0
    for scenario, batch in zip(scenarios, together):
        reference = simulate(scenario, 'per-agent')
        assert reference.params['engine'] == 'per-agent'
        np.testing.assert_allclose(batch, reference.metrics, rtol=0, atol=1e-9)
    # A run's result does not depend on the runs stepped with it.
    alone = simulate_runs(scenarios[1:2]).metrics[0]
    np.testing.assert_array_equal(alone, together[1])


def test_outputs_summary_and_plots(tmp_path):
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={**IMPAIRED, 'duration': 4.0},
                       grid={'k_r': [0.5, 1.0], 'loss': [0.0, 0.3]}, seeds=3,
                       plot={'metric': 'E_gap', 'x': 'k_r', 'y': 'loss'})
    out = tmp_path / 'out'
    assert main([str(spec), '--out', str(out)]) == 0
    rows = _rows(out)
    assert len(rows) == 12 and not any(r['error'] for r in rows)
    with (out / 'summary.csv').open(newline='') as f:
        summary = list(csv.DictReader(f))
    assert [(s['k_r'], s['loss'], s['runs']) for s in summary] == [
        ('0.5', '0.0', '3'), ('0.5', '0.3', '3'), ('1.0', '0.0', '3'), ('1.0', '0.3', '3')]
    finals = [float(r['final_E_gap']) for r in rows if r['k_r'] == '1.0' and r['loss'] == '0.3']
    q1, median, q3 = np.percentile(finals, [25, 50, 75])
    assert float(summary[3]['final_E_gap_median']) == pytest.approx(median, abs=1e-12)
    assert float(summary[3]['final_E_gap_iqr']) == pytest.approx(q3 - q1, abs=1e-12)
    for name in ('heatmap_E_gap.png', 'box_E_gap.png', 'settle_cdf.png'):
        assert (out / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    meta = json.loads((out / 'sweep.json').read_text())
    assert meta['spec']['grid'] == {'k_r': [0.5, 1.0], 'loss': [0.0, 0.3]}
    assert meta['totals']['finished'] == 12 and meta['totals']['errors'] == 0
    assert meta['versions']['numpy'] == np.__version__


def test_resume_runs_only_what_is_missing_and_gives_the_same_rows(tmp_path):
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={**IMPAIRED, 'duration': 3.0},
                       grid={'loss': [0.0, 0.2]}, seeds=3)
    full, part = tmp_path / 'full', tmp_path / 'part'
    assert main([str(spec), '--out', str(full), '--no-plots']) == 0
    assert main([str(spec), '--out', str(part), '--no-plots']) == 0
    lines = (part / 'runs.csv').read_text().splitlines()
    (part / 'runs.csv').write_text('\n'.join(lines[:3]) + '\n')  # as if stopped after two runs
    assert main([str(spec), '--out', str(part), '--no-plots', '--resume']) == 0
    meta = json.loads((part / 'sweep.json').read_text())
    assert meta['totals']['this_session']['runs'] == 4
    assert not (part / 'runs.csv.tmp').exists()  # the kept rows replaced the file whole

    def key(rows):
        return sorted(tuple(r[c] for c in ['loss', 'seed'] + RESULT_COLUMNS) for r in rows)
    assert key(_rows(part)) == key(_rows(full))


def test_a_dask_cluster_gives_the_local_results(tmp_path):
    distributed = pytest.importorskip('dask.distributed', reason='dask[distributed] missing')
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={**IMPAIRED, 'duration': 3.0},
                       grid={'k_r': [0.5, 1.0]}, seeds=3)
    assert main([str(spec), '--out', str(tmp_path / 'local'), '--no-plots']) == 0
    env_before = dict(os.environ)
    try:  # a cluster on loopback only, started and stopped by this test
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      host='127.0.0.1', dashboard_address=None) as cluster:
            assert main([str(spec), '--out', str(tmp_path / 'dask'), '--no-plots',
                         '--scheduler', cluster.scheduler_address]) == 0
    finally:  # LocalCluster exports thread limits (OMP_NUM_THREADS, ...): not for later tests
        os.environ.clear()
        os.environ.update(env_before)

    def key(rows):
        return sorted(tuple(r[c] for c in ['k_r', 'seed'] + RESULT_COLUMNS) for r in rows)
    assert key(_rows(tmp_path / 'dask')) == key(_rows(tmp_path / 'local'))
    meta = json.loads((tmp_path / 'dask' / 'sweep.json').read_text())
    assert meta['totals']['this_session']['scheduler'].startswith('tcp://127.0.0.1:')


def _old_code_on_worker_0():
    """
    Return a Dask worker plugin by which worker 0 reports an older version than the client.

    Defined in a function so that cloudpickle ships the class by value to the worker processes;
    it replaces what the worker-side provenance function reports, nothing of Dask.
    """
    from dask.distributed import WorkerPlugin

    class OldCode(WorkerPlugin):
        name = 'old-code'

        def setup(self, worker):
            if worker.name == 0:
                import soliton_encirclement_ros.provenance as provenance
                provenance.package_version = lambda: '0.0.1'
    return OldCode()


def test_a_worker_with_other_code_is_refused_in_one_line(tmp_path, capsys):
    distributed = pytest.importorskip('dask.distributed', reason='dask[distributed] missing')
    from soliton_encirclement_ros.provenance import code_identity
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={**IMPAIRED, 'duration': 3.0},
                       grid={'k_r': [0.5, 1.0]}, seeds=2)
    env_before = dict(os.environ)
    try:  # a cluster on loopback only, started and stopped by this test
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      host='127.0.0.1', dashboard_address=None) as cluster, \
                distributed.Client(cluster) as client:
            client.register_plugin(_old_code_on_worker_0())
            reported = client.run(code_identity)
            assert sorted(i['version'] for i in reported.values()) == sorted(
                ['0.0.1', code_identity()['version']])
            old_worker = next(a for a, i in reported.items() if i['version'] == '0.0.1')
            capsys.readouterr()
            assert main([str(spec), '--out', str(tmp_path / 'dask'), '--no-plots',
                         '--scheduler', cluster.scheduler_address]) == 2
            # A worker that joins after the check gives error rows, never silently other rows.
            rows = client.submit(sweep.run_chunk_checked, [{}, {}], code_identity(),
                                 workers=[old_worker], pure=False).result()
    finally:  # LocalCluster exports thread limits (OMP_NUM_THREADS, ...): not for later tests
        os.environ.clear()
        os.environ.update(env_before)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f'sweep_sim: error: --scheduler {cluster.scheduler_address}: '
                             f'1 of 2 worker(s) run other code than this client, e.g. '
                             f'{old_worker}: version 0.0.1 (this client: ')
    assert not (tmp_path / 'dask' / 'runs.csv').exists()
    assert rows == [{'error': 'worker runs other code: version 0.0.1 (this client: '
                              f'{code_identity()["version"]})'}] * 2
