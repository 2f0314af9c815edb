"""
The phase machine: one small class per phase, with its entry, its exit and what it may send.

``IDLE -> MODE_REQUESTED -> ARM_REQUESTED -> ACTIVE`` (:class:`Engaging`, then
:class:`Active`), and from any phase ``LANDING`` or ``HOLD_REQUESTED`` (:mod:`.handover`).
Each phase object holds its own data (when it began, why), says whether the stream flows
(:meth:`Mode.streams`), advances at the heartbeat (:meth:`Mode.tick`: the commands it sends
and its outcome), says what ``~/status`` reports of it (:meth:`Mode.describe`) and what ends
when another request replaces it (:meth:`Mode.cancelled`). The sequencer
(:class:`~soliton_encirclement_ros.px4.offboard.OffboardSequencer`) owns the parts they read
(the link to PX4, the command channel, estimate trust, battery, area) and the current phase.
"""
from enum import Enum

from soliton_encirclement_ros.px4.sequencer.mavlink import (
    ARM, ARMING_STATE_ARMED, command_text, HOLD_MODE, NAVIGATION_STATE_AUTO_LAND,
    NAVIGATION_STATE_OFFBOARD, OFFBOARD_MODE, result_text, VEHICLE_CMD_COMPONENT_ARM_DISARM,
    VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED)
from soliton_encirclement_ros.px4.sequencer.outputs import OK, Outcome, Status, TickOutput, WARN


class Phase(Enum):
    IDLE = 'idle'                      # heartbeat and zero setpoints flow; not engaged
    MODE_REQUESTED = 'mode_requested'  # DO_SET_MODE(offboard) sent, waiting for nav_state
    ARM_REQUESTED = 'arm_requested'    # in OFFBOARD, ARM sent, waiting for arming_state
    ACTIVE = 'active'                  # engaged, confirmed OFFBOARD and ARMED: cmd_vel flies
    LANDING = 'landing'                # NAV_LAND sent; then PX4 lands: until landed, disarmed
    HOLD_REQUESTED = 'hold_requested'  # DO_SET_MODE(Hold) sent, waiting for AUTO_LOITER


class Mode:
    """A phase's rules; the base is a phase that sends nothing and streams only to hold."""

    phase = None
    # A landing or a hold in progress is what ~/status says, before a failsafe.
    outranks_failsafe = False

    def streams(self, link):
        """Whether the heartbeat flows: PX4 in OFFBOARD and ARMED without an engage (hold it)."""
        return link.offboard() and link.armed()

    def tick(self, seq, now):
        return TickOutput()

    def on_status(self, seq):
        """PX4's status changed (``seq.link.status``)."""

    def describe(self, seq, now, values):
        """Return this phase's ``~/status``, or None."""
        return None

    def cancelled(self, by):
        """Return the (engage, hold, land) outcomes a request ends when ``by`` replaces it."""
        return None, None, None


class Idle(Mode):
    """Not engaged: the bridge sends PX4 nothing but holds it if PX4 is in OFFBOARD, armed."""

    phase = Phase.IDLE

    def tick(self, seq, now):
        """Say once that a landing given up on (heartbeat stopped) shows after all."""
        stream = seq.stream
        given_up = stream.given_up
        if stream.stopped is None or given_up is None or given_up[1] is not None:
            return TickOutput()
        seen = seq.link.landing_seen(given_up[0])
        if seen is None:
            return TickOutput()
        stream.given_up = (given_up[0], seen)
        return TickOutput(info=(f'landing confirmed after all: {seen} (its confirmation came '
                                'late); the offboard heartbeat stays stopped, ~/engage starts '
                                'it again',))

    def describe(self, seq, now, values):
        link = seq.link
        problem = link.problem(now)
        if problem:
            return Status(WARN, f'idle: {problem}', values)
        out = seq.out_of_ring
        if out and out.startswith('landed'):
            return Status(OK, f'{out}: PX4 reports {link.state_text()}; '
                          '~/engage to fly again', values)
        if out and out.startswith('hold'):
            return Status(WARN, f'{out}: PX4 reports {link.state_text()}; '
                          '~/engage to fly again, ~/land to land', values)
        if seq.streaming:
            return Status(OK, 'idle: PX4 is in OFFBOARD, not engaged by this bridge: '
                          'holding it at zero velocity; ~/engage to fly', values)
        return Status(OK, f'idle: PX4 reports {link.state_text()}, the bridge sends it '
                      'nothing; ~/engage to fly', values)


