"""
PX4 offboard sequencing as a pure object (no rclpy, no px4_msgs).

The bridge node feeds it what it hears (``cmd_vel``, ``vehicle_status``, ``failsafe_flags``,
``vehicle_command_ack``, odometry arrival and ``reset_counter``, the other publishers on the
vehicle's setpoint topics), with times in seconds of a steady clock (never the simulation clock:
the heartbeat must not stop when ``/clock`` stalls), and asks it what to publish:

* :meth:`OffboardSequencer.setpoint` at the setpoint rate: the NED velocity setpoint. Always
  finite. It carries ``cmd_vel`` only while ACTIVE (the operator engaged and PX4 confirmed
  OFFBOARD and ARMED) with fresh PX4 odometry and a fresh ``cmd_vel``, no other node publishing
  setpoints to the vehicle and no estimator reset being held; otherwise zero velocity.
* :meth:`OffboardSequencer.tick` at the heartbeat rate: the vehicle commands to send now and
  what to report (log lines and, when an engage, land or hold request ends, its outcome).
* :attr:`OffboardSequencer.streaming`: whether the heartbeat and setpoints are published at all:
  only while PX4 is in the mode this bridge asked for (OFFBOARD) or while an engage switches it
  there, px4-ros2-interface-lib's rule. In any other PX4 mode (Land, Hold, RTL, a pilot's) a
  setpoint stream would mix with that mode's own setpoints (PX4 then never detects a landing),
  and a live heartbeat at a disarm returns PX4 to OFFBOARD.
* :meth:`OffboardSequencer.status`: what ``~/status`` says.

Engaging is operator-requested, never automatic: :meth:`request_engage` starts
``IDLE -> MODE_REQUESTED -> ARM_REQUESTED -> ACTIVE``; the stream starts with the request.
DO_SET_MODE waits until PX4 has heard the stream for ``warmup`` seconds (counted from PX4's
first feedback after the stream started); ARM is sent only once vehicle_status confirms
OFFBOARD. TEMPORARILY_REJECTED is retried every ``command_retry`` until ``confirm_timeout``; a
final refusal ends the request with PX4's reason (mode refused, arming refused with PX4's
result, a failsafe and which), and a refused ARM switches PX4 out of OFFBOARD (to Hold) so the
vehicle is not left in OFFBOARD disarmed. PX4 leaving OFFBOARD (RC, GCS, failsafe) returns the
bridge to IDLE and takes the vehicle out of the ring: flying again needs a new engage, even when
PX4 itself returns to OFFBOARD.

Landing (operator ``~/land``, ``land_after``, the battery or the safety area) is a pending
command: NAV_LAND is resent every ``command_retry`` until PX4 takes the landing over (a landing
mode such as AUTO_LAND, or DISARMED) within ``confirm_timeout``. A refused or unanswered landing
stops the offboard heartbeat, so that PX4's own offboard-loss failsafe (COM_OF_LOSS_T,
COM_OBL_RC_ACT) takes the vehicle; only a new engage starts the stream again. Once PX4 lands the
vehicle the bridge sends it nothing, and the landing is done when PX4 reports it disarmed (and
its land detector, when heard, landed); ``land_timeout`` later a vehicle still not landed is
named. A pilot taking over during the landing ends it.

Hold (operator ``~/hold``, from any phase) switches PX4 to its Hold mode (AUTO.LOITER) at once,
cancelling an engage or a landing; confirmed when PX4 reports AUTO_LOITER, after which the
bridge sends PX4 nothing until the next engage.

An estimator reset (a new ``VehicleOdometry.reset_counter``) is logged with the jump of the
position estimate; the bridge then streams zero velocity for ``reset_hold`` seconds before it
flies ``cmd_vel`` again, and after a jump larger than ``max_reset_jump`` until the operator
engages again.

Battery (``BatteryStatus``): below ``min_battery`` remaining, or at a CRITICAL (or worse)
warning, an idle vehicle refuses the engage and an engaged one lands. From a landing (any
reason), a hold or PX4 leaving OFFBOARD until the next confirmed engage,
:attr:`OffboardSequencer.out_of_ring` says why the vehicle is out of the ring: the bridge
publishes it on ``vehicle_failure``, and the agent announces a failure with that reason (its
presence only, out of the ring).
"""
from dataclasses import dataclass
from enum import Enum
import math

import numpy as np

from ros_support.settings import check_fields, same_as, setting
from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.interface import OPERATOR_REQUEST
from soliton_encirclement_ros.px4.frames import enu_to_ned, yaw_rate_enu_to_ned

# MAVLink / px4_msgs constants (VehicleCommand.msg, VehicleStatus.msg, VehicleCommandAck.msg;
# the node checks them against the built px4_msgs at start-up).
VEHICLE_CMD_NAV_LAND = 21
VEHICLE_CMD_DO_SET_MODE = 176
VEHICLE_CMD_COMPONENT_ARM_DISARM = 400
MAV_MODE_FLAG_CUSTOM_MODE_ENABLED = 1.0   # DO_SET_MODE param1
PX4_CUSTOM_MAIN_MODE_AUTO = 4.0           # DO_SET_MODE param2 ...
PX4_CUSTOM_MAIN_MODE_OFFBOARD = 6.0
PX4_CUSTOM_SUB_MODE_AUTO_LOITER = 3.0     # ... param3: AUTO.LOITER is PX4's Hold mode
NAVIGATION_STATE_OFFBOARD = 14
NAVIGATION_STATE_AUTO_LAND = 18
NAVIGATION_STATE_AUTO_LOITER = 4
# PX4 modes that end on the ground: a landing PX4 has taken over goes on in any of them
# (AUTO_RTL, DESCEND, AUTO_PRECLAND, AUTO_LAND); any other armed mode is someone taking over.
LANDING_NAV_STATES = frozenset((5, 12, 18, 20))
ARMING_STATE_DISARMED = 1
ARMING_STATE_ARMED = 2
BATTERY_WARNING_CRITICAL = 2              # BatteryStatus.WARNING_CRITICAL (LOW 1, EMERGENCY 3)
_BATTERY_WARNINGS = {2: 'CRITICAL', 3: 'EMERGENCY', 4: 'FAILED'}
VEHICLE_CMD_RESULT_ACCEPTED = 0
VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED = 1
VEHICLE_CMD_RESULT_DENIED = 2
VEHICLE_CMD_RESULT_FAILED = 4
VEHICLE_CMD_RESULT_IN_PROGRESS = 5
_RESULT_NAMES = {0: 'ACCEPTED', 1: 'TEMPORARILY_REJECTED', 2: 'DENIED', 3: 'UNSUPPORTED',
                 4: 'FAILED', 5: 'IN_PROGRESS', 6: 'CANCELLED'}
_COMMAND_NAMES = {VEHICLE_CMD_NAV_LAND: 'NAV_LAND', VEHICLE_CMD_DO_SET_MODE: 'DO_SET_MODE',
                  VEHICLE_CMD_COMPONENT_ARM_DISARM: 'COMPONENT_ARM_DISARM'}
_ARMING_NAMES = {ARMING_STATE_DISARMED: 'DISARMED', ARMING_STATE_ARMED: 'ARMED'}
# VehicleStatus.NAVIGATION_STATE_* (the ones a multicopter meets).
NAV_STATE_NAMES = {0: 'MANUAL', 1: 'ALTCTL', 2: 'POSCTL', 3: 'AUTO_MISSION', 4: 'AUTO_LOITER',
                   5: 'AUTO_RTL', 6: 'POSITION_SLOW', 10: 'ACRO', 12: 'DESCEND',
                   13: 'TERMINATION', 14: 'OFFBOARD', 15: 'STAB', 17: 'AUTO_TAKEOFF',
                   18: 'AUTO_LAND', 19: 'AUTO_FOLLOW_TARGET', 20: 'AUTO_PRECLAND', 21: 'ORBIT'}
