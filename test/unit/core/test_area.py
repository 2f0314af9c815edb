"""
core.area: a safety area every engine keeps its vehicles inside (issue 37 §2).

Over whole runs, in every engine and a sweep: ``acceptance/test_area_acceptance.py``.
"""
import numpy as np
import pytest

from soliton_encirclement_ros.core.area import limit_to_area, SafetyArea, stoppable_speed

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


def test_a_lat_lon_polygon_is_placed_in_the_frame_of_its_geo_reference():
    import pymap3d
    ref = (47.397742, 8.545594, 488.0)
    corners = [pymap3d.enu2geodetic(x, y, 0.0, *ref)[:2] for x, y in
               [(-20, -20), (20, -20), (20, 20), (-20, 20)]]
    area = SafetyArea.from_mapping({'polygon_latlon': corners, 'geo_reference': ref})
    assert area.polygon == pytest.approx(np.array([[-20, -20], [20, -20], [20, 20], [-20, 20]]),
                                         abs=1e-3)
