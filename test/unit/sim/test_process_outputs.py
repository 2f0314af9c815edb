"""What swarm_sim --processes makes of the outputs metrics_node streamed (no rclpy)."""
import json
from types import SimpleNamespace

import numpy as np

from soliton_encirclement_ros.analysis.report import METRICS_HEADER
from soliton_encirclement_ros.analysis.stream import CsvStream
from soliton_encirclement_ros.sim import runner


def streamed(out, times):
    """metrics.csv with rows at ``times`` and the summary.json a metrics_node would write."""
    out.mkdir()
    stream = CsvStream(out / 'metrics.csv', METRICS_HEADER, flush_period=0.0)
    stream.append(np.column_stack([times, np.zeros((len(times), len(METRICS_HEADER) - 1))]))
    stream.close()
    (out / 'summary.json').write_text(json.dumps({'params': {'radius': 20.0}}))
    return out


def collect(out, duration=12.0, mixed=None):
    args = runner.parse_args(['--processes', '--agents', '2', '--duration', str(duration),
                              '--no-plots', '--out', str(out)])
    plan = runner.plan_from_args(args)
    timing = runner.RunTiming(real_time_factor=1.0, sim_time=duration, wall_time=duration)
    return runner._collect_process_outputs(out, plan, args, timing, mixed)


def test_the_spans_the_metrics_miss_go_into_the_summary_with_the_run_parameters(tmp_path):
    out = streamed(tmp_path / 'run', np.arange(1, 601) * 0.01)  # rows up to 6 s of 12 s
    summary, incomplete = collect(out)
    assert incomplete == ''
    written = json.loads((out / 'summary.json').read_text())
    assert written['unmeasured'] == {'spans': [[6.0, 12.0]], 'count': 1, 'seconds': 6.0}
    assert written['params']['mode'] == 'processes' and written['params']['radius'] == 20.0
    assert summary['unmeasured'] == written['unmeasured']  # what the run prints from


def test_a_whole_run_has_no_unmeasured_key(tmp_path):
    out = streamed(tmp_path / 'run', np.arange(1, 1201) * 0.01)
    summary, incomplete = collect(out)
    assert incomplete == '' and 'unmeasured' not in summary
    assert 'unmeasured' not in json.loads((out / 'summary.json').read_text())


def test_an_unreadable_metrics_file_is_one_line_and_the_summary_stays_whole(tmp_path):
    out = streamed(tmp_path / 'run', np.arange(1, 601) * 0.01)
    with open(out / 'metrics.csv', 'a') as handle:
        handle.write('7.0,not a number\n')  # not what metrics_node writes
    summary, incomplete = collect(out)
    assert incomplete.startswith('summary.json does not say which spans the metrics miss: '
                                 'metrics.csv could not be read (')
    assert '\n' not in incomplete
    written = json.loads((out / 'summary.json').read_text())
    assert 'unmeasured' not in written and written['params']['mode'] == 'processes'


def watch_that_found(found, at):
    """Return what a run's ``sim.domain.GraphWatch`` holds at the end: what it found, when."""
    return SimpleNamespace(found=found, at=at)


def test_another_swarm_seen_beside_the_run_goes_into_the_summary_whether_metrics_node_wrote_it(
        tmp_path, monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', '7')
    mixed = runner.mixed_summary(watch_that_found('the swarm started by process 42 is running',
                                                  3.14159))
    assert mixed == {'mixed_with': {'swarm': 'the swarm started by process 42 is running',
                                    'seen_at': 3.142, 'domain': 7}}
    written_by_node = streamed(tmp_path / 'run', np.arange(1, 1201) * 0.01)
    recomputed = streamed(tmp_path / 'killed', np.arange(1, 1201) * 0.01)
    (recomputed / 'summary.json').unlink()  # metrics_node did not write it: recomputed
    for out in (written_by_node, recomputed):
        summary, _ = collect(out, mixed=mixed)
        written = json.loads((out / 'summary.json').read_text())
        assert written['mixed_with'] == summary['mixed_with'] == mixed['mixed_with']
        assert written['params']['mode'] == 'processes'


def test_a_run_alone_in_its_domain_has_no_mixed_key(tmp_path):
    assert runner.mixed_summary(watch_that_found('', 0.0)) == {}
    summary, _ = collect(streamed(tmp_path / 'run', np.arange(1, 1201) * 0.01),
                         mixed=runner.mixed_summary(watch_that_found('', 0.0)))
    assert 'mixed_with' not in summary
