"""
The phases that hand the vehicle to one of PX4's own modes: its landing and its Hold.

Each sends one command through the command channel until PX4's reported state confirms it
(a landing mode or DISARMED; AUTO_LOITER) within ``confirm_timeout``, and from then on the
bridge sends PX4 nothing.
"""
from soliton_encirclement_ros.px4.sequencer.mavlink import (
    ARMING_STATE_ARMED, LANDING_NAV_STATES, nav_state_text, NAVIGATION_STATE_AUTO_LOITER,
    NAVIGATION_STATE_OFFBOARD, OFFBOARD_LOSS_PARAMETERS, result_text)
from soliton_encirclement_ros.px4.sequencer.outputs import (
    ERROR, OK, Outcome, Status, TickOutput, WARN)
from soliton_encirclement_ros.px4.sequencer.phases import Mode, Phase


class Landing(Mode):
    """
    NAV_LAND resent until PX4 takes the landing over; then touchdown and disarm are awaited.

    Not taken over within ``confirm_timeout`` (or refused): the heartbeat stops, so that PX4's
    offboard-loss failsafe takes the vehicle. Taken over and still not landed after
    ``land_timeout``: named once. A pilot taking over ends it.
    """

    phase = Phase.LANDING
    outranks_failsafe = True

    def __init__(self, started, reason):
        self.started = started
        self.reason = reason
        self.handed = None      # when PX4 was seen taking the landing over (its own mode)
        self.overdue = False    # land_timeout passed and said so

    def cancelled(self, by):
        return None, None, Outcome(False, f'landing cancelled by {by}')

    def describe(self, seq, now, values):
        if self.handed is None:
            return Status(OK, 'landing: NAV_LAND sent, waiting for PX4 to take it over', values)
        if self.overdue:
            return Status(ERROR, self.not_landed_text(seq, now), values)
        return Status(OK, f'landing: PX4 lands the vehicle ({seq.link.state_text()}), '
                      'waiting for touchdown and disarm', values)

    def not_landed_text(self, seq, now):
        return (f'not landed {now - self.handed:.0f} s after PX4 took the landing over '
                f'(land_timeout {seq.config.land_timeout:g} s): PX4 reports '
                f'{seq.link.state_text()}, landed {seq.link.landed_text()}; check the vehicle')

    def tick(self, seq, now):
        link, config, pending = seq.link, seq.config, seq.commands.pending
        info = ()
        if self.handed is None:
            seen = link.landing_seen(self.started)
            if seen is None:
                denial = seq.commands.take_denial()
                if denial:
                    return self._failed(seq, denial[1])
                if now - self.started > config.confirm_timeout:
                    sent = pending.sent_text()
                    if pending.last_result is None:
                        answer = f'PX4 did not answer NAV_LAND ({sent})'
                    else:
                        answer = (f'PX4 answered NAV_LAND {result_text(pending.last_result)} '
                                  f'({sent})')
                    state = ('no vehicle_status' if link.status is None
                             else f'PX4 reports {link.state_text()}')
                    return self._failed(
                        seq, f'no confirmation within {config.confirm_timeout:g} s: {answer}; '
                        f'{state}')
                return seq.commands.send(now, pending.request)
            self.handed = now
            seq.commands.end()
            info = (f'PX4 took the landing over: {seen}; the bridge sends it nothing now, and '
                    f'waits for touchdown and disarm (land_timeout {config.land_timeout:g} s)',)
        done = link.touchdown(self.handed)
        if done is not None:
            message = (f'landed: {done}, {now - self.started:.1f} s after NAV_LAND '
                       f'({self.reason})')
            seq.go_idle()
            seq.out_of_ring = f'landed ({self.reason})'
            return TickOutput(info=info + (message,), land_outcome=Outcome(True, message))
        state = link.heard_after(self.handed)
        if (state is not None and state[1] == ARMING_STATE_ARMED
                and state[0] not in LANDING_NAV_STATES | {NAVIGATION_STATE_OFFBOARD}):
            message = (f'landing taken over: PX4 reports {link.state_text()} (an RC switch, '
                       'the ground station or a failsafe); the bridge sends it nothing, a new '
                       '~/engage is needed to fly again')
            seq.go_idle()
            seq.out_of_ring = f'landing taken over ({nav_state_text(state[0])})'
            return TickOutput(info=info, warnings=(message,),
                              land_outcome=Outcome(False, message))
        if not self.overdue and now - self.handed > config.land_timeout:
            self.overdue = True
            message = self.not_landed_text(seq, now)
            return TickOutput(info=info, warnings=(message,),
                              land_outcome=Outcome(False, message))
        return TickOutput(info=info)

    def _failed(self, seq, reason):
        """Stop the heartbeat: PX4's offboard-loss failsafe takes the vehicle. One line."""
        link = seq.link
        if link.offboard():
            then = ("so that PX4's offboard-loss failsafe takes the vehicle "
                    f'({OFFBOARD_LOSS_PARAMETERS})')
        else:
            nav = 'unknown' if link.status is None else nav_state_text(link.status[0])
            then = (f'PX4 is not in OFFBOARD (nav_state={nav}): it keeps its own mode')
        message = (f'NAV_LAND not confirmed ({reason}): stopping the offboard heartbeat, {then};'
                   ' ~/engage starts it again')
        seq.go_idle()
        seq.stream.stop(f'NAV_LAND not confirmed ({reason})', self.started)
        return TickOutput(warnings=(message,), land_outcome=Outcome(False, message))


class HoldRequested(Mode):
    """DO_SET_MODE(Hold) resent until PX4 reports AUTO_LOITER; then the bridge is idle."""

    phase = Phase.HOLD_REQUESTED
    outranks_failsafe = True

    def __init__(self, started, reason):
        self.started = started
        self.reason = reason

    def cancelled(self, by):
        return None, Outcome(False, f'hold cancelled by {by}'), None

    def describe(self, seq, now, values):
        return Status(WARN, f'hold requested ({self.reason}): DO_SET_MODE Hold sent, '
                      'waiting for PX4 to confirm', values)

    def tick(self, seq, now):
        link, config, pending = seq.link, seq.config, seq.commands.pending
        state = link.heard_after(self.started)
        if state is not None and state[0] == NAVIGATION_STATE_AUTO_LOITER:
            message = (f'holding: PX4 reports {link.state_text()} ({self.reason}); the bridge '
                       'sends it nothing; ~/engage flies again, ~/land lands')
            seq.go_idle()
            return TickOutput(info=(message,), hold_outcome=Outcome(True, message))
        reason = None
        denial = seq.commands.take_denial()
        if denial:
            reason = denial[1]
        elif now - self.started > config.confirm_timeout:
            answer = ('PX4 did not answer' if pending.last_result is None
                      else f'PX4 answered {result_text(pending.last_result)}')
            reason = (f'no confirmation within {config.confirm_timeout:g} s: {answer} '
                      f'({pending.sent_text()})')
        if reason is None:
            return seq.commands.send(now, pending.request)
        state = 'no vehicle_status' if link.status is None else link.state_text()
        then = ('; the bridge holds it in OFFBOARD at zero velocity' if seq.streaming else '')
        message = f'Hold not confirmed ({reason}); PX4 reports {state}{then}'
        seq.go_idle()
        return TickOutput(warnings=(message,), hold_outcome=Outcome(False, message))
