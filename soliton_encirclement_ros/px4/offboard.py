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
import math

import numpy as np

from soliton_encirclement_ros.interface import OPERATOR_REQUEST
from soliton_encirclement_ros.px4.sequencer import readiness, setpoint, status
from soliton_encirclement_ros.px4.sequencer.battery import BatteryWatch
from soliton_encirclement_ros.px4.sequencer.config import OffboardConfig
from soliton_encirclement_ros.px4.sequencer.handover import HoldRequested, Landing
from soliton_encirclement_ros.px4.sequencer.link import Px4Link, SetpointWriters, Stream
from soliton_encirclement_ros.px4.sequencer.mavlink import (
    ARMING_STATE_ARMED, ARMING_STATE_DISARMED, BATTERY_WARNING_CRITICAL, command_text,
    HOLD_MODE, LAND, LANDING_NAV_STATES, MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, NAV_STATE_NAMES,
    nav_state_text, NAVIGATION_STATE_AUTO_LAND, NAVIGATION_STATE_AUTO_LOITER,
    NAVIGATION_STATE_OFFBOARD, OFFBOARD_LOSS_PARAMETERS, PX4_CUSTOM_MAIN_MODE_AUTO,
    PX4_CUSTOM_MAIN_MODE_OFFBOARD, PX4_CUSTOM_SUB_MODE_AUTO_LOITER, result_text,
    VEHICLE_CMD_COMPONENT_ARM_DISARM, VEHICLE_CMD_DO_SET_MODE, VEHICLE_CMD_NAV_LAND,
    VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_DENIED, VEHICLE_CMD_RESULT_FAILED,
    VEHICLE_CMD_RESULT_IN_PROGRESS, VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED,
    VehicleCommandRequest)
from soliton_encirclement_ros.px4.sequencer.outputs import (
    ERROR, OK, Outcome, Status, TickOutput, VelocitySetpoint, WARN)
from soliton_encirclement_ros.px4.sequencer.phases import Engaging, Idle, Phase
from soliton_encirclement_ros.px4.sequencer.setpoint import CommandIntake
from soliton_encirclement_ros.px4.sequencer.transaction import CommandChannel
from soliton_encirclement_ros.px4.sequencer.trust import EstimateTrust

# The names this module has always offered (the node, the tests, analysis import them here).
__all__ = [
    'ARMING_STATE_ARMED', 'ARMING_STATE_DISARMED', 'BATTERY_WARNING_CRITICAL', 'command_text',
    'ERROR', 'LANDING_NAV_STATES', 'MAV_MODE_FLAG_CUSTOM_MODE_ENABLED', 'NAV_STATE_NAMES',
    'nav_state_text', 'NAVIGATION_STATE_AUTO_LAND', 'NAVIGATION_STATE_AUTO_LOITER',
    'NAVIGATION_STATE_OFFBOARD', 'OFFBOARD_LOSS_PARAMETERS', 'OffboardConfig',
    'OffboardSequencer', 'OK', 'Outcome', 'Phase', 'PX4_CUSTOM_MAIN_MODE_AUTO',
    'PX4_CUSTOM_MAIN_MODE_OFFBOARD', 'PX4_CUSTOM_SUB_MODE_AUTO_LOITER', 'result_text', 'Status',
    'TickOutput', 'VEHICLE_CMD_COMPONENT_ARM_DISARM', 'VEHICLE_CMD_DO_SET_MODE',
    'VEHICLE_CMD_NAV_LAND', 'VEHICLE_CMD_RESULT_ACCEPTED', 'VEHICLE_CMD_RESULT_DENIED',
    'VEHICLE_CMD_RESULT_FAILED', 'VEHICLE_CMD_RESULT_IN_PROGRESS',
    'VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED', 'VehicleCommandRequest', 'VelocitySetpoint',
    'WARN']


