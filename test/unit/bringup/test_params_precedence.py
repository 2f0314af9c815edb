"""
One precedence rule for node parameters: what the user gives > a params file > defaults.

Through the plans of the launch files (pure, no launch needed) and of swarm_sim. The node
parameters a plan passes with ``-p`` come after ``--params-file`` and so win over it: a value
the user did not give must not be among them when a params file sets it.
"""
from pathlib import Path

import pytest

from soliton_encirclement_ros.bringup.graph import (
    build_graph, file_parameters, LaunchArguments, live_scenario, params_file_sections,
    precedence_notes, SwarmPlan)
from soliton_encirclement_ros.bringup.launch_plans import (
    agent_nodes, agent_px4_nodes, swarm_px4_sitl_nodes, swarm_sim_nodes)
from soliton_encirclement_ros.sim import runner

ROOT = Path(__file__).resolve().parents[3]
CONTROLLER = str(ROOT / 'config' / 'controller.yaml')  # sets radius 20.0, control_period 0.01


def of(specs, executable):
    return [s for s in specs if s.executable == executable]


def params_file(tmp_path, text, name='p.yaml'):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def swarm_sim_launch(params_file='', given=(), **values):
    """swarm_sim.launch.py's argument values: its declared defaults, ``values`` given."""
    defaults = {'num_agents': '10', 'radius': '20.0', 'params_file': params_file,
                'use_sim_time': 'true', 'real_time_factor': '1.0', 'seed': '0',
                'control_period': '0.05', 'target_motion': 'static', 'rviz': 'false',
                'safety_area': ''}
    return LaunchArguments({**defaults, **values}, given={*given, *values})


def test_the_issue_repro_a_params_file_sets_radius_and_control_period():
    """Before: -p control_period:=0.05 -p radius ... came after the file and won silently."""
    specs = build_graph(SwarmPlan(scenario=live_scenario(agents=2),
                                  params_files=(CONTROLLER,)))
    for agent in of(specs, 'agent_node'):
        assert not {'radius', 'control_period'} & set(agent.parameters)
        assert agent.ros_args().index('--params-file') < agent.ros_args().index('-p')
        assert agent.parameters['agent_id'] in (1, 2)  # what the plan decides stays
    assert 'radius' not in of(specs, 'metrics_node')[0].parameters
    assert precedence_notes(specs) == []
    # no params file: the plan's defaults reach the nodes (20 Hz for a live graph)
    agent = of(build_graph(SwarmPlan(scenario=live_scenario(agents=2))), 'agent_node')[0]
    assert agent.parameters['control_period'] == 0.05 and agent.parameters['radius'] == 20.0


def test_a_given_value_wins_over_the_file_with_one_line_for_all_agents():
    plan = SwarmPlan(scenario=live_scenario(agents=5, control_period=0.02),
                     params_files=(CONTROLLER,),
                     given={'control_period': 'launch argument control_period:=0.02'})
    specs = build_graph(plan)
    assert {a.parameters['control_period'] for a in of(specs, 'agent_node')} == {0.02}
    assert all('radius' not in a.parameters for a in of(specs, 'agent_node'))
    assert precedence_notes(specs) == [
        'control_period: 0.02 from launch argument control_period:=0.02 wins over 0.01 from '
        f'params file {CONTROLLER}']


def test_the_swarm_sim_launch_plan(tmp_path):
    path = params_file(tmp_path, '/**/agent:\n  ros__parameters:\n    control_period: 0.1\n'
                       '    radius: 30.0\n/target/target:\n  ros__parameters:\n'
                       '    target_motion: random\n')
    specs = swarm_sim_nodes(swarm_sim_launch(path, num_agents='3'))
    agents = of(specs, 'agent_node')
    assert len(agents) == 3 and not {'radius', 'control_period'} & set(agents[0].parameters)
    assert 'target_motion' not in of(specs, 'target_node')[0].parameters
    assert of(specs, 'metrics_node')[0].parameters['radius'] == 20.0  # the file spares it
    assert precedence_notes(specs) == []

    specs = swarm_sim_nodes(swarm_sim_launch(path, num_agents='3', control_period='0.04',
                                             target_motion='waypoints'))
    assert {a.parameters['control_period'] for a in of(specs, 'agent_node')} == {0.04}
    assert of(specs, 'target_node')[0].parameters['target_motion'] == 'waypoints'
    assert precedence_notes(specs) == [
        f'target_motion: waypoints from launch argument '
        f'target_motion:=waypoints wins over random from params file {path}',
        f'control_period: 0.04 from launch argument control_period:=0.04 wins over 0.1 from '
        f'params file {path}']


