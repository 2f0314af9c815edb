"""
A safety area: a polygon in the world ENU x-y plane and an altitude band (no rclpy).

Scenario key ``safety_area: {polygon: [[x, y], ...], z_min, z_max}`` (metres, world ENU), or
``polygon_latlon: [[lat, lon], ...]`` with ``geo_reference: [lat, lon, alt]`` (converted with
pymap3d into the tangent plane at ``geo_reference``, the frame of the PX4 bridges'
``origin_source gps``). The polygon may be non-convex; it must be simple (shapely's
``is_valid``).

:func:`limit_to_area` bounds every command so that the vehicle can always stop inside. The
vehicle's own velocity towards an edge, ``v``, already needs ``S(v) = v t + v^2 / (2 a)`` to
stop (``t`` the velocity lag ``t_safe``, ``a`` the braking ``a_safe`` of the controller's
``d_safe`` term: an upper bound of a first-order lag with an acceleration limit). The command
towards that edge is at most the speed ``c`` with ``S(c) = d - S(v)``, ``d`` the distance to
the edge segment: it reaches 0 when the vehicle's stop would end on the edge, so the boundary
is a barrier whatever the target does. The same for the altitude band. The edges the commands
respect lie ``margin`` (1 m by default) inside the area's (shapely's mitred inward buffer), so
the vehicles stop short of the boundary itself. A vehicle found outside the polygon holds (zero
velocity); above or below the band it holds horizontally and only a vertical command back into
the band is kept. A vehicle exactly on the stop line is held from crossing it by the edge's own
outward normal (its direction to the nearest point is none there). A PX4 bridge also
refuses to engage outside and lands a vehicle that stays out for ``outside_land_after``.

Per tick this is numpy over (agents x edges), and shapely's vectorised ``contains_xy`` for
inside/outside.
"""
from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Any, Mapping, Optional

import numpy as np
import shapely

PROJECTION_ROUNDS = 20  # most: a sharp corner's two edges take several rounds
# The most rounds of the limit and the approach to vehicles near (limit_clear): what a round
# short leaves is scaled away, at some of the command's speed.
CLEAR_ROUNDS = 20
AREA_KEYS = ('polygon', 'polygon_latlon', 'geo_reference', 'z_min', 'z_max', 'margin')
# A polygon_latlon is placed in the flat tangent plane at geo_reference, which 50 km away lies
# 0.2 km above the ground (d^2 / 2 R_earth): a vertex farther than this from geo_reference is
# no field around it (latitude and longitude swapped, or a wrong geo_reference), and refused.
MAX_LATLON_DISTANCE = 50e3
# The most vertices a polygon may have: a field's boundary needs tens; every command of every
# agent is projected against each edge (:func:`limit_to_area`), so the cost of a tick grows
# with agents x vertices.
MAX_VERTICES = 1000


