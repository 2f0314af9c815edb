"""
The tests' one way to drive real rclpy nodes.

``Harness`` owns /clock on a simulated clock, records topics, publishes inputs and runs
callbacks until the graph is idle (no sleeps between steps). ``spin_until``/``spin_for`` spin
an executor on wall time, for graphs that are not on a simulated clock (processes, DDS
discovery, an autopilot stand-in).
"""
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor, TimeoutException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.time import Time
from rosgraph_msgs.msg import Clock

SIM = [Parameter('use_sim_time', value=True)]


def spin_until(executor, condition, timeout=10.0, each=None, period=0.02) -> bool:
    """Spin until ``condition()`` holds (True) or ``timeout`` s pass (False); ``each()`` a turn."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        if each is not None:
            each()
        executor.spin_once(timeout_sec=period)
    return True


def spin_for(executor, seconds, each=None, period=0.02) -> None:
    """Spin for ``seconds`` of wall time, calling ``each()`` every turn."""
    spin_until(executor, lambda: False, seconds, each, period)


class Harness:
    """A driver node that owns /clock, records topics and publishes test inputs."""

    def __init__(self, *nodes):
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.nodes = [factory(self.context) for factory in nodes]
        self.driver = Node('driver', context=self.context, parameter_overrides=SIM)
        self.clock = self.driver.create_publisher(Clock, '/clock', 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        for node in [self.driver, *self.nodes]:
            self.executor.add_node(node)
        self.received = {}
        self.now_ns = 0

    def record(self, msg_type, topic):
        self.received[topic] = []
        self.driver.create_subscription(msg_type, topic, self.received[topic].append, 100)

    def publisher(self, msg_type, topic):
        return self.driver.create_publisher(msg_type, topic, 100)

    def settle(self, seconds=0.5):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def drain(self):
        """Run callbacks until none is ready (DDS delivers synchronously within a process)."""
        while True:
            ran = 0
            while True:  # a zero-timeout wait ends after each batch of ready entities
                try:
                    handler, _, _ = self.executor.wait_for_ready_callbacks(timeout_sec=0.0)
                except TimeoutException:
                    break
                handler()
                ran += 1
            if not ran:
                return

    def advance(self, seconds, step=0.01, before_step=None):
        for _ in range(round(seconds / step)):
            self.now_ns += round(step * 1e9)
            if before_step:
                before_step(self.now_ns * 1e-9)
            self.clock.publish(Clock(clock=Time(nanoseconds=self.now_ns).to_msg()))
            self.drain()

    def close(self):
        for node in [self.driver, *self.nodes]:
            node.destroy_node()
        rclpy.try_shutdown(context=self.context)


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
