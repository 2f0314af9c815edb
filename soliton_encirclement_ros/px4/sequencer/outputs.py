"""What the sequencer answers: setpoints, tick outputs, request outcomes and ``~/status``."""
from dataclasses import dataclass

ZERO = (0.0, 0.0, 0.0)
# ~/status levels (the node maps them to diagnostic_msgs/DiagnosticStatus levels).
OK, WARN, ERROR = 'ok', 'warn', 'error'


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
