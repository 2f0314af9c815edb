"""Swarm metrics over the live agents (core/metrics.py)."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.metrics import compute_metrics, gap_error
from support.core_cases import on_circle, ORIGIN


def test_perfect_ring_metrics():
    angles = np.arange(8) * 2 * math.pi / 8 + 0.3
    m = compute_metrics(np.array([on_circle(a) for a in angles]), np.zeros((8, 3)), ORIGIN,
                        ORIGIN, 20.0)
    assert m.E_gap == pytest.approx(0.0, abs=1e-12) and m.rho == pytest.approx(0.0, abs=1e-12)
    assert m.G_max == pytest.approx(1.0) and m.E_r == pytest.approx(0.0, abs=1e-12)


def test_clustered_agents_metrics():
    m = compute_metrics(np.array([on_circle(0.0, 22.0), on_circle(0.0, 18.0)]),
                        np.zeros((2, 3)), ORIGIN, ORIGIN, 20.0)
    assert m.rho == pytest.approx(1.0) and m.G_max == pytest.approx(2.0)
    assert m.E_r == pytest.approx(0.1) and m.E_gap == pytest.approx(1.0)


def test_gap_error_is_the_metrics_e_gap():
    """gap_error of the angles (any order) is E_gap of agents at them; its own value by hand."""
    angles = np.array([0.0, 0.5 * math.pi, math.pi, 1.5 * math.pi, 0.25 * math.pi])
    m = compute_metrics(np.array([on_circle(a) for a in angles]), np.zeros((5, 3)), ORIGIN,
                        ORIGIN, 20.0)
    # gaps of 1/8, 1/8, 1/4, 1/4 and 1/4 turn over the even 1/5: 0.625 (twice), 1.25 (3 times)
    by_hand = math.sqrt((2 * 0.375 ** 2 + 3 * 0.25 ** 2) / 5)
    assert gap_error(angles[::-1]) == pytest.approx(by_hand) == m.E_gap
