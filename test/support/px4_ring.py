"""
What the PX4 ring tests share: the SITL launch's plan, its graph on real rclpy, true positions.

``swarm_px4_sitl.launch.py``'s argument defaults are read from the launch file (``launch`` is
not on PyPI, so it is not imported); its nodes' parameters come from ``build_graph``. Each node
gets exactly the command line the launch would give it. A kinematic :class:`FakePx4` stands in
for PX4 SITL + Gazebo behind every bridge; ``mobility_node`` flies the simulated agents of a
mixed plan. Needs a built px4_msgs.
"""
import ast
import importlib.util
import itertools
import math
from pathlib import Path
import time

import numpy as np
import pymap3d
import pytest

from soliton_encirclement_ros.bringup.graph import build_graph, live_scenario, SwarmPlan
from soliton_encirclement_ros.core.metrics import SETTLE_THRESHOLDS

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / 'launch' / 'swarm_px4_sitl.launch.py'
PARAMS_FILE = ROOT / 'config' / 'px4_bridge.yaml'  # installed as the launch's params_file
HAVE_PX4_MSGS = importlib.util.find_spec('px4_msgs') is not None
# pytestmark of the modules that need px4_msgs: they skip cleanly without it, saying why.
needs_px4_msgs = pytest.mark.skipif(not HAVE_PX4_MSGS, reason=(
    'px4_msgs is not importable: build PX4/px4_msgs (matching the PX4 version) '
    'in a colcon workspace and source it'))
# A field day's shared origin (lat, lon, alt AMSL) and where four PX4s powered up and took
# their GPS reference (world ENU about FIELD), 3-9 m apart.
FIELD = (47.397742, 8.545594, 488.0)
SPAWNS = [(1.0, 1.5, 0.0), (6.0, 3.0, 0.5), (-4.0, 5.0, -0.3), (2.0, -6.0, 0.2)]


def launch_defaults():
    """Return the default of every literal argument of the SITL launch file (``ARGUMENTS``)."""
    tree = ast.parse(LAUNCH_FILE.read_text())
    for node in tree.body:
        if (isinstance(node, ast.Assign)
                and any(getattr(t, 'id', None) == 'ARGUMENTS' for t in node.targets)):
            defaults = {}
            for key, value in zip(node.value.keys, node.value.values):
                if key is None:
                    continue  # **LIVE_VIEW_ARGUMENTS: the live view's, not the graph's
                try:
                    defaults[ast.literal_eval(key)] = ast.literal_eval(value.elts[0])
                except ValueError:
                    pass  # params_file: a path into the install share (PARAMS_FILE here)
            return defaults
    raise AssertionError(f'no ARGUMENTS in {LAUNCH_FILE}')


def sitl_plan(n, simulated=(), target_motion=None):
    """
    Return the plan of ``swarm_px4_sitl.launch.py num_agents:=n simulated:=...``.

    The launch's defaults, except that without Gazebo there is no /clock: the wall clock.
    ``target_motion`` replaces the launch's (its ``target_motion:=`` argument).
    """
    d = launch_defaults()
    if target_motion is not None:
        d['target_motion'] = target_motion
    spacing = float(d['spawn_spacing'])
    scenario = live_scenario(agents=n, radius=float(d['radius']),
                             target_motion=d['target_motion'],
                             altitude_hold=float(d['altitude']),
                             controller={'d_safe': float(d['d_safe'])})
    # gz_multi_vehicle.sh: instance i at (0, i * spacing, 0), as the launch's empty `origins`.
    origins = tuple((0.0, (i + 1) * spacing, 0.0) for i in range(n))
    return d, SwarmPlan(scenario=scenario, mode='px4', px4_origins=origins,
                        swarm_reliability=d['swarm_reliability'], use_sim_time=False,
                        params_files=(str(PARAMS_FILE),), simulated=tuple(simulated))


def start_graph(ros, plan, spawns_enu=None, extra_args=None, only=None):
    """
    Start the plan's nodes but metrics_node, and one kinematic fake PX4 per bridge.

    ``only`` (a predicate on a node's full name) starts only those nodes (and the fakes of
    their bridges): one vehicle's companion in a process of its own, as on a field.

    Return {full node name: node}, with ``fake <px4_namespace>`` for the fakes. A plan with a
    ``geo_reference`` needs ``spawns_enu``, where each PX4 really starts (world ENU, in the
    bridges' order): its estimator's GPS reference is there, and the bridge is not told.
    ``extra_args`` ({full node name: [ros args]}) adds to a node's arguments (e.g. a clock).
    """
    from soliton_encirclement_ros.nodes.agent_node import AgentNode
    from soliton_encirclement_ros.nodes.target_node import TargetNode
    from soliton_encirclement_ros.px4.bridge_node import load_px4_msgs, Px4BridgeNode
    from support.fake_px4 import FakePx4
    from velocity_mobility_ros.nodes.mobility_node import MobilityNode

    px4_msgs = load_px4_msgs()
    classes = {'target_node': TargetNode, 'agent_node': AgentNode, 'mobility_node': MobilityNode,
               'px4_bridge_node': lambda **kw: Px4BridgeNode(px4_msgs, **kw)}
    nodes = {}
    spawns = iter(spawns_enu or ())
    for spec in build_graph(plan):
        if spec.executable == 'px4_bridge_node' and plan.geo_reference:
            spawn = next(spawns)  # taken in the bridges' order, started or not
        if spec.executable not in classes or (only is not None and not only(spec.full_name)):
            continue  # metrics_node: the tests compute the metrics from the odometry themselves
        node = classes[spec.executable](
            cli_args=spec.ros_args() + list((extra_args or {}).get(spec.full_name, ())))
        ros.add_node(node)
        nodes[spec.full_name] = node
        if spec.executable == 'px4_bridge_node':
            params = spec.parameters
            if not plan.geo_reference:
                spawn = params['origin_enu']
            ref_point = (pymap3d.enu2geodetic(*spawn, *plan.geo_reference) if plan.geo_reference
                         else None)
            fake = FakePx4(params['px4_namespace'], system_id=params['target_system'],
                           kinematic=True, node_name=f'fake_{params["px4_namespace"]}',
                           ref_point=ref_point)
            fake.origin_enu = np.array(spawn, dtype=float)
            ros.add_node(fake)
            nodes[f'fake {params["px4_namespace"]}'] = fake
    return nodes


