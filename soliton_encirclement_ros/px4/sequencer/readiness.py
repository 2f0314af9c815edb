"""
Readiness: whether an engage from IDLE may start now, as a list of small checks.

Each check takes the sequencer and the time and returns its problem (one sentence) or None;
the first problem refuses the engage, and ``~/status`` reports it as ``ready``.
"""


def other_publishers(seq, now):
    """Another node publishes setpoints to this vehicle."""
    return seq.writers.problem()


def link(seq, now):
    """PX4's status or odometry is missing or stale."""
    return seq.link.problem(now)


def system_id(seq, now):
    """PX4 reports another system id than ``target_system``."""
    return seq.link.system_id_problem()


def failsafe(seq, now):
    """PX4 is in a failsafe."""
    text = seq.link.failsafe_text(now)
    return None if text is None else text + ': clear it (or take over) before engaging'


def px4_landing(seq, now):
    """PX4 is landing the vehicle (armed, AUTO_LAND)."""
    return seq.link.landing_problem()


def origin(seq, now):
    """Name why the vehicle is not placed in the world frame (``OriginPlacement.problem``)."""
    return seq.origin_problem


def safety_area(seq, now):
    """Outside the safety area, or no position yet to check against it."""
    watch = seq.area_watch
    if watch is None:
        return None
    if watch.outside is not None:
        return (f'outside the safety area ({watch.outside}): carry the vehicle inside '
                'before engaging')
    if watch.since is None and not watch.known:
        return 'no position in the world frame yet to check against the safety area'
    return None


def battery(seq, now):
    """Name a battery below ``min_battery``, or one PX4 warns is critical."""
    problem = seq.battery.problem(now)
    return f'{problem}: charge or swap it before engaging' if problem else None


ENGAGE_CHECKS = (other_publishers, link, system_id, failsafe, px4_landing, origin, safety_area,
                 battery)


def engage_problem(seq, now):
    """Return the first problem of :data:`ENGAGE_CHECKS`, or None: ready to engage."""
    for check in ENGAGE_CHECKS:
        problem = check(seq, now)
        if problem:
            return problem
    return None
