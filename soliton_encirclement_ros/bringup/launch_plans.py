"""
What each launch file starts, from its argument values, as pure functions (no launch).

A launch file declares its arguments and calls one of these through
``launch_support.plan_launch_description``; tests call them directly. The arguments the user
gave become ``SwarmPlan.given`` (they win over the params file, with one line saying so); the
others are defaults, which the params file replaces.
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

from soliton_encirclement_ros.bringup.graph import (
    build_graph, file_parameters, in_namespace, LaunchArguments, live_scenario, NodeSpec,
    params_file_sections, parse_geo_reference, parse_origins, parse_simulated, PX4_D_SAFE,
    SwarmPlan)
from soliton_encirclement_ros.core.area import load_area_file, ring_problem

# The help of the launch argument safety_area (a core.area file) that every launch file takes.
SAFETY_AREA_HELP = ('safety area YAML: {polygon: [[x, y], ...] (m, world ENU) or '
                    'polygon_latlon (with geo_reference), z_min, z_max}; the agents keep '
                    'their vehicles able to stop inside, the bridges refuse to engage '
                    "outside and land a vehicle that stays out; '' = none")


# Every launch file's log_level argument: the log level of each node it starts (--log-level).
LOG_LEVELS = ('debug', 'info', 'warn', 'error', 'fatal')
LOG_LEVEL_ARGUMENT = {
    'log_level': ('info', f'log level of every node started: {", ".join(LOG_LEVELS)}'),
}


def log_level(value: LaunchArguments) -> str:
    """Return the ``log_level`` argument, checked: one of ``LOG_LEVELS`` (any case)."""
    level = value['log_level'].strip().lower()
    if level not in LOG_LEVELS:
        raise ValueError(f'launch argument log_level must be one of {", ".join(LOG_LEVELS)}, '
                         f"got {value['log_level']!r}")
    return level


def value_problem(specs: Sequence[NodeSpec],
                  checks: Mapping[str, Sequence[tuple[Sequence, Callable]]] | None = None,
                  ) -> str | None:
    """
    One line naming the first value a node would refuse at start-up, or None.

    Each node's values, as it will declare them (its defaults, then its params files, then the
    plan's values: ``ros_args`` order), go through the validation the node runs on them
    (``nodes.catalogue.node_checks``, or ``checks``): a launch then refuses what every agent
    would exit on, before anything starts (as a misspelt name is refused).
    """
    if checks is None:
        from soliton_encirclement_ros.nodes.catalogue import node_checks
        checks = node_checks()
    sections = params_file_sections(
        list(dict.fromkeys(path for spec in specs for path in spec.params_files)))
    for spec in specs:
        from_files = {name: (path, value) for name, (path, value) in file_parameters(
            [s for s in sections if s[0] in spec.params_files], spec.full_name).items()}
        given = {**{name: value for name, (_, value) in from_files.items()},
                 **spec.parameters}
        for group, validate in checks.get(spec.executable, ()):
            values = {param.name: given.get(param.name, param.default) for param in group}
            try:
                validate(values)
            except (ValueError, TypeError) as error:
                text = ' '.join(str(error).split())
                name = text.split(' ', 1)[0].strip("'")
                source = (f' (params file {from_files[name][0]})'
                          if name in from_files and name not in spec.parameters else '')
                return f'{spec.full_name}: {text}{source}; starting nothing'
    return None


def ring_fit_problem(plan: SwarmPlan) -> str | None:
    """
    One line when the plan's ring does not fit its safety area, or None.

    The ring of radius R around each place the target is planned to be (its start; every
    waypoint of a waypoints target), at the agents' altitude hold, must lie inside the area
    (``core.area.ring_problem``): otherwise every agent would sit at the area's edge.
    """
    area = load_area_file(plan.safety_area_file, plan.geo_reference)
    if area is None:
        return None
    scenario = plan.scenario
    centres = [tuple(scenario.target_start()[:2])]
    if scenario.target_motion == 'waypoints':
        centres += [tuple(point[:2]) for point in scenario.waypoints]
    altitude = scenario.gains.altitude
    for centre in centres:
        problem = ring_problem(area, centre, plan.radius, altitude)
        if problem:
            return (f'safety_area {plan.safety_area_file}: {problem}; starting nothing')
    return None


def num_agents_problem(scenario) -> str | None:
    """
    One line when the launch's ``num_agents`` cannot fit in the memory available, or None.

    ``ros2 launch`` starts one process per node, as ``swarm_sim --processes`` does: the bound
    is the one ``swarm_sim`` applies to that graph (``sim.sizes.size_problem``, mode
    ``processes``: the memory a node process takes, measured by ``bench_sizes.py``, within
    ``MEMORY_MARGIN`` of the memory available), checked before the graph is planned.
    """
    from soliton_encirclement_ros.sim.sizes import size_problem
    problem = size_problem(scenario, 'processes', name='launch argument num_agents')
    return f'{problem}; starting nothing' if problem else None


def _scenario_that_fits(scenario):
    """Return ``scenario``; ``ValueError`` (:func:`num_agents_problem`) when it cannot fit."""
    problem = num_agents_problem(scenario)
    if problem:
        raise ValueError(problem)
    return scenario


def swarm_sim_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``swarm_sim.launch.py``: N simulated UAVs, the target and the metrics node."""
    plan = SwarmPlan(
        scenario=_scenario_that_fits(live_scenario(
            agents=value.integer('num_agents'), radius=value.real('radius'),
            seed=value.integer('seed'), control_period=value.real('control_period'),
            target_motion=value['target_motion'])),
        params_files=value.files('params_file'),
        use_sim_time=value.flag('use_sim_time'),
        clock_source='mobility',
        real_time_factor=value.real('real_time_factor'),
        safety_area_file=value['safety_area'],
        given=value.sources(radius='radius', seed='seed', control_period='control_period',
                            target_motion='target_motion'),
    )
    problem = ring_fit_problem(plan)
    if problem:
        raise ValueError(problem)
    return build_graph(plan)


