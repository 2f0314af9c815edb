"""PX4 offboard sequencing as a pure object (no rclpy, no px4_msgs).

The bridge node feeds it what it hears (``cmd_vel``, ``vehicle_status``, ``vehicle_command_ack``,
odometry arrival) with the node clock's time in seconds, and asks it what to publish:

* :meth:`OffboardSequencer.setpoint` at the setpoint rate: the NED velocity setpoint. Always
  finite; zero (hover) when ``cmd_vel`` is missing or older than ``cmd_timeout``.
* :meth:`OffboardSequencer.tick` at the heartbeat rate: the vehicle commands to send now and
  what to report (log lines and, when an engage request ends, its outcome).

Engaging is operator-requested, never automatic: :meth:`request_engage` starts
``STREAMING -> MODE_REQUESTED -> ARM_REQUESTED -> ACTIVE``. The heartbeat must have streamed for
``warmup`` seconds before DO_SET_MODE; ARM is sent only once vehicle_status confirms OFFBOARD, so
the vehicle never arms in another mode. Every request and confirmation can fail with a reason.
"""
from dataclasses import dataclass
from enum import Enum

import numpy as np

from soliton_encirclement_ros.px4.frames import enu_to_ned, yaw_rate_enu_to_ned

# MAVLink / px4_msgs constants (VehicleCommand.msg, VehicleStatus.msg, VehicleCommandAck.msg).
VEHICLE_CMD_NAV_LAND = 21
VEHICLE_CMD_DO_SET_MODE = 176
VEHICLE_CMD_COMPONENT_ARM_DISARM = 400
MAV_MODE_FLAG_CUSTOM_MODE_ENABLED = 1.0   # DO_SET_MODE param1
PX4_CUSTOM_MAIN_MODE_OFFBOARD = 6.0       # DO_SET_MODE param2
NAVIGATION_STATE_OFFBOARD = 14
ARMING_STATE_DISARMED = 1
ARMING_STATE_ARMED = 2
VEHICLE_CMD_RESULT_ACCEPTED = 0
VEHICLE_CMD_RESULT_IN_PROGRESS = 5
_RESULT_NAMES = {0: 'ACCEPTED', 1: 'TEMPORARILY_REJECTED', 2: 'DENIED', 3: 'UNSUPPORTED',
                 4: 'FAILED', 5: 'IN_PROGRESS', 6: 'CANCELLED'}
_COMMAND_NAMES = {VEHICLE_CMD_NAV_LAND: 'NAV_LAND', VEHICLE_CMD_DO_SET_MODE: 'DO_SET_MODE',
                  VEHICLE_CMD_COMPONENT_ARM_DISARM: 'COMPONENT_ARM_DISARM'}
_ARMING_NAMES = {ARMING_STATE_DISARMED: 'DISARMED', ARMING_STATE_ARMED: 'ARMED'}


class Phase(Enum):
    STREAMING = 'streaming'            # heartbeat and setpoints flow; nothing requested
    MODE_REQUESTED = 'mode_requested'  # DO_SET_MODE(offboard) sent, waiting for nav_state
    ARM_REQUESTED = 'arm_requested'    # in OFFBOARD, ARM sent, waiting for arming_state
    ACTIVE = 'active'                  # confirmed OFFBOARD and ARMED: cmd_vel flies the vehicle


@dataclass(frozen=True)
class OffboardConfig:
    """Timing of the sequence, in seconds (validated on construction)."""
    cmd_timeout: float = 0.5      # cmd_vel older than this -> hover
    warmup: float = 1.0           # heartbeat streaming before DO_SET_MODE
    confirm_timeout: float = 5.0  # from request to confirmed OFFBOARD + ARMED
    command_retry: float = 1.0    # resend an unconfirmed command after this long
    status_timeout: float = 2.0   # vehicle_status / odometry older than this -> link lost

    def __post_init__(self):
        for name in ('cmd_timeout', 'warmup', 'confirm_timeout', 'command_retry',
                     'status_timeout'):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0.0):
                raise ValueError(f'OffboardConfig.{name} must be a positive finite number of '
                                 f'seconds, got {value!r}')


@dataclass(frozen=True)
class VehicleCommandRequest:
    """A px4_msgs/VehicleCommand to send (the node fills target/source ids and timestamp)."""
    command: int
    param1: float = 0.0
    param2: float = 0.0


@dataclass(frozen=True)
class VelocitySetpoint:
    """TrajectorySetpoint content: NED velocity and yaw rate; position/yaw are left NaN."""
    velocity_ned: tuple
    yawspeed: float
    stale: bool                  # True when this is the hover fallback
    warning: str | None = None   # set once, when cmd_vel goes stale


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
    command: int
    sent_at: float


