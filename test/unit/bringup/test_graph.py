"""The node-graph plan: one pure function shared by launch files and swarm_sim."""
import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from soliton_encirclement_ros.bringup.graph import (
    build_graph, check_vehicles, command_subscribers, in_namespace, LaunchArguments,
    LIVE_CONTROL_PERIOD, live_scenario, parse_origins, parse_simulated, SwarmPlan)
from soliton_encirclement_ros.core.scenario import initial_positions, Scenario

SCENARIO_FIELDS = {f.name for f in dataclasses.fields(Scenario)}


def plan(**kwargs):
    """Return a SwarmPlan: the Scenario fields among ``kwargs`` make its scenario."""
    scenario = {k: kwargs.pop(k) for k in list(kwargs) if k in SCENARIO_FIELDS}
    return SwarmPlan(scenario=Scenario(**scenario), **kwargs)


def by_executable(specs, executable):
    return [s for s in specs if s.executable == executable]


def test_sim_graph_has_mobility_target_n_agents_and_metrics():
    specs = build_graph(plan(agents=5, seed=3))
    assert [s.executable for s in specs] == (
        ['swarm_mobility_node', 'target_node'] + ['agent_node'] * 5 + ['metrics_node'])
    agents = by_executable(specs, 'agent_node')
    assert [a.namespace for a in agents] == [f'/uav{i}' for i in range(1, 6)]
    assert [a.parameters['agent_id'] for a in agents] == [1, 2, 3, 4, 5]
    assert len({s.full_name for s in specs}) == len(specs)
    mobility = by_executable(specs, 'swarm_mobility_node')[0]
    assert mobility.parameters['vehicle_names'] == [f'uav{i}' for i in range(1, 6)]
    assert len(mobility.parameters['initial_positions']) == 15


def test_initial_poses_are_seeded_and_follow_the_reference_placement():
    first = plan(agents=8, seed=7).initial_positions()
    assert first == plan(agents=8, seed=7).initial_positions()
    assert first != plan(agents=8, seed=8).initial_positions()
    for x, y, _ in first:  # x = a R cos, y = b R sin with a, b in [0.8, 1.2]
        assert 0.8 * 20 - 1e-9 <= (x * x + y * y) ** 0.5 <= 1.2 * 20 + 1e-9


def test_parameters_and_files_flow_to_every_node(tmp_path):
    params = tmp_path / 'p.yaml'
    params.write_text('/**:\n  ros__parameters: {}\n')
    swarm = plan(agents=2, radius=35.0, control_period=0.02, failures_per_min=1.5,
                 loss=0.1, delay=0.02, params_files=(str(params),), use_sim_time=False)
    specs = build_graph(swarm)
    assert all(s.params_files == (str(params),) for s in specs)
    assert all(s.parameters['use_sim_time'] is False for s in specs)
    agent = by_executable(specs, 'agent_node')[0]
    expected = {
        'radius': 35.0,
        'control_period': 0.02,
        'failures_per_min': 1.5,
        'loss': 0.1,
        'delay': 0.02,
    }
    assert {k: agent.parameters[k] for k in expected} == expected
    assert by_executable(specs, 'metrics_node')[0].parameters['radius'] == 35.0
    assert by_executable(specs, 'target_node')[0].parameters['broadcast_period'] == 0.02


def test_ros_args_are_the_command_line_of_a_ros2_run(tmp_path):
    params = tmp_path / 'p.yaml'
    params.write_text('/**:\n  ros__parameters: {}\n')
    spec = by_executable(
        build_graph(plan(agents=1, params_files=(str(params),))), 'agent_node'
    )[0]
    args = spec.ros_args()
    assert args[:5] == ['--ros-args', '-r', '__node:=agent', '-r', '__ns:=/uav1']
    assert args[5:7] == ['--params-file', str(params)]
    assert '-p' in args and 'agent_id:=1' in args and 'use_sim_time:=true' in args


def test_mobility_publishes_the_clock_only_when_it_owns_it():
    def mobility(**kw):
        return by_executable(build_graph(plan(agents=1, **kw)), 'swarm_mobility_node')[0]
    assert 'publish_clock' not in mobility(clock_source='runner').parameters
    assert (
        mobility(clock_source='mobility', real_time_factor=2.0).parameters['real_time_factor']
        == 2.0
    )
    assert 'publish_clock' not in mobility(clock_source='mobility', use_sim_time=False).parameters