# PX4's offboard-loss failsafe: its delay and its action (PX4 parameters).
OFFBOARD_LOSS_PARAMETERS = 'COM_OF_LOSS_T, COM_OBL_RC_ACT'
_ZERO = (0.0, 0.0, 0.0)
# ~/status levels (the node maps them to diagnostic_msgs/DiagnosticStatus levels).
OK, WARN, ERROR = 'ok', 'warn', 'error'


class Phase(Enum):
    IDLE = 'idle'                      # heartbeat and zero setpoints flow; not engaged
    MODE_REQUESTED = 'mode_requested'  # DO_SET_MODE(offboard) sent, waiting for nav_state
    ARM_REQUESTED = 'arm_requested'    # in OFFBOARD, ARM sent, waiting for arming_state
    ACTIVE = 'active'                  # engaged, confirmed OFFBOARD and ARMED: cmd_vel flies
    LANDING = 'landing'                # NAV_LAND sent; then PX4 lands: until landed, disarmed
    HOLD_REQUESTED = 'hold_requested'  # DO_SET_MODE(Hold) sent, waiting for AUTO_LOITER


@dataclass(frozen=True)
class OffboardConfig:
    """Timing of the sequence (validated on construction; the bridge's parameters)."""

    cmd_timeout: float = setting(0.5, 'cmd_vel older than this commands zero velocity (hover)',
                                 's', 0.05, 10.0)
    warmup: float = setting(1.0, 'heartbeat streaming before the offboard mode request', 's',
                            0.1, 10.0)
    confirm_timeout: float = setting(5.0, 'time for PX4 to confirm an engage (OFFBOARD and '
                                     'ARMED) or a landing (AUTO_LAND or DISARMED); a landing '
                                     'not confirmed by then stops the offboard heartbeat', 's',
                                     0.5, 60.0)
    command_retry: float = setting(1.0, 'resend an unconfirmed or temporarily rejected vehicle '
                                   'command (DO_SET_MODE, ARM, NAV_LAND) after', 's', 0.1, 10.0)
    status_timeout: float = setting(2.0, 'vehicle_status/odometry older than this is stale: '
                                    'zero velocity while engaged, engage refused', 's', 0.2,
                                    30.0)
    land_after: float = setting(10.0, 'cmd_vel silent this long while engaged sends NAV_LAND '
                                '(a dead agent lands instead of hovering in the ring); 0 = '
                                'never', 's', 0.0, 600.0)
    reset_hold: float = setting(1.0, 'after a PX4 estimator reset (a new VehicleOdometry.'
                                'reset_counter) the bridge commands zero velocity this long '
                                'before it flies cmd_vel on the new estimate', 's', 0.0, 60.0)
    max_reset_jump: float = setting(2.0, 'estimator resets that move the position estimate '
                                    'farther than this (summed over reset_window) hold the '
                                    'vehicle (zero velocity) until the operator calls ~/engage '
                                    'again', 'm', 0.0, 1000.0, strict=True)
    reset_window: float = setting(5.0, 'estimator resets within this time add up: their summed '
                                  'jump is checked against max_reset_jump, and the published '
                                  'odometry counts it as position uncertainty (pose covariance) '
                                  'for this long after the last reset, or until ~/engage after '
                                  'a hold', 's', 0.0, 600.0)
    hold_drift: float = same_as(ControllerParams, 'hold_drift', description=(
        'how fast a vehicle held after a reset larger than max_reset_jump may drift from where '
        'it was: the uncertainty its odometry (and its presence) tells the others grows at this '
        "rate (as the agents' hold_drift)"))
    min_battery: float = setting(0.25, 'below this share of charge remaining (BatteryStatus.'
                                 'remaining), or at a CRITICAL battery warning, an engaged '
                                 'vehicle leaves the ring and lands, and an idle one refuses the '
                                 'engage; 0 = only the warning', '', 0.0, 1.0)
    land_timeout: float = setting(60.0, 'time for PX4 to touch down and disarm once it has '
                                  'taken over a landing (AUTO_LAND); past it the bridge says '
                                  'this vehicle has not landed (its status, fleet land)', 's',
                                  1.0, 600.0)
    outside_land_after: float = setting(10.0, 'a vehicle outside the safety area '
                                        '(safety_area_file) holds, and lands once it has been '
                                        'outside this long; 0 = hold only', 's', 0.0, 600.0)

    def __post_init__(self):
        check_fields(self)


@dataclass(frozen=True)
class VehicleCommandRequest:
    """A px4_msgs/VehicleCommand to send (the node fills the ids and the timestamp)."""

    command: int
    param1: float = 0.0
    param2: float = 0.0
    param3: float = 0.0


@dataclass(frozen=True)
class VelocitySetpoint:
    """TrajectorySetpoint content: NED velocity and yaw rate; position/yaw are left NaN."""

    velocity_ned: tuple
    yawspeed: float
    held: bool                   # True when this is zero velocity instead of cmd_vel
    warning: str | None = None   # set once per episode: why the vehicle is held


@dataclass(frozen=True)
class Outcome:
    """End of an engage or land request: success, or failure with the reason."""

    success: bool
    message: str


@dataclass(frozen=True)
class TickOutput:
    commands: tuple = ()
    info: tuple = ()
    warnings: tuple = ()
    outcome: Outcome | None = None        # the engage request ended
    land_outcome: Outcome | None = None   # the landing ended: landed and disarmed, or why not
    hold_outcome: Outcome | None = None   # the hold request ended: PX4 in Hold, or why not


@dataclass(frozen=True)
class Status:
    """What ``~/status`` says: a level (OK, WARN, ERROR), one sentence, and key values."""

    level: str
    message: str
    values: tuple = ()   # (key, value) string pairs


@dataclass
class _Pending:
    """Command sent and not yet confirmed."""

    request: VehicleCommandRequest
    sent_at: float
    sent: int = 1                 # times sent
    accepted: bool = False        # PX4 answered ACCEPTED or IN_PROGRESS
    last_result: int | None = None
    refusals: int = 0             # final refusals in a row (a NAV_LAND's: see on_command_ack)


@dataclass
class _Landing:
    started: float
    reason: str
    handed: float | None = None      # when PX4 was seen taking the landing over (its own mode)
    overdue: bool = False            # land_timeout passed and said so


@dataclass
class _Hold:
    started: float
    reason: str


@dataclass
class _Reset:
    """
    The last estimator reset: when, how far the estimate jumped, whether it latched.

    ``total`` is the jumps summed over ``reset_window`` (this one included): what the hold
    is decided on and how far the vehicle may be from its estimate.
    """

    at: float
    jump: float
    counters: tuple
    latched: bool
    total: float = math.nan
    resolved: bool = False   # the operator accepted the new estimate (~/engage)
    offset: object = None    # the jumps summed as a vector (new estimate - old), if known


# DO_SET_MODE to PX4's Hold mode (AUTO.LOITER).
_HOLD_MODE = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE, MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                   PX4_CUSTOM_MAIN_MODE_AUTO, PX4_CUSTOM_SUB_MODE_AUTO_LOITER)


def nav_state_text(nav):
    """``'14 (OFFBOARD)'``: the number and PX4's name for it."""
    name = NAV_STATE_NAMES.get(nav)
    return f'{nav} ({name})' if name else str(nav)


def result_text(result):
    return _RESULT_NAMES.get(result, str(result))


def command_text(command):
    return f'{_COMMAND_NAMES.get(command, command)} ({command})'


