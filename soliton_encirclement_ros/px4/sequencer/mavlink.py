"""
PX4's numbers and names (MAVLink, px4_msgs) and the commands the sequencer sends.

The node checks the numbers against the built px4_msgs at start-up
(``bridge_node.PX4_CONSTANTS``).
"""
from dataclasses import dataclass

# VehicleCommand.msg, VehicleStatus.msg, VehicleCommandAck.msg.
VEHICLE_CMD_NAV_LAND = 21
VEHICLE_CMD_DO_SET_MODE = 176
VEHICLE_CMD_COMPONENT_ARM_DISARM = 400
MAV_MODE_FLAG_CUSTOM_MODE_ENABLED = 1.0   # DO_SET_MODE param1
PX4_CUSTOM_MAIN_MODE_AUTO = 4.0           # DO_SET_MODE param2 ...
PX4_CUSTOM_MAIN_MODE_OFFBOARD = 6.0
PX4_CUSTOM_SUB_MODE_AUTO_LOITER = 3.0     # ... param3: AUTO.LOITER is PX4's Hold mode
NAVIGATION_STATE_OFFBOARD = 14
NAVIGATION_STATE_AUTO_LAND = 18
NAVIGATION_STATE_AUTO_LOITER = 4
# PX4 modes that end on the ground: a landing PX4 has taken over goes on in any of them
# (AUTO_RTL, DESCEND, AUTO_PRECLAND, AUTO_LAND); any other armed mode is someone taking over.
LANDING_NAV_STATES = frozenset((5, 12, 18, 20))
ARMING_STATE_DISARMED = 1
ARMING_STATE_ARMED = 2
BATTERY_WARNING_CRITICAL = 2              # BatteryStatus.WARNING_CRITICAL (LOW 1, EMERGENCY 3)
BATTERY_WARNINGS = {2: 'CRITICAL', 3: 'EMERGENCY', 4: 'FAILED'}
VEHICLE_CMD_RESULT_ACCEPTED = 0
VEHICLE_CMD_RESULT_TEMPORARILY_REJECTED = 1
VEHICLE_CMD_RESULT_DENIED = 2
VEHICLE_CMD_RESULT_FAILED = 4
VEHICLE_CMD_RESULT_IN_PROGRESS = 5
RESULT_NAMES = {0: 'ACCEPTED', 1: 'TEMPORARILY_REJECTED', 2: 'DENIED', 3: 'UNSUPPORTED',
                4: 'FAILED', 5: 'IN_PROGRESS', 6: 'CANCELLED'}
COMMAND_NAMES = {VEHICLE_CMD_NAV_LAND: 'NAV_LAND', VEHICLE_CMD_DO_SET_MODE: 'DO_SET_MODE',
                 VEHICLE_CMD_COMPONENT_ARM_DISARM: 'COMPONENT_ARM_DISARM'}
ARMING_NAMES = {ARMING_STATE_DISARMED: 'DISARMED', ARMING_STATE_ARMED: 'ARMED'}
# VehicleStatus.NAVIGATION_STATE_* (the ones a multicopter meets).
NAV_STATE_NAMES = {0: 'MANUAL', 1: 'ALTCTL', 2: 'POSCTL', 3: 'AUTO_MISSION', 4: 'AUTO_LOITER',
                   5: 'AUTO_RTL', 6: 'POSITION_SLOW', 10: 'ACRO', 12: 'DESCEND',
                   13: 'TERMINATION', 14: 'OFFBOARD', 15: 'STAB', 17: 'AUTO_TAKEOFF',
                   18: 'AUTO_LAND', 19: 'AUTO_FOLLOW_TARGET', 20: 'AUTO_PRECLAND', 21: 'ORBIT'}
# PX4's offboard-loss failsafe: its delay and its action (PX4 parameters).
OFFBOARD_LOSS_PARAMETERS = 'COM_OF_LOSS_T, COM_OBL_RC_ACT'


@dataclass(frozen=True)
class VehicleCommandRequest:
    """A px4_msgs/VehicleCommand to send (the node fills the ids and the timestamp)."""

    command: int
    param1: float = 0.0
    param2: float = 0.0
    param3: float = 0.0


# DO_SET_MODE to PX4's Hold mode (AUTO.LOITER).
HOLD_MODE = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE, MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                  PX4_CUSTOM_MAIN_MODE_AUTO, PX4_CUSTOM_SUB_MODE_AUTO_LOITER)
# DO_SET_MODE to OFFBOARD, and ARM: the engage's two commands.
OFFBOARD_MODE = VehicleCommandRequest(VEHICLE_CMD_DO_SET_MODE, MAV_MODE_FLAG_CUSTOM_MODE_ENABLED,
                                      PX4_CUSTOM_MAIN_MODE_OFFBOARD)
ARM = VehicleCommandRequest(VEHICLE_CMD_COMPONENT_ARM_DISARM, param1=1.0)
LAND = VehicleCommandRequest(VEHICLE_CMD_NAV_LAND)


def nav_state_text(nav):
    """``'14 (OFFBOARD)'``: the number and PX4's name for it."""
    name = NAV_STATE_NAMES.get(nav)
    return f'{nav} ({name})' if name else str(nav)


def result_text(result):
    """PX4's name of a vehicle_command_ack result (``'DENIED'``), or the number."""
    return RESULT_NAMES.get(result, str(result))


def command_text(command):
    """``'NAV_LAND (21)'``: the command's name and number."""
    return f'{COMMAND_NAMES.get(command, command)} ({command})'


def state_text(nav, arming):
    """``'nav_state=14 (OFFBOARD), arming_state=2 (ARMED)'``."""
    return (f'nav_state={nav_state_text(nav)}, '
            f'arming_state={arming} ({ARMING_NAMES.get(arming, "unknown")})')
