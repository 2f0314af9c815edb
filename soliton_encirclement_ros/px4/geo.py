"""
Where a PX4's local frame lies in the shared world frame, from its own GPS (no rclpy).

Each PX4 measures its local NED frame from where its estimator took its global reference:
``VehicleLocalPosition.ref_lat/ref_lon/ref_alt``, valid once ``xy_global``/``z_global`` are
true, and renewed when ``ref_timestamp`` changes. A fleet shares one geodetic origin,
``geo_reference`` (lat [deg], lon [deg], alt [m], the same altitude datum as PX4's
``ref_alt``, AMSL). The world ENU frame is the local tangent plane there, so a vehicle's local
origin lies in it at the ENU coordinates of its estimator's reference (pymap3d's WGS-84
``geodetic2enu``).

The local NED axes of a vehicle point north/east at its own reference, the world's at
``geo_reference``: on a field they differ by the angle subtended at the Earth's centre, about
0.16 mrad per km, and are treated as parallel (under 1 cm across 250 m).

:class:`OriginPlacement` decides which origin the bridge flies with:

- ``origin_source`` ``given``: ``origin_enu`` as measured by hand. With a ``geo_reference``
  too, it is checked against GPS: a disagreement over ``origin_tolerance`` refuses the engage,
  in one line naming both values.
- ``origin_source`` ``gps``: the GPS-derived origin, once PX4's reference is valid. Until
  then the vehicle is not placed: no odometry goes out and the engage is refused.

A new estimator reference (``ref_timestamp``) re-places the vehicle and is reported as a
jump of the origin, which the bridge handles as an estimator reset (hold, log).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

ORIGIN_SOURCES = ('given', 'gps')


def check_geo_reference(values: Sequence[float]) -> Optional[tuple[float, float, float]]:
    """Return ``values`` as (lat, lon, alt), or None for an empty list; ValueError otherwise."""
    values = list(values)
    if not values:
        return None
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise ValueError(f'geo_reference must be [lat, lon, alt] (deg, deg, m AMSL) or empty, '
                         f'got {values}')
    lat, lon, alt = (float(v) for v in values)
    if not -90.0 <= lat <= 90.0 or not -180.0 <= lon <= 180.0:
        raise ValueError(f'geo_reference latitude must be in [-90, 90] and longitude in '
                         f'[-180, 180] degrees, got {values}')
    return lat, lon, alt


def origin_in_world(ref_lat: float, ref_lon: float, ref_alt: float,
                    geo_reference: tuple[float, float, float]) -> np.ndarray:
    """Return where a PX4 local origin at ``ref_lat``, ``ref_lon``, ``ref_alt`` lies in ENU [m]."""
    import pymap3d  # here: the simulators import this module for check_geo_reference alone
    east, north, up = pymap3d.geodetic2enu(ref_lat, ref_lon, ref_alt, *geo_reference)
    return np.array([east, north, up], dtype=float)


def text3(values) -> str:
    """``[12.30, -4.00, 0.00]``: a position in a message."""
    return '[' + ', '.join(f'{round(float(v), 2) + 0.0:.2f}' for v in values) + ']'  # no -0.00


class OriginPlacement:
    """The origin one bridge flies with, and why it must not engage (see the module)."""

    def __init__(self, source: str = 'given', given=(0.0, 0.0, 0.0),
                 geo_reference: Optional[tuple[float, float, float]] = None,
                 tolerance: float = 3.0) -> None:
        if source not in ORIGIN_SOURCES:
            raise ValueError(f'origin_source must be one of {", ".join(ORIGIN_SOURCES)}, got '
                             f'{source!r}')
        if source == 'gps' and geo_reference is None:
            raise ValueError("origin_source 'gps' needs geo_reference [lat, lon, alt]: the "
                             "fleet's shared world origin")
        self.source = source
        self.given = np.asarray(given, dtype=float)
        self.geo_reference = geo_reference
        self.tolerance = float(tolerance)
        self.gps: Optional[np.ndarray] = None     # the GPS-derived origin, once valid
        self.moved = 0.0  # how far the last new reference moved the GPS origin [m]
        self._ref_timestamp: Optional[int] = None

    @property
    def origin(self) -> Optional[np.ndarray]:
        """Return the origin to place odometry with; None while a ``gps`` source has none."""
        return self.given if self.source == 'given' else self.gps

    def on_reference(self, valid: bool, ref_lat: float, ref_lon: float, ref_alt: float,
                     ref_timestamp: int) -> list[str]:
        """
        Take PX4's estimator reference; return lines to log (placed, moved, disagreement).

        Ignored without a ``geo_reference`` or while not ``valid`` (``xy_global`` and
        ``z_global``). A new ``ref_timestamp`` is a new reference: see :meth:`moved_by`.
        """
        self.moved = 0.0
        if self.geo_reference is None or not valid or ref_timestamp == self._ref_timestamp:
            return []
        origin = origin_in_world(ref_lat, ref_lon, ref_alt, self.geo_reference)
        previous, self.gps = self.gps, origin
        self._ref_timestamp = ref_timestamp
        where = (f"PX4's estimator reference {ref_lat:.7f}, {ref_lon:.7f}, {ref_alt:.2f} m is "
                 f'{text3(origin)} m in the world ENU frame of geo_reference '
                 f'{self.geo_reference[0]:.7f}, {self.geo_reference[1]:.7f}, '
                 f'{self.geo_reference[2]:.2f} m')
        if previous is None:
            lines = [f'placed by GPS: {where}' if self.source == 'gps'
                     else f'origin_enu {text3(self.given)} checked against GPS: {where}']
        else:
            self.moved = float(np.linalg.norm(origin - previous))
            lines = [f'PX4 estimator reference changed (ref_timestamp {ref_timestamp}): {where}, '
                     f'{self.moved:.2f} m from the last one'
                     + ('; re-placed' if self.source == 'gps' else '')]
        problem = self.problem
        if problem:
            lines.append(problem)
        return lines

    @property
    def problem(self) -> Optional[str]:
        """Return why the vehicle must not engage with this origin, or None."""
        if self.source == 'gps':
            if self.gps is None:
                return ('origin_source gps: no global position reference from PX4 yet '
                        '(vehicle_local_position xy_global/z_global not valid: GPS fix?), so '
                        'this vehicle is not placed in the world frame')
            return None
        if self.gps is None:
            return None
        off = float(np.linalg.norm(self.given - self.gps))
        if off > self.tolerance:
            return (f'origin_enu {text3(self.given)} m disagrees with GPS {text3(self.gps)} m '
                    f'by {off:.2f} m (origin_tolerance {self.tolerance:g} m): correct '
                    'origin_enu, or fly origin_source gps')
        return None
