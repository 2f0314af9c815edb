"""The offboard sequencer as a pure object: streaming -> mode -> arm -> active, staleness,
refusals, timeouts and the NaN guard."""
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from soliton_encirclement_ros.px4.offboard import (
    ARMING_STATE_ARMED, ARMING_STATE_DISARMED, NAVIGATION_STATE_OFFBOARD,
    VEHICLE_CMD_COMPONENT_ARM_DISARM, VEHICLE_CMD_DO_SET_MODE, VEHICLE_CMD_NAV_LAND, OffboardConfig,
    OffboardSequencer, Phase)

POSCTL = 2
CFG = OffboardConfig(cmd_timeout=0.5, warmup=1.0, confirm_timeout=5.0, command_retry=1.0,
                     status_timeout=2.0)


def linked(now=0.0, nav=POSCTL, arming=ARMING_STATE_DISARMED):
    """A sequencer that has streamed since t=0 and hears a healthy vehicle at `now`."""
    seq = OffboardSequencer(CFG)
    seq.tick(0.0)
    seq.on_status(now, nav, arming)
    seq.on_odometry(now)
    return seq


def feed(seq, now, nav, arming):
    seq.on_status(now, nav, arming)
    seq.on_odometry(now)
    return seq.tick(now)


def test_setpoint_follows_cmd_vel_in_ned_and_goes_to_hover_when_stale():
    seq = OffboardSequencer(CFG)
    first = seq.setpoint(0.0)
    assert first.stale and first.velocity_ned == (0.0, 0.0, 0.0) and first.yawspeed == 0.0
    assert 'no cmd_vel received yet' in first.warning
    assert seq.setpoint(0.1).warning is None  # warned once only

    assert seq.on_cmd_vel(1.0, [1.0, 2.0, 3.0], 0.5) is None
    sp = seq.setpoint(1.2)
    assert not sp.stale and sp.warning is None
    assert np.allclose(sp.velocity_ned, [2.0, 1.0, -3.0]) and sp.yawspeed == -0.5

    stale = seq.setpoint(1.6)
    assert stale.stale and stale.velocity_ned == (0.0, 0.0, 0.0) and stale.yawspeed == 0.0
    assert 'cmd_vel stale (0.60 s > cmd_timeout 0.5 s)' in stale.warning
    assert seq.setpoint(1.7).warning is None

    seq.on_cmd_vel(2.0, [0.0, 0.0, 1.0], 0.0)
    assert not seq.setpoint(2.0).stale
    assert 'cmd_vel stale' in seq.setpoint(3.0).warning  # a new stale episode warns again


def test_non_finite_cmd_vel_is_rejected_and_previous_command_kept():
    seq = OffboardSequencer(CFG)
    seq.on_cmd_vel(0.0, [1.0, 0.0, 0.0], 0.0)
    reason = seq.on_cmd_vel(0.1, [np.nan, 0.0, np.inf], 0.2)
    assert 'linear.x=nan' in reason and 'linear.z=inf' in reason
    assert 'angular.z' not in seq.on_cmd_vel(0.1, [0.0, np.nan, 0.0], 0.0)
    assert 'angular.z=nan' in seq.on_cmd_vel(0.1, [0.0, 0.0, 0.0], math.nan)
    assert np.allclose(seq.setpoint(0.2).velocity_ned, [0.0, 1.0, 0.0])


commands = st.tuples(st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.floats(0.0, 2.0))


@given(st.lists(commands, max_size=20))
def test_setpoints_are_always_finite(inputs):
    seq = OffboardSequencer(CFG)
    now = 0.0
    for vx, vy, vz, wz, dt in inputs:
        now += dt
        seq.on_cmd_vel(now, [vx, vy, vz], wz)
        sp = seq.setpoint(now)
        assert np.all(np.isfinite(sp.velocity_ned)) and np.isfinite(sp.yawspeed)


def test_nothing_is_commanded_without_an_operator_request():
    seq = linked()
    for k in range(50):
        out = feed(seq, 0.1 * k, POSCTL, ARMING_STATE_DISARMED)
        assert out.commands == () and out.outcome is None
    assert seq.phase is Phase.STREAMING


@pytest.mark.parametrize('prepare, reason', [
    (lambda s: None, 'no vehicle_status received from PX4 yet'),
    (lambda s: s.on_status(10.0, POSCTL, ARMING_STATE_DISARMED), 'no valid vehicle_odometry'),
    (lambda s: (s.on_status(0.0, POSCTL, 1), s.on_odometry(10.0)),
     'vehicle_status is stale (10.0 s old)'),
    (lambda s: (s.on_status(10.0, POSCTL, 1), s.on_odometry(0.0)), 'vehicle_odometry is stale'),
])
def test_engage_is_refused_without_a_live_vehicle(prepare, reason):
    seq = OffboardSequencer(CFG)
    prepare(seq)
    assert reason in seq.request_engage(10.0)
    assert seq.phase is Phase.STREAMING


