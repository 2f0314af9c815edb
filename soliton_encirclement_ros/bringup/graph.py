"""
The node graph of a swarm run, as one pure function (no rclpy, no launch).

``build_graph(SwarmPlan)`` returns the list of nodes to start: package, executable, name,
namespace, parameters and remappings. The launch files, the ``swarm_sim`` runner (in one
process or one process per node) and the PX4 launch files all read it, so there is exactly
one description of which nodes exist and how they are wired.
"""
from __future__ import annotations

from collections import Counter
import dataclasses
from dataclasses import dataclass, field
import math
import re
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import yaml

from ros_support.settings import settings_fields
from ros_support.validation import bounded, read_yaml
from soliton_encirclement_ros.core.area import load_area_file
from soliton_encirclement_ros.core.faults import Impairments
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.target_motion import TargetMotionSettings
from soliton_encirclement_ros.interface import AGENT_CMD_TOPIC, check_reliability, RELIABLE
from soliton_encirclement_ros.px4.geo import check_geo_reference

PACKAGE = 'soliton_encirclement_ros'
MODES = ('sim', 'px4')
CLOCK_SOURCES = ('runner', 'mobility')


@dataclass(frozen=True)
class NodeSpec:
    """One node to start: what ``launch_ros.actions.Node`` or a ``ros2 run`` line needs."""

    executable: str
    name: str
    namespace: str = ''
    parameters: Mapping[str, Any] = field(default_factory=dict)
    params_files: tuple[str, ...] = ()
    remappings: tuple[tuple[str, str], ...] = ()
    package: str = PACKAGE
    # One line per parameter given both by the user and by a params file (the user's wins).
    notes: tuple[str, ...] = field(default=(), compare=False)

    def ros_args(self) -> list[str]:
        """``--ros-args`` for this node: files first, then the plan's parameters (which win)."""
        args = ['--ros-args', '-r', f'__node:={self.name}']
        if self.namespace:
            args += ['-r', f'__ns:={self.namespace}']
        for path in self.params_files:
            args += ['--params-file', path]
        for key, value in self.parameters.items():
            args += ['-p', f'{key}:={_yaml_value(value)}']
        for old, new in self.remappings:
            args += ['-r', f'{old}:={new}']
        return args

    @property
    def full_name(self) -> str:
        return f'{self.namespace.rstrip("/")}/{self.name}' if self.namespace else f'/{self.name}'


def _yaml_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        value = list(value)
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1 << 30).strip().removesuffix('\n...')
    )


# Real-time graphs (the launch files, vehicles on radio links) broadcast at 20 Hz by default.
LIVE_CONTROL_PERIOD = 0.05


@dataclass(frozen=True)
class LiveScenario(Scenario):
    """
    A scenario run by a real-time graph (the launch files, vehicles on radio links).

    Its nodes tick on their own timers (wall clock, or the mobility node's /clock), not in
    lock-step on the mobility step, so its periods need not be multiples of ``sim_dt``.
    """

    steps_on_sim_dt: ClassVar[bool] = False


def live_scenario(altitude_hold: float = math.nan, **fields: Any) -> LiveScenario:
    """
    Return a scenario for a real-time graph: the given fields, control period 20 Hz.

    ``altitude_hold`` (world ENU z [m]; NaN = off) becomes the agents' ``altitude`` gain only
    when set, so that a parameter file can still set it otherwise.
    """
    if not isinstance(altitude_hold, (int, float)) or math.isinf(altitude_hold):
        raise ValueError(f'altitude must be a finite number or NaN (off), got {altitude_hold!r}')
    if not math.isnan(altitude_hold):
        fields['controller'] = {**fields.get('controller', {}), 'altitude': float(altitude_hold)}
    return LiveScenario(**{'control_period': LIVE_CONTROL_PERIOD, **fields})


# The PX4 launch files' d_safe (launch argument default) and the least d_safe they fly with: a
# lower one, from a launch argument or a params file, is refused unless allow_no_separation.
PX4_D_SAFE = 2.0
# A PX4 vehicle's altitude hold (world ENU z, up from the field's origin) must be above this.
PX4_MIN_ALTITUDE = 0.0


def check_px4_altitude(altitude: float, source: str = '') -> None:
    """
    ``ValueError`` (one line) unless ``altitude`` is above :data:`PX4_MIN_ALTITUDE` or NaN (off).

    ``source`` (e.g. ``' (params file P, /uav1/agent)'``) says where a value came from that was
    not a launch argument.
    """
    if not math.isnan(altitude) and not altitude > PX4_MIN_ALTITUDE:
        raise ValueError(f'altitude must be > {PX4_MIN_ALTITUDE:g} m for a PX4 vehicle '
                         '(world ENU z, up from the origin; nan: no altitude hold), '
                         f'got {altitude:g}{source}')


