"""
An estimator reset in a PX4 ring leaves no phantom for the others to fly into (issue 38 §1).

The SITL launch's graph for N = 3 (``support.px4_ring``), engaged on the ground 1 m apart. Once
every pair has spread farther than ``d_safe``, the middle vehicle's estimate jumps 5 m (a new
``reset_counter``): its bridge holds it where it really is, while its odometry, and so its
agent's broadcast, says 5 m away. Before issue 38 the others kept ``d_safe`` from that phantom
and a neighbour flew into the held vehicle (0.9 m, then 0.03 m). The bridge now publishes the
jump as position covariance, the agent broadcasts it as ``uncertainty``, and the others keep
``d_safe`` from the whole disc: the held vehicle's true position stays at least ``d_safe`` from
every other. Needs a built px4_msgs.
"""
import time

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, every, needs_px4_msgs, observe_graph, Separation, sitl_plan, start_graph,
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

    assert spin_until(ros, lambda: len(odoms) == N and all(c.service_is_ready() for c in engage),
                      timeout=DEADLINE, each=observe), 'odometry or engage services missing'
    futures = [client.call_async(Trigger.Request()) for client in engage]
    assert spin_until(ros, lambda: all(f.done() for f in futures), timeout=DEADLINE, each=observe)
    assert all(f.result().success for f in futures), [f.result().message for f in futures]
    assert spin_until(ros, lambda: all(separation.separated.values()), timeout=DEADLINE,
                      each=observe), 'the vehicles never spread farther than d_safe'

    fakes[held].reset_estimate(JUMP_NED)
    jumped['at'] = time.monotonic()
    name = plan.names[held]
    assert spin_until(ros, lambda: odoms[name].pose.covariance[0] > 16.0, each=observe)
    assert spin_until(ros, lambda: time.monotonic() - jumped['at'] > AFTER, timeout=DEADLINE,
                      each=observe)
    status = bridges[held]._seq.status(bridges[held]._steady_now())
    print(f'\nafter a 5 m reset of {name}: closest approach of another vehicle to it '
          f'{closest["d"]:.3f} m ({closest["at"]:.1f} s after the jump); bridge: {status.message}')
    assert status.level == 'error' and 'max_reset_jump' in status.message  # still held
    assert closest['d'] >= d_safe, (
        f'a vehicle came {closest["d"]:.3f} m from the held {name} ({closest["at"]:.1f} s after '
        f'its 5 m estimator reset): d_safe is {d_safe} m')