class Engaging(Mode):
    """
    DO_SET_MODE(OFFBOARD) once PX4 has heard the stream for ``warmup``, then ARM in OFFBOARD.

    Confirmed when PX4 reports OFFBOARD and ARMED. A final refusal, a failsafe, a stale link or
    ``confirm_timeout`` ends it with PX4's reason; a refused ARM, or a failure in OFFBOARD,
    switches PX4 to Hold so that the vehicle is not left in OFFBOARD disarmed.
    """

    def __init__(self, requested_at):
        self.phase = Phase.MODE_REQUESTED
        self.requested_at = requested_at

    def streams(self, link):
        return True

    def cancelled(self, by):
        return Outcome(False, f'engage cancelled by {by}'), None, None

    def describe(self, seq, now, values):
        return Status(OK, f'engaging ({self.phase.value})', values)

    def tick(self, seq, now):
        link, config = seq.link, seq.config
        denial = seq.commands.take_denial()
        if denial:
            command, reason = denial
            reason = self._refusal(link, command, reason)
            if command == VEHICLE_CMD_COMPONENT_ARM_DISARM and link.offboard():
                return self._leave_offboard(seq, reason)
            return self._fail(seq, reason)
        problem = link.problem(now) or seq.writers.problem()
        if problem:
            return self._fail(seq, problem)
        nav, arming, _ = link.status
        offboard, armed = nav == NAVIGATION_STATE_OFFBOARD, arming == ARMING_STATE_ARMED
        if link.failsafe and not (offboard and armed):
            reason = link.failsafe_text(now) + ': engage stopped'
            return self._leave_offboard(seq, reason) if offboard else self._fail(seq, reason)
        if offboard and armed:
            seq.enter(Active(now))
            seq.out_of_ring = None
            seq.commands.end()
            message = 'engaged: PX4 confirmed OFFBOARD and ARMED; ' + seq.trust.engaged_text(now)
            return TickOutput(info=(message,), outcome=Outcome(True, message))
        if nav == NAVIGATION_STATE_AUTO_LAND and armed:
            return self._fail(seq, f'PX4 started landing during the engage ({link.state_text()})'
                              ': the bridge never takes a vehicle out of a landing')
        if now - self.requested_at > config.confirm_timeout:
            reason = self._unconfirmed(seq, now)
            if offboard:
                return self._leave_offboard(seq, reason)
            return self._fail(seq, reason)
        if not seq.stream.warmed_up(now, config.warmup):
            return TickOutput()  # PX4 must hear the stream for warmup before the mode request
        if self.phase is Phase.ARM_REQUESTED and not offboard:
            # PX4 was in OFFBOARD for this request and left it: a pilot or the GCS took over.
            return self._fail(seq, f'PX4 left OFFBOARD during the engage ({link.state_text()}): '
                              'someone else took control; OFFBOARD is not requested again')
        self.phase = Phase.ARM_REQUESTED if offboard else Phase.MODE_REQUESTED
        return seq.commands.send(now, ARM if offboard else OFFBOARD_MODE)

    @staticmethod
    def _fail(seq, reason, commands=(), info=()):
        seq.go_idle()
        return TickOutput(commands=commands, info=info, warnings=(f'engage failed: {reason}',),
                          outcome=Outcome(False, reason))

    def _leave_offboard(self, seq, reason):
        """End the request with the vehicle switched out of OFFBOARD to Hold, saying why."""
        return self._fail(seq, reason, commands=(HOLD_MODE,),
                          info=('switching PX4 to Hold (AUTO.LOITER): the vehicle is not left '
                                'in OFFBOARD disarmed',))

    @staticmethod
    def _refusal(link, command, reason):
        """Name a final refusal of the engage's command: mode refused or arming refused."""
        if command == VEHICLE_CMD_COMPONENT_ARM_DISARM:
            preflight = ("; PX4's pre-flight checks fail (pre_flight_checks_pass false)"
                         if link.preflight_ok is False else '')
            return f'arming refused: {reason}{preflight}'
        return f'OFFBOARD mode refused: {reason}'

    @staticmethod
    def _unconfirmed(seq, now):
        """Why an engage was not confirmed in time: PX4's last answer, its state, a failsafe."""
        link, pending = seq.link, seq.commands.pending
        if pending is None:
            answer = 'nothing was sent (PX4 did not hear the stream for warmup)'
        else:
            what = ('arming' if pending.request.command == VEHICLE_CMD_COMPONENT_ARM_DISARM
                    else 'OFFBOARD mode')
            sent = pending.sent_text()
            name = command_text(pending.request.command)
            if pending.last_result is None:
                answer = f'{what} not confirmed: PX4 did not answer {name} ({sent})'
            elif pending.last_result == VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED:
                answer = f'{what} refused: PX4 answered {name} TEMPORARILY_REJECTED ({sent})'
            else:
                answer = (f'{what} not confirmed: PX4 answered {name} '
                          f'{result_text(pending.last_result)} ({sent})')
        parts = [answer, link.state_text()]
        if link.failsafe_text(now):
            parts.append(link.failsafe_text(now))
        if (pending is not None and pending.request.command == VEHICLE_CMD_COMPONENT_ARM_DISARM
                and link.preflight_ok is False):
            parts.append("PX4's pre-flight checks fail (pre_flight_checks_pass false)")
        if link.system_id_problem():
            parts.append(link.system_id_problem())
        return f'no confirmation within {seq.config.confirm_timeout:g} s: ' + '; '.join(parts)


