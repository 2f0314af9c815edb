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
import ast
import importlib.util
import itertools
import math
from pathlib import Path
import time

import numpy as np
import pytest

from soliton_encirclement_ros.bringup.graph import build_graph, live_scenario, SwarmPlan
from soliton_encirclement_ros.core.metrics import compute_metrics
from support.harness import default_context_executor, spin_until

HAVE_PX4_MSGS = importlib.util.find_spec('px4_msgs') is not None
pytestmark = pytest.mark.skipif(not HAVE_PX4_MSGS, reason=(
    'px4_msgs is not importable: build PX4/px4_msgs (matching the PX4 version) '
    'in a colcon workspace and source it'))

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / 'launch' / 'swarm_px4_sitl.launch.py'
PARAMS_FILE = ROOT / 'config' / 'px4_bridge.yaml'  # installed as the launch's params_file
N = 3
RING_E_GAP = 0.05        # the project's settle threshold (analysis.report.SETTLE_THRESHOLDS)
ALTITUDE_TOLERANCE = 0.5  # m
DEADLINE = 120.0         # s of wall time; a healthy run needs a fraction of it


def launch_defaults():
    """Return the default of every literal argument of the SITL launch file (``ARGUMENTS``)."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign)
                and any(getattr(t, 'id', None) == 'ARGUMENTS' for t in node.targets)):
            defaults = {}
            for key, value in zip(node.value.keys, node.value.values):
                try:
                    defaults[ast.literal_eval(key)] = ast.literal_eval(value.elts[0])
                except ValueError:
                    pass  # params_file: a path into the install share (PARAMS_FILE here)
            return defaults
    raise AssertionError(f'no ARGUMENTS in {LAUNCH_FILE}')


def sitl_plan(n):
    """Return the plan of ``swarm_px4_sitl.launch.py num_agents:=n`` (defaults, no /clock)."""
    d = launch_defaults()
    spacing = float(d['spawn_spacing'])
    scenario = live_scenario(agents=n, radius=float(d['radius']),
                             target_motion=d['target_motion'],
                             altitude_hold=float(d['altitude']),
                             controller={'d_safe': float(d['d_safe'])})
    # gz_multi_vehicle.sh: instance i at (0, i * spacing, 0), as the launch's empty `origins`.
    origins = tuple((0.0, (i + 1) * spacing, 0.0) for i in range(n))
    return d, SwarmPlan(scenario=scenario, mode='px4', px4_origins=origins,
                        swarm_reliability=d['swarm_reliability'], use_sim_time=False,
                        params_files=(str(PARAMS_FILE),))


ros = pytest.fixture(default_context_executor)


def start_graph(ros, plan):
    """Start the plan's target, agents and bridges, and one kinematic fake PX4 per bridge."""
    from soliton_encirclement_ros.nodes.agent_node import AgentNode
    from soliton_encirclement_ros.nodes.target_node import TargetNode
    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs, Px4BridgeNode
    from support.fake_px4 import FakePx4

    px4_msgs = load_px4_msgs()
    classes = {'target_node': TargetNode, 'agent_node': AgentNode,
               'px4_bridge_node': lambda **kw: Px4BridgeNode(px4_msgs, **kw)}
    bridges, fakes = [], []
    for spec in build_graph(plan):
        if spec.executable not in classes:
            continue  # metrics_node: the test computes the metrics from the odometry itself
        # The node gets exactly the command line the launch would give it.
        node = classes[spec.executable](cli_args=spec.ros_args())
        ros.add_node(node)
        if spec.executable == 'px4_bridge_node':
            params = spec.parameters
            fake = FakePx4(params['px4_namespace'], system_id=params['target_system'],
                           kinematic=True, node_name=f'fake_{params["px4_namespace"]}')
            fake.origin_enu = np.array(params['origin_enu'])
            ros.add_node(fake)
            bridges.append(node)
            fakes.append(fake)
    return bridges, fakes


