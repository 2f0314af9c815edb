"""Target-centric geometry (core/geometry.py) against hand-computed values."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.geometry import (
    angular_rate, polar_frame, target_angle, wrap_2pi)
from support.core_cases import ORIGIN


def test_target_angle_is_wrapped_and_target_centric():
    assert target_angle([0.0, -1.0, 0.0], ORIGIN) == pytest.approx(1.5 * math.pi)
    assert target_angle([6.0, 5.0, 9.0], [5.0, 5.0, 0.0]) == 0.0
    assert wrap_2pi(-0.5) == pytest.approx(2 * math.pi - 0.5)


def test_polar_frame_and_guard_at_target():
    r, e_r, t = polar_frame([0.0, 3.0, 0.0], ORIGIN)
    assert r == 3.0 and e_r == pytest.approx([0.0, 1.0]) and t == pytest.approx([-1.0, 0.0])
    r, e_r, t = polar_frame(ORIGIN, ORIGIN)
    assert r == 0.0 and np.all(e_r == 0.0) and np.all(t == 0.0)


def test_angular_rate():
    # at (10, 0) moving +y at 2 m/s relative to the target: 0.2 rad/s
    assert angular_rate([11, 0, 0], [1, 3, 0], [1, 0, 0], [1, 1, 0]) == pytest.approx(0.2)
    assert math.isnan(angular_rate(ORIGIN, [1, 0, 0], ORIGIN, ORIGIN))
