"""
px4_bridge_node: the standard vehicle interface (``cmd_vel`` in, ``odom`` out) on top of PX4.

A thin rclpy shell around :mod:`.frames` and :mod:`.offboard`, with small collaborators
(:mod:`.bridge_parts`: commands and answers, ``~/status``, presence, the clock;
:mod:`.graph_watch`: other setpoint writers, message versions). It runs in the vehicle's
namespace (e.g. ``/uav1``) so ``cmd_vel`` and ``odom`` are relative names, and talks to PX4's
uXRCE-DDS topics by absolute name (``/fmu/...`` for instance 0, ``/px4_<N>/fmu/...`` otherwise).
``px4_msgs`` is imported only when the node starts; nothing else in the package needs it.

The heartbeat (OffboardControlMode) and the setpoints stream from timers on the steady clock,
whatever ``use_sim_time`` says, so a stalled or absent ``/clock`` never stops them; their
``timestamp`` fields stay in ROS time (what PX4's uXRCE-DDS time sync expects). A ROS clock
that does not advance for more than 1 s is reported once, naming ``/clock``. They stream only
while PX4 is in the mode this bridge asked for (OFFBOARD) or while an engage switches it there
(``OffboardSequencer.streaming``): in Land, Hold, RTL or any mode a pilot or a failsafe chose,
the bridge sends PX4 nothing but commands.

Services (std_srvs/Trigger), each answered once PX4 reports the outcome: ``~/engage``
(OFFBOARD and ARMED), ``~/land`` (landed and disarmed) and ``~/hold`` (PX4's Hold mode, at once,
from any phase: the operator's stop).

``~/status`` (diagnostic_msgs/DiagnosticStatus, also on ``/diagnostics``) says what the bridge
is doing and why it holds, on change and every second. Once a second the bridge looks for other
publishers on its vehicle's ``/fmu/in/`` setpoint topics (a second bridge on the same PX4).
"""
import dataclasses
from dataclasses import dataclass, field
import functools
import importlib
import math
from pathlib import Path
import re
import sys

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import rclpy
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, qos_profile_sensor_data, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from transforms3d.quaternions import quat2mat

from ros_support.ros_parameters import declare_validated, specs_of
from ros_support.settings import check_fields, same_as, setting
from ros_support.spin import help_requested, node_help, spin_node
from ros_support.validation import from_mapping
from soliton_encirclement_ros.core.area import AreaWatch, limit_for_hold, load_area_file
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.identity import id_from_namespace, new_incarnation
from soliton_encirclement_ros.interface import (
    AGENT_NODE_NAME, AGENT_STATES_TOPIC, AGENT_STATUS_TOPIC, RELIABLE, VEHICLE_FAILURE_TOPIC)
from soliton_encirclement_ros.nodes.settings import AgentSettings
from soliton_encirclement_ros.nodes.swarm_topics import (
    create_swarm_publisher, VEHICLE_FAILURE_QOS)
from soliton_encirclement_ros.px4 import offboard
from soliton_encirclement_ros.px4.bridge_parts import (
    BridgeStatus, ClockWatch, PresenceAnnouncer, SequencerOutput)
from soliton_encirclement_ros.px4.frames import (
    enu_to_ned, ned_to_enu, odometry_covariances, OdometryFrameError, sample_stamp_ns,
    vehicle_odometry_to_enu)
from soliton_encirclement_ros.px4.geo import check_geo_reference, ORIGIN_SOURCES, OriginPlacement
# other_versions and version_mismatch_text are offered here too, as before (tests import them).
from soliton_encirclement_ros.px4.graph_watch import (  # noqa: F401
    GraphWatch, other_versions, version_mismatch_text)
from soliton_encirclement_ros.px4.offboard import OffboardConfig, OffboardSequencer
from soliton_encirclement_ros.px4.presence import PRESENCE_PERIOD
from velocity_mobility_ros.nodes.messages import new_odometry, with_position_uncertainty

