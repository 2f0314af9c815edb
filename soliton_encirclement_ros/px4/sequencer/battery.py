"""The battery as the sequencer reads it (``BatteryStatus``): when it rules the vehicle out."""
import math

from soliton_encirclement_ros.px4.sequencer.mavlink import (
    BATTERY_WARNING_CRITICAL, BATTERY_WARNINGS)


class BatteryWatch:
    """
    The last ``BatteryStatus``: (remaining 0..1 or NaN, warning, stamp) in ``reading``.

    Below ``min_battery`` remaining, or at a CRITICAL (or worse) warning, an idle vehicle
    refuses the engage and an engaged one lands.
    """

    def __init__(self, config):
        self.config = config
        self.reading = None

    def update(self, now, remaining, warning=0):
        """Take ``remaining`` charge 0..1 (negative or NaN: unknown) and PX4's warning."""
        remaining = float(remaining)
        self.reading = (remaining if 0.0 <= remaining <= 1.0 else math.nan, int(warning), now)

    def problem(self, now):
        """Why the battery rules the vehicle out of flying, or None (unknown or stale: None)."""
        if self.reading is None or now - self.reading[2] > self.config.status_timeout:
            return None
        remaining, warning, _ = self.reading
        if remaining < self.config.min_battery:
            return (f'battery {remaining:.0%} remaining, below min_battery '
                    f'{self.config.min_battery:.0%}')
        if warning >= BATTERY_WARNING_CRITICAL:
            return f'battery warning {BATTERY_WARNINGS.get(warning, warning)} from PX4'
        return None
