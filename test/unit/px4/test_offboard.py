"""
The offboard sequencer as a pure object (runs in CI without px4_msgs).

The engage gate, PX4 found in OFFBOARD, leaving OFFBOARD, warmup from PX4's feedback, retried
temporary rejections, stale odometry, land_after, a wrong target_system, a refused ARM, the NaN
guard; the pending landing (resent, confirmed, denied or unanswered -> the heartbeat stops),
another publisher on the setpoint topics, estimator resets, and engage failures that name PX4's
reason (failsafe, arming refused, mode refused).
"""
import math

from hypothesis import given
from hypothesis import strategies as st
import numpy as np
import pytest

from soliton_encirclement_ros.core.area import AreaWatch, SafetyArea
from soliton_encirclement_ros.px4.offboard import (
    ARMING_STATE_ARMED, ARMING_STATE_DISARMED, ERROR, NAVIGATION_STATE_OFFBOARD, OffboardConfig,
    OffboardSequencer, OK, Outcome, Phase, PX4_CUSTOM_MAIN_MODE_AUTO,
    PX4_CUSTOM_SUB_MODE_AUTO_LOITER,
    VEHICLE_CMD_COMPONENT_ARM_DISARM, VEHICLE_CMD_DO_SET_MODE, VEHICLE_CMD_NAV_LAND,
    VEHICLE_CMD_RESULT_ACCEPTED, VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED, WARN)

POSCTL, AUTO_LOITER, AUTO_RTL, AUTO_LAND, DENIED = 2, 4, 5, 18, 2
OFFBOARD, ARMED, DISARMED = NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED, ARMING_STATE_DISARMED
CFG = OffboardConfig(cmd_timeout=0.5, warmup=1.0, confirm_timeout=5.0, command_retry=1.0,
                     status_timeout=2.0, land_after=10.0)
ME = (255, 191)


def linked(now=0.0, nav=POSCTL, arming=DISARMED, config=CFG, system_id=1):
    """Return a sequencer that streamed since t=0 and has heard a healthy vehicle since t=0."""
    seq = OffboardSequencer(config, target_system=1)
    seq.tick(0.0)
    seq.setpoint(0.0)
    seq.on_status(0.0, nav, arming, system_id)
    seq.on_odometry(0.0)
    if now:
        feed(seq, now, nav, arming, system_id)
    return seq


def feed(seq, now, nav, arming, system_id=1, cmd=None):
    seq.on_status(now, nav, arming, system_id)
    seq.on_odometry(now)
    if cmd is not None:
        seq.on_cmd_vel(now, cmd, 0.0)
    return seq.tick(now)


def requested(now=2.0, config=CFG, nav=POSCTL, arming=DISARMED):
    """
    Return a sequencer whose engage was requested ``warmup`` + 0.1 s before ``now``.

    The request started the stream; PX4 has heard it for ``warmup`` by ``now``: the tick at
    ``now`` sends DO_SET_MODE, none before it.
    """
    start = round(now - config.warmup - 0.1, 2)
    seq = linked(start, nav, arming, config=config)
    assert not seq.streaming  # nothing is sent to a PX4 in another mode before an engage
    assert seq.request_engage(start) is None
    for k in range(round((now - start) / 0.1)):
        assert feed(seq, round(start + 0.1 * k, 2), nav, arming).commands == ()
    assert seq.streaming
    return seq


def engaged(now=2.0):
    """Return an ACTIVE sequencer (the operator engaged, PX4 confirmed OFFBOARD and ARMED)."""
    seq = linked(now, OFFBOARD, ARMED)
    assert seq.request_engage(now) is None
    assert feed(seq, now, OFFBOARD, ARMED).outcome.success
    return seq


def test_cmd_vel_flies_only_while_active():
    seq = linked(2.0)
    seq.on_cmd_vel(2.0, [1.0, 2.0, 3.0], 0.5)
    held = seq.setpoint(2.0)
    assert held.held and held.velocity_ned == (0.0, 0.0, 0.0) and held.yawspeed == 0.0
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 2.0, 3.0], 0.5)
    sp = seq.setpoint(2.1)
    assert not sp.held and np.allclose(sp.velocity_ned, [2.0, 1.0, -3.0]) and sp.yawspeed == -0.5
    stale = seq.setpoint(2.6)
    assert stale.held and stale.velocity_ned == (0.0, 0.0, 0.0)
    assert 'cmd_vel stale (0.60 s old > cmd_timeout 0.5 s)' in stale.warning
    assert seq.setpoint(2.7).warning is None  # once per episode
    seq.on_cmd_vel(3.0, [0.0, 0.0, 1.0], 0.0)
    assert not seq.setpoint(3.0).held
    assert 'cmd_vel stale' in seq.setpoint(4.0).warning  # a new episode warns again


def test_px4_already_in_offboard_without_engage_is_held_with_one_warning():
    """A restarted bridge, or RC/GCS selecting offboard: PX4 returns to OFFBOARD by itself."""
    seq = linked(1.0, OFFBOARD, ARMED)
    flown = []
    for k in range(100):
        now = 1.0 + 0.05 * k
        seq.on_cmd_vel(now, [3.0, 0.0, 0.0], 0.0)
        feed(seq, now, OFFBOARD, ARMED)
        flown.append(seq.setpoint(now))
    assert all(sp.held and sp.velocity_ned == (0.0, 0.0, 0.0) for sp in flown)
    warnings = [sp.warning for sp in flown if sp.warning]
    assert warnings == ['PX4 is in OFFBOARD but this bridge was not engaged: holding (zero '
                        'velocity) until the operator calls ~/engage']
    assert seq.phase is Phase.IDLE


def test_leaving_offboard_returns_to_idle_and_px4_coming_back_does_not_fly():
    seq = engaged(2.0)
    seq.on_cmd_vel(2.5, [1.0, 0.0, 0.0], 0.0)
    assert not seq.setpoint(2.5).held
    out = feed(seq, 3.0, AUTO_LOITER, ARMED, cmd=[1.0, 0.0, 0.0])  # RC switched to Hold
    assert 'PX4 reports nav_state=4' in out.info[0]
    assert ('PX4 left offboard control (nav_state=4 (AUTO_LOITER), arming_state=2 (ARMED))'
            in out.warnings[0])
    assert 'a new ~/engage is needed' in out.warnings[0]
    assert seq.phase is Phase.IDLE and seq.setpoint(3.0).held
    feed(seq, 4.0, OFFBOARD, ARMED, cmd=[1.0, 0.0, 0.0])  # failsafe over: PX4 back in OFFBOARD
    assert seq.setpoint(4.0).held and seq.phase is Phase.IDLE


def test_leaving_and_returning_to_offboard_between_two_ticks_still_ends_the_engage():
    """PX4 out of OFFBOARD and back within one heartbeat period is not missed."""
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    seq.on_status(2.02, POSCTL, ARMED, 1)   # RC took over ...
    assert seq.setpoint(2.03).held          # ... the very next setpoint holds
    seq.on_status(2.05, OFFBOARD, ARMED, 1)  # ... and PX4 returned to OFFBOARD before a tick
    seq.on_cmd_vel(2.06, [1.0, 0.0, 0.0], 0.0)
    out = seq.tick(2.1)
    assert seq.phase is Phase.IDLE
    assert out.warnings == ('PX4 left offboard control (nav_state=2 (POSCTL), arming_state=2 '
                            '(ARMED)): bridge idle, sending PX4 nothing (its mode flies the '
                            'vehicle); a new ~/engage is needed to fly again',)
    feed(seq, 2.2, OFFBOARD, ARMED, cmd=[1.0, 0.0, 0.0])
    assert seq.setpoint(2.2).held and seq.phase is Phase.IDLE  # flying again needs an engage