PX4_MSGS_MISSING = (
    'px4_bridge_node: cannot import px4_msgs ({error}). Build PX4/px4_msgs at the branch that '
    'matches your PX4 firmware (e.g. git clone -b release/1.16 https://github.com/PX4/px4_msgs '
    'into a colcon workspace, colcon build, then source install/setup.bash) and run again.')
PX4_MESSAGE_TYPES = ('VehicleOdometry', 'VehicleStatus', 'VehicleCommandAck', 'VehicleCommand',
                     'OffboardControlMode', 'TrajectorySetpoint')
# Read when the built px4_msgs has them: which failsafe PX4 is in (PX4 >= 1.14), whether the
# vehicle has landed (with nav_state, the truth about a landing), and the estimator's global
# reference (the origin from GPS: px4.geo), and the battery (min_battery).
PX4_OPTIONAL_TYPES = ('FailsafeFlags', 'VehicleLandDetected', 'VehicleLocalPosition',
                      'BatteryStatus')
VERSION_SUFFIX_MODES = ('auto', 'none')
_NAMESPACE = re.compile(r'^/?([A-Za-z][A-Za-z0-9_]*(/[A-Za-z][A-Za-z0-9_]*)*)?$')
GRAPH_PERIOD = 1.0  # s between looks for other publishers on the vehicle's setpoint topics
STATUS_PERIOD = 1.0  # s between ~/status publications when nothing changes
# The sequencer's MAVLink numbers, checked against the built px4_msgs at start-up.
PX4_CONSTANTS = (
    ('VehicleCommand', 'VEHICLE_CMD_NAV_LAND', offboard.VEHICLE_CMD_NAV_LAND),
    ('VehicleCommand', 'VEHICLE_CMD_DO_SET_MODE', offboard.VEHICLE_CMD_DO_SET_MODE),
    ('VehicleCommand', 'VEHICLE_CMD_COMPONENT_ARM_DISARM',
     offboard.VEHICLE_CMD_COMPONENT_ARM_DISARM),
    ('VehicleStatus', 'NAVIGATION_STATE_OFFBOARD', offboard.NAVIGATION_STATE_OFFBOARD),
    ('VehicleStatus', 'NAVIGATION_STATE_AUTO_LAND', offboard.NAVIGATION_STATE_AUTO_LAND),
    ('VehicleStatus', 'ARMING_STATE_ARMED', offboard.ARMING_STATE_ARMED),
    ('VehicleStatus', 'ARMING_STATE_DISARMED', offboard.ARMING_STATE_DISARMED),
    ('VehicleCommandAck', 'VEHICLE_CMD_RESULT_ACCEPTED', offboard.VEHICLE_CMD_RESULT_ACCEPTED),
    ('VehicleCommandAck', 'VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED',
     offboard.VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED),
    ('VehicleCommandAck', 'VEHICLE_CMD_RESULT_IN_PROGRESS',
     offboard.VEHICLE_CMD_RESULT_IN_PROGRESS),
    ('VehicleCommandAck', 'VEHICLE_CMD_RESULT_DENIED', offboard.VEHICLE_CMD_RESULT_DENIED),
    ('VehicleCommandAck', 'VEHICLE_CMD_RESULT_FAILED', offboard.VEHICLE_CMD_RESULT_FAILED),
)
# PX4's uXRCE-DDS readers of /fmu/in topics are best effort, volatile: match them. Its writers
# of /fmu/out topics are best effort, transient local: a best-effort volatile reader matches
# (the ROS sensor-data profile, as PX4's ROS 2 guide prescribes).
PX4_IN_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                        depth=1)
PX4_OUT_QOS = qos_profile_sensor_data