@dataclass(frozen=True)
class SwarmPlan:
    """
    Everything that decides the node graph of one swarm run: a scenario and how it is run.

    The :class:`Scenario` says what is simulated, exactly as ``batch_sim`` reads it (swarm
    size, radius, seed, timing, target motion, failures, impairments, gains, vehicle limits);
    the other fields say how the ROS graph runs it. ``names`` defaults to ``uav1..uavN``; agent
    ids are 1..N in that order. Initial poses are the scenario's placement unless
    ``positions`` gives them.
    """

    scenario: Scenario = field(default_factory=Scenario)
    names: tuple[str, ...] = ()
    mode: str = 'sim'
    params_files: tuple[str, ...] = ()
    use_sim_time: bool = True
    clock_source: str = 'runner'
    real_time_factor: float = 1.0
    odom_rate: float = 50.0
    positions: tuple[tuple[float, float, float], ...] = ()
    ids: tuple[int, ...] = ()
    px4_namespaces: tuple[str, ...] = ()
    px4_target_systems: tuple[int, ...] = ()
    px4_origins: tuple[tuple[float, float, float], ...] = ()
    # The fleet's shared geodetic origin (lat, lon, alt AMSL), or (): the bridges then place
    # their vehicles from PX4's GPS reference (origin_source gps), or, with px4_origins too,
    # check those against it (px4.geo).
    geo_reference: tuple[float, ...] = ()
    # A safety area file (core.area) every agent keeps its vehicle inside, every bridge
    # checks, and the markers draw; '' = none.
    safety_area_file: str = ''
    metrics_output_dir: str = ''
    figure_format: str = 'png'          # metrics_node's plots: png, pdf or svg
    plots: bool = True                  # metrics_node draws its plots on shutdown
    swarm_reliability: str = RELIABLE   # 'best_effort' between hosts (radio links)
    simulated: tuple[str, ...] = ()     # mode px4: these agents fly mobility_node, not a PX4
    # The least d_safe every agent must fly with (the PX4 launches: PX4_D_SAFE), whatever sets
    # it; below it the plan is refused, or with allow_no_separation each agent warns at start.
    min_d_safe: float = 0.0
    allow_no_separation: bool = False
    # The values the user gave explicitly (a CLI option, a launch argument, a scenario file),
    # by setting name (a scenario field, a controller gain, a vehicle limit) -> where from,
    # e.g. {'control_period': 'swarm_sim option --control-period'}. They win over a params
    # file; every other value of the scenario is a default, which a params file replaces.
    given: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.scenario, Scenario):
            raise ValueError(f'scenario must be a Scenario, got {type(self.scenario).__name__}')
        if self.scenario.seed is None:
            raise ValueError('seed must be an integer for a ROS graph (its nodes take an '
                             'integer seed), got null')
        check_reliability(self.swarm_reliability)
        n = self.num_agents
        names = tuple(self.names) or tuple(f'uav{i}' for i in range(1, n + 1))
        if len(names) != n:
            raise ValueError(f'names has {len(names)} entries but agents is {n}')
        duplicates = sorted(name for name, count in Counter(names).items() if count > 1)
        if duplicates:
            raise ValueError(f'duplicate agent names: {", ".join(duplicates)}')
        bad = [name for name in names
               if not name or not (name[0].isalpha() and name.replace('_', 'a').isalnum())]
        if bad or 'target' in names:
            raise ValueError(
                f'agent names must be ROS name tokens other than "target", got {bad or ["target"]}'
            )
        object.__setattr__(self, 'names', names)
        for name, allowed in (('mode', MODES), ('clock_source', CLOCK_SOURCES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f'{name} must be one of {", ".join(allowed)}, got {getattr(self, name)!r}'
                )
        bounded('odom_rate', self.odom_rate, 0.0, strict=True)
        bounded('real_time_factor', self.real_time_factor, 0.0)
        if self.positions and len(self.positions) != n:
            raise ValueError(f'positions has {len(self.positions)} entries but agents is {n}')
        if self.ids and (len(self.ids) != n or len(set(self.ids)) != len(self.ids)
                         or min(self.ids) < 1):
            raise ValueError(f'ids must be {n} distinct integers >= 1, got {list(self.ids)}')
        if self.mode == 'px4':
            for name in ('px4_namespaces', 'px4_target_systems', 'px4_origins'):
                if getattr(self, name) and len(getattr(self, name)) != n:
                    raise ValueError(f'{name} needs one entry per agent ({n})')
            check_px4_altitude(self.scenario.gains.altitude)
        object.__setattr__(self, 'simulated', _checked_simulated(self))
        if self.geo_reference:
            object.__setattr__(self, 'geo_reference', check_geo_reference(self.geo_reference))
        load_area_file(self.safety_area_file, self.geo_reference)  # one line if it is bad

    # The scenario's fields the graph reads most, by their scenario names.
    num_agents = property(lambda self: self.scenario.agents)
    radius = property(lambda self: self.scenario.radius)
    seed = property(lambda self: self.scenario.seed)
    control_period = property(lambda self: self.scenario.control_period)
    target_motion = property(lambda self: self.scenario.target_motion)

    @property
    def agent_ids(self) -> tuple[int, ...]:
        return tuple(self.ids) or tuple(range(1, self.num_agents + 1))

    def initial_positions(self) -> list[list[float]]:
        """Return the agents' start positions: ``positions``, or the scenario's placement."""
        if self.positions:
            return [list(map(float, p)) for p in self.positions]
        return self.scenario.start_positions().tolist()

    def with_changes(self, **changes: Any) -> 'SwarmPlan':
        return dataclasses.replace(self, **changes)


def _checked_simulated(plan: SwarmPlan) -> tuple[str, ...]:
    """
    Return ``plan.simulated`` as a tuple; ``ValueError`` (one line) on an unknown or repeated name.

    Only a PX4 plan mixes vehicles: in mode sim every agent is simulated already.
    """
    simulated = (plan.simulated,) if isinstance(plan.simulated, str) else tuple(plan.simulated)
    if simulated and plan.mode != 'px4':
        raise ValueError(f'simulated: only a px4 plan mixes PX4 and simulated vehicles (in mode '
                         f'{plan.mode} every agent is simulated), got {", ".join(simulated)}')
    unknown = [name for name in simulated if name not in plan.names]
    if unknown:
        verb = 'is not an agent' if len(unknown) == 1 else 'are not agents'
        raise ValueError(f'simulated: {", ".join(map(repr, unknown))} {verb} of this swarm '
                         f'(agents: {", ".join(plan.names)})')
    twice = sorted({name for name in simulated if simulated.count(name) > 1})
    if twice:
        raise ValueError(f'simulated: {", ".join(twice)} listed twice')
    return simulated


# How a value reaches a node: ``(parameter, value, setting)``. ``setting`` names the scenario
# field, gain or vehicle limit it comes from (the key of ``SwarmPlan.given``), or is None for
# what the plan itself decides (names, ids, clock, start poses): those are always given.
Parameter = tuple[str, Any, 'str | None']


def _unless_default(plan: SwarmPlan, names: Sequence[str]) -> list[Parameter]:
    """Return the scenario fields ``names`` not at their default, or given (same-named)."""
    defaults = Scenario()
    return [(name, getattr(plan.scenario, name), name) for name in names
            if getattr(plan.scenario, name) != getattr(defaults, name) or name in plan.given]


def shared(plan: SwarmPlan, group: type) -> list[Parameter]:
    """Return the scenario's values of the settings ``group`` it shares with a node, by name."""
    return [(f.name, getattr(plan.scenario, f.name), f.name) for f in settings_fields(group)]


def target_parameters(plan: SwarmPlan) -> list[Parameter]:
    """Return the target_node parameters that carry the scenario's target."""
    scenario = plan.scenario
    params = [*shared(plan, TargetMotionSettings),
              ('seed', scenario.seed, 'seed'),
              ('broadcast_period', scenario.control_period, 'control_period'),
              *_unless_default(plan, ['omega_ref'])]
    if scenario.waypoints != Scenario().waypoints or 'waypoints' in plan.given:
        params.append(('waypoints', [float(c) for p in scenario.waypoints
                                     for c in (tuple(p) + (0.0,) * 3)[:3]], 'waypoints'))
    if scenario.arrival_times is not None:
        params.append(('arrival_times', [float(t) for t in scenario.arrival_times],
                       'arrival_times'))
    if scenario.lambdas:
        params += [('lambda_ids', list(scenario.lambdas), 'lambdas'),
                   ('lambda_values', list(scenario.lambdas.values()), 'lambdas')]
    if 'sim_dt' in scenario.vehicle:
        params.append(('sim_dt', float(scenario.vehicle['sim_dt']), 'sim_dt'))
    return params


def area_parameters(plan: SwarmPlan) -> list[Parameter]:
    """Return the safety area file, and the world origin a lat/lon polygon is placed from."""
    if not plan.safety_area_file:
        return []
    return [('safety_area_file', plan.safety_area_file, None),
            *([('geo_reference', list(plan.geo_reference), None)] if plan.geo_reference
              else [])]


def build_graph(plan: SwarmPlan, clock_listeners: int = 0) -> list[NodeSpec]:
    """
    Return the nodes of ``plan``, in start order (simulation before controllers).

    ``clock_listeners``: how many nodes besides the plan's the clock waits for (a runner that
    watches the graph and records it), when the mobility node is the clock.

    Each node gets the plan's values as parameters, by one precedence rule: a value the user
    gave (``plan.given``) wins over a params file, which wins over the plan's defaults (a
    default that a params file sets for that node is not passed). :func:`precedence_notes`
    says where a given value overrides a params file.
    """
    files = tuple(plan.params_files)
    sections = params_file_sections(files)

    def spec(executable: str, name: str, namespace: str, parameters: list[Parameter]):
        full_name = NodeSpec(executable, name, namespace).full_name
        in_files = file_parameters(sections, full_name)
        values, notes = {}, []
        for parameter, value, setting in parameters:
            if setting is None or setting in plan.given:
                values[parameter] = value
                if setting is not None and parameter in in_files:
                    notes.append(_note(setting, plan.given[setting], value, *in_files[parameter],
                                       parameter))
            elif parameter not in in_files:
                values[parameter] = value
        return NodeSpec(executable, name, namespace=namespace, parameters=values,
                        params_files=files, notes=tuple(notes))

    time: list[Parameter] = [('use_sim_time', plan.use_sim_time, None)]
    # Given only when not the default, so a lock-stepped plan's node commands stay as they were.
    swarm: list[Parameter] = ([] if plan.swarm_reliability == RELIABLE
                              else [('swarm_reliability', plan.swarm_reliability, None)])
    scenario = plan.scenario
    area = area_parameters(plan)
    nodes: list[NodeSpec] = []
    if plan.mode == 'sim':
        clock: list[Parameter] = [
            ('publish_clock', True, None),
            ('real_time_factor', plan.real_time_factor or 1.0, None),
            # every other node of the plan subscribes /clock: start when all are up
            ('clock_subscribers', plan.num_agents + 2 + clock_listeners, None),
        ] if plan.clock_source == 'mobility' and plan.use_sim_time else []
        nodes.append(spec('swarm_mobility_node', 'swarm_mobility', '', [
            *time,
            ('vehicle_names', list(plan.names), None),
            ('initial_positions', [c for p in plan.initial_positions() for c in p], None),
            ('odom_rate', plan.odom_rate, 'odom_rate'),
            *[(k, v, k) for k, v in scenario.vehicle.items()],
            *clock]))
    nodes.append(spec('target_node', 'target', '/target',
                      [*time, *target_parameters(plan), *swarm]))
    for index, (agent_id, name) in enumerate(zip(plan.agent_ids, plan.names)):
        nodes.append(spec('agent_node', 'agent', f'/{name}', [
            *time,
            ('agent_id', agent_id, None),
            *[(k, v, k) for k, v in scenario.controller.items()],
            # the command clamp is the vehicle's limit, as in Scenario.controller_params
            *[(k, v, k) for k, v in scenario.vehicle.items()
              if k in ('max_speed_xy', 'max_speed_z')],
            *[(k, getattr(scenario, k), k) for k in ('radius', 'control_period', 'seed')],
            *shared(plan, Impairments),
            *area,
            *swarm]))
        if plan.min_d_safe > 0.0:
            nodes[-1] = _with_separation_floor(plan, nodes[-1], sections)
        if plan.mode == 'px4':  # exactly one vehicle per agent: simulated, or its PX4
            _check_file_altitude(nodes[-1], sections)
            nodes.append(mobility_spec(plan, index, name, files) if name in plan.simulated
                         else px4_bridge_spec(plan, index, name, files))
    nodes.append(spec('metrics_node', 'metrics', '/swarm', [
        *time,
        ('radius', scenario.radius, 'radius'),
        ('metrics_period', scenario.metrics_period or scenario.control_period,
         'metrics_period'),
        # always: metrics_node's own default (0) is every metrics period, 10x the scenario's
        ('telemetry_period', scenario.telemetry_period, 'telemetry_period'),
        *area,
        *swarm,
        *([('output_dir', plan.metrics_output_dir, None)] if plan.metrics_output_dir else []),
        *([('figure_format', plan.figure_format, None)] if plan.figure_format != 'png'
          else []),
        *([] if plan.plots else [('plots', False, None)])]))
    check_vehicles(plan, nodes)
    return nodes


def _with_separation_floor(plan: SwarmPlan, agent: NodeSpec, sections) -> NodeSpec:
    """
    Refuse an agent whose effective ``d_safe`` is below ``plan.min_d_safe``, or pass it on.

    Effective: after the precedence (a given value, else a params file's, else the plan's).
    ``ValueError`` in one line naming the value, its source, the rule and the way out; with
    ``allow_no_separation`` the agent gets ``min_d_safe`` and ``allow_no_separation`` and warns
    at start-up itself.
    """
    in_files = file_parameters(sections, agent.full_name)
    if 'd_safe' in agent.parameters:
        value = float(agent.parameters['d_safe'])
        source = plan.given.get('d_safe', 'the launch default')
    elif 'd_safe' in in_files:
        value, source = float(in_files['d_safe'][1]), f'params file {in_files["d_safe"][0]}'
    else:
        value, source = ControllerParams().d_safe, 'the controller default'
    if value < plan.min_d_safe and not plan.allow_no_separation:
        raise ValueError(
            f'd_safe {value:g} m ({source}, {agent.full_name}) is below {plan.min_d_safe:g} m, '
            'the least separation this PX4 launch flies with: set d_safe:='
            f'{plan.min_d_safe:g} or more, or allow_no_separation:=true to fly without it '
            '(not for real vehicles)')
    extra = {'min_d_safe': plan.min_d_safe}
    if plan.allow_no_separation:
        extra['allow_no_separation'] = True
    return dataclasses.replace(agent, parameters={**agent.parameters, **extra})


def _check_file_altitude(agent: NodeSpec, sections) -> None:
    """
    Refuse (one line) a PX4 agent's ``altitude`` from a params file at or below the floor.

    A launch argument's altitude is checked with the plan; one a params file sets for the
    agent reaches it when no argument was given, and would fly the vehicle into the ground.
    """
    in_files = file_parameters(sections, agent.full_name)
    if 'altitude' in agent.parameters or 'altitude' not in in_files:
        return
    path, value = in_files['altitude']
    try:
        altitude = float(value)
    except (TypeError, ValueError):
        return  # not a number: the agent's own validation names it (launch_plans.value_problem)
    check_px4_altitude(altitude, f' (params file {path}, {agent.full_name})')


_CONTROLLER_FIELDS = frozenset(f.name for f in dataclasses.fields(ControllerParams))


def agent_controllers(plan: SwarmPlan, specs: Sequence[NodeSpec] | None = None
                      ) -> dict[str, ControllerParams]:
    """
    Return each agent's controller gains after the precedence, by agent name.

    What its agent_node ends up with: a parameter on its command line (a given value, or a
    default no params file sets), else the last params file's that names it, else the node's
    own default. ``ValueError`` in one line for a params file value the node would refuse.
    """
    specs = build_graph(plan) if specs is None else specs
    sections = params_file_sections(list(plan.params_files))
    agents = {spec.namespace.strip('/'): spec for spec in specs
              if spec.executable == 'agent_node'}
    out = {}
    for name, spec in agents.items():
        values = {key: value for key, (_, value) in file_parameters(sections,
                                                                    spec.full_name).items()
                  if key in _CONTROLLER_FIELDS}
        values.update({key: value for key, value in spec.parameters.items()
                       if key in _CONTROLLER_FIELDS})
        try:
            out[name] = ControllerParams.from_mapping(values)
        except (TypeError, ValueError) as error:
            raise ValueError(f'{spec.full_name}: {error}') from None
    return out


def separation_flown(plan: SwarmPlan, specs: Sequence[NodeSpec] | None = None
                     ) -> dict[str, float]:
    """
    Return the ``d_safe`` each agent flies on the full ring, by name (0: separation off).

    Its gains after the precedence (:func:`agent_controllers`), sized to the ring of the
    plan's agents (``ControllerParams.safety_distance``): what the agent node flies, where the
    scenario's ``d_safe_flown`` is what the scenario alone asks.
    """
    n = plan.num_agents
    return {name: float(params.safety_distance(n))
            for name, params in agent_controllers(plan, specs).items()}


def separation_notes(plan: SwarmPlan, specs: Sequence[NodeSpec] | None = None) -> list[str]:
    """
    Return one line when a params file makes agents fly less separation than the scenario.

    E.g. ``separation lowered by a params file: uav1, uav2, uav3 fly d_safe 0 m (separation
    off), the scenario 2 m``; nothing when every agent flies at least the scenario's.
    """
    asked = float(plan.scenario.gains.safety_distance(plan.num_agents))
    flown = separation_flown(plan, specs)
    lower = {name: value for name, value in flown.items() if value < asked}
    if not lower:
        return []
    values = sorted(set(lower.values()))
    what = ', '.join(f'{v:.3g} m' + (' (separation off)' if not v else '') for v in values)
    files = ', '.join(plan.params_files)
    verb = 'fly' if len(lower) > 1 else 'flies'
    return [f'separation lowered by params file {files}: {", ".join(lower)} {verb} d_safe '
            f'{what}, the scenario {asked:.3g} m']


def given_parameters(specs: Sequence[NodeSpec]) -> dict[str, set[str]]:
    """Return the parameters each node is given, by full name: its params files' and ``-p``."""
    sections = params_file_sections(list(dict.fromkeys(p for s in specs for p in s.params_files)))
    return {spec.full_name: set(spec.parameters)
            | {name for path, pattern, params in sections if path in spec.params_files
               and pattern.match(spec.full_name) for name in params}
            for spec in specs}


def precedence_notes(specs: Iterable[NodeSpec]) -> list[str]:
    """
    Return the nodes' notes once each: one line per value given by the user and a params file.

    Each names both sources and the value that won, e.g. ``control_period: 0.02 from swarm_sim
    option --control-period wins over 0.05 from params file a.yaml`` (however many agents).
    """
    return list(dict.fromkeys(note for spec in specs for note in spec.notes))


def _note(setting: str, source: str, value: Any, path: str, file_value: Any,
          parameter: str) -> str:
    named = setting if parameter == setting else f'{setting} (parameter {parameter})'
    return (f'{named}: {_yaml_value(value)} from {source} wins over {_yaml_value(file_value)} '
            f'from params file {path}')


def params_file_sections(paths: Sequence[str]) -> list[tuple[str, re.Pattern, dict]]:
    """
    Return the sections of ROS 2 params files: (path, node-name pattern, flat parameters).

    ``ValueError`` in one line for a file that cannot be read or is not {node: {ros__parameters:
    {...}}}. Nested parameter mappings are flattened with dots, as ROS names them.
    """
    sections = []
    for path in paths:
        content = read_yaml(path, 'params file')
        found: list[tuple[str, dict]] = []
        _sections(content, '', found)
        if not found or not isinstance(content, dict):
            raise ValueError(f'params file {path} must map node names to '
                             '{ros__parameters: {...}}')
        sections += [(path, _node_pattern(name), _flat(params)) for name, params in found]
    return sections


def _sections(content: Any, prefix: str, found: list) -> None:
    if not isinstance(content, dict):
        return
    for key, value in content.items():
        if key == 'ros__parameters' and isinstance(value, dict):
            found.append((prefix or '/', value))
        elif key != 'ros__parameters':
            _sections(value, f'{prefix}/{str(key).strip("/")}', found)


def _flat(params: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f'{prefix}{key}.'))
        else:
            flat[f'{prefix}{key}'] = value
    return flat


