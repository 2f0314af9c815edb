"""
core.area: a safety area every engine keeps its vehicles inside (issue 37 §2).

Over whole runs, in every engine and a sweep: ``acceptance/test_area_acceptance.py``.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.area import (
    limit_clear, limit_for_hold, limit_to_area, SafetyArea, stoppable_speed)

# A non-convex field: a square with a notch, 1 m margin, 0-40 m altitude band.
FIELD = {'polygon': [[-40, -40], [40, -40], [40, 40], [0, 10], [-40, 40]], 'z_min': 0.0,
         'z_max': 40.0}


def test_the_allowed_speed_stops_the_vehicle_at_the_edge():
    c = stoppable_speed(np.array([0.0, 5.0, 30.0]), 1.0, 4.0)
    assert c[0] == 0.0
    assert c * 1.0 + c ** 2 / 8.0 == pytest.approx([0.0, 5.0, 30.0])


def test_outside_holds_and_only_a_way_back_into_the_band_is_kept():
    area = SafetyArea.from_mapping(FIELD)
    cmd = limit_to_area([[1.0, 2.0, 3.0], [1.0, 0.0, -2.0], [0.0, 0.0, 2.0]],
                        [[60.0, 0.0, 10.0], [0.0, -20.0, 45.0], [0.0, -20.0, -1.0]],
                        np.zeros((3, 3)), area, 1.0, 4.0)
    assert cmd[0].tolist() == [0.0, 0.0, 0.0]     # outside the polygon: hold
    assert cmd[1][2] == -2.0 and cmd[2][2] == 2.0  # above / below: back into the band


@pytest.mark.parametrize('values, match', [
    ({'polygon': [[0, 0], [1, 0]]}, 'must be 3 or more'),
    ({'polygon': [[0, 0], [10, 10], [10, 0], [0, 10]]}, 'must be simple'),
    ({'polygon': [[0, 0], [10, 0], [10, 10]], 'z_min': 5, 'z_max': 5}, 'z_min must be below'),
    ({'polygon': [[0, 0], [1, 0], [1, 1]]}, 'leaves no single area'),
    ({'polygon_latlon': [[47, 8], [47.1, 8], [47, 8.1]]}, 'needs geo_reference'),
    ({'polygon': [[0, 0], [9, 0], [9, 9]], 'radius': 3}, "unknown keys \\['radius'\\]"),
])
def test_bad_areas_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        SafetyArea.from_mapping(values)


LATLON = [[47.1, 8.1], [47.2, 8.1], [47.2, 8.2]]
SQUARE = [[0, 0], [20, 0], [20, 20], [0, 20]]


@pytest.mark.parametrize('values, message', [  # these were Python's own words, not the rule
    ({'polygon': 5.0}, 'safety_area polygon must be 3 or more [x, y] points (m, world ENU), '
     'got 5.0'),
    ({'polygon': 'abc'}, ('safety_area polygon must be 3 or more [x, y] points (m, world ENU), '
                          "got 'abc'")),
    ({'polygon': [[0, 0], [1, 0], [1]]}, 'safety_area polygon must be 3 or more [x, y] points '
     '(m, world ENU), got [[0, 0], [1, 0], [1]]'),
    ({'polygon': {'a': 1}}, ('safety_area polygon must be 3 or more [x, y] points (m, world '
                             "ENU), got {'a': 1}")),
    ({'polygon_latlon': LATLON, 'geo_reference': 5.0}, 'safety_area polygon_latlon needs '
     'geo_reference [lat, lon, alt] (degrees, degrees, m), got 5.0'),
    ({'polygon_latlon': [[1, 2], [3]], 'geo_reference': [47, 8, 0]}, 'safety_area '
     'polygon_latlon must be 3 or more [lat, lon] points (degrees), got [[1, 2], [3]]'),
    ({'polygon': SQUARE, 'z_min': 'x'}, "safety_area z_min must be a number (m), got 'x'"),
    ({'polygon': SQUARE, 'z_max': None}, 'safety_area z_max must be a number (m), got None'),
    ({'polygon': SQUARE, 'margin': [1]}, 'safety_area margin must be a number (m), got [1]'),
    (5, 'safety_area must be a mapping of polygon, polygon_latlon, geo_reference, z_min, '
     'z_max, margin, got 5'),
])
def test_a_malformed_area_is_one_line_naming_the_field_and_the_rule(values, message):
    with pytest.raises(ValueError) as refused:
        SafetyArea.from_mapping(values)
    assert str(refused.value) == message


def test_a_lat_lon_polygon_is_placed_in_the_frame_of_its_geo_reference():
    import pymap3d
    ref = (47.397742, 8.545594, 488.0)
    corners = [pymap3d.enu2geodetic(x, y, 0.0, *ref)[:2] for x, y in
               [(-20, -20), (20, -20), (20, 20), (-20, 20)]]
    area = SafetyArea.from_mapping({'polygon_latlon': corners, 'geo_reference': ref})
    assert area.polygon == pytest.approx(np.array([[-20, -20], [20, -20], [20, 20], [-20, 20]]),
                                         abs=1e-3)


@pytest.mark.parametrize('clockwise', [False, True])
def test_on_the_stop_line_itself_no_command_leaves_the_area(clockwise):
    """
    A vehicle exactly on the stop line (distance 0) is held from crossing it.

    There the direction to the nearest point of the edge is the zero vector, and flipping it
    changed nothing: an outward command passed unbounded (in a fleet flight against the PX4
    test double two vehicles ended 0.45 and 0.62 m outside the area). The edge's outward
    normal holds it, on an edge and on a corner, whichever way the polygon turns.
    """
    square = [[-20, -20], [20, -20], [20, 20], [-20, 20]]
    area = SafetyArea.from_mapping({'polygon': square[::-1] if clockwise else square})
    on_edge, on_corner = [19.0, 0.0, 5.0], [19.0, 19.0, 5.0]   # margin 1 m inside
    cmd = limit_to_area([[10.0, 3.0, 0.0], [10.0, 10.0, 0.0], [-4.0, 2.0, 0.0]],
                        [on_edge, on_corner, on_edge], np.zeros((3, 3)), area, 1.0, 4.0)
    assert cmd[0][0] <= 1e-12 and cmd[0][1] == pytest.approx(3.0)  # along the edge: kept
    assert cmd[1][0] <= 1e-12 and cmd[1][1] <= 1e-12               # a corner: neither way out
    assert cmd[2].tolist() == [-4.0, 2.0, 0.0]                     # back inside: kept


def test_below_the_altitude_band_a_vehicle_holds_horizontally():
    """
    Below z_min (or above z_max) only the way back into the band is flown, not the ring.

    Agents started below z_min logged 'holding (zero velocity)' and flew the ring horizontally
    for 10 s (up to 18 m).
    """
    area = SafetyArea.from_mapping({**FIELD, 'z_min': 2.0})
    cmd = limit_to_area([[5.0, -3.0, 1.0], [5.0, -3.0, 0.0], [5.0, -3.0, 0.0]],
                        [[0.0, -20.0, 0.5], [0.0, -20.0, 10.0], [0.0, -20.0, 45.0]],
                        np.zeros((3, 3)), area, 1.0, 4.0)
    assert cmd[0].tolist() == [0.0, 0.0, 1.0]     # below: climbs straight up, no ring
    assert cmd[1].tolist() == [5.0, -3.0, 0.0]    # in the band: the command as it was
    assert cmd[2].tolist() == [0.0, 0.0, 0.0]     # above: holds (no way down asked)


@pytest.mark.parametrize('polygon, reference', [
    ([[8.5455, 47.3977], [8.5465, 47.3977], [8.5465, 47.3987]], [47.397742, 8.545594, 488.0]),
    ([[47.3977, 8.5455], [47.3977, 8.5465], [47.3987, 8.5465]], [8.545594, 47.397742, 488.0]),
    ([[147.3977, 8.5455], [147.3977, 8.5465], [147.3987, 8.5465]], [47.397742, 8.545594, 0.0]),
])
def test_a_polygon_with_latitude_and_longitude_swapped_is_refused(polygon, reference):
    """Swapped in the polygon or in geo_reference, the field lies thousands of km away."""
    with pytest.raises(ValueError, match='swapped') as error:
        SafetyArea.from_mapping({'polygon_latlon': polygon, 'geo_reference': reference})
    assert '\n' not in str(error.value)


# An agent on the stop line x = 29 of a 60 m square, flying along it (+y); a vehicle hovers
# 1.3 m inside the line and 1 m ahead. The law's d_safe term had turned its command across
# the line of sight (no approach), which points out of the area.
SIDE = {'polygon': [[-30, -30], [30, -30], [30, 30], [-30, 30]]}
AGENT, AGENT_V = [28.95, 0.0, 5.0], [0.0, 1.0, 0.0]
VEHICLE = np.array([27.65, 1.0, 5.0])
SIGHT = (VEHICLE[:2] - AGENT[:2]) / np.hypot(*(VEHICLE[:2] - AGENT[:2]))
ASIDE = 2.0 * np.array([SIGHT[1], -SIGHT[0], 0.0])   # out and forward, across the sight
HOLD = (0.5, 4.0, 0.05)  # lag, braking, the command's hold


def _approach(cmd):
    return float(np.dot(np.asarray(cmd)[:2], SIGHT))


def test_the_area_limit_alone_turns_the_command_toward_the_vehicle():
    area = SafetyArea.from_mapping(SIDE)
    assert abs(_approach(ASIDE)) < 1e-12
    assert _approach(limit_for_hold(ASIDE, AGENT, AGENT_V, area, *HOLD)) > 0.5


def test_limit_clear_keeps_the_area_and_adds_no_approach_to_a_vehicle_within_d_safe():
    area = SafetyArea.from_mapping(SIDE)
    calls = []

    def known():
        calls.append(1)
        return VEHICLE[None], np.array([True])

    cmd = limit_clear(ASIDE, AGENT, AGENT_V, area, *HOLD, known, 2.0)
    assert calls and _approach(cmd) <= 1e-9
    assert np.allclose(limit_for_hold(cmd, AGENT, AGENT_V, area, *HOLD), cmd)  # inside still
    # an approach the law's own command had is kept, no more
    toward = ASIDE + 0.3 * np.append(SIGHT, 0.0)
    cmd = limit_clear(toward, AGENT, AGENT_V, area, *HOLD, known, 2.0)
    assert _approach(cmd) <= _approach(toward) + 1e-9
    assert _approach(limit_for_hold(toward, AGENT, AGENT_V, area, *HOLD)) > _approach(toward)


@pytest.mark.parametrize('others, counted, bound', [
    (VEHICLE[None], [False], 2.0),           # not counted by the d_safe term
    (VEHICLE[None] - [5.0, 0.0, 0.0], [True], 2.0),   # beyond d_safe
    (np.full((1, 3), np.nan), [True], 2.0),  # none there
    (VEHICLE[None], [True], 0.0),            # d_safe off
])
def test_limit_clear_is_the_area_limit_where_none_counted_is_within_bound(others, counted, bound):
    area = SafetyArea.from_mapping(SIDE)
    cmd = limit_clear(ASIDE, AGENT, AGENT_V, area, *HOLD,
                      lambda: (others, np.array(counted)), bound)
    assert cmd.tolist() == limit_for_hold(ASIDE, AGENT, AGENT_V, area, *HOLD).tolist()


def test_limit_clear_asks_what_agents_know_only_where_the_limit_changed_a_command():
    area = SafetyArea.from_mapping(SIDE)

    def known():
        raise AssertionError('asked')

    inside = [[0.0, 0.0, 5.0], [1.0, 0.0, 5.0]]
    cmds = [[2.0, 1.0, 0.0], [-1.0, 2.0, 0.0]]
    assert limit_clear(cmds, inside, np.zeros((2, 3)), area, *HOLD, known, 2.0).tolist() == cmds
    assert limit_clear(cmds, inside, np.zeros((2, 3)), None, *HOLD, known, 2.0).tolist() == cmds


def test_limit_clear_over_runs_and_agents_changes_only_the_rows_it_must():
    area = SafetyArea.from_mapping(SIDE)
    positions = np.array([[AGENT, [0.0, 0.0, 5.0]], [[0.0, 5.0, 5.0], AGENT]])   # (R 2, N 2)
    cmds = np.array([[ASIDE, [1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0], ASIDE]])
    velocities = np.broadcast_to(AGENT_V, (2, 2, 3))
    others = np.full((2, 2, 1, 3), np.nan)
    others[0, 0, 0] = others[1, 1, 0] = VEHICLE
    counted = ~np.isnan(others[..., 0])
    out = limit_clear(cmds, positions, velocities, area, *HOLD, lambda: (others, counted), 2.0)
    plain = limit_for_hold(cmds, positions, velocities, area, *HOLD)
    assert out.shape == (2, 2, 3)
    assert out[0, 1].tolist() == plain[0, 1].tolist()
    assert out[1, 0].tolist() == plain[1, 0].tolist()
    for r, i in ((0, 0), (1, 1)):
        assert _approach(out[r, i]) <= 1e-9 < _approach(plain[r, i])