def test_the_agent_launch_plans_hold_altitude_and_d_safe_by_the_same_rule(tmp_path):
    path = params_file(tmp_path, '/**:\n  ros__parameters:\n    altitude: 5.0\n    d_safe: 1.0\n'
                       '    radius: 25.0\n')
    common = {'agent_name': 'uav2', 'agent_id': '2', 'radius': '20.0', 'params_file': path,
              'use_sim_time': 'false', 'swarm_reliability': 'best_effort', 'altitude': 'nan',
              'safety_area': ''}
    agent = agent_nodes(LaunchArguments(common, given={'agent_name', 'agent_id'}))[0]
    assert not {'radius', 'altitude'} & set(agent.parameters)
    agent = agent_nodes(LaunchArguments({**common, 'altitude': '3.0'},
                                        given={'agent_name', 'altitude'}))[0]
    assert agent.parameters['altitude'] == 3.0 and agent.notes == (
        f'altitude: 3.0 from launch argument altitude:=3.0 wins over 5.0 from params file '
        f'{path}',)
    px4 = {**common, 'altitude': '10.0', 'd_safe': '2.0', 'px4_namespace': '',
           'target_system': '1', 'origin': '0,0,0', 'simulated': '',
           'allow_no_separation': 'false', 'geo_reference': ''}
    specs = agent_px4_nodes(LaunchArguments(px4, given={'d_safe'}))
    agent = of(specs, 'agent_node')[0]
    assert agent.parameters['d_safe'] == 2.0 and 'altitude' not in agent.parameters
    sitl = sitl_launch(path)
    # the file's d_safe 1.0 is below the PX4 launch's 2 m: only with allow_no_separation
    specs = swarm_px4_sitl_nodes(LaunchArguments({**sitl, 'allow_no_separation': 'true'},
                                                 given={'num_agents', 'allow_no_separation'}))
    assert all(not {'d_safe', 'altitude', 'radius'} & set(a.parameters)
               for a in of(specs, 'agent_node'))


def sitl_launch(params_file, **values):
    """swarm_px4_sitl.launch.py's argument values: its declared defaults and ``values``."""
    return {'num_agents': '2', 'origins': '', 'spawn_spacing': '1.0', 'altitude': '10.0',
            'swarm_reliability': 'best_effort', 'radius': '20.0', 'd_safe': '2.0',
            'target_motion': 'static', 'params_file': params_file, 'use_sim_time': 'true',
            'simulated': '', 'allow_no_separation': 'false', 'geo_reference': '',
            'safety_area': '', **values}


def agent_px4_launch(params_file, **values):
    """agent_px4.launch.py's argument values: its declared defaults and ``values``."""
    return {'agent_name': 'uav1', 'agent_id': '1', 'px4_namespace': '', 'target_system': '1',
            'origin': '0,0,0', 'altitude': '10.0', 'swarm_reliability': 'best_effort',
            'radius': '20.0', 'd_safe': '2.0', 'params_file': params_file, 'simulated': '',
            'allow_no_separation': 'false', 'geo_reference': '', 'safety_area': '', **values}


def effective_d_safe(agent):
    """Return the d_safe an agent flies with: given with -p, else its params file's."""
    if 'd_safe' in agent.parameters:
        return agent.parameters['d_safe']
    sections = params_file_sections(agent.params_files)
    return file_parameters(sections, agent.full_name).get('d_safe', (None, 0.0))[1]


@pytest.mark.parametrize('plan', [swarm_px4_sitl_nodes, agent_px4_nodes])
def test_the_shipped_controller_example_keeps_separation_on_a_px4_launch(plan):
    """Issue 38: params_file:=config/controller.yaml set d_safe 0 on both PX4 launches."""
    launch = sitl_launch if plan is swarm_px4_sitl_nodes else agent_px4_launch
    specs = plan(LaunchArguments(launch(CONTROLLER), given={'params_file'}))
    agents = of(specs, 'agent_node')
    assert agents and all(effective_d_safe(a) == 2.0 for a in agents)
    assert all(a.parameters['min_d_safe'] == 2.0 for a in agents)
    assert not any('allow_no_separation' in a.parameters for a in agents)


