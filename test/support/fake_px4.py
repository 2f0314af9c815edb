"""
A PX4 stand-in for bridge tests (needs a built px4_msgs).

What PX4's uXRCE-DDS client publishes, and how PX4's commander answers offboard requests, by the
documented rules.

- ``vehicle_odometry`` (NED, with ``timestamp_sample`` and variances) and ``vehicle_status``
  (``nav_state``, ``arming_state``, ``system_id``) at 50 Hz, best effort, transient local.
- DO_SET_MODE(OFFBOARD) is accepted only while the OffboardControlMode heartbeat is alive; ARM
  only in OFFBOARD. Acks go to the command's sender (``target_system/component`` = its source).
- Offboard loss: the heartbeat silent for ``offboard_loss_timeout`` (PX4's COM_OF_LOSS_T, 1 s)
  fails over to Hold (AUTO_LOITER) with ``failsafe`` set and
  ``failsafe_flags.offboard_control_signal_lost``; the user's intention stays OFFBOARD, so
  PX4 returns to OFFBOARD by itself when the heartbeat comes back (what a restarted bridge
  meets).
- NAV_LAND switches to AUTO_LAND, and the vehicle descends at ``land_speed``. PX4's land
  detector says landed once the vehicle has been on the ground (NED z >= 0) for
  ``land_detect_time`` with no TrajectorySetpoint from outside in the last ``MIX_WINDOW``; PX4
  disarms ``disarm_delay`` later (COM_DISARM_LAND). ``vehicle_land_detected`` says so.
- Setpoints written in any mode reach PX4's controller (uORB ``trajectory_setpoint``), as on the
  real autopilot: in a mode other than OFFBOARD they alternate with that mode's own setpoints
  (the kinematic vehicle flies the mean of both), and in AUTO_LAND they keep the land detector
  from firing (the vehicle sits on the ground, armed, until they stop). :attr:`setpoint_log`
  records the mode each setpoint arrived in.
- At a disarm PX4 returns to the mode the user chose before the landing (its
  ``_nav_state_after_disarming``): OFFBOARD while the heartbeat is alive, otherwise Hold.
- A failsafe (:meth:`FakePx4.enter_failsafe`) holds its mode: DO_SET_MODE is ACCEPTED (the user's
  intention changes) but ``nav_state`` stays, as PX4's commander does.
- ``failsafe_flags`` (FailsafeFlags) at 50 Hz, when the built px4_msgs has it.
Options: refuse ARM, drop the first mode requests, answer the first commands
TEMPORARILY_REJECTED, fail the pre-flight checks (ARM answered TEMPORARILY_REJECTED, as PX4's
commander does), report another ``system_id``, lose the first ``lose_land`` NAV_LANDs (no
ack, no landing), deny NAV_LAND; acks of NAV_LAND that are lost (``lose_land_acks``: the
landing happens), late (``land_ack_delay`` s) or preceded by a leftover of an earlier attempt
(``stale_land_ack``: that result, once); a landing that starts ``land_delay`` s after its
NAV_LAND; :meth:`FakePx4.reset_estimate` jumps the position estimate with a new
``reset_counter``; ``message_versions`` ({type name: version}) puts those topics under another
``_vN`` (a firmware that does not match the built px4_msgs). ``vehicle_land_detected``
(landed at the start while disarmed, then as the land detector above says) at 50 Hz, when the
built px4_msgs has it. ``vehicle_local_position`` at 50 Hz with the estimator's global
reference ``ref_point`` (lat, lon, alt; None: no GPS, so ``xy_global``/``z_global`` false);
:meth:`FakePx4.set_reference` takes a new one (a new ``ref_timestamp``). ``battery_status``
at 50 Hz while :attr:`FakePx4.battery` is a (remaining, warning) pair (None: not published).

Kinematic mode (``kinematic=True``; off by default, when the position is fixed): the vehicle
starts disarmed on the ground at its spawn point (NED origin of this PX4, as PX4 SITL measures
from its own spawn) and, while armed in OFFBOARD, flies the latest TrajectorySetpoint velocity
through the project's own vehicle model (``velocity_mobility_ros.core.model.step`` with
``VehicleParams``, default limits unless ``vehicle_params`` is given), stepped at ``sim_dt`` on
this node's clock; the ground stops it (NED z <= 0). In any other armed mode it flies that
mode's own velocity (AUTO_LAND: down at ``land_speed``; others: hold), mixed with outside
setpoints as above; disarmed, it rests. Odometry then carries the model's position, velocity
and yaw. In the fixed-position mode only a landing moves the vehicle, straight down.
"""
import math

