"""
agent_node: one UAV's soliton encirclement controller, a thin shell over ``core.controller``.

Subscribes to its own ``odom``, the target's ``/target/state`` and the swarm's
``/swarm/agent_states``; every ``control_period`` it broadcasts its own state and publishes
``cmd_vel`` (world-frame Twist). Messages take effect at the first control tick after the one
they arrived in (the reference's "delivered on the next tick"), so a lock-stepped simulation
gives the same result whatever order the executor runs callbacks in.

Fail-safe (decided by ``core.controller.agent_tick``, reported here): odometry older than
``odom_timeout`` makes the agent blind (silent on the swarm topic, zero velocity); a target
unheard for ``target_timeout`` gives zero velocity; states stamped more than
``max_future_stamp`` ahead are rejected as states (the warning names the sender) but kept as
its vehicle's presence, aged from their receipt; an id heard from two incarnations is an error. An
injected failure takes the controller out (``core.controller.failed_tick``): zero velocity
once, out of the ring, broadcasting only its vehicle's presence (``member`` 0); it still
listens, so that back in the ring it knows every vehicle, one that fell silent meanwhile too. Each
episode is logged once and ``~/status`` (diagnostic_msgs/DiagnosticStatus) and ``/diagnostics``
say why, on change and at 1 Hz (an id heard from two incarnations makes the status an ERROR).
"""
from __future__ import annotations

from collections import deque
import dataclasses
import time

from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
import numpy as np
import rclpy
from rclpy.node import Node
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import SetBool

from ros_support.number_text import fixed
from ros_support.publishing import Publishing
from ros_support.ros_parameters import current_values, declare, declare_validated, specs_of
from ros_support.spin import spin_node
from soliton_encirclement_ros.core.area import AreaWatch, limit_clear
from soliton_encirclement_ros.core.comms import ImpairedChannel
from soliton_encirclement_ros.core.controller import (
    agent_tick, AgentBroadcast, AgentStates, ahead_as_presence, BLIND, FAILED, failed_tick,
    future_stamp_reason, initial_state, known_vehicles, OK, receive_states, STARTING, Status,
    TARGET_LOST, TargetBroadcast)
from soliton_encirclement_ros.core.faults import OutageProcess
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.identity import (
    BRIDGE_INCARNATION, DuplicateIds, id_from_namespace, new_incarnation)
from soliton_encirclement_ros.core.links import LinkMonitor, offset_summary, offset_warning
from soliton_encirclement_ros.interface import (
    AGENT_CMD_TOPIC, AGENT_NODE_NAME, AGENT_ODOM_TOPIC, agent_state_from_msg, agent_state_to_msg,
    AGENT_STATES_TOPIC, OPERATOR_REQUEST, target_state_from_msg, TARGET_STATE_TOPIC,
    VEHICLE_FAILURE_TOPIC)
from soliton_encirclement_ros.nodes.diagnostics import StatusPublisher
from soliton_encirclement_ros.nodes.settings import AgentSettings
from soliton_encirclement_ros.nodes.swarm_topics import (
    create_swarm_publisher, create_swarm_subscription, VEHICLE_FAILURE_QOS)
from velocity_mobility_ros.nodes.messages import odometry_position_velocity, position_uncertainty

# Messages that arrived within this much of the current tick wait for the next tick.
THIS_TICK = 1e-6
LINK_KEY = 'link.'  # /diagnostics key of a sender's figures: link.<agent id> (core.links)
STATUS_PERIOD = 1.0  # s between ~/status publications when nothing changes
STARTUP_ODOMETRY = 15.0  # wall s after the start before a missing first odometry is a warning
STATUS_LEVELS = {OK: DiagnosticStatus.OK, STARTING: DiagnosticStatus.OK,
                 TARGET_LOST: DiagnosticStatus.WARN, BLIND: DiagnosticStatus.WARN,
                 FAILED: DiagnosticStatus.ERROR}