@pytest.mark.parametrize('plan', [swarm_px4_sitl_nodes, agent_px4_nodes])
def test_a_d_safe_below_the_px4_launch_default_is_refused_in_one_line(plan, tmp_path):
    launch = sitl_launch if plan is swarm_px4_sitl_nodes else agent_px4_launch
    zero = params_file(tmp_path, '/**:\n  ros__parameters:\n    d_safe: 0.0\n')
    with pytest.raises(ValueError) as refused:
        plan(LaunchArguments(launch(zero), given={'params_file'}))
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f'd_safe 0 m (params file {zero}, /uav1/agent) is below 2 m, the '
                           'least separation this PX4 launch flies with: set d_safe:=2 or more, '
                           'or allow_no_separation:=true to fly without it')
    with pytest.raises(ValueError, match=r'^d_safe 0.5 m \(launch argument d_safe:=0.5, '):
        plan(LaunchArguments(launch('', d_safe='0.5'), given={'d_safe'}))
    with pytest.raises(ValueError, match=r'^d_safe 0 m \(params file .*reference.yaml'):
        plan(LaunchArguments(launch('config/reference.yaml'), given={'params_file'}))
    allowed = plan(LaunchArguments(launch(zero, allow_no_separation='true'),
                                   given={'params_file', 'allow_no_separation'}))
    for agent in of(allowed, 'agent_node'):  # each agent warns at start-up itself
        assert agent.parameters['allow_no_separation'] is True
        assert agent.parameters['min_d_safe'] == 2.0 and effective_d_safe(agent) == 0.0


def test_the_px4_launch_files_default_d_safe_is_the_plans_floor():
    from soliton_encirclement_ros.bringup.graph import PX4_D_SAFE
    from support.px4_ring import launch_defaults
    assert float(launch_defaults()['d_safe']) == PX4_D_SAFE
    text = (ROOT / 'launch' / 'agent_px4.launch.py').read_text()
    assert f"'d_safe': ('{PX4_D_SAFE}'," in text


def test_swarm_sim_options_and_scenario_files_are_given_values(tmp_path):
    path = params_file(tmp_path, '/**:\n  ros__parameters:\n    control_period: 0.05\n'
                       '    k_r: 2.0\n/swarm/metrics:\n  ros__parameters:\n'
                       '    metrics_period: 0.1\n')
    plan = runner.plan_from_args(runner.parse_args(['--agents', '2', '--params-file', path]))
    assert plan.given == {'agents': 'swarm_sim option --agents'}
    specs = build_graph(plan)
    assert 'control_period' not in of(specs, 'agent_node')[0].parameters
    assert 'metrics_period' not in of(specs, 'metrics_node')[0].parameters
    assert precedence_notes(specs) == []

    scenario = params_file(tmp_path, 'agents: 2\ncontroller: {k_r: 1.5}\n', 'scenario.yaml')
    plan = runner.plan_from_args(runner.parse_args(
        ['--scenario', scenario, '--control-period', '0.02', '--params-file', path]))
    specs = build_graph(plan)
    agent = of(specs, 'agent_node')[0].parameters
    assert (agent['control_period'], agent['k_r']) == (0.02, 1.5)
    assert precedence_notes(specs) == [
        f'k_r: 1.5 from scenario file {scenario} wins over 2.0 from params file {path}',
        f'control_period: 0.02 from swarm_sim option --control-period wins over 0.05 from '
        f'params file {path}']


@pytest.mark.parametrize('pattern, matches, misses', [
    ('/**', ['/uav1/agent', '/target/target', '/swarm_mobility'], []),
    ('/**/agent', ['/uav1/agent', '/agent', '/a/b/agent'], ['/uav1/agents', '/target/target']),
    ('/*/agent', ['/uav1/agent'], ['/agent', '/a/b/agent']),
    ('uav1/agent', ['/uav1/agent'], ['/uav2/agent']),
])
def test_node_names_of_a_params_file_match_as_rclpy_matches_them(
        tmp_path, pattern, matches, misses):
    """As checked by hand on rclpy (Kilted): /**/agent is /uav1/agent, /a/b/agent, /agent."""
    sections = params_file_sections([params_file(tmp_path, f'{pattern}:\n  ros__parameters:\n'
                                                 '    x: 1\n    nested: {y: 2}\n')])
    for name in matches:
        assert set(file_parameters(sections, name)) == {'x', 'nested.y'}, name
    for name in misses:
        assert file_parameters(sections, name) == {}, name


def test_a_params_file_that_is_not_ros_parameters_is_one_line(tmp_path):
    path = params_file(tmp_path, 'radius: 20.0\n')
    with pytest.raises(ValueError, match=r'^params file .* must map node names to '):
        build_graph(SwarmPlan(params_files=(path,)))