import numpy as np
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from soliton_encirclement_ros.px4.bridge_node import px4_topic
from velocity_mobility_ros.core.model import step, VehicleState
from velocity_mobility_ros.core.vehicle import VehicleParams

WRITER_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                        depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
READER_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT, history=HistoryPolicy.KEEP_LAST,
                        depth=10, durability=DurabilityPolicy.VOLATILE)
POSITION_NED = [4.0, -2.0, -10.0]
MIX_WINDOW = 0.3  # s an outside setpoint keeps reaching PX4's controller (20 Hz streams: always)
VELOCITY_NED = [1.0, 0.5, -0.2]
SAMPLE_AGE_US = 3000  # timestamp - timestamp_sample of the odometry


def fly_kinematic(vehicle, setpoint, params, steps):
    """
    Return the kinematic vehicle (NED) ``steps`` steps of ``params.sim_dt`` later.

    It flies the TrajectorySetpoint ``setpoint``'s velocity and yawspeed (NaN = 0; None: hover)
    through the project's vehicle model; the ground stops it (NED z <= 0).
    """
    v_des, yaw_rate = np.zeros((1, 3)), np.zeros(1)
    if setpoint is not None:
        v_des[0] = [0.0 if math.isnan(v) else float(v) for v in setpoint.velocity]
        yaw_rate[0] = 0.0 if math.isnan(setpoint.yawspeed) else float(setpoint.yawspeed)
    for _ in range(steps):
        vehicle = step(vehicle, v_des, params, yaw_rate)
        if vehicle.position[0, 2] > 0.0:  # NED z > 0 is under the ground
            vehicle.position[0, 2] = 0.0
            vehicle.velocity[0, 2] = min(vehicle.velocity[0, 2], 0.0)
    return vehicle