def test_engage_sequence_mode_then_arm_then_active():
    seq = linked(0.5)
    assert seq.request_engage(0.5) is None
    assert 'already mode_requested' in seq.request_engage(0.6)
    # Still inside the heartbeat warm-up: nothing is sent yet.
    assert feed(seq, 0.5, POSCTL, ARMING_STATE_DISARMED).commands == ()
    out = feed(seq, 1.0, POSCTL, ARMING_STATE_DISARMED)
    (mode,) = out.commands
    assert (mode.command, mode.param1, mode.param2) == (VEHICLE_CMD_DO_SET_MODE, 1.0, 6.0)
    assert feed(seq, 1.1, POSCTL, ARMING_STATE_DISARMED).commands == ()  # not resent yet
    # OFFBOARD confirmed: only now is ARM sent.
    out = feed(seq, 1.2, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_DISARMED)
    (arm,) = out.commands
    assert (arm.command, arm.param1) == (VEHICLE_CMD_COMPONENT_ARM_DISARM, 1.0)
    assert seq.phase is Phase.ARM_REQUESTED
    out = feed(seq, 1.4, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED)
    assert out.outcome.success and 'OFFBOARD and ARMED' in out.outcome.message
    assert seq.phase is Phase.ACTIVE and out.commands == ()


def test_already_armed_vehicle_only_needs_the_mode_switch():
    seq = linked(2.0, POSCTL, ARMING_STATE_ARMED)
    seq.request_engage(2.0)
    sent = feed(seq, 2.0, POSCTL, ARMING_STATE_ARMED).commands
    assert [c.command for c in sent] == [VEHICLE_CMD_DO_SET_MODE]
    out = feed(seq, 2.2, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED)
    assert out.outcome.success and out.commands == ()


def test_unconfirmed_mode_request_is_retried_then_times_out_with_the_state():
    seq = linked(2.0)
    seq.request_engage(2.0)
    sent = []
    for k in range(0, 80):
        out = feed(seq, 2.0 + 0.1 * k, POSCTL, ARMING_STATE_DISARMED)
        sent += [(round(2.0 + 0.1 * k, 1), c.command) for c in out.commands]
        if out.outcome:
            break
    assert [t for t, _ in sent] == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    assert {c for _, c in sent} == {VEHICLE_CMD_DO_SET_MODE}
    assert not out.outcome.success
    assert 'no confirmation within 5.0 s' in out.outcome.message
    assert 'nav_state=2 (OFFBOARD is 14)' in out.outcome.message
    assert 'arming_state=1 (DISARMED)' in out.outcome.message
    assert seq.phase is Phase.STREAMING
    assert out.warnings and 'engage failed' in out.warnings[0]


def test_arm_refused_by_px4_fails_with_the_reason():
    seq = linked(2.0)
    seq.request_engage(2.0)
    feed(seq, 2.0, POSCTL, ARMING_STATE_DISARMED)
    feed(seq, 2.1, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_DISARMED)
    seq.on_command_ack(2.15, VEHICLE_CMD_DO_SET_MODE, 2)  # ack for another command: ignored
    assert feed(seq, 2.2, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_DISARMED).outcome is None
    seq.on_command_ack(2.25, VEHICLE_CMD_COMPONENT_ARM_DISARM, 1)
    out = feed(seq, 2.3, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_DISARMED)
    assert not out.outcome.success
    assert out.outcome.message == 'PX4 refused COMPONENT_ARM_DISARM (400): TEMPORARILY_REJECTED'
    # A new request starts clean.
    assert seq.request_engage(2.4) is None


def test_accepted_ack_does_not_fail():
    seq = linked(2.0)
    seq.request_engage(2.0)
    feed(seq, 2.0, POSCTL, ARMING_STATE_DISARMED)
    seq.on_command_ack(2.05, VEHICLE_CMD_DO_SET_MODE, 0)
    assert feed(seq, 2.1, POSCTL, ARMING_STATE_DISARMED).outcome is None


def test_link_loss_during_engage_fails():
    seq = linked(2.0)
    seq.request_engage(2.0)
    feed(seq, 2.0, POSCTL, ARMING_STATE_DISARMED)
    out = seq.tick(4.5)
    assert not out.outcome.success and 'vehicle_status is stale' in out.outcome.message


def test_leaving_offboard_while_active_is_reported():
    seq = linked(2.0, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED)
    seq.request_engage(2.0)
    assert feed(seq, 2.0, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED).outcome.success
    assert feed(seq, 2.5, NAVIGATION_STATE_OFFBOARD, ARMING_STATE_ARMED).warnings == ()
    out = feed(seq, 3.0, 4, ARMING_STATE_ARMED)  # e.g. RC switched to hold (AUTO_LOITER)
    assert 'left offboard control: nav_state=4' in out.warnings[0]
    assert seq.phase is Phase.STREAMING and out.commands == ()


def test_land_cancels_an_engage_in_progress():
    seq = linked(2.0)
    seq.request_engage(2.0)
    out = seq.request_land(2.1)
    assert [c.command for c in out.commands] == [VEHICLE_CMD_NAV_LAND]
    assert not out.outcome.success and 'cancelled' in out.outcome.message
    assert seq.phase is Phase.STREAMING
    assert seq.request_land(2.2).outcome is None


@pytest.mark.parametrize('name, value', [('cmd_timeout', 0.0), ('warmup', -1.0),
                                         ('confirm_timeout', math.nan),
                                         ('command_retry', math.inf)])
def test_config_rejects_bad_durations(name, value):
    with pytest.raises(ValueError, match=f'OffboardConfig.{name} must be a positive'):
        OffboardConfig(**{name: value})
