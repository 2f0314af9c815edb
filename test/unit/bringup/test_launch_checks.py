"""
What a launch file checks before it starts anything, as pure functions (no launch needed).

Under ``ros2 launch`` a params file's out-of-range value (``k_r: -3.0``) started every node, the
agents exited 1 at once and the rest ran on with no agents; ``swarm_px4_sitl.launch.py`` with
every agent simulated waited for a ``/clock`` nothing published; a safety area the ring does not
fit started; no launch file took ``log_level``; ``num_agents:=100000`` planned for minutes. The
launch files call these functions (``bringup.launch_support``); ``test/launch`` runs the launch
files where launch is installed.
"""
import ast
from pathlib import Path

import pytest

from soliton_encirclement_ros.bringup.graph import LaunchArguments, live_scenario
from soliton_encirclement_ros.bringup.launch_plans import (
    log_level, LOG_LEVEL_ARGUMENT, num_agents_problem, sitl_use_sim_time, swarm_px4_sitl_nodes,
    swarm_sim_nodes, value_problem)
from soliton_encirclement_ros.core.area import ring_problem, SafetyArea

LAUNCH_DIR = Path(__file__).resolve().parents[3] / 'launch'
SWARM_SIM = {'num_agents': '3', 'radius': '20.0', 'params_file': '', 'use_sim_time': 'true',
             'real_time_factor': '1.0', 'seed': '0', 'control_period': '0.05',
             'target_motion': 'static', 'safety_area': '', 'log_level': 'info'}
SITL = {'num_agents': '2', 'origins': '', 'spawn_spacing': '1.0', 'geo_reference': '',
        'altitude': '10.0', 'swarm_reliability': 'best_effort', 'radius': '20.0',
        'd_safe': '2.0', 'allow_no_separation': 'false', 'target_motion': 'static',
        'params_file': '', 'use_sim_time': 'true', 'simulated': '', 'safety_area': '',
        'log_level': 'info'}


def swarm_sim(given=(), **values):
    return LaunchArguments({**SWARM_SIM, **values}, given=set(given) | set(values))


def sitl(given=(), **values):
    return LaunchArguments({**SITL, **values}, given=set(given) | set(values))


def test_a_value_every_agent_would_refuse_is_refused_before_anything_starts(tmp_path):
    params = tmp_path / 'params.yaml'
    params.write_text('/**:\n  ros__parameters:\n    k_r: -3.0\n')
    problem = value_problem(swarm_sim_nodes(swarm_sim(params_file=str(params))))
    assert problem == (f'/uav1/agent: k_r must be >= 0, got -3.0 (params file {params}); '
                       'starting nothing')
    assert value_problem(swarm_sim_nodes(swarm_sim())) is None  # the defaults start


@pytest.mark.parametrize('yaml_text, node, words', [
    ('/**/agent:\n  ros__parameters:\n    loss: 2.0\n', '/uav1/agent',
     'loss must be a probability in [0, 1), got 2.0'),
    ('/swarm/metrics:\n  ros__parameters:\n    metrics_period: -1.0\n', '/swarm/metrics',
     'metrics_period'),
    ('/swarm_mobility:\n  ros__parameters:\n    max_speed_xy: -1.0\n', '/swarm_mobility',
     'max_speed_xy'),
])
def test_each_node_s_own_validation_names_the_bad_value(tmp_path, yaml_text, node, words):
    params = tmp_path / 'params.yaml'
    params.write_text(yaml_text)
    problem = value_problem(swarm_sim_nodes(swarm_sim(params_file=str(params))))
    assert problem.startswith(f'{node}: ') and words in problem, problem
    assert problem.endswith(f'(params file {params}); starting nothing')


def test_every_launch_file_takes_a_checked_log_level():
    for path in sorted(LAUNCH_DIR.glob('*.launch.py')):
        text = path.read_text()
        assert '**LOG_LEVEL_ARGUMENT' in text or (  # a plan launch, or declared by hand
            "'log_level'" in text and "'--log-level', LaunchConfiguration('log_level')" in text), \
            f'{path.name} takes no log_level argument'

    assert LOG_LEVEL_ARGUMENT['log_level'][0] == 'info'
    assert log_level(LaunchArguments(log_level='DEBUG')) == 'debug'
    with pytest.raises(ValueError, match='^launch argument log_level must be one of debug, info, '
                                         'warn, error, fatal, got .loud.$'):
        log_level(LaunchArguments(log_level='loud'))


