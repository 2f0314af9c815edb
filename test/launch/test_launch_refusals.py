"""
A launch file refuses what its nodes would refuse, before any node starts (launch installed).

Where launch and launch_ros are installed (a ROS 2 workspace), each launch file runs in a
``LaunchService``: a params file's out-of-range value, a bad ``log_level`` and a safety area the
ring does not fit end the launch with exit 1 and one error line, starting no process. The checks
themselves are pure functions, tested everywhere in ``unit/bringup/test_launch_checks.py``.
"""
import asyncio
from pathlib import Path

import pytest

from launch_checks import not_installed_reason

launch = pytest.importorskip('launch', reason='launch is not installed')
pytest.importorskip('launch_ros', reason='launch_ros is not installed')
PythonLaunchDescriptionSource = launch.launch_description_sources.PythonLaunchDescriptionSource

LAUNCH_DIR = Path(__file__).resolve().parents[2] / 'launch'
DEADLINE = 60.0  # s for a refused launch to end (it refuses in about the domain check's time)
NOT_INSTALLED = not_installed_reason(
    ['swarm_mobility_node', 'target_node', 'agent_node', 'metrics_node'])
pytestmark = pytest.mark.skipif(NOT_INSTALLED is not None, reason=NOT_INSTALLED or '')


def launched(name: str, **arguments: str) -> int:
    """
    Run launch file ``name`` with ``arguments``; return launch's exit status.

    A launch still running after ``DEADLINE`` s (before the fix: its agents exited at once and
    the rest ran on) is shut down and the test fails.
    """
    # launch's screen handler keeps the sys.stderr it was made with: after another test ran a
    # launch (test_launch_mobility.py), that is an earlier capture's and capfd sees nothing.
    # A reset makes launch build it again, on this test's stderr.
    launch.logging.reset()
    service = launch.LaunchService(argv=[])
    service.include_launch_description(launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(LAUNCH_DIR / name)),
            launch_arguments=list(arguments.items()))]))
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # launch's shutdown() asks for the current loop
    try:
        task = loop.create_task(service.run_async())
        done, _ = loop.run_until_complete(asyncio.wait([task], timeout=DEADLINE))
        if not done:
            stopping = service.shutdown()
            if stopping is not None:
                loop.run_until_complete(stopping)
            loop.run_until_complete(asyncio.wait_for(task, DEADLINE))
            pytest.fail(f'{name} still running {DEADLINE:.0f} s after it started')
        return task.result()
    finally:
        asyncio.set_event_loop(None)
        loop.close()


@pytest.mark.parametrize('name, arguments, words', [
    ('swarm_sim.launch.py', {'params_file': '{bad}'}, 'k_r must be >= 0, got -3.0'),
    ('swarm_sim.launch.py', {'log_level': 'loud'}, 'log_level must be one of'),
    ('swarm_sim.launch.py', {'safety_area': '{small}'}, 'does not fit inside the area'),
    ('swarm_px4_sitl.launch.py', {'safety_area': '{small}'}, 'does not fit inside the area'),
], ids=['params-value', 'log-level', 'area', 'sitl-area'])
def test_a_refused_launch_starts_nothing_and_exits_1(tmp_path, capfd, name, arguments, words):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**:\n  ros__parameters:\n    k_r: -3.0\n')
    small = tmp_path / 'small.yaml'
    small.write_text('polygon: [[-10, -10], [10, -10], [10, 10], [-10, 10]]\n')
    values = {key: value.format(bad=bad, small=small) for key, value in arguments.items()}
    assert launched(name, **values) == 1
    err = capfd.readouterr()
    text = err.out + err.err
    assert words in text and 'process started' not in text, text[-2000:]
