"""
target_node: the encircled target, simulated or following a tracked real target.

Simulated: a motion model (``core.target_motion``) gives the desired velocity and the target
moves through the same velocity mobility model as the UAVs. Tracked: ``follow_topic`` names an
external nav_msgs/Odometry whose pose and velocity are republished. Either way, every
``broadcast_period`` it publishes ``/target/odom`` (nav_msgs/Odometry) and ``/target/state``
(position, velocity, optional spin reference ``omega_ref`` and per-agent spacing weights).
"""
from __future__ import annotations

from nav_msgs.msg import Odometry
import numpy as np
from rclpy.node import Node
from rclpy.time import Time
from std_msgs.msg import Float64MultiArray

from ros_support.publishing import Publishing
from ros_support.ros_parameters import declare, specs_of
from ros_support.spin import spin_node
from soliton_encirclement_ros.core.controller import future_stamp_reason
from soliton_encirclement_ros.core.target_estimate import estimate_acceleration
from soliton_encirclement_ros.interface import (
    TARGET_ODOM_TOPIC, target_state_to_msg, TARGET_STATE_TOPIC)
from soliton_encirclement_ros.nodes.settings import TargetSettings
from soliton_encirclement_ros.nodes.swarm_topics import create_swarm_publisher
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams
from velocity_mobility_ros.nodes.messages import odometry_to_arrays, to_odometry

SPECS = specs_of(TargetSettings, read_only=True)
PARAMETERS = tuple(SPECS)  # everything target_node declares (docs/reference/parameters.md)


class TargetNode(Node):
    """Every parameter is read-only: the motion model is built once at start-up."""

    def __init__(self, **kwargs) -> None:
        super().__init__('target', **kwargs)
        settings = TargetSettings.from_mapping(declare(self, SPECS))
        self._lambdas = settings.lambdas
        self._estimate = None  # the acceleration broadcast, from the velocities broadcast
        self._omega_ref = settings.omega_ref
        self._frame = settings.world_frame
        self._vehicle = VehicleParams(sim_dt=settings.sim_dt)
        # absolute, as /target/state: the recorder and analyze_run read /target/odom wherever
        # the node runs (``ros2 run`` on a ground station gives it no namespace)
        self._publish = Publishing(self.get_logger())  # drops a sample the middleware refuses
        self._odom_pub = self.create_publisher(Odometry, TARGET_ODOM_TOPIC, 10)
        self._state_pub = create_swarm_publisher(self, Float64MultiArray, TARGET_STATE_TOPIC,
                                                 settings.swarm_reliability)
        self._tracked = None  # (stamp_ns, (position, velocity, yaw)) of the tracked target
        self._follow_topic = settings.follow_topic
        self._follow_timeout_ns = int(settings.follow_timeout * 1e9)
        self._max_future_ns = int(settings.max_future_stamp * 1e9)
        self._settings = settings
        self._started_ns = None  # first tick: a track is due follow_timeout after it
        self._lost_said = False  # this episode without a fresh track was logged
        if settings.follow_topic:
            self._motion = None
            self.create_subscription(Odometry, settings.follow_topic, self._on_tracked, 10)
        else:
            self._motion = settings.target_model()
            self._vehicle_state = VehicleState.at_rest(np.reshape(settings.start(), (1, 3)))
            self._sim_time = None
        self.create_timer(settings.broadcast_period, self._on_tick)

    def _on_tracked(self, msg: Odometry) -> None:
        try:
            stamp_ns = Time.from_msg(msg.header.stamp).nanoseconds
            track = odometry_to_arrays(msg)
        except ValueError as error:
            self.get_logger().warning(
                f'ignoring tracked target odometry: {error}', throttle_duration_sec=5.0
            )
            return
        # The agents' rule for their inputs (TargetSettings.max_future_stamp is defined by
        # ControllerParams' field): a stamp from a clock running ahead is not cached, or a
        # frozen track would look fresh for that long after it stopped.
        reason = future_stamp_reason('tracked target', stamp_ns * 1e-9,
                                     self.get_clock().now().nanoseconds * 1e-9, self._settings)
        if reason:
            self.get_logger().warning(reason, throttle_duration_sec=5.0)
            return
        self._tracked = (stamp_ns, track)

    def _track_problem(self, now_ns: int) -> str | None:
        """Why the track cannot be broadcast at ``now_ns`` (None: it is fresh)."""
        if self._tracked is None:
            waited_ns = now_ns - self._started_ns
            if waited_ns <= self._follow_timeout_ns:
                return ''  # starting: not broadcasting yet, nothing to say
            publishers = self.count_publishers(self.resolve_topic_name(self._follow_topic))
            return (f'no tracked target odometry on {self._follow_topic} within follow_timeout '
                    f'{self._follow_timeout_ns * 1e-9:g} s of start ({publishers} publisher(s); '
                    'is follow_topic right?)')
        age_ns = now_ns - self._tracked[0]
        if age_ns > self._follow_timeout_ns:
            return (f'tracked target odometry is {age_ns * 1e-9:.2f} s old (follow_timeout '
                    f'{self._follow_timeout_ns * 1e-9:g} s)')
        if -age_ns > self._max_future_ns:
            return (f'tracked target odometry is stamped {-age_ns * 1e-9:.2f} s ahead of this '
                    f'clock (max_future_stamp {self._max_future_ns * 1e-9:g} s; did the clock '
                    'step back?)')
        return None

    def _fresh_track(self, now_ns: int):
        """(position, velocity, yaw) of a fresh track, else None (the episode logged once)."""
        if self._started_ns is None:
            self._started_ns = now_ns
        problem = self._track_problem(now_ns)
        if problem and not self._lost_said:
            self._lost_said = True
            self.get_logger().warning(
                f'{problem}: not broadcasting the target until the track is fresh')
        elif problem is None and self._lost_said:
            self._lost_said = False
            self.get_logger().info('target track fresh again: broadcasting')
        return None if problem is not None else self._tracked[1]

    def _on_tick(self) -> None:
        now = self.get_clock().now()
        if self._motion is None:
            track = self._fresh_track(now.nanoseconds)
            if track is None:
                return
            position, velocity, yaw = track
        else:
            self._simulate(now.nanoseconds * 1e-9)
            state = self._vehicle_state
            position, velocity, yaw = state.position[0], state.velocity[0], float(state.yaw[0])
        stamp = now.to_msg()
        self._publish(
            self._odom_pub,
            to_odometry(position, velocity, yaw, stamp, self._frame, 'target/base_link')
        )
        self._estimate = estimate_acceleration(self._estimate, now.nanoseconds * 1e-9, velocity)
        self._publish(self._state_pub, target_state_to_msg(
            now.nanoseconds, position, velocity, self._omega_ref, self._lambdas,
            self._estimate.acceleration))

    def _simulate(self, now: float) -> None:
        """Advance the simulated target to ``now`` in sim_dt steps (the first tick starts it)."""
        if self._sim_time is None:
            self._sim_time = now
        dt = self._vehicle.sim_dt
        while self._sim_time + 0.5 * dt < now:
            state = self._vehicle_state
            v_des = self._motion.desired_velocity(self._sim_time, state.position[0])
            self._vehicle_state = step(state, np.reshape(v_des, (1, 3)), self._vehicle)
            self._sim_time += dt


def main(args=None) -> None:
    spin_node(TargetNode, args)


if __name__ == '__main__':
    main()
