"""
sweep_sim: runs stepped together equal the per-agent controllers; pool, Dask, outputs, resume.

No rclpy here except where the CLI is started as a user would start it. At scale and as a
process (Ctrl-C, huge specs, equal to batch_sim): ``acceptance/test_sweep_acceptance.py``.
"""
import csv
import json
import os

import numpy as np
import pytest

from soliton_encirclement_ros.core.batch_engine import simulate_runs
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim import sweep
from soliton_encirclement_ros.sim.batch_sim import simulate
from soliton_encirclement_ros.sim.sweep import main, RESULT_COLUMNS, run_chunk
from support.sweeps import IMPAIRED, rows as _rows, write_spec as _write_spec


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


def test_a_run_that_raises_is_recorded_and_the_others_are_kept():
    good = Scenario.from_mapping({**IMPAIRED, 'duration': 2.0}).to_mapping()
    bad = {**good, 'agents': 0}
    rows = run_chunk([good, bad, good])
    assert [bool(r['error']) for r in rows] == [False, True, False]
    assert 'agents must be an integer >= 1' in rows[1]['error']
    assert rows[0]['final_E_gap'] == rows[2]['final_E_gap']


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


@pytest.mark.parametrize('spec, message', [
    ({'grid': {'k_rr': [1.0]}}, "unknown parameter 'k_rr' (did you mean k_r?)"),
    ({'grid': {'k_r': [-1.0]}}, 'k_r=-1.0: k_r must be'),
    ({'grid': {'max_speed_xy': ['fast']}}, "max_speed_xy='fast'"),
    ({'grid': {'seed': [1]}}, 'seed cannot be a grid parameter (use seeds)'),
    ({'seeds': 0}, 'seeds must be a count >= 1'),
    ({'scenario': {'agents': 0}}, 'scenario: agents must be an integer >= 1'),
    ({'grid': {'k_r': [1.0]}, 'plot': {'x': 'loss'}}, 'plot: x must be a grid parameter'),
    ({'grids': {}}, 'unknown spec key(s) grids'),
])
def test_bad_specs_are_one_line_and_exit_2_before_any_work(tmp_path, capsys, spec, message):
    path = _write_spec(tmp_path / 'spec.yaml', **spec)
    out = tmp_path / 'out'
    assert main([str(path), '--out', str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith('sweep_sim: error: ') and err.count('\n') == 1 and message in err
    assert not out.exists()


def test_an_unusable_out_or_a_finished_sweep_is_refused(tmp_path, capsys):
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 0.5})
    blocker = tmp_path / 'file'
    blocker.write_text('')
    assert main([str(spec), '--out', str(blocker)]) == 2
    assert 'exists and is not a directory' in capsys.readouterr().err
    out = tmp_path / 'out'
    assert main([str(spec), '--out', str(out), '--no-plots']) == 0
    capsys.readouterr()
    assert main([str(spec), '--out', str(out)]) == 2
    assert 'already holds a sweep' in capsys.readouterr().err


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


def test_identity_mismatch_names_version_and_commit():
    client = {'version': '0.1.0', 'commit': 'abc'}
    assert sweep.identity_mismatch(dict(client), client) == ''
    assert sweep.identity_mismatch({'version': '0.1.0', 'commit': 'def'}, client) == \
        'commit def (this client: abc)'
    assert sweep.identity_mismatch({'version': '0.0.9', 'commit': 'def'}, client) == \
        'version 0.0.9 (this client: 0.1.0), commit def (this client: abc)'


def test_each_grid_point_is_checked_once_not_once_per_seed(tmp_path, monkeypatch):
    built = []
    post_init = Scenario.__post_init__

    def counting(self):
        built.append((self.controller.get('k_r'), self.loss, self.seed))
        post_init(self)
    monkeypatch.setattr(Scenario, '__post_init__', counting)
    started = []
    monkeypatch.setattr(sweep.cli, '_sweep', lambda *args, **kw: started.append(len(built)) or 0)
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 1.0},
                       grid={'k_r': [0.5, 1.0, 2.0], 'loss': [0.0, 0.1]}, seeds=50)
    assert main([str(spec), '--out', str(tmp_path / 'out')]) == 0
    # the spec's scenario once, then each of the 6 grid points once: not 300 runs
    assert started == [7]
    assert sorted(built[1:]) == sorted((k, loss, 0) for k in (0.5, 1.0, 2.0)
                                       for loss in (0.0, 0.1))


@pytest.mark.parametrize('seeds, message', [
    (2**31 + 1, 'seeds: seed must be'),
    ([0, 2**31], 'seeds: seed must be'),
])
def test_seeds_beyond_the_scenario_rule_are_refused_before_any_work(tmp_path, capsys, seeds,
                                                                    message):
    path = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 1.0},
                       seeds=seeds)
    assert main([str(path), '--out', str(tmp_path / 'out')]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and message in err
