"""
A field day with the PX4 test double (issue 37 §7): vehicles placed by their own GPS.

Four vehicles whose estimators started at different GPS points, none of them told where: the
launch is given only the field's ``geo_reference`` (``swarm_px4_sitl.launch.py
geo_reference:=...``, so each bridge flies ``origin_source gps``). Engaged on the ground, they
climb and form one ring about the target, in the right places: each vehicle's odometry in the
world frame is where it truly is, and the true positions form the ring. Needs a built px4_msgs.
"""
import dataclasses
import importlib.util

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, engage_and_form_ring, every, observe_graph, sitl_plan, start_graph,
    true_position_enu)

HAVE_PX4_MSGS = importlib.util.find_spec('px4_msgs') is not None
pytestmark = pytest.mark.skipif(not HAVE_PX4_MSGS, reason=(
    'px4_msgs is not importable: build PX4/px4_msgs (matching the PX4 version) '
    'in a colcon workspace and source it'))

FIELD = (47.397742, 8.545594, 488.0)
# Where each PX4 powered up and took its GPS reference (world ENU about FIELD), 3-9 m apart.
SPAWNS = [(1.0, 1.5, 0.0), (6.0, 3.0, 0.5), (-4.0, 5.0, -0.3), (2.0, -6.0, 0.2)]

ros = pytest.fixture(default_context_executor)


def test_four_vehicles_placed_by_their_own_gps_form_one_ring(ros):
    defaults, plan = sitl_plan(len(SPAWNS))
    plan = dataclasses.replace(plan, px4_origins=(), geo_reference=FIELD)
    altitude = float(defaults['altitude'])
    nodes = start_graph(ros, plan, spawns_enu=SPAWNS)
    bridges, fakes, odoms, engage = observe_graph(ros, plan, nodes)
    assert all(b.get_parameter('origin_source').value == 'gps' for b in bridges)
    assert spin_until(ros, lambda: len(odoms) == len(SPAWNS)
                      and all(c.service_is_ready() for c in engage), timeout=DEADLINE)

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