@dataclass(frozen=True)
class BridgeSettings:
    """Validated bridge parameters: one per field here and per ``OffboardConfig`` field."""

    px4_namespace: str = setting('', "PX4 uXRCE-DDS namespace: '' for instance 0 (/fmu/...), "
                                 "'px4_1' for /px4_1/fmu/... (PX4 SITL instance 1, "
                                 'UXRCE_DDS_NS)', read_only=True)
    target_system: int = setting(1, 'MAVLink system id of the autopilot (MAV_SYS_ID; SITL '
                                 'instance N has N+1); PX4 ignores commands not addressed to it '
                                 'or to 0 (broadcast: not a system id)', low=1, high=255)
    message_version_suffix: str = setting('auto', "'auto': append _v<MESSAGE_VERSION> of the "
                                          'built px4_msgs to versioned topics, as PX4 >= 1.16 '
                                          "does (e.g. vehicle_status_v1); 'none': no suffix "
                                          '(PX4 <= 1.15)', choices=VERSION_SUFFIX_MODES,
                                          read_only=True)
    setpoint_rate: float = setting(20.0, 'TrajectorySetpoint publishing rate', 'Hz', 10.0, 250.0,
                                   read_only=True)
    heartbeat_rate: float = setting(10.0, 'OffboardControlMode heartbeat and sequencing rate',
                                    'Hz', 10.0, 250.0, read_only=True)
    source_system: int = setting(255, 'MAVLink system id this bridge sends commands as (not a '
                                 "vehicle's: PX4 SITL instance N is N+1); acks addressed "
                                 'elsewhere are ignored', low=1, high=255, read_only=True)
    source_component: int = setting(191, 'MAVLink component id this bridge sends commands as '
                                    '(191 = MAV_COMP_ID_ONBOARD_COMPUTER)', low=1, high=255,
                                    read_only=True)
    world_frame_id: str = setting('world', 'odom header.frame_id (shared ENU world frame)',
                                  read_only=True)
    child_frame_id: str = setting('', "odom child_frame_id; '' = <node namespace>/base_link",
                                  read_only=True)
    origin_enu: tuple = setting(description="position of this PX4's local origin in the world "
                                'ENU frame (each PX4 starts its local frame where it '
                                'initialised); origin_source given', unit='m', array='double',
                                default_factory=lambda: (0.0, 0.0, 0.0))
    origin_source: str = setting('given', "'given': fly origin_enu (checked against GPS when "
                                 "geo_reference is set); 'gps': place the vehicle from its "
                                 "estimator's global reference (VehicleLocalPosition ref_lat/"
                                 'ref_lon/ref_alt) in the frame of geo_reference',
                                 choices=ORIGIN_SOURCES, read_only=True)
    geo_reference: tuple = same_as(AgentSettings, 'geo_reference')
    origin_tolerance: float = setting(3.0, 'an origin_enu farther than this from the GPS-derived '
                                      'origin refuses the engage', 'm', 0.0, strict=True,
                                      read_only=True)
    safety_area_file: str = setting('', 'safety area YAML (polygon in world ENU, or '
                                    'polygon_latlon in the frame of geo_reference; z_min, '
                                    'z_max): the engage is refused outside, and an engaged '
                                    'vehicle outside holds, then lands after outside_land_after; '
                                    "'' = none", read_only=True)
    t_safe: float = same_as(ControllerParams, 't_safe', read_only=True, description=(
        "the vehicle's velocity lag that the safety area limit allows for (as the agent's)"))
    a_safe: float = same_as(ControllerParams, 'a_safe', read_only=True, description=(
        "the braking that the safety area limit allows for (as the agent's)"))
    offboard: OffboardConfig = field(default_factory=OffboardConfig)

    def __post_init__(self):
        check_fields(self)
        if not _NAMESPACE.match(self.px4_namespace):
            raise ValueError(f"px4_namespace must be '' or a ROS namespace such as 'px4_1', "
                             f'got {self.px4_namespace!r}')
        object.__setattr__(self, 'px4_namespace', self.px4_namespace.strip('/'))
        if len(self.origin_enu) != 3:
            raise ValueError(f'origin_enu must be 3 finite numbers [x, y, z], got '
                             f'{list(self.origin_enu)}')
        object.__setattr__(self, 'origin_enu', tuple(self.origin_enu))
        object.__setattr__(self, 'geo_reference', check_geo_reference(self.geo_reference))
        self.placement()  # origin_source gps without a geo_reference fails here
        object.__setattr__(self, 'area', load_area_file(self.safety_area_file,
                                                        self.geo_reference))
        if not self.world_frame_id:
            raise ValueError("world_frame_id must not be empty, got ''")

    def placement(self):
        """Return a new :class:`~.geo.OriginPlacement` of these settings."""
        return OriginPlacement(self.origin_source, self.origin_enu, self.geo_reference,
                               self.origin_tolerance)

    @classmethod
    def from_mapping(cls, values):
        """Build from parameter values; ``ValueError`` names the parameter and the bad value."""
        timing = {f.name for f in dataclasses.fields(OffboardConfig)}
        return from_mapping(cls, {
            **{k: v for k, v in values.items() if k not in timing},
            'offboard': OffboardConfig(**{k: v for k, v in values.items() if k in timing})})