def _node_pattern(name: str) -> re.Pattern:
    """Return a params file's node name as a regex: ``/**`` any namespaces, ``/*`` one token."""
    tokens = [t for t in name.split('/') if t]
    pattern = ''.join('(/[^/]+)*' if t == '**' else '/[^/]+' if t == '*'
                      else '/' + re.escape(t) for t in tokens)
    return re.compile(f'^{pattern}$')


def file_parameters(sections: Sequence[tuple[str, re.Pattern, dict]],
                    full_name: str) -> dict[str, tuple[str, Any]]:
    """Return what params file ``sections`` give node ``full_name``: {name: (path, value)}."""
    given: dict[str, tuple[str, Any]] = {}
    for path, pattern, params in sections:
        if pattern.match(full_name):
            given.update({name: (path, value) for name, value in params.items()})
    return given


def px4_bridge_spec(plan: SwarmPlan, index: int, name: str, files: Sequence[str]) -> NodeSpec:
    """
    Return the offboard bridge of agent ``index``.

    PX4 instance ``px4_<index+1>`` unless given.
    """
    px4_ns = plan.px4_namespaces[index] if plan.px4_namespaces else f'px4_{index + 1}'
    target_system = plan.px4_target_systems[index] if plan.px4_target_systems else index + 2
    origin = (
        {'origin_enu': [float(c) for c in plan.px4_origins[index]]} if plan.px4_origins else {}
    )
    if plan.geo_reference:  # from GPS; hand-measured origins are checked against it
        origin.update(geo_reference=list(plan.geo_reference),
                      origin_source='given' if plan.px4_origins else 'gps')
    if plan.safety_area_file:
        origin['safety_area_file'] = plan.safety_area_file
    return NodeSpec(
        'px4_bridge_node', 'px4_bridge', namespace=f'/{name}', params_files=tuple(files),
        parameters={'use_sim_time': plan.use_sim_time, 'px4_namespace': px4_ns,
                    'target_system': target_system, **origin})


