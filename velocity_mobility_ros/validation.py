"""Validation helpers shared by every settings object of both packages (no rclpy)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, TypeVar

Settings = TypeVar('Settings')


def finite_float(name: str, value: Any) -> float:
    """``value`` as a float; ``ValueError`` naming ``name`` if it is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f'{name} must be a number, got {value!r}')
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f'{name} must be finite, got {value}')
    return value


def from_mapping(cls: type[Settings], values: Mapping[str, Any], what: str = '') -> Settings:
    """``cls(**values)`` for a dataclass; unknown names raise ``ValueError`` listing them."""
    what = what or f'{cls.__name__} field(s)'
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f'unknown {what}: {", ".join(unknown)} (known: {", ".join(sorted(known))})')
    return cls(**values)
