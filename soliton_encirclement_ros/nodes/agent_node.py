"""agent_node: one UAV's soliton encirclement controller, a thin shell over ``core.controller``.

Subscribes to its own ``odom``, the target's ``/target/state`` and the swarm's
``/swarm/agent_states``; every ``control_period`` it broadcasts its own state and publishes
``cmd_vel`` (world-frame Twist). Messages take effect at the first control tick after the one
they arrived in (the reference's "delivered on the next tick"), so a lock-stepped simulation
gives the same result whatever order the executor runs callbacks in.
"""
from __future__ import annotations

import dataclasses
from collections import deque

import rclpy
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import QoSProfile
from std_msgs.msg import Float64MultiArray
from std_srvs.srv import SetBool

from velocity_mobility_ros.messages import odometry_to_arrays
from velocity_mobility_ros.ros_params import ParamSpec, declare, declare_validated

from ..core.comms import ImpairedChannel
from ..core.controller import (AgentStateMsg, control_step, initial_state, outgoing_state,
                               receive_agent_state, receive_target_state)
from ..core.faults import OutageProcess
from ..core.params import ControllerParams
from ..messages import agent_state_from_msg, agent_state_to_msg, target_state_from_msg
from velocity_mobility_ros.spin import spin_node

SWARM_TOPIC = '/swarm/agent_states'
TARGET_TOPIC = '/target/state'
# Messages that arrived within this much of the current tick wait for the next tick.
THIS_TICK = 1e-6
# Deep enough that a lock-stepped simulation never drops a state within one tick.
SWARM_QOS = QoSProfile(depth=1000)

CONTROLLER_DESCRIPTIONS = {f.name: f.metadata.get('description', f.name.replace('_', ' '))
                           for f in dataclasses.fields(ControllerParams)}


def controller_specs() -> list[ParamSpec]:
    """One parameter per ControllerParams field, default and lower bound from the core."""
    defaults = ControllerParams()
    return [ParamSpec(f.name, getattr(defaults, f.name), CONTROLLER_DESCRIPTIONS[f.name],
                      min=None if isinstance(getattr(defaults, f.name), bool) else 0.0)
            for f in dataclasses.fields(ControllerParams)]


NODE_SPECS = [
    ParamSpec('agent_id', 0, 'integer id of this agent in the swarm (0 = digits of the namespace)', min=0, max=1_000_000),
    ParamSpec('failures_per_min', 0.0, 'Poisson failure rate of injected outages [1/min]; 0 disables', min=0.0),
    ParamSpec('failure_off_time', 8.0, 'duration of an injected outage [s]', min=0.0),
    ParamSpec('failure_check_period', 0.1, 'period of the failure draw [s]', min=1e-3),
    ParamSpec('loss', 0.0, 'probability of dropping a received swarm/target message', min=0.0, max=0.999),
    ParamSpec('delay', 0.0, 'extra delay applied to received swarm/target messages [s]', min=0.0),
    ParamSpec('seed', 0, 'swarm seed of the failure and impairment draws (combined with agent_id)', min=0, max=2**31 - 1),
]


