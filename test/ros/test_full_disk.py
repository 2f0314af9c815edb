"""
A full or read-only disk under a run: one line, a finished run, exit 3; never a traceback.

The disks are small tmpfs mounts (``support.disks``; skipped without root). summary.json is
written before the figures, which take the most room; a stream or a bag that meets the full
disk stops writing there while the run goes on to its end; ``--record`` and ``run_recorder -o``
in a place that cannot take a bag are refused before anything runs.
"""
import json
import subprocess
import sys

import pytest

from soliton_encirclement_ros.analysis.bag_reader import Bag
from soliton_encirclement_ros.analysis.stream import read_rows
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.sim.executables import find_executable
from support.disks import tmpfs

DEADLINE = 300.0
QUICK = ['--agents', '3', '--no-progress']


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(command), capture_output=True, text=True, timeout=DEADLINE)


def swarm_sim(*args: str) -> subprocess.CompletedProcess:
    return run(sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', *args)


def errors(stderr: str, prog: str) -> list[str]:
    assert 'Traceback' not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith(f'{prog}: error')]


@pytest.mark.parametrize('mode', [[], ['--engine', 'auto']], ids=['nodes', 'engine'])
def test_a_disk_that_fills_during_the_run_stops_the_streams_and_the_run_goes_on(tmp_path, mode):
    with tmpfs(tmp_path / 'disk', '200k') as disk:
        result = swarm_sim(*QUICK, *mode, '--duration', '60', '--out', str(disk / 'run'))
        assert result.returncode == 3, result.stderr
        lines = errors(result.stderr, 'swarm_sim')
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith(f'swarm_sim: error: outputs incomplete in {disk / "run"}: '
                                   'metrics.csv not written beyond its last whole row: No space '
                                   'left on device'), lines
        assert 'summary.json not written: No space left on device' in lines[0]
        assert 'real-time factor' in result.stdout  # the summary table of what was measured
        rows = read_rows(disk / 'run' / 'metrics.csv', 7)
        assert 10.0 < rows[-1, 0] < 60.0  # whole rows, up to where the disk filled


@pytest.mark.parametrize('mode, size', [
    ([], '400k'), (['--processes', '--real-time-factor', '10'], '160k')],
    ids=['in-process', 'processes'])  # room for the tables (metrics_node's are shorter)
def test_summary_json_is_written_before_the_figures_that_fill_the_disk(tmp_path, mode, size):
    with tmpfs(tmp_path / 'disk', size) as disk:
        out = disk / 'run'
        result = swarm_sim(*QUICK, *mode, '--duration', '20', '--out', str(out))
        assert result.returncode == 3, result.stderr
        lines = errors(result.stderr, 'swarm_sim')
        assert len(lines) == 1 and 'outputs incomplete' in lines[0], result.stderr
        assert ('the figures not written: No space left on device' in lines[0]
                or 'figures missing: ' in lines[0]), lines
        summary = json.loads((out / 'summary.json').read_text())
        # what the run measured (a metric is null when no agent was live at the end, as a
        # --processes run's under load can be at 20 s)
        assert set(summary['final']) == set(METRIC_NAMES) and summary['params']['duration'] == 20
        assert summary['params']['mode'] == ('processes' if mode else 'in-process')
        assert not list(out.glob('.outputs-*'))  # no staging directory left behind
        assert (out / 'summary.json').stat().st_mode & 0o777 == 0o644


def test_batch_sim_on_a_full_disk_says_what_it_could_not_write(tmp_path):
    with tmpfs(tmp_path / 'disk', '100k') as disk:
        result = run(find_executable('batch_sim'), '--agents', '3', '--duration', '60',
                     '--out', str(disk / 'run'))
        assert result.returncode == 3, result.stderr
        # the tables stream as the run goes (as swarm_sim's): they stop at their last whole row
        assert errors(result.stderr, 'batch_sim') == [
            f'batch_sim: error: outputs incomplete in {disk / "run"}: metrics.csv not written '
            'beyond its last whole row: No space left on device; agents.csv not written beyond '
            'its last whole row: No space left on device; summary.json not written: No space '
            'left on device']
        assert 'final E_r=' in result.stdout
        rows = read_rows(disk / 'run' / 'metrics.csv', 7)
        assert 0.0 < rows[-1, 0] < 60.0
        # the run finished: no summary.json that calls it unfinished is left
        assert not (disk / 'run' / 'summary.json').exists()


@pytest.mark.parametrize('mode', [[], ['--processes', '--real-time-factor', '3']],
                         ids=['in-process', 'processes'])
def test_a_record_on_a_full_disk_stops_recording_and_the_run_finishes(tmp_path, mode):
    # --processes: the runner records what the nodes publish as they publish it (it took one
    # message per turn of its loop, a few per topic and second, which a full disk held to the
    # end: exit 0, the rest unsaid)
    out = tmp_path / 'run'
    with tmpfs(tmp_path / 'disk', '200k') as disk:
        bag = disk / 'bag'
        result = swarm_sim(*QUICK, *mode, '--duration', '30', '--out', str(out),
                           '--record', str(bag))
        assert result.returncode == 3, result.stderr
        lines = errors(result.stderr, 'swarm_sim')
        assert len(lines) == 1, result.stderr
        assert f'outputs incomplete in {out}: bag {bag} not written beyond t=' in lines[0]
        stopped = float(lines[0].split('not written beyond t=')[1].split(' s:')[0])
        # the sim time it stopped at (--processes: the nodes' clock runs on a moment while
        # they stop, and the bag takes what they sent until then)
        assert 0.0 < stopped < (35.0 if mode else 30.0), lines[0]
        assert result.stderr.count(f'bag {bag} not written beyond') == 2  # log line, error line
        # The disk fills while the bag is written (its chunks are flushed every second) or,
        # on a loaded machine that records less, only when it is closed: the same time is named.
        said = [f'No space left on device ({how}; the bag holds what was written before)'
                for how in ('recording stopped', 'not closed whole')]
        # --processes on a loaded machine: what the bag missed before, said in the same line
        assert any(lines[0].endswith(text) or f'{text}; bag {bag} misses ' in lines[0]
                   for text in said), lines[0]
        # the run finished: its summary holds the final figures (how far a loaded --processes
        # ring converged in 30 s is another test's; the in-process run is lock-step)
        final = json.loads((out / 'summary.json').read_text())['final']['E_gap']
        assert final < (1.0 if mode else 0.05), final
        with Bag(bag) as recorded:
            # Cut where the disk filled, or (filled as it closed, past its Data End record) whole
            # but for its summary and metadata.yaml: either way the reader says so.
            assert recorded.truncated or recorded.metadata_damaged, 'read as whole'
            assert '/clock' in recorded.topics


def test_a_record_or_run_recorder_where_no_bag_can_be_written_is_refused_before_the_run(
        tmp_path):
    out = tmp_path / 'run'
    with tmpfs(tmp_path / 'ro', '100k', read_only=True) as read_only:
        result = swarm_sim(*QUICK, '--duration', '3', '--out', str(out),
                           '--record', str(read_only / 'bag'))
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip() == (f'swarm_sim: error: --record {read_only / "bag"} is '
                                         'not writable: Read-only file system')
        assert not out.exists()
        recorder = run(find_executable('run_recorder'), '-o', str(read_only / 'bag'))
        assert recorder.returncode == 1, recorder.stderr
        assert recorder.stderr.strip() == (f'run_recorder: error: output {read_only / "bag"} '
                                           'is not writable: Read-only file system')