class OffboardSequencer:
    """
    The offboard sequence for one vehicle; times are steady-clock seconds.

    ``target_system`` is the MAVLink system id the bridge commands; vehicle_status reports the
    id PX4 really has, and a mismatch is named in the warnings and in engage failures.

    A façade over small parts (:mod:`soliton_encirclement_ros.px4.sequencer`): the link to PX4
    (``link``, ``stream``, ``writers``), the command channel (``commands``: sent, acknowledged,
    confirmed), the current phase (``mode``: one object per phase), estimate trust (``trust``),
    the battery (``battery``) and the safety area (``area_watch``).
    """

    def __init__(self, config=None, target_system=0):
        config = config or OffboardConfig()
        self.link = Px4Link(config, target_system)
        self.stream = Stream()
        self.writers = SetpointWriters()
        self.commands = CommandChannel(config)
        self.trust = EstimateTrust(config)
        self.battery = BatteryWatch(config)
        self.intake = CommandIntake()
        self.mode = Idle()
        self._config = config
        self._report = []                # info lines for the next tick
        self._alerts = []                # warning lines for the next tick
        self._queued_outcome = None      # engage outcome decided outside a tick
        self._warned_system_id = False
        # Why this vehicle is not placed in the world frame (px4.geo.OriginPlacement.problem).
        self.origin_problem = None
        # The safety area (core.area.AreaWatch, set by the node), fed the odometry's position.
        self.area_watch = None
        # Why the vehicle is out of the ring: from a landing until the next confirmed engage.
        self.out_of_ring = None

    @property
    def config(self):
        """Return the :class:`OffboardConfig` in force (the node replaces it on a change)."""
        return self._config

    @config.setter
    def config(self, config):
        self._config = config
        for part in (self.link, self.commands, self.trust, self.battery):
            part.config = config

    @property
    def target_system(self):
        return self.link.target_system

    @target_system.setter
    def target_system(self, value):
        self.link.target_system = int(value)

    @property
    def link_hint(self):
        """Why PX4 may be unheard, from the node (a px4_msgs of another message version)."""
        return self.link.hint

    @link_hint.setter
    def link_hint(self, hint):
        self.link.hint = hint

    @property
    def phase(self):
        """Return the :class:`Phase` now."""
        return self.mode.phase

    @property
    def active_since(self):
        """When the engage was confirmed (ACTIVE), or None."""
        return self.mode.since if self.mode.phase is Phase.ACTIVE else None

    def enter(self, mode):
        """Make ``mode`` (a phase object of :mod:`.sequencer.phases`) the current phase."""
        self.mode = mode

    def go_idle(self):
        """End the phase: idle, nothing in flight."""
        self.mode = Idle()
        self.commands.end()

    # ---- inputs -------------------------------------------------------------------------
    def on_cmd_vel(self, now, linear_enu, yaw_rate_enu):
        """
        World-frame (ENU) velocity command.

        Returns None, or the reason it was rejected.
        """
        return self.intake.on_cmd_vel(now, linear_enu, yaw_rate_enu)

    def on_status(self, now, nav_state, arming_state, system_id=None, failsafe=False,
                  preflight_ok=None):
        """Take vehicle_status; ``preflight_ok`` is its pre_flight_checks_pass."""
        line = self.link.on_status(now, int(nav_state), int(arming_state), system_id,
                                   bool(failsafe), preflight_ok)
        self.stream.heard(now)
        if line:
            self._report.append(line)
        self.mode.on_status(self)

    def on_land_detected(self, now, landed):
        """Take vehicle_land_detected.landed: with nav_state, the truth about a landing."""
        self.link.landed = (bool(landed), now)
        self.stream.heard(now)

    def on_battery(self, now, remaining, warning=0):
        """Take ``BatteryStatus``: ``remaining`` charge 0..1 (negative or NaN: unknown)."""
        self.battery.update(now, remaining, warning)

    def on_failsafe_flags(self, now, active):
        """Take the names of the ``failsafe_flags`` set now (which failsafe PX4 is in)."""
        self.link.failsafe_flags = (tuple(active), now)

    def on_odometry(self, now, position=None, reset_counter=None):
        """
        Take a valid PX4 odometry sample.

        ``position`` (3 numbers, any fixed frame) and ``reset_counter`` (VehicleOdometry's)
        detect estimator resets: a new counter is logged with the jump of the position, and
        holds the vehicle (:attr:`OffboardConfig.reset_hold`, ``max_reset_jump``).
        """
        self.link.odom_stamp = now
        self.stream.heard(now)
        position = None if position is None else np.asarray(position, dtype=float)
        line = self.trust.on_sample(now, position, reset_counter)
        if line:
            self._alerts.append(line)
        if self.area_watch is not None and position is not None:
            lines = self.area_watch.update(now, self.trust.trusted_position(now, position)[0])
            if self.phase is Phase.ACTIVE:
                self._alerts.extend(lines)

    def on_reference_change(self, now, jump, delta=None):
        """
        Take a new estimator reference that moved this vehicle's origin by ``jump`` [m].

        Handled as an estimator reset of that size: logged, held for ``reset_hold``, and past
        ``max_reset_jump`` until the operator's ``~/engage``.
        """
        self._alerts.append(self.trust.note(
            now, float(jump), delta, ('ref', 'ref'),
            'PX4 estimator reference changed (ref_timestamp): the origin moved'))

    def on_other_publishers(self, now, nodes, topics=''):
        """
        Take the other nodes that publish on this vehicle's ``/fmu/in/`` setpoint topics.

        A new one is warned about once, naming it; engaging is refused and an engaged vehicle
        holds while any is there (two setpoint streams interleave: the vehicle flies neither).
        """
        warning, info = self.writers.update(nodes, topics)
        if warning:
            self._alerts.append(warning)
        if info:
            self._report.append(info)

    def on_command_ack(self, now, command, result, target_system=None, target_component=None,
                       source=(None, None)):
        """
        Take a vehicle_command_ack.

        Acks addressed to another sender (``target_system`` / ``target_component`` not ours,
        ``source``) are ignored. TEMPORARILY_REJECTED is retried; any other refusal of the pending
        command ends the engage request or the landing.
        """
        line = self.commands.on_ack(command, result, target_system, target_component, source)
        if line:
            self._report.append(line)

    # ---- operator requests ----------------------------------------------------------------
    def request_engage(self, now):
        """
        Start the offboard + arm sequence.

        Returns None, or why it cannot start. While ACTIVE and held after an estimator reset
        larger than ``max_reset_jump``, an engage acknowledges the new estimate instead.
        """
        if self.phase is Phase.ACTIVE and self.trust.latched:
            problem = self.writers.problem()
            if problem:
                return problem
            self.trust.accept()
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
        restarted = self.stream.restart()
        if restarted:
            self._report.append(restarted)
        self.trust.accept()
        self.commands.reset()
        self.enter(Engaging(now))
        return None

    def engage_problem(self, now):
        """
        Why an engage from IDLE would be refused now, or None; changes nothing.

        ``~/status`` reports it as ``ready`` (``yes`` or the reason), the pre-flight a fleet
        check reads (:mod:`.sequencer.readiness`).
        """
        return readiness.engage_problem(self, now)

    def request_land(self, now, why=OPERATOR_REQUEST):
        """
        Hand over to PX4's land mode; cancels an engage or hold request in progress.

        The landing ends (``TickOutput.land_outcome``) when PX4 reports the vehicle landed and
        disarmed, or when PX4 did not take it over (then the heartbeat stops), or someone took
        over. ``land_timeout`` after PX4 took it over, a vehicle still not landed is named.
        """
        if self.phase is Phase.LANDING:
            return TickOutput(info=('NAV_LAND already pending: waiting for PX4 to land',))
        engage, hold, _ = self._cancel_request('a land request')
        ground = None if self.link.stale(now) else self.link.touchdown(-math.inf)
        if ground is not None:  # nothing to land: NAV_LAND would only put PX4 in AUTO_LAND
            message = f'landed: already on the ground, {ground} (nothing sent)'
            self.out_of_ring = f'landed ({why})'
            return TickOutput(info=(message,), outcome=engage,
                              land_outcome=Outcome(True, message), hold_outcome=hold)
        self.enter(Landing(now, why))
        self.out_of_ring = f'landing ({why})'
        self.commands.begin(LAND, now)
        return TickOutput(commands=(LAND,),
                          info=(f'sending NAV_LAND ({why}); waiting up to confirm_timeout '
                                f'{self.config.confirm_timeout:g} s for PX4 to take it over',),
                          outcome=engage, hold_outcome=hold)

    def request_hold(self, now, why=OPERATOR_REQUEST):
        """
        Switch PX4 to Hold (AUTO.LOITER) at once, from any phase: the operator's stop.

        Cancels an engage or a landing in progress; the vehicle leaves the ring. Confirmed
        (``TickOutput.hold_outcome``) when PX4 reports AUTO_LOITER; from then on the bridge
        sends PX4 nothing until the next engage (``streaming``).
        """
        if self.phase is Phase.HOLD_REQUESTED:
            return TickOutput(info=('Hold already requested: waiting for PX4 to confirm',))
        engage, _, land = self._cancel_request('a hold request')
        self.enter(HoldRequested(now, why))
        self.out_of_ring = f'hold ({why})'
        self.commands.begin(HOLD_MODE, now)
        return TickOutput(commands=(HOLD_MODE,),
                          info=(f'sending DO_SET_MODE Hold ({why}); waiting up to '
                                f'confirm_timeout {self.config.confirm_timeout:g} s for PX4 '
                                'to confirm it',),
                          outcome=engage, land_outcome=land)

    def _cancel_request(self, by):
        """End the request in progress (engage, hold, landing): its outcomes, then idle."""
        outcomes = self.mode.cancelled(by)
        self.go_idle()
        return outcomes

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
        if self.stream.stopped is not None:
            return False
        return self.mode.streams(self.link)

    def setpoint(self, now):
        """Return the velocity setpoint to stream now (always finite; only while streaming)."""
        self.stream.track(now, self.streaming)
        sent, line = self.intake.setpoint(self.hold_reason(now))
        if line:
            self._report.append(line)
        return sent

    def tick(self, now):
        """Advance the sequence at the heartbeat rate; returns what to send and report."""
        self.stream.track(now, self.streaming)
        info, self._report = tuple(self._report), []
        warnings, self._alerts = tuple(self._alerts), []
        problem = self.link.system_id_problem()
        if problem and not self._warned_system_id:
            self._warned_system_id = True
            warnings += (problem,)
        out = self.mode.tick(self, now)
        outcome = out.outcome
        if outcome is None and self._queued_outcome is not None:
            outcome = self._queued_outcome
        self._queued_outcome = None
        return TickOutput(out.commands, info + out.info, warnings + out.warnings, outcome,
                          out.land_outcome, out.hold_outcome)

    def status(self, now):
        """Return what ``~/status`` says now."""
        return status.status(self, now)

    def hold_reason(self, now):
        """(kind, message) of why the setpoint must be zero now, or None to fly cmd_vel."""
        return setpoint.hold_reason(self, now)

    def hold_text(self, reason):
        """Say why an engaged vehicle holds (a :meth:`hold_reason`)."""
        return setpoint.hold_text(self, reason)

    def airborne(self):
        """
        Whether the vehicle may be in the air.

        PX4 reports it armed, and its land detector (when heard) not landed. Unknown (no
        vehicle_status yet): False.
        """
        return self.link.airborne()

    def trusted_position(self, now, position):
        """Return (position, uncertainty [m]) for the others (:class:`.trust.EstimateTrust`)."""
        return self.trust.trusted_position(now, position)

    def position_uncertainty(self, now):
        """How far (m) the vehicle may be from the position the others are told."""
        return self.trust.position_uncertainty(now)

    # ---- the fields of the single class this façade replaced, read by tests -------------
    @property
    def _status(self):
        return self.link.status

    @property
    def _failsafe(self):
        return self.link.failsafe

    @property
    def _stream_stopped(self):
        return self.stream.stopped

    @property
    def _reset(self):
        return self.trust.reset

    @property
    def _active_since(self):
        return self.active_since

    @property
    def _cmd(self):
        return self.intake.cmd

    @_cmd.setter
    def _cmd(self, cmd):
        self.intake.cmd = cmd