def test_stale_vehicle_status_while_active_holds_and_needs_a_new_engage():
    """Without vehicle_status the bridge cannot see PX4 leave OFFBOARD: it stops flying."""
    seq = engaged(2.0)
    warnings = []
    for k in range(1, 80):
        now = 2.0 + 0.1 * k
        seq.on_odometry(now)                 # odometry keeps coming, status does not
        seq.on_cmd_vel(now, [1.0, 0.0, 3.0], 0.0)
        sp = seq.setpoint(now)
        warnings += seq.tick(now).warnings
        assert sp.held == (now - 2.0 > CFG.status_timeout + 1e-9), now
        assert not sp.held or sp.velocity_ned == (0.0, 0.0, 0.0)
    assert seq.phase is Phase.IDLE and len(warnings) == 1
    assert warnings[0].startswith('vehicle_status stale (2.1 s > status_timeout 2 s) while '
                                  'engaged')
    feed(seq, 10.0, OFFBOARD, ARMED, cmd=[1.0, 0.0, 0.0])  # status back: still held
    assert seq.setpoint(10.0).held and seq.phase is Phase.IDLE


def test_a_pilot_leaving_offboard_during_the_engage_cancels_it():
    """Once PX4 confirmed OFFBOARD for this request, losing it is a takeover, not a retry."""
    seq = requested(2.0)
    assert [c.command for c in feed(seq, 2.0, POSCTL, DISARMED).commands] == [
        VEHICLE_CMD_DO_SET_MODE]
    assert [c.command for c in feed(seq, 2.1, OFFBOARD, DISARMED).commands] == [
        VEHICLE_CMD_COMPONENT_ARM_DISARM]
    out = feed(seq, 2.2, POSCTL, DISARMED)  # the pilot switched back to Position
    assert out.commands == () and seq.phase is Phase.IDLE
    assert not out.outcome.success and 'PX4 left OFFBOARD during the engage' in out.warnings[0]
    assert all(feed(seq, 2.2 + k, POSCTL, DISARMED).commands == () for k in range(1, 5))


def test_nothing_is_commanded_without_an_operator_request():
    seq = linked()
    for k in range(50):
        out = feed(seq, 0.1 * k, POSCTL, DISARMED)
        assert out.commands == () and out.outcome is None
    assert seq.phase is Phase.IDLE


@pytest.mark.parametrize('prepare, reason', [
    (lambda s: None, 'no vehicle_status received from PX4 yet'),
    (lambda s: s.on_status(10.0, POSCTL, DISARMED), 'no valid vehicle_odometry'),
    (lambda s: (s.on_status(0.0, POSCTL, DISARMED), s.on_odometry(10.0)),
     'vehicle_status is stale (10.0 s old)'),
    (lambda s: (s.on_status(10.0, POSCTL, DISARMED), s.on_odometry(0.0)),
     'vehicle_odometry is stale'),
])
def test_engage_is_refused_without_a_live_vehicle(prepare, reason):
    seq = OffboardSequencer(CFG)
    prepare(seq)
    assert reason in seq.request_engage(10.0)
    assert seq.phase is Phase.IDLE


def test_warmup_counts_from_px4_feedback_after_the_engage_started_the_stream():
    """Nothing is sent before the engage; then PX4 must hear the stream for warmup."""
    seq = OffboardSequencer(CFG)
    for k in range(40):  # PX4 heard, idle: no heartbeat, no setpoint
        assert not seq.streaming
        assert seq.tick(0.05 * k).commands == ()
        seq.on_status(0.05 * k, POSCTL, DISARMED, 1)
        seq.on_odometry(0.05 * k)
    sent = []
    for k in range(40):
        now = round(2.0 + 0.05 * k, 2)
        if k == 0:
            assert seq.request_engage(now) is None and seq.streaming
        out = seq.tick(now)   # the stream starts at the first tick after the request ...
        seq.on_status(now + 0.01, POSCTL, DISARMED, 1)  # ... PX4's answers come after it
        seq.on_odometry(now + 0.01)
        sent += [(now, c.command) for c in out.commands]
    assert sent[0] == (3.05, VEHICLE_CMD_DO_SET_MODE)  # warmup 1 s after PX4's first status


def test_engage_sequence_mode_then_arm_then_active():
    seq = requested(1.5)
    assert 'already mode_requested' in seq.request_engage(1.6)
    out = feed(seq, 1.5, POSCTL, DISARMED)
    (mode,) = out.commands
    assert (mode.command, mode.param1, mode.param2) == (VEHICLE_CMD_DO_SET_MODE, 1.0, 6.0)
    assert feed(seq, 1.6, POSCTL, DISARMED).commands == ()  # not resent yet
    out = feed(seq, 1.7, OFFBOARD, DISARMED)  # OFFBOARD confirmed: only now is ARM sent
    (arm,) = out.commands
    assert (arm.command, arm.param1) == (VEHICLE_CMD_COMPONENT_ARM_DISARM, 1.0)
    assert seq.phase is Phase.ARM_REQUESTED
    assert seq.setpoint(1.7).held  # zero velocity until ACTIVE
    out = feed(seq, 1.9, OFFBOARD, ARMED)
    assert out.outcome.success and 'OFFBOARD and ARMED' in out.outcome.message
    assert seq.phase is Phase.ACTIVE and out.commands == ()


def test_temporarily_rejected_is_retried_until_confirmed():
    seq = requested(2.0)
    sent = []
    for k in range(40):
        now = round(2.0 + 0.1 * k, 1)
        out = feed(seq, now, OFFBOARD if now >= 4.5 else POSCTL, DISARMED if now < 5.0 else ARMED)
        sent += [(now, c.command) for c in out.commands]
        for command in out.commands:  # PX4 is busy (e.g. still checking) the first times
            seq.on_command_ack(now, command.command,
                               VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED if now < 4.0
                               else VEHICLE_CMD_RESULT_ACCEPTED, *ME, source=ME)
        if out.outcome:
            break
    assert sent == [(2.0, VEHICLE_CMD_DO_SET_MODE), (3.0, VEHICLE_CMD_DO_SET_MODE),
                    (4.0, VEHICLE_CMD_DO_SET_MODE), (4.5, VEHICLE_CMD_COMPONENT_ARM_DISARM)]
    assert out.outcome.success


def test_unconfirmed_mode_request_times_out_naming_the_state():
    seq = requested(2.0)
    for k in range(80):
        out = feed(seq, 2.0 + 0.1 * k, POSCTL, DISARMED)
        if out.outcome:
            break
    assert not out.outcome.success
    assert out.outcome.message == (
        'no confirmation within 5 s: OFFBOARD mode not confirmed: PX4 did not answer '
        'DO_SET_MODE (176) (sent 4 times); nav_state=2 (POSCTL), arming_state=1 (DISARMED)')
    assert seq.phase is Phase.IDLE and 'engage failed' in out.warnings[0]


def test_a_wrong_target_system_is_a_warning_and_named_in_the_engage_failure():
    seq = linked(0.0, system_id=3)
    warned = [w for k in range(20)
              for w in feed(seq, 0.1 * k, POSCTL, DISARMED, system_id=3).warnings]
    assert warned == ['target_system is 1 but this PX4 reports system_id 3 (MAV_SYS_ID): PX4 '
                      'ignores commands addressed to another system; set target_system to it']
    reason = seq.request_engage(2.3)
    assert 'target_system is 1 but this PX4 reports system_id 3' in reason


def test_a_refused_arm_takes_px4_out_of_offboard_and_says_so():
    seq = requested(2.0)
    feed(seq, 2.0, POSCTL, DISARMED)
    feed(seq, 2.1, OFFBOARD, DISARMED)  # ARM sent
    seq.on_command_ack(2.15, VEHICLE_CMD_DO_SET_MODE, DENIED, *ME, source=ME)  # other command
    assert feed(seq, 2.2, OFFBOARD, DISARMED).outcome is None
    seq.on_command_ack(2.25, VEHICLE_CMD_COMPONENT_ARM_DISARM, DENIED, *ME, source=ME)
    out = feed(seq, 2.3, OFFBOARD, DISARMED)
    assert not out.outcome.success
    assert out.outcome.message == 'arming refused: PX4 refused COMPONENT_ARM_DISARM (400): DENIED'
    (hold,) = out.commands
    assert (hold.command, hold.param2, hold.param3) == (
        VEHICLE_CMD_DO_SET_MODE, PX4_CUSTOM_MAIN_MODE_AUTO, PX4_CUSTOM_SUB_MODE_AUTO_LOITER)
    assert 'switching PX4 to Hold' in out.info[-1]
    assert seq.phase is Phase.IDLE
    assert seq.request_engage(2.4) is None  # a new request starts clean


