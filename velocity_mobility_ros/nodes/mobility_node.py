"""
``mobility_node``: one simulated vehicle driven by ``cmd_vel``, publishing ``odom``.

:class:`MobilityNodeBase` is the shared ROS shell of the mobility nodes: it owns the vehicle
parameters, one timer at ``sim_dt`` on the node clock (so ``use_sim_time`` + ``/clock`` drive
it) that steps the vectorised core for all its vehicles, the per-vehicle command subscriptions,
the command timeout and the odometry publishers. Subclasses only say which vehicles exist
(:class:`MobilityNode` one, ``SwarmMobilityNode`` many).

Where ``tf2_msgs`` imports (every ROS install), each odometry publication also goes out as one
``tf2_msgs/TFMessage`` on ``/tf`` holding every vehicle's ``world -> <name>/base_link``, so
RViz's TF display and tf2 lookups work; pip-only machines (tf2 has no wheel) skip it with one
info line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from geometry_msgs.msg import Twist, TwistStamped
from nav_msgs.msg import Odometry
import numpy as np
from rclpy.clock import Clock, ClockType
from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSProfile, QoSReliabilityPolicy
from rclpy.time import Time
from rosgraph_msgs.msg import Clock as RosClock
from std_msgs.msg import MultiArrayDimension, UInt32MultiArray

from ros_support.participants import listening_nodes
from ros_support.publishing import Publishing
from ros_support.ros_parameters import declare, declare_validated, ParamSpec, specs_of
from ros_support.spin import spin_node
from ros_support.topics import CLOCK_TOPIC
from ros_support.validation import from_mapping
from velocity_mobility_ros.core.commands import CommandBuffer
from velocity_mobility_ros.core.geometry import body_to_world
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import (
    ClockSettings, InterfaceParams, PoseSettings, split_node_params, VehicleParams)
from velocity_mobility_ros.nodes.messages import (
    fill_odometry, new_odometry, transforms_of, write_twist)

SIM_QOS = QoSProfile(depth=10, reliability=QoSReliabilityPolicy.RELIABLE)
# Late joiners (e.g. `ros2 topic echo`) still get the current rejected-command counts.
COUNTER_QOS = QoSProfile(depth=1, reliability=QoSReliabilityPolicy.RELIABLE,
                         durability=QoSDurabilityPolicy.TRANSIENT_LOCAL)


# Parameters common to mobility_node and swarm_mobility_node, one per VehicleParams and
# InterfaceParams field (description, unit, range from the core); their names are a stable API.
MOBILITY_PARAMS: tuple[ParamSpec, ...] = (*specs_of(VehicleParams), *specs_of(InterfaceParams))

# Only for the node that is the simulation's clock (swarm_sim --processes, swarm_sim.launch.py).
CLOCK_PARAMS = tuple(specs_of(ClockSettings))
# A clock jump of more than this many steps is not integrated: one warning, then a reset.
MAX_CATCH_UP_STEPS = 100
NAMES_LOGGED = 5  # vehicles named in one log line, then 'and N more'
TF_TOPIC = '/tf'
TF_QOS = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)  # tf2's own


@dataclass(frozen=True)
class VehicleIO:
    """Where one simulated vehicle talks: its name (for logs), topics and body frame."""

    name: str
    cmd_topic: str
    odom_topic: str
    child_frame_id: str


class MobilityNodeBase(Node):
    """Simulates the vehicles a subclass lists, stepping all of them on one timer."""

    def __init__(self, node_name: str, **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)
        self._vehicle, self._interface = declare_validated(
            self, MOBILITY_PARAMS, split_node_params, self._apply_params)
        vehicles, state = self._declare_vehicles()
        n = len(vehicles)
        self._names = [v.name for v in vehicles]
        self._state = state
        self._decimation = self._interface.odom_decimation(self._vehicle.sim_dt)
        self._steps = 0
        # Commands (world or body frame, as cmd_frame says), their timing and timeout.
        self._commands = CommandBuffer(n)

        msg_type = TwistStamped if self._interface.cmd_vel_stamped else Twist
        self._cmd_subs = [
            self.create_subscription(
                msg_type, v.cmd_topic, self._command_callback(i), SIM_QOS,
                event_callbacks=SubscriptionEventCallbacks(
                    incompatible_type=self._incompatible_type_callback(v.cmd_topic, msg_type)))
            for i, v in enumerate(vehicles)]
        self._last_step_ns = None   # this node's own sim time (node clock mode)
        self._publish = Publishing(self.get_logger())  # drops a sample the middleware refuses
        self._jump_warned = False
        self._odom_pubs = [self.create_publisher(Odometry, v.odom_topic, SIM_QOS)
                           for v in vehicles]
        self._odom_msgs = [new_odometry(self._interface.world_frame, v.child_frame_id)
                           for v in vehicles]
        self._tf_pub = self._create_tf_publisher()
        self._rejected_pub = self.create_publisher(
            UInt32MultiArray, '~/rejected_commands', COUNTER_QOS)
        self._publish_rejected()
        clock = from_mapping(ClockSettings, declare(self, CLOCK_PARAMS))
        self._clock_pub = None
        self._clock_waits_for = clock.clock_subscribers
        if clock.publish_clock:
            # This node is the simulation's clock: it steps on wall time, paced by
            # real_time_factor, and publishes the sim time it has reached on /clock.
            self._clock_pub = self.create_publisher(RosClock, CLOCK_TOPIC, 10)
            self._sim_time_ns = 0
            self._timer = self.create_timer(
                self._vehicle.sim_dt / clock.real_time_factor, self._tick,
                clock=Clock(clock_type=ClockType.STEADY_TIME))
        else:
            self._timer = self.create_timer(self._vehicle.sim_dt, self._tick)
        self.get_logger().info(
            f'simulating {n} vehicle(s) at sim_dt {self._vehicle.sim_dt} s, odometry every '
            f'{self._decimation} step(s)')

    def _declare_vehicles(self) -> tuple[list[VehicleIO], VehicleState]:
        """Declare the subclass's own parameters; return its vehicles and their initial state."""
        raise NotImplementedError

    def _create_tf_publisher(self):
        """Return the ``/tf`` publisher, or None (one info line) where tf2_msgs is missing."""
        try:
            from tf2_msgs.msg import TFMessage
        except ImportError:
            self.get_logger().info(f'not publishing {TF_TOPIC}: tf2_msgs is not installed (tf2 '
                                   'has no pip wheel); odometry carries the same poses')
            return None
        self._tf_message = TFMessage
        return self.create_publisher(TFMessage, TF_TOPIC, TF_QOS)

    @property
    def state(self) -> VehicleState:
        """Return the current simulated state of all vehicles (read-only use)."""
        return self._state

    @property
    def steps(self) -> int:
        """Return the simulation steps taken since start."""
        return self._steps

    @property
    def command_velocity(self) -> np.ndarray:
        """
        Newest valid linear commands (N, 3), in the cmd_frame (in force from the next step).

        Zeros after a timeout.
        """
        return self._commands.newest_linear

    @property
    def rejected_commands(self) -> np.ndarray:
        """Rejected (non-finite) commands per vehicle, in vehicle order."""
        return self._commands.rejected.copy()

    def _apply_params(self, settings: tuple[VehicleParams, InterfaceParams]) -> None:
        self._vehicle, self._interface = settings
        self._decimation = self._interface.odom_decimation(self._vehicle.sim_dt)
        for msg in self._odom_msgs:
            msg.header.frame_id = self._interface.world_frame

    def _incompatible_type_callback(self, topic: str, msg_type: type) -> Callable:
        def warn(event) -> None:
            offered = sorted({info.topic_type for info in self.get_publishers_info_by_topic(
                self.resolve_topic_name(topic))})
            self.get_logger().warning(
                f'{self.resolve_topic_name(topic)}: a publisher of another type ('
                f'{", ".join(offered) or "unknown"}) will never reach this '
                f'{msg_type.__name__} subscription'
                + ('' if msg_type is TwistStamped else '; set cmd_vel_stamped: true for '
                   'TwistStamped'))
        return warn

    def _command_callback(self, index: int) -> Callable[[Twist | TwistStamped], None]:
        linear, angular = np.zeros(3), np.zeros(3)

        def on_command(msg: Twist | TwistStamped) -> None:
            try:
                write_twist(msg, linear, angular)
            except ValueError as error:
                count = self._commands.reject(index)
                self._publish_rejected()
                self.get_logger().warning(
                    f'{self._names[index]}: rejected cmd_vel ({error}); the last valid command '
                    f'stays in force ({count} rejected so far)', throttle_duration_sec=1.0)
                return
            if self._commands.receive(index, linear, angular, self._now().nanoseconds):
                self.get_logger().info(f'{self._names[index]}: cmd_vel resumed')
        return on_command

    def _now(self) -> Time:
        """
        Return the simulation time.

        This node's own when it publishes the clock, else the node's.
        """
        if self._clock_pub is not None:
            return Time(nanoseconds=self._sim_time_ns, clock_type=ClockType.ROS_TIME)
        return self.get_clock().now()

    def _publish_rejected(self) -> None:
        msg = UInt32MultiArray()
        msg.layout.dim = [MultiArrayDimension(
            label='vehicle', size=len(self._names), stride=len(self._names))]
        msg.data = self._commands.rejected.tolist()
        self._publish(self._rejected_pub, msg)

    def _tick(self) -> None:
        if self._clock_pub is not None:
            if not self._clock_ready():
                return
            self._sim_time_ns += round(self._vehicle.sim_dt * 1e9)
            self._publish(self._clock_pub, RosClock(clock=self._now().to_msg()))
            self._step_to(self._sim_time_ns, 1)
            return
        now_ns = self._now().nanoseconds
        self._step_to(now_ns, self._steps_due(now_ns))

    def _clock_ready(self) -> bool:
        """Start the clock once ``clock_subscribers`` other nodes subscribe to it (logged)."""
        if self._clock_waits_for <= 0:
            return True
        if listening_nodes(self, self._clock_pub) < self._clock_waits_for:
            if not getattr(self, '_clock_wait_logged', False):
                self._clock_wait_logged = True
                self.get_logger().info(
                    f'holding /clock at 0 until {self._clock_waits_for} nodes subscribe to it')
            return False
        self._clock_waits_for = 0
        return True

    def _steps_due(self, now_ns: int) -> int:
        """
        Count the steps to take at this timer callback.

        One, plus the steps the clock has run ahead of this node's own sim time (a jump of k
        sim_dt: an external /clock, a bag replay, load). Timer callbacks that are merely early or
        late by less than half a step take exactly one step, so lock-stepped runs are unchanged. A
        jump beyond MAX_CATCH_UP_STEPS is not integrated: one warning, and the node's time resets
        to the clock.
        """
        dt_ns = round(self._vehicle.sim_dt * 1e9)
        if self._last_step_ns is None:
            self._last_step_ns = now_ns
            return 1
        self._last_step_ns += dt_ns
        behind = now_ns - self._last_step_ns
        if behind < -dt_ns:  # the clock stepped back: resume from its new time
            self._last_step_ns = now_ns
            return 1
        if behind <= dt_ns // 2:
            return 1
        extra = round(behind / dt_ns)
        if extra > MAX_CATCH_UP_STEPS:
            if not self._jump_warned:
                self._jump_warned = True
                self.get_logger().warning(
                    f'the clock jumped {behind * 1e-9:.3f} s ahead (more than '
                    f'{MAX_CATCH_UP_STEPS} steps of sim_dt): not integrating the jump, resuming '
                    'from now')
            self._last_step_ns = now_ns
            return 1
        self._last_step_ns += extra * dt_ns
        return 1 + extra

    def _log_step_back(self, back_ns: int, dropped) -> None:
        """One warning per step back of the clock, naming the vehicles whose command it dropped."""
        names = ', '.join(self._names[i] for i in dropped[:NAMES_LOGGED])
        if len(dropped) > NAMES_LOGGED:
            names += f' and {len(dropped) - NAMES_LOGGED} more'
        self.get_logger().warning(
            f'the clock stepped back {back_ns * 1e-9:.3f} s'
            + (f': dropped the command heard before the step ({names}); braking to a hover '
               'until cmd_vel resumes' if names else ''))

    def _step_to(self, now_ns: int, steps: int) -> None:
        """Take ``steps`` steps of sim_dt ending at ``now_ns``; odometry stamped ``now_ns``."""
        if steps <= 0:
            return
        dt_ns = round(self._vehicle.sim_dt * 1e9)
        odometry_due = False
        for k in range(steps - 1, -1, -1):
            t_ns = now_ns - k * dt_ns
            commands = self._commands
            expired = commands.advance(t_ns, int(self._interface.cmd_timeout * 1e9))
            if commands.stepped_back_ns:
                self._log_step_back(commands.stepped_back_ns, expired)
            for index in () if commands.stepped_back_ns else expired:
                self.get_logger().warning(
                    f'{self._names[index]}: no valid cmd_vel for {self._interface.cmd_timeout} '
                    's; braking to a hover')
            v_des = commands.linear
            if self._interface.cmd_frame == 'body':
                v_des = body_to_world(v_des, self._state.yaw)
            self._state = step(self._state, v_des, self._vehicle, commands.angular[:, 2])
            self._steps += 1
            odometry_due |= self._steps % self._decimation == 0
        if odometry_due:
            state = self._state
            fill_odometry(self._odom_msgs, state.position, state.velocity, state.yaw,
                          Time(nanoseconds=now_ns, clock_type=ClockType.ROS_TIME).to_msg(),
                          state.yaw_rate)
            for pub, msg in zip(self._odom_pubs, self._odom_msgs):
                self._publish(pub, msg)
            if self._tf_pub is not None:  # every vehicle in one message
                self._publish(self._tf_pub,
                              self._tf_message(transforms=transforms_of(self._odom_msgs)))