# Everything px4_bridge_node declares (its table in docs/reference/parameters.md comes from it).
PARAMS = (*specs_of(BridgeSettings), *specs_of(OffboardConfig))
PARAMETERS = PARAMS


def px4_topic(px4_namespace, direction, name, message_version=0):
    """PX4 uXRCE-DDS topic name: ``[/<ns>]/fmu/<in|out>/<name>[_v<version>]`` (no suffix for 0)."""
    prefix = f'/{px4_namespace.strip("/")}' if px4_namespace.strip('/') else ''
    suffix = f'_v{message_version}' if message_version else ''
    return f'{prefix}/fmu/{direction}/{name}{suffix}'


def load_px4_msgs():
    """Return the px4_msgs message classes by name; ``ImportError`` when px4_msgs is not built."""
    module = importlib.import_module('px4_msgs.msg')
    return {**{name: getattr(module, name) for name in PX4_MESSAGE_TYPES},
            **{name: getattr(module, name) for name in PX4_OPTIONAL_TYPES
               if hasattr(module, name)}}


def active_failsafe_flags(msg):
    """Return the conditions set in a px4_msgs/FailsafeFlags (``battery_warning=N`` too)."""
    active = []
    for name, kind in msg.get_fields_and_field_types().items():
        value = getattr(msg, name)
        if kind == 'boolean' and value:
            active.append(name)
        elif name == 'battery_warning' and value:
            active.append(f'battery_warning={value}')
    return active


def check_px4_constants(px4_msgs):
    """
    Check the MAVLink numbers the sequencer uses against the built px4_msgs.

    Raises ``ValueError`` naming any number that px4_msgs defines differently (a px4_msgs of
    another PX4 release).
    """
    wrong = [f'{type_name}.{name} = {getattr(px4_msgs[type_name], name)} (expected {value})'
             for type_name, name, value in PX4_CONSTANTS
             if getattr(px4_msgs[type_name], name, value) != value]
    if wrong:
        raise ValueError('px4_msgs does not match this bridge: ' + ', '.join(wrong))


def fill_enu_odometry(msg, odom, stamp, covariances=None):
    """
    Write an :class:`~.frames.EnuOdometry` (full attitude) into a nav_msgs/Odometry.

    With ``covariances`` (pose, twist: 36 values each) when given.
    """
    pose, twist = msg.pose.pose, msg.twist.twist
    msg.header.stamp = stamp
    if covariances is not None:
        msg.pose.covariance, msg.twist.covariance = (c.tolist() for c in covariances)
    pose.position.x, pose.position.y, pose.position.z = odom.position.tolist()
    q = pose.orientation
    q.w, q.x, q.y, q.z = odom.orientation.tolist()
    twist.linear.x, twist.linear.y, twist.linear.z = odom.linear_velocity.tolist()
    twist.angular.x, twist.angular.y, twist.angular.z = odom.angular_velocity.tolist()


