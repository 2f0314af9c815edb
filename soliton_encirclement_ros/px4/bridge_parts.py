"""
The bridge node's collaborators (rclpy): each one concern of :class:`~.bridge_node.Px4BridgeNode`.

:class:`SequencerOutput` carries what the sequencer decides out (vehicle commands to PX4, lines
to the log, outcomes to the waiting service calls); :class:`BridgeStatus` composes and publishes
``~/status``; :class:`PresenceAnnouncer` speaks for the vehicle while its agent is silent;
:class:`ClockWatch` names a ROS clock that stopped. The node creates them, wires its timers and
subscriptions to them, and hands them the sequencer and ``settings`` (a callable: the node's
validated settings, which a parameter change replaces).
"""
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from rclpy.task import Future

from soliton_encirclement_ros.core.controller import initial_state, presence_state
from soliton_encirclement_ros.core.identity import BRIDGE_INCARNATION
from soliton_encirclement_ros.interface import agent_state_to_msg
from soliton_encirclement_ros.nodes.diagnostics import StatusPublisher
from soliton_encirclement_ros.px4 import offboard
from soliton_encirclement_ros.px4.geo import text3
from soliton_encirclement_ros.px4.presence import AgentWatch

# The autopilot component of the vehicle (MAV_COMP_ID_AUTOPILOT1).
TARGET_COMPONENT = 1
CLOCK_STALL = 1.0  # s of steady time without the ROS clock advancing before a warning
STATUS_LEVELS = {offboard.OK: DiagnosticStatus.OK, offboard.WARN: DiagnosticStatus.WARN,
                 offboard.ERROR: DiagnosticStatus.ERROR}


class SequencerOutput:
    """Send a :class:`~.offboard.TickOutput`: commands, log lines, and request outcomes."""

    def __init__(self, node, command_msg, command_pub, settings, stamp_us):
        self._logger = node.get_logger()
        self._command_msg = command_msg   # px4_msgs/VehicleCommand
        self._command_pub = command_pub
        self._settings = settings
        self._stamp_us = stamp_us
        self.engage_future = None
        self.land_futures = []
        self.hold_futures = []

    def send(self, output):
        stamp_us = self._stamp_us()
        s = self._settings()
        for request in output.commands:
            msg = self._command_msg()
            msg.timestamp = stamp_us
            msg.command = request.command
            msg.param1, msg.param2 = float(request.param1), float(request.param2)
            msg.param3 = float(request.param3)
            msg.target_system = s.target_system
            msg.target_component = TARGET_COMPONENT
            msg.source_system = s.source_system
            msg.source_component = s.source_component
            msg.from_external = True
            self._command_pub.publish(msg)
        for line in output.info:
            self._logger.info(line)
        for line in output.warnings:
            self._logger.warning(line)
        if output.outcome is not None and self.engage_future is not None:
            self.engage_future.set_result(output.outcome)
            self.engage_future = None
        if output.land_outcome is not None:
            futures, self.land_futures = self.land_futures, []
            for future in futures:
                future.set_result(output.land_outcome)
        if output.hold_outcome is not None:
            futures, self.hold_futures = self.hold_futures, []
            for future in futures:
                future.set_result(output.hold_outcome)

    async def answer(self, futures, request, now, response):
        """Make a request of the sequencer; answer with its outcome when it comes."""
        future = Future()
        futures.append(future)
        self.send(request(now))
        outcome = await future
        response.success, response.message = outcome.success, outcome.message
        return response

    async def answer_engage(self, refusal, response):
        """Answer an engage: at once when refused, else once PX4 confirms it or it fails."""
        if refusal:
            self._logger.warning(f'engage refused: {refusal}')
            response.success, response.message = False, refusal
            return response
        self.engage_future = Future()
        outcome = await self.engage_future
        response.success, response.message = outcome.success, outcome.message
        return response


