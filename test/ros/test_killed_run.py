"""
A swarm_sim killed with SIGKILL leaves what it streamed under --out (issue 39, part 7, defect 2).

Before the fix metrics_node streamed its rows into an unnamed temporary directory
(``metrics_node_*`` in one process, ``swarm_sim_metrics_*`` with --processes) and the runner
wrote --out only at the end: a killed run never created --out.
"""
import os
from pathlib import Path
import signal
import subprocess
import sys

import pytest

from soliton_encirclement_ros.analysis.report import METRICS_HEADER
from soliton_encirclement_ros.analysis.stream import read_rows
from support.procfs import alive, children_of, command_line, descendants_of
from support.waits import wait_for

DEADLINE = 180.0  # wall s for anything waited on (a loaded machine is slow)
ROWS = 40         # metrics rows streamed before the kill
ORPHAN_DEADLINE = 5.0  # wall s for the nodes of a killed runner to be gone (SIGKILL)


def rows_in(path: Path) -> int:
    """Return how many complete rows the streamed CSV ``path`` holds (0 if it is not there)."""
    try:
        return len(read_rows(path, len(METRICS_HEADER)))
    except (OSError, ValueError):
        return 0


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
@pytest.mark.parametrize('mode', [(), ('--processes', '--real-time-factor', '4')],
                         ids=['in-process', 'processes'])
def test_a_killed_swarm_sim_leaves_its_streamed_metrics_under_out(tmp_path, mode):
    out = tmp_path / 'runs' / 'killed'
    tmp = tmp_path / 'tmp'  # the run's temporary files: none of the outputs may hide there
    tmp.mkdir()
    proc = subprocess.Popen(
        [sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', *mode, '--agents', '3',
         '--duration', '100000', '--control-period', '0.05', '--no-progress',
         '--out', str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, 'TMPDIR': str(tmp)})
    try:
        wait_for(lambda: rows_in(out / 'metrics.csv') >= ROWS or proc.poll() is not None,
                 f'{ROWS} metrics rows in {out / "metrics.csv"}', timeout=DEADLINE)
        assert proc.poll() is None, proc.communicate()[1]
    finally:
        # --processes: the nodes stop with the runner (SIGTERM), after a moment
        children = children_of(proc.pid) if proc.poll() is None else []
        proc.kill()  # SIGKILL
        proc.wait()
        proc.stderr.close()
        for pid in children:  # not left to finish on their own: stopped before looking
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == -signal.SIGKILL
    assert rows_in(out / 'metrics.csv') >= ROWS
    header = (out / 'metrics.csv').read_text().splitlines()[0]
    assert header == ','.join(METRICS_HEADER)
    assert (out / 'agents.csv').read_text().startswith('node_id,timestamp,u,velocity_norm\n')
    assert not list(tmp.rglob('metrics.csv'))  # nothing of it in a temporary directory


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='needs Linux /proc')
def test_the_nodes_of_a_killed_processes_run_end_at_once(tmp_path):
    # An orphan node used to stop as on SIGTERM, writing its outputs: metrics_node drew its
    # figures for tens of seconds on a loaded machine, with no runner left to use them.
    out = tmp_path / 'killed'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'soliton_encirclement_ros.sim.runner', '--processes',
         '--real-time-factor', '4', '--agents', '3', '--duration', '100000',
         '--control-period', '0.05', '--no-progress', '--out', str(out)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: rows_in(out / 'metrics.csv') >= ROWS or proc.poll() is not None,
                 f'{ROWS} metrics rows in {out / "metrics.csv"}', timeout=DEADLINE)
        assert proc.poll() is None
        nodes = descendants_of(proc.pid)
        assert len(nodes) >= 6  # the mobility, the target, 3 agents, metrics_node
    finally:
        proc.kill()  # SIGKILL
        proc.wait()
    try:
        wait_for(lambda: not alive(nodes), 'the nodes of the killed runner '
                 f'({", ".join(command_line(pid)[:50] for pid in alive(nodes))}) to end',
                 timeout=ORPHAN_DEADLINE)
    finally:
        for pid in alive(nodes):
            os.kill(pid, signal.SIGKILL)
    assert rows_in(out / 'metrics.csv') >= ROWS  # what metrics_node streamed stays