class OffboardSequencer:
    """
    The offboard sequence for one vehicle; times are steady-clock seconds.

    ``target_system`` is the MAVLink system id the bridge commands; vehicle_status reports the
    id PX4 really has, and a mismatch is named in the warnings and in engage failures.
    """

    def __init__(self, config=None, target_system=0):
        self.config = config or OffboardConfig()
        self.target_system = int(target_system)
        self.phase = Phase.IDLE
        self._stream_start = None        # first heartbeat/setpoint time
        self._feedback_since = None      # first PX4 feedback after the stream started
        self._stream_stopped = None      # why the heartbeat is stopped (a landing not confirmed)
        self._cmd = None                 # (velocity_ned (3,), yawspeed_ned, stamp)
        self._status = None              # (nav_state, arming_state, stamp)
        self._failsafe = False           # vehicle_status.failsafe
        self._preflight_ok = None        # vehicle_status.pre_flight_checks_pass
        self._failsafe_flags = ((), None)  # (names of the active failsafe_flags, stamp)
        self._system_id = None           # vehicle_status.system_id
        self._reported_status = None     # (nav_state, arming_state, failsafe) last logged
        self._left_offboard = None       # PX4's state when it was seen leaving while ACTIVE
        self._odom_stamp = None
        self._odom_sample = None         # (reset_counter, position) of the last odometry
        self._reset = None               # _Reset: the last estimator reset
        self._others = ()                # other publishers on the vehicle's setpoint topics
        self._engage_requested_at = None
        self._active_since = None
        self._pending = None             # _Pending: sent, not yet confirmed
        self._landing = None             # _Landing while phase is LANDING
        self._hold = None                # _Hold while phase is HOLD_REQUESTED
        self._landed = None              # (vehicle_land_detected.landed, stamp)
        self._landed_after_all = None    # a landing seen after its NAV_LAND was given up on
        self._denial = None              # final refusal from vehicle_command_ack
        self._held_reason = None         # why setpoints are zero now (reported once)
        self._report = []                # info lines for the next tick
        self._alerts = []                # warning lines for the next tick
        self._queued_outcome = None      # engage outcome decided outside a tick
        self._warned_system_id = False
        # Why PX4 may be unheard, from the node (a px4_msgs of another message version).
        self.link_hint = None
        # Why this vehicle is not placed in the world frame (px4.geo.OriginPlacement.problem).
        self.origin_problem = None
        self._battery = None             # (remaining 0..1 or NaN, warning, stamp)
        # The safety area (core.area.AreaWatch, set by the node), fed the odometry's position.
        self.area_watch = None
        # Why the vehicle is out of the ring: from a landing until the next confirmed engage.
        self.out_of_ring = None

    # ---- inputs -------------------------------------------------------------------------
    def on_cmd_vel(self, now, linear_enu, yaw_rate_enu):
        """
        World-frame (ENU) velocity command.

        Returns None, or the reason it was rejected.
        """
        linear = np.asarray(linear_enu, dtype=float).reshape(-1)
        bad = [f'linear.{axis}={value}' for axis, value in zip('xyz', linear)
               if not np.isfinite(value)]
        if not np.isfinite(yaw_rate_enu):
            bad.append(f'angular.z={yaw_rate_enu}')
        if bad:
            return ('cmd_vel rejected (non-finite ' + ', '.join(bad)
                    + '); keeping the previous command')
        self._cmd = (enu_to_ned(linear), float(yaw_rate_enu_to_ned(yaw_rate_enu)), now)
        return None

    def on_status(self, now, nav_state, arming_state, system_id=None, failsafe=False,
                  preflight_ok=None):
        """Take vehicle_status; ``preflight_ok`` is its pre_flight_checks_pass."""
        nav, arming, failsafe = int(nav_state), int(arming_state), bool(failsafe)
        self._status = (nav, arming, now)
        self._failsafe = failsafe
        self._preflight_ok = None if preflight_ok is None else bool(preflight_ok)
        self._system_id = None if system_id is None else int(system_id)
        self._heard_px4(now)
        if (nav, arming, failsafe) != self._reported_status:
            self._reported_status = (nav, arming, failsafe)
            self._report.append('PX4 reports ' + self._state_text()
                                + (' (failsafe)' if failsafe else ''))
        # Latched here, not sampled at the next tick: PX4 leaving OFFBOARD and coming back
        # between two ticks still ends this engage.
        if (self.phase is Phase.ACTIVE and self._left_offboard is None
                and (nav, arming) != (NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED)):
            self._left_offboard = self._state_text()

    def on_land_detected(self, now, landed):
        """Take vehicle_land_detected.landed: with nav_state, the truth about a landing."""
        self._landed = (bool(landed), now)
        self._heard_px4(now)

    def on_battery(self, now, remaining, warning=0):
        """Take ``BatteryStatus``: ``remaining`` charge 0..1 (negative or NaN: unknown)."""
        remaining = float(remaining)
        self._battery = (remaining if 0.0 <= remaining <= 1.0 else math.nan, int(warning), now)

    def _battery_problem(self, now):
        """Why the battery rules the vehicle out of flying, or None (unknown or stale: None)."""
        if self._battery is None or now - self._battery[2] > self.config.status_timeout:
            return None
        remaining, warning, _ = self._battery
        if remaining < self.config.min_battery:
            return (f'battery {remaining:.0%} remaining, below min_battery '
                    f'{self.config.min_battery:.0%}')
        if warning >= BATTERY_WARNING_CRITICAL:
            return f'battery warning {_BATTERY_WARNINGS.get(warning, warning)} from PX4'
        return None

    def on_failsafe_flags(self, now, active):
        """Take the names of the ``failsafe_flags`` set now (which failsafe PX4 is in)."""
        self._failsafe_flags = (tuple(active), now)

    def on_odometry(self, now, position=None, reset_counter=None):
        """
        Take a valid PX4 odometry sample.

        ``position`` (3 numbers, any fixed frame) and ``reset_counter`` (VehicleOdometry's)
        detect estimator resets: a new counter is logged with the jump of the position, and
        holds the vehicle (:attr:`OffboardConfig.reset_hold`, ``max_reset_jump``).
        """
        self._odom_stamp = now
        self._heard_px4(now)
        position = None if position is None else np.asarray(position, dtype=float)
        if reset_counter is not None:
            previous, self._odom_sample = self._odom_sample, (int(reset_counter), position)
            if previous is not None and previous[0] != int(reset_counter):
                if position is None or previous[1] is None:
                    jump, delta = math.nan, None
                else:
                    delta = position - previous[1]
                    jump = float(np.linalg.norm(delta))
                self._note_reset(now, jump, delta, (previous[0], int(reset_counter)),
                                 f'PX4 estimator reset (reset_counter {previous[0]} -> '
                                 f'{int(reset_counter)}): the position estimate jumped')
        if self.area_watch is not None and position is not None:
            lines = self.area_watch.update(now, self.trusted_position(now, position)[0])
            if self.phase is Phase.ACTIVE:
                self._alerts.extend(lines)

    def on_reference_change(self, now, jump, delta=None):
        """
        Take a new estimator reference that moved this vehicle's origin by ``jump`` [m].

        Handled as an estimator reset of that size: logged, held for ``reset_hold``, and past
        ``max_reset_jump`` until the operator's ``~/engage``.
        """
        self._note_reset(now, float(jump), delta, ('ref', 'ref'),
                         'PX4 estimator reference changed (ref_timestamp): the origin moved')

    def _note_reset(self, now, jump, delta, counters, what):
        """Record a reset of ``jump`` m (NaN: unknown), warn once, and decide the hold."""
        # Resets within reset_window add up: two 1.5 m jumps in 0.3 s are a 3 m jump.
        earlier = self._reset
        total, offset = jump, None
        if delta is not None and np.all(np.isfinite(delta)):
            offset = np.asarray(delta, dtype=float)
        if (earlier is not None and not earlier.resolved
                and (earlier.latched or now - earlier.at <= self.config.reset_window)):
            total = jump + earlier.total
            offset = None if offset is None or earlier.offset is None else (
                offset + earlier.offset)
        latched = not total <= self.config.max_reset_jump  # NaN (unknown) latches too
        self._reset = _Reset(now, jump, counters, latched, total, offset=offset)
        moved = ('by an unknown distance' if not math.isfinite(jump) else f'{jump:.2f} m'
                 + ('' if delta is None else
                    ' (' + ', '.join(f'{d:+.2f}' for d in delta) + ')'))
        if total != jump and math.isfinite(total):
            moved += (f', {total:.2f} m with the resets of the last reset_window '
                      f'{self.config.reset_window:g} s')
        line = f'{what} {moved}; '
        if latched:
            line += (f'more than max_reset_jump {self.config.max_reset_jump:g} m: commanding '
                     'zero velocity until the operator calls ~/engage again')
        else:
            line += (f'commanding zero velocity for reset_hold {self.config.reset_hold:g} s, '
                     'then flying on the new estimate')
        self._alerts.append(line)

    def on_other_publishers(self, now, nodes, topics=''):
        """
        Take the other nodes that publish on this vehicle's ``/fmu/in/`` setpoint topics.

        A new one is warned about once, naming it; engaging is refused and an engaged vehicle
        holds while any is there (two setpoint streams interleave: the vehicle flies neither).
        """
        nodes = tuple(sorted(set(nodes)))
        if nodes == self._others:
            return
        new = [n for n in nodes if n not in self._others]
        self._others = nodes
        if new:
            self._alerts.append(
                f'another node publishes setpoints to this vehicle ({topics}): '
                f'{", ".join(new)}; its setpoints interleave with this bridge\'s: engage '
                'is refused and an engaged vehicle holds (zero velocity) while it is there')
        elif not nodes:
            self._report.append('no other node publishes setpoints to this vehicle any more')

    def on_command_ack(self, now, command, result, target_system=None, target_component=None,
                       source=(None, None)):
        """
        Return a vehicle_command_ack.

        Acks addressed to another sender (``target_system`` / ``target_component`` not ours,
        ``source``) are ignored. TEMPORARILY_REJECTED is retried; any other refusal of the pending
        command ends the engage request or the landing.
        """
        ours_system, ours_component = source
        if ((ours_system is not None and target_system is not None
             and target_system != ours_system)
                or (ours_component is not None and target_component is not None
                    and target_component != ours_component)):
            return
        pending = self._pending
        if pending is None or command != pending.request.command:
            return
        pending.last_result = result
        if result == VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED:
            self._report.append(f'PX4 temporarily rejected {_COMMAND_NAMES.get(command, command)}'
                                f': retrying every {self.config.command_retry:g} s')
            return
        if result in (VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_IN_PROGRESS):
            pending.accepted = True
            pending.refusals = 0
            return
        pending.refusals += 1
        if command == VEHICLE_CMD_NAV_LAND and (pending.refusals < 2 or pending.sent < 2):
            # Acks carry no request id: one refusal may answer an earlier attempt, or come
            # late. The landing's truth is PX4's state; NAV_LAND is sent again at once, and a
            # refusal counts only when two sends in a row are refused.
            pending.sent_at = -math.inf
            self._report.append(f'PX4 refused NAV_LAND ({result_text(result)}): sending it '
                                'again (an ack may answer an earlier attempt)')
            return
        self._denial = (command, f'PX4 refused {command_text(command)}: {result_text(result)}')

    # ---- operator requests ----------------------------------------------------------------
    def request_engage(self, now):
        """
        Start the offboard + arm sequence.

        Returns None, or why it cannot start. While ACTIVE and held after an estimator reset
        larger than ``max_reset_jump``, an engage acknowledges the new estimate instead.
        """
        if self.phase is Phase.ACTIVE and self._reset is not None and self._reset.latched:
            problem = self._others_problem()
            if problem:
                return problem
            self._accept_estimate()
            self._queued_outcome = Outcome(True, 'engaged again after the estimator reset: '
                                                 'following cmd_vel on the new estimate')
            self._report.append(self._queued_outcome.message)
            return None
        if self.phase is Phase.LANDING:
            return ('a landing is in progress: engage once PX4 reports the vehicle landed and '
                    'disarmed')
        if self.phase is not Phase.IDLE:
            return f'an engage request is already {self.phase.value}'
        problem = self.engage_problem(now)
        if problem:
            return problem
        if self._stream_stopped is not None:
            # The heartbeat was stopped: PX4 must hear it for warmup again before OFFBOARD.
            self._stream_stopped = self._landed_after_all = None
            self._stream_start = self._feedback_since = None
            self._report.append('offboard heartbeat restarted for this engage')
        self._accept_estimate()
        self._engage_requested_at = now
        self._denial = None
        self._pending = None
        self.phase = Phase.MODE_REQUESTED
        return None

    def engage_problem(self, now):
        """
        Why an engage from IDLE would be refused now, or None; changes nothing.

        ``~/status`` reports it as ``ready`` (``yes`` or the reason), the pre-flight a fleet
        check reads.
        """
        problem = (self._others_problem() or self._link_problem(now)
                   or self._system_id_problem() or self._failsafe_problem(now)
                   or self._landing_problem() or self.origin_problem or self._area_problem())
        battery = self._battery_problem(now)
        if problem is None and battery:
            problem = f'{battery}: charge or swap it before engaging'
        return problem

    def request_land(self, now, why=OPERATOR_REQUEST):
        """
        Hand over to PX4's land mode; cancels an engage or hold request in progress.

        The landing ends (``TickOutput.land_outcome``) when PX4 reports the vehicle landed and
        disarmed, or when PX4 did not take it over (then the heartbeat stops), or someone took
        over. ``land_timeout`` after PX4 took it over, a vehicle still not landed is named.
        """
        if self.phase is Phase.LANDING:
            return TickOutput(info=('NAV_LAND already pending: waiting for PX4 to land',))
        cancelled = self._cancel_request('a land request')
        ground = None if self._status_stale(now) else self._touchdown(-math.inf)
        if ground is not None:  # nothing to land: NAV_LAND would only put PX4 in AUTO_LAND
            message = f'landed: already on the ground, {ground} (nothing sent)'
            self.out_of_ring = f'landed ({why})'
            return TickOutput(info=(message,), outcome=cancelled[0],
                              land_outcome=Outcome(True, message), hold_outcome=cancelled[1])
        self.phase = Phase.LANDING
        self._landing = _Landing(now, why)
        self.out_of_ring = f'landing ({why})'
        land = VehicleCommandRequest(VEHICLE_CMD_NAV_LAND)
        self._pending = _Pending(land, now)
        self._denial = None
        return TickOutput(commands=(land,),
                          info=(f'sending NAV_LAND ({why}); waiting up to confirm_timeout '
                                f'{self.config.confirm_timeout:g} s for PX4 to take it over',),
                          outcome=cancelled[0], hold_outcome=cancelled[1])

    def request_hold(self, now, why=OPERATOR_REQUEST):
        """
        Switch PX4 to Hold (AUTO.LOITER) at once, from any phase: the operator's stop.

        Cancels an engage or a landing in progress; the vehicle leaves the ring. Confirmed
        (``TickOutput.hold_outcome``) when PX4 reports AUTO_LOITER; from then on the bridge
        sends PX4 nothing until the next engage (``streaming``).
        """
        if self.phase is Phase.HOLD_REQUESTED:
            return TickOutput(info=('Hold already requested: waiting for PX4 to confirm',))
        cancelled = self._cancel_request('a hold request')
        self.phase = Phase.HOLD_REQUESTED
        self._hold = _Hold(now, why)
        self.out_of_ring = f'hold ({why})'
        self._pending = _Pending(_HOLD_MODE, now)
        self._denial = None
        return TickOutput(commands=(_HOLD_MODE,),
                          info=(f'sending DO_SET_MODE Hold ({why}); waiting up to '
                                f'confirm_timeout {self.config.confirm_timeout:g} s for PX4 '
                                'to confirm it',),
                          outcome=cancelled[0], land_outcome=cancelled[2])

    def _cancel_request(self, by):
        """End the request in progress (engage, hold, landing): its outcomes, then idle."""
        engage = hold = land = None
        if self.phase in (Phase.MODE_REQUESTED, Phase.ARM_REQUESTED):
            engage = Outcome(False, f'engage cancelled by {by}')
        elif self.phase is Phase.HOLD_REQUESTED:
            hold = Outcome(False, f'hold cancelled by {by}')
        elif self.phase is Phase.LANDING:
            land = Outcome(False, f'landing cancelled by {by}')
        self._go_idle()
        return engage, hold, land

    # ---- outputs ----------------------------------------------------------------------------
    @property
    def streaming(self):
        """
        Whether the OffboardControlMode heartbeat and the setpoints are published now.

        px4-ros2-interface-lib's rule: only while PX4 is in the mode this bridge asked for, or
        while this bridge is switching it there. So: while an engage is switching PX4 to
        OFFBOARD, while engaged and PX4 reports OFFBOARD, and (to hold it, zero velocity) while
        PX4 reports OFFBOARD and ARMED without this bridge's engage. Never in another PX4 mode:
        a setpoint stream mixes with that mode's own (Land, Hold, RTL: a landing is never
        detected), and a live heartbeat at a disarm returns PX4 to OFFBOARD. Stopped until the
        next engage after a landing PX4 did not confirm.
        """
        if self._stream_stopped is not None:
            return False
        if self.phase in (Phase.MODE_REQUESTED, Phase.ARM_REQUESTED):
            return True
        if self.phase is Phase.ACTIVE:
            return self._offboard_in_status()
        return self._offboard_in_status() and self._status[1] == ARMING_STATE_ARMED

    def _track_stream(self, now):
        """Note when the stream (re)started: PX4 must hear it for warmup before OFFBOARD."""
        if not self.streaming:
            self._stream_start = self._feedback_since = None
        elif self._stream_start is None:
            self._stream_start, self._feedback_since = now, None

    def setpoint(self, now):
        """Return the velocity setpoint to stream now (always finite; only while streaming)."""
        self._track_stream(now)
        reason = self._hold_reason(now)
        if reason is None:
            if self._held_reason is not None and self._held_reason.startswith('reset'):
                self._report.append('estimator reset hold over: flying cmd_vel on the new '
                                    'estimate')
            self._held_reason = None
            return VelocitySetpoint(tuple(self._cmd[0]), self._cmd[1], held=False)
        warning = None
        if reason[0] != self._held_reason:
            self._held_reason = reason[0]
            warning = reason[1]
        return VelocitySetpoint(_ZERO, 0.0, held=True, warning=warning)

    def tick(self, now):
        """Advance the sequence at the heartbeat rate; returns what to send and report."""
        self._track_stream(now)
        info, self._report = tuple(self._report), []
        warnings, self._alerts = tuple(self._alerts), []
        if self._system_id_problem() and not self._warned_system_id:
            self._warned_system_id = True
            warnings += (self._system_id_problem(),)
        if self.phase is Phase.IDLE:
            out = self._watch_given_up_landing()
        elif self.phase is Phase.ACTIVE:
            out = self._watch_active(now)
        elif self.phase is Phase.LANDING:
            out = self._advance_landing(now)
        elif self.phase is Phase.HOLD_REQUESTED:
            out = self._advance_hold(now)
        else:
            out = self._advance_request(now)
        outcome = out.outcome
        if outcome is None and self._queued_outcome is not None:
            outcome = self._queued_outcome
        self._queued_outcome = None
        return TickOutput(out.commands, info + out.info, warnings + out.warnings, outcome,
                          out.land_outcome, out.hold_outcome)

    def status(self, now):
        """Return what ``~/status`` says now."""
        values = [('phase', self.phase.value), ('streaming', str(self.streaming).lower())]
        if self._status is not None:
            values += [('nav_state', nav_state_text(self._status[0])),
                       ('arming_state', _ARMING_NAMES.get(self._status[1],
                                                          str(self._status[1]))),
                       ('failsafe', str(self._failsafe).lower())]
        if self._reset is not None:
            values += [('last_reset_jump_m', f'{self._reset.jump:.2f}'),
                       ('reset_counter', str(self._odom_sample[0]) if self._odom_sample
                        else 'none')]
        if self._others:
            values.append(('other_publishers', ', '.join(self._others)))
        if self._reset is not None:
            values.append(('position_uncertainty_m', f'{self.position_uncertainty(now):.2f}'))
        if self._battery is not None:
            values.append(('battery_remaining', f'{self._battery[0]:.2f}'))
        if self._landed is not None:
            values.append(('landed', self._landed_text()))
        if self.out_of_ring:
            values.append(('out_of_ring', self.out_of_ring))
        if self.area_watch is not None:
            values.append(('safety_area', self.area_watch.state_text()))
        if self.phase is Phase.IDLE:
            values.append(('ready', self.engage_problem(now) or 'yes'))
        else:
            values.append(('ready', f'no: {self.phase.value}'))
        if self.phase is Phase.ACTIVE:  # engaged, and whether it flies cmd_vel or holds (why)
            hold = self._hold_reason(now)
            values.append(('holding', 'no' if hold is None else self._hold_text(now, hold)))
        values = tuple(values)
        if self._stream_stopped is not None:
            late = self._landed_after_all
            if late is not None and late[1] is not None:
                return Status(OK, f'landing confirmed: {late[1]}; offboard heartbeat stopped, '
                              '~/engage starts it again', values)
            return Status(ERROR, 'offboard heartbeat stopped: ' + self._stream_stopped, values)
        if self._reset is not None and self._reset.latched:
            return Status(ERROR, self._reset_latched_text() + ': holding (zero velocity) until '
                          'the operator calls ~/engage', values)
        if self._others:
            return Status(WARN, self._others_problem(), values)
        if self.phase is Phase.LANDING:
            landing = self._landing
            if landing.handed is None:
                return Status(OK, 'landing: NAV_LAND sent, waiting for PX4 to take it over',
                              values)
            if landing.overdue:
                return Status(ERROR, self._not_landed_text(now), values)
            return Status(OK, f'landing: PX4 lands the vehicle ({self._state_text()}), '
                          'waiting for touchdown and disarm', values)
        if self.phase is Phase.HOLD_REQUESTED:
            return Status(WARN, f'hold requested ({self._hold.reason}): DO_SET_MODE Hold sent, '
                          'waiting for PX4 to confirm', values)
        if self._failsafe_text(now):
            return Status(WARN, self._failsafe_text(now), values)
        if self.phase is Phase.ACTIVE:
            reason = self._hold_reason(now)
            if reason is None:
                return Status(OK, 'engaged: following cmd_vel', values)
            return Status(WARN, 'engaged, holding (zero velocity): '
                          + self._hold_text(now, reason), values)
        if self.phase is Phase.IDLE:
            link = self._link_problem(now)
            if link:
                return Status(WARN, f'idle: {link}', values)
            if self.out_of_ring and self.out_of_ring.startswith('landed'):
                return Status(OK, f'{self.out_of_ring}: PX4 reports {self._state_text()}; '
                              '~/engage to fly again', values)
            if self.out_of_ring and self.out_of_ring.startswith('hold'):
                return Status(WARN, f'{self.out_of_ring}: PX4 reports {self._state_text()}; '
                              '~/engage to fly again, ~/land to land', values)
            if self.streaming:
                return Status(OK, 'idle: PX4 is in OFFBOARD, not engaged by this bridge: '
                              'holding it at zero velocity; ~/engage to fly', values)
            return Status(OK, f'idle: PX4 reports {self._state_text()}, the bridge sends it '
                          'nothing; ~/engage to fly', values)
        return Status(OK, f'engaging ({self.phase.value})', values)

    # ---- internals --------------------------------------------------------------------------
    def _heard_px4(self, now):
        if self._stream_start is not None and self._feedback_since is None:
            self._feedback_since = now

    def _offboard_in_status(self):
        return self._status is not None and self._status[0] == NAVIGATION_STATE_OFFBOARD

    def _reset_latched_text(self):
        total = self._reset.total
        moved = f'{total:.2f} m' if math.isfinite(total) else 'by an unknown distance'
        return (f'PX4 estimator reset moved the position estimate {moved} '
                f'(> max_reset_jump {self.config.max_reset_jump:g} m)')

    def _hold_reason(self, now):
        """(kind, message) of why the setpoint must be zero now, or None to fly cmd_vel."""
        if self.phase is not Phase.ACTIVE:
            if (self._offboard_in_status() and self.phase is Phase.IDLE
                    and self._stream_stopped is None):
                return ('not engaged', 'PX4 is in OFFBOARD but this bridge was not engaged: '
                        'holding (zero velocity) until the operator calls ~/engage')
            return ('idle', None)
        if self._left_offboard is not None or self._status_stale(now):
            return ('ending', None)  # the next tick goes idle and says why
        if self._others:
            return ('others', None)  # on_other_publishers warned, naming them
        if self.area_watch is not None and self.area_watch.outside is not None:
            return ('outside', None)  # on_odometry warned (core.area.AreaWatch)
        if self._reset is not None and self._reset.latched:
            return ('reset latched', None)  # on_odometry warned
        if (self._reset is not None and not self._reset.resolved
                and now - self._reset.at < self.config.reset_hold):
            return ('reset hold', None)
        if self._odom_stamp is None or now - self._odom_stamp > self.config.status_timeout:
            age = 'none received' if self._odom_stamp is None else (
                f'{now - self._odom_stamp:.1f} s old')
            return ('odometry', f'PX4 odometry stale ({age} > status_timeout '
                    f'{self.config.status_timeout:g} s): commanding zero velocity, cmd_vel not '
                    'forwarded')
        last = None if self._cmd is None else self._cmd[2]
        if last is None or last < self._active_since:
            # Nothing since the engage: an agent out of the ring for its vehicle rejoins at the
            # engage, its first command one tick later. Stale only cmd_timeout after it.
            waited = now - self._active_since
            if waited <= self.config.cmd_timeout:
                return ('awaiting cmd_vel', None)
            return ('cmd_vel', f'no cmd_vel since the engage {waited:.2f} s ago (cmd_timeout '
                    f'{self.config.cmd_timeout:g} s): commanding zero velocity (hover)')
        if now - last > self.config.cmd_timeout:
            return ('cmd_vel', f'cmd_vel stale ({now - last:.2f} s old > cmd_timeout '
                    f'{self.config.cmd_timeout:g} s): commanding zero velocity (hover)')
        return None

    def _hold_text(self, now, reason):
        """Say why an engaged vehicle holds: the reason's message, or the condition named."""
        kind, message = reason
        if message:
            return message
        return {'others': self._others_problem(), 'reset latched': (
            self._reset_latched_text() if self._reset is not None else kind),
            'outside': 'outside the safety area'}.get(kind) or kind

    def _accept_estimate(self):
        """Accept the estimate after a reset (the operator's engage): no hold, no uncertainty."""
        if self._reset is not None:
            self._reset.latched = False
            self._reset.resolved = True

    def trusted_position(self, now, position):
        """
        Return (position, uncertainty [m]) of the vehicle for the others, from an estimate.

        While a reset larger than ``max_reset_jump`` holds the vehicle (until ``~/engage``),
        the vehicle is where it was before the jump, not where the new estimate says (it holds,
        and a jump moves only the estimate): the estimate less the jumps, its uncertainty
        growing at ``hold_drift`` (PX4 holding on an estimate that jumped). A disc as wide
        as a 45 m jump would swallow a whole ring and leave the others no way to keep clear of
        the real vehicle inside it. Otherwise the estimate, with :meth:`position_uncertainty`.
        """
        reset = self._reset
        position = np.asarray(position, dtype=float)
        if self._held_where_it_was(reset):
            return position - reset.offset, self.position_uncertainty(now)
        return position, self.position_uncertainty(now)

    @staticmethod
    def _held_where_it_was(reset):
        return (reset is not None and reset.latched and not reset.resolved
                and reset.offset is not None)

    def position_uncertainty(self, now):
        """
        How far (m) the vehicle may be from the position the others are told after resets.

        Held after a large reset (:meth:`trusted_position`): the drift of a hold since the
        reset. Otherwise the jumps summed over ``reset_window``: for ``reset_window`` after the
        last reset, or after a hold until the operator's ``~/engage`` accepts the new estimate.
        A jump of unknown size counts as ``max_reset_jump``. 0 when there is no such reset.
        """
        reset = self._reset
        if reset is None or reset.resolved:
            return 0.0
        if self._held_where_it_was(reset):
            return min(self.config.hold_drift * (now - reset.at), reset.total)
        if not reset.latched and now - reset.at > max(self.config.reset_window,
                                                      self.config.reset_hold):
            return 0.0
        total = reset.total
        return total if math.isfinite(total) else self.config.max_reset_jump

    def _engaged_text(self, now):
        """Say what an engage confirmed now does: follow cmd_vel, or hold after a reset (why)."""
        reset = self._reset
        if reset is not None and reset.latched:
            return ('holding (zero velocity): ' + self._reset_latched_text()
                    + '; call ~/engage again to accept the new estimate')
        if (reset is not None and not reset.resolved
                and now - reset.at < self.config.reset_hold):
            return (f'holding (zero velocity) for reset_hold {self.config.reset_hold:g} s after '
                    f'an estimator reset ({reset.jump:.2f} m), then following cmd_vel')
        return 'following cmd_vel'

    def _area_problem(self):
        """Why an engage is refused for the safety area (outside it, or no position yet)."""
        watch = self.area_watch
        if watch is None:
            return None
        if watch.outside is not None:
            return (f'outside the safety area ({watch.outside}): carry the vehicle inside '
                    'before engaging')
        if watch.since is None and not watch.known:
            return 'no position in the world frame yet to check against the safety area'
        return None

    def _landing_problem(self):
        """Why an engage must not start now: PX4 is landing (armed, in AUTO_LAND), or None."""
        if self._status is None:
            return None
        nav, arming, _ = self._status
        if nav == NAVIGATION_STATE_AUTO_LAND and arming == ARMING_STATE_ARMED:
            return (f'PX4 is landing ({self._state_text()}): the bridge never takes a vehicle '
                    'out of a landing; take over with the RC or the ground station first, or '
                    'engage once it has landed and disarmed')
        return None

    def _link_problem(self, now):
        if self._status is None:
            if self.link_hint:
                return f'no vehicle_status received from PX4 yet: {self.link_hint}'
            return ('no vehicle_status received from PX4 yet (is the uXRCE-DDS agent running '
                    'and px4_namespace right?)')
        if now - self._status[2] > self.config.status_timeout:
            return f'vehicle_status is stale ({now - self._status[2]:.1f} s old)'
        if self._odom_stamp is None:
            return 'no valid vehicle_odometry received from PX4 yet'
        if now - self._odom_stamp > self.config.status_timeout:
            return f'vehicle_odometry is stale ({now - self._odom_stamp:.1f} s old)'
        return None

    def _system_id_problem(self):
        if (self._system_id is None or self.target_system == 0
                or self._system_id == self.target_system):
            return None
        return (f'target_system is {self.target_system} but this PX4 reports system_id '
                f'{self._system_id} (MAV_SYS_ID): PX4 ignores commands addressed to another '
                'system; set target_system to it')

    def _others_problem(self):
        if not self._others:
            return None
        return ('another node publishes setpoints to this vehicle: '
                + ', '.join(self._others) + '; stop it first (one bridge per vehicle)')

    def _failsafe_text(self, now):
        """'PX4 is in a failsafe (nav_state=..., active: ...)', or None."""
        if not self._failsafe or self._status is None:
            return None
        flags, stamp = self._failsafe_flags
        which = (f'; active: {", ".join(flags)}' if flags and stamp is not None
                 and now - stamp <= self.config.status_timeout else '')
        return f'PX4 is in a failsafe (nav_state={nav_state_text(self._status[0])}{which})'

    def _failsafe_problem(self, now):
        text = self._failsafe_text(now)
        return None if text is None else text + ': clear it (or take over) before engaging'

    def _state_text(self):
        nav, arming, _ = self._status
        return (f'nav_state={nav_state_text(nav)}, '
                f'arming_state={arming} ({_ARMING_NAMES.get(arming, "unknown")})')

    def _go_idle(self):
        self.phase = Phase.IDLE
        self._left_offboard = None
        self._pending = None
        self._landing = None
        self._hold = None
        self._engage_requested_at = None
        self._active_since = None

    def _fail(self, reason, commands=(), info=()):
        self._go_idle()
        return TickOutput(commands=commands, info=info, warnings=(f'engage failed: {reason}',),
                          outcome=Outcome(False, reason))

    def _leave_offboard(self, reason):
        """End a request with the vehicle switched out of OFFBOARD to Hold, saying why."""
        return self._fail(reason, commands=(_HOLD_MODE,),
                          info=('switching PX4 to Hold (AUTO.LOITER): the vehicle is not left '
                                'in OFFBOARD disarmed',))

    def _refusal(self, command, reason):
        """Name a final refusal of the engage's command: mode refused or arming refused."""
        if command == VEHICLE_CMD_COMPONENT_ARM_DISARM:
            preflight = ("; PX4's pre-flight checks fail (pre_flight_checks_pass false)"
                         if self._preflight_ok is False else '')
            return f'arming refused: {reason}{preflight}'
        return f'OFFBOARD mode refused: {reason}'

    def _unconfirmed(self, now):
        """Why an engage was not confirmed in time: PX4's last answer, its state, a failsafe."""
        pending = self._pending
        if pending is None:
            answer = 'nothing was sent (PX4 did not hear the stream for warmup)'
        else:
            what = ('arming' if pending.request.command == VEHICLE_CMD_COMPONENT_ARM_DISARM
                    else 'OFFBOARD mode')
            sent = f'sent {pending.sent} time{"s" if pending.sent > 1 else ""}'
            name = command_text(pending.request.command)
            if pending.last_result is None:
                answer = f'{what} not confirmed: PX4 did not answer {name} ({sent})'
            elif pending.last_result == VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED:
                answer = f'{what} refused: PX4 answered {name} TEMPORARILY_REJECTED ({sent})'
            else:
                answer = (f'{what} not confirmed: PX4 answered {name} '
                          f'{result_text(pending.last_result)} ({sent})')
        parts = [answer, self._state_text()]
        if self._failsafe_text(now):
            parts.append(self._failsafe_text(now))
        if (pending is not None and pending.request.command == VEHICLE_CMD_COMPONENT_ARM_DISARM
                and self._preflight_ok is False):
            parts.append("PX4's pre-flight checks fail (pre_flight_checks_pass false)")
        if self._system_id_problem():
            parts.append(self._system_id_problem())
        return f'no confirmation within {self.config.confirm_timeout:g} s: ' + '; '.join(parts)

    def _advance_request(self, now):
        if self._denial:
            command, reason = self._denial
            self._denial = None
            reason = self._refusal(command, reason)
            if command == VEHICLE_CMD_COMPONENT_ARM_DISARM and self._offboard_in_status():
                return self._leave_offboard(reason)
            return self._fail(reason)
        link = self._link_problem(now) or self._others_problem()
        if link:
            return self._fail(link)
        nav, arming, _ = self._status
        offboard, armed = nav == NAVIGATION_STATE_OFFBOARD, arming == ARMING_STATE_ARMED
        if self._failsafe and not (offboard and armed):
            reason = self._failsafe_text(now) + ': engage stopped'
            return self._leave_offboard(reason) if offboard else self._fail(reason)
        if offboard and armed:
            self.phase = Phase.ACTIVE
            self.out_of_ring = None
            self._pending = None
            self._active_since = now
            message = 'engaged: PX4 confirmed OFFBOARD and ARMED; ' + self._engaged_text(now)
            return TickOutput(info=(message,), outcome=Outcome(True, message))
        if nav == NAVIGATION_STATE_AUTO_LAND and armed:
            return self._fail(f'PX4 started landing during the engage ({self._state_text()}): '
                              'the bridge never takes a vehicle out of a landing')
        if now - self._engage_requested_at > self.config.confirm_timeout:
            reason = self._unconfirmed(now)
            if offboard:
                return self._leave_offboard(reason)
            return self._fail(reason)
        if self._feedback_since is None or now - self._feedback_since < self.config.warmup:
            return TickOutput()  # PX4 must hear the stream for warmup before the mode request
        if self.phase is Phase.ARM_REQUESTED and not offboard:
            # PX4 was in OFFBOARD for this request and left it: a pilot or the GCS took over.
            return self._fail(f'PX4 left OFFBOARD during the engage ({self._state_text()}): '
                              'someone else took control; OFFBOARD is not requested again')
        if offboard:
            self.phase = Phase.ARM_REQUESTED
            wanted = VehicleCommandRequest(VEHICLE_CMD_COMPONENT_ARM_DISARM, param1=1.0)
        else:
            self.phase = Phase.MODE_REQUESTED
            wanted = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE,
                                           MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                           PX4_CUSTOM_MAIN_MODE_OFFBOARD)
        return self._send_pending(now, wanted)

    def _send_pending(self, now, wanted):
        """Send ``wanted`` now unless it was sent less than ``command_retry`` ago."""
        pending = self._pending
        if pending is not None and pending.request.command == wanted.command:
            if now - pending.sent_at < self.config.command_retry:
                return TickOutput()
            pending.sent_at, pending.sent = now, pending.sent + 1
            return TickOutput(commands=(wanted,),
                              info=(f'resending {_COMMAND_NAMES[wanted.command]} (attempt '
                                    f'{pending.sent})',))
        self._pending = _Pending(wanted, now)
        return TickOutput(commands=(wanted,), info=(f'sending {_COMMAND_NAMES[wanted.command]}',))

    def _heard_after(self, since):
        """PX4's (nav_state, arming_state) if its status was heard at or after ``since``."""
        if self._status is None or self._status[2] < since:
            return None
        return self._status[:2]

    def _landing_seen(self, since):
        """
        Return what shows PX4 landing or landed, heard after ``since``, or None.

        The truth is PX4's state, not its acks: a landing mode (AUTO_LAND, ...), DISARMED, or
        vehicle_land_detected ``landed``.
        """
        state = self._heard_after(since)
        if state is not None and (state[0] in LANDING_NAV_STATES
                                  or state[1] == ARMING_STATE_DISARMED):
            return f'PX4 reports {self._state_text()}'
        if self._landed is not None and self._landed[0] and self._landed[1] >= since:
            return 'PX4 reports landed (vehicle_land_detected)'
        return None

    def _touchdown(self, since):
        """
        Return what shows the vehicle landed and disarmed, heard after ``since``, or None.

        PX4 disarms by itself once its land detector says landed (COM_DISARM_LAND); its
        ``vehicle_land_detected`` must agree when the bridge hears it.
        """
        state = self._heard_after(since)
        if state is None or state[1] != ARMING_STATE_DISARMED:
            return None
        if self._landed is not None and not self._landed[0]:
            return None
        detector = ', landed' if self._landed is not None else ''
        return f'PX4 reports {self._state_text()}{detector}'

    def airborne(self):
        """
        Whether the vehicle may be in the air.

        PX4 reports it armed, and its land detector (when heard) not landed. Unknown (no
        vehicle_status yet): False.
        """
        if self._status is None or self._status[1] != ARMING_STATE_ARMED:
            return False
        return self._landed is None or not self._landed[0]

    def _landed_text(self):
        return 'unknown' if self._landed is None else str(self._landed[0]).lower()

    def _advance_landing(self, now):
        landing, pending = self._landing, self._pending
        info = ()
        if landing.handed is None:
            seen = self._landing_seen(landing.started)
            if seen is None:
                if self._denial:
                    _, reason = self._denial
                    self._denial = None
                    return self._landing_failed(reason)
                if now - landing.started > self.config.confirm_timeout:
                    sent = f'sent {pending.sent} time{"s" if pending.sent > 1 else ""}'
                    if pending.last_result is None:
                        answer = f'PX4 did not answer NAV_LAND ({sent})'
                    else:
                        answer = (f'PX4 answered NAV_LAND {result_text(pending.last_result)} '
                                  f'({sent})')
                    state = ('no vehicle_status' if self._status is None
                             else f'PX4 reports {self._state_text()}')
                    return self._landing_failed(
                        f'no confirmation within {self.config.confirm_timeout:g} s: {answer}; '
                        f'{state}')
                return self._send_pending(now, pending.request)
            landing.handed, self._pending = now, None
            info = (f'PX4 took the landing over: {seen}; the bridge sends it nothing now, and '
                    'waits for touchdown and disarm (land_timeout '
                    f'{self.config.land_timeout:g} s)',)
        done = self._touchdown(landing.handed)
        if done is not None:
            message = (f'landed: {done}, {now - landing.started:.1f} s after NAV_LAND '
                       f'({landing.reason})')
            self._go_idle()
            self.out_of_ring = f'landed ({landing.reason})'
            return TickOutput(info=info + (message,), land_outcome=Outcome(True, message))
        state = self._heard_after(landing.handed)
        if (state is not None and state[1] == ARMING_STATE_ARMED
                and state[0] not in LANDING_NAV_STATES | {NAVIGATION_STATE_OFFBOARD}):
            message = (f'landing taken over: PX4 reports {self._state_text()} (an RC switch, '
                       'the ground station or a failsafe); the bridge sends it nothing, a new '
                       '~/engage is needed to fly again')
            self._go_idle()
            self.out_of_ring = f'landing taken over ({nav_state_text(state[0])})'
            return TickOutput(info=info, warnings=(message,),
                              land_outcome=Outcome(False, message))
        if not landing.overdue and now - landing.handed > self.config.land_timeout:
            landing.overdue = True
            message = self._not_landed_text(now)
            return TickOutput(info=info, warnings=(message,),
                              land_outcome=Outcome(False, message))
        return TickOutput(info=info)

    def _not_landed_text(self, now):
        landing = self._landing
        return (f'not landed {now - landing.handed:.0f} s after PX4 took the landing over '
                f'(land_timeout {self.config.land_timeout:g} s): PX4 reports '
                f'{self._state_text()}, landed {self._landed_text()}; check the vehicle')

    def _advance_hold(self, now):
        hold, pending = self._hold, self._pending
        state = self._heard_after(hold.started)
        if state is not None and state[0] == NAVIGATION_STATE_AUTO_LOITER:
            message = (f'holding: PX4 reports {self._state_text()} ({hold.reason}); the bridge '
                       'sends it nothing; ~/engage flies again, ~/land lands')
            self._go_idle()
            return TickOutput(info=(message,), hold_outcome=Outcome(True, message))
        reason = None
        if self._denial:
            reason = self._denial[1]
            self._denial = None
        elif now - hold.started > self.config.confirm_timeout:
            sent = f'sent {pending.sent} time{"s" if pending.sent > 1 else ""}'
            answer = ('PX4 did not answer' if pending.last_result is None
                      else f'PX4 answered {result_text(pending.last_result)}')
            reason = f'no confirmation within {self.config.confirm_timeout:g} s: {answer} ({sent})'
        if reason is None:
            return self._send_pending(now, pending.request)
        state = 'no vehicle_status' if self._status is None else self._state_text()
        then = ('; the bridge holds it in OFFBOARD at zero velocity' if self.streaming else '')
        message = f'Hold not confirmed ({reason}); PX4 reports {state}{then}'
        self._go_idle()
        return TickOutput(warnings=(message,), hold_outcome=Outcome(False, message))

    def _watch_given_up_landing(self):
        """Say once that a landing given up on (heartbeat stopped) shows after all."""
        given_up = self._landed_after_all
        if self._stream_stopped is None or given_up is None or given_up[1] is not None:
            return TickOutput()
        seen = self._landing_seen(given_up[0])
        if seen is None:
            return TickOutput()
        self._landed_after_all = (given_up[0], seen)
        return TickOutput(info=(f'landing confirmed after all: {seen} (its confirmation came '
                                'late); the offboard heartbeat stays stopped, ~/engage starts '
                                'it again',))

    def _landing_failed(self, reason):
        """Stop the heartbeat: PX4's offboard-loss failsafe takes the vehicle. One line."""
        if self._offboard_in_status():
            then = ("so that PX4's offboard-loss failsafe takes the vehicle "
                    f'({OFFBOARD_LOSS_PARAMETERS})')
        else:
            nav = 'unknown' if self._status is None else nav_state_text(self._status[0])
            then = (f'PX4 is not in OFFBOARD (nav_state={nav}): it keeps its own mode')
        message = (f'NAV_LAND not confirmed ({reason}): stopping the offboard heartbeat, {then};'
                   ' ~/engage starts it again')
        self._landed_after_all = (self._landing.started, None)
        self._go_idle()
        self._stream_stopped = f'NAV_LAND not confirmed ({reason})'
        return TickOutput(warnings=(message,), land_outcome=Outcome(False, message))

    def _status_stale(self, now):
        return self._status is None or now - self._status[2] > self.config.status_timeout

    def _watch_active(self, now):
        left = self._left_offboard  # on_status latches every exit seen while ACTIVE
        if left is not None:
            self._go_idle()
            self.out_of_ring = f'PX4 left OFFBOARD ({left})'
            return TickOutput(warnings=(
                f'PX4 left offboard control ({left}): bridge idle, sending PX4 nothing (its '
                'mode flies the vehicle); a new ~/engage is needed to fly again',))
        if self._status_stale(now):
            self._go_idle()
            self.out_of_ring = 'vehicle_status stale'
            return TickOutput(warnings=(
                f'vehicle_status stale ({now - self._status[2]:.1f} s > status_timeout '
                f'{self.config.status_timeout:g} s) while engaged: PX4 leaving OFFBOARD could '
                'not be seen; bridge idle, commanding zero velocity; a new ~/engage is needed '
                'to fly again',))
        battery = self._battery_problem(now)
        if battery:
            out = self.request_land(now, why=battery)
            return TickOutput(commands=out.commands, warnings=(
                f'{battery}: leaving the ring and landing; sending NAV_LAND and waiting for '
                'PX4 to confirm it',))
        if self.area_watch is not None and self.area_watch.land:
            why = self.area_watch.why(now)
            out = self.request_land(now, why=why)
            return TickOutput(commands=out.commands, warnings=(
                f'{why}: leaving the ring and landing; sending NAV_LAND and waiting for PX4 to '
                'confirm it',))
        if self.config.land_after > 0:
            last = self._cmd[2] if self._cmd is not None else self._active_since
            silent = now - max(last, self._active_since)
            if silent > self.config.land_after:
                out = self.request_land(now, why='land_after')
                return TickOutput(
                    commands=out.commands,
                    warnings=(f'cmd_vel silent for {silent:.1f} s while engaged (land_after '
                              f'{self.config.land_after:g} s): the agent is gone; sending '
                              'NAV_LAND and waiting for PX4 to confirm it',))
        return TickOutput()
