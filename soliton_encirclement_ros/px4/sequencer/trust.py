"""
Estimator trust: PX4's estimator resets, the hold they call for, and how far to trust the estimate.

A new ``VehicleOdometry.reset_counter`` (or a new estimator reference) is a reset: logged with
the jump of the position estimate; the vehicle holds for ``reset_hold``, and after jumps larger
than ``max_reset_jump`` (summed over ``reset_window``) until the operator's engage accepts the
new estimate. Meanwhile the others are told where the vehicle is and how far it may be from it.
"""
from dataclasses import dataclass
import math

import numpy as np


@dataclass
class EstimatorReset:
    """
    The last estimator reset: when, how far the estimate jumped, whether it latched.

    ``total`` is the jumps summed over ``reset_window`` (this one included): what the hold
    is decided on and how far the vehicle may be from its estimate.
    """

    at: float
    jump: float
    counters: tuple
    latched: bool
    total: float = math.nan
    resolved: bool = False   # the operator accepted the new estimate (~/engage)
    offset: object = None    # the jumps summed as a vector (new estimate - old), if known


class EstimateTrust:
    """The last reset (``reset``) and the last odometry's (reset_counter, position)."""

    def __init__(self, config):
        self.config = config
        self.reset = None
        self.sample = None

    def on_sample(self, now, position, reset_counter):
        """Take an odometry sample's ``reset_counter``; return the reset's line, or None."""
        if reset_counter is None:
            return None
        previous, self.sample = self.sample, (int(reset_counter), position)
        if previous is None or previous[0] == int(reset_counter):
            return None
        if position is None or previous[1] is None:
            jump, delta = math.nan, None
        else:
            delta = position - previous[1]
            jump = float(np.linalg.norm(delta))
        return self.note(now, jump, delta, (previous[0], int(reset_counter)),
                         f'PX4 estimator reset (reset_counter {previous[0]} -> '
                         f'{int(reset_counter)}): the position estimate jumped')

    def note(self, now, jump, delta, counters, what):
        """Record a reset of ``jump`` m (NaN: unknown), decide the hold; return its line."""
        # Resets within reset_window add up: two 1.5 m jumps in 0.3 s are a 3 m jump.
        earlier = self.reset
        total, offset = jump, None
        if delta is not None and np.all(np.isfinite(delta)):
            offset = np.asarray(delta, dtype=float)
        if (earlier is not None and not earlier.resolved
                and (earlier.latched or now - earlier.at <= self.config.reset_window)):
            total = jump + earlier.total
            offset = None if offset is None or earlier.offset is None else (
                offset + earlier.offset)
        latched = not total <= self.config.max_reset_jump  # NaN (unknown) latches too
        self.reset = EstimatorReset(now, jump, counters, latched, total, offset=offset)
        moved = ('by an unknown distance' if not math.isfinite(jump) else f'{jump:.2f} m'
                 + ('' if delta is None else
                    ' (' + ', '.join(f'{d:+.2f}' for d in delta) + ')'))
        if total != jump and math.isfinite(total):
            moved += (f', {total:.2f} m with the resets of the last reset_window '
                      f'{self.config.reset_window:g} s')
        line = f'{what} {moved}; '
        if latched:
            line += (f'more than max_reset_jump {self.config.max_reset_jump:g} m: commanding '
                     'zero velocity until the operator calls ~/engage again')
        else:
            line += (f'commanding zero velocity for reset_hold {self.config.reset_hold:g} s, '
                     'then flying on the new estimate')
        return line

    @property
    def latched(self):
        """Whether a reset larger than ``max_reset_jump`` holds the vehicle until ~/engage."""
        return self.reset is not None and self.reset.latched

    def in_reset_hold(self, now):
        """Whether ``reset_hold`` after a reset not yet accepted is still running."""
        reset = self.reset
        return (reset is not None and not reset.resolved
                and now - reset.at < self.config.reset_hold)

    def accept(self):
        """Accept the estimate after a reset (the operator's engage): no hold, no uncertainty."""
        if self.reset is not None:
            self.reset.latched = False
            self.reset.resolved = True

    def latched_text(self):
        total = self.reset.total
        moved = f'{total:.2f} m' if math.isfinite(total) else 'by an unknown distance'
        return (f'PX4 estimator reset moved the position estimate {moved} '
                f'(> max_reset_jump {self.config.max_reset_jump:g} m)')

    def engaged_text(self, now):
        """Say what an engage confirmed now does: follow cmd_vel, or hold after a reset (why)."""
        if self.latched:
            return ('holding (zero velocity): ' + self.latched_text()
                    + '; call ~/engage again to accept the new estimate')
        if self.in_reset_hold(now):
            return (f'holding (zero velocity) for reset_hold {self.config.reset_hold:g} s after '
                    f'an estimator reset ({self.reset.jump:.2f} m), then following cmd_vel')
        return 'following cmd_vel'

    def trusted_position(self, now, position):
        """
        Return (position, uncertainty [m]) of the vehicle for the others, from an estimate.

        While a reset larger than ``max_reset_jump`` holds the vehicle (until ``~/engage``),
        the vehicle is where it was before the jump, not where the new estimate says (it holds,
        and a jump moves only the estimate): the estimate less the jumps, its uncertainty
        growing at ``hold_drift`` (PX4 holding on an estimate that jumped). A disc as wide
        as a 45 m jump would swallow a whole ring and leave the others no way to keep clear of
        the real vehicle inside it. Otherwise the estimate, with :meth:`position_uncertainty`.
        """
        reset = self.reset
        position = np.asarray(position, dtype=float)
        if self._held_where_it_was(reset):
            return position - reset.offset, self.position_uncertainty(now)
        return position, self.position_uncertainty(now)

    @staticmethod
    def _held_where_it_was(reset):
        return (reset is not None and reset.latched and not reset.resolved
                and reset.offset is not None)

    def position_uncertainty(self, now):
        """
        How far (m) the vehicle may be from the position the others are told after resets.

        Held after a large reset (:meth:`trusted_position`): the drift of a hold since the
        reset. Otherwise the jumps summed over ``reset_window``: for ``reset_window`` after the
        last reset, or after a hold until the operator's ``~/engage`` accepts the new estimate.
        A jump of unknown size counts as ``max_reset_jump``. 0 when there is no such reset.
        """
        reset = self.reset
        if reset is None or reset.resolved:
            return 0.0
        if self._held_where_it_was(reset):
            return min(self.config.hold_drift * (now - reset.at), reset.total)
        if not reset.latched and now - reset.at > max(self.config.reset_window,
                                                      self.config.reset_hold):
            return 0.0
        total = reset.total
        return total if math.isfinite(total) else self.config.max_reset_jump