def observe_graph(ros, plan, nodes):
    """
    Return (bridges, fakes, odometry, engage clients) of a graph that :func:`start_graph` made.

    ``odometry`` holds the latest Odometry of each of the plan's vehicles, by name, as an
    observer node of the test hears it, and the target's under ``TARGET``; the clients call
    each bridge's ``~/engage``.
    """
    from nav_msgs.msg import Odometry
    from rclpy.node import Node
    from soliton_encirclement_ros.interface import TARGET_ODOM_TOPIC
    from std_srvs.srv import Trigger

    bridges = [node for name, node in nodes.items() if name.endswith('/px4_bridge')]
    fakes = [node for name, node in nodes.items() if name.startswith('fake ')]
    observer = Node('observer')
    ros.add_node(observer)
    odoms = {}
    for name in plan.names:
        observer.create_subscription(Odometry, f'/{name}/odom',
                                     lambda msg, name=name: odoms.__setitem__(name, msg), 10)
    observer.create_subscription(Odometry, TARGET_ODOM_TOPIC,
                                 lambda msg: odoms.__setitem__(TARGET, msg), 10)
    engage = [observer.create_client(Trigger, f'{bridge.get_fully_qualified_name()}/engage')
              for bridge in bridges]
    return bridges, fakes, odoms, engage


TARGET = 'target'  # the target's odometry in observe_graph's dictionary


def ready(odoms, names, engage, bridges=()):
    """Every vehicle's odometry heard, every engage service up, every bridge has heard PX4."""
    return (all(name in odoms for name in names) and all(c.service_is_ready() for c in engage)
            and all(b._seq._status is not None for b in bridges))


def every(seconds, fn):
    """
    Return ``fn`` run at most once every ``seconds`` of wall time (else its last result).

    The checks a test runs each executor turn (metrics, separation) would otherwise cost more
    CPU than the graph they watch, and starve it on a loaded machine.
    """
    last = {'at': -math.inf, 'value': None}

    def throttled():
        now = time.monotonic()
        if now - last['at'] >= seconds:
            last['at'], last['value'] = now, fn()
        return last['value']
    return throttled


def true_position_enu(vehicle):
    """Return a vehicle's true position in the world ENU frame: a fake PX4's or a simulation's."""
    from soliton_encirclement_ros.px4.frames import ned_to_enu
    if hasattr(vehicle, 'true_position_ned'):  # a PX4 measures from its spawn origin, in NED
        return vehicle.origin_enu + ned_to_enu(vehicle.true_position_ned)
    return np.array(vehicle.state.position[0], dtype=float)  # mobility_node: world ENU


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


RING_E_GAP = SETTLE_THRESHOLDS['E_gap']  # the project's settle thresholds
RING_E_R = 2 * SETTLE_THRESHOLDS['E_r']  # radii within 2 %: PX4's own position control
ALTITUDE_TOLERANCE = 0.5  # m
DEADLINE = 120.0         # s of wall time; a healthy run needs a fraction of it
CHECK_PERIOD = 0.05      # s between two checks of the ring


def engage_and_form_ring(ros, engage, odoms, names, radius, altitude, observe):
    """
    Call every bridge's ``~/engage``, then spin until the odometry shows the ring at altitude.

    ``engage`` maps a vehicle name to its ``~/engage`` client; ``odoms`` holds the latest
    Odometry by name. Returns ``(formed, wall seconds from the engage, positions, metrics)``.
    """
    from soliton_encirclement_ros.core.metrics import compute_metrics
    from std_srvs.srv import Trigger
    from support.harness import spin_until

    engaged_at = time.monotonic()
    futures = {name: client.call_async(Trigger.Request()) for name, client in engage.items()}
    assert spin_until(ros, lambda: all(f.done() for f in futures.values()), timeout=DEADLINE,
                      each=observe)
    for name, future in futures.items():
        assert future.result().success, f'{name}: {future.result().message}'
    state = {}

    def ring_formed():
        observe()
        p = np.array([[getattr(odoms[name].pose.pose.position, c) for c in 'xyz']
                      for name in names])
        target = (np.array([getattr(odoms[TARGET].pose.pose.position, c) for c in 'xyz'])
                  if TARGET in odoms else np.zeros(3))  # the ring forms around the target
        metrics = compute_metrics(p, np.zeros_like(p), target, np.zeros(3), radius)
        state.update(metrics=metrics, positions=p)
        return (metrics.E_gap < RING_E_GAP and metrics.E_r < RING_E_R
                and np.all(np.abs(p[:, 2] - altitude) < ALTITUDE_TOLERANCE))

    formed = spin_until(ros, every(CHECK_PERIOD, ring_formed), timeout=DEADLINE, each=observe)
    return formed, time.monotonic() - engaged_at, state['positions'], state['metrics']
