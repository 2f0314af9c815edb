"""
What each launch file starts, from its argument values, as pure functions (no launch).

A launch file declares its arguments and calls one of these through
``launch_support.plan_launch_description``; tests call them directly. The arguments the user
gave become ``SwarmPlan.given`` (they win over the params file, with one line saying so); the
others are defaults, which the params file replaces.
"""
from __future__ import annotations

from soliton_encirclement_ros.bringup.graph import (
    build_graph, in_namespace, LaunchArguments, live_scenario, NodeSpec, parse_geo_reference,
    parse_origins, parse_simulated, PX4_D_SAFE, SwarmPlan)

# The help of the launch argument safety_area (a core.area file) that every launch file takes.
SAFETY_AREA_HELP = ('safety area YAML: {polygon: [[x, y], ...] (m, world ENU) or '
                    'polygon_latlon (with geo_reference), z_min, z_max}; the agents keep '
                    'their vehicles able to stop inside, the bridges refuse to engage '
                    "outside and land a vehicle that stays out; '' = none")


def swarm_sim_nodes(value: LaunchArguments) -> list[NodeSpec]:
    """``swarm_sim.launch.py``: N simulated UAVs, the target and the metrics node."""
    plan = SwarmPlan(
        scenario=live_scenario(
            agents=value.integer('num_agents'), radius=value.real('radius'),
            seed=value.integer('seed'), control_period=value.real('control_period'),
            target_motion=value['target_motion']),
        params_files=value.files('params_file'),
        use_sim_time=value.flag('use_sim_time'),
        clock_source='mobility',
        real_time_factor=value.real('real_time_factor'),
        safety_area_file=value['safety_area'],
        given=value.sources(radius='radius', seed='seed', control_period='control_period',
                            target_motion='target_motion'),
    )
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
    plan = SwarmPlan(scenario=scenario,
                     mode='px4', px4_origins=origins, geo_reference=geo_reference,
                     safety_area_file=value['safety_area'],
                     swarm_reliability=value['swarm_reliability'],
                     use_sim_time=value.flag('use_sim_time'),
                     params_files=value.files('params_file'),
                     simulated=parse_simulated(value['simulated']),
                     min_d_safe=PX4_D_SAFE,
                     allow_no_separation=value.flag('allow_no_separation'),
                     given=value.sources(radius='radius', altitude='altitude', d_safe='d_safe',
                                         target_motion='target_motion'))
    return build_graph(plan)