def test_acks_addressed_to_another_sender_are_ignored():
    seq = requested(2.0)
    feed(seq, 2.0, POSCTL, DISARMED)
    seq.on_command_ack(2.05, VEHICLE_CMD_DO_SET_MODE, DENIED, 255, 190, source=ME)  # QGC's
    seq.on_command_ack(2.05, VEHICLE_CMD_DO_SET_MODE, DENIED, 1, 1, source=ME)
    assert feed(seq, 2.1, POSCTL, DISARMED).outcome is None
    seq.on_command_ack(2.15, VEHICLE_CMD_DO_SET_MODE, DENIED, *ME, source=ME)
    assert (
        'PX4 refused DO_SET_MODE (176): DENIED' in feed(seq, 2.2, POSCTL, DISARMED).outcome.message
    )


def test_stale_px4_odometry_holds_while_active_and_recovers():
    seq = engaged(2.0)
    setpoints = []
    for k in range(100):
        now = 2.0 + 0.05 * k
        seq.on_status(now, OFFBOARD, ARMED, 1)
        if now < 3.0 or now > 6.0:
            seq.on_odometry(now)
        seq.on_cmd_vel(now, [1.0, 0.0, 0.0], 0.0)
        seq.tick(now)
        setpoints.append((now, seq.setpoint(now)))
    for now, sp in setpoints:
        stale = now - min(now, 2.95) > CFG.status_timeout and now <= 6.0
        assert sp.held == stale, now
    warnings = [sp.warning for _, sp in setpoints if sp.warning]
    assert len(warnings) == 1 and 'PX4 odometry stale' in warnings[0]
    assert 'cmd_vel not forwarded' in warnings[0]
    assert seq.phase is Phase.ACTIVE  # PX4 is still in OFFBOARD: no false "left offboard"


def ack(seq, now, command, result):
    seq.on_command_ack(now, command, result, *ME, source=ME)


def test_land_after_lands_a_dead_agents_vehicle_and_waits_for_px4_to_confirm():
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    lands, outcomes = [], []
    for k in range(300):
        now = round(2.0 + 0.05 * k, 2)
        out = feed(seq, now, AUTO_LAND if lands else OFFBOARD,
                   DISARMED if lands and now >= 16.0 else ARMED)
        lands += [(now, c.command, out.warnings) for c in out.commands]
        for c in out.commands:
            ack(seq, now, c.command, VEHICLE_CMD_RESULT_ACCEPTED)
        outcomes += [out.land_outcome] if out.land_outcome else []
    assert [(t, c) for t, c, _ in lands] == [(12.05, VEHICLE_CMD_NAV_LAND)]
    assert 'cmd_vel silent for 10.1 s while engaged (land_after 10 s)' in lands[0][2][0]
    assert [o.success for o in outcomes] == [True]
    assert outcomes[0].message == ('landed: PX4 reports nav_state=18 (AUTO_LAND), '
                                   'arming_state=1 (DISARMED), 3.9 s after NAV_LAND (land_after)')
    assert seq.phase is Phase.IDLE and not seq.streaming
    assert seq.out_of_ring == 'landed (land_after)'


def landing(handover, touchdown=math.inf):
    """PX4's nav and arming state: AUTO_LAND from ``handover``, disarmed from ``touchdown``."""
    return lambda now: ((OFFBOARD, ARMED) if now < handover else
                        (AUTO_LAND, ARMED) if now < touchdown else (AUTO_LAND, DISARMED))


def land_run(seq, start, answer, state, until=20.0):
    """Request a landing at ``start`` and run 10 Hz ticks: ``answer(now, command)`` acks."""
    sent, outs = [], []
    out = seq.request_land(start)
    now = start
    while now < until:
        sent += [now for c in out.commands if c.command == VEHICLE_CMD_NAV_LAND]
        for c in out.commands:
            result = answer(now, c.command)
            if result is not None:
                ack(seq, now, c.command, result)
        outs.append(out)
        if out.land_outcome:
            break
        now = round(now + 0.1, 2)
        nav, arming = state(now)
        out = feed(seq, now, nav, arming)
    return sent, outs


def test_a_lost_nav_land_is_resent_every_command_retry_until_confirmed():
    seq = engaged(2.0)
    sent, outs = land_run(
        seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED if now >= 4.0 else None,
        landing(4.1, 6.0))
    assert sent == [2.0, 3.0, 4.0]
    assert outs[-1].land_outcome.success and seq.phase is Phase.IDLE
    info = [line for o in outs for line in o.info]
    assert 'resending NAV_LAND (attempt 3)' in info
    assert ('PX4 took the landing over: PX4 reports nav_state=18 (AUTO_LAND), arming_state=2 '
            '(ARMED); the bridge sends it nothing now, and waits for touchdown and disarm '
            '(land_timeout 60 s)') in info


def test_an_accepted_land_still_needs_auto_land_or_disarmed():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED,
                          lambda now: (OFFBOARD, ARMED) if now < 3.5 else (POSCTL, DISARMED))
    assert sent == [2.0, 3.0] and outs[-1].land_outcome.success
    assert 'arming_state=1 (DISARMED)' in outs[-1].land_outcome.message


def test_a_temporarily_rejected_land_is_retried():
    seq = engaged(2.0)
    sent, outs = land_run(
        seq, 2.0, lambda now, c: (VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED if now < 3.0
                                  else VEHICLE_CMD_RESULT_ACCEPTED),
        landing(3.1, 3.5))
    assert sent == [2.0, 3.0] and outs[-1].land_outcome.success


def test_a_denied_landing_stops_the_heartbeat_so_px4_failsafe_takes_the_vehicle():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: DENIED, lambda now: (OFFBOARD, ARMED))
    assert sent == [2.0, 2.1]  # one refusal may answer an earlier attempt: two in a row count
    assert any('PX4 refused NAV_LAND (DENIED): sending it again' in line
               for o in outs for line in o.info)
    (line,) = outs[-1].warnings
    assert line == ('NAV_LAND not confirmed (PX4 refused NAV_LAND (21): DENIED): stopping the '
                    "offboard heartbeat, so that PX4's offboard-loss failsafe takes the vehicle "
                    '(COM_OF_LOSS_T, COM_OBL_RC_ACT); ~/engage starts it again')
    assert outs[-1].land_outcome == Outcome(False, line)
    assert not seq.streaming and seq.phase is Phase.IDLE
    status = seq.status(2.2)
    assert status.level == ERROR and status.message.startswith(
        'offboard heartbeat stopped: NAV_LAND not confirmed (PX4 refused NAV_LAND')
    later = [feed(seq, 2.2 + 0.1 * k, AUTO_LOITER, ARMED) for k in range(50)]  # PX4's failsafe
    assert all(o.commands == () and o.warnings == () for o in later)
    assert not seq.streaming


def test_an_unanswered_landing_times_out_and_names_px4_state():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: None, lambda now: (OFFBOARD, ARMED))
    assert sent == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    message = outs[-1].land_outcome.message
    assert message.startswith('NAV_LAND not confirmed (no confirmation within 5 s: PX4 did not '
                              'answer NAV_LAND (sent 6 times); PX4 reports nav_state=14 '
                              '(OFFBOARD), arming_state=2 (ARMED)): stopping the offboard '
                              'heartbeat')
    assert not seq.streaming


def test_a_landing_refused_outside_offboard_says_px4_keeps_its_mode():
    seq = linked(2.0, POSCTL, ARMED)
    sent, outs = land_run(seq, 2.0, lambda now, c: DENIED, lambda now: (POSCTL, ARMED))
    assert ('PX4 is not in OFFBOARD (nav_state=2 (POSCTL)): it keeps its own mode'
            in outs[-1].warnings[0])


def test_engage_after_the_heartbeat_stopped_restarts_it_with_a_warmup():
    seq = engaged(2.0)
    land_run(seq, 2.0, lambda now, c: DENIED, lambda now: (OFFBOARD, ARMED))
    feed(seq, 3.0, POSCTL, ARMED)  # the pilot took over
    assert seq.request_engage(3.0) is None and seq.streaming
    sent = []
    for k in range(30):
        now = round(3.0 + 0.1 * k, 2)
        seq.setpoint(now)
        out = feed(seq, now, POSCTL, ARMED)
        sent += [(now, c.command) for c in out.commands]
    assert sent[0] == (4.0, VEHICLE_CMD_DO_SET_MODE)  # warmup 1 s from PX4's next feedback