def test_launch_support_starts_every_node_at_the_log_level():
    source = (LAUNCH_DIR.parent / 'soliton_encirclement_ros' / 'bringup'
              / 'launch_support.py').read_text()
    tree = ast.parse(source)
    nodes = [call for call in ast.walk(tree) if isinstance(call, ast.Call)
             and getattr(call.func, 'id', '') == 'Node']
    assert nodes and all('ros_arguments' in {k.arg for k in call.keywords} for call in nodes)


def test_an_all_simulated_sitl_launch_runs_on_wall_time_and_says_why():
    all_simulated = sitl(simulated='uav1,uav2')
    use_sim_time, note = sitl_use_sim_time(all_simulated)
    assert use_sim_time is False and 'no PX4 SITL publishes /clock' in note
    specs = swarm_px4_sitl_nodes(all_simulated)
    assert {spec.parameters['use_sim_time'] for spec in specs} == {False}
    forced, warning = sitl_use_sim_time(sitl(simulated='uav1,uav2', use_sim_time='true'))
    assert forced is True and 'no node of this launch publishes /clock' in warning
    assert sitl_use_sim_time(sitl(simulated='uav2')) == (True, None)  # uav1's SITL: its /clock


def test_a_safety_area_the_ring_does_not_fit_is_refused_at_launch(tmp_path):
    small = tmp_path / 'small.yaml'
    small.write_text('polygon: [[-10, -10], [10, -10], [10, 10], [-10, 10]]\n')
    with pytest.raises(ValueError, match=r'^safety_area .*small.yaml: the ring of radius 20 m '
                                         r'around \(0, 0\) does not fit inside the area'):
        swarm_sim_nodes(swarm_sim(safety_area=str(small)))
    with pytest.raises(ValueError, match='does not fit inside the area'):
        swarm_px4_sitl_nodes(sitl(safety_area=str(small)))
    roomy = tmp_path / 'roomy.yaml'
    roomy.write_text('polygon: [[-50, -50], [50, -50], [50, 50], [-50, 50]]\nz_min: 0\n'
                     'z_max: 30\n')
    assert swarm_sim_nodes(swarm_sim(safety_area=str(roomy)))
    low = tmp_path / 'low.yaml'
    low.write_text('polygon: [[-50, -50], [50, -50], [50, 50], [-50, 50]]\nz_min: 0\n'
                   'z_max: 5\n')
    with pytest.raises(ValueError, match=r'the ring altitude 10 m is outside the altitude band '
                                         r'\[1, 4\] m'):
        swarm_px4_sitl_nodes(sitl(safety_area=str(low)))


def test_ring_problem_is_none_for_a_ring_inside_and_names_the_point_outside():
    area = SafetyArea([[0, 0], [100, 0], [100, 100], [0, 100]])
    assert ring_problem(area, (50, 50), 20.0) is None
    assert ring_problem(area, (50, 50), 48.9) is None  # 1 m margin: 49 m is the most
    problem = ring_problem(area, (90, 50), 20.0)
    assert problem.startswith('the ring of radius 20 m around (90, 50) does not fit')
    assert 'passes (110.0, 50.0)' in problem


AGENT_PX4 = {'agent_name': 'uav1', 'agent_id': '1', 'px4_namespace': '', 'target_system': '1',
             'origin': '0,0,0', 'geo_reference': '', 'altitude': '10.0',
             'swarm_reliability': 'best_effort', 'radius': '20.0', 'd_safe': '2.0',
             'allow_no_separation': 'false', 'params_file': '', 'simulated': '',
             'safety_area': '', 'log_level': 'info'}


def agent_px4(**values):
    return LaunchArguments({**AGENT_PX4, **values}, given=set(values))


def test_agent_px4_refuses_the_broadcast_system_id_and_an_altitude_below_the_origin():
    """target_system:=0 (MAVLink's broadcast) and altitude:=-50 started without a word."""
    from soliton_encirclement_ros.bringup.launch_plans import agent_px4_nodes
    assert value_problem(agent_px4_nodes(agent_px4())) is None  # the defaults start
    assert value_problem(agent_px4_nodes(agent_px4(target_system='0'))) == (
        '/uav1/px4_bridge: target_system must be an integer >= 1, got 0; starting nothing')
    assert value_problem(agent_px4_nodes(agent_px4(target_system='255'))) is None
    with pytest.raises(ValueError) as refused:
        agent_px4_nodes(agent_px4(altitude='-50'))
    assert str(refused.value) == (
        'altitude must be > 0 m for a PX4 vehicle (world ENU z, up from the origin; nan: no '
        'altitude hold), got -50')
    assert value_problem(agent_px4_nodes(agent_px4(altitude='nan'))) is None  # off


