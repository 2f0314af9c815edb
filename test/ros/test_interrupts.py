"""
Ctrl-C (SIGINT) or SIGTERM in every phase of the tools: one line, exit 130, never a traceback.

Each test marks a phase (``support.phases``), waits for the tool to say it entered it, and
signals then. swarm_sim stopped before its run (its plan, its domain check, its graph's start)
runs nothing; batch_sim stopped while it simulates writes what it simulated; analyze_run and
fit_mobility stop where they are.
"""
import json
import signal

import pytest

from support.circle_bag import write_circle_bag
from support.phases import command
from support.synthetic_flight import fly, write_ros_bag
from support.waits import Running
from velocity_mobility_ros.core.vehicle import VehicleParams

TRACEBACK = ('Traceback', 'KeyboardInterrupt')


def stopped(process: Running, signum: int) -> tuple[int, str]:
    """Send ``signum`` and return (exit code, stderr); no traceback allowed."""
    code, _, err = process.stop(signum)
    assert not any(word in err for word in TRACEBACK), err
    return code, err


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
@pytest.mark.parametrize('phase, mark', [
    ('plan', ('soliton_encirclement_ros.sim.runner', 'build_graph', True)),
    ('domain check', ('soliton_encirclement_ros.sim.domain', 'other_swarm_problem', False)),
    ('graph start', ('soliton_encirclement_ros.sim.inprocess', 'InProcessGraph', True)),
], ids=['plan', 'domain-check', 'graph-start'])
def test_swarm_sim_stopped_before_its_run_says_so_in_one_line(tmp_path, phase, mark, signum):
    out = tmp_path / 'out'
    with Running(command('swarm_sim', [mark], '--agents', '3', '--duration', '5',
                         '--no-progress', '--out', str(out))) as sim:
        sim.wait_for_line(f'phase: {mark[1]}')
        code, err = stopped(sim, signum)
    assert code == 130, err
    lines = [line for line in err.splitlines() if line.startswith('swarm_sim')]
    assert lines == ['swarm_sim: interrupted before the run started; nothing was run'], err
    assert not out.exists() or not list(out.iterdir())


def test_batch_sim_stopped_while_it_builds_writes_nothing(tmp_path):
    out = tmp_path / 'out'
    mark = ('soliton_encirclement_ros.sim.batch_sim', 'SwarmRun', True)
    with Running(command('batch_sim', [mark], '--agents', '3', '--duration', '5',
                         '--out', str(out))) as sim:
        sim.wait_for_line('phase: SwarmRun')
        code, err = stopped(sim, signal.SIGINT)
    assert code == 130, err
    assert err.splitlines()[-1] == ('batch_sim: interrupted before the first step; nothing was '
                                    'run or written')
    assert not out.exists()


@pytest.mark.parametrize('signum', [signal.SIGINT, signal.SIGTERM], ids=['SIGINT', 'SIGTERM'])
def test_batch_sim_stopped_while_it_simulates_writes_what_it_simulated(tmp_path, signum):
    out = tmp_path / 'out'
    mark = ('soliton_encirclement_ros.core.swarm_run', 'SwarmRun.advance', True)
    with Running(command('batch_sim', [mark], '--agents', '3', '--duration', '100000',
                         '--no-plots', '--out', str(out))) as sim:
        sim.wait_for_line('phase: advance')
        code, err = stopped(sim, signum)
    assert code == 130, err
    assert 'batch_sim: interrupted at t=0 s of 100000 s; writing what was simulated' in err
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['params']['interrupted_at'] == 0.0
    assert (out / 'metrics.csv').read_text().count('\n') == 2  # the header and tick 0


# An agent's controller in the per-agent engine hears every other: with 2000 agents one control
# tick takes about half a minute of CPU time (and 1 GB) once the broadcasts are in, as a tick of
# a swarm near batch_sim's memory bound does in the vectorised engine.
LONG_TICK_AGENTS = 2000
PROMPT = 10.0  # s: a stop inside a tick ends it; waiting for the tick would take far longer


def test_batch_sim_stopped_inside_a_long_tick_exits_promptly_with_what_it_simulated(tmp_path):
    out = tmp_path / 'out'
    mark = ('soliton_encirclement_ros.core.swarm_run', 'SwarmRun.advance', False)
    with Running(command('batch_sim', [mark], '--agents', str(LONG_TICK_AGENTS),
                         '--engine', 'per-agent', '--duration', '1', '--no-plots',
                         '--out', str(out))) as sim:
        sim.wait_for_line('phase: advance')  # tick 0 is done; tick 1 is the long one
        sim.send_signal(signal.SIGTERM)
        code, _, err = sim.wait(timeout=PROMPT)
    assert not any(word in err for word in TRACEBACK), err
    assert code == 130, err
    lines = [line for line in err.splitlines() if line.startswith('batch_sim: interrupted')]
    assert lines == [f'batch_sim: interrupted at t=0 s of 1 s; writing what was simulated into '
                     f'{out}'], err
    assert (out / 'metrics.csv').read_text().count('\n') == 2  # the header and tick 0
    assert json.loads((out / 'summary.json').read_text())['params']['interrupted_at'] == 0.0