def test_land_while_landing_waits_for_the_same_confirmation_and_engage_is_refused():
    seq = engaged(2.0)
    seq.request_land(2.0)
    again = seq.request_land(2.1)
    assert again.commands == () and 'already pending' in again.info[0]
    assert 'a landing is in progress' in seq.request_engage(2.1)


def test_land_cancels_an_engage_in_progress():
    seq = requested(2.0, arming=ARMED)  # in the air, in Position mode
    out = seq.request_land(2.1)
    assert [c.command for c in out.commands] == [VEHICLE_CMD_NAV_LAND]
    assert not out.outcome.success and 'cancelled' in out.outcome.message
    assert seq.phase is Phase.LANDING
    assert seq.request_land(2.2).outcome is None


def test_another_publisher_is_named_once_refuses_engage_and_holds_the_vehicle():
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    assert not seq.setpoint(2.0).held
    seq.on_other_publishers(2.05, ['/uav2/px4_bridge'], '/px4_1/fmu/in/trajectory_setpoint')
    seq.on_other_publishers(2.1, ['/uav2/px4_bridge'], '/px4_1/fmu/in/trajectory_setpoint')
    warnings = [w for k in range(10) for w in feed(seq, 2.1 + 0.01 * k, OFFBOARD, ARMED,
                                                   cmd=[1.0, 0.0, 0.0]).warnings]
    assert warnings == ['another node publishes setpoints to this vehicle '
                        '(/px4_1/fmu/in/trajectory_setpoint): /uav2/px4_bridge; its setpoints '
                        "interleave with this bridge's: engage is refused and an engaged "
                        'vehicle holds (zero velocity) while it is there']
    assert seq.setpoint(2.2).held and seq.phase is Phase.ACTIVE
    assert seq.status(2.2).level == WARN and '/uav2/px4_bridge' in seq.status(2.2).message
    seq.on_other_publishers(2.3, [], '')
    seq.on_cmd_vel(2.3, [1.0, 0.0, 0.0], 0.0)
    assert not seq.setpoint(2.3).held
    idle = linked(2.0)
    idle.on_other_publishers(2.0, ['/uav1/px4_bridge_2'])
    reason = idle.request_engage(2.0)
    assert reason == ('another node publishes setpoints to this vehicle: /uav1/px4_bridge_2; '
                      'stop it first (one bridge per vehicle)')
    assert idle.phase is Phase.IDLE


def test_another_publisher_appearing_during_the_engage_ends_it():
    seq = requested(2.0)
    feed(seq, 2.0, POSCTL, DISARMED)
    seq.on_other_publishers(2.05, ['/x/px4_bridge'])
    out = feed(seq, 2.1, POSCTL, DISARMED)
    assert not out.outcome.success and '/x/px4_bridge' in out.outcome.message


def odom(seq, now, position, counter):
    seq.on_status(now, OFFBOARD, ARMED, 1)
    seq.on_odometry(now, position, counter)
    seq.on_cmd_vel(now, [1.0, 0.0, 0.0], 0.0)
    return seq.tick(now), seq.setpoint(now)


def test_a_small_estimator_reset_holds_for_reset_hold_then_flies_on():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 3)
    out, sp = odom(seq, 2.05, [0.0, 0.0, 10.0], 3)
    assert not sp.held and out.warnings == ()
    out, sp = odom(seq, 2.1, [1.5, 0.0, 10.0], 4)
    assert out.warnings == ('PX4 estimator reset (reset_counter 3 -> 4): the position estimate '
                            'jumped 1.50 m (+1.50, +0.00, +0.00); commanding zero velocity for '
                            'reset_hold 1 s, then flying on the new estimate',)
    held = [odom(seq, round(2.1 + 0.05 * k, 2), [1.5, 0.0, 10.0], 4) for k in range(1, 30)]
    flying = [round(2.1 + 0.05 * k, 2) for k, (_, sp) in enumerate(held, 1) if not sp.held]
    assert flying[0] == 3.1 and all(sp.held for _, sp in held[:19])
    assert all(o.warnings == () for o, _ in held)
    assert any('estimator reset hold over' in line for o, _ in held for line in o.info)
    assert seq.phase is Phase.ACTIVE


def test_a_large_estimator_reset_holds_until_the_operator_engages_again():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 250)
    out, sp = odom(seq, 2.1, [3.0, 4.0, 10.0], 251)
    assert 'jumped 5.00 m (+3.00, +4.00, +0.00); more than max_reset_jump 2 m: commanding ' \
           'zero velocity until the operator calls ~/engage again' in out.warnings[0]
    held = [odom(seq, 2.1 + 0.1 * k, [3.0, 4.0, 10.0], 251)[1] for k in range(1, 100)]
    assert all(sp.held and sp.velocity_ned == (0.0, 0.0, 0.0) for sp in held)
    status = seq.status(12.0)
    assert status.level == ERROR and status.message == (
        'PX4 estimator reset moved the position estimate 5.00 m (> max_reset_jump 2 m): '
        'holding (zero velocity) until the operator calls ~/engage')
    assert ('last_reset_jump_m', '5.00') in status.values
    assert seq.request_engage(12.0) is None  # the operator accepts the new estimate
    out, sp = odom(seq, 12.0, [3.0, 4.0, 10.0], 251)
    assert out.outcome.success and 'after the estimator reset' in out.outcome.message
    assert not sp.held and seq.status(12.0).level == OK


def test_a_reset_counter_wraps_and_the_first_sample_is_no_reset():
    seq = engaged(2.0)
    out, sp = odom(seq, 2.0, [50.0, 0.0, 10.0], 7)   # first sample with a counter
    assert out.warnings == () and not sp.held
    odom(seq, 2.05, [50.0, 0.0, 10.0], 255)
    out, sp = odom(seq, 2.1, [50.0, 0.0, 10.0], 0)    # uint8 wrap is a new reset too
    assert 'reset_counter 255 -> 0' in out.warnings[0] and sp.held


def test_a_reset_without_a_valid_position_holds_until_engaged():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 1)
    out, sp = odom(seq, 2.1, [math.nan, 0.0, 10.0], 2)
    assert 'jumped by an unknown distance; more than max_reset_jump' in out.warnings[0]
    assert odom(seq, 9.0, [0.0, 0.0, 10.0], 2)[1].held


def test_engage_in_a_failsafe_is_refused_naming_it():
    seq = linked(2.0, AUTO_RTL, ARMED)
    seq.on_status(2.0, AUTO_RTL, ARMED, 1, failsafe=True)
    seq.on_failsafe_flags(2.0, ['offboard_control_signal_lost', 'battery_low_remaining_time'])
    assert seq.request_engage(2.0) == (
        'PX4 is in a failsafe (nav_state=5 (AUTO_RTL); active: offboard_control_signal_lost, '
        'battery_low_remaining_time): clear it (or take over) before engaging')
    seq.on_failsafe_flags(-5.0, ['gcs_connection_lost'])  # old flags are not named
    assert seq.request_engage(2.0).startswith('PX4 is in a failsafe (nav_state=5 (AUTO_RTL)):')
    assert seq.status(2.0).level == WARN


def test_a_failsafe_during_the_engage_ends_it_with_the_reason_not_a_timeout():
    seq = requested(2.0)
    assert feed(seq, 2.0, POSCTL, DISARMED).commands
    seq.on_status(2.1, AUTO_LOITER, DISARMED, 1, failsafe=True)
    seq.on_failsafe_flags(2.1, ['local_position_invalid'])
    seq.on_odometry(2.1)
    out = seq.tick(2.1)
    assert out.outcome == Outcome(False, 'PX4 is in a failsafe (nav_state=4 (AUTO_LOITER); '
                                         'active: local_position_invalid): engage stopped')
    assert out.warnings[-1] == 'engage failed: ' + out.outcome.message