def agent_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``agent.launch.py``: one agent's controller (e.g. on a companion computer)."""
    scenario = live_scenario(agents=1, radius=value.real('radius'),
                             altitude_hold=value.real('altitude'))
    plan = SwarmPlan(scenario=scenario,
                     names=(value['agent_name'],), ids=(value.integer('agent_id'),),
                     params_files=value.files('params_file'),
                     use_sim_time=value.flag('use_sim_time'),
                     swarm_reliability=value['swarm_reliability'],
                     safety_area_file=value['safety_area'],
                     given=value.sources(radius='radius', altitude='altitude'))
    return in_namespace(build_graph(plan), f'/{value["agent_name"]}')


def mobility_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``mobility.launch.py``: one mobility_node in a vehicle namespace, from its params file."""
    namespace = value['namespace'].strip('/')
    if not namespace or not (namespace[0].isalpha() and namespace.replace('_', 'a').isalnum()):
        raise ValueError(f'launch argument namespace must be a ROS name token (the vehicle '
                         f"name), got {value['namespace']!r}")
    return [NodeSpec('mobility_node', 'mobility', namespace=f'/{namespace}',
                     params_files=value.files('params_file'),
                     parameters={'use_sim_time': value.flag('use_sim_time')})]


def agent_px4_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``agent_px4.launch.py``: one agent's controller and its PX4 offboard bridge."""
    scenario = live_scenario(agents=1, radius=value.real('radius'),
                             altitude_hold=value.real('altitude'),
                             controller={'d_safe': value.real('d_safe')})
    plan = SwarmPlan(scenario=scenario,
                     names=(value['agent_name'],), ids=(value.integer('agent_id'),),
                     mode='px4', use_sim_time=False,
                     params_files=value.files('params_file'),
                     px4_namespaces=(value['px4_namespace'],),
                     px4_target_systems=(value.integer('target_system'),),
                     # With a geo_reference, a hand-measured origin is only checked against
                     # GPS when it was given; otherwise the bridge places from GPS.
                     px4_origins=((parse_origins(value['origin'], 1)[0],)
                                  if 'origin' in value.given or not value['geo_reference']
                                  else ()),
                     geo_reference=parse_geo_reference(value['geo_reference']),
                     safety_area_file=value['safety_area'],
                     swarm_reliability=value['swarm_reliability'],
                     simulated=parse_simulated(value['simulated']),
                     min_d_safe=PX4_D_SAFE,
                     allow_no_separation=value.flag('allow_no_separation'),
                     given=value.sources(radius='radius', altitude='altitude', d_safe='d_safe'))
    return in_namespace(build_graph(plan), f'/{value["agent_name"]}')


def swarm_px4_sitl_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``swarm_px4_sitl.launch.py``: N agents against N PX4 SITL instances."""
    n = value.integer('num_agents')
    spacing = value.real('spawn_spacing')
    geo_reference = parse_geo_reference(value['geo_reference'])
    origins = (parse_origins(value['origins'], n) if value['origins']
               else () if geo_reference
               else tuple((0.0, (i + 1) * spacing, 0.0) for i in range(n)))
    scenario = live_scenario(agents=n, radius=value.real('radius'),
                             target_motion=value['target_motion'],
                             altitude_hold=value.real('altitude'),
                             controller={'d_safe': value.real('d_safe')})
    plan = SwarmPlan(scenario=_scenario_that_fits(scenario),
                     mode='px4', px4_origins=origins, geo_reference=geo_reference,
                     safety_area_file=value['safety_area'],
                     swarm_reliability=value['swarm_reliability'],
                     use_sim_time=sitl_use_sim_time(value)[0],
                     params_files=value.files('params_file'),
                     simulated=parse_simulated(value['simulated']),
                     min_d_safe=PX4_D_SAFE,
                     allow_no_separation=value.flag('allow_no_separation'),
                     given=value.sources(radius='radius', altitude='altitude', d_safe='d_safe',
                                         target_motion='target_motion'))
    problem = ring_fit_problem(plan)
    if problem:
        raise ValueError(problem)
    return build_graph(plan)


def sitl_use_sim_time(value: LaunchArguments) -> tuple[bool, str | None]:
    """
    Return ``swarm_px4_sitl.launch.py``'s use_sim_time, and one line to say about it (or None).

    Its /clock comes from the SITL simulator. With every agent ``simulated:=`` there is no
    SITL: the default becomes false (wall time; said in a line), and use_sim_time:=true given
    anyway is said to wait for a /clock that nothing in this launch publishes.
    """
    names = [f'uav{i}' for i in range(1, value.integer('num_agents') + 1)]
    every_simulated = set(names) <= set(parse_simulated(value['simulated']))
    wanted = value.flag('use_sim_time')
    if not every_simulated:
        return wanted, None
    if 'use_sim_time' not in value.given:
        return False, ('every agent is simulated (simulated:=...), so no PX4 SITL publishes '
                       '/clock: running on wall time (use_sim_time:=false)')
    if wanted:
        return True, ('use_sim_time:=true but every agent is simulated (simulated:=...): no '
                      'node of this launch publishes /clock, and every node waits for it; '
                      'start a /clock bridge of your own, or drop use_sim_time:=true')
    return False, None