class FakePx4(Node):
    """One PX4 instance under ``px4_namespace`` with MAVLink id ``system_id``."""

    def __init__(self, px4_namespace='px4_1', system_id=2, refuse_arm=False,
                 drop_mode_requests=0, temporarily_reject=0, offboard_loss_timeout=1.0,
                 nav_state=None, arming_state=None, q_ned=(1.0, 0.0, 0.0, 0.0), lose_land=0,
                 deny_land=False, preflight_fail=False, kinematic=False, vehicle_params=None,
                 node_name='fake_px4', lose_land_acks=False, land_ack_delay=0.0,
                 stale_land_ack=None, land_delay=0.0, message_versions=None, ref_point=None,
                 land_speed=10.0, land_detect_time=0.3, disarm_delay=0.5):
        super().__init__(node_name)
        import px4_msgs.msg
        from px4_msgs.msg import (
            OffboardControlMode, TrajectorySetpoint, VehicleCommand, VehicleCommandAck,
            VehicleOdometry, VehicleStatus)
        self.m = {cls.__name__: cls for cls in (OffboardControlMode, TrajectorySetpoint,
                                                VehicleCommand, VehicleCommandAck,
                                                VehicleOdometry, VehicleStatus)}
        flags_cls = getattr(px4_msgs.msg, 'FailsafeFlags', None)
        if flags_cls is not None:
            self.m['FailsafeFlags'] = flags_cls
        status = VehicleStatus
        self.system_id = system_id
        self.nav_state = status.NAVIGATION_STATE_POSCTL if nav_state is None else nav_state
        self.arming_state = status.ARMING_STATE_DISARMED if arming_state is None else arming_state
        self.user_intention = self.nav_state
        self.refuse_arm, self.drop_mode_requests = refuse_arm, drop_mode_requests
        self.temporarily_reject, self.offboard_loss_timeout = (
            temporarily_reject,
            offboard_loss_timeout,
        )
        self.q_ned = list(q_ned)
        self.lose_land, self.deny_land = lose_land, deny_land
        self.lose_land_acks, self.land_ack_delay = lose_land_acks, land_ack_delay
        self.stale_land_ack, self.land_delay = stale_land_ack, land_delay
        self._later = []   # (due us, what to do) for late acks and delayed landings
        self.preflight_fail = preflight_fail
        self.land_speed, self.land_detect_time = land_speed, land_detect_time
        self.disarm_delay = disarm_delay
        self.landed = self.arming_state == status.ARMING_STATE_DISARMED
        self._ground_since = None     # us: on the ground in AUTO_LAND, no outside setpoints
        self._landed_at = None        # us: the land detector said landed (disarm after delay)
        self.nav_after_disarm = self.nav_state  # PX4's _nav_state_after_disarming
        self.setpoint_log = []        # (us, nav_state, arming_state) of each setpoint received
        self.position_ned, self.reset_counter = list(POSITION_NED), 0
        self.estimate_offset_ned = [0.0, 0.0, 0.0]  # estimate less truth (kinematic resets)
        self.kinematic = kinematic
        if kinematic:  # on the ground at the spawn point, at rest
            self.vehicle_params = vehicle_params or VehicleParams()
            self.vehicle = VehicleState.at_rest([[0.0, 0.0, 0.0]])
            self.position_ned = [0.0, 0.0, 0.0]
            self._stepped_us = None
        self.failsafe, self.failsafe_flags = False, set()
        self.received, self.commands, self.setpoints, self.heartbeats = [], [], [], []
        self.heartbeat_times = []
        self._last_heartbeat = None

        versions = message_versions or {}  # type name -> the version a firmware of its own uses

        def name(direction, topic, type_name):
            return px4_topic(px4_namespace, direction, topic, versions.get(
                type_name, getattr(self.m[type_name], 'MESSAGE_VERSION', 0)))

        self._odom_pub = self.create_publisher(
            VehicleOdometry, name('out', 'vehicle_odometry', 'VehicleOdometry'), WRITER_QOS)
        self._status_pub = self.create_publisher(
            VehicleStatus, name('out', 'vehicle_status', 'VehicleStatus'), WRITER_QOS)
        self._ack_pub = self.create_publisher(
            VehicleCommandAck, name('out', 'vehicle_command_ack', 'VehicleCommandAck'),
            WRITER_QOS)
        self.create_subscription(VehicleCommand, name('in', 'vehicle_command', 'VehicleCommand'),
                                 self._on_command, READER_QOS)
        self.create_subscription(
            OffboardControlMode, name('in', 'offboard_control_mode', 'OffboardControlMode'),
            self._on_heartbeat, READER_QOS)
        self.create_subscription(
            TrajectorySetpoint, name('in', 'trajectory_setpoint', 'TrajectorySetpoint'),
            self._on_setpoint, READER_QOS)
        self._flags_pub = None if flags_cls is None else self.create_publisher(
            flags_cls, name('out', 'failsafe_flags', 'FailsafeFlags'), WRITER_QOS)
        land_cls = getattr(px4_msgs.msg, 'VehicleLandDetected', None)
        if land_cls is not None:
            self.m['VehicleLandDetected'] = land_cls
        self._land_pub = None if land_cls is None else self.create_publisher(
            land_cls, name('out', 'vehicle_land_detected', 'VehicleLandDetected'), WRITER_QOS)
        local_cls = getattr(px4_msgs.msg, 'VehicleLocalPosition', None)
        self.ref_point, self.ref_timestamp = ref_point, 1_000_000
        battery_cls = getattr(px4_msgs.msg, 'BatteryStatus', None)
        self.battery = None
        if battery_cls is not None:
            self.m['BatteryStatus'] = battery_cls
            self._battery_pub = self.create_publisher(
                battery_cls, name('out', 'battery_status', 'BatteryStatus'), WRITER_QOS)
        if local_cls is not None:
            self.m['VehicleLocalPosition'] = local_cls
        self._local_pub = None if local_cls is None else self.create_publisher(
            local_cls, name('out', 'vehicle_local_position', 'VehicleLocalPosition'), WRITER_QOS)
        self.create_timer(0.02, self._publish_state)

    def set_reference(self, ref_point):
        """Take a new estimator reference (lat, lon, alt): a new ref_timestamp, a new origin."""
        self.ref_point = ref_point
        self.ref_timestamp = self._now_us()

    def reset_estimate(self, jump_ned):
        """
        Jump the position estimate by ``jump_ned`` [m] with a new reset_counter (EKF reset).

        Kinematic mode: the vehicle stays where it is (:attr:`true_position_ned`); from now on
        its estimate is off by the jumps so far, as an EKF that reset onto a biased fix.
        """
        if self.kinematic:
            self.estimate_offset_ned = [o + d for o, d in zip(self.estimate_offset_ned,
                                                              jump_ned)]
        self.position_ned = [p + d for p, d in zip(self.position_ned, jump_ned)]
        self.reset_counter = (self.reset_counter + 1) % 256

    @property
    def true_position_ned(self):
        """Where the vehicle really is (NED, from its spawn point): the estimate less its error."""
        return [p - o for p, o in zip(self.position_ned, self.estimate_offset_ned)]

    def switch_mode(self, nav_state):
        """Switch PX4 to ``nav_state`` as a pilot's RC switch or the ground station does."""
        self.nav_state = self.user_intention = nav_state
        self._remember_mode(nav_state)

    def setpoints_in(self, nav_states, after_us=0):
        """Return how many setpoints arrived while PX4 was in one of ``nav_states``."""
        return sum(1 for t, nav, _ in self.setpoint_log if nav in nav_states and t >= after_us)

    def _remember_mode(self, nav_state):
        """PX4 returns after a disarm to the last mode chosen that allows arming."""
        status = self.m['VehicleStatus']
        if nav_state not in (status.NAVIGATION_STATE_AUTO_LAND,
                             status.NAVIGATION_STATE_AUTO_RTL):
            self.nav_after_disarm = nav_state

    def _on_setpoint(self, msg):
        self.setpoints.append(msg)
        self.setpoint_log.append((self._now_us(), self.nav_state, self.arming_state))

    def _outside_setpoint(self, now_us):
        """Return the newest outside TrajectorySetpoint if it still reaches the controller."""
        if not self.setpoint_log or now_us - self.setpoint_log[-1][0] > MIX_WINDOW * 1e6:
            return None
        return self.setpoints[-1]

    def enter_failsafe(self, nav_state, flags):
        """Enter a failsafe: ``nav_state`` (its action) with ``flags`` set in failsafe_flags."""
        self.failsafe, self.failsafe_flags = True, set(flags)
        self.nav_state = nav_state

    def _now_us(self):
        return self.get_clock().now().nanoseconds // 1000

    def _heartbeat_alive(self):
        return (self._last_heartbeat is not None
                and self._now_us() - self._last_heartbeat <= self.offboard_loss_timeout * 1e6)

    def _on_heartbeat(self, msg):
        self.heartbeats.append(msg)
        self._last_heartbeat = self._now_us()
        self.heartbeat_times.append(self._last_heartbeat)
        offboard = self.m['VehicleStatus'].NAVIGATION_STATE_OFFBOARD
        if (self.user_intention == offboard and self.nav_state != offboard
                and self.failsafe_flags <= {'offboard_control_signal_lost'}):
            self.nav_state = offboard  # PX4 returns to the user's intention
            self.failsafe, self.failsafe_flags = False, set()

    def _flying_offboard(self):
        status = self.m['VehicleStatus']
        return (self.nav_state == status.NAVIGATION_STATE_OFFBOARD
                and self.arming_state == status.ARMING_STATE_ARMED)

    def _mode_velocity(self):
        """Return the velocity PX4's own mode commands (NED): a landing descends, others hold."""
        if self.nav_state == self.m['VehicleStatus'].NAVIGATION_STATE_AUTO_LAND:
            return [0.0, 0.0, self.land_speed]
        return [0.0, 0.0, 0.0]

    def _commanded(self, now_us):
        """
        Return the setpoint PX4's controller flies now (None: hover), outside ones mixed in.

        In OFFBOARD the newest outside setpoint; in another armed mode that mode's own, or,
        while outside setpoints keep arriving, the mean of both (the two alternate on uORB).
        """
        outside = self._outside_setpoint(now_us)
        if self._flying_offboard():
            return self.setpoints[-1] if self.setpoints else None
        own = self._mode_velocity()
        if outside is not None:
            own = [(a + (0.0 if math.isnan(b) else b)) / 2.0
                   for a, b in zip(own, outside.velocity)]
        setpoint = self.m['TrajectorySetpoint']()
        setpoint.velocity, setpoint.yawspeed = own, 0.0
        return setpoint

    def _fly(self, now_us):
        """Kinematic mode: step the vehicle model up to ``now_us`` (fixed ``sim_dt`` steps)."""
        params = self.vehicle_params
        dt_us = params.sim_dt * 1e6
        if self._stepped_us is None or now_us < self._stepped_us:
            self._stepped_us = now_us
        steps = int((now_us - self._stepped_us) // dt_us)
        self._stepped_us += steps * dt_us
        if self.arming_state != self.m['VehicleStatus'].ARMING_STATE_ARMED:
            self.vehicle = VehicleState.at_rest(self.vehicle.position, self.vehicle.yaw)
            return
        self.vehicle = fly_kinematic(self.vehicle, self._commanded(now_us), params, steps)
        self.position_ned = [p + o for p, o in zip(self.vehicle.position[0].tolist(),
                                                   self.estimate_offset_ned)]

    def _descend_fixed(self, now_us):
        """Fixed-position mode: only a landing moves the vehicle, straight down."""
        last, self._descended_us = getattr(self, '_descended_us', now_us), now_us
        status = self.m['VehicleStatus']
        if (self.nav_state != status.NAVIGATION_STATE_AUTO_LAND
                or self.arming_state != status.ARMING_STATE_ARMED):
            return
        speed = self._commanded(now_us).velocity[2]
        self.position_ned[2] = min(0.0, self.position_ned[2] + speed * (now_us - last) * 1e-6)

    def _detect_landing(self, now_us):
        """
        PX4's land detector and COM_DISARM_LAND: landed only on PX4's own descent.

        On the ground in AUTO_LAND with no outside setpoint reaching the controller for
        ``land_detect_time``: landed; ``disarm_delay`` later: disarmed. Off the ground: flying.
        """
        status = self.m['VehicleStatus']
        armed = self.arming_state == status.ARMING_STATE_ARMED
        height = -self.true_position_ned[2]
        if armed and height > 0.3:
            self.landed, self._landed_at, self._ground_since = False, None, None
            return
        if (armed and self.nav_state == status.NAVIGATION_STATE_AUTO_LAND and height < 0.05
                and self._outside_setpoint(now_us) is None):
            self._ground_since = self._ground_since or now_us
            if now_us - self._ground_since >= self.land_detect_time * 1e6 and not self.landed:
                self.landed, self._landed_at = True, now_us
        else:
            self._ground_since = None
        if armed and self.landed and self._landed_at is not None \
                and now_us - self._landed_at >= self.disarm_delay * 1e6:
            self._disarm()

    def _disarm(self):
        """Disarm; PX4 returns to the mode chosen before the landing (OFFBOARD: a heartbeat)."""
        status = self.m['VehicleStatus']
        self.arming_state = status.ARMING_STATE_DISARMED
        self._landed_at = None
        self.user_intention = self.nav_after_disarm
        offboard = status.NAVIGATION_STATE_OFFBOARD
        self.nav_state = (self.nav_after_disarm if self.nav_after_disarm != offboard
                          or self._heartbeat_alive() else status.NAVIGATION_STATE_AUTO_LOITER)

    def _publish_state(self):
        status_cls, odom_cls = self.m['VehicleStatus'], self.m['VehicleOdometry']
        due = [entry for entry in self._later if entry[0] <= self._now_us()]
        self._later = [entry for entry in self._later if entry[0] > self._now_us()]
        for _, action in due:
            action()
        if self.nav_state == status_cls.NAVIGATION_STATE_OFFBOARD and not self._heartbeat_alive():
            self.nav_state = status_cls.NAVIGATION_STATE_AUTO_LOITER  # offboard-loss failsafe
            self.failsafe = True
            self.failsafe_flags.add('offboard_control_signal_lost')
        now = self._now_us()
        odom = odom_cls()
        odom.timestamp, odom.timestamp_sample = now, now - SAMPLE_AGE_US
        odom.pose_frame, odom.velocity_frame = odom_cls.POSE_FRAME_NED, odom_cls.VELOCITY_FRAME_NED
        odom.reset_counter = self.reset_counter
        if self.kinematic:
            self._fly(now)
        else:
            self._descend_fixed(now)
        self._detect_landing(now)
        if self.kinematic:
            yaw = float(self.vehicle.yaw[0])  # about NED z (down)
            odom.position = self.position_ned
            odom.q = [math.cos(yaw / 2.0), 0.0, 0.0, math.sin(yaw / 2.0)]
            odom.velocity = self.vehicle.velocity[0].tolist()
            odom.angular_velocity = [0.0, 0.0, float(self.vehicle.yaw_rate[0])]
        else:
            odom.position, odom.q = self.position_ned, self.q_ned
            odom.velocity, odom.angular_velocity = VELOCITY_NED, [0.0, 0.0, 0.1]
        odom.position_variance = [0.01, 0.04, 0.09]
        odom.orientation_variance = [0.001, 0.002, 0.003]
        odom.velocity_variance = [0.1, 0.2, 0.3]
        self._odom_pub.publish(odom)
        status = status_cls()
        status.timestamp = now
        status.nav_state, status.arming_state = self.nav_state, self.arming_state
        status.system_id = self.system_id
        status.failsafe = self.failsafe
        status.pre_flight_checks_pass = not self.preflight_fail
        self._status_pub.publish(status)
        if self._flags_pub is not None:
            flags = self._flags_pub.msg_type()
            flags.timestamp = now
            for flag in self.failsafe_flags:
                setattr(flags, flag, True)
            self._flags_pub.publish(flags)
        if self._local_pub is not None:
            local = self._local_pub.msg_type()
            local.timestamp = now
            local.x, local.y, local.z = (float(v) for v in self.position_ned)
            local.xy_valid = local.z_valid = True
            local.xy_global = local.z_global = self.ref_point is not None
            if self.ref_point is not None:
                local.ref_lat, local.ref_lon, local.ref_alt = self.ref_point
                local.ref_timestamp = self.ref_timestamp
            self._local_pub.publish(local)
        if self.battery is not None:
            battery = self.m['BatteryStatus']()
            battery.timestamp, battery.connected = now, True
            battery.remaining, battery.warning = float(self.battery[0]), int(self.battery[1])
            self._battery_pub.publish(battery)
        if self._land_pub is not None:
            land = self._land_pub.msg_type()
            land.timestamp = now
            land.landed = self.landed
            self._land_pub.publish(land)

    def _on_command(self, msg):
        cmd, ack_cls, status = self.m['VehicleCommand'], self.m['VehicleCommandAck'], \
            self.m['VehicleStatus']
        self.commands.append(msg)
        self.received.append((msg.command, self.nav_state))
        if msg.target_system not in (0, self.system_id):
            return  # not addressed to this PX4: no ack, as PX4 does
        result = ack_cls.VEHICLE_CMD_RESULT_ACCEPTED
        if msg.command == cmd.VEHICLE_CMD_DO_SET_MODE and self.drop_mode_requests > 0:
            self.drop_mode_requests -= 1
            return
        if self.temporarily_reject > 0:
            self.temporarily_reject -= 1
            result = ack_cls.VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED
        elif msg.command == cmd.VEHICLE_CMD_DO_SET_MODE and msg.param1 == 1.0:
            if self.failsafe and msg.param2 == 6.0:
                self.user_intention = status.NAVIGATION_STATE_OFFBOARD  # the failsafe holds
            elif msg.param2 == 6.0 and self._heartbeat_alive():
                self.switch_mode(status.NAVIGATION_STATE_OFFBOARD)
            elif msg.param2 == 4.0 and msg.param3 == 3.0:
                self.switch_mode(status.NAVIGATION_STATE_AUTO_LOITER)
            else:
                result = ack_cls.VEHICLE_CMD_RESULT_DENIED
        elif msg.command == cmd.VEHICLE_CMD_COMPONENT_ARM_DISARM and msg.param1 == 1.0:
            if self.preflight_fail:  # PX4's commander: arming denied by a check
                result = ack_cls.VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED
            elif self.refuse_arm or self.nav_state != status.NAVIGATION_STATE_OFFBOARD:
                result = ack_cls.VEHICLE_CMD_RESULT_DENIED
            else:
                self.arming_state = status.ARMING_STATE_ARMED
        elif msg.command == cmd.VEHICLE_CMD_NAV_LAND:
            if self.lose_land > 0:
                self.lose_land -= 1
                return  # lost on the link: no ack, no landing
            if self.stale_land_ack is not None:  # left over from an earlier attempt
                self._ack(msg, self.stale_land_ack)
                self.stale_land_ack = None
            if self.deny_land:
                result = ack_cls.VEHICLE_CMD_RESULT_DENIED
            elif self.land_delay > 0.0:
                self._later.append((self._now_us() + self.land_delay * 1e6, self._land))
            else:
                self._land()
            if self.lose_land_acks:
                return  # the landing happens; its ack is lost on the link
            if self.land_ack_delay > 0.0:
                self._later.append((self._now_us() + self.land_ack_delay * 1e6,
                                    lambda: self._ack(msg, result)))
                return
        self._ack(msg, result)

    def _land(self):
        self.nav_state = self.user_intention = self.m['VehicleStatus'].NAVIGATION_STATE_AUTO_LAND

    def _ack(self, msg, result):
        ack = self.m['VehicleCommandAck']()
        ack.timestamp = self._now_us()
        ack.command, ack.result = msg.command, result
        ack.target_system, ack.target_component = msg.source_system, msg.source_component
        self._ack_pub.publish(ack)

    def landed_commands(self):
        return [
            m for m in self.commands if m.command == self.m['VehicleCommand'].VEHICLE_CMD_NAV_LAND
        ]