def test_a_temporarily_rejected_arm_times_out_naming_px4_answer():
    seq = requested(2.0)
    for k in range(80):
        now = round(2.0 + 0.1 * k, 2)
        seq.on_status(now, OFFBOARD if now >= 2.5 else POSCTL, DISARMED, 1, preflight_ok=False)
        seq.on_odometry(now)
        out = seq.tick(now)
        for c in out.commands:
            ack(seq, now, c.command, VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED
                if c.command == VEHICLE_CMD_COMPONENT_ARM_DISARM else VEHICLE_CMD_RESULT_ACCEPTED)
        if out.outcome:
            break
    assert out.outcome.message == (
        'no confirmation within 5 s: arming refused: PX4 answered COMPONENT_ARM_DISARM (400) '
        'TEMPORARILY_REJECTED (sent 4 times); nav_state=14 (OFFBOARD), arming_state=1 '
        "(DISARMED); PX4's pre-flight checks fail (pre_flight_checks_pass false)")
    assert 'switching PX4 to Hold' in out.info[-1]


def test_a_refused_mode_is_named():
    seq = requested(2.0)
    (mode,) = feed(seq, 2.0, POSCTL, DISARMED).commands
    ack(seq, 2.05, mode.command, DENIED)
    out = feed(seq, 2.1, POSCTL, DISARMED)
    assert out.outcome.message == 'OFFBOARD mode refused: PX4 refused DO_SET_MODE (176): DENIED'


def test_an_accepted_mode_that_px4_does_not_enter_is_named():
    seq = requested(2.0)
    for k in range(80):
        now = round(2.0 + 0.1 * k, 2)
        out = feed(seq, now, POSCTL, DISARMED)
        for c in out.commands:
            ack(seq, now, c.command, VEHICLE_CMD_RESULT_ACCEPTED)
        if out.outcome:
            break
    assert ('OFFBOARD mode not confirmed: PX4 answered DO_SET_MODE (176) ACCEPTED (sent 4 times)'
            '; nav_state=2 (POSCTL)' in out.outcome.message)


def test_land_after_zero_never_lands():
    config = OffboardConfig(land_after=0.0, warmup=0.1)
    seq = linked(1.0, OFFBOARD, ARMED, config=config)
    seq.request_engage(1.0)
    assert feed(seq, 1.0, OFFBOARD, ARMED).outcome.success
    assert all(feed(seq, 1.0 + k, OFFBOARD, ARMED).commands == () for k in range(100))


def test_non_finite_cmd_vel_is_rejected_and_previous_command_kept():
    seq = engaged(0.0 + 2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    reason = seq.on_cmd_vel(2.1, [np.nan, 0.0, np.inf], 0.2)
    assert 'linear.x=nan' in reason and 'linear.z=inf' in reason
    assert 'angular.z' not in seq.on_cmd_vel(2.1, [0.0, np.nan, 0.0], 0.0)
    assert 'angular.z=nan' in seq.on_cmd_vel(2.1, [0.0, 0.0, 0.0], math.nan)
    assert np.allclose(seq.setpoint(2.2).velocity_ned, [0.0, 1.0, 0.0])


commands = st.tuples(st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(0.0, 2.0))


@given(st.lists(commands, max_size=20))
def test_setpoints_are_always_finite(inputs):
    seq = engaged(2.0)
    now = 2.0
    for vx, vy, vz, wz, dt in inputs:
        now += dt
        seq.on_cmd_vel(now, [vx, vy, vz], wz)
        sp = seq.setpoint(now)
        assert np.all(np.isfinite(sp.velocity_ned)) and np.isfinite(sp.yawspeed)


@pytest.mark.parametrize('name, value', [('cmd_timeout', 0.0), ('warmup', -1.0),
                                         ('confirm_timeout', math.nan),
                                         ('command_retry', math.inf), ('land_after', -1.0)])
def test_config_rejects_bad_durations(name, value):
    with pytest.raises(ValueError, match=f'^{name} must be '):
        OffboardConfig(**{name: value})


# ---- issue 38: summed resets, the uncertainty they leave, the engage reply ------------------
def test_small_resets_in_a_row_add_up_to_a_hold():
    """1.5 m twice in 0.3 s is a 3 m jump: over max_reset_jump 2 m, the vehicle holds."""
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 3)
    out, sp = odom(seq, 2.1, [1.5, 0.0, 10.0], 4)
    assert sp.held and 'commanding zero velocity for reset_hold 1 s' in out.warnings[0]
    assert seq.position_uncertainty(2.1) == pytest.approx(1.5)
    out, sp = odom(seq, 2.4, [3.0, 0.0, 10.0], 5)
    assert out.warnings == (
        'PX4 estimator reset (reset_counter 4 -> 5): the position estimate jumped 1.50 m '
        '(+1.50, +0.00, +0.00), 3.00 m with the resets of the last reset_window 5 s; more than '
        'max_reset_jump 2 m: commanding zero velocity until the operator calls ~/engage again',)
    assert all(odom(seq, 2.4 + 0.5 * k, [3.0, 0.0, 10.0], 5)[1].held for k in range(1, 40))
    assert seq.status(30.0).message.startswith(
        'PX4 estimator reset moved the position estimate 3.00 m (> max_reset_jump 2 m)')
    # Held until the operator accepts the estimate; the uncertainty stays until then.
    assert seq.position_uncertainty(30.0) == pytest.approx(3.0)
    assert seq.request_engage(30.0) is None
    assert seq.position_uncertainty(30.0) == 0.0


def test_small_resets_far_apart_do_not_add_up():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 3)
    odom(seq, 2.1, [1.5, 0.0, 10.0], 4)
    assert seq.position_uncertainty(7.0) == pytest.approx(1.5)   # within reset_window 5 s
    assert seq.position_uncertainty(7.2) == 0.0                  # settled
    out, sp = odom(seq, 8.0, [3.0, 0.0, 10.0], 5)
    assert 'reset_window' not in out.warnings[0] and 'for reset_hold 1 s' in out.warnings[0]
    assert not odom(seq, 9.2, [3.0, 0.0, 10.0], 5)[1].held


def test_an_unknown_jump_counts_as_max_reset_jump():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 1)
    odom(seq, 2.1, [math.nan, 0.0, 10.0], 2)
    assert seq.position_uncertainty(50.0) == CFG.max_reset_jump


def test_an_engage_confirmed_during_a_reset_hold_says_it_holds():
    seq = linked(2.0, POSCTL, DISARMED)
    seq.on_odometry(2.0, [0.0, 0.0, 0.0], 1)
    assert seq.request_engage(2.0) is None
    seq.on_odometry(2.05, [5.0, 0.0, 0.0], 2)   # a 5 m reset during the engage
    outcome = None
    for k in range(1, 40):
        now = round(2.0 + 0.1 * k, 2)
        state = (OFFBOARD, ARMED) if now >= 3.5 else (POSCTL, DISARMED)
        seq.on_status(now, *state, 1)
        seq.on_odometry(now, [5.0, 0.0, 0.0], 2)
        out = seq.tick(now)
        if out.outcome:
            outcome = out.outcome
            break
    assert outcome.success
    assert outcome.message == (
        'engaged: PX4 confirmed OFFBOARD and ARMED; holding (zero velocity): PX4 estimator '
        'reset moved the position estimate 5.00 m (> max_reset_jump 2 m); call ~/engage again '
        'to accept the new estimate')
    assert seq.setpoint(now).held


def test_position_uncertainty_is_reported_in_the_status():
    seq = engaged(2.0)
    odom(seq, 2.0, [0.0, 0.0, 10.0], 3)
    odom(seq, 2.1, [1.0, 0.0, 10.0], 4)
    assert ('position_uncertainty_m', '1.00') in seq.status(2.2).values
    assert ('position_uncertainty_m', '0.00') in seq.status(20.0).values


# ---- issue 38: the landing's truth is PX4's state, not its acks -----------------------------
def test_a_landing_with_lost_acks_is_confirmed_by_auto_land():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: None, landing(2.5, 9.0))
    assert outs[-1].land_outcome.success and not seq.streaming
    assert outs[-1].land_outcome.message == ('landed: PX4 reports nav_state=18 (AUTO_LAND), '
                                             'arming_state=1 (DISARMED), 7.0 s after NAV_LAND '
                                             '(operator request)')
    assert seq.status(9.0).level == OK


def test_a_stale_refusal_from_an_earlier_attempt_does_not_fail_a_landing():
    seq = engaged(2.0)
    seq.request_land(2.0)
    ack(seq, 2.0, VEHICLE_CMD_NAV_LAND, DENIED)   # left over from an earlier attempt
    outs = []
    for k in range(1, 30):
        now = round(2.0 + 0.1 * k, 2)
        out = feed(seq, now, *landing(2.4, 4.0)(now))
        outs.append(out)
        if out.land_outcome:
            break
    assert outs[-1].land_outcome.success and not seq.streaming
    assert not any(o.warnings for o in outs)