def mobility_spec(plan: SwarmPlan, index: int, name: str, files: Sequence[str]) -> NodeSpec:
    """
    Return the simulated vehicle of agent ``index`` in a mixed PX4 plan.

    A ``mobility_node`` in the agent's namespace, starting at the agent's origin (``px4_origins``,
    where its PX4 would have spawned: one world ENU frame for all), else at the plan's position.
    """
    start = plan.px4_origins[index] if plan.px4_origins else plan.initial_positions()[index]
    return NodeSpec(
        'mobility_node', 'mobility', namespace=f'/{name}', params_files=tuple(files),
        parameters={'use_sim_time': plan.use_sim_time,
                    'initial_position': [float(c) for c in start],
                    'odom_rate': plan.odom_rate, **dict(plan.scenario.vehicle)})


# The nodes that move a vehicle on its agent's cmd_vel: the simulation, or a PX4's bridge.
VEHICLE_EXECUTABLES = ('mobility_node', 'swarm_mobility_node', 'px4_bridge_node')


def resolved_topic(spec: NodeSpec, topic: str) -> str:
    """Return where ``spec``'s node reaches ``topic`` (a relative name): remappings, namespace."""
    full = f'{spec.namespace.rstrip("/")}/{topic}'
    for old, new in spec.remappings:
        if old in (topic, full):
            topic = new
    return topic if topic.startswith('/') else f'{spec.namespace.rstrip("/")}/{topic}'


