"""
numpy's element rules for single Python floats: the float paths' one home for them.

The per-agent float paths (``law.encirclement_step_one``, ``law._separation_one``,
``controller.obstacle_reach``) return the array paths' bits; these helpers pick what numpy's
ufuncs pick on NaN, ties and signed zeros, and ``hypot`` is numpy's own (``math.hypot`` may
differ from it in the last bit).
"""
from __future__ import annotations

import numpy as np


def maximum(a: float, b: float) -> float:
    """``np.maximum`` of two floats (NaN wins; the first of two equal zeros)."""
    return a if a != a or a >= b else b


def minimum(a: float, b: float) -> float:
    """``np.minimum`` of two floats (NaN wins; the first of two equal zeros)."""
    return a if a != a or a <= b else b


def clip(x: float, low: float, high: float) -> float:
    """``np.clip`` of one float (NaN stays NaN; ties and signed zeros as numpy picks them)."""
    if x != x:
        return x
    x = x if x > low else low
    return x if x < high else high


def hypot(x: float, y: float) -> float:
    """``np.hypot`` of two floats, as a float."""
    return float(np.hypot(x, y))


def xy_scale(x: float, y: float, limit: float) -> float:
    """``velocity_mobility_ros.core.geometry.xy_scale`` of one (x, y): the scale to ``limit``."""
    return minimum(1.0, limit / maximum(hypot(x, y), 1e-300))