def test_a_late_accepted_ack_after_a_new_land_request_needs_px4_state():
    """An ACCEPTED ack of an earlier attempt does not confirm a landing PX4 does not show."""
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED,
                          lambda now: (OFFBOARD, ARMED))
    assert not outs[-1].land_outcome.success
    assert 'PX4 answered NAV_LAND ACCEPTED' in outs[-1].land_outcome.message


def test_a_land_detector_heard_before_any_vehicle_status_is_reported_not_raised():
    """status() raised TypeError when PX4's land detector said landed before its status came."""
    seq = OffboardSequencer(CFG, target_system=1)
    seq.request_land(0.1)
    seq.on_land_detected(0.2, True)
    out = seq.tick(0.3)
    assert out.info[0].startswith('PX4 took the landing over: PX4 reports landed '
                                  '(vehicle_land_detected)')
    status = seq.status(0.3)
    assert status.level == OK and status.message == (
        'landing: PX4 lands the vehicle (no vehicle_status yet), waiting for touchdown and '
        'disarm')
    assert dict(status.values)['landed'] == 'true' and 'nav_state' not in dict(status.values)
    overdue = seq.tick(0.3 + CFG.land_timeout + 0.1)  # never disarmed: named, not raised
    assert 'PX4 reports no vehicle_status yet, landed true' in overdue.land_outcome.message
    assert seq.status(0.3 + CFG.land_timeout + 0.2).level == ERROR


def test_land_detected_shows_px4_took_the_landing_and_must_agree_with_the_disarm():
    seq = engaged(2.0)
    seq.request_land(2.0)
    seq.on_land_detected(2.3, True)
    out = feed(seq, 2.3, OFFBOARD, ARMED)
    assert out.land_outcome is None and out.info[0].startswith(
        'PX4 took the landing over: PX4 reports landed (vehicle_land_detected)')
    seq.on_land_detected(2.4, False)   # a disarm the land detector disagrees with
    assert feed(seq, 2.4, AUTO_LAND, DISARMED).land_outcome is None
    assert seq.status(2.4).message.startswith('landing: PX4 lands the vehicle')
    seq.on_land_detected(2.5, True)
    out = feed(seq, 2.5, AUTO_LAND, DISARMED)
    assert out.land_outcome.message == ('landed: PX4 reports nav_state=18 (AUTO_LAND), '
                                        'arming_state=1 (DISARMED), landed, 0.5 s after '
                                        'NAV_LAND (operator request)')
    assert dict(seq.status(2.5).values)['landed'] == 'true'


def test_a_landing_seen_after_it_was_given_up_clears_the_error():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: None, lambda now: (OFFBOARD, ARMED))
    assert not outs[-1].land_outcome.success and not seq.streaming
    assert seq.status(7.2).level == ERROR
    out = feed(seq, 8.0, AUTO_LAND, ARMED)   # the confirmation came late
    assert out.info[-1] == ('landing confirmed after all: PX4 reports nav_state=18 (AUTO_LAND), '
                            'arming_state=2 (ARMED) (its confirmation came late); the offboard '
                            'heartbeat stays stopped, ~/engage starts it again')
    status = seq.status(8.0)
    assert status.level == OK and status.message.startswith('landing confirmed: PX4 reports')
    assert not any('after all' in line for line in feed(seq, 8.5, AUTO_LAND, ARMED).info)


def test_engage_is_refused_while_px4_lands():
    seq = linked(2.0, AUTO_LAND, ARMED)
    assert seq.request_engage(2.0) == (
        'PX4 is landing (nav_state=18 (AUTO_LAND), arming_state=2 (ARMED)): the bridge never '
        'takes a vehicle out of a landing; take over with the RC or the ground station first, '
        'or engage once it has landed and disarmed')
    seq = linked(2.0, AUTO_LAND, DISARMED)     # landed and disarmed: may take off again
    assert seq.request_engage(2.0) is None


def test_px4_landing_during_an_engage_ends_it():
    seq = requested(2.0)
    out = feed(seq, 2.1, AUTO_LAND, ARMED)
    assert not out.outcome.success
    assert out.outcome.message.startswith('PX4 started landing during the engage')


def test_an_unheard_px4_names_the_node_hint():
    """The node's hint (a px4_msgs of another message version) is the engage refusal's why."""
    seq = OffboardSequencer(CFG, target_system=1)
    assert 'is the uXRCE-DDS agent running' in seq.request_engage(0.0)
    seq.link_hint = 'PX4 publishes /fmu/out/vehicle_status_v2 but this bridge listens on ...'
    assert seq.request_engage(0.0) == ('no vehicle_status received from PX4 yet: PX4 publishes '
                                       '/fmu/out/vehicle_status_v2 but this bridge listens on ...')


# ---- battery (issue 37 §5) ---------------------------------------------------------------
def test_a_low_battery_refuses_the_engage_naming_the_charge():
    seq = linked(2.0)
    seq.on_battery(2.0, 0.18, 0)
    assert seq.request_engage(2.0) == ('battery 18% remaining, below min_battery 25%: charge or '
                                       'swap it before engaging')
    seq.on_battery(2.0, 0.9, 2)  # charged, but PX4 says CRITICAL (e.g. a weak cell)
    assert seq.request_engage(2.0).startswith('battery warning CRITICAL from PX4')
    seq.on_battery(2.0, -1.0, 0)  # unknown charge (PX4: -1): not a reason to refuse
    assert seq.request_engage(2.0) is None


def test_a_battery_falling_below_min_battery_lands_and_leaves_the_ring_until_engaged():
    seq = engaged(2.0)
    seq.on_battery(2.5, 0.30, 0)
    assert feed(seq, 2.5, OFFBOARD, ARMED).commands == ()
    assert seq.out_of_ring is None
    seq.on_battery(3.0, 0.24, 0)
    out = feed(seq, 3.0, OFFBOARD, ARMED)
    assert [c.command for c in out.commands] == [VEHICLE_CMD_NAV_LAND]
    assert out.warnings == ('battery 24% remaining, below min_battery 25%: leaving the ring and '
                            'landing; sending NAV_LAND and waiting for PX4 to confirm it',)
    assert seq.phase is Phase.LANDING
    assert seq.out_of_ring == 'landing (battery 24% remaining, below min_battery 25%)'
    assert ('out_of_ring', seq.out_of_ring) in seq.status(3.0).values
    land = feed(seq, 3.2, AUTO_LAND, ARMED)
    assert land.land_outcome is None or land.land_outcome.success
    feed(seq, 4.0, AUTO_LAND, DISARMED)
    assert seq.out_of_ring  # landed: still out of the ring
    seq.on_battery(5.0, 1.0, 0)  # a fresh battery; the operator engages again
    seq.on_status(5.0, OFFBOARD, ARMED, 1)
    assert seq.request_engage(5.0) is None
    assert feed(seq, 5.0, OFFBOARD, ARMED).outcome.success
    assert seq.out_of_ring is None


def test_a_stale_battery_status_is_no_reason_and_zero_min_battery_keeps_only_warnings():
    seq = linked(2.0, config=OffboardConfig(min_battery=0.0))
    seq.on_battery(2.0, 0.05, 1)  # LOW: PX4's own failsafe acts on it
    assert seq.request_engage(2.0) is None
    seq = linked(10.0)
    seq.on_battery(1.0, 0.05, 0)  # 9 s old, status_timeout 2 s
    assert seq.request_engage(10.0) is None


# ---- safety area (issue 37 §2) -------------------------------------------------------------
FIELD = SafetyArea.from_mapping({'polygon': [[-20, -20], [20, -20], [20, 20], [-20, 20]],
                                 'z_min': 0.0, 'z_max': 30.0})


def fenced(now=2.0, position=(0.0, 0.0, 5.0), land_after=10.0):
    """Return a linked sequencer with the safety area, its odometry at ``position``."""
    seq = linked(0.0)
    seq.area_watch = AreaWatch(FIELD, land_after)
    seq.on_status(now, OFFBOARD, ARMED, 1)
    seq.on_odometry(now, position)
    return seq


