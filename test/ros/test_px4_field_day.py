"""
A field day with the PX4 test double (issue 37 §7): vehicles placed by their own GPS.

Four vehicles whose estimators started at different GPS points, none of them told where: the
launch is given only the field's ``geo_reference`` (``swarm_px4_sitl.launch.py
geo_reference:=...``, so each bridge flies ``origin_source gps``). Engaged on the ground, they
climb and form one ring about the target, in the right places: each vehicle's odometry in the
world frame is where it truly is, and the true positions form the ring. Needs a built px4_msgs.
"""
import dataclasses

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, engage_and_form_ring, every, FIELD, needs_px4_msgs, observe_graph, ready,
    sitl_plan, SPAWNS, start_graph, true_position_enu)

pytestmark = needs_px4_msgs


ros = pytest.fixture(default_context_executor)


def test_four_vehicles_placed_by_their_own_gps_form_one_ring(ros):
    defaults, plan = sitl_plan(len(SPAWNS))
    plan = dataclasses.replace(plan, px4_origins=(), geo_reference=FIELD)
    altitude = float(defaults['altitude'])
    nodes = start_graph(ros, plan, spawns_enu=SPAWNS)
    bridges, fakes, odoms, engage = observe_graph(ros, plan, nodes)
    assert all(b.get_parameter('origin_source').value == 'gps' for b in bridges)
    assert spin_until(ros, lambda: ready(odoms, plan.names, engage, bridges),
                      timeout=DEADLINE)

    def placed():  # each bridge's odometry is where its vehicle truly is, to GPS arithmetic
        return all(np.allclose([getattr(odoms[name].pose.pose.position, c) for c in 'xyz'],
                               true_position_enu(fake), atol=0.01)
                   for name, fake in zip(plan.names, fakes))
    assert spin_until(ros, placed, timeout=DEADLINE)
    formed, settle, p, metrics = engage_and_form_ring(
        ros, dict(zip(plan.names, engage)), odoms, plan.names, plan.radius, altitude,
        every(0.05, lambda: None))
    assert formed, f'no ring: E_gap {metrics.E_gap:.3f}, positions {np.round(p, 2).tolist()}'
    truth = np.array([true_position_enu(fake) for fake in fakes])
    assert np.allclose(truth, p, atol=0.5)  # odometry and truth agree while flying too
    radii = np.hypot(truth[:, 0], truth[:, 1])
    assert np.all(np.abs(radii - plan.radius) < 0.1 * plan.radius), radii
    print(f'\nring of {len(SPAWNS)} from GPS origins formed {settle:.1f} s after the engage; '
          f'E_gap {metrics.E_gap:.4f}, true radii {np.round(radii, 2).tolist()}')