@dataclass(frozen=True, eq=False)
class SafetyArea:
    """A simple polygon (K, 2) in world ENU x, y and an altitude band [z_min, z_max]."""

    polygon: np.ndarray
    z_min: float = -math.inf
    z_max: float = math.inf
    margin: float = 1.0  # m: the commands stop the vehicles this far inside the boundary

    def __post_init__(self) -> None:
        _check_vertices('polygon', self.polygon)
        points = _points(self.polygon)
        if points.ndim != 2 or points.shape[1] != 2 or len(points) < 3 or not np.all(
                np.isfinite(points)):
            raise ValueError('safety_area polygon must be 3 or more [x, y] points (m, world '
                             f'ENU), got {_shown(self.polygon)!r}')
        shape = shapely.Polygon(points)
        if not shape.is_valid or shape.area <= 0.0:
            raise ValueError(f'safety_area polygon must be simple (its edges must not cross) '
                             f'and enclose an area: {shapely.is_valid_reason(shape)}')
        if not self.z_min < self.z_max:
            raise ValueError(f'safety_area z_min must be below z_max, got {self.z_min} and '
                             f'{self.z_max}')
        if not 0.0 <= self.margin or not self.z_max - self.z_min > 2.0 * self.margin:
            raise ValueError(f'safety_area margin must be >= 0 and leave room in the altitude '
                             f'band, got {self.margin}')
        inner = shape.buffer(-self.margin, join_style='mitre')
        if inner.is_empty or inner.geom_type != 'Polygon':
            raise ValueError(f'safety_area polygon leaves no single area {self.margin:g} m '
                             '(margin) inside its boundary')
        stop = np.asarray(inner.exterior.coords)[:-1]
        edges = np.stack((stop, np.roll(stop, -1, axis=0)), axis=1)  # (K, 2, 2): start, end
        along = edges[:, 1] - edges[:, 0]
        normals = np.column_stack((along[:, 1], -along[:, 0]))  # right of each edge
        normals /= np.linalg.norm(normals, axis=1)[:, None]
        if _signed_area(stop) < 0.0:  # clockwise: the interior lies on the right
            normals = -normals
        object.__setattr__(self, 'polygon', points)
        object.__setattr__(self, 'shape', shape)
        object.__setattr__(self, 'inner', inner)
        shapely.prepare(shape)
        shapely.prepare(inner)
        # The commands stop the vehicles at the inner boundary, margin inside the real one.
        object.__setattr__(self, 'edges', edges)
        object.__setattr__(self, 'normals', normals)

    shape: Any = None    # set by __post_init__: the shapely Polygon
    inner: Any = None    # set by __post_init__: the polygon margin inside it
    edges: Any = None    # set by __post_init__: (K, 2, 2)
    normals: Any = None  # set by __post_init__: (K, 2) each inner edge's outward unit normal

    @classmethod
    def from_mapping(cls, values: Optional[Mapping[str, Any]]) -> Optional['SafetyArea']:
        """Build from a scenario's ``safety_area`` mapping (None or empty: no area)."""
        if not values:
            return None
        if not isinstance(values, Mapping):
            raise ValueError(f'safety_area must be a mapping of {", ".join(AREA_KEYS)}, got '
                             f'{_shown(values)!r}')
        unknown = sorted(set(values) - set(AREA_KEYS))
        if unknown:
            raise ValueError(f'safety_area has unknown keys {unknown}; known: '
                             f'{", ".join(AREA_KEYS)}')
        if ('polygon' in values) == ('polygon_latlon' in values):
            raise ValueError('safety_area needs exactly one of polygon ([[x, y], ...] m) and '
                             'polygon_latlon ([[lat, lon], ...] with geo_reference)')
        if 'polygon_latlon' in values:
            reference = values.get('geo_reference')
            if not isinstance(reference, (list, tuple)) or len(reference) != 3 or not all(
                    _is_number(c) for c in reference):
                raise ValueError('safety_area polygon_latlon needs geo_reference [lat, lon, '
                                 f'alt] (degrees, degrees, m), got {_shown(reference)!r}')
            _check_vertices('polygon_latlon', values['polygon_latlon'])
            latlon = _points(values['polygon_latlon'])
            if latlon.ndim != 2 or latlon.shape[1] != 2 or len(latlon) < 3:
                raise ValueError('safety_area polygon_latlon must be 3 or more [lat, lon] '
                                 f"points (degrees), got {_shown(values['polygon_latlon'])!r}")
            polygon = latlon_polygon(latlon, reference)
        else:
            polygon = values['polygon']
        band = {}
        for name, default in (('z_min', -math.inf), ('z_max', math.inf), ('margin', 1.0)):
            band[name] = values.get(name, default)
            if not _is_number(band[name]):
                raise ValueError(f'safety_area {name} must be a number (m), got '
                                 f'{_shown(band[name])!r}')
        return cls(polygon, **{name: float(value) for name, value in band.items()})

    def as_dict(self) -> dict[str, Any]:
        """Return the area as a plain mapping (world ENU)."""
        return {'polygon': self.polygon.tolist(), 'z_min': self.z_min, 'z_max': self.z_max,
                'margin': self.margin}

    def contains(self, positions) -> np.ndarray:
        """Return, per position (..., >= 2), whether it is inside: polygon and band."""
        p = np.asarray(positions, dtype=float)
        inside = shapely.contains_xy(self.shape, p[..., 0], p[..., 1])
        if p.shape[-1] > 2:
            inside &= (p[..., 2] >= self.z_min) & (p[..., 2] <= self.z_max)
        return inside

    def clearance(self, positions) -> np.ndarray:
        """
        Return each position's (..., 3) clearance from the boundary [m], negative outside.

        The smaller of :meth:`distance` (horizontal) and the distances to ``z_min`` and
        ``z_max``: the margin a run kept to its safety area.
        """
        p = np.asarray(positions, dtype=float)
        vertical = np.minimum(p[..., 2] - self.z_min, self.z_max - p[..., 2])
        return np.minimum(self.distance(p), vertical)

    def distance(self, positions) -> np.ndarray:
        """Return each position's horizontal distance to the boundary, negative outside."""
        p = np.asarray(positions, dtype=float)[..., :2]
        d, _ = _nearest_edges(p, np.stack((self.polygon, np.roll(self.polygon, -1, axis=0)),
                                          axis=1))
        inside = shapely.contains_xy(self.shape, p[..., 0], p[..., 1])
        return np.where(inside, d.min(axis=-1), -d.min(axis=-1))