def test_the_engage_is_refused_outside_the_safety_area_and_without_a_position():
    seq = fenced(position=(25.0, 0.0, 5.0))
    assert seq.request_engage(2.0) == (
        'outside the safety area (at (25.0, 0.0, 5.0) m, 5.0 m outside the polygon): carry the '
        'vehicle inside before engaging')
    assert ('safety_area', 'outside (at (25.0, 0.0, 5.0) m, 5.0 m outside the polygon)') in \
        seq.status(2.0).values
    unplaced = linked(2.0, OFFBOARD, ARMED)  # odometry heard, but no position in the world
    unplaced.area_watch = AreaWatch(FIELD)
    assert unplaced.request_engage(2.0) == ('no position in the world frame yet to check '
                                            'against the safety area')
    seq.on_odometry(2.5, (10.0, 0.0, 5.0))
    assert seq.request_engage(2.5) is None


def test_a_vehicle_outside_holds_at_once_says_so_once_and_lands_after_outside_land_after():
    seq = fenced()
    assert seq.request_engage(2.0) is None
    assert feed(seq, 2.0, OFFBOARD, ARMED).outcome.success
    seq.on_cmd_vel(2.1, (3.0, 0.0, 0.0), 0.0)
    seq.on_odometry(2.1, (19.0, 0.0, 5.0))
    assert not seq.setpoint(2.1).held
    seq.on_cmd_vel(3.0, (3.0, 0.0, 0.0), 0.0)
    seq.on_odometry(3.0, (21.0, 0.0, 5.0))  # pushed out (wind, a reset): hold at once
    assert seq.setpoint(3.0).held
    warnings = []
    for k in range(1, 100):  # 10 s outside, odometry at 10 Hz
        now = 3.0 + 0.1 * k
        seq.on_cmd_vel(now, (3.0, 0.0, 0.0), 0.0)
        seq.on_status(now, OFFBOARD, ARMED, 1)
        seq.on_odometry(now, (21.0, 0.0, 5.0))
        out = seq.tick(now)
        warnings += out.warnings
        assert seq.setpoint(now).held and out.commands == ()
    assert warnings == ['outside the safety area (at (21.0, 0.0, 5.0) m, 1.0 m outside the '
                        'polygon): holding (zero velocity), landing after outside_land_after '
                        '10 s']
    seq.on_status(13.0, OFFBOARD, ARMED, 1)
    seq.on_odometry(13.0, (21.0, 0.0, 5.0))
    out = seq.tick(13.0)
    assert [c.command for c in out.commands] == [VEHICLE_CMD_NAV_LAND]
    assert out.warnings[0].startswith('outside the safety area for 10.0 s (outside_land_after 10 '
                                      's): landing')
    assert out.warnings[-1] == ('outside the safety area for 10.0 s (at (21.0, 0.0, 5.0) m, 1.0 '
                                'm outside the polygon): leaving the ring and landing; sending '
                                'NAV_LAND and waiting for PX4 to confirm it')
    assert seq.phase is Phase.LANDING
    assert seq.out_of_ring.startswith('landing (outside the safety area for 10.0 s')


def test_back_inside_before_outside_land_after_flies_on_and_above_the_band_counts_too():
    seq = fenced()
    seq.request_engage(2.0)
    feed(seq, 2.0, OFFBOARD, ARMED)
    seq.on_odometry(2.5, (0.0, 0.0, 31.0))
    assert seq.area_watch.outside == 'at (0.0, 0.0, 31.0) m, 1.0 m above z_max 30 m'
    seq.on_cmd_vel(5.0, (1.0, 0.0, 0.0), 0.0)
    seq.on_status(5.0, OFFBOARD, ARMED, 1)
    seq.on_odometry(5.0, (0.0, 0.0, 29.0))
    assert not seq.setpoint(5.0).held
    assert feed(seq, 5.0, OFFBOARD, ARMED).commands == ()
    assert seq.phase is Phase.ACTIVE


# ---- px4-ros2-interface-lib's rule: setpoints only in the mode the bridge asked for ----------

@pytest.mark.parametrize('mode', [AUTO_LOITER, AUTO_RTL, AUTO_LAND, POSCTL])
def test_nothing_is_sent_once_px4_leaves_offboard_for_another_mode(mode):
    """An RC switch or a failsafe: that mode's setpoints must not be mixed with the bridge's."""
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    assert seq.streaming
    seq.on_status(2.05, mode, ARMED, 1)       # the next status already stops the stream
    assert not seq.streaming
    for k in range(1, 50):
        now = 2.05 + 0.1 * k
        out = feed(seq, now, mode, ARMED if now < 4.0 else DISARMED, cmd=[1.0, 0.0, 0.0])
        assert not seq.streaming and out.commands == ()
    assert seq.phase is Phase.IDLE
    assert seq.out_of_ring.startswith(f'PX4 left OFFBOARD (nav_state={mode} ')
    feed(seq, 7.0, OFFBOARD, DISARMED)        # PX4 back in OFFBOARD on the ground: still nothing
    assert not seq.streaming


def test_the_stream_stops_when_px4_takes_the_landing_over_and_never_comes_back():
    """A live heartbeat at the disarm would return PX4 to OFFBOARD (its mode before NAV_LAND)."""
    seq = engaged(2.0)
    out = seq.request_land(2.0)
    assert seq.streaming                      # still in OFFBOARD: zero velocity until PX4 switches
    streamed = []
    for k in range(1, 120):
        now = round(2.0 + 0.1 * k, 2)
        out = feed(seq, now, *landing(2.3, 10.0)(now))
        streamed.append((now, seq.streaming))
        if out.land_outcome:
            break
    assert [now for now, on in streamed if on] == [2.1, 2.2]
    assert out.land_outcome.success and seq.phase is Phase.IDLE
    assert seq.status(10.0).message.startswith('landed (operator request): PX4 reports')


def test_a_landing_is_done_only_when_px4_reports_landed_and_disarmed():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED, landing(2.2),
                          until=70.0)
    warnings = [w for o in outs for w in o.warnings]
    assert warnings == ['not landed 60 s after PX4 took the landing over (land_timeout 60 s): '
                        'PX4 reports nav_state=18 (AUTO_LAND), arming_state=2 (ARMED), landed '
                        'unknown; check the vehicle']
    assert not outs[-1].land_outcome.success and seq.phase is Phase.LANDING
    status = seq.status(62.3)
    assert status.level == ERROR and status.message.startswith('not landed 60 s after')
    assert dict(status.values)['phase'] == 'landing'
    out = feed(seq, 70.0, AUTO_LAND, DISARMED)  # it landed in the end
    assert out.land_outcome.success and out.land_outcome.message.startswith('landed: ')
    assert seq.out_of_ring == 'landed (operator request)'


def test_a_landing_taken_over_by_the_pilot_ends_it_and_the_bridge_sends_nothing():
    seq = engaged(2.0)
    sent, outs = land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED,
                          lambda now: (AUTO_LAND, ARMED) if now < 5.0 else (POSCTL, ARMED))
    assert not outs[-1].land_outcome.success
    assert outs[-1].warnings == ('landing taken over: PX4 reports nav_state=2 (POSCTL), '
                                 'arming_state=2 (ARMED) (an RC switch, the ground station or a '
                                 'failsafe); the bridge sends it nothing, a new ~/engage is '
                                 'needed to fly again',)
    assert seq.phase is Phase.IDLE and not seq.streaming


def test_landing_a_vehicle_on_the_ground_sends_nothing():
    seq = linked(2.0, POSCTL, DISARMED)
    seq.on_land_detected(2.0, True)
    out = seq.request_land(2.0)
    assert out.commands == () and out.land_outcome.success
    assert out.land_outcome.message == ('landed: already on the ground, PX4 reports nav_state=2 '
                                        '(POSCTL), arming_state=1 (DISARMED), landed (nothing '
                                        'sent)')


def fly_again(seq, start):
    """Engage ``seq`` at ``start`` against a PX4 that follows the requests; the outcome."""
    assert seq.request_engage(start) is None
    nav, arming = POSCTL, DISARMED
    for k in range(80):
        now = round(start + 0.1 * k, 2)
        out = feed(seq, now, nav, arming)
        for c in out.commands:
            if c.command == VEHICLE_CMD_DO_SET_MODE and c.param2 == 6.0:
                nav = OFFBOARD
            elif c.command == VEHICLE_CMD_COMPONENT_ARM_DISARM:
                arming = ARMED
        if out.outcome:
            return out.outcome
    return None