# One parameter per ControllerParams field: default, description and range from the core.
CONTROLLER_SPECS = specs_of(ControllerParams)
NODE_SPECS = specs_of(AgentSettings, read_only=True)
# Everything agent_node declares, in order (its table in docs/reference/parameters.md comes
# from it).
PARAMETERS = (*CONTROLLER_SPECS, *NODE_SPECS)


class AgentNode(Node):
    """
    One agent's soliton encirclement controller.

    ``subscribe_swarm=False`` / ``subscribe_target=False`` leave the swarm / target topic to a
    caller that decodes each state once and hands them to :meth:`receive_agent_states` (an
    instant's states as arrays) / :meth:`receive_target_state` (the in-process runner's shared
    subscriptions).
    """

    def __init__(self, subscribe_swarm: bool = True, subscribe_target: bool = True,
                 **kwargs) -> None:
        super().__init__(AGENT_NODE_NAME, **kwargs)
        self._d_safe_floor = (0.0, False)  # (min_d_safe, allow_no_separation), set below
        self._clock_limit = 0.0  # max_clock_offset, set below
        self._params = declare_validated(self, CONTROLLER_SPECS, self._controller_params,
                                         self._set_params)
        settings = AgentSettings.from_mapping(declare(self, NODE_SPECS))
        self._d_safe_floor = (settings.min_d_safe, settings.allow_no_separation)
        self._clock_limit = settings.max_clock_offset
        self._controller_params(current_values(self, CONTROLLER_SPECS))  # refuse below it
        reliability = settings.swarm_reliability
        self.agent_id = settings.agent_id or id_from_namespace(self.get_namespace())
        self.incarnation = new_incarnation()
        self._outage = OutageProcess(settings.failures_per_min, settings.failure_off_time,
                                     settings.failure_check_period, settings.seed, self.agent_id)
        self._channel = ImpairedChannel(settings.loss, settings.delay, settings.seed,
                                        self.agent_id)
        self._state = initial_state(self.agent_id, self.incarnation)
        # (stamp_ns, position, velocity, position uncertainty [m] from the pose covariance)
        self._odometry: deque = deque(maxlen=8)
        self._duplicates = DuplicateIds(self._params.agent_timeout)
        self._links = LinkMonitor(settings.link_window)
        self._link_figures = {}   # sender id -> LinkFigures, as of the last 1 Hz status
        self._clock_warned = {}   # sender id -> its warning, while its offset is past the limit
        self._sim_time = bool(self.get_parameter('use_sim_time').value)
        self._failed = False
        self._manual_failure_until_ns = -1
        self._vehicle_failure = ''  # why the vehicle left the ring (its bridge), '' = it has not
        self._started = time.monotonic()  # wall time of the start: the first odometry is due
        self._start_warned = False
        self._area = settings.area
        self._area_watch = (None if settings.area is None
                            else AreaWatch(settings.area, settings.outside_land_after))
        self.status = Status(STARTING, 'waiting for the first tick')

        self._publish = Publishing(self.get_logger())  # drops a sample the middleware refuses
        self._cmd_pub = self.create_publisher(Twist, AGENT_CMD_TOPIC, 10)
        self._status_pub = StatusPublisher(self)
        self._state_pub = create_swarm_publisher(self, Float64MultiArray, AGENT_STATES_TOPIC,
                                                 reliability)
        self.create_subscription(Odometry, AGENT_ODOM_TOPIC, self._on_odometry, 10)
        if subscribe_swarm:
            create_swarm_subscription(self, Float64MultiArray, AGENT_STATES_TOPIC,
                                      self._on_agent_state, reliability)
        if subscribe_target:
            create_swarm_subscription(self, Float64MultiArray, TARGET_STATE_TOPIC,
                                      self._on_target_state, reliability)
        self.create_subscription(String, VEHICLE_FAILURE_TOPIC, self._on_vehicle_failure,
                                 VEHICLE_FAILURE_QOS)
        self.create_service(SetBool, '~/inject_failure', self._on_inject_failure)
        self._timer = self.create_timer(self._params.control_period, self._on_tick)
        self.create_timer(STATUS_PERIOD, self._on_status_period)

    # --- inputs -----------------------------------------------------------------------------
    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _on_odometry(self, msg: Odometry) -> None:
        try:
            position, velocity = odometry_position_velocity(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring odometry: {error}', throttle_duration_sec=5.0)
            return
        stamp = rclpy.time.Time.from_msg(msg.header.stamp).nanoseconds
        self._odometry.append((stamp, position, velocity, position_uncertainty(msg)))

    def _on_agent_state(self, msg: Float64MultiArray) -> None:
        try:
            state = agent_state_from_msg(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring agent state: {error}', throttle_duration_sec=5.0)
            return
        self.receive_agent_state(state)

    def receive_agent_state(self, state: AgentBroadcast, now_ns: int | None = None) -> None:
        """Take a decoded swarm state heard at ``now_ns`` (default: this node's clock now)."""
        self.receive_agent_states(AgentStates.of((state,)),
                                  self._now_ns() if now_ns is None else now_ns)

    def receive_agent_states(self, states, now_ns: int) -> None:
        """
        Take decoded swarm states heard at ``now_ns``, in arrival order.

        ``states``: :class:`AgentStates` (an instant's, or one message's), or AgentBroadcasts.
        One numpy pass judges them all: the clock not started, duplicate ids, own states and
        future stamps; the rest go to the (lossy, delayed) channel as one batch. A failed agent
        listens too: back in the ring, it knows every vehicle (one that fell silent meanwhile).
        """
        batch = AgentStates.of(states)
        if now_ns == 0:
            started = ~_clock_not_started(now_ns, batch.stamp_ns)
            if not started.all():
                batch = batch[started]
        if not len(batch):
            return
        now = now_ns * 1e-9
        ids = batch.agent_id
        for agent_id, incarnations in self._duplicates.observe_many(
                ids, batch.incarnation, now):
            self._report_duplicate(agent_id, incarnations)
        stamp = batch.stamp
        others = ids != self.agent_id
        kept, ahead = ahead_as_presence(batch, now_ns, self._params, self.agent_id)
        if ahead.any():
            first = int(np.flatnonzero(ahead)[0])
            self._rejected_stamp('agent', float(stamp[first]), now, int(ids[first]))
            count = int(ahead.sum())
            self._links.record(ids[ahead], batch.incarnation[ahead],
                               np.full(count, -1, dtype=np.int64), stamp[ahead],
                               np.full(count, now))
        self._channel.receive_many(kept if others.all() else kept[others], now)

    def _observe_incarnation(self, agent_id: int, incarnation: int, now: float) -> None:
        duplicate = self._duplicates.observe(agent_id, incarnation, now)
        if duplicate is not None:
            self._report_duplicate(agent_id, duplicate)

    def _report_duplicate(self, agent_id: int, duplicate: list[int]) -> None:
        whose = "this agent's own id" if agent_id == self.agent_id else f'agent_id {agent_id}'
        self.get_logger().error(
            f'duplicate agent_id {agent_id}: {whose} is broadcast by incarnations '
            f'{", ".join(map(str, duplicate))} (this agent is {self.incarnation}); two '
            'vehicles were started with the same agent_id')

    def _on_target_state(self, msg: Float64MultiArray) -> None:
        try:
            state = target_state_from_msg(msg)
        except ValueError as error:
            self.get_logger().warning(f'ignoring target state: {error}', throttle_duration_sec=5.0)
            return
        self.receive_target_state(state)

    def receive_target_state(self, state: TargetBroadcast, now_ns: int | None = None) -> None:
        """Take a decoded target state heard at ``now_ns`` (default: this node's clock now)."""
        now_ns = self._now_ns() if now_ns is None else now_ns
        if _clock_not_started(now_ns, state.stamp_ns):
            return
        now = now_ns * 1e-9
        if not self._rejected_stamp('target', state.stamp, now):
            self._channel.receive(state, now)

    def _rejected_stamp(self, kind: str, stamp: float, now: float, sender=None) -> bool:
        if self._sim_time:  # every node runs on /clock: the states are ahead of a late /clock
            cause = ('this node runs on /clock (use_sim_time) and its /clock lags the '
                     "sender's: is the clock publisher or this process falling behind?")
        elif sender is None:
            cause = "are this companion's and the target's clocks synchronised?"
        else:
            cause = (f"are this companion's and agent {sender}'s clocks synchronised? (its "
                     'offset is in /diagnostics)')
        reason = future_stamp_reason(kind, stamp, now, self._params, cause)
        if reason is not None:
            self.get_logger().warning(reason, throttle_duration_sec=5.0)
        return reason is not None

    def _on_vehicle_failure(self, msg: String) -> None:
        if msg.data != self._vehicle_failure:
            self._vehicle_failure = msg.data
            if msg.data:
                _log_out_of_ring(self.get_logger(), msg.data,
                                 f'agent {self.agent_id}: the vehicle left the ring: {msg.data}')

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

    def _controller_params(self, values) -> ControllerParams:
        """
        Validate the controller gains, and ``d_safe`` against ``min_d_safe``.

        A PX4 launch sets ``min_d_safe``: a lower ``d_safe`` (a params file, ``ros2 param
        set``) is refused in one line, unless ``allow_no_separation``, with which it is flown
        and the start-up warns once.
        """
        params = ControllerParams.from_mapping(values)
        if self._clock_limit >= params.max_future_stamp:
            raise ValueError(
                f'max_clock_offset {self._clock_limit:g} s must be below max_future_stamp '
                f'{params.max_future_stamp:g} s: a clock off by less than the warning limit '
                'would have its states rejected without a warning')
        floor, allowed = self._d_safe_floor
        if params.d_safe < floor:
            if not allowed:
                raise ValueError(
                    f'd_safe {params.d_safe:g} m is below min_d_safe {floor:g} m, the least '
                    'separation this vehicle flies with: set d_safe to it or more, or launch '
                    'with allow_no_separation:=true to fly without it (not for real vehicles)')
            if not getattr(self, '_warned_no_separation', False):
                self._warned_no_separation = True
                self.get_logger().warning(
                    f'd_safe {params.d_safe:g} m is below min_d_safe {floor:g} m and '
                    'allow_no_separation is true: this vehicle flies WITHOUT the separation '
                    'its launch requires; not for real vehicles')
        return params

    def _set_params(self, params: ControllerParams) -> None:
        if params.control_period != self._params.control_period:
            self._timer.cancel()
            self._timer = self.create_timer(params.control_period, self._on_tick)
        self._duplicates.window = params.agent_timeout
        self._params = params

    # --- control tick -------------------------------------------------------------------------
    def _on_tick(self) -> None:
        now_ns = self._now_ns()
        now = now_ns * 1e-9
        odometry = self._latest_odometry_before(now_ns)
        if odometry is not None:
            odometry = (odometry[0] * 1e-9, *odometry[1:])
            if self._area_watch is not None:
                for line in self._area_watch.update(now, odometry[1]):
                    self.get_logger().warning(f'agent {self.agent_id}: {line}')
        failed = (self._outage.update(now) or now_ns < self._manual_failure_until_ns
                  or bool(self._vehicle_failure) or self._outside_too_long())
        if failed != self._failed:
            self._on_failure_change(failed)
        self._observe_incarnation(self.agent_id, self.incarnation, now)
        due = self._channel.due(now - THIS_TICK)  # failed or not: it listens
        if due:
            self._record_links(due)
            self._state = receive_states(self._state, due, self._params)
        if failed:
            tick = failed_tick(self._state, odometry, now, self._params, self._failure_detail())
        else:
            tick = agent_tick(self._state, odometry, now, self._params)
        self._state = tick.state
        if tick.broadcast is not None:
            self._publish(self._state_pub, agent_state_to_msg(tick.broadcast))
        if tick.command is not None:
            command = tick.command
            if self._area is not None and odometry is not None:  # able to stop inside
                command = limit_clear(command, odometry[1], odometry[2], self._area,
                                      self._params.t_safe, self._params.a_safe,
                                      self._params.control_period,
                                      lambda: known_vehicles(self._state, now, self._params)[1:],
                                      self._params.d_safe)
            twist = Twist()
            twist.linear.x, twist.linear.y, twist.linear.z = (float(c) for c in command)
            self._publish(self._cmd_pub, twist)
        self._set_status(tick.status)

    def _record_links(self, due) -> None:
        """Note the agent states a tick takes in: who sent them, their seq, stamp and times."""
        batches = [(message, rx_time) for message, rx_time in due
                   if isinstance(message, AgentStates)]
        if not batches:
            return
        if len(batches) == 1:
            states, rx_time = batches[0]
            arrival = np.full(len(states), rx_time)
        else:
            states = AgentStates(np.concatenate([states.ints for states, _ in batches]),
                                 np.concatenate([states.floats for states, _ in batches]))
            arrival = np.concatenate([np.full(len(s), rx) for s, rx in batches])
        spoken = states.incarnation != BRIDGE_INCARNATION  # a bridge's presence is no link
        if not spoken.all():
            states = AgentStates(states.ints[spoken], states.floats[spoken])
            arrival = arrival[spoken]
        self._links.record(states.agent_id, states.incarnation, states.seq, states.stamp,
                           arrival - self._channel.delay, arrival)

    def _outside_too_long(self) -> bool:
        """Whether the vehicle has been outside the safety area for outside_land_after."""
        return self._area_watch is not None and self._area_watch.land

    def _failure_detail(self) -> str:
        """Why the controller is out: the vehicle's own reason, the area, else injected."""
        if self._vehicle_failure:
            return f'vehicle: {self._vehicle_failure}'
        if self._outside_too_long():
            return self._area_watch.why(self._now_ns() * 1e-9)
        return 'injected'

    def _latest_odometry_before(self, now_ns: int):
        """Newest odometry stamped strictly before now (else the newest): order-independent."""
        earlier = [entry for entry in self._odometry if entry[0] < now_ns]
        if earlier:
            return earlier[-1]
        return self._odometry[-1] if self._odometry else None

    def _on_failure_change(self, failed: bool) -> None:
        self._failed = failed
        if failed:
            self._publish(self._cmd_pub, Twist())
            self._set_status(Status(FAILED, self._failure_detail()))
        else:  # a fresh controller; the sequence numbers go on after the presence broadcasts,
            # and what it heard meanwhile stays (the vehicles, one fallen silent among them)
            self._state = dataclasses.replace(initial_state(self.agent_id, self.incarnation),
                                              seq=self._state.seq,
                                              neighbours=self._state.neighbours,
                                              target=self._state.target)
            self.get_logger().info(f'agent {self.agent_id}: recovered, resuming control')

    # --- status -------------------------------------------------------------------------------
    def _set_status(self, status: Status) -> None:
        """Log each new episode once (why the vehicle holds) and publish the change."""
        if status.kind == self.status.kind:
            self.status = status
            return
        previous, self.status = self.status, status
        log = self.get_logger()
        if status.kind == BLIND and not self._odometry and not self._odometry_overdue():
            # at start-up, before the vehicle's first odometry: said once, warned if it lasts
            log.info(f"agent {self.agent_id}: waiting for its vehicle's first odometry "
                     '(holding, not broadcasting)')
        elif status.kind == BLIND:
            self._start_warned = True
            log.warning(f'agent {self.agent_id}: {status}: holding (zero velocity) and not '
                        'broadcasting until odometry is fresh')
        elif status.kind == TARGET_LOST:
            log.warning(f'agent {self.agent_id}: {status}: holding (zero velocity) until the '
                        'target is heard again')
        elif status.kind == FAILED:
            _log_out_of_ring(log, status.detail, f'agent {self.agent_id}: failed '
                             f'({status.detail}), commanding zero, out of the ring; broadcasting '
                             'only where its vehicle is (presence)')
        elif status.kind == OK and previous.kind in (BLIND, TARGET_LOST):
            log.info(f'agent {self.agent_id}: {previous.kind} episode over, resuming control')
        self._publish_status()

    def _odometry_overdue(self) -> bool:
        """Whether the first odometry is later than STARTUP_ODOMETRY after the start."""
        return time.monotonic() - self._started > STARTUP_ODOMETRY

    def _on_status_period(self) -> None:
        """Close the link period: the figures per sender, a warning per clock off by too much."""
        self._link_figures = self._links.figures(self._now_ns() * 1e-9)
        log = self.get_logger()
        if (self.status.kind == BLIND and not self._odometry and not self._start_warned
                and self._odometry_overdue()):
            self._start_warned = True
            log.warning(f'agent {self.agent_id}: {self.status} for {STARTUP_ODOMETRY:g} s '
                        'since the start: holding (zero velocity) and not broadcasting until '
                        'odometry is fresh (is its vehicle up, and odom remapped right?)')
        for sender, figures in self._link_figures.items():
            warning = offset_warning(self.agent_id, figures, self._clock_limit,
                                     self._sim_time)
            if warning is not None and sender not in self._clock_warned:
                log.warning(warning)
            elif warning is None and sender in self._clock_warned:
                log.info(f'agent {self.agent_id}: the offset of agent {sender} is within '
                         f'max_clock_offset {self._clock_limit:g} s again '
                         f'({fixed(figures.offset, 3, sign=True)} s)')
            if warning is None:
                self._clock_warned.pop(sender, None)
            else:
                self._clock_warned[sender] = offset_summary(figures)
        for sender in set(self._clock_warned) - set(self._link_figures):
            del self._clock_warned[sender]  # not heard within the window
        self._publish_status()

    def _publish_status(self) -> None:
        level, message = STATUS_LEVELS[self.status.kind], str(self.status)
        if self._clock_warned:
            level = max(level, DiagnosticStatus.WARN)
            message = f'{message}; {"; ".join(self._clock_warned.values())}'
        duplicate = self.agent_id in self._duplicates.duplicated
        if duplicate:
            level = DiagnosticStatus.ERROR
            message = (f'duplicate id: agent_id {self.agent_id} is broadcast by another '
                       f'process too; {message}')
        msg = DiagnosticStatus(level=level, name=self.get_fully_qualified_name(),
                               message=message, hardware_id=f'agent {self.agent_id}')
        p = self._params
        msg.values = [KeyValue(key='state', value=self.status.kind),
                      KeyValue(key='agent_id', value=str(self.agent_id)),
                      # flown values, for fleet check to compare with the fleet file
                      KeyValue(key='radius', value=f'{p.radius:g}'),
                      KeyValue(key='d_safe', value=f'{p.d_safe:g}'),
                      KeyValue(key='altitude', value=f'{p.altitude:g}'),
                      KeyValue(key='incarnation', value=str(self.incarnation)),
                      KeyValue(key='duplicate_id', value=str(duplicate).lower())]
        msg.values.extend(KeyValue(key=f'{LINK_KEY}{sender}', value=figures.text())
                          for sender, figures in sorted(self._link_figures.items()))
        self._status_pub.publish(msg)

    @property
    def failed(self) -> bool:
        return self._failed


def _log_out_of_ring(logger, reason: str, text: str) -> None:
    """
    Log ``text`` at INFO for what an operator asked (a landing, a hold), else at WARN.

    Two call sites, one per severity: rclpy refuses to log from one at another severity.
    """
    if OPERATOR_REQUEST in reason:
        logger.info(text)
    else:
        logger.warning(text)


def _clock_not_started(now_ns: int, stamp_ns):
    """
    Whether this node's clock has not started while the sender's has: nothing to compare.

    ``stamp_ns`` an int or an array (then one answer per stamp).

    Under ``use_sim_time`` the clock reads 0 until the first ``/clock``; a state stamped by a
    running clock would look from the far future (and its sender's clock off by the epoch).
    A lock-stepped simulation starts at 0 with states stamped 0: those are taken.
    """
    return (now_ns == 0) & (np.asarray(stamp_ns) > 0)


def main(args=None) -> None:
    spin_node(AgentNode, args)


if __name__ == '__main__':
    main()
