"""A node in its own rclpy context (its own DDS participant), spun by hand from a test."""
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node


class Outsider:
    """``node`` listens from outside a graph; :meth:`spin` handles what arrived so far."""

    def __init__(self, name: str = 'outsider'):
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = Node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)

    def spin(self, turns: int = 50) -> None:
        """Run up to ``turns`` executor turns without waiting; returns None (for ``or``)."""
        for _ in range(turns):
            self.executor.spin_once(timeout_sec=0.0)

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
