"""
What an engaged vehicle flies: the operator's ``cmd_vel``, or zero velocity and why.

:class:`CommandIntake` keeps the last valid ``cmd_vel`` (NED); :func:`hold_reason` decides,
at each setpoint, whether it flies or the vehicle holds (zero velocity), in the order the
reasons rule: PX4 leaving, another writer, the safety area, an estimator reset, stale odometry,
a silent or stale ``cmd_vel``.
"""
import numpy as np

from soliton_encirclement_ros.px4.frames import enu_to_ned, yaw_rate_enu_to_ned
from soliton_encirclement_ros.px4.sequencer.outputs import VelocitySetpoint, ZERO
from soliton_encirclement_ros.px4.sequencer.phases import Phase


class CommandIntake:
    """The last valid ``cmd_vel``: ``cmd`` = (velocity_ned (3,), yawspeed_ned, stamp)."""

    def __init__(self):
        self.cmd = None
        self.held_reason = None   # why setpoints are zero now (reported once per episode)

    def on_cmd_vel(self, now, linear_enu, yaw_rate_enu):
        """Take a world-frame (ENU) velocity command; return None, or why it was rejected."""
        linear = np.asarray(linear_enu, dtype=float).reshape(-1)
        bad = [f'linear.{axis}={value}' for axis, value in zip('xyz', linear)
               if not np.isfinite(value)]
        if not np.isfinite(yaw_rate_enu):
            bad.append(f'angular.z={yaw_rate_enu}')
        if bad:
            return ('cmd_vel rejected (non-finite ' + ', '.join(bad)
                    + '); keeping the previous command')
        self.cmd = (enu_to_ned(linear), float(yaw_rate_enu_to_ned(yaw_rate_enu)), now)
        return None

    def setpoint(self, reason):
        """
        Return the setpoint for a hold ``reason`` ((kind, message) or None: fly cmd_vel).

        A hold's message is given once per episode (a new kind of hold is a new episode); the
        second value is the line to report (the end of a reset hold), or None.
        """
        if reason is None:
            report = None
            if self.held_reason is not None and self.held_reason.startswith('reset'):
                report = 'estimator reset hold over: flying cmd_vel on the new estimate'
            self.held_reason = None
            return VelocitySetpoint(tuple(self.cmd[0]), self.cmd[1], held=False), report
        warning = None
        if reason[0] != self.held_reason:
            self.held_reason = reason[0]
            warning = reason[1]
        return VelocitySetpoint(ZERO, 0.0, held=True, warning=warning), None


def hold_reason(seq, now):
    """(kind, message) of why the setpoint must be zero now, or None to fly cmd_vel."""
    config, link, active = seq.config, seq.link, seq.active_since
    if seq.phase is not Phase.ACTIVE:
        if link.offboard() and seq.phase is Phase.IDLE and seq.stream.stopped is None:
            return ('not engaged', 'PX4 is in OFFBOARD but this bridge was not engaged: '
                    'holding (zero velocity) until the operator calls ~/engage')
        return ('idle', None)
    if seq.mode.left_offboard is not None or link.stale(now):
        return ('ending', None)  # the next tick goes idle and says why
    if seq.writers.nodes:
        return ('others', None)  # on_other_publishers warned, naming them
    if seq.area_watch is not None and seq.area_watch.outside is not None:
        return ('outside', None)  # on_odometry warned (core.area.AreaWatch)
    if seq.trust.latched:
        return ('reset latched', None)  # on_odometry warned
    if seq.trust.in_reset_hold(now):
        return ('reset hold', None)
    if link.odometry_stale(now):
        age = 'none received' if link.odom_stamp is None else (
            f'{now - link.odom_stamp:.1f} s old')
        return ('odometry', f'PX4 odometry stale ({age} > status_timeout '
                f'{config.status_timeout:g} s): commanding zero velocity, cmd_vel not '
                'forwarded')
    cmd = seq.intake.cmd
    last = None if cmd is None else cmd[2]
    if last is None or last < active:
        # Nothing since the engage: an agent out of the ring for its vehicle rejoins at the
        # engage, its first command one tick later. Stale only cmd_timeout after it.
        waited = now - active
        if waited <= config.cmd_timeout:
            return ('awaiting cmd_vel', None)
        return ('cmd_vel', f'no cmd_vel since the engage {waited:.2f} s ago (cmd_timeout '
                f'{config.cmd_timeout:g} s): commanding zero velocity (hover)')
    if now - last > config.cmd_timeout:
        return ('cmd_vel', f'cmd_vel stale ({now - last:.2f} s old > cmd_timeout '
                f'{config.cmd_timeout:g} s): commanding zero velocity (hover)')
    return None


def hold_text(seq, reason):
    """Say why an engaged vehicle holds: the reason's message, or the condition named."""
    kind, message = reason
    if message:
        return message
    return {'others': seq.writers.problem(), 'reset latched': (
        seq.trust.latched_text() if seq.trust.reset is not None else kind),
        'outside': 'outside the safety area'}.get(kind) or kind
