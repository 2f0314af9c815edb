"""
Typed, validated settings of the agent, target and metrics nodes (no rclpy).

Each node declares one ROS parameter per field (``ros_support.ros_parameters.specs_of``) and
builds its settings object from the declared values, so a node reads ``settings.loss``, never
``config['loss']``. The settings a node shares with a scenario are inherited from the same
group (``core.faults.Impairments``, ``core.target_motion.TargetMotionSettings``), or, for a
single field, defined by the scenario's (``same_as``): description, unit, bounds and default are
written once, and every node parameter is read-only (the nodes read them once at start-up).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ros_support.settings import check_fields, same_as, setting
from ros_support.validation import from_mapping
from soliton_encirclement_ros.analysis.outputs import FIGURE_FORMATS
from soliton_encirclement_ros.core.area import load_area_file
from soliton_encirclement_ros.core.faults import Impairments
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.scenario import Scenario
from soliton_encirclement_ros.core.target_motion import DEFAULT_WAYPOINTS, TargetMotionSettings
from soliton_encirclement_ros.interface import (
    RELIABLE, SWARM_RELIABILITIES, SWARM_RELIABILITY_DESCRIPTION)
from soliton_encirclement_ros.px4.geo import check_geo_reference
from soliton_encirclement_ros.px4.sequencer.config import OffboardConfig
from velocity_mobility_ros.core.vehicle import VehicleParams


def swarm_reliability_setting():
    """Return the ``swarm_reliability`` field every swarm node has."""
    return setting(RELIABLE, SWARM_RELIABILITY_DESCRIPTION, choices=SWARM_RELIABILITIES,
                   read_only=True)


class _Settings:
    """Build from a node's declared parameter values; unknown names raise."""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]):
        return from_mapping(cls, values)


@dataclass(frozen=True)
class AgentSettings(Impairments, _Settings):
    """agent_node's settings besides the controller gains (those are ControllerParams)."""

    agent_id: int = setting(0, 'integer id of this agent in the swarm (0 = digits of the '
                            'namespace)', low=0, high=1_000_000, read_only=True)
    seed: int = same_as(Scenario, 'seed', optional=False, read_only=True,
                        description='swarm seed of the failure and impairment draws (combined '
                        'with agent_id)')
    swarm_reliability: str = swarm_reliability_setting()
    min_d_safe: float = setting(0.0, 'the least d_safe this agent may fly with (the PX4 launch '
                                'files set their d_safe, 2 m): a lower d_safe is refused at '
                                'start-up and at run time unless allow_no_separation', 'm',
                                0.0, 1000.0, read_only=True)
    allow_no_separation: bool = setting(False, 'fly with a d_safe below min_d_safe after all '
                                        '(set by a PX4 launch with allow_no_separation:=true): '
                                        'one WARN at start-up', read_only=True)
    max_clock_offset: float = setting(0.1, "a sender whose clock is off from this agent's by "
                                      'more than this is named in a WARN and in /diagnostics '
                                      '(must stay below max_future_stamp)', 's', 0.0,
                                      strict=True, read_only=True)
    safety_area_file: str = setting('', 'safety area YAML (polygon in world ENU or '
                                    'polygon_latlon with geo_reference; z_min, z_max): every '
                                    'command keeps the vehicle able to stop inside; outside it '
                                    "holds, and leaves the ring after outside_land_after; '' = "
                                    'none', read_only=True)
    outside_land_after: float = same_as(OffboardConfig, 'outside_land_after', read_only=True)
    geo_reference: tuple = setting(description="the fleet's shared world origin [lat, lon, alt] "
                                   '(deg, deg, m AMSL): world ENU is the tangent plane there (a '
                                   'safety area in lat/lon is placed from it); empty = none',
                                   array='double', read_only=True, default_factory=tuple)
    link_window: float = setting(10.0, 'the per-sender link figures in /diagnostics (heard, '
                                 'lost, age, clock offset) cover this long', 's', 1.0, 3600.0,
                                 read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, 'geo_reference', check_geo_reference(self.geo_reference))
        object.__setattr__(self, 'area', load_area_file(self.safety_area_file,
                                                        self.geo_reference))