class Active(Mode):
    """
    Engaged, PX4 confirmed OFFBOARD and ARMED: ``cmd_vel`` flies (or the vehicle holds, why).

    Ends when PX4 leaves OFFBOARD (latched at once, so leaving and coming back between two
    ticks still ends it) or its status goes stale: idle, out of the ring. The battery, the
    safety area and a silent ``cmd_vel`` (``land_after``) land it.
    """

    phase = Phase.ACTIVE

    def __init__(self, since):
        self.since = since
        self.left_offboard = None   # PX4's state when it was seen leaving

    def streams(self, link):
        return link.offboard()

    def on_status(self, seq):
        nav, arming, _ = seq.link.status
        if (self.left_offboard is None
                and (nav, arming) != (NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED)):
            self.left_offboard = seq.link.state_text()

    def describe(self, seq, now, values):
        reason = seq.hold_reason(now)
        if reason is None:
            return Status(OK, 'engaged: following cmd_vel', values)
        return Status(WARN, 'engaged, holding (zero velocity): ' + seq.hold_text(reason),
                      values)

    def tick(self, seq, now):
        config = seq.config
        if self.left_offboard is not None:
            left = self.left_offboard
            seq.go_idle()
            seq.out_of_ring = f'PX4 left OFFBOARD ({left})'
            return TickOutput(warnings=(
                f'PX4 left offboard control ({left}): bridge idle, sending PX4 nothing (its '
                'mode flies the vehicle); a new ~/engage is needed to fly again',))
        if seq.link.stale(now):
            seq.go_idle()
            seq.out_of_ring = 'vehicle_status stale'
            return TickOutput(warnings=(
                f'vehicle_status stale ({now - seq.link.status[2]:.1f} s > status_timeout '
                f'{config.status_timeout:g} s) while engaged: PX4 leaving OFFBOARD could '
                'not be seen; bridge idle, commanding zero velocity; a new ~/engage is needed '
                'to fly again',))
        battery = seq.battery.problem(now)
        if battery:
            return self._land(seq, now, battery)
        if seq.area_watch is not None and seq.area_watch.land:
            return self._land(seq, now, seq.area_watch.why(now))
        if config.land_after > 0:
            cmd = seq.intake.cmd
            last = cmd[2] if cmd is not None else self.since
            silent = now - max(last, self.since)
            if silent > config.land_after:
                out = seq.request_land(now, why='land_after')
                return TickOutput(
                    commands=out.commands,
                    warnings=(f'cmd_vel silent for {silent:.1f} s while engaged (land_after '
                              f'{config.land_after:g} s): the agent is gone; sending '
                              'NAV_LAND and waiting for PX4 to confirm it',))
        return TickOutput()

    @staticmethod
    def _land(seq, now, why):
        """Leave the ring and land: the battery or the safety area rules it out."""
        out = seq.request_land(now, why=why)
        return TickOutput(commands=out.commands, warnings=(
            f'{why}: leaving the ring and landing; sending NAV_LAND and waiting for PX4 to '
            'confirm it',))
