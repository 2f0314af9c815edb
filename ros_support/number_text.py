"""
Numbers as a person reads them: the one way the tables, reports and logs print a float.

- :func:`fixed`: a fixed number of digits, never a negative zero (``-0.0000`` is ``0.0000``:
  a value that rounds to zero has no sign);
- :func:`number_text`: a setting's default or bound: a multiple of pi by name (``2π``, ``π/2``;
  ``2*pi``, ``pi/2`` in plain ASCII) rather than ``6.283185307179586``, other floats as Python
  writes them, again without a negative zero.
"""
from __future__ import annotations

import math

# Multiples of pi a setting's default or range uses, as written in Unicode and in ASCII.
_PI_MULTIPLES = ((2.0, '2π', '2*pi'), (1.0, 'π', 'pi'), (0.5, 'π/2', 'pi/2'),
                 (0.25, 'π/4', 'pi/4'))


def fixed(value: float, digits: int, sign: bool = False) -> str:
    """Return ``value`` with ``digits`` decimals (``sign``: always a sign), no negative zero."""
    text = f'{value:+.{digits}f}' if sign else f'{value:.{digits}f}'
    if text.startswith('-') and float(text) == 0.0:
        text = ('+' if sign else '') + text[1:]
    return text


def number_text(value: float, ascii_only: bool = False) -> str:
    """Return a setting's number: a multiple of pi by name, else Python's shortest repr."""
    if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
        return repr(value) if isinstance(value, float) else str(value)
    for factor, unicode_name, ascii_name in _PI_MULTIPLES:
        if math.isclose(abs(value), factor * math.pi, rel_tol=1e-12):
            return ('-' if value < 0 else '') + (ascii_name if ascii_only else unicode_name)
    return repr(value + 0.0)  # -0.0 + 0.0 is 0.0