def _check_vertices(key: str, value: Any) -> None:
    """``ValueError`` naming ``key`` when ``value`` lists more than ``MAX_VERTICES`` points."""
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) > MAX_VERTICES:
        raise ValueError(f'safety_area {key} has {len(value)} vertices, more than the '
                         f'{MAX_VERTICES} a safety area may have')


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _points(value: Any) -> np.ndarray:
    """``value`` as a float array, or an empty one if it is no array of numbers."""
    try:
        return np.asarray(value, dtype=float)
    except (TypeError, ValueError):  # ragged, text, a mapping: the caller names the rule
        return np.empty(0)


def _shown(value: Any) -> Any:
    """``value`` as the file gave it, for an error (an array as its list)."""
    return value.tolist() if isinstance(value, np.ndarray) else value


def latlon_polygon(latlon, reference) -> np.ndarray:
    """
    Return the polygon ``latlon`` (K, 2: lat, lon in degrees) in world ENU x, y [m].

    Placed in the tangent plane at ``reference`` (lat, lon, alt). ``ValueError`` in one line
    when a latitude is beyond +-90 degrees, or a vertex lies farther than
    :data:`MAX_LATLON_DISTANCE` from ``reference``: latitude and longitude swapped (in the
    polygon or the geo_reference) put a field near the reference thousands of km away.
    """
    latlon = np.asarray(latlon, dtype=float).reshape(-1, 2)
    ref = [float(c) for c in reference]
    if not np.all(np.isfinite(latlon)) or not all(map(math.isfinite, ref)):
        raise ValueError(f'safety_area polygon_latlon and geo_reference must be finite, got '
                         f'{latlon.tolist()} and {ref}')
    swapped = ' (are latitude and longitude swapped? each point is [lat, lon])'
    bad = np.flatnonzero((np.abs(latlon[:, 0]) > 90.0) | (np.abs(latlon[:, 1]) > 180.0))
    if bad.size:
        raise ValueError(f'safety_area polygon_latlon point {latlon[bad[0]].tolist()} is no '
                         f'[lat, lon]: latitude must be in [-90, 90] and longitude in '
                         f'[-180, 180] degrees{swapped}')
    import pymap3d  # here: with its time parsers, a run without a latlon area never needs it
    east, north, _ = pymap3d.geodetic2enu(latlon[:, 0], latlon[:, 1], ref[2], *ref)
    far = np.hypot(east, north)
    if not np.all(far <= MAX_LATLON_DISTANCE):
        k = int(np.argmax(np.where(np.isfinite(far), far, np.inf)))
        raise ValueError(f'safety_area polygon_latlon point {latlon[k].tolist()} lies '
                         f'{far[k] / 1e3:.0f} km from geo_reference {ref[:2]}, more than '
                         f'{MAX_LATLON_DISTANCE / 1e3:g} km: no field around it{swapped}')
    return np.column_stack((east, north))