def test_one_policy_for_a_misspelt_parameter(tmp_path):
    """What no node of the graph declares is named, with its node and the closest name."""
    from ros_support.validation import unknown_parameters
    from soliton_encirclement_ros.bringup.graph import given_parameters
    path = params_file(tmp_path, '/**:\n  ros__parameters:\n    k_r: 2.0\n'
                       '/**/agent:\n  ros__parameters:\n    k_rr: 2.0\n')
    given = given_parameters(swarm_sim_nodes(swarm_sim_launch(path, num_agents='2')))
    assert 'k_r' in given['/target/target'] and 'k_rr' in given['/uav2/agent']
    assert 'control_period' in given['/uav1/agent']  # the plan's -p count too
    declared = {'k_r', 'control_period', 'radius'}
    assert unknown_parameters({'/target/target': {'k_r', 'use_sim_time'}}, declared) == []
    assert unknown_parameters(given, declared | set().union(*given.values()) - {'k_rr'}) == [
        'k_rr (given to /uav1/agent; did you mean k_r?)']


FIELD = '47.397742,8.545594,488.0'


@pytest.mark.parametrize('plan', [swarm_px4_sitl_nodes, agent_px4_nodes])
def test_a_geo_reference_places_the_vehicles_from_gps_and_checks_given_origins(plan):
    """Issue 37 §1: the PX4 launches fly origin_source gps when a geo_reference is given."""
    launch = sitl_launch if plan is swarm_px4_sitl_nodes else agent_px4_launch
    bridges = of(plan(LaunchArguments(launch('', geo_reference=FIELD),
                                      given={'geo_reference'})), 'px4_bridge_node')
    assert bridges and all(b.parameters['origin_source'] == 'gps'
                           and b.parameters['geo_reference'] == [47.397742, 8.545594, 488.0]
                           and 'origin_enu' not in b.parameters for b in bridges)
    origins = {'origins': '0,1,0;0,2,0'} if plan is swarm_px4_sitl_nodes else {'origin': '0,1,0'}
    bridges = of(plan(LaunchArguments(launch('', geo_reference=FIELD, **origins),
                                      given={'geo_reference', *origins})), 'px4_bridge_node')
    assert all(b.parameters['origin_source'] == 'given' and b.parameters['origin_enu'][1] > 0
               and b.parameters['geo_reference'] for b in bridges)
    bridges = of(plan(LaunchArguments(launch(''), given=())), 'px4_bridge_node')
    assert all('origin_source' not in b.parameters for b in bridges)  # as before: given
    with pytest.raises(ValueError, match="geo_reference must be 'lat,lon,alt'"):
        plan(LaunchArguments(launch('', geo_reference='47.3,8.5'), given={'geo_reference'}))


def test_what_each_agent_flies_is_its_gains_after_the_precedence(tmp_path):
    """
    A params file's d_safe 0 is what the agents fly, and one line says it lowers the scenario's.

    Before, swarm_sim printed ``separation: d_safe 2 m flown`` and summary.json recorded
    ``d_safe_flown: 2.0`` while a params file had turned separation off.
    """
    from soliton_encirclement_ros.bringup.graph import separation_flown, separation_notes
    off = params_file(tmp_path, '/**/agent:\n  ros__parameters:\n    d_safe: 0.0\n')
    plan = SwarmPlan(scenario=live_scenario(agents=3), params_files=(off,))
    assert separation_flown(plan) == {'uav1': 0.0, 'uav2': 0.0, 'uav3': 0.0}
    assert separation_notes(plan) == [
        f'separation lowered by params file {off}: uav1, uav2, uav3 fly d_safe 0 m (separation '
        'off), the scenario 2 m']
    one = params_file(tmp_path, '/uav2/agent:\n  ros__parameters:\n    d_safe: 1.0\n', 'b.yaml')
    plan = SwarmPlan(scenario=live_scenario(agents=3), params_files=(one,))
    assert separation_flown(plan) == {'uav1': 2.0, 'uav2': 1.0, 'uav3': 2.0}
    assert separation_notes(plan) == [f'separation lowered by params file {one}: uav2 flies '
                                      'd_safe 1 m, the scenario 2 m']
    # a value the user gave wins over the file, and then nothing is lowered
    plan = SwarmPlan(scenario=live_scenario(agents=3, controller={'d_safe': 2.0}),
                     params_files=(off,), given={'d_safe': 'scenario file s.yaml'})
    assert set(separation_flown(plan).values()) == {2.0} and separation_notes(plan) == []
    bad = params_file(tmp_path, '/**/agent:\n  ros__parameters:\n    d_safe: -1.0\n', 'c.yaml')
    with pytest.raises(ValueError, match=r'^/uav1/agent: d_safe must be >= 0'):
        separation_flown(SwarmPlan(scenario=live_scenario(agents=3), params_files=(bad,)))