class AgentNode(Node):
    """``subscribe_swarm=False`` leaves the swarm topic to a caller that decodes each state once
    and hands it to :meth:`receive_agent_state` (the in-process runner's shared subscription)."""

    def __init__(self, subscribe_swarm: bool = True, **kwargs) -> None:
        super().__init__('agent', **kwargs)
        self._params = declare_validated(self, controller_specs(), ControllerParams.from_mapping,
                                         self._set_params)
        config = declare(self, NODE_SPECS)
        self.agent_id = config['agent_id'] or _id_from_namespace(self.get_namespace())
        self._outage = OutageProcess(config['failures_per_min'], config['failure_off_time'],
                                     config['failure_check_period'], config['seed'], self.agent_id)
        self._channel = ImpairedChannel(config['loss'], config['delay'], config['seed'], self.agent_id)
        self._state = initial_state(self.agent_id)
        self._odometry: deque = deque(maxlen=8)  # (stamp_ns, position, velocity)
        self._failed = False
        self._manual_failure_until_ns = -1

        self._cmd_pub = self.create_publisher(Twist, 'cmd_vel', 10)
        self._state_pub = self.create_publisher(Float64MultiArray, SWARM_TOPIC, SWARM_QOS)
        self.create_subscription(Odometry, 'odom', self._on_odometry, 10)
        if subscribe_swarm:
            self.create_subscription(Float64MultiArray, SWARM_TOPIC, self._on_agent_state, SWARM_QOS)
        self.create_subscription(Float64MultiArray, TARGET_TOPIC, self._on_target_state, 10)
        self.create_service(SetBool, '~/inject_failure', self._on_inject_failure)
        self._timer = self.create_timer(self._params.control_period, self._on_tick)

    # --- inputs -----------------------------------------------------------------------------
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_odometry(self, msg: Odometry) -> None:
        try:
            position, velocity, _ = odometry_to_arrays(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring odometry: {error}', throttle_duration_sec=5.0)
            return
        stamp = rclpy.time.Time.from_msg(msg.header.stamp).nanoseconds
        self._odometry.append((stamp, position, velocity))

    def _on_agent_state(self, msg: Float64MultiArray) -> None:
        try:
            state = agent_state_from_msg(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring agent state: {error}', throttle_duration_sec=5.0)
            return
        self.receive_agent_state(state)

    def receive_agent_state(self, state: AgentStateMsg) -> None:
        if not self._failed and state.agent_id != self.agent_id:
            self._channel.receive(('agent', state), self._now_ns() * 1e-9)

    def _on_target_state(self, msg: Float64MultiArray) -> None:
        if self._failed:
            return
        try:
            state = target_state_from_msg(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring target state: {error}', throttle_duration_sec=5.0)
            return
        self._channel.receive(('target', state), self._now_ns() * 1e-9)

    def _on_inject_failure(self, request: SetBool.Request, response: SetBool.Response):
        now_ns = self._now_ns()
        if request.data:
            self._manual_failure_until_ns = now_ns + int(self._outage.off_time * 1e9)
            response.message = f'agent {self.agent_id} failed for {self._outage.off_time:g} s'
        else:
            self._manual_failure_until_ns = -1
            response.message = f'agent {self.agent_id} recovered'
        response.success = True
        self.get_logger().info(response.message)
        return response

    def _set_params(self, params: ControllerParams) -> None:
        if params.control_period != self._params.control_period:
            self._timer.cancel()
            self._timer = self.create_timer(params.control_period, self._on_tick)
        self._params = params

    # --- control tick -------------------------------------------------------------------------
    def _on_tick(self) -> None:
        now_ns = self._now_ns()
        now = now_ns * 1e-9
        failed = self._outage.update(now) or now_ns < self._manual_failure_until_ns
        if failed != self._failed:
            self._on_failure_change(failed)
        if failed:
            return
        for (kind, message), rx_time in self._channel.due(now - THIS_TICK):
            if kind == 'agent':
                self._state = receive_agent_state(self._state, message, rx_time)
            else:
                self._state = receive_target_state(self._state, message, rx_time)
        odometry = self._latest_odometry_before(now_ns)
        if odometry is None:
            return
        _, position, velocity = odometry
        broadcast = outgoing_state(self._state, position, velocity, now)
        self._state_pub.publish(agent_state_to_msg(broadcast))
        self._state, command = control_step(self._state, position, velocity, now, self._params)
        twist = Twist()
        twist.linear.x, twist.linear.y, twist.linear.z = (float(c) for c in command)
        self._cmd_pub.publish(twist)

    def _latest_odometry_before(self, now_ns: int):
        """Newest odometry stamped strictly before now (else the newest): order-independent."""
        earlier = [entry for entry in self._odometry if entry[0] < now_ns]
        if earlier:
            return earlier[-1]
        return self._odometry[-1] if self._odometry else None

    def _on_failure_change(self, failed: bool) -> None:
        self._failed = failed
        if failed:
            self._cmd_pub.publish(Twist())
            self._channel.due(float('inf'))  # drop what is in flight: a failed agent hears nothing
            self.get_logger().warning(f'agent {self.agent_id}: failure injected, commanding zero and going silent')
        else:
            self._state = initial_state(self.agent_id)
            self.get_logger().info(f'agent {self.agent_id}: recovered, resuming control')

    @property
    def failed(self) -> bool:
        return self._failed


def _id_from_namespace(namespace: str) -> int:
    digits = ''.join(ch for ch in namespace.rsplit('/', 1)[-1] if ch.isdigit())
    if not digits:
        raise ValueError(f'agent_id is 0 and namespace {namespace!r} has no digits to derive it from')
    return int(digits)


def main(args=None) -> None:
    spin_node(AgentNode, args)