@pytest.mark.parametrize('altitude', ['-50.0', '0.0'])
def test_a_px4_altitude_at_or_below_the_origin_in_a_params_file_is_refused(tmp_path, altitude):
    """An altitude: -50 in the params file (no launch argument) started every node."""
    from soliton_encirclement_ros.bringup.launch_plans import agent_px4_nodes
    params = tmp_path / 'params.yaml'
    params.write_text(f'/**/agent:\n  ros__parameters:\n    altitude: {altitude}\n')
    for plan in (lambda: agent_px4_nodes(agent_px4(params_file=str(params))),
                 lambda: swarm_px4_sitl_nodes(sitl(params_file=str(params)))):
        with pytest.raises(ValueError) as refused:
            plan()
        assert str(refused.value) == (
            f'altitude must be > 0 m for a PX4 vehicle (world ENU z, up from the origin; nan: '
            f'no altitude hold), got {float(altitude):g} (params file {params}, /uav1/agent)')
    # a launch argument wins over the file (and says so): the vehicle flies at 12 m
    (agent,) = [s for s in agent_px4_nodes(agent_px4(params_file=str(params), altitude='12'))
                if s.executable == 'agent_node']
    assert agent.parameters['altitude'] == 12.0
    params.write_text('/**/agent:\n  ros__parameters:\n    altitude: 15.0\n')
    assert value_problem(agent_px4_nodes(agent_px4(params_file=str(params)))) is None


MOBILITY = {'namespace': 'uav1', 'params_file': str(LAUNCH_DIR.parent / 'config' /
                                                    'mobility.yaml'),
            'use_sim_time': 'false', 'log_level': 'info'}


def test_mobility_launch_checks_its_params_file_before_the_node_starts(tmp_path):
    """mobility.launch.py started a node that died on a bad params file, and exited 0."""
    from soliton_encirclement_ros.bringup.launch_plans import mobility_nodes
    text = (LAUNCH_DIR / 'mobility.launch.py').read_text()
    assert 'plan_launch_description(ARGUMENTS, mobility_nodes)' in text  # the checked path
    (spec,) = mobility_nodes(LaunchArguments(MOBILITY))
    assert (spec.executable, spec.full_name) == ('mobility_node', '/uav1/mobility')
    assert spec.parameters == {'use_sim_time': False}
    assert value_problem([spec]) is None  # the shipped config/mobility.yaml starts
    bad = tmp_path / 'bad.yaml'
    bad.write_text('/**:\n  ros__parameters:\n    max_speed_xy: -1.0\n')
    problem = value_problem(mobility_nodes(LaunchArguments({**MOBILITY,
                                                            'params_file': str(bad)})))
    assert problem.startswith('/uav1/mobility: max_speed_xy must be ')
    assert problem.endswith(f'got -1.0 (params file {bad}); starting nothing')
    with pytest.raises(ValueError, match="namespace must be a ROS name token .* got '1uav'"):
        mobility_nodes(LaunchArguments({**MOBILITY, 'namespace': '1uav'}))


@pytest.mark.parametrize('plan, arguments', [(swarm_sim_nodes, swarm_sim),
                                             (swarm_px4_sitl_nodes, sitl)],
                         ids=['swarm_sim', 'swarm_px4_sitl'])
def test_num_agents_past_what_memory_holds_is_refused_before_the_graph_is_planned(plan,
                                                                                  arguments):
    # One process per node, as swarm_sim --processes: 3000 agents need about 323 GiB.
    for n in (3000, 20000):
        with pytest.raises(ValueError) as refused:
            plan(arguments(num_agents=str(n)))
        text = str(refused.value)
        assert text.startswith(f'launch argument num_agents {n} needs about '), text
        assert text == num_agents_problem(live_scenario(agents=n))
        assert '(one process per node), more than the ' in text and '% of the ' in text
        assert text.endswith(' agents fit (estimate from benchmarks/bench_sizes.py); starting '
                             'nothing'), text
    assert num_agents_problem(live_scenario(agents=3)) is None
    assert len(plan(arguments(num_agents='3'))) > 3  # a swarm that fits is planned