def test_after_a_landing_the_vehicle_engages_again_and_rejoins_the_ring():
    seq = engaged(2.0)
    land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED, landing(2.2, 6.0))
    assert seq.phase is Phase.IDLE and seq.out_of_ring == 'landed (operator request)'
    feed(seq, 8.0, AUTO_LAND, DISARMED)
    assert dict(seq.status(8.0).values)['ready'] == 'yes'
    outcome = fly_again(seq, 8.0)
    assert outcome.success and seq.phase is Phase.ACTIVE and seq.out_of_ring is None


# ---- the operator's hold ----------------------------------------------------------------

def test_hold_switches_px4_to_hold_confirms_it_and_then_sends_nothing():
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    out = seq.request_hold(2.0)
    (hold,) = out.commands
    assert (hold.command, hold.param1, hold.param2, hold.param3) == (
        VEHICLE_CMD_DO_SET_MODE, 1.0, PX4_CUSTOM_MAIN_MODE_AUTO, PX4_CUSTOM_SUB_MODE_AUTO_LOITER)
    assert seq.out_of_ring == 'hold (operator request)'
    sp = seq.setpoint(2.05)                   # still in OFFBOARD: zero velocity, not cmd_vel
    assert sp.held and sp.velocity_ned == (0.0, 0.0, 0.0)
    assert seq.status(2.05).message.startswith('hold requested (operator request)')
    ack(seq, 2.05, VEHICLE_CMD_DO_SET_MODE, VEHICLE_CMD_RESULT_ACCEPTED)
    out = feed(seq, 2.1, AUTO_LOITER, ARMED)
    assert out.hold_outcome == Outcome(True, 'holding: PX4 reports nav_state=4 (AUTO_LOITER), '
                                       'arming_state=2 (ARMED) (operator request); the bridge '
                                       'sends it nothing; ~/engage flies again, ~/land lands')
    assert seq.phase is Phase.IDLE and not seq.streaming
    assert all(feed(seq, 2.1 + 0.1 * k, AUTO_LOITER, ARMED).commands == () for k in range(30))
    assert not seq.streaming and seq.status(5.0).level == WARN


def test_hold_cancels_a_landing_and_an_engage_and_is_resent_until_confirmed():
    seq = engaged(2.0)
    seq.request_land(2.0)
    out = seq.request_hold(2.1)
    assert out.land_outcome == Outcome(False, 'landing cancelled by a hold request')
    sent = []
    for k in range(1, 40):
        now = round(2.1 + 0.1 * k, 2)
        out = feed(seq, now, OFFBOARD if now < 4.0 else AUTO_LOITER, ARMED)
        sent += [now for c in out.commands]
        if out.hold_outcome:
            break
    assert sent == [3.1] and out.hold_outcome.success  # lost once, resent after command_retry
    seq = requested(2.0, arming=ARMED)
    out = seq.request_hold(2.0)
    assert out.outcome == Outcome(False, 'engage cancelled by a hold request')


def test_a_refused_hold_is_named_and_the_bridge_keeps_px4_at_zero_velocity():
    seq = engaged(2.0)
    seq.request_hold(2.0)
    ack(seq, 2.0, VEHICLE_CMD_DO_SET_MODE, DENIED)
    out = feed(seq, 2.1, OFFBOARD, ARMED)
    assert out.hold_outcome == Outcome(False, 'Hold not confirmed (PX4 refused DO_SET_MODE '
                                       '(176): DENIED); PX4 reports nav_state=14 (OFFBOARD), '
                                       'arming_state=2 (ARMED); the bridge holds it in OFFBOARD '
                                       'at zero velocity')
    assert seq.streaming and seq.setpoint(2.1).held


def test_engage_after_a_hold_flies_again():
    seq = engaged(2.0)
    seq.request_hold(2.0)
    feed(seq, 2.1, AUTO_LOITER, ARMED)
    assert seq.request_engage(2.2) is None
    sent = []
    for k in range(30):
        now = round(2.2 + 0.1 * k, 2)
        out = feed(seq, now, AUTO_LOITER if not sent else OFFBOARD, ARMED)
        sent += [c.command for c in out.commands]
        if out.outcome:
            break
    assert sent == [VEHICLE_CMD_DO_SET_MODE] and out.outcome.success
    assert seq.out_of_ring is None and seq.phase is Phase.ACTIVE


def test_held_after_a_large_reset_the_others_are_told_where_it_was_not_the_phantom():
    """A 44.72 m jump: the vehicle holds where it was; a 45 m disc would swallow the ring."""
    seq = engaged(2.0)
    odom(seq, 2.0, [20.0, 0.0, 10.0], 1)
    odom(seq, 2.1, [40.0, 40.0, 10.0], 2)   # the estimate jumps (20, 40): 44.72 m
    position, uncertainty = seq.trusted_position(2.1, [40.0, 40.0, 10.0])
    assert np.allclose(position, [20.0, 0.0, 10.0]) and uncertainty == 0.0
    # it drifts with its estimate (a hold), and its uncertainty grows at hold_drift
    odom(seq, 7.1, [40.5, 40.0, 10.0], 2)
    position, uncertainty = seq.trusted_position(7.1, [40.5, 40.0, 10.0])
    assert np.allclose(position, [20.5, 0.0, 10.0])
    assert uncertainty == pytest.approx(5.0 * seq.config.hold_drift)
    assert seq.request_engage(8.0) is None   # the operator accepts the new estimate
    position, uncertainty = seq.trusted_position(8.0, [40.5, 40.0, 10.0])
    assert np.allclose(position, [40.5, 40.0, 10.0]) and uncertainty == 0.0


def test_a_small_reset_is_flown_on_the_new_estimate_with_its_jump_as_uncertainty():
    seq = engaged(2.0)
    odom(seq, 2.0, [20.0, 0.0, 10.0], 1)
    odom(seq, 2.1, [21.5, 0.0, 10.0], 2)
    position, uncertainty = seq.trusted_position(2.1, [21.5, 0.0, 10.0])
    assert np.allclose(position, [21.5, 0.0, 10.0]) and uncertainty == pytest.approx(1.5)


def test_the_status_says_whether_an_engaged_vehicle_holds_and_why():
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    assert dict(seq.status(2.1).values)['holding'] == 'no'
    seq.on_other_publishers(2.2, ['/uav2/px4_bridge'], '/px4_1/fmu/in/trajectory_setpoint')
    seq.on_cmd_vel(2.2, [1.0, 0.0, 0.0], 0.0)
    assert dict(seq.status(2.2).values)['holding'].startswith(
        'another node publishes setpoints to this vehicle: /uav2/px4_bridge')
    seq.on_other_publishers(2.3, [], '')
    assert dict(seq.status(3.0).values)['holding'].startswith('cmd_vel stale')
    assert 'holding' not in dict(linked(2.0).status(2.0).values)


def test_an_agent_rejoining_at_the_engage_gets_cmd_timeout_before_a_warning():
    """After a landing the agent is out of the ring; it rejoins at the engage, a tick later."""
    seq = engaged(2.0)
    seq.on_cmd_vel(2.0, [1.0, 0.0, 0.0], 0.0)
    land_run(seq, 2.0, lambda now, c: VEHICLE_CMD_RESULT_ACCEPTED, landing(2.2, 6.0))
    feed(seq, 40.0, AUTO_LAND, DISARMED)
    assert fly_again(seq, 40.0).success   # no cmd_vel for 38 s: the agent was out
    now = seq._active_since
    first = seq.setpoint(now + 0.1)
    assert first.held and first.warning is None   # waiting for the agent's first command
    seq.on_cmd_vel(now + 0.2, [1.0, 0.0, 0.0], 0.0)
    assert not seq.setpoint(now + 0.2).held
    late = engaged(2.0)   # an agent that does not come: named cmd_timeout after the engage
    late._cmd = None
    assert late.setpoint(2.3).warning is None
    assert late.setpoint(2.6).warning.startswith('no cmd_vel since the engage 0.60 s ago')