def true_positions_enu(fakes):
    """Each vehicle's true position in the shared world ENU frame (spawn origin + NED)."""
    from soliton_encirclement_ros.px4.frames import ned_to_enu
    return np.array([fake.origin_enu + ned_to_enu(fake.position_ned) for fake in fakes])


class Separation:
    """Pairwise horizontal distances, and the closest approach after each pair first separated."""

    def __init__(self, d_safe, n):
        self.d_safe = d_safe
        self.pairs = list(itertools.combinations(range(n), 2))
        self.separated = dict.fromkeys(self.pairs, False)
        self.min_after = dict.fromkeys(self.pairs, math.inf)
        self.wide = dict.fromkeys(self.pairs, False)  # once farther than 2 d_safe
        self.min_after_wide = dict.fromkeys(self.pairs, math.inf)
        self.first = None

    def observe(self, positions):
        distances = {(i, j): float(np.hypot(*(positions[i, :2] - positions[j, :2])))
                     for i, j in self.pairs}
        if self.first is None:
            self.first = distances
        for pair, d in distances.items():
            if self.separated[pair]:
                self.min_after[pair] = min(self.min_after[pair], d)
            elif d > self.d_safe:
                self.separated[pair] = True
            if self.wide[pair]:
                self.min_after_wide[pair] = min(self.min_after_wide[pair], d)
            elif d > 2.0 * self.d_safe:
                self.wide[pair] = True


def test_sitl_defaults_engaged_on_the_ground_climb_and_form_the_ring_apart(ros):
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from std_srvs.srv import Trigger

    defaults, plan = sitl_plan(N)
    d_safe, altitude = float(defaults['d_safe']), float(defaults['altitude'])
    radius = plan.radius
    assert d_safe > float(defaults['spawn_spacing'])  # the case of the issue: spawned inside
    bridges, fakes = start_graph(ros, plan)

    observer = Node('observer')
    ros.add_node(observer)
    odoms = {}
    for name in plan.names:
        observer.create_subscription(Odometry, f'/{name}/odom',
                                     lambda msg, name=name: odoms.__setitem__(name, msg), 10)
    engage = [observer.create_client(Trigger, f'{bridge.get_fully_qualified_name()}/engage')
              for bridge in bridges]

    separation = Separation(d_safe, N)

    def observe():
        separation.observe(true_positions_enu(fakes))

    assert spin_until(ros, lambda: len(odoms) == N and all(c.service_is_ready() for c in engage),
                      timeout=DEADLINE, each=observe), 'odometry or engage services missing'
    start = true_positions_enu(fakes)
    assert np.allclose(start, list(plan.px4_origins), atol=1e-9)  # on the ground
    assert separation.first[(0, 1)] == pytest.approx(1.0)
    assert separation.first[(1, 2)] == pytest.approx(1.0)
    assert separation.first[(0, 2)] == pytest.approx(2.0)

    engaged_at = time.monotonic()
    futures = [client.call_async(Trigger.Request()) for client in engage]
    assert spin_until(ros, lambda: all(f.done() for f in futures), timeout=DEADLINE,
                      each=observe)
    for name, future in zip(plan.names, futures):
        assert future.result().success, f'{name}: {future.result().message}'

    def odometry_enu():
        return np.array([[getattr(odoms[name].pose.pose.position, c) for c in 'xyz']
                         for name in plan.names])

    state = {}

    def ring_formed():
        observe()
        p = odometry_enu()
        metrics = compute_metrics(p, np.zeros_like(p), np.zeros(3), np.zeros(3), radius)
        state.update(metrics=metrics, positions=p)
        return (metrics.E_gap < RING_E_GAP
                and np.all(np.abs(p[:, 2] - altitude) < ALTITUDE_TOLERANCE))

    formed = spin_until(ros, ring_formed, timeout=DEADLINE, each=observe)
    settle = time.monotonic() - engaged_at
    p, metrics = state['positions'], state['metrics']

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