def command_subscribers(specs: Sequence[NodeSpec]) -> dict[str, list[NodeSpec]]:
    """Map each cmd_vel topic of the graph to the vehicle nodes that fly it."""
    subscribers: dict[str, list[NodeSpec]] = {}
    for spec in specs:
        if spec.executable == 'swarm_mobility_node':
            topics = [f'/{name}/{AGENT_CMD_TOPIC}' for name in spec.parameters['vehicle_names']]
        elif spec.executable in VEHICLE_EXECUTABLES:
            topics = [resolved_topic(spec, AGENT_CMD_TOPIC)]
        else:
            continue
        for topic in topics:
            subscribers.setdefault(topic, []).append(spec)
    return subscribers


def check_vehicles(plan: SwarmPlan, specs: Sequence[NodeSpec]) -> None:
    """
    Refuse a graph in which an agent's commands reach anything but its own one vehicle.

    Each agent's cmd_vel has exactly one vehicle node: a simulated agent's (mode sim, or named in
    ``simulated``) a simulation, never a ``px4_bridge_node``; the others their own bridge, in
    their namespace. No two bridges fly one PX4 (``px4_namespace``). ``ValueError`` otherwise.
    """
    subscribers = command_subscribers(specs)
    for spec in specs:
        if spec.executable != 'agent_node':
            continue
        name, topic = spec.namespace.strip('/'), resolved_topic(spec, AGENT_CMD_TOPIC)
        flown_by = [s.executable for s in subscribers.get(topic, [])]
        real = plan.mode == 'px4' and name not in plan.simulated
        wanted = 'px4_bridge_node' if real else (
            'swarm_mobility_node' if plan.mode == 'sim' else 'mobility_node')
        if flown_by != [wanted]:
            raise ValueError(f'{name}: {topic} must reach exactly one {wanted}, not '
                             f'{", ".join(flown_by) or "nothing"}')
    bridges = [s for s in specs if s.executable == 'px4_bridge_node']
    px4s = [s.parameters.get('px4_namespace') for s in bridges]
    twice = sorted({str(ns) for ns in px4s if px4s.count(ns) > 1})
    if twice:
        raise ValueError(f'two bridges would fly the same PX4 (px4_namespace {", ".join(twice)})')


