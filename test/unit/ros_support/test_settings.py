"""Settings defined once: field metadata drives validation, ROS specs, CLI options and reuse."""
import argparse
import dataclasses

import pytest

from ros_support.settings import add_options, check_value, given_options, settings_fields
from soliton_encirclement_ros.core.faults import Impairments
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.target_motion import TargetMotionSettings
from soliton_encirclement_ros.nodes.settings import AgentSettings, MetricsSettings, TargetSettings
from soliton_encirclement_ros.sim.options import SCENARIO_OPTIONS


def field(cls, name):
    return next(f for f in dataclasses.fields(cls) if f.name == name)


def test_a_node_setting_that_means_a_scenario_field_is_defined_by_it():
    node_f, scenario_f = field(MetricsSettings, 'radius'), field(Scenario, 'radius')
    assert node_f.default == scenario_f.default
    for key in ('unit', 'low', 'high', 'strict', 'high_strict', 'choices'):
        assert node_f.metadata[key] == scenario_f.metadata[key], key
    assert node_f.metadata['read_only']  # read once at start-up by the node


@pytest.mark.parametrize('node_cls, group, executable', [
    (AgentSettings, Impairments, 'agent_node'),
    (TargetSettings, TargetMotionSettings, 'target_node')])
def test_a_shared_setting_is_declared_once_and_reaches_cli_grid_and_node(node_cls, group,
                                                                         executable):
    """One field of a group: the scenario's, the option's, the grid's and the node's."""
    from soliton_encirclement_ros.bringup.graph import build_graph, SwarmPlan
    from soliton_encirclement_ros.sim.sweep import parameter_home
    assert issubclass(Scenario, group) and issubclass(node_cls, group)
    names = [f.name for f in settings_fields(group)]
    assert names
    node = next(s for s in build_graph(SwarmPlan(scenario=Scenario(agents=2)))
                if s.executable == executable)
    for name in names:
        assert field(node_cls, name) is field(Scenario, name) is field(group, name)
        assert name in SCENARIO_OPTIONS and parameter_home(name) == 'scenario'
        assert node.parameters[name] == getattr(Scenario(), name)
    # the same rule, the same words
    with pytest.raises(ValueError, match=r'^loss must be a probability in \[0, 1\), got 1.0'):
        AgentSettings(loss=1.0)
    with pytest.raises(ValueError, match=r'^loss must be a probability in \[0, 1\), got 1.0'):
        Scenario(loss=1.0)


def test_agent_seed_is_an_integer_even_though_a_scenario_seed_may_be_null():
    assert Scenario(seed=None).seed is None
    with pytest.raises(ValueError, match='^seed must be an integer, got None'):
        AgentSettings(seed=None)


@pytest.mark.parametrize('kwargs, message', [
    ({'lambda_ids': [1, 2], 'lambda_values': [1.0]}, 'lambda_ids has 2 entries but '
     'lambda_values has 1'),
    ({'lambda_ids': [1.5], 'lambda_values': [1.0]}, 'lambda_ids must be a list of integers'),
    ({'waypoints': [0.0, 1.0]}, 'waypoints must be x, y, z triples, got 2 numbers'),
    ({'initial_position': [0.0]}, r'initial_position must be \[x, y, z\]'),
    ({'target_motion': 'orbit'}, 'target_motion must be one of static, random, waypoints, circle'),
    ({'target_speed': 0.0}, 'target_speed must be > 0, got 0.0'),
    ({'target_motion': 'waypoints', 'waypoints': [0.0, 0.0, 0.0, 100.0, 0.0, 0.0],
      'arrival_times': [0.0, 1.0]}, 'waypoint 1 .* cannot be reached at t=1 s'),
    ({'swarm_reliability': 'sometimes'}, 'swarm_reliability must be one of reliable, '
     'best_effort'),
])
def test_target_settings_name_what_is_wrong(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TargetSettings(**kwargs)


def test_target_settings_give_the_motion_and_start():
    flying = TargetSettings(target_motion='waypoints', waypoints=[5.0, 1.0, 2.0, 30.0, 1.0, 2.0],
                            lambda_ids=[3], lambda_values=[2.0])
    assert flying.start().tolist() == [5.0, 1.0, 2.0] and flying.lambdas == {3: 2.0}
    assert TargetSettings(initial_position=[1, 2, 3]).start().tolist() == [1.0, 2.0, 3.0]
    # a tracked target does not build a motion model, so bad waypoints do not matter there
    assert TargetSettings(follow_topic='/tracker/odom', target_motion='waypoints',
                          waypoints=[0.0, 0.0, 0.0]).follow_topic


def test_metrics_liveness_defaults_to_three_periods():
    assert MetricsSettings(metrics_period=0.1).agent_timeout == pytest.approx(0.3)
    assert MetricsSettings(agent_state_timeout=2.0).agent_timeout == 2.0


def test_cli_options_carry_the_field_rules_and_only_given_ones_count():
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser, Scenario, SCENARIO_OPTIONS)
    args = parser.parse_args(['--agents', '4', '--loss', '0.5', '--target-motion', 'random'])
    assert given_options(args, Scenario, SCENARIO_OPTIONS) == {
        'agents': 4, 'loss': 0.5, 'target_motion': 'random'}
    assert '[m/s]' in parser.format_help() and 'default 120.0' in parser.format_help()
    with pytest.raises(argparse.ArgumentError, match='must be an integer >= 1, got 0'):
        parser.parse_args(['--agents', '0'])
    with pytest.raises(argparse.ArgumentError, match=r'must be a probability in \[0, 1\)'):
        parser.parse_args(['--loss', '1'])


def test_check_value_types():
    assert check_value(field(Scenario, 'radius'), 3) == 3.0
    with pytest.raises(ValueError, match='^agents must be an integer, got 2.5'):
        check_value(field(Scenario, 'agents'), 2.5)
    with pytest.raises(ValueError, match='^world_frame must be a string, got 3'):
        check_value(field(MetricsSettings, 'world_frame'), 3)
