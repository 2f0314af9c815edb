"""Swarm metrics over the live agents (core/metrics.py)."""
import math

import numpy as np
import pytest

from soliton_encirclement_ros.core.metrics import compute_metrics
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
