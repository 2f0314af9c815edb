"""
The suite in a ROS lab's shell: ``ROS_DOMAIN_ID`` exported, and a swarm live in that domain.

Issue 27: the tests kept an exported domain, so every test module (and the user's own swarm)
shared one graph; a recorder test's bag filled with another graph's ``/clock`` and metrics,
and the ``--processes`` ring ran on a foreign clock. Here pytest runs tests that would fail in
a joined domain in a subprocess whose shell exports this module's (locked) domain while a
swarm publishes in it: they pass, and the swarm is left alone. The recorder's signal tests
count every message of the bag (a foreign metric or agent state is one too many), and a short
``--processes`` run exits 0 (``swarm_sim`` refuses a domain where another swarm publishes, and
its nodes are processes that inherit the domain). Not the 25 s ring itself: it proves nothing
more here than in ``test_swarm_sim.py``, and it was most of this test's time.

The inner pytest takes nothing of the outer run but the domain: ``colcon test --pytest-args``
hands its arguments over in ``PYTEST_ADDOPTS``, and an inner run that inherited them started
this same test again, recursively (a swarm each). Its tests wait on conditions with the suite's
deadlines, so a loaded machine makes them slower, not failed.
"""
import os
from pathlib import Path
import re
import signal
import subprocess
import sys

from std_msgs.msg import Float64

from soliton_encirclement_ros.interface import METRICS_TOPIC_PREFIX
from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import GraphProbe, Running

ROOT = Path(__file__).resolve().parents[2]
WOULD_FAIL_IN_A_JOINED_DOMAIN = [
    'test/ros/test_recorder_node.py::test_signal_closes_a_readable_bag_with_every_message',  # 2
    'test/ros/test_no_plots.py::test_no_plots_with_processes_leaves_no_figure']
SELECTED = 3
METRIC = METRICS_TOPIC_PREFIX + 'E_gap'


def inner_env(domain: int) -> dict[str, str]:
    """
    Return the inner pytest's environment: this one in ``domain``, without the outer run's.

    ``PYTEST_ADDOPTS`` (colcon's ``--pytest-args``: it would select this test again), xdist's
    ``PYTEST_XDIST_*`` and ``PYTEST_CURRENT_TEST`` belong to the outer run.
    """
    return {**{name: value for name, value in os.environ.items()
               if not name.startswith('PYTEST_')}, 'ROS_DOMAIN_ID': str(domain)}


def test_the_inner_run_takes_no_options_of_the_outer_one(monkeypatch):
    monkeypatch.setenv('PYTEST_ADDOPTS', 'test/ros/test_exported_domain.py -x')
    monkeypatch.setenv('PYTEST_XDIST_WORKER', 'gw1')
    env = inner_env(7)
    assert env['ROS_DOMAIN_ID'] == '7' and env['PATH'] == os.environ['PATH']
    assert not [name for name in env if name.startswith('PYTEST_')]


def test_tests_never_join_an_exported_domain_nor_the_swarm_in_it(tmp_path, ros_domain_per_module):
    users_domain = ros_domain_per_module  # held by this module: stands for the lab's domain
    users_swarm = [find_executable('swarm_sim'), '--no-progress', '--agents', '2',
                   '--control-period', '0.05', '--duration', '3600', '--real-time-factor', '1',
                   '--no-plots', '--out', str(tmp_path / 'users_run')]
    with Running(users_swarm, cwd=tmp_path) as swarm, GraphProbe() as probe:
        probe.collect(Float64, METRIC)
        probe.wait_for_messages(METRIC, 5)  # the user's swarm is live in the exported domain
        result = subprocess.run(
            [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider',
             *WOULD_FAIL_IN_A_JOINED_DOMAIN],
            cwd=ROOT, env=inner_env(users_domain),
            capture_output=True, text=True, timeout=900)
        assert swarm.process.poll() is None, swarm.err[-800:]  # the user's swarm still runs
        code, _, err = swarm.stop(signal.SIGINT)
    report = result.stdout[-3000:] + result.stderr[-1000:]
    assert result.returncode == 0, report
    passed = re.search(r'(\d+) passed', result.stdout)
    assert passed and int(passed.group(1)) == SELECTED, report  # none skipped, none failed
    assert 'failed' not in result.stdout and 'skipped' not in result.stdout, report
    assert code == 0, err[-800:]