@pytest.mark.parametrize('tool, mark, line', [
    ('analyze_run', ('soliton_encirclement_ros.analysis.cli', 'recompute_metrics', True),
     'analyze_run: interrupted; the outputs written so far are incomplete'),
    ('fit_mobility', ('soliton_encirclement_ros.analysis.fit_mobility', 'fit_all', True),
     'fit_mobility: interrupted; nothing was written'),
], ids=['analyze_run', 'fit_mobility'])
def test_an_analysis_stopped_midway_is_one_line(tmp_path, tool, mark, line):
    bag, out = tmp_path / 'bag', tmp_path / 'out'
    if tool == 'analyze_run':
        write_circle_bag(bag)
    else:
        write_ros_bag(bag, {'uav1': fly(VehicleParams(), duration=20.0, seed=1)})
    with Running(command(tool, [mark], str(bag), '--out', str(out))) as process:
        process.wait_for_line(f'phase: {mark[1]}')
        code, err = stopped(process, signal.SIGINT)
    assert code == 130, err
    assert err.splitlines()[-1] == line, err


def metrics_rows(path) -> int:
    """Return the complete rows the streamed metrics.csv ``path`` holds (0: not there yet)."""
    from soliton_encirclement_ros.analysis.report import METRICS_HEADER
    from soliton_encirclement_ros.analysis.stream import read_rows
    try:
        return len(read_rows(path, len(METRICS_HEADER)))
    except (OSError, ValueError):
        return 0


@pytest.mark.parametrize('mode', [(), ('--engine', 'auto'),
                                  ('--processes', '--real-time-factor', '2')],
                         ids=['in-process', 'engine', 'processes'])
def test_swarm_sim_stopped_midway_says_so_in_its_summary_report_and_bag(tmp_path, mode):
    # An interrupted run used to write summary.json with the scenario's duration and no word
    # that it stopped early; its flight report showed the recording's 30 s above 'duration 300'.
    import sys

    import yaml

    from soliton_encirclement_ros.analysis import cli
    from soliton_encirclement_ros.analysis.bag_reader import Bag
    from support.waits import wait_for
    out, bag, analysis = tmp_path / 'out', tmp_path / 'bag', tmp_path / 'analysis'
    with Running([sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', *mode,
                  '--agents', '3', '--duration', '100000', '--control-period', '0.05',
                  '--no-progress', '--no-plots', '--out', str(out),
                  '--record', str(bag)]) as sim:
        wait_for(lambda: metrics_rows(out / 'metrics.csv') >= 20
                 or sim.process.poll() is not None, f'20 metrics rows in {out / "metrics.csv"}')
        assert sim.process.poll() is None, sim.err[-800:]
        code, stdout, err = sim.stop(signal.SIGINT)
    assert not any(word in err for word in TRACEBACK), err
    # exit 3 only for what a loaded machine can do to --processes: a recorder that fell behind
    lines = [line for line in err.splitlines() if line.startswith('swarm_sim: error')]
    assert code == 0 or (code == 3 and len(lines) == 1
                         and lines[0].endswith('the recorder did not keep up with them')), err
    params = json.loads((out / 'summary.json').read_text())['params']
    at = params['interrupted_at']
    assert params['duration'] == 100000.0 and 1.0 <= at < 100000.0, params
    assert f'swarm_sim: interrupted at t={at:g} s of 100000 s' in err
    assert f'interrupted at t={at:g} s of its 100000 s' in stdout
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert info['custom_data']['interrupted_at'] == f'{at:g}'
    with Bag(next(bag.glob('*.mcap'))) as reader:  # the MCAP's own metadata record too
        assert reader.custom_data['interrupted_at'] == f'{at:g}'
    assert cli.main([str(bag), '--out', str(analysis), '--max-frames', '0', '--report']) == 0
    assert json.loads((analysis / 'summary.json').read_text())['params'][
        'interrupted_at'] == float(f'{at:g}')
    html = (analysis / 'report.html').read_text()
    assert f'partial: the recorded run was interrupted at t={at:g} s of its 100000 s' in html
