"""
sweep_sim: specs, error rows, refusals, worker identity.

No rclpy here. The run-axis engine against the per-agent controllers, outputs and plots,
resume, Dask, at scale and as a process (Ctrl-C, huge specs, equal to batch_sim):
``acceptance/test_sweep_acceptance.py``.
"""
import json
import os

import pytest

from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.sim import sweep
from soliton_encirclement_ros.sim.sweep import main, run_chunk
from support.sweeps import IMPAIRED, rows as _rows, write_spec as _write_spec


def test_a_run_that_raises_is_recorded_and_the_others_are_kept():
    good = Scenario.from_mapping({**IMPAIRED, 'duration': 2.0}).to_mapping()
    bad = {**good, 'agents': 0}
    rows = run_chunk([good, bad, good])
    assert [bool(r['error']) for r in rows] == [False, True, False]
    assert 'agents must be an integer >= 1' in rows[1]['error']
    assert rows[0]['final_E_gap'] == rows[2]['final_E_gap']


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


@pytest.mark.parametrize('keep', [3, 6, -2], ids=['in-the-seed', 'in-a-result', 'before-the-end'])
def test_resume_drops_a_last_row_that_a_full_disk_cut_and_runs_it_again(tmp_path, capsys, keep):
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 0.5},
                       grid={'loss': [0.0, 0.25]}, seeds=2)
    out = tmp_path / 'out'
    assert main([str(spec), '--out', str(out), '--no-plots']) == 0
    whole = (out / 'runs.csv').read_text()
    lines = whole.splitlines(keepends=True)
    cut = ''.join(lines[:-1]) + lines[-1][:keep]  # the last row written only in part
    (out / 'runs.csv').write_text(cut)
    capsys.readouterr()
    assert main([str(spec), '--out', str(out), '--no-plots', '--resume']) == 0
    err = capsys.readouterr().err
    assert 'Traceback' not in err
    warnings = [line for line in err.splitlines() if 'sweep_sim: warning' in line]
    assert len(warnings) == 1 and warnings[0].startswith('sweep_sim: warning: ')
    assert f'its last row (line {len(lines)}) was cut short' in err
    rows = _rows(out)
    assert len(rows) == 4 and all(row['final_E_gap'] for row in rows)
    assert sorted(tuple(row.values())[:2] for row in rows) == sorted(
        tuple(line.split(',')[:2]) for line in whole.splitlines()[1:])
    assert json.loads((out / 'sweep.json').read_text())['totals']['this_session']['runs'] == 1


def test_resume_refuses_a_broken_row_that_is_not_the_last_in_one_line(tmp_path, capsys):
    spec = _write_spec(tmp_path / 'spec.yaml', scenario={'agents': 3, 'duration': 0.5},
                       grid={'loss': [0.0, 0.25]}, seeds=2)
    out = tmp_path / 'out'
    assert main([str(spec), '--out', str(out), '--no-plots']) == 0
    lines = (out / 'runs.csv').read_text().splitlines(keepends=True)
    lines[2] = lines[2][:5] + '\n'
    (out / 'runs.csv').write_text(''.join(lines))
    capsys.readouterr()
    assert main([str(spec), '--out', str(out), '--no-plots', '--resume']) == 2
    err = capsys.readouterr().err
    assert err.startswith('sweep_sim: error: --resume: ') and err.count('\n') == 1
    assert 'line 3 is not a row of this sweep' in err
    assert (out / 'runs.csv').read_text() == ''.join(lines)  # left as it was
    assert not (out / 'runs.csv.tmp').exists()


@pytest.mark.parametrize('code, said', [(-9, 'was killed by SIGKILL'),
                                        (-40, 'was killed by signal 40'),
                                        (1, 'exited with status 1')])
def test_a_lost_worker_is_named_with_how_it_ended(code, said):
    from types import SimpleNamespace

    from soliton_encirclement_ros.sim.sweep.scheduling import _check_workers, WorkerLost
    running, ended = SimpleNamespace(pid=11, exitcode=None), SimpleNamespace(pid=12, exitcode=code)
    _check_workers([running])  # nothing ended: nothing said
    with pytest.raises(WorkerLost) as lost:
        _check_workers([running, ended])
    assert str(lost.value) == (f'a worker process of the sweep (pid 12) {said}; the runs it '
                               'was computing are lost')


@pytest.mark.skipif(not os.path.exists('/proc/self/status'), reason='needs Linux /proc')
@pytest.mark.parametrize('threads', [0, 1])
def test_the_fork_server_is_a_fork_of_a_process_without_threads_else_a_fresh_python(threads):
    # A fresh Python imports again what the sweep has imported (a fixed cost of every sweep);
    # a fork of a process with another thread could inherit a lock that thread held.
    import subprocess
    import sys
    from pathlib import Path
    code = ('import os, threading\n'
            'from soliton_encirclement_ros.sim.sweep import scheduling, server\n'
            f'stop = threading.Event()\n'
            f'for _ in range({threads}):\n'
            '    threading.Thread(target=stop.wait, daemon=True).start()\n'
            'with scheduling.worker_pool(1) as (pool, started):\n'
            '    state = pool.apply(server.state)\n'
            '    own = open("/proc/self/cmdline", "rb").read()\n'
            '    pid = started[0].pid\n'
            '    theirs = open(f"/proc/{pid}/cmdline", "rb").read()\n'
            'print(state["parent"] == pid, state["warm"], theirs == own,\n'
            '      b"multiprocessing." + b"forkserver" in theirs)\n'  # not in own
            'stop.set()\n')
    root = Path(sweep.__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=600, cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == (['True', 'True', 'True', 'False'] if threads == 0
                                   else ['True', 'True', 'False', 'True']), done.stdout


@pytest.mark.skipif(not os.path.exists('/proc/self/status'), reason='needs Linux /proc')
def test_local_workers_are_forked_from_a_server_that_loaded_their_code_once():
    # A spawned worker paid its own imports and numba's cache loads (about 0.9 CPU-s each).
    from soliton_encirclement_ros.core import compiled
    from soliton_encirclement_ros.sim.sweep import scheduling, server
    from support.procfs import alive, children_of, pool_servers

    with scheduling.worker_pool(2) as (pool, _):
        states = [pool.apply(server.state) for _ in range(4)]
        servers = pool_servers(os.getpid())
    assert len(servers) == 1, servers
    for state in states:
        assert state['parent'] == servers[0] != os.getpid(), state
        assert state['warm'] is True, state
        if compiled.kernels() is not None:  # numba installed and not switched off
            assert {'control_rows', 'metrics_rows', 'vehicle_steps'} <= set(state['kernels']), \
                state
    assert not alive(servers), 'the fork server outlived stop_fork_server'
    assert servers[0] not in children_of(os.getpid()), 'the fork server was not waited for'
