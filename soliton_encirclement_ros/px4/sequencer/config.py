"""The sequencer's timing and limits: the bridge's parameters (validated on construction)."""
from dataclasses import dataclass

from ros_support.settings import check_fields, same_as, setting
from soliton_encirclement_ros.core.gains import ControllerParams


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
