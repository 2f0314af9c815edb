"""px4.geo: a PX4's local origin in the world frame from its estimator's GPS reference."""
import numpy as np
import pymap3d
import pytest

from soliton_encirclement_ros.px4.geo import (
    check_geo_reference, origin_in_world, OriginPlacement)

FIELD = (47.397742, 8.545594, 488.0)


def at(east, north, up=0.0):
    return pymap3d.enu2geodetic(east, north, up, *FIELD)


def test_an_origin_east_and_north_of_the_reference_is_placed_there():
    assert origin_in_world(*at(120.0, -35.0, 1.5), FIELD) == pytest.approx(
        [120.0, -35.0, 1.5], abs=1e-6)
    # 0.001 deg of latitude is about 111 m north, whatever pymap3d's internals
    north = origin_in_world(FIELD[0] + 0.001, FIELD[1], FIELD[2], FIELD)
    assert north[0] == pytest.approx(0.0, abs=1e-6) and 110.0 < north[1] < 112.0


@pytest.mark.parametrize('values, match', [
    ([1.0, 2.0], r'geo_reference must be \[lat, lon, alt\]'),
    ([91.0, 0.0, 0.0], 'latitude must be in'),
    ([0.0, 181.0, 0.0], 'longitude in'),
    ([float('nan'), 0.0, 0.0], 'geo_reference must be'),
])
def test_bad_geo_references_are_named(values, match):
    with pytest.raises(ValueError, match=match):
        check_geo_reference(values)
    assert check_geo_reference([]) is None


def test_gps_source_is_unplaced_until_the_reference_is_valid_then_placed():
    placement = OriginPlacement('gps', geo_reference=FIELD)
    assert placement.origin is None and 'no global position reference' in placement.problem
    assert placement.on_reference(False, *at(5.0, 5.0), 10) == []
    lines = placement.on_reference(True, *at(5.0, 6.0), 10)
    assert placement.origin == pytest.approx([5.0, 6.0, 0.0], abs=1e-6)
    assert placement.problem is None and lines[0].startswith('placed by GPS')
    assert placement.on_reference(True, *at(5.0, 6.0), 10) == []  # same ref_timestamp
    lines = placement.on_reference(True, *at(8.0, 10.0), 20)
    assert placement.moved == pytest.approx(5.0, abs=1e-6)
    assert 'PX4 estimator reference changed (ref_timestamp 20)' in lines[0]
    assert lines[0].endswith('5.00 m from the last one; re-placed')


def test_a_given_origin_is_checked_against_gps():
    placement = OriginPlacement('given', (10.0, 0.0, 0.0), FIELD, tolerance=3.0)
    assert placement.origin == pytest.approx([10.0, 0.0, 0.0]) and placement.problem is None
    placement.on_reference(True, *at(11.0, 2.0), 1)  # 2.24 m off: within 3 m
    assert placement.problem is None
    lines = placement.on_reference(True, *at(14.0, 0.0), 2)  # 4 m off
    assert placement.origin == pytest.approx([10.0, 0.0, 0.0])  # still the given one
    assert placement.problem == (
        'origin_enu [10.00, 0.00, 0.00] m disagrees with GPS [14.00, 0.00, 0.00] m by 4.00 m '
        '(origin_tolerance 3 m): correct origin_enu, or fly origin_source gps')
    assert lines[-1] == placement.problem
    assert np.isfinite(placement.moved)


def test_gps_needs_a_geo_reference():
    with pytest.raises(ValueError, match="origin_source 'gps' needs geo_reference"):
        OriginPlacement('gps')
    with pytest.raises(ValueError, match='origin_source must be one of given, gps'):
        OriginPlacement('rtk')
