"""
One scenario rule, every runner: batch_sim, swarm_sim and sweep_sim refuse the same inputs.

A radius below the controller's r_min (the ring never forms) and a duration too short for any
metric (batch_sim ran "0 s simulated", swarm_sim leaked numpy warnings and found no metrics)
are one line naming the values and the rule, exit 2, and nothing written. The runners are
called as their console scripts' ``main``; swarm_sim refuses before any node starts.
"""
import re

import pytest
import yaml

from soliton_encirclement_ros.core import scenario
from soliton_encirclement_ros.sim import batch_sim, runner, sweep

RADIUS_RULE = r'radius must be >= the controller r_min \(1 m\).*got radius 0\.5 m'
DURATION_RULE = (r'duration must be >= 5 control periods and one metrics period \(0\.05 s '
                 r'here\).*got 0\.01 s')


def _batch_sim(tmp_path, options):
    return batch_sim.main(options + ['--out', str(tmp_path / 'out')])


def _swarm_sim(tmp_path, options):
    return runner.main(['--no-progress'] + options + ['--out', str(tmp_path / 'out')])


def _sweep_sim(tmp_path, options):
    scenario = {name.lstrip('-').replace('-', '_'): float(value)
                for name, value in zip(options[::2], options[1::2])}
    spec = tmp_path / 'spec.yaml'
    spec.write_text(yaml.safe_dump({'scenario': scenario, 'seeds': 2}))
    return sweep.main([str(spec), '--out', str(tmp_path / 'out'), '--no-plots'])


@pytest.mark.parametrize('runner_main', [_batch_sim, _swarm_sim, _sweep_sim],
                         ids=['batch_sim', 'swarm_sim', 'sweep_sim'])
@pytest.mark.parametrize('options, rule', [
    (['--radius', '0.5', '--duration', '1'], RADIUS_RULE),
    (['--duration', '0.01'], DURATION_RULE),
    # sums overflowed (a traceback), or a ring spinning that fast never moved
    (['--radius', '1e308'], r'radius:? must be <= 100000, got 1e\+308'),
    (['--duration', '1e308'], r'duration:? must be <= 1e\+06, got 1e\+308'),
    (['--omega-ref', '1e308'], r'omega.ref:? must be <= 10, got 1e\+308'),
])
def test_every_runner_refuses_in_one_line_and_writes_nothing(tmp_path, capsys, runner_main,
                                                             options, rule):
    try:
        status = runner_main(tmp_path, options)
    except SystemExit as refused:  # an option's own bound: argparse's one line
        status = refused.code
    assert status == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and re.search(rule, err[0]), captured.err
    assert 'Warning' not in captured.err + captured.out
    assert not (tmp_path / 'out').exists()


def test_the_rules_in_the_scenario():
    assert scenario.min_duration(0.01) == pytest.approx(0.05)
    assert scenario.min_duration(0.01, 0.5) == 0.5  # the first metrics tick
    scenario.Scenario(radius=1.0, duration=0.05)  # at the limits: accepted
    with pytest.raises(ValueError, match='radius must be >= the controller r_min'):
        scenario.Scenario(radius=1.5, controller={'r_min': 2.0})
    with pytest.raises(ValueError, match=r'one metrics period \(1 s here\)'):
        scenario.Scenario(duration=0.5, metrics_period=1.0)


def test_the_bounds_of_a_run_in_the_scenario():
    scenario.Scenario(radius=scenario.MAX_RADIUS, duration=1.0, omega_ref=-10.0)  # accepted
    for name, value in (('radius', 1e308), ('duration', 1e308), ('omega_ref', -11.0)):
        with pytest.raises(ValueError, match=f'{name} must be'):
            scenario.Scenario(**{name: value})
