"""
The tests' one way to drive real rclpy nodes.

``Harness`` owns /clock on a simulated clock, records topics, publishes inputs and runs
callbacks until the graph is idle (no sleeps between steps). ``spin_until``/``spin_for`` spin
an executor on wall time, for graphs that are not on a simulated clock (processes, DDS
discovery, an autopilot stand-in).
"""
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import qos_check_compatible, QoSCompatibility
from rosgraph_msgs.msg import Clock

from soliton_encirclement_ros.sim.lockstep import LockStep
from support.waits import DEADLINE, wait_for

SIM = [Parameter('use_sim_time', value=True)]


def spin_until(executor, condition, timeout=DEADLINE, each=None, period=0.02) -> bool:
    """
    Spin until ``condition()`` holds (True) or ``timeout`` s pass (False); ``each()`` a turn.

    The default deadline is generous (a loaded machine is slow): only a failing test waits it.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        if each is not None:
            each()
        executor.spin_once(timeout_sec=period)
    return True


def default_context_executor():
    """
    Yield a SingleThreadedExecutor on rclpy's default context; then stop it and its nodes.

    The PX4 node tests' ``ros`` fixture (``ros = pytest.fixture(default_context_executor)``).
    """
    rclpy.init()
    executor = SingleThreadedExecutor()
    yield executor
    executor.shutdown()
    for node in list(executor.get_nodes()):
        node.destroy_node()
    rclpy.try_shutdown()


def spin_for(executor, seconds, each=None, period=0.02) -> None:
    """Spin for ``seconds`` of wall time, calling ``each()`` every turn."""
    spin_until(executor, lambda: False, seconds, each, period)


class Harness:
    """
    A driver node that owns the simulated clock, records topics and publishes test inputs.

    The nodes are stepped by swarm_sim's own lock-step core (``sim.lockstep.LockStep``):
    ``advance`` sets every clock and runs until every due timer has fired and every message
    published in the graph has been delivered.
    """

    def __init__(self, *nodes):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.nodes = [factory(self.context) for factory in nodes]
        self.driver = Node('driver', context=self.context, parameter_overrides=SIM)
        self.clock = self.driver.create_publisher(Clock, '/clock', 10)  # for tools outside
        self.executor = SingleThreadedExecutor(context=self.context)
        for node in [self.driver, *self.nodes]:
            self.executor.add_node(node)
        self.lockstep = LockStep(self.executor, [self.driver, *self.nodes])
        self.received = {}

    @property
    def now_ns(self) -> int:
        return self.lockstep.now_ns

    def record(self, msg_type, topic):
        self.received[topic] = []
        self.driver.create_subscription(msg_type, topic, self.received[topic].append, 100)
        self.lockstep.instrument()

    def publisher(self, msg_type, topic):
        publisher = self.driver.create_publisher(msg_type, topic, 100)
        self.lockstep.instrument()
        return publisher

    def settle(self, seconds=0.5):
        """
        Wait until DDS discovery has matched the graph both ways, then spin ``seconds``.

        Every in-graph publisher must see each in-graph subscription of its topic with a
        compatible QoS, and each such subscription the publisher (a pair made incompatible on
        purpose never matches and is not waited for). The deadline is generous: on a loaded
        machine discovery is slow, and a test that goes on before it ends loses messages.
        """
        self.lockstep.instrument()
        wait_for(self._matched, 'DDS discovery to match the graph both ways')
        spin_for(self.executor, seconds)

    def _matched(self) -> bool:
        nodes = [self.driver, *self.nodes]
        publishers = [p for node in nodes for p in node.publishers]
        subscriptions = [s for node in nodes for s in node.subscriptions]
        for pub in publishers:
            peers = [s for s in subscriptions if s.topic_name == pub.topic_name
                     and _compatible(pub.qos_profile, s.qos_profile)]
            if pub.get_subscription_count() < len(peers):
                return False
        return all(
            s.get_publisher_count() >= sum(1 for p in publishers if p.topic_name == s.topic_name
                                           and _compatible(p.qos_profile, s.qos_profile))
            for s in subscriptions)

    def drain(self):
        """Run callbacks until every message published in the graph has been delivered."""
        self.lockstep.drain()

    def advance(self, seconds, step=0.01, before_step=None):
        for _ in range(round(seconds / step)):
            now_ns = self.now_ns + round(step * 1e9)
            if before_step:
                before_step(now_ns * 1e-9)
            self.lockstep.set_time(now_ns)
            self.lockstep.drain()

    def close(self):
        for node in [self.driver, *self.nodes]:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)


def _compatible(offered, requested) -> bool:
    return qos_check_compatible(offered, requested)[0] == QoSCompatibility.OK


def target_node_harness(**parameters) -> Harness:
    """Return a Harness around a simulated-time ``/target`` TargetNode with ``parameters``."""
    from soliton_encirclement_ros.nodes.target_node import TargetNode
    return _node_harness(TargetNode, '/target', parameters)


def agent_node_harness(namespace: str = '/uav1', **parameters) -> Harness:
    """Return a Harness around a simulated-time AgentNode in ``namespace`` with ``parameters``."""
    from soliton_encirclement_ros.nodes.agent_node import AgentNode
    return _node_harness(AgentNode, namespace, parameters)


def _node_harness(node_class, namespace: str, parameters) -> Harness:
    overrides = SIM + [Parameter(name, value=value) for name, value in parameters.items()]
    return Harness(lambda ctx: node_class(context=ctx, namespace=namespace,
                                          parameter_overrides=overrides))