class BridgeStatus:
    """``~/status`` and ``/diagnostics``: the sequencer's status and what the bridge runs with."""

    def __init__(self, node, seq, settings, placement, steady_now, incarnation):
        self._node = node
        self._seq = seq
        self._settings = settings
        self._placement = placement
        self._steady_now = steady_now
        self._incarnation = incarnation
        self._publisher = StatusPublisher(node)  # ~/status and /diagnostics
        self._sent = None

    def publish(self, force=False):
        """Publish ``~/status`` and ``/diagnostics`` when it changed (or ``force``: 1 Hz)."""
        status = self._seq.status(self._steady_now())
        if not force and (status.level, status.message) == self._sent:
            return
        self._sent = (status.level, status.message)
        msg = DiagnosticStatus(level=STATUS_LEVELS[status.level],
                               name=self._node.get_fully_qualified_name(),
                               message=status.message)
        msg.values = [KeyValue(key=k, value=v) for k, v in status.values]
        msg.values.append(KeyValue(key='incarnation', value=str(self._incarnation)))
        # What this bridge was launched with, for fleet check to compare with the fleet file.
        s = self._settings()
        msg.values += [KeyValue(key='target_system', value=str(s.target_system)),
                       KeyValue(key='px4_namespace', value=s.px4_namespace),
                       KeyValue(key='geo_reference', value=','.join(
                           f'{c:.9g}' for c in s.geo_reference) if s.geo_reference else '')]
        origin = self._placement.origin
        msg.values += [KeyValue(key='origin_source', value=s.origin_source),
                       KeyValue(key='origin_enu', value='none' if origin is None
                                else text3(origin))]
        if self._seq.origin_problem:
            msg.values.append(KeyValue(key='origin_problem', value=self._seq.origin_problem))
        self._publisher.publish(msg)


class PresenceAnnouncer:
    """
    While its agent is silent, tell the others where this vehicle is (:mod:`.presence`).

    ``publisher`` is the swarm topic's; ``motion`` a callable returning (position, velocity,
    steady time) of the newest odometry in the world frame, or None.
    """

    def __init__(self, node, seq, settings, steady_now, namespace_id, publisher, motion):
        self._node = node
        self._seq = seq
        self._settings = settings
        self._steady_now = steady_now
        self._publisher = publisher
        self._motion = motion
        self._agent = AgentWatch(steady_now(), namespace_id)
        self._presence = initial_state(namespace_id or 0, BRIDGE_INCARNATION)

    def on_agent_status(self, msg):
        values = {kv.key: kv.value for kv in msg.values}
        agent_id = values.get('agent_id', '')
        self._agent.on_status(self._steady_now(), values.get('state', ''),
                              int(agent_id) if agent_id.isdigit() else None)

    def announce(self):
        now = self._steady_now()
        motion = self._motion()
        fresh = (motion is not None
                 and now - motion[2] <= self._settings().offboard.status_timeout)
        said = self._agent.update(now, self._seq.airborne(), fresh)
        logger = self._node.get_logger()
        if said.log and said.speak:
            logger.warning(said.log)
        elif said.log:
            logger.info(said.log)
        if not said.speak:
            return
        if self._presence.agent_id != self._agent.agent_id:
            self._presence = initial_state(self._agent.agent_id, BRIDGE_INCARNATION)
        position, velocity, _ = motion
        self._presence, broadcast = presence_state(
            self._presence, position, velocity, self._node.get_clock().now().nanoseconds * 1e-9,
            self._seq.position_uncertainty(now), landed=said.landed)
        self._publisher.publish(agent_state_to_msg(broadcast))


class ClockWatch:
    """Warn once when the ROS clock stops advancing (no /clock with use_sim_time)."""

    def __init__(self, node, steady_now):
        self._node = node
        self._seen = (node.get_clock().now().nanoseconds, steady_now())
        self._stalled = False

    def check(self, steady):
        node = self._node
        ros_ns = node.get_clock().now().nanoseconds
        if ros_ns != self._seen[0]:
            if self._stalled:
                node.get_logger().info('the ROS clock advances again')
            self._seen, self._stalled = (ros_ns, steady), False
        elif steady - self._seen[1] > CLOCK_STALL and not self._stalled:
            self._stalled = True
            sim = node.get_parameter('use_sim_time').value
            node.get_logger().warning(
                f'the ROS clock has not advanced for {steady - self._seen[1]:.1f} s'
                + (' (use_sim_time is true: is /clock published? Gazebo: bridge /clock with '
                   'ros_gz_bridge)' if sim else '')
                + '; the heartbeat keeps streaming on the steady clock, message timestamps '
                'are frozen')