def px4_topics(px4_msgs, settings):
    """
    Return this bridge's PX4 topics (name -> topic) and their types (topic -> type name).

    Each under the vehicle's ``px4_namespace`` and, with ``message_version_suffix`` 'auto',
    its type's ``MESSAGE_VERSION``; the optional ones only when the built px4_msgs has them.
    """
    types = {}

    def topic(direction, name, type_name):
        version = getattr(px4_msgs[type_name], 'MESSAGE_VERSION', 0)
        full = px4_topic(settings.px4_namespace, direction, name,
                         version if settings.message_version_suffix == 'auto' else 0)
        types[full] = type_name
        return full

    topics = {
        'vehicle_odometry': topic('out', 'vehicle_odometry', 'VehicleOdometry'),
        'vehicle_status': topic('out', 'vehicle_status', 'VehicleStatus'),
        'vehicle_command_ack': topic('out', 'vehicle_command_ack', 'VehicleCommandAck'),
        'vehicle_command': topic('in', 'vehicle_command', 'VehicleCommand'),
        'offboard_control_mode': topic('in', 'offboard_control_mode', 'OffboardControlMode'),
        'trajectory_setpoint': topic('in', 'trajectory_setpoint', 'TrajectorySetpoint'),
    }
    for name, type_name in (('failsafe_flags', 'FailsafeFlags'),
                            ('vehicle_land_detected', 'VehicleLandDetected'),
                            ('vehicle_local_position', 'VehicleLocalPosition'),
                            ('battery_status', 'BatteryStatus')):
        if type_name in px4_msgs:
            topics[name] = topic('out', name, type_name)
    if settings.origin_source == 'gps' and 'vehicle_local_position' not in topics:
        raise ValueError("origin_source 'gps' needs px4_msgs' VehicleLocalPosition (the "
                         "estimator's global reference); this px4_msgs has none")
    return topics, types


