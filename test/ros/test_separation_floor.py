"""
An agent refuses a configuration that would fail silently.

A ``d_safe`` below its floor (issue 38 §3), a clock limit it could never warn at (issue 37 §3).

The PX4 launch files give every agent ``min_d_safe`` (2 m): ``agent_node`` refuses a lower
``d_safe`` at start-up in one line and at run time (``ros2 param set``), and with
``allow_no_separation`` it flies it after one WARN. As the launch plans start them.
"""
import subprocess

from soliton_encirclement_ros.sim.executables import find_executable
from support.waits import DEADLINE, GraphProbe, Running

AGENT = [find_executable('agent_node'), '--ros-args', '-r', '__ns:=/uav1',
         '-p', 'min_d_safe:=2.0']


def test_a_d_safe_below_min_d_safe_is_refused_in_one_line():
    result = subprocess.run(AGENT + ['-p', 'd_safe:=0.0'], capture_output=True, text=True,
                            timeout=DEADLINE, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr, result.stderr
    assert lines[0] == ('AgentNode: invalid configuration: d_safe 0 m is below min_d_safe 2 m, '
                        'the least separation this vehicle flies with: set d_safe to it or more, '
                        'or launch with allow_no_separation:=true to fly without it (not for '
                        'real vehicles)')


def test_allow_no_separation_flies_it_with_one_warning_and_run_time_changes_keep_the_floor():
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter

    with Running(AGENT + ['-p', 'd_safe:=0.0', '-p', 'allow_no_separation:=true']) as agent, \
            GraphProbe() as probe:
        agent.wait_for_line('this vehicle flies WITHOUT the separation its launch requires')
        probe.wait_for_node('/uav1/agent')
        code, _, err = agent.stop()
    assert code == 0
    assert err.count('WITHOUT the separation') == 1
    assert ('d_safe 0 m is below min_d_safe 2 m and allow_no_separation is true: this vehicle '
            'flies WITHOUT the separation its launch requires; not for real vehicles') in err

    with Running(AGENT + ['-p', 'd_safe:=2.0']) as agent, GraphProbe() as probe:
        probe.wait_for_node('/uav1/agent')
        client = probe.node.create_client(SetParameters, '/uav1/agent/set_parameters')
        probe.wait_until(client.service_is_ready, 'agent parameter service')
        request = SetParameters.Request(
            parameters=[Parameter('d_safe', value=0.5).to_parameter_msg()])
        future = client.call_async(request)
        probe.wait_until(future.done, 'set_parameters answered')
        (result,) = future.result().results
        agent.stop()
    assert not result.successful
    assert result.reason.startswith('d_safe 0.5 m is below min_d_safe 2 m')


def test_a_clock_limit_at_or_above_max_future_stamp_is_refused_in_one_line():
    result = subprocess.run(AGENT + ['-p', 'd_safe:=2.0', '-p', 'max_clock_offset:=0.5'],
                            capture_output=True, text=True, timeout=DEADLINE,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in result.stderr, result.stderr
    assert lines[0] == ('AgentNode: invalid configuration: max_clock_offset 0.5 s must be below '
                        'max_future_stamp 0.5 s: a clock off by less than the warning limit '
                        'would have its states rejected without a warning')
