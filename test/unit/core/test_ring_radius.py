"""The ring's radius shaped round known obstacles (``law.ring_radius``), in every path."""
import numpy as np

from soliton_encirclement_ros.core.gains import ControllerParams
from soliton_encirclement_ros.core.law import (
    encirclement_step, encirclement_step_one, MISSING_NEIGHBOUR, NeighbourView, ring_radius)

PARAMS = ControllerParams(obstacle_clearance=3.0)  # off by default
AT_REST = np.zeros(3)


def _radius(agent, obstacles, params=PARAMS):
    return float(ring_radius(np.array(agent, dtype=float), AT_REST, AT_REST, AT_REST,
                             None if obstacles is None else np.array(obstacles, dtype=float),
                             params))


def test_nothing_in_the_way_is_todays_radius_exactly():
    assert ControllerParams().obstacle_clearance == 0.0
    assert _radius((20.0, 0.0, 0.0), None) == PARAMS.radius
    assert _radius((20.0, 0.0, 0.0), np.empty((0, 3))) == PARAMS.radius
    assert _radius((20.0, 0.0, 0.0), [(-20.0, 0.0, 0.0), (np.nan, np.nan, np.nan)]) == 20.0
    off = ControllerParams(obstacle_clearance=0.0)
    assert _radius((20.0, 0.0, 0.0), [(20.0, 0.0, 0.0)], off) == off.radius
    reference = ControllerParams.preset('reference', obstacle_clearance=3.0)
    assert _radius((20.0, 0.0, 0.0), [(20.0, 0.0, 0.0)], reference) == reference.radius


def test_an_obstacle_on_the_ring_lifts_it_by_the_clearance_and_fades_along_it():
    c, ramp = PARAMS.obstacle_clearance, PARAMS.obstacle_ramp
    assert _radius((20.0, 0.0, 0.0), [(20.0, 0.0, 0.0)]) == 20.0 + c
    assert _radius((20.0, 0.0, 0.0), [(19.0, 0.0, 0.0)]) == 19.0 + c
    assert _radius((20.0, 0.0, 0.0), [(20.0, c, 0.0)]) == 20.0 + c   # whole within c across
    half = _radius((20.0, 0.0, 0.0), [(20.0, c + 0.5 * ramp, 0.0)])
    assert abs(half - (20.0 + 0.5 * c)) < 1e-12                      # smoothstep's middle
    assert _radius((20.0, 0.0, 0.0), [(20.0, c + ramp, 0.0)]) == 20.0
    # Beyond R + c/2 the ring bends in instead; beyond R + c it is clear.
    assert _radius((20.0, 0.0, 0.0), [(22.0, 0.0, 0.0)]) == 22.0 - c
    assert _radius((20.0, 0.0, 0.0), [(23.5, 0.0, 0.0)]) == 20.0
    # Several: the largest lift and the largest lowering.
    assert _radius((20.0, 0.0, 0.0), [(20.0, 0.0, 0.0), (18.0, 0.0, 0.0)]) == 20.0 + c


def test_the_float_path_gives_the_array_paths_bits_with_obstacles():
    rng = np.random.default_rng(3)
    for _ in range(50):
        position = np.array([*rng.uniform(-25.0, 25.0, 2), 0.0])
        velocity = np.array([*rng.uniform(-5.0, 5.0, 2), 0.0])
        target = np.array([*rng.uniform(-3.0, 3.0, 2), 0.0])
        target_v = np.array([*rng.uniform(-5.0, 5.0, 2), 0.0])
        obstacles = np.column_stack((rng.uniform(-25.0, 25.0, (3, 2)), np.zeros(3)))
        theta = float(np.mod(np.arctan2(position[1] - target[1], position[0] - target[0]),
                             2 * np.pi))
        pred = NeighbourView(theta - 0.5, position + 1.0, velocity, 0.1, 0.0, 1)
        succ = NeighbourView(theta + 0.7, position - 1.0, velocity, -0.2, 0.0, 2)
        args = (0.3, position, velocity, np.zeros(3), target, target_v, 0.0, theta, pred, succ,
                1.0, 1.0, PARAMS)
        u, u_ss, cmd = encirclement_step(*args, ring_size=4, own_id=0,
                                         ring_obstacles=obstacles)
        u1, u_ss1, cmd1 = encirclement_step_one(
            0.3, tuple(position), tuple(velocity), (0.0, 0.0, 0.0), tuple(target),
            tuple(target_v), 0.0, theta,
            NeighbourView(pred.theta, tuple(pred.position), tuple(pred.velocity), 0.1, 0.0, 1),
            NeighbourView(succ.theta, tuple(succ.position), tuple(succ.velocity), -0.2, 0.0, 2),
            1.0, 1.0, PARAMS, ring_size=4, own_id=0, ring_obstacles=obstacles)
        assert float(u) == u1 and float(u_ss) == u_ss1
        assert tuple(np.asarray(cmd).tolist()) == tuple(cmd1)
        none = encirclement_step(*args, ring_size=4, own_id=0)[2]
        far = encirclement_step(*args, ring_size=4, own_id=0,
                                ring_obstacles=np.full((2, 3), np.nan))[2]
        assert np.array_equal(none, far)
    assert MISSING_NEIGHBOUR.u == 0.0