def test_px4_mode_pairs_each_agent_with_a_bridge_and_no_simulated_vehicles():
    swarm = plan(agents=3, mode='px4', px4_origins=((0, 0, 0), (0, 3, 0), (0, 6, 0)))
    specs = build_graph(swarm)
    assert not by_executable(specs, 'swarm_mobility_node')
    bridges = by_executable(specs, 'px4_bridge_node')
    assert [b.namespace for b in bridges] == ['/uav1', '/uav2', '/uav3']
    assert [b.parameters['px4_namespace'] for b in bridges] == ['px4_1', 'px4_2', 'px4_3']
    assert [b.parameters['target_system'] for b in bridges] == [2, 3, 4]
    assert bridges[2].parameters['origin_enu'] == [0.0, 6.0, 0.0]
    one = in_namespace(specs, '/uav2')
    assert [s.executable for s in one] == ['agent_node', 'px4_bridge_node']


def test_single_agent_plan_keeps_an_explicit_id():
    specs = build_graph(plan(agents=1, names=('scout',), ids=(7,)))
    agent = by_executable(specs, 'agent_node')[0]
    assert agent.namespace == '/scout' and agent.parameters['agent_id'] == 7


@pytest.mark.parametrize('kwargs, message', [
    ({'agents': 0}, 'agents must be an integer >= 1'),
    ({'agents': 2, 'names': ('a', 'a')}, 'duplicate agent names: a'),
    ({'agents': 2, 'names': ('a',)}, 'names has 1 entries but agents is 2'),
    ({'agents': 1, 'names': ('9lives',)}, 'ROS name tokens'),
    ({'agents': 1, 'names': ('target',)}, 'ROS name tokens'),
    ({'seed': None}, 'seed must be an integer for a ROS graph'),
    ({'odom_rate': 0.0}, 'odom_rate must be > 0'),
    ({'radius': -1.0}, 'radius must be > 0, got -1.0'),
    ({'loss': 1.0}, 'loss must be a probability in [0, 1)'),
    ({'target_motion': 'orbit'}, 'target_motion must be one of'),
    ({'agents': 2, 'ids': (1, 1)}, 'ids must be 2 distinct integers'),
])
def test_bad_plans_are_rejected_with_the_reason(kwargs, message):
    with pytest.raises(
        ValueError, match=message.replace('[', r'\[').replace(')', r'\)').replace('(', r'\(')
    ):
        plan(**kwargs)


def test_px4_plans_hold_altitude_over_best_effort_swarm_topics():
    swarm = SwarmPlan(scenario=live_scenario(agents=2, altitude_hold=10.0), mode='px4',
                      swarm_reliability='best_effort', px4_origins=parse_origins('0,1,0;0,2,0', 2))
    specs = build_graph(swarm)
    agents = by_executable(specs, 'agent_node')
    assert [a.parameters['altitude'] for a in agents] == [10.0, 10.0]
    assert {s.parameters.get('swarm_reliability') for s in specs
            if s.executable in ('agent_node', 'target_node', 'metrics_node')} == {'best_effort'}
    assert [b.parameters['origin_enu'] for b in by_executable(specs, 'px4_bridge_node')] == [
        [0.0, 1.0, 0.0], [0.0, 2.0, 0.0]]
    # the simulation's default plan gives neither, so lock-stepped runs are unchanged
    sim = build_graph(plan(agents=2))
    assert not any('altitude' in s.parameters or 'swarm_reliability' in s.parameters
                   for s in sim)