@dataclass(frozen=True)
class TargetSettings(TargetMotionSettings, _Settings):
    """target_node's settings: the simulated motion or the tracked target, and the broadcast."""

    seed: int = setting(0, 'seed of the random model', low=0, high=2**31 - 1, read_only=True)
    waypoints: list = setting(description='waypoints as a flat list x1, y1, z1, x2, ...',
                              unit='m', array='double', read_only=True, default_factory=list)
    arrival_times: list = setting(description='optional arrival time per waypoint; '
                                  'unreachable times are an error', unit='s', array='double',
                                  read_only=True, default_factory=list)
    initial_position: list = setting(description='initial position [x, y, z] (waypoints: the '
                                     'first one)', unit='m', array='double', read_only=True,
                                     default_factory=lambda: [0.0, 0.0, 0.0])
    omega_ref: float = same_as(Scenario, 'omega_ref', read_only=True)
    lambda_ids: list = setting(description='agent ids with a spacing weight', array='integer',
                               read_only=True, default_factory=list)
    lambda_values: list = setting(description='spacing weight of each agent in lambda_ids (arc '
                                  'j -> succ(j))', array='double', read_only=True,
                                  default_factory=list)
    broadcast_period: float = setting(0.05, 'period of /target/state and /target/odom', 's',
                                      1e-3, read_only=True)
    sim_dt: float = same_as(VehicleParams, 'sim_dt',
                            description='integration step of the simulated target')
    follow_topic: str = setting('', 'nav_msgs/Odometry of a tracked real target; empty = '
                                'simulate', read_only=True)
    follow_timeout: float = setting(0.5, 'follow mode: stop broadcasting when the tracked '
                                    'odometry is older than this (the agents then see the '
                                    'target as lost)', 's', 1e-3, read_only=True)
    max_future_stamp: float = same_as(
        ControllerParams, 'max_future_stamp', read_only=True,
        description="follow mode: tracked odometry stamped further ahead of this node's clock is "
        'rejected')
    world_frame: str = setting('world', 'header.frame_id of /target/odom', read_only=True)
    swarm_reliability: str = swarm_reliability_setting()

    def __post_init__(self) -> None:
        check_fields(self)
        if len(self.lambda_ids) != len(self.lambda_values):
            raise ValueError(f'lambda_ids has {len(self.lambda_ids)} entries but lambda_values '
                             f'has {len(self.lambda_values)}')
        if len(self.waypoints) % 3:
            raise ValueError(f'waypoints must be x, y, z triples, got {len(self.waypoints)} '
                             'numbers')
        if len(self.initial_position) != 3:
            raise ValueError(f'initial_position must be [x, y, z], got {self.initial_position}')
        if not self.follow_topic:
            self.target_model()  # bad waypoints or arrival times fail at start-up

    @property
    def lambdas(self) -> dict[int, float]:
        return dict(zip(map(int, self.lambda_ids), map(float, self.lambda_values)))

    def _points(self):
        """Return the waypoints as points (the scenario's default square when none are given)."""
        if not self.waypoints:
            return DEFAULT_WAYPOINTS
        return np.reshape(self.waypoints, (-1, 3)).tolist()

    def target_model(self):
        """Return the motion model this target flies (as a scenario of the same settings)."""
        return self.motion_model(self._points(), self.arrival_times or None, self.seed)

    def start(self) -> np.ndarray:
        """Where the simulated target starts: the first waypoint, or ``initial_position``."""
        if self.target_motion == 'waypoints':
            return self.motion_start(self._points(), self.arrival_times or None)
        return np.array(self.initial_position, dtype=float)


@dataclass(frozen=True)
class MetricsSettings(_Settings):
    """metrics_node's settings."""

    radius: float = same_as(Scenario, 'radius', read_only=True,
                            description='desired encirclement radius R')
    metrics_period: float = setting(0.05, 'metrics computation and publication period', 's',
                                    1e-3, read_only=True)
    telemetry_period: float = setting(0.0, 'agents.csv row period per agent, rounded to whole '
                                      'metrics periods; 0 = every metrics period', 's', 0.0,
                                      read_only=True)
    agent_state_timeout: float = setting(0.0, 'an agent is live while its last state is at most '
                                         'this old; 0 = 3 x metrics_period', 's', 0.0,
                                         read_only=True)
    marker_period: float = setting(0.5, 'RViz marker publication period; 0 disables', 's', 0.0,
                                   read_only=True)
    trail_length: int = setting(60, 'positions kept per agent trail in the markers', low=0,
                                high=100_000, read_only=True)
    world_frame: str = setting('world', 'frame of the markers', read_only=True)
    safety_area_file: str = same_as(AgentSettings, 'safety_area_file',
                                    description='safety area YAML drawn in the markers (the '
                                    "agents' file); '' = none")
    geo_reference: tuple = same_as(AgentSettings, 'geo_reference')
    output_dir: str = setting('', 'directory for the run outputs (CSV streamed during the run, '
                              'plots and summary.json on shutdown); empty = none',
                              read_only=True)
    figure_format: str = setting('png', 'format of the plots in output_dir: png, or vector pdf/'
                                 'svg for papers', choices=FIGURE_FORMATS, read_only=True)
    plots: bool = setting(True, 'draw the plots into output_dir on shutdown; false = the CSV '
                          'files and summary.json only', read_only=True)
    swarm_reliability: str = swarm_reliability_setting()

    def __post_init__(self) -> None:
        check_fields(self)
        object.__setattr__(self, 'area', load_area_file(self.safety_area_file,
                                                        tuple(self.geo_reference)))

    @property
    def telemetry_every(self) -> int:
        """Return every how many metrics ticks agents.csv gets rows (as batch_sim rounds)."""
        return max(1, round(self.telemetry_period / self.metrics_period))

    @property
    def agent_timeout(self) -> float:
        """Return how long an agent stays live after its last state [s]."""
        return self.agent_state_timeout or 3.0 * self.metrics_period
