"""An exported ``ROS_DOMAIN_ID`` is checked as ``--domain-id`` is: one line, exit 2, no rcl."""
import pytest

from ros_support.entry import DOMAIN_FREE, EXECUTABLES, run
from ros_support.validation import domain_id_problem
from soliton_encirclement_ros.sim import runner

BAD = ['abc', '233', '-1', '1e3', '0x52', ' 5', '5 ', '1_0']


@pytest.mark.parametrize('text', [None, '', '0', '7', '232', '007'])
def test_a_valid_or_unset_domain_is_accepted(text):
    assert domain_id_problem(text) is None


@pytest.mark.parametrize('text', BAD)
def test_anything_else_is_one_line_naming_the_variable_the_value_and_the_rule(text):
    problem = domain_id_problem(text)
    assert problem.startswith('ROS_DOMAIN_ID must be an integer in 0..232')
    assert repr(text) in problem and '\n' not in problem


@pytest.mark.parametrize('text', ['abc', '233', '0x52'])
@pytest.mark.parametrize('name', sorted(set(EXECUTABLES) - set(DOMAIN_FREE)))
def test_every_ros_executable_refuses_it_before_importing_anything(
        name, text, monkeypatch, capsys):
    monkeypatch.setenv('ROS_DOMAIN_ID', text)
    monkeypatch.setattr('sys.argv', [name])
    assert run(name, 'no_such_module_would_be_imported') == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f'{name}: error: {domain_id_problem(text)}']


@pytest.mark.parametrize('text', BAD)
def test_swarm_sim_refuses_it_before_the_run(text, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv('ROS_DOMAIN_ID', text)
    assert runner.main(['--duration', '1', '--no-plots', '--out', str(tmp_path / 'o')]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f'swarm_sim: error: {domain_id_problem(text)}']
    assert not (tmp_path / 'o').exists()


def test_swarm_sim_s_domain_id_option_wins_over_the_variable(monkeypatch):
    monkeypatch.setenv('ROS_DOMAIN_ID', 'abc')
    monkeypatch.setattr(runner, '_prepare', lambda args: 7)  # stop right after the check
    assert runner.main(['--domain-id', '5']) == 7
