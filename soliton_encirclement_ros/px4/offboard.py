"""
PX4 offboard sequencing as a pure object (no rclpy, no px4_msgs).

The bridge node feeds it what it hears (``cmd_vel``, ``vehicle_status``, ``vehicle_command_ack``,
odometry arrival), with times in seconds of a steady clock (never the simulation clock: the
heartbeat must not stop when ``/clock`` stalls), and asks it what to publish:

* :meth:`OffboardSequencer.setpoint` at the setpoint rate: the NED velocity setpoint. Always
  finite. It carries ``cmd_vel`` only while ACTIVE (the operator engaged and PX4 confirmed
  OFFBOARD and ARMED) with fresh PX4 odometry and a fresh ``cmd_vel``; otherwise zero velocity.
* :meth:`OffboardSequencer.tick` at the heartbeat rate: the vehicle commands to send now and
  what to report (log lines and, when an engage request ends, its outcome).

Engaging is operator-requested, never automatic: :meth:`request_engage` starts
``IDLE -> MODE_REQUESTED -> ARM_REQUESTED -> ACTIVE``. DO_SET_MODE waits until PX4 has heard the
stream for ``warmup`` seconds (counted from PX4's first feedback after the stream started); ARM
is sent only once vehicle_status confirms OFFBOARD. TEMPORARILY_REJECTED is retried every
``command_retry`` until ``confirm_timeout``; a final refusal ends the request with PX4's reason,
and a refused ARM switches PX4 out of OFFBOARD (to Hold) so the vehicle is not left in OFFBOARD
disarmed. PX4 leaving OFFBOARD (RC, GCS, failsafe) returns the bridge to IDLE: flying again
needs a new engage, even when PX4 itself returns to OFFBOARD.
"""
from dataclasses import dataclass
from enum import Enum

import numpy as np

from ros_support.settings import check_fields, setting
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
ARMING_STATE_DISARMED = 1
ARMING_STATE_ARMED = 2
VEHICLE_CMD_RESULT_ACCEPTED = 0
VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED = 1
VEHICLE_CMD_RESULT_IN_PROGRESS = 5
_RESULT_NAMES = {0: 'ACCEPTED', 1: 'TEMPORARILY_REJECTED', 2: 'DENIED', 3: 'UNSUPPORTED',
                 4: 'FAILED', 5: 'IN_PROGRESS', 6: 'CANCELLED'}
_COMMAND_NAMES = {VEHICLE_CMD_NAV_LAND: 'NAV_LAND', VEHICLE_CMD_DO_SET_MODE: 'DO_SET_MODE',
                  VEHICLE_CMD_COMPONENT_ARM_DISARM: 'COMPONENT_ARM_DISARM'}
_ARMING_NAMES = {ARMING_STATE_DISARMED: 'DISARMED', ARMING_STATE_ARMED: 'ARMED'}
_ZERO = (0.0, 0.0, 0.0)


class Phase(Enum):
    IDLE = 'idle'                      # heartbeat and zero setpoints flow; not engaged
    MODE_REQUESTED = 'mode_requested'  # DO_SET_MODE(offboard) sent, waiting for nav_state
    ARM_REQUESTED = 'arm_requested'    # in OFFBOARD, ARM sent, waiting for arming_state
    ACTIVE = 'active'                  # engaged, confirmed OFFBOARD and ARMED: cmd_vel flies


@dataclass(frozen=True)
class OffboardConfig:
    """Timing of the sequence (validated on construction; the bridge's parameters)."""

    cmd_timeout: float = setting(0.5, 'cmd_vel older than this commands zero velocity (hover)',
                                 's', 0.05, 10.0)
    warmup: float = setting(1.0, 'heartbeat streaming before the offboard mode request', 's',
                            0.1, 10.0)
    confirm_timeout: float = setting(5.0, 'time for PX4 to confirm OFFBOARD and ARMED', 's', 0.5,
                                     60.0)
    command_retry: float = setting(1.0, 'resend an unconfirmed or temporarily rejected vehicle '
                                   'command after', 's', 0.1, 10.0)
    status_timeout: float = setting(2.0, 'vehicle_status/odometry older than this is stale: '
                                    'zero velocity while engaged, engage refused', 's', 0.2,
                                    30.0)
    land_after: float = setting(10.0, 'cmd_vel silent this long while engaged sends NAV_LAND '
                                'and returns to idle (a dead agent lands instead of hovering in '
                                'the ring); 0 = never', 's', 0.0, 600.0)

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
    """End of an engage request: success, or failure with the reason."""

    success: bool
    message: str


@dataclass(frozen=True)
class TickOutput:
    commands: tuple = ()
    info: tuple = ()
    warnings: tuple = ()
    outcome: Outcome | None = None


@dataclass
class _Pending:
    """Command sent and not yet confirmed."""

    request: VehicleCommandRequest
    sent_at: float