class Px4BridgeNode(Node):
    """
    cmd_vel -> PX4 offboard velocity setpoints; PX4 vehicle_odometry -> odom.

    The shell: it converts messages and feeds the sequencer (:mod:`.offboard`), and wires its
    timers, subscriptions and services to it and to its collaborators (:mod:`.bridge_parts`,
    :mod:`.graph_watch`).
    """

    def __init__(self, px4_msgs, **kwargs):
        super().__init__('px4_bridge', **kwargs)
        self._msgs = px4_msgs
        check_px4_constants(px4_msgs)
        self._settings = declare_validated(self, PARAMS, BridgeSettings.from_mapping, self._apply)
        s = self._settings
        self._seq = OffboardSequencer(s.offboard, s.target_system)
        self._placement = s.placement()
        self._seq.origin_problem = self._placement.problem
        if s.area is not None:
            self._seq.area_watch = AreaWatch(s.area, s.offboard.outside_land_after)
        self._unplaced_since = None  # steady time of the first odometry without a placement
        # Random per process start: in ~/status, so that two bridges started with one name and
        # namespace (a launch started twice) are told apart.
        self.incarnation = new_incarnation()
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._clock_watch = ClockWatch(self, self._steady_now)
        vehicle = self.get_namespace().strip('/')
        child = s.child_frame_id or (f'{vehicle}/base_link' if vehicle else 'base_link')
        self._odom_msg = new_odometry(s.world_frame_id, child)
        self._motion = None  # (position, velocity) world ENU of the newest odometry
        self._motion_at = -math.inf  # steady time of it
        settings = self._current_settings
        self.topics, topic_types = px4_topics(px4_msgs, s)
        self._odom_pub = self.create_publisher(Odometry, 'odom', 10)
        command_pub = self.create_publisher(
            px4_msgs['VehicleCommand'], self.topics['vehicle_command'], PX4_IN_QOS)
        self._mode_pub = self.create_publisher(
            px4_msgs['OffboardControlMode'], self.topics['offboard_control_mode'], PX4_IN_QOS)
        self._setpoint_pub = self.create_publisher(
            px4_msgs['TrajectorySetpoint'], self.topics['trajectory_setpoint'], PX4_IN_QOS)
        self._out = SequencerOutput(self, px4_msgs['VehicleCommand'], command_pub, settings,
                                    self._stamp_us)
        self._subscribe_px4(px4_msgs)
        # Why this vehicle left the ring, for its agent (latched; '' = in the ring).
        self._failure_pub = self.create_publisher(String, VEHICLE_FAILURE_TOPIC,
                                                  VEHICLE_FAILURE_QOS)
        self._failure_sent = None
        # Other writers of this vehicle's setpoints (a twin of this bridge: its heartbeats and
        # its ~/status), and a px4_msgs of another message version.
        self._graph = GraphWatch(self, self._seq, self.topics, topic_types, self._steady_now,
                                 self.incarnation)
        self.create_subscription(px4_msgs['OffboardControlMode'],
                                 self.topics['offboard_control_mode'],
                                 self._graph.on_heartbeat_heard, PX4_OUT_QOS)
        self._status_out = BridgeStatus(self, self._seq, settings, self._placement,
                                        self._steady_now, self.incarnation)
        self.create_subscription(DiagnosticStatus, AGENT_STATUS_TOPIC, self._graph.on_own_status,
                                 10)
        # Its agent's ~/status: while the agent is silent, the bridge announces the vehicle's
        # presence on the swarm topic itself (px4.presence). Published RELIABLE: every
        # subscriber, reliable or best effort, hears it.
        try:
            namespace_id = id_from_namespace(self.get_namespace())
        except ValueError:
            namespace_id = None  # the agent's ~/status will say
        self._presence = PresenceAnnouncer(
            self, self._seq, settings, self._steady_now, namespace_id,
            create_swarm_publisher(self, Float64MultiArray, AGENT_STATES_TOPIC, RELIABLE),
            self._motion_sample)
        self.create_subscription(DiagnosticStatus, f'{AGENT_NODE_NAME}/status',
                                 self._presence.on_agent_status, 10)
        self.create_timer(PRESENCE_PERIOD, self._presence.announce, clock=self._steady)
        # The engage answer waits for PX4 while the timers keep running: its own group.
        for name, callback in (('~/engage', self._on_engage), ('~/land', self._on_land),
                               ('~/hold', self._on_hold)):
            self.create_service(Trigger, name, callback,
                                callback_group=MutuallyExclusiveCallbackGroup())
        self.create_timer(1.0 / s.setpoint_rate, self._publish_setpoint, clock=self._steady)
        self.create_timer(1.0 / s.heartbeat_rate, self._heartbeat, clock=self._steady)
        self.create_timer(GRAPH_PERIOD, self._graph.look_for_other_publishers,
                          clock=self._steady)
        self.create_timer(GRAPH_PERIOD, self._graph.look_for_other_versions, clock=self._steady)
        self.create_timer(STATUS_PERIOD, lambda: self._status_out.publish(force=True),
                          clock=self._steady)
        self.get_logger().info(
            f'bridging cmd_vel/odom to PX4 target_system {s.target_system} (as '
            f'{s.source_system}/{s.source_component}) on ' + ', '.join(self.topics.values())
            + f'; holding until {self.resolve_service_name("~/engage")} is called')

    def _subscribe_px4(self, px4_msgs):
        """Take cmd_vel and PX4's ``/fmu/out/`` topics (those this px4_msgs has) into the core."""
        now, seq = self._steady_now, self._seq
        self.create_subscription(Twist, 'cmd_vel', self._on_cmd_vel, 10)
        for name, type_name, callback in (
                ('vehicle_odometry', 'VehicleOdometry', self._on_odometry),
                ('vehicle_status', 'VehicleStatus', self._on_status),
                ('vehicle_command_ack', 'VehicleCommandAck', self._on_ack),
                ('failsafe_flags', 'FailsafeFlags',
                 lambda msg: seq.on_failsafe_flags(now(), active_failsafe_flags(msg))),
                ('vehicle_local_position', 'VehicleLocalPosition', self._on_local_position),
                ('battery_status', 'BatteryStatus',
                 lambda msg: seq.on_battery(now(), msg.remaining, msg.warning)),
                ('vehicle_land_detected', 'VehicleLandDetected',
                 lambda msg: seq.on_land_detected(now(), msg.landed))):
            if name in self.topics:
                self.create_subscription(px4_msgs[type_name], self.topics[name], callback,
                                         PX4_OUT_QOS)

    # ---- helpers ------------------------------------------------------------------------
    def _apply(self, settings):
        self._settings = settings
        self._seq.config = settings.offboard
        self._seq.target_system = settings.target_system

    def _current_settings(self):
        """Return the validated settings in force (a parameter change replaces them)."""
        return self._settings

    def _steady_now(self):
        """Steady-clock seconds: the sequencer's time, immune to /clock stalls."""
        return self._steady.now().nanoseconds * 1e-9

    def _stamp_us(self):
        """ROS time in microseconds: the timestamp field PX4 expects."""
        return self.get_clock().now().nanoseconds // 1000

    def _motion_sample(self):
        """(position, velocity, steady time) world ENU of the newest odometry, or None."""
        return None if self._motion is None else (*self._motion, self._motion_at)

    # ---- callbacks ----------------------------------------------------------------------
    def _on_cmd_vel(self, msg):
        reason = self._seq.on_cmd_vel(
            self._steady_now(), (msg.linear.x, msg.linear.y, msg.linear.z), msg.angular.z
        )
        if reason:
            self.get_logger().warning(reason, throttle_duration_sec=1.0)

    def _on_local_position(self, msg):
        """Place the vehicle from PX4's estimator reference (origin_source gps), or check it."""
        placement = self._placement
        lines = placement.on_reference(msg.xy_global and msg.z_global, msg.ref_lat, msg.ref_lon,
                                       msg.ref_alt, msg.ref_timestamp)
        problem = placement.problem
        for line in lines:
            if line == problem:
                self.get_logger().error(f'engage refused until fixed: {line}')
            else:
                self.get_logger().info(line)
        self._seq.origin_problem = problem
        if placement.moved > 0.0:
            self._seq.on_reference_change(self._steady_now(), placement.moved)

    def _on_odometry(self, msg):
        origin = self._placement.origin
        if origin is None:  # origin_source gps, no estimator reference yet: not placed
            now = self._steady_now()
            # PX4 publishes its reference right after its first odometry: warn only when it
            # stays missing longer than a status may be late.
            if self._unplaced_since is None:
                self._unplaced_since = now
            elif (self._unplaced_since is not math.inf
                  and now - self._unplaced_since > self._settings.offboard.status_timeout):
                self._unplaced_since = math.inf
                self.get_logger().warning(f'not publishing odom: {self._placement.problem}')
            self._seq.on_odometry(now)  # PX4 is heard all the same
            return
        try:
            odom = vehicle_odometry_to_enu(msg.pose_frame, msg.position, msg.q, msg.velocity_frame,
                                           msg.velocity, msg.angular_velocity, origin)
        except OdometryFrameError as error:
            self.get_logger().warning(
                f'dropping {self.topics["vehicle_odometry"]} sample: {error}',
                throttle_duration_sec=5.0)
            return
        now = self._steady_now()
        self._seq.on_odometry(now, odom.position, msg.reset_counter)
        # Held after a large estimator reset, the vehicle is where it was, not where the new
        # estimate says: the others and the safety area are told that, with its uncertainty.
        trusted, uncertainty = self._seq.trusted_position(now, odom.position)
        odom = dataclasses.replace(odom, position=trusted)
        # world ENU position and velocity: what the safety area limit of each setpoint reads
        self._motion = (odom.position, quat2mat(odom.orientation) @ odom.linear_velocity)
        self._motion_at = now
        stamp_ns = sample_stamp_ns(self.get_clock().now().nanoseconds, msg.timestamp,
                                   msg.timestamp_sample)
        covariances = odometry_covariances(msg.position_variance, msg.orientation_variance,
                                           msg.velocity_variance, msg.velocity_frame,
                                           odom.orientation)
        # After an estimator reset the vehicle may be as far as the jump from its estimate: the
        # pose covariance says so, and the agent broadcasts it (the others keep d_safe from it).
        covariances = (with_position_uncertainty(covariances[0], uncertainty), covariances[1])
        fill_enu_odometry(self._odom_msg, odom, rclpy.time.Time(nanoseconds=stamp_ns).to_msg(),
                          covariances)
        self._odom_pub.publish(self._odom_msg)

    def _on_status(self, msg):
        self._seq.on_status(self._steady_now(), msg.nav_state, msg.arming_state,
                            getattr(msg, 'system_id', None), getattr(msg, 'failsafe', False),
                            getattr(msg, 'pre_flight_checks_pass', None))

    def _on_ack(self, msg):
        s = self._settings
        self._seq.on_command_ack(self._steady_now(), msg.command, msg.result,
                                 msg.target_system, msg.target_component,
                                 source=(s.source_system, s.source_component))

    def _publish_setpoint(self):
        if not self._seq.streaming:
            return  # a landing PX4 did not confirm: its offboard-loss failsafe takes over
        setpoint = self._seq.setpoint(self._steady_now())
        if setpoint.warning:
            self.get_logger().warning(setpoint.warning)
        msg = self._msgs['TrajectorySetpoint']()
        msg.timestamp = self._stamp_us()
        nan3 = [math.nan] * 3
        msg.position, msg.acceleration, msg.jerk = nan3, nan3, nan3
        msg.velocity = [float(v) for v in self._inside(setpoint.velocity_ned)]
        msg.yaw = math.nan
        msg.yawspeed = float(setpoint.yawspeed)
        self._setpoint_pub.publish(msg)

    def _inside(self, velocity_ned):
        """
        Bound a setpoint so that the vehicle can stop inside the safety area (no area: as is).

        The agent bounds its commands already; the bridge bounds again at every setpoint with
        its newest odometry, because it flies a cmd_vel for up to cmd_timeout, and a late
        agent tick would otherwise carry the vehicle past the stop line.
        """
        area = self._settings.area
        if area is None or self._motion is None:
            return velocity_ned
        position, velocity = self._motion
        limited = limit_for_hold(ned_to_enu(velocity_ned), position, velocity, area,
                                 self._settings.t_safe, self._settings.a_safe,
                                 1.0 / self._settings.setpoint_rate)
        return enu_to_ned(limited)

    def _heartbeat(self):
        now = self._steady_now()
        if self._seq.streaming:
            msg = self._msgs['OffboardControlMode']()
            msg.timestamp = self._stamp_us()
            msg.velocity = True
            self._mode_pub.publish(msg)
            self._graph.heartbeat_sent()
        self._out.send(self._seq.tick(now))
        if self._seq.out_of_ring != self._failure_sent:
            self._failure_sent = self._seq.out_of_ring
            self._failure_pub.publish(String(data=self._failure_sent or ''))
        self._status_out.publish()
        self._clock_watch.check(now)

    async def _on_engage(self, request, response):
        """Start the engage sequence and answer once PX4 confirms it or it fails."""
        refusal = self._seq.request_engage(self._steady_now())
        return await self._out.answer_engage(refusal, response)

    async def _on_land(self, request, response):
        """Send NAV_LAND; answer once PX4 reports the vehicle landed and disarmed, or why not."""
        return await self._out.answer(self._out.land_futures, self._seq.request_land,
                                      self._steady_now(), response)

    async def _on_hold(self, request, response):
        """Switch PX4 to Hold at once; answer once PX4 reports Hold, or why not."""
        return await self._out.answer(self._out.hold_futures, self._seq.request_hold,
                                      self._steady_now(), response)


def main(args=None):
    argv = sys.argv if args is None else args
    if help_requested(argv):  # the usage needs no px4_msgs
        print(node_help(Path(argv[0]).name if argv else 'px4_bridge_node', Px4BridgeNode), end='')
        return 0
    try:
        px4_msgs = load_px4_msgs()
    except ImportError as error:
        print(PX4_MSGS_MISSING.format(error=error), file=sys.stderr)
        return 2
    # The engage service awaits PX4 in a coroutine: the SingleThreadedExecutor runs those.
    spin_node(functools.partial(Px4BridgeNode, px4_msgs), args,
              executor_class=SingleThreadedExecutor)
    return 0


if __name__ == '__main__':
    sys.exit(main())