def _frame_prefix(namespace: str) -> str:
    stripped = namespace.strip('/')
    return f'{stripped}/' if stripped else ''


class MobilityNode(MobilityNodeBase):
    """One vehicle: relative topics ``cmd_vel``/``odom``, child frame ``<ns>/base_link``."""

    POSE_PARAMS = tuple(specs_of(PoseSettings))

    def __init__(self, node_name: str = 'mobility', **node_kwargs: Any) -> None:
        super().__init__(node_name, **node_kwargs)

    def _declare_vehicles(self) -> tuple[list[VehicleIO], VehicleState]:
        pose = from_mapping(PoseSettings, declare(self, self.POSE_PARAMS))
        name = self.get_namespace().strip('/') or self.get_name()
        io = VehicleIO(name, 'cmd_vel', 'odom',
                       f'{_frame_prefix(self.get_namespace())}base_link')
        return [io], VehicleState.at_rest([pose.initial_position], [pose.initial_yaw])


def main(args: list[str] | None = None) -> None:
    spin_node(MobilityNode, args)


# Everything mobility_node declares, in order (its table in docs/reference/parameters.md).
PARAMETERS = (*MOBILITY_PARAMS, *MobilityNode.POSE_PARAMS, *CLOCK_PARAMS)


if __name__ == '__main__':
    main()