@pytest.mark.parametrize('text, count, message', [
    ('0,1;0,2,0', 2, "each entry must be 'x,y,z' in metres, got '0,1'"),
    ('0,1,0', 2, '2 vehicle(s) need 2 x,y,z entries, got 1'),
    ('0,x,0;0,1,0', 2, "got '0,x,0'"),
])
def test_bad_origins_are_named(text, count, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_origins(text, count)


def test_rviz_without_rviz2_is_refused_before_anything_starts():
    from soliton_encirclement_ros.bringup.graph import rviz_problem
    message = rviz_problem(True, lambda package: False)
    assert 'rviz2 is not installed' in message and 'apt install ros-$ROS_DISTRO-rviz2' in message
    assert rviz_problem(True, lambda package: package == 'rviz2') is None
    assert rviz_problem(False, lambda package: False) is None


def test_a_refused_launch_plans_nothing_and_is_an_error():
    """rviz:=true without rviz2: launch must fail (exit 1, ERROR), not log INFO and exit 0."""
    from soliton_encirclement_ros.bringup.graph import (
        launch_plan, LaunchArguments, LaunchRefused, NodeSpec, rviz_problem)
    planned = []

    def specs(values):
        planned.append('nodes')
        return [NodeSpec('agent_node', 'agent', '/uav1')]

    def extra(values):
        planned.append('rviz')
        return ['rviz action']

    def problem(values):
        return rviz_problem(values.flag('rviz'), lambda package: False)

    with pytest.raises(LaunchRefused, match='rviz2 is not installed') as refused:
        launch_plan(LaunchArguments(rviz='true'), specs, extra, problem)
    assert not planned
    # launch turns an Exception raised by an OpaqueFunction into an ERROR line and return
    # code 1 (LaunchService.run_async: 'Caught exception in launch'); a BaseException would not.
    assert isinstance(refused.value, Exception)
    assert launch_plan(LaunchArguments(rviz='false'), specs, extra, problem) == (
        [NodeSpec('agent_node', 'agent', '/uav1')], ['rviz action'])


def test_the_scenario_reaches_the_nodes_that_run_it():
    """What batch_sim reads from a scenario, the ROS graph's nodes are given."""
    scenario = Scenario(
        agents=3, seed=4, control_period=0.02, metrics_period=0.1, altitude=2.0,
        target_motion='waypoints', target_speed=3.0, waypoints=((5.0, 0.0), (30.0, 0.0)),
        arrival_times=(0.0, 10.0), omega_ref=0.2, lambdas={1: 2.0, 3: 0.5},
        failure_check_period=0.2, controller={'k_r': 2.0, 'k_tau': 0.3},
        vehicle={'max_speed_xy': 6.0, 'max_acc_xy': 2.0})
    specs = build_graph(SwarmPlan(scenario=scenario))
    mobility = by_executable(specs, 'swarm_mobility_node')[0].parameters
    assert (mobility['max_speed_xy'], mobility['max_acc_xy']) == (6.0, 2.0)
    # the scenario's placement: around the first waypoint, at the start height
    expected = initial_positions(3, 20.0, 4, (5.0, 0.0, 0.0), 2.0)
    assert np.array(mobility['initial_positions']).reshape(3, 3).tolist() == expected.tolist()
    target = by_executable(specs, 'target_node')[0].parameters
    assert target['target_motion'] == 'waypoints' and target['target_speed'] == 3.0
    assert target['waypoints'] == [5.0, 0.0, 0.0, 30.0, 0.0, 0.0]
    assert target['arrival_times'] == [0.0, 10.0] and target['omega_ref'] == 0.2
    assert (target['lambda_ids'], target['lambda_values']) == ([1, 3], [2.0, 0.5])
    assert target['broadcast_period'] == 0.02 and target['seed'] == 4
    agent = by_executable(specs, 'agent_node')[0].parameters
    assert (agent['k_r'], agent['k_tau'], agent['max_speed_xy']) == (2.0, 0.3, 6.0)
    assert agent['failure_check_period'] == 0.2 and agent['control_period'] == 0.02
    assert by_executable(specs, 'metrics_node')[0].parameters['metrics_period'] == 0.1


def test_fields_left_at_their_defaults_leave_parameter_files_in_charge(tmp_path):
    params = tmp_path / 'p.yaml'
    params.write_text('/**:\n  ros__parameters:\n    target_speed: 2.0\n    target_period: 2.0\n'
                      '    failure_check_period: 0.5\n')
    specs = build_graph(SwarmPlan(params_files=(str(params),)))
    target = by_executable(specs, 'target_node')[0].parameters
    assert not {'target_speed', 'target_period', 'waypoints', 'lambda_ids'} & set(target)
    agent = by_executable(specs, 'agent_node')[0].parameters
    assert not {'k_r', 'failure_check_period', 'max_speed_xy'} & set(agent)
    mobility = by_executable(specs, 'swarm_mobility_node')[0].parameters
    assert 'max_speed_xy' not in mobility


def test_default_waypoints_leave_a_parameter_file_s_waypoints_in_charge():
    """target_motion:=waypoints alone must not override the waypoints of a params file."""
    specs = build_graph(SwarmPlan(scenario=Scenario(target_motion='waypoints')))
    target = by_executable(specs, 'target_node')[0].parameters
    assert target['target_motion'] == 'waypoints'
    assert not {'waypoints', 'arrival_times'} & set(target)


def test_live_scenarios_broadcast_at_20_hz_and_hold_altitude_only_when_asked():
    assert live_scenario(agents=1).control_period == LIVE_CONTROL_PERIOD == 0.05
    assert live_scenario(agents=1, altitude_hold=float('nan')).controller == {}
    assert live_scenario(agents=1, altitude_hold=3.0).controller == {'altitude': 3.0}
    with pytest.raises(ValueError, match='altitude must be a finite number or NaN'):
        live_scenario(agents=1, altitude_hold=float('inf'))


def test_only_lock_stepped_runs_need_periods_on_the_mobility_step():
    """batch_sim and swarm_sim step on sim_dt; a launched graph's timers need not."""
    with pytest.raises(ValueError, match=r'control_period must be a multiple of the mobility '
                                         r'step sim_dt \(0.01 s\), got 0.025'):
        Scenario(control_period=0.025)
    live = live_scenario(agents=3, control_period=0.025)
    specs = build_graph(SwarmPlan(scenario=live))
    assert by_executable(specs, 'agent_node')[0].parameters['control_period'] == 0.025
    assert by_executable(specs, 'target_node')[0].parameters['broadcast_period'] == 0.025


def test_launch_arguments_name_the_bad_argument():
    value = LaunchArguments(num_agents='abc', radius=' 20 ', altitude='nan', rviz='True',
                            use_sim_time='yes', params_file='')
    with pytest.raises(ValueError, match='^launch argument num_agents must be an integer, '
                                         "got 'abc'$"):
        value.integer('num_agents')
    with pytest.raises(ValueError, match='^launch argument use_sim_time must be true or false, '
                                         "got 'yes'$"):
        value.flag('use_sim_time')
    assert value.real('radius') == 20.0 and math.isnan(value.real('altitude'))
    assert value.flag('rviz') is True and value.files('params_file') == ()
    assert LaunchArguments(params_file='a.yaml').files('params_file') == ('a.yaml',)


# --- mixed fleets (issue 26 §3): PX4 and simulated agents in one ring ---------------------------

MIXED_ORIGINS = ((0.0, 1.0, 0.0), (0.0, 2.0, 0.0), (0.0, 3.0, 0.0), (0.0, 4.0, 0.0))


def mixed(simulated, agents=4, **kwargs):
    return SwarmPlan(scenario=live_scenario(agents=agents, altitude_hold=10.0), mode='px4',
                     px4_origins=MIXED_ORIGINS[:agents], use_sim_time=False,
                     simulated=simulated, **kwargs)


def test_simulated_agents_fly_the_mobility_simulation_from_their_origin_the_others_their_px4():
    specs = build_graph(mixed(parse_simulated('uav3, uav4')))
    assert [(s.namespace, s.executable) for s in specs
            if s.executable in ('mobility_node', 'px4_bridge_node')] == [
        ('/uav1', 'px4_bridge_node'), ('/uav2', 'px4_bridge_node'),
        ('/uav3', 'mobility_node'), ('/uav4', 'mobility_node')]
    bridges = by_executable(specs, 'px4_bridge_node')
    # agent i keeps PX4 instance i (px4_i, MAV_SYS_ID i + 1) whoever else is simulated
    assert [b.parameters['px4_namespace'] for b in bridges] == ['px4_1', 'px4_2']
    assert [b.parameters['target_system'] for b in bridges] == [2, 3]
    sims = by_executable(specs, 'mobility_node')
    assert [s.parameters['initial_position'] for s in sims] == [[0.0, 3.0, 0.0], [0.0, 4.0, 0.0]]
    assert {s.parameters['use_sim_time'] for s in sims} == {False}
    assert [s.name for s in sims] == ['mobility', 'mobility']
    # the same controllers, target and metrics as an all-PX4 plan
    assert [s.parameters for s in by_executable(specs, 'agent_node')] == [
        s.parameters for s in by_executable(build_graph(mixed(())), 'agent_node')]
    assert not by_executable(specs, 'swarm_mobility_node')


MIXED_NAMES = ('uav1', 'uav2', 'uav3', 'uav4')


@pytest.mark.parametrize('simulated', [
    names for k in range(5) for names in itertools.combinations(MIXED_NAMES, k)])
def test_no_simulated_agent_can_command_a_real_vehicle(simulated):
    specs = build_graph(mixed(simulated))
    subscribers = command_subscribers(specs)
    for name in MIXED_NAMES:
        vehicles = [s.executable for s in in_namespace(specs, f'/{name}')
                    if s.executable in ('mobility_node', 'px4_bridge_node')]
        flown_by = [s.executable for s in subscribers[f'/{name}/cmd_vel']]
        wanted = 'mobility_node' if name in simulated else 'px4_bridge_node'
        assert vehicles == flown_by == [wanted], name
    px4s = [b.parameters['px4_namespace'] for b in by_executable(specs, 'px4_bridge_node')]
    assert px4s == [f'px4_{i}' for i in range(1, 5) if f'uav{i}' not in simulated]


def test_a_graph_that_lets_a_simulated_agent_reach_a_bridge_is_refused():
    swarm = mixed(('uav3', 'uav4'))
    specs = build_graph(swarm)
    rogue = dataclasses.replace(by_executable(specs, 'px4_bridge_node')[0],
                                remappings=(('cmd_vel', '/uav3/cmd_vel'),))
    with pytest.raises(ValueError, match='^uav3: /uav3/cmd_vel must reach exactly one '
                                         'mobility_node, not mobility_node, px4_bridge_node$'):
        check_vehicles(swarm, [*specs, rogue])
    second = dataclasses.replace(by_executable(specs, 'px4_bridge_node')[1], namespace='/uav4')
    with pytest.raises(ValueError, match='^uav4: .* not mobility_node, px4_bridge_node$'):
        check_vehicles(swarm, [*specs, second])
    twin = dataclasses.replace(by_executable(specs, 'px4_bridge_node')[1],
                               parameters={'px4_namespace': 'px4_1'})
    with pytest.raises(ValueError, match=r'^two bridges would fly the same PX4 \(px4_namespace '
                                         r'px4_1\)$'):
        check_vehicles(swarm, [s if s.full_name != '/uav2/px4_bridge' else twin for s in specs])
    lost = [s for s in specs if s.full_name != '/uav1/px4_bridge']
    with pytest.raises(ValueError, match='^uav1: /uav1/cmd_vel must reach exactly one '
                                         'px4_bridge_node, not nothing$'):
        check_vehicles(swarm, lost)


@pytest.mark.parametrize('simulated, message', [
    ('uav9', "simulated: 'uav9' is not an agent of this swarm (agents: uav1, uav2, uav3, uav4)"),
    ('uav3,uav3', 'simulated: uav3 listed twice'),
    ('uav3,,uav4,uav3', 'simulated: uav3 listed twice'),
    ('3', "simulated: '3' is not an agent of this swarm"),
    ('uav5,uav9', "simulated: 'uav5', 'uav9' are not agents of this swarm"),
])
def test_an_unknown_or_repeated_simulated_agent_is_one_line(simulated, message):
    with pytest.raises(ValueError, match=re.escape(message)) as error:
        mixed(parse_simulated(simulated))
    assert '\n' not in str(error.value)


def test_simulated_is_for_px4_plans_and_single_agents_name_themselves():
    with pytest.raises(ValueError, match='^simulated: only a px4 plan mixes PX4 and simulated '
                                         r'vehicles \(in mode sim every agent is simulated\)'):
        plan(agents=2, simulated=('uav1',))
    assert parse_simulated('') == () and parse_simulated(' uav3 , uav4 ') == ('uav3', 'uav4')
    # agent_px4.launch.py simulated:=<agent_name>: the one vehicle is simulated, at its origin
    one = SwarmPlan(scenario=live_scenario(agents=1), names=('scout',), ids=(7,), mode='px4',
                    px4_namespaces=('',), px4_target_systems=(1,), px4_origins=((5.0, 0, 0),),
                    simulated=parse_simulated('scout'))
    specs = in_namespace(build_graph(one), '/scout')
    assert [s.executable for s in specs] == ['agent_node', 'mobility_node']
    assert specs[1].parameters['initial_position'] == [5.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="'uav1' is not an agent of this swarm"):
        dataclasses.replace(one, simulated=('uav1',))


def test_metrics_node_is_told_to_draw_no_plots_only_when_the_plan_says_so():
    drawn = by_executable(build_graph(plan(agents=2, seed=1)), 'metrics_node')[0]
    assert 'plots' not in drawn.parameters  # its own default: it draws them
    bare = by_executable(build_graph(plan(agents=2, seed=1, plots=False)), 'metrics_node')[0]
    assert bare.parameters['plots'] is False
