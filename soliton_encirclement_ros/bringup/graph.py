"""
The node graph of a swarm run, as one pure function (no rclpy, no launch).

``build_graph(SwarmPlan)`` returns the list of nodes to start: package, executable, name,
namespace, parameters and remappings. The launch files, the ``swarm_sim`` runner (in one
process or one process per node) and the PX4 launch files all read it, so there is exactly
one description of which nodes exist and how they are wired.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import math
from typing import Any, Callable, Mapping, Sequence

import yaml

from ros_support.validation import bounded
from soliton_encirclement_ros.core.comms import check_loss
from soliton_encirclement_ros.core.scenario import initial_positions
from soliton_encirclement_ros.core.target_motion import TARGET_MOTIONS
from soliton_encirclement_ros.interface import check_reliability, RELIABLE

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

    def ros_args(self) -> list[str]:
        """``--ros-args`` for this node: files first, then explicit parameters (which win)."""
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


@dataclass(frozen=True)
class SwarmPlan:
    """
    Everything that decides the node graph of one swarm run.

    ``names`` defaults to ``uav1..uavN``; agent ids are 1..N in that order. Initial poses are
    drawn from ``seed`` as in the reference scenario unless ``positions`` gives them.
    """

    num_agents: int = 10
    names: tuple[str, ...] = ()
    radius: float = 20.0
    seed: int = 0
    mode: str = 'sim'
    params_files: tuple[str, ...] = ()
    use_sim_time: bool = True
    clock_source: str = 'runner'
    real_time_factor: float = 1.0
    control_period: float = 0.05
    odom_rate: float = 50.0
    target_motion: str = 'static'
    failures_per_min: float = 0.0
    failure_off_time: float = 8.0
    loss: float = 0.0
    delay: float = 0.0
    positions: tuple[tuple[float, float, float], ...] = ()
    ids: tuple[int, ...] = ()
    px4_namespaces: tuple[str, ...] = ()
    px4_target_systems: tuple[int, ...] = ()
    px4_origins: tuple[tuple[float, float, float], ...] = ()
    metrics_output_dir: str = ''
    swarm_reliability: str = RELIABLE   # 'best_effort' between hosts (radio links)
    altitude: float = math.nan          # agents' altitude hold [m, world ENU z]; NaN = off

    def __post_init__(self) -> None:
        check_reliability(self.swarm_reliability)
        if not isinstance(self.altitude, (int, float)) or math.isinf(self.altitude):
            raise ValueError(
                f'altitude must be a finite number or NaN (off), got {self.altitude!r}'
            )
        if (
            isinstance(self.num_agents, bool)
            or not isinstance(self.num_agents, int)
            or self.num_agents < 1
        ):
            raise ValueError(f'num_agents must be an integer >= 1, got {self.num_agents!r}')
        names = tuple(self.names) or tuple(f'uav{i}' for i in range(1, self.num_agents + 1))
        if len(names) != self.num_agents:
            raise ValueError(f'names has {len(names)} entries but num_agents is {self.num_agents}')
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f'duplicate agent names: {", ".join(duplicates)}')
        bad = [n for n in names if not n or not (n[0].isalpha() and n.replace('_', 'a').isalnum())]
        if bad or 'target' in names:
            raise ValueError(
                f'agent names must be ROS name tokens other than "target", got {bad or ["target"]}'
            )
        object.__setattr__(self, 'names', names)
        for name, allowed in (('mode', MODES), ('target_motion', TARGET_MOTIONS),
                              ('clock_source', CLOCK_SOURCES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f'{name} must be one of {", ".join(allowed)}, got {getattr(self, name)!r}'
                )
        for name in ('radius', 'control_period', 'odom_rate'):
            bounded(name, getattr(self, name), 0.0, strict=True)
        for name in ('failures_per_min', 'failure_off_time', 'delay', 'real_time_factor'):
            bounded(name, getattr(self, name), 0.0)
        check_loss(self.loss)
        if self.positions and len(self.positions) != self.num_agents:
            raise ValueError(
                f'positions has {len(self.positions)} entries but num_agents is {self.num_agents}'
            )
        if self.ids and (len(self.ids) != self.num_agents or len(set(self.ids)) != len(self.ids)
                         or min(self.ids) < 1):
            raise ValueError(
                f'ids must be {self.num_agents} distinct integers >= 1, got {list(self.ids)}'
            )
        if self.mode == 'px4':
            for name in ('px4_namespaces', 'px4_target_systems', 'px4_origins'):
                if getattr(self, name) and len(getattr(self, name)) != self.num_agents:
                    raise ValueError(f'{name} needs one entry per agent ({self.num_agents})')

    @property
    def agent_ids(self) -> tuple[int, ...]:
        return tuple(self.ids) or tuple(range(1, self.num_agents + 1))

    def initial_positions(self) -> list[list[float]]:
        if self.positions:
            return [list(map(float, p)) for p in self.positions]
        return initial_positions(self.num_agents, self.radius, self.seed).tolist()

    def with_changes(self, **changes: Any) -> 'SwarmPlan':
        return dataclasses.replace(self, **changes)


def build_graph(plan: SwarmPlan) -> list[NodeSpec]:
    """Return the nodes of ``plan``, in start order (simulation before controllers)."""
    files = tuple(plan.params_files)
    time = {'use_sim_time': plan.use_sim_time}
    # Given only when not the default, so a lock-stepped plan's node commands stay as they were.
    swarm = ({} if plan.swarm_reliability == RELIABLE
             else {'swarm_reliability': plan.swarm_reliability})
    nodes: list[NodeSpec] = []
    if plan.mode == 'sim':
        nodes.append(
            NodeSpec(
                'swarm_mobility_node',
                'swarm_mobility',
                params_files=files,
                parameters={
                    **time,
                    'vehicle_names': list(plan.names),
                    'initial_positions': [c for p in plan.initial_positions() for c in p],
                    'odom_rate': plan.odom_rate,
                    **(
                        {
                            'publish_clock': True,
                            'real_time_factor': plan.real_time_factor or 1.0,
                            # every other node of the plan subscribes /clock: start when all are up
                            'clock_subscribers': plan.num_agents + 2,
                        }
                        if plan.clock_source == 'mobility' and plan.use_sim_time
                        else {}
                    ),
                },
            )
        )
    nodes.append(NodeSpec(
        'target_node', 'target', namespace='/target', params_files=files,
        parameters={**time, 'motion': plan.target_motion, 'seed': plan.seed,
                    'broadcast_period': plan.control_period, **swarm}))
    for index, (agent_id, name) in enumerate(zip(plan.agent_ids, plan.names)):
        nodes.append(
            NodeSpec(
                'agent_node',
                'agent',
                namespace=f'/{name}',
                params_files=files,
                parameters={
                    **time,
                    'agent_id': agent_id,
                    'radius': plan.radius,
                    'control_period': plan.control_period,
                    'failures_per_min': plan.failures_per_min,
                    'failure_off_time': plan.failure_off_time,
                    'loss': plan.loss,
                    'delay': plan.delay,
                    'seed': plan.seed,
                    **swarm,
                    **({} if math.isnan(plan.altitude) else {'altitude': float(plan.altitude)}),
                },
            )
        )
        if plan.mode == 'px4':
            nodes.append(px4_bridge_spec(plan, index, name, files))
    nodes.append(
        NodeSpec(
            'metrics_node',
            'metrics',
            namespace='/swarm',
            params_files=files,
            parameters={
                **time,
                'radius': plan.radius,
                'metrics_period': plan.control_period,
                **swarm,
                **({'output_dir': plan.metrics_output_dir} if plan.metrics_output_dir else {}),
            },
        )
    )
    return nodes


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
    return NodeSpec(
        'px4_bridge_node', 'px4_bridge', namespace=f'/{name}', params_files=tuple(files),
        parameters={'use_sim_time': plan.use_sim_time, 'px4_namespace': px4_ns,
                    'target_system': target_system, **origin})


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


def rviz_problem(requested: bool, package_found: Callable[[str], bool]) -> str | None:
    """
    Why ``rviz:=true`` cannot be honoured (rviz2 not installed), or None.

    The launch files then log this and shut down before starting any node, so nothing is left
    running.
    """
    if requested and not package_found('rviz2'):
        return ('rviz:=true but rviz2 is not installed (sudo apt install ros-$ROS_DISTRO-rviz2, '
                'or launch without rviz:=true); starting nothing')
    return None


def in_namespace(specs: Sequence[NodeSpec], namespace: str) -> list[NodeSpec]:
    """Return the nodes of one vehicle (e.g. ``/uav1``): what a companion computer runs."""
    return [spec for spec in specs if spec.namespace == namespace]