def _nav_name(nav):
    return f'{nav} (OFFBOARD)' if nav == NAVIGATION_STATE_OFFBOARD else str(nav)


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
        self._cmd = None                 # (velocity_ned (3,), yawspeed_ned, stamp)
        self._status = None              # (nav_state, arming_state, stamp)
        self._system_id = None           # vehicle_status.system_id
        self._reported_status = None     # (nav_state, arming_state) last logged
        self._left_offboard = None       # PX4's state when it was seen leaving while ACTIVE
        self._odom_stamp = None
        self._engage_requested_at = None
        self._active_since = None
        self._pending = None             # _Pending: sent, not yet confirmed
        self._denial = None              # final refusal from vehicle_command_ack
        self._held_reason = None         # why setpoints are zero now (reported once)
        self._report = []                # info lines for the next tick
        self._warned_system_id = False

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

    def on_status(self, now, nav_state, arming_state, system_id=None):
        self._status = (int(nav_state), int(arming_state), now)
        self._system_id = None if system_id is None else int(system_id)
        self._heard_px4(now)
        if (int(nav_state), int(arming_state)) != self._reported_status:
            self._reported_status = (int(nav_state), int(arming_state))
            self._report.append('PX4 reports ' + self._state_text())
        # Latched here, not sampled at the next tick: PX4 leaving OFFBOARD and coming back
        # between two ticks still ends this engage.
        if (self.phase is Phase.ACTIVE and self._left_offboard is None
                and (int(nav_state), int(arming_state)) != (NAVIGATION_STATE_OFFBOARD,
                                                            ARMING_STATE_ARMED)):
            self._left_offboard = self._state_text()

    def on_odometry(self, now):
        self._odom_stamp = now
        self._heard_px4(now)

    def on_command_ack(self, now, command, result, target_system=None, target_component=None,
                       source=(None, None)):
        """
        Return a vehicle_command_ack.

        Acks addressed to another sender (``target_system`` / ``target_component`` not ours,
        ``source``) are ignored. TEMPORARILY_REJECTED is retried; any other refusal of the pending
        command ends the engage request.
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
        if result == VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED:
            self._report.append(f'PX4 temporarily rejected {_COMMAND_NAMES.get(command, command)}'
                                f': retrying every {self.config.command_retry:g} s')
            return
        if result not in (VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_IN_PROGRESS):
            self._denial = (command, f'PX4 refused {_COMMAND_NAMES.get(command, command)} '
                                     f'({command}): {_RESULT_NAMES.get(result, result)}')

    # ---- operator requests ----------------------------------------------------------------
    def request_engage(self, now):
        """
        Start the offboard + arm sequence.

        Returns None, or why it cannot start.
        """
        if self.phase is not Phase.IDLE:
            return f'an engage request is already {self.phase.value}'
        problem = self._link_problem(now) or self._system_id_problem()
        if problem:
            return problem
        self._engage_requested_at = now
        self._denial = None
        self._pending = None
        self.phase = Phase.MODE_REQUESTED
        return None

    def request_land(self, now):
        """Hand over to PX4's land mode; cancels an engage request in progress."""
        cancelled = self.phase in (Phase.MODE_REQUESTED, Phase.ARM_REQUESTED)
        self._go_idle()
        return TickOutput(commands=(VehicleCommandRequest(VEHICLE_CMD_NAV_LAND),),
                          info=('sending NAV_LAND (operator request); bridge idle',),
                          outcome=Outcome(False, 'engage cancelled by a land request')
                          if cancelled else None)

    # ---- outputs ----------------------------------------------------------------------------
    def setpoint(self, now):
        """Return the velocity setpoint to stream now (always finite)."""
        if self._stream_start is None:
            self._stream_start = now
        reason = self._hold_reason(now)
        if reason is None:
            self._held_reason = None
            return VelocitySetpoint(tuple(self._cmd[0]), self._cmd[1], held=False)
        warning = None
        if reason[0] != self._held_reason:
            self._held_reason = reason[0]
            warning = reason[1]
        return VelocitySetpoint(_ZERO, 0.0, held=True, warning=warning)

    def tick(self, now):
        """Advance the sequence at the heartbeat rate; returns what to send and report."""
        if self._stream_start is None:
            self._stream_start = now
        info, self._report = tuple(self._report), []
        warnings = ()
        if self._system_id_problem() and not self._warned_system_id:
            self._warned_system_id = True
            warnings = (self._system_id_problem(),)
        if self.phase is Phase.IDLE:
            out = TickOutput()
        elif self.phase is Phase.ACTIVE:
            out = self._watch_active(now)
        else:
            out = self._advance_request(now)
        return TickOutput(out.commands, info + out.info, warnings + out.warnings, out.outcome)

    # ---- internals --------------------------------------------------------------------------
    def _heard_px4(self, now):
        if self._stream_start is not None and self._feedback_since is None:
            self._feedback_since = now

    def _offboard_in_status(self):
        return self._status is not None and self._status[0] == NAVIGATION_STATE_OFFBOARD

    def _hold_reason(self, now):
        """(kind, message) of why the setpoint must be zero now, or None to fly cmd_vel."""
        if self.phase is not Phase.ACTIVE:
            if self._offboard_in_status() and self.phase is Phase.IDLE:
                return ('not engaged', 'PX4 is in OFFBOARD but this bridge was not engaged: '
                        'holding (zero velocity) until the operator calls ~/engage')
            return ('idle', None)
        if self._left_offboard is not None or self._status_stale(now):
            return ('ending', None)  # the next tick goes idle and says why
        if self._odom_stamp is None or now - self._odom_stamp > self.config.status_timeout:
            age = 'none received' if self._odom_stamp is None else (
                f'{now - self._odom_stamp:.1f} s old')
            return ('odometry', f'PX4 odometry stale ({age} > status_timeout '
                    f'{self.config.status_timeout:g} s): commanding zero velocity, cmd_vel not '
                    'forwarded')
        if self._cmd is None or now - self._cmd[2] > self.config.cmd_timeout:
            age = 'none received' if self._cmd is None else f'{now - self._cmd[2]:.2f} s old'
            return ('cmd_vel', f'cmd_vel stale ({age} > cmd_timeout {self.config.cmd_timeout:g}'
                    ' s): commanding zero velocity (hover)')
        return None

    def _link_problem(self, now):
        if self._status is None:
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

    def _state_text(self):
        nav, arming, _ = self._status
        return (f'nav_state={_nav_name(nav)}, '
                f'arming_state={arming} ({_ARMING_NAMES.get(arming, "unknown")})')

    def _go_idle(self):
        self.phase = Phase.IDLE
        self._left_offboard = None
        self._pending = None
        self._engage_requested_at = None
        self._active_since = None

    def _fail(self, reason, commands=(), info=()):
        self._go_idle()
        return TickOutput(commands=commands, info=info, warnings=(f'engage failed: {reason}',),
                          outcome=Outcome(False, reason))

    def _leave_offboard(self, reason):
        """End a request with the vehicle switched out of OFFBOARD to Hold, saying why."""
        hold = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE, MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                     PX4_CUSTOM_MAIN_MODE_AUTO, PX4_CUSTOM_SUB_MODE_AUTO_LOITER)
        return self._fail(reason, commands=(hold,),
                          info=('switching PX4 to Hold (AUTO.LOITER): the vehicle is not left '
                                'in OFFBOARD disarmed',))

    def _advance_request(self, now):
        if self._denial:
            command, reason = self._denial
            self._denial = None
            if command == VEHICLE_CMD_COMPONENT_ARM_DISARM and self._offboard_in_status():
                return self._leave_offboard(reason)
            return self._fail(reason)
        link = self._link_problem(now)
        if link:
            return self._fail(link)
        nav, arming, _ = self._status
        offboard, armed = nav == NAVIGATION_STATE_OFFBOARD, arming == ARMING_STATE_ARMED
        if offboard and armed:
            self.phase = Phase.ACTIVE
            self._pending = None
            self._active_since = now
            message = 'engaged: PX4 confirmed OFFBOARD and ARMED; following cmd_vel'
            return TickOutput(info=(message,), outcome=Outcome(True, message))
        if now - self._engage_requested_at > self.config.confirm_timeout:
            reason = (f'no confirmation within {self.config.confirm_timeout:g} s: '
                      + self._state_text())
            if self._system_id_problem():
                reason += '; ' + self._system_id_problem()
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
        pending = self._pending
        if (pending is not None and pending.request.command == wanted.command
                and now - pending.sent_at < self.config.command_retry):
            return TickOutput()
        self._pending = _Pending(wanted, now)
        return TickOutput(commands=(wanted,),
                          info=(f'sending {_COMMAND_NAMES[wanted.command]}',))

    def _status_stale(self, now):
        return self._status is None or now - self._status[2] > self.config.status_timeout

    def _watch_active(self, now):
        left = self._left_offboard  # on_status latches every exit seen while ACTIVE
        if left is not None:
            self._go_idle()
            return TickOutput(warnings=(
                f'PX4 left offboard control ({left}): bridge idle, commanding zero velocity; a '
                'new ~/engage is needed to fly again',))
        if self._status_stale(now):
            self._go_idle()
            return TickOutput(warnings=(
                f'vehicle_status stale ({now - self._status[2]:.1f} s > status_timeout '
                f'{self.config.status_timeout:g} s) while engaged: PX4 leaving OFFBOARD could '
                'not be seen; bridge idle, commanding zero velocity; a new ~/engage is needed '
                'to fly again',))
        if self.config.land_after > 0:
            last = self._cmd[2] if self._cmd is not None else self._active_since
            silent = now - max(last, self._active_since)
            if silent > self.config.land_after:
                self._go_idle()
                return TickOutput(
                    commands=(VehicleCommandRequest(VEHICLE_CMD_NAV_LAND),),
                    warnings=(f'cmd_vel silent for {silent:.1f} s while engaged (land_after '
                              f'{self.config.land_after:g} s): the agent is gone; sending '
                              'NAV_LAND, bridge idle',))
        return TickOutput()