def _signed_area(points) -> float:
    """Return the shoelace area of a polygon (K, 2): positive counter-clockwise."""
    x, y = points[:, 0], points[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


RING_POINTS = 72  # points of a ring checked against an area (5 degrees apart)


def ring_problem(area: SafetyArea, centre, radius: float, altitude: float = math.nan,
                 ) -> Optional[str]:
    """
    Why a ring of ``radius`` around ``centre`` (x, y) cannot be flown inside ``area``, or None.

    Every point of the ring must lie where the commands keep the vehicles (``margin`` inside
    the boundary) and, when ``altitude`` is set (not NaN), within the altitude band: otherwise
    the agents would sit at the edge instead of on the ring. One clause naming what is off.
    """
    angles = np.linspace(0.0, 2.0 * math.pi, RING_POINTS, endpoint=False)
    ring = np.column_stack((centre[0] + radius * np.cos(angles),
                            centre[1] + radius * np.sin(angles)))
    outside = ~shapely.contains_xy(area.inner, ring[:, 0], ring[:, 1])
    if outside.any():
        worst = ring[outside][np.argmin(area.distance(ring[outside]))]
        return (f'the ring of radius {radius:g} m around ({centre[0]:g}, {centre[1]:g}) does '
                f'not fit inside the area ({area.margin:g} m margin): it passes '
                f'({worst[0]:.1f}, {worst[1]:.1f}); move the target, shrink the radius or '
                'widen the area')
    if not math.isnan(altitude) and not (area.z_min + area.margin <= altitude
                                         <= area.z_max - area.margin):
        return (f'the ring altitude {altitude:g} m is outside the altitude band '
                f'[{area.z_min + area.margin:g}, {area.z_max - area.margin:g}] m (z_min, z_max '
                'and margin)')
    return None


def _nearest_edges(p, edges):
    """Distance (..., K) from points (..., 2) to each edge segment, and the unit directions."""
    a, b = edges[:, 0], edges[:, 1]                        # (K, 2)
    ab = b - a
    rel = p[..., None, :] - a                              # (..., K, 2)
    s = np.clip(np.sum(rel * ab, axis=-1) / np.sum(ab * ab, axis=-1), 0.0, 1.0)
    towards = a + s[..., None] * ab - p[..., None, :]      # to the nearest point
    d = np.linalg.norm(towards, axis=-1)
    with np.errstate(invalid='ignore', divide='ignore'):
        unit = np.where(d[..., None] > 0.0, towards / np.where(d > 0.0, d, 1.0)[..., None], 0.0)
    return d, unit


def stoppable_speed(distance, lag: float, braking: float):
    """Return the speed ``c`` with ``c lag + c^2 / (2 braking) = distance`` (0 at or past it)."""
    d = np.maximum(np.asarray(distance, dtype=float), 0.0)
    if braking <= 0.0:
        return d / lag if lag > 0.0 else np.full(d.shape, np.inf)
    return braking * (np.sqrt(lag * lag + 2.0 * d / braking) - lag)


def stopping_distance(speed, lag: float, braking: float):
    """Return ``S(v) = v lag + v^2 / (2 braking)`` for speeds towards an edge (0 if away)."""
    v = np.maximum(np.asarray(speed, dtype=float), 0.0)
    return v * lag + (v * v / (2.0 * braking) if braking > 0.0 else 0.0)


def limit_for_hold(cmds, positions, velocities, area: Optional[SafetyArea], lag: float,
                   braking: float, hold: float):
    """
    :func:`limit_to_area` for commands flown for ``hold`` s before the next one comes.

    A command is flown until the next (a control period, a setpoint period): that hold counts
    as lag too. Every engine and node bounds its commands through here, each with its hold.
    """
    return limit_to_area(cmds, positions, velocities, area, lag + hold, braking)


def limit_clear(cmds, positions, velocities, area: Optional[SafetyArea], lag: float,
                braking: float, hold: float, known=None, bound: float = 0.0):
    """
    Return :func:`limit_for_hold`, never turning a command toward a vehicle within ``bound``.

    The limit takes out a command's part toward an edge and keeps its part along the edge.
    The law's ``d_safe`` term had turned the command aside from a vehicle near it, across the
    line of sight; with the vehicle inward of the agent that way points out, and what the
    limit left ran along the stop line toward the vehicle (a vehicle hovering 1.3 m inside the
    line, an agent sliding between it and the line from 1.8 m to 1.3 m at up to 2.8 m/s).

    Where the limit changed a command and a vehicle the agent counts lies nearer than
    ``bound`` (horizontal; the agent's ``d_safe``), the command's approach to each such
    vehicle is held to at most the approach of the command before the limit (none where that
    one moved away), alternating with the limit until neither changes it (at most
    :data:`CLEAR_ROUNDS` rounds), then scaling the horizontal command down by what is left:
    zero keeps both, so neither the area nor the bound on approach is given up. The command
    may stop short.

    ``known``: None, or a callable returning the vehicles each agent knows, ``(positions
    (..., M, >=2), counted (..., M))`` (NaN rows: none; ``counted`` those its ``d_safe`` term
    keeps), in a fixed order (by id): called only where the limit changed some command.
    Each agent's own knowledge: a PX4 bridge, which has none, keeps :func:`limit_for_hold`.
    """
    law = np.asarray(cmds, dtype=float)
    limited = limit_for_hold(law, positions, velocities, area, lag, braking, hold)
    if area is None or known is None or not bound > 0.0:
        return limited
    flat_law, flat = law.reshape(-1, 3), limited.reshape(-1, 3)
    changed = np.flatnonzero(np.any(flat[:, :2] != flat_law[:, :2], axis=-1))
    if changed.size == 0:
        return limited
    others, counted = known()
    others = np.asarray(others, dtype=float)
    others = others.reshape((-1,) + others.shape[-2:])[changed, :, :2]
    counted = np.asarray(counted, dtype=bool).reshape(-1, others.shape[1])[changed]
    own = np.asarray(positions, dtype=float).reshape(-1, 3)[changed]
    away = others - own[:, None, :2]                      # (K, M, 2): to each vehicle
    d2 = away[..., 0] * away[..., 0] + away[..., 1] * away[..., 1]
    near = counted & (d2 < bound * bound) & (d2 > 0.0)    # NaN: not near
    rows = near.any(axis=1)
    if not rows.any():
        return limited
    changed, own, away, near, d2 = changed[rows], own[rows], away[rows], near[rows], d2[rows]
    unit = np.where(near[..., None], away / np.sqrt(np.where(near, d2, 1.0))[..., None], 0.0)
    cap = np.maximum(np.einsum('kj,kmj->km', flat_law[changed, :2], unit), 0.0)
    velocity = np.asarray(velocities, dtype=float).reshape(-1, 3)[changed]
    out = flat[changed].copy()
    active = np.flatnonzero(near.any(axis=0))
    for _ in range(CLEAR_ROUNDS):
        worst = 0.0
        for m in active:  # in the vehicles' order: the same command from every engine
            e = unit[:, m]
            excess = np.where(near[:, m],
                              np.maximum(np.sum(out[:, :2] * e, axis=-1) - cap[:, m], 0.0), 0.0)
            out[:, :2] -= excess[:, None] * e
            worst = max(worst, float(excess.max()))
        out = limit_for_hold(out, own, velocity, area, lag, braking, hold)
        if worst < 1e-9:
            break
    # What is left (a narrow wedge of the two converges slowly) goes by scaling the command
    # down: zero is inside both, so a shorter command breaks neither.
    toward = np.einsum('kj,kmj->km', out[:, :2], unit)
    over = near & (toward > cap + 1e-12)
    if over.any():
        scale = np.min(np.where(over, cap / np.where(over, toward, 1.0), 1.0), axis=1)
        out[:, :2] *= scale[:, None]
    flat = flat.copy()
    flat[changed] = out
    return flat.reshape(limited.shape)


def limit_to_area(cmds, positions, velocities, area: Optional[SafetyArea], lag: float,
                  braking: float):
    """
    Return ``cmds`` (..., 3) bounded so that each vehicle can stop inside.

    ``positions``/``velocities`` (..., 3) are the vehicles'. Inside: the command towards each
    edge is at most :func:`stoppable_speed` of the distance left once the vehicle's own
    velocity has stopped (:func:`stopping_distance`); the excess along that direction is
    taken out, edge after edge, in rounds until none is left (corners). Outside
    the polygon: zero horizontal velocity (hold). Vertically the same against ``z_min`` and
    ``z_max``; below or above the band the vehicle holds horizontally and only a command back
    into the band is kept. On an edge itself (distance 0, no direction to it) the edge's
    outward normal is the direction held.
    """
    if area is None:
        return cmds
    cmds = np.array(cmds, dtype=float)
    p = np.asarray(positions, dtype=float)
    v = np.asarray(velocities, dtype=float)
    d, unit = _nearest_edges(p[..., :2], area.edges)
    # On an edge (a vertex: both of its edges) the nearest point is the vehicle's own: no
    # direction, and a zero one let any command out. The edge's outward normal holds it.
    on_edge = d == 0.0
    if np.any(on_edge):
        unit = np.where(on_edge[..., None], area.normals, unit)
    # Between the inner edges and the boundary the nearest inner edge is behind: only moving
    # back towards it (or along it) is allowed.
    beyond = ~shapely.contains_xy(area.inner, p[..., 0], p[..., 1])
    if np.any(beyond):
        nearest = np.argmin(d, axis=-1)[..., None]
        flip = beyond[..., None] & (np.arange(d.shape[-1]) == nearest) & ~on_edge
        unit = np.where(flip[..., None], -unit, unit)
        d = np.where(flip, 0.0, d)
    towards = np.sum(v[..., None, :2] * unit, axis=-1)     # (..., K)
    allowed = stoppable_speed(d - stopping_distance(towards, lag, braking), lag, braking)
    xy = cmds[..., :2]
    # Only the edges some command could break; alternating projections onto their
    # half-planes (a wedge's two edges pull against each other: a few rounds).
    speed = np.linalg.norm(xy, axis=-1)[..., None]
    near = [k for k in range(area.edges.shape[0]) if np.any(allowed[..., k] < speed[..., 0])]
    for _ in range(PROJECTION_ROUNDS if near else 0):
        worst = 0.0
        for k in near:
            excess = np.maximum(np.sum(xy * unit[..., k, :], axis=-1) - allowed[..., k], 0.0)
            xy = xy - excess[..., None] * unit[..., k, :]
            worst = max(worst, float(np.max(excess, initial=0.0)))
        if worst < 1e-9:
            break
    inside = shapely.contains_xy(area.shape, p[..., 0], p[..., 1])
    cmds[..., :2] = np.where(inside[..., None], xy, 0.0)
    z, vz = p[..., 2], v[..., 2]
    top, bottom = area.z_max - area.margin, area.z_min + area.margin
    up = stoppable_speed(top - z - stopping_distance(vz, lag, braking), lag, braking)
    down = stoppable_speed(z - bottom - stopping_distance(-vz, lag, braking), lag, braking)
    cmds[..., 2] = np.clip(cmds[..., 2], -down, up)
    # Outside the band: no horizontal move until back in it (the climb or descent is kept).
    banded = (z >= area.z_min) & (z <= area.z_max)
    cmds[..., :2] = np.where(banded[..., None], cmds[..., :2], 0.0)
    return np.where(inside[..., None], cmds, 0.0)  # outside the polygon: hold


def read_area_file(path, geo_reference=()) -> dict:
    """
    Read a safety area YAML file (the mapping of a scenario's ``safety_area:``), checked.

    ``ValueError`` in one line naming the file and what is wrong. The same file serves
    ``--safety-area`` of the runners and the ``safety_area_file`` parameter of the nodes. A
    ``polygon_latlon`` without a ``geo_reference`` of its own takes ``geo_reference`` (the
    fleet's world origin); one that names another is refused.
    """
    from ros_support.validation import read_yaml
    values = read_yaml(path, 'safety area')
    if not isinstance(values, dict):
        raise ValueError(f'safety area {path}: must be a mapping with polygon (or '
                         f'polygon_latlon), z_min, z_max; got {type(values).__name__}')
    if geo_reference and 'polygon_latlon' in values:
        own = values.get('geo_reference')
        if own is None:
            values = {**values, 'geo_reference': list(geo_reference)}
        elif _points(own).shape == (3,) and not np.allclose(  # a malformed one: named below
                _points(own), np.asarray(geo_reference, float), rtol=0.0, atol=1e-7):
            raise ValueError(f'safety area {path}: its geo_reference {list(own)} is not the '
                             f"fleet's geo_reference {list(geo_reference)}: one world frame "
                             "for all (drop the file's geo_reference)")
    try:
        SafetyArea.from_mapping(values)
    except (TypeError, ValueError) as exc:
        raise ValueError(f'safety area {path}: {exc}') from None
    return values


def load_area_file(path, geo_reference=()) -> Optional[SafetyArea]:
    """Return the :class:`SafetyArea` of a file (``''``: None, no area)."""
    return SafetyArea.from_mapping(read_area_file(path, geo_reference)) if path else None


def write_area_file(area: SafetyArea, path) -> None:
    """Write ``area`` (world ENU) as a safety area file that :func:`read_area_file` reads."""
    import yaml
    with open(path, 'w', encoding='utf-8') as stream:
        yaml.safe_dump(area.as_dict(), stream, default_flow_style=None, sort_keys=False)


def outside_text(area: SafetyArea, position) -> Optional[str]:
    """Say where ``position`` (3,) is outside ``area`` (polygon or band), or None inside."""
    p = np.asarray(position, dtype=float)
    where = []
    beyond = -float(area.distance(p))
    if beyond > 0.0:
        where.append(f'{beyond:.1f} m outside the polygon')
    if p.shape[-1] > 2 and p[2] > area.z_max:
        where.append(f'{p[2] - area.z_max:.1f} m above z_max {area.z_max:g} m')
    if p.shape[-1] > 2 and p[2] < area.z_min:
        where.append(f'{area.z_min - p[2]:.1f} m below z_min {area.z_min:g} m')
    if not where:
        return None
    return f'at ({", ".join(f"{c:.1f}" for c in p[:3])}) m, ' + ' and '.join(where)


def outside_starts(area: Optional[SafetyArea], positions, names) -> list[str]:
    """Return the names of the vehicles whose start ``positions`` (N, 3) lie outside ``area``."""
    if area is None:
        return []
    inside = area.contains(np.asarray(positions, dtype=float))
    return [name for name, ok in zip(names, inside) if not ok]


def outside_starts_text(area: Optional[SafetyArea], positions, names) -> str:
    """
    Say in one line which vehicles start outside ``area`` and what they do, or ``''``.

    Outside the polygon a vehicle holds; below or above the altitude band it holds
    horizontally and climbs or descends into the band only if its command does (altitude
    hold): the ring forms without it meanwhile, and its figures are no encirclement's.
    """
    out = outside_starts(area, positions, names)
    if not out:
        return ''
    first = names.index(out[0])
    where = outside_text(area, np.asarray(positions, dtype=float)[first])
    return (f'{len(out)} of {len(names)} agents start outside the safety area '
            f'({", ".join(out[:6])}{", ..." if len(out) > 6 else ""}; {out[0]} {where}): each '
            'holds there (below or above the altitude band it only climbs or descends into '
            'it), so the run is no encirclement of them and no settle time is reported')


@dataclass
class AreaWatch:
    """
    A vehicle's time outside the safety area: hold at once, land after ``land_after``.

    :meth:`update` is fed the vehicle's position (world ENU); it returns the lines to say (each
    episode once) and keeps :attr:`outside` (where, or None inside), :attr:`since` and
    :attr:`land` (outside for longer than ``land_after``; 0 = never land for it).
    """

    area: SafetyArea
    land_after: float = 10.0
    outside: Optional[str] = None
    since: Optional[float] = None
    land: bool = False
    known: bool = False  # a position was seen

    def state_text(self) -> str:
        """One word or clause for a status: inside, outside (where), or unknown."""
        if not self.known:
            return 'unknown (no position yet)'
        return 'inside' if self.outside is None else f'outside ({self.outside})'

    def update(self, now: float, position) -> list[str]:
        """Take the vehicle's position at ``now`` [s]; return what to say (once per episode)."""
        outside = outside_text(self.area, position)
        self.known = True
        lines = []
        if outside is not None and self.outside is None:
            self.since = now
            lines.append(f'outside the safety area ({outside}): holding (zero velocity)'
                         + (f', landing after outside_land_after {self.land_after:g} s'
                            if self.land_after > 0.0 else ''))
        elif outside is None and self.outside is not None:
            lines.append('back inside the safety area')
            self.since, self.land = None, False
        self.outside = outside
        if outside is not None and self.land_after > 0.0 and not self.land \
                and now - self.since >= self.land_after:
            self.land = True
            lines.append(f'outside the safety area for {now - self.since:.1f} s '
                         f'(outside_land_after {self.land_after:g} s): landing')
        return lines

    def why(self, now: float) -> str:
        """Why the vehicle leaves the ring (after :attr:`land`): one clause."""
        return (f'outside the safety area for {now - (self.since or now):.1f} s '
                f'({self.outside})')
