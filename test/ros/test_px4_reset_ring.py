"""
An estimator reset in a PX4 ring leaves no phantom for the others to fly into.

The SITL launch's graph for N = 3 (``support.px4_ring``), engaged on the ground 1 m apart. Once
every pair has spread farther than ``d_safe``, the middle vehicle's estimate jumps 5 m (a new
``reset_counter``): its bridge holds it where it really is. Were the new estimate broadcast,
the others would keep ``d_safe`` from a phantom 5 m away and fly into the held vehicle (0.9 m,
then 0.03 m, seen once); were the jump broadcast as a disc of uncertainty, a 44.72 m jump in a
ring of 4 at R = 20 m would swallow the whole ring, every neighbour fleeing it at speed and
nothing keeping them off the real vehicle inside it (0.43 and 0.37 m, seen on the test double).
Held after a reset larger than ``max_reset_jump``, the bridge announces the vehicle where it
was (its estimate less the jump, which a hold keeps), its uncertainty growing at a hold's drift
rate: the held vehicle's true position stays clear of every other. Needs a built px4_msgs.
"""
import time

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, every, needs_px4_msgs, observe_graph, ready, Separation, sitl_plan, start_graph,
    true_position_enu)

pytestmark = needs_px4_msgs

N = 3
JUMP_NED = (0.0, 5.0, 0.0)   # 5 m east (NED y) on the estimate: more than max_reset_jump 2 m
AFTER = 25.0                 # s of wall time watched after the jump
OBSERVE_PERIOD = 0.01

ros = pytest.fixture(default_context_executor)


def test_a_held_vehicle_after_a_large_reset_is_kept_clear_of(ros):
    from std_srvs.srv import Trigger

    defaults, plan = sitl_plan(N, target_motion='random')  # the ring moves past the held one
    d_safe = float(defaults['d_safe'])
    bridges, fakes, odoms, engage = observe_graph(ros, plan, start_graph(ros, plan))
    separation = Separation(d_safe, N)
    held = 1  # the middle vehicle, spawned 1 m from each of the others
    closest = {'d': np.inf, 'at': None}
    jumped = {}

    def observe():
        p = np.array([true_position_enu(fake) for fake in fakes])
        separation.observe(p)
        if jumped:
            for other in (0, 2):
                d = float(np.hypot(*(p[held, :2] - p[other, :2])))
                if d < closest['d']:
                    closest.update(d=d, at=time.monotonic() - jumped['at'])
    observe = every(OBSERVE_PERIOD, observe)

    assert spin_until(ros, lambda: ready(odoms, plan.names, engage, bridges),
                      timeout=DEADLINE, each=observe), 'odometry or engage services missing'
    futures = [client.call_async(Trigger.Request()) for client in engage]
    assert spin_until(ros, lambda: all(f.done() for f in futures), timeout=DEADLINE, each=observe)
    assert all(f.result().success for f in futures), [f.result().message for f in futures]
    assert spin_until(ros, lambda: all(separation.separated.values()), timeout=DEADLINE,
                      each=observe), 'the vehicles never spread farther than d_safe'

    fakes[held].reset_estimate(JUMP_NED)
    jumped['at'] = time.monotonic()
    name = plan.names[held]
    seq = bridges[held]._seq
    assert spin_until(ros, lambda: seq._reset is not None and seq._reset.latched, each=observe)
    assert spin_until(ros, lambda: time.monotonic() - jumped['at'] > AFTER, timeout=DEADLINE,
                      each=observe)
    status = bridges[held]._seq.status(bridges[held]._steady_now())
    print(f'\nafter a 5 m reset of {name}: closest approach of another vehicle to it '
          f'{closest["d"]:.3f} m ({closest["at"]:.1f} s after the jump); bridge: {status.message}')
    assert status.level == 'error' and 'max_reset_jump' in status.message  # still held
    assert closest['d'] >= d_safe, (
        f'a vehicle came {closest["d"]:.3f} m from the held {name} ({closest["at"]:.1f} s after '
        f'its 5 m estimator reset): d_safe is {d_safe} m')


PHANTOM_JUMP_NED = (20.0, 40.0, 0.0)   # 44.72 m: a disc of it would swallow a 20 m ring


@pytest.mark.parametrize('run', range(5))
def test_a_45_m_reset_in_a_formed_ring_leaves_no_phantom_to_flee_through(ros, run):
    """
    A ring of 4 at R = 20 m; once it has formed, one estimate jumps 44.72 m.

    The held vehicle is announced where it was (its estimate less the jump), not as a disc
    that holds the whole ring: no neighbour flees through it. Each run, a new random target.
    """
    from support.px4_ring import engage_and_form_ring
    defaults, plan = sitl_plan(4, target_motion='random')
    d_safe = float(defaults['d_safe'])
    bridges, fakes, odoms, engage = observe_graph(ros, plan, start_graph(ros, plan))
    held, closest, jumped = 2, {'d': np.inf, 'at': None}, {}

    def observe():
        if not jumped:
            return
        p = np.array([true_position_enu(fake) for fake in fakes])
        for other in set(range(4)) - {held}:
            d = float(np.hypot(*(p[held, :2] - p[other, :2])))
            if d < closest['d']:
                closest.update(d=d, at=time.monotonic() - jumped['at'])
    observe = every(OBSERVE_PERIOD, observe)
    assert spin_until(ros, lambda: ready(odoms, plan.names, engage, bridges),
                      timeout=DEADLINE), 'odometry or engage services missing'
    formed, settle, _, _ = engage_and_form_ring(
        ros, dict(zip(plan.names, engage)), odoms, plan.names, float(defaults['radius']),
        float(defaults['altitude']), observe)
    assert formed, 'the ring never formed'
    fakes[held].reset_estimate(PHANTOM_JUMP_NED)
    jumped['at'] = time.monotonic()
    assert spin_until(ros, lambda: time.monotonic() - jumped['at'] > AFTER, timeout=DEADLINE,
                      each=observe)
    name = plan.names[held]
    status = bridges[held]._seq.status(bridges[held]._steady_now())
    print(f'\nrun {run}: ring formed {settle:.1f} s after the engage; after a 44.72 m reset of '
          f'{name}, the closest approach of another vehicle to it: {closest["d"]:.3f} m '
          f'({closest["at"]:.1f} s after the jump); bridge: {status.message}')
    assert status.level == 'error' and 'max_reset_jump' in status.message  # still held
    assert closest['d'] >= 1.0, (
        f'a vehicle came {closest["d"]:.3f} m from the held {name} ({closest["at"]:.1f} s after '
        f'its 44.72 m estimator reset): d_safe is {d_safe} m')