class OffboardSequencer:
    """The offboard sequence for one vehicle; times are node-clock seconds."""

    def __init__(self, config=None):
        self.config = config or OffboardConfig()
        self.phase = Phase.STREAMING
        self._stream_start = None        # first heartbeat/setpoint time
        self._cmd = None                 # (velocity_ned (3,), yawspeed_ned, stamp)
        self._stale_reported = False
        self._status = None              # (nav_state, arming_state, stamp)
        self._odom_stamp = None
        self._engage_requested_at = None
        self._pending = None             # _Pending: sent, not yet confirmed
        self._denial = None              # refusal reason from vehicle_command_ack

    # ---- inputs -------------------------------------------------------------------------
    def on_cmd_vel(self, now, linear_enu, yaw_rate_enu):
        """World-frame (ENU) velocity command. Returns None, or the reason it was rejected."""
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

    def on_status(self, now, nav_state, arming_state):
        self._status = (int(nav_state), int(arming_state), now)

    def on_odometry(self, now):
        self._odom_stamp = now

    def on_command_ack(self, now, command, result):
        """A vehicle_command_ack: a refusal of the pending command ends the engage request."""
        if (self._pending is not None and command == self._pending.command
                and result not in (VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_IN_PROGRESS)):
            self._denial = (f'PX4 refused {_COMMAND_NAMES.get(command, command)} ({command}): '
                            f'{_RESULT_NAMES.get(result, result)}')

    # ---- operator requests ----------------------------------------------------------------
    def request_engage(self, now):
        """Start the offboard + arm sequence. Returns None, or why it cannot start."""
        if self.phase is not Phase.STREAMING:
            return f'an engage request is already {self.phase.value}'
        link = self._link_problem(now)
        if link:
            return link
        self._engage_requested_at = now
        self._denial = None
        self.phase = Phase.MODE_REQUESTED
        return None

    def request_land(self, now):
        """Hand over to PX4's land mode; cancels an engage request in progress."""
        cancelled = self.phase in (Phase.MODE_REQUESTED, Phase.ARM_REQUESTED)
        self.phase = Phase.STREAMING
        self._pending = None
        self._engage_requested_at = None
        return TickOutput(commands=(VehicleCommandRequest(VEHICLE_CMD_NAV_LAND),),
                          info=('sending NAV_LAND',),
                          outcome=Outcome(False, 'engage cancelled by a land request') if cancelled
                          else None)

    # ---- outputs ----------------------------------------------------------------------------
    def setpoint(self, now):
        """The velocity setpoint to stream now (always finite)."""
        if self._stream_start is None:
            self._stream_start = now
        if self._cmd is not None and now - self._cmd[2] <= self.config.cmd_timeout:
            self._stale_reported = False
            return VelocitySetpoint(tuple(self._cmd[0]), self._cmd[1], stale=False)
        warning = None
        if not self._stale_reported:
            self._stale_reported = True
            if self._cmd is None:
                warning = 'no cmd_vel received yet: commanding zero velocity (hover)'
            else:
                warning = (f'cmd_vel stale ({now - self._cmd[2]:.2f} s > cmd_timeout '
                           f'{self.config.cmd_timeout} s): commanding zero velocity (hover)')
        return VelocitySetpoint((0.0, 0.0, 0.0), 0.0, stale=True, warning=warning)

    def tick(self, now):
        """Advance the sequence at the heartbeat rate; returns what to send and report."""
        if self._stream_start is None:
            self._stream_start = now
        if self.phase is Phase.STREAMING:
            return TickOutput()
        if self.phase is Phase.ACTIVE:
            return self._watch_active(now)
        return self._advance_request(now)

    # ---- internals --------------------------------------------------------------------------
    def _link_problem(self, now):
        if self._status is None:
            return 'no vehicle_status received from PX4 yet'
        if now - self._status[2] > self.config.status_timeout:
            return f'vehicle_status is stale ({now - self._status[2]:.1f} s old)'
        if self._odom_stamp is None:
            return 'no valid vehicle_odometry received from PX4 yet'
        if now - self._odom_stamp > self.config.status_timeout:
            return f'vehicle_odometry is stale ({now - self._odom_stamp:.1f} s old)'
        return None

    def _state_text(self):
        nav, arming, _ = self._status
        return (f'nav_state={nav} (OFFBOARD is {NAVIGATION_STATE_OFFBOARD}), '
                f'arming_state={arming} ({_ARMING_NAMES.get(arming, "unknown")})')

    def _fail(self, reason):
        self.phase = Phase.STREAMING
        self._pending = None
        self._engage_requested_at = None
        return TickOutput(warnings=(f'engage failed: {reason}',), outcome=Outcome(False, reason))

    def _send(self, now, request):
        self._pending = _Pending(request.command, now)
        return request

    def _advance_request(self, now):
        if self._denial:
            return self._fail(self._denial)
        link = self._link_problem(now)
        if link:
            return self._fail(link)
        nav, arming, _ = self._status
        offboard, armed = nav == NAVIGATION_STATE_OFFBOARD, arming == ARMING_STATE_ARMED
        if offboard and armed:
            self.phase = Phase.ACTIVE
            self._pending = None
            message = 'vehicle confirmed OFFBOARD and ARMED: following cmd_vel'
            return TickOutput(info=(message,), outcome=Outcome(True, message))
        if now - self._engage_requested_at > self.config.confirm_timeout:
            return self._fail(f'no confirmation within {self.config.confirm_timeout} s: '
                              + self._state_text())
        if now - self._stream_start < self.config.warmup:
            return TickOutput()  # keep streaming the heartbeat before asking for the mode
        if offboard:
            self.phase = Phase.ARM_REQUESTED
            wanted = VehicleCommandRequest(VEHICLE_CMD_COMPONENT_ARM_DISARM, param1=1.0)
        else:
            self.phase = Phase.MODE_REQUESTED
            wanted = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE,
                                           MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                           PX4_CUSTOM_MAIN_MODE_OFFBOARD)
        due = (self._pending is None or self._pending.command != wanted.command
               or now - self._pending.sent_at >= self.config.command_retry)
        if not due:
            return TickOutput()
        name = _COMMAND_NAMES[wanted.command]
        return TickOutput(commands=(self._send(now, wanted),), info=(f'sending {name}',))

    def _watch_active(self, now):
        link = self._link_problem(now)
        nav, arming, _ = self._status
        if link or nav != NAVIGATION_STATE_OFFBOARD or arming != ARMING_STATE_ARMED:
            self.phase = Phase.STREAMING
            return TickOutput(warnings=('vehicle left offboard control: '
                                        + (link or self._state_text()),))
        return TickOutput()
