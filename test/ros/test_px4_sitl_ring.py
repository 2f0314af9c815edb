"""
A swarm with the SITL launch's defaults, engaged on the ground, climbs and forms the ring.

Issue 21, "Done when": no two vehicles ever closer than ``d_safe`` once they first got farther
apart than ``d_safe`` (PX4's SITL spawns them 1 m apart, inside d_safe = 2 m).

The graph is what ``swarm_px4_sitl.launch.py`` starts for N = 3 (its argument defaults read from
the launch file, its nodes' parameters from ``build_graph``), in one process on real rclpy:
agent_node + px4_bridge_node per vehicle and target_node, against one kinematic
:class:`FakePx4` per vehicle (px4_1..px4_3, MAV_SYS_ID 2..4) in place of PX4 SITL + Gazebo.
Without Gazebo there is no /clock, so the nodes run on the wall clock (``use_sim_time`` false);
the metrics node is left out (the test computes the metrics itself). Needs a built px4_msgs.
"""

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, engage_and_form_ring, every, needs_px4_msgs, observe_graph, ready, Separation,
    sitl_plan,
    start_graph, true_position_enu)

pytestmark = needs_px4_msgs

N = 3
OBSERVE_PERIOD = 0.01    # s: true positions sampled at 100 Hz (the fakes move at 50 Hz)

ros = pytest.fixture(default_context_executor)


def true_positions_enu(vehicles):
    """Each vehicle's true position in the shared world ENU frame."""
    return np.array([true_position_enu(vehicle) for vehicle in vehicles])


def test_sitl_defaults_engaged_on_the_ground_climb_and_form_the_ring_apart(ros):
    defaults, plan = sitl_plan(N)
    d_safe, altitude = float(defaults['d_safe']), float(defaults['altitude'])
    radius = plan.radius
    assert d_safe > float(defaults['spawn_spacing'])  # the case of the issue: spawned inside
    bridges, fakes, odoms, engage = observe_graph(ros, plan, start_graph(ros, plan))

    separation = Separation(d_safe, N)

    observe = every(OBSERVE_PERIOD, lambda: separation.observe(true_positions_enu(fakes)))

    assert spin_until(ros, lambda: ready(odoms, plan.names, engage, bridges),
                      timeout=DEADLINE, each=observe), 'odometry or engage services missing'
    start = true_positions_enu(fakes)
    assert np.allclose(start, list(plan.px4_origins), atol=1e-9)  # on the ground
    assert separation.first[(0, 1)] == pytest.approx(1.0)
    assert separation.first[(1, 2)] == pytest.approx(1.0)
    assert separation.first[(0, 2)] == pytest.approx(2.0)

    formed, settle, p, metrics = engage_and_form_ring(
        ros, dict(zip(plan.names, engage)), odoms, plan.names, radius, altitude, observe)

    def by_pair(values):
        return {f'{plan.names[i]}-{plan.names[j]}': round(d, 3) for (i, j), d in values.items()}
    print(f'\nring: formed={formed} after {settle:.1f} s wall from the engage; E_gap '
          f'{metrics.E_gap:.4f}, E_r {metrics.E_r:.4f}, altitudes {np.round(p[:, 2], 2).tolist()}'
          f'; closest approach after first farther than d_safe ({d_safe} m): '
          f'{by_pair(separation.min_after)}, than 2 d_safe: {by_pair(separation.min_after_wide)}')
    assert formed, (f'no ring at {altitude} m within {DEADLINE:.0f} s: E_gap {metrics.E_gap:.3f}, '
                    f'positions {np.round(p, 2).tolist()}')
    assert all(separation.separated.values()), separation.separated
    for pair, closest_d in separation.min_after.items():
        names = f'{plan.names[pair[0]]}-{plan.names[pair[1]]}'
        assert closest_d >= d_safe, (
            f'{names} came {closest_d:.3f} m apart after having been farther than d_safe '
            f'({d_safe} m)')
    assert np.all(np.abs(np.hypot(p[:, 0], p[:, 1]) - radius) < 0.1 * radius), p
