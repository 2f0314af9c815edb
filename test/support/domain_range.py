"""
The DDS domain ids the test suite may take: all of 1..232, or the range a lab gives it.

``SOLITON_TEST_DOMAINS`` (e.g. ``100-140``, or ``100-140,150``) keeps the suite to those ids,
for a machine whose other users have domains of their own. The user's own domain (an exported
``ROS_DOMAIN_ID``, else 0) is never taken.
"""
from __future__ import annotations

VARIABLE = 'SOLITON_TEST_DOMAINS'
LOW, HIGH = 1, 232  # Fast DDS domain ids stay below 233; 0 is the default, the user's


def suite_domain_ids(text: str | None, user: str | None) -> list[int]:
    """Return the domain ids in ``text`` (None or empty: every one), without ``user``'s."""
    if text is None or not text.strip():
        ids = list(range(LOW, HIGH + 1))
    else:
        ids = []
        for part in text.split(','):
            low, _, high = part.strip().partition('-')
            try:
                first, last = int(low), int(high or low)
            except ValueError:
                first, last = 0, -1
            if not LOW <= first <= last <= HIGH:
                raise ValueError(f'{VARIABLE} must be domain ids or ranges of them within '
                                 f'{LOW}..{HIGH}, like 100-140 or 100-140,150; got {text!r}')
            ids += [d for d in range(first, last + 1) if d not in ids]
    own = (user or '0').strip()
    ids = [d for d in ids if str(d) != own]
    if not ids:
        raise ValueError(f"{VARIABLE}={text!r} leaves no domain id but the user's own ({own})")
    return ids
