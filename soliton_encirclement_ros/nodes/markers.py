"""RViz markers of the swarm (visualization_msgs/MarkerArray): agents, target, circle, area."""
from __future__ import annotations

from typing import Mapping, Sequence

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Point
import numpy as np
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import Marker, MarkerArray

LIVE = ColorRGBA(r=0.1, g=0.5, b=1.0, a=1.0)
FAILED = ColorRGBA(r=0.6, g=0.6, b=0.6, a=0.8)
TARGET = ColorRGBA(r=0.9, g=0.1, b=0.1, a=1.0)
CIRCLE = ColorRGBA(r=0.2, g=0.8, b=0.2, a=0.6)
TRAIL = ColorRGBA(r=0.1, g=0.5, b=1.0, a=0.35)
AREA = ColorRGBA(r=1.0, g=0.6, b=0.0, a=0.9)
CIRCLE_SEGMENTS = 72


def _marker(ns: str, marker_id: int, kind: int, frame: str, stamp: Time, scale: float,
            color: ColorRGBA) -> Marker:
    marker = Marker(ns=ns, id=marker_id, type=kind, action=Marker.ADD)
    marker.header.frame_id = frame
    marker.header.stamp = stamp
    marker.pose.orientation.w = 1.0
    marker.scale.x = marker.scale.y = marker.scale.z = scale
    marker.color = color
    return marker


def _point(xyz: Sequence[float]) -> Point:
    return Point(x=float(xyz[0]), y=float(xyz[1]), z=float(xyz[2]) if len(xyz) > 2 else 0.0)


def area_markers(area, frame: str, stamp: Time) -> list[Marker]:
    """
    Return the safety area (core.area.SafetyArea) in orange: its polygon at z_min and at z_max.

    A band that is open (infinite) on one side is drawn at 0 m there.
    """
    ring = np.vstack((area.polygon, area.polygon[:1]))
    levels = [z for z in (area.z_min, area.z_max) if np.isfinite(z)] or [0.0]
    markers = []
    for index, z in enumerate(levels):
        outline = _marker('safety_area', index, Marker.LINE_STRIP, frame, stamp, 0.2, AREA)
        outline.points = [_point((x, y, z)) for x, y in ring]
        markers.append(outline)
    return markers


def swarm_markers(agents: Mapping[int, tuple[np.ndarray, bool]], target_position: np.ndarray,
                  radius: float, trails: Mapping[int, Sequence[tuple[float, float]]],
                  frame: str, stamp: Time, area=None) -> MarkerArray:
    """Live agents blue, failed ones grey, the target red, the desired circle green, the area."""
    markers = [] if area is None else area_markers(area, frame, stamp)
    for agent_id, (position, live) in sorted(agents.items()):
        sphere = _marker(
            'agents', agent_id, Marker.SPHERE, frame, stamp, 1.0, LIVE if live else FAILED
        )
        sphere.pose.position = _point(position)
        markers.append(sphere)
        trail = trails.get(agent_id, ())
        if len(trail) > 1:
            strip = _marker('trails', agent_id, Marker.LINE_STRIP, frame, stamp, 0.15, TRAIL)
            strip.points = [_point(p) for p in trail]
            markers.append(strip)
    target = _marker('target', 0, Marker.SPHERE, frame, stamp, 1.5, TARGET)
    target.pose.position = _point(target_position)
    markers.append(target)
    circle = _marker('desired_circle', 0, Marker.LINE_STRIP, frame, stamp, 0.1, CIRCLE)
    angles = np.linspace(0.0, 2.0 * np.pi, CIRCLE_SEGMENTS + 1)
    circle.points = [
        _point(
            (
                target_position[0] + radius * np.cos(a),
                target_position[1] + radius * np.sin(a),
                target_position[2],
            )
        )
        for a in angles
    ]
    markers.append(circle)
    return MarkerArray(markers=markers)