class LaunchArguments(dict):
    """
    A launch file's argument values (strings), with typed reads that name a bad argument.

    ``num_agents:=abc`` then fails with "launch argument num_agents must be an integer, got
    'abc'" instead of Python's bare int() message; ``use_sim_time:=yes`` is an error, not false.
    """

    def __init__(self, *args: Any, given: Iterable[str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # the arguments the user gave (the others hold their declared defaults); all by default
        self.given = frozenset(self if given is None else given)

    def sources(self, **settings: str) -> dict[str, str]:
        """
        Return ``SwarmPlan.given`` for arguments: {setting: 'launch argument arg:=value'}.

        ``settings`` maps a setting to the argument that sets it; only given arguments count.
        """
        return {setting: f'launch argument {arg}:={self[arg]}'
                for setting, arg in settings.items() if arg in self.given}

    def _parsed(self, name: str, parse: Callable[[str], Any], what: str) -> Any:
        text = self[name].strip()
        try:
            return parse(text)
        except ValueError:
            raise ValueError(
                f'launch argument {name} must be {what}, got {self[name]!r}') from None

    def integer(self, name: str) -> int:
        return self._parsed(name, int, 'an integer')

    def real(self, name: str) -> float:
        """Return a number; 'nan' passes (arguments such as altitude use it for 'off')."""
        return self._parsed(name, float, "a number (or 'nan' where that means off)")

    def flag(self, name: str) -> bool:
        def parse(text: str) -> bool:
            if text.lower() not in ('true', 'false'):
                raise ValueError(text)
            return text.lower() == 'true'
        return self._parsed(name, parse, 'true or false')

    def files(self, name: str) -> tuple[str, ...]:
        """Return a parameter file argument: one file, or none when empty."""
        return (self[name],) if self[name] else ()


def parse_geo_reference(text: str) -> tuple[float, ...]:
    """Parse a ``geo_reference`` launch argument 'lat,lon,alt' (empty: none)."""
    if not text.strip():
        return ()
    try:
        values = [float(v) for v in text.split(',')]
    except ValueError:
        values = []
    if len(values) != 3:
        raise ValueError(f"geo_reference must be 'lat,lon,alt' (deg, deg, m AMSL), got {text!r}")
    return check_geo_reference(values)


def parse_origins(text: str, count: int) -> tuple[tuple[float, float, float], ...]:
    """``'x,y,z;x,y,z'`` -> ``count`` (x, y, z) tuples; ``ValueError`` saying what is wrong."""
    items = [item for item in text.replace(' ', '').split(';') if item]
    origins = []
    for item in items:
        values = item.split(',')
        try:
            origin = tuple(float(v) for v in values)
        except ValueError:
            origin = ()
        if len(origin) != 3 or not all(math.isfinite(v) for v in origin):
            raise ValueError(f"origins: each entry must be 'x,y,z' in metres, got {item!r}")
        origins.append(origin)
    if len(origins) != count:
        raise ValueError(f'origins: {count} vehicle(s) need {count} x,y,z entries, got '
                         f'{len(origins)} in {text!r}')
    return tuple(origins)


def parse_simulated(text: str) -> tuple[str, ...]:
    """``'uav3, uav4'`` -> ``('uav3', 'uav4')``; empty -> ``()`` (the plan checks the names)."""
    return tuple(item for item in text.replace(' ', '').split(',') if item)


def rviz_problem(requested: bool, package_found: Callable[[str], bool]) -> str | None:
    """
    Why ``rviz:=true`` cannot be honoured (rviz2 not installed), or None.

    The launch files then refuse (:func:`launch_plan`): an error, nothing started, exit 1.
    """
    if requested and not package_found('rviz2'):
        return ('rviz:=true but rviz2 is not installed (sudo apt install ros-$ROS_DISTRO-rviz2, '
                'or launch without rviz:=true); starting nothing')
    return None


class LaunchRefused(RuntimeError):
    """
    A launch that starts nothing, and why.

    Raised while launch evaluates the plan, it is what launch reports as an error ('Caught
    exception in launch ...: <why>') before it shuts down with return code 1, so that
    `ros2 launch` fails as a script expects.
    """


def launch_plan(values: LaunchArguments, specs: Callable[[LaunchArguments], list[NodeSpec]],
                extra: Callable[[LaunchArguments], list],
                problem: Callable[[LaunchArguments], str | None]) -> tuple[list[NodeSpec], list]:
    """
    Return what a launch file starts from its argument ``values``: (node specs, actions).

    When ``problem(values)`` names one, nothing is planned: :class:`LaunchRefused` says why.
    """
    reason = problem(values)
    if reason:
        raise LaunchRefused(reason)
    return specs(values), extra(values)


def in_namespace(specs: Sequence[NodeSpec], namespace: str) -> list[NodeSpec]:
    """Return the nodes of one vehicle (e.g. ``/uav1``): what a companion computer runs."""
    return [spec for spec in specs if spec.namespace == namespace]
