"""
A node's health for people and for ROS tools: ``~/status`` and ``/diagnostics``.

Each status goes out twice: as a ``diagnostic_msgs/DiagnosticStatus`` on the node's ``~/status``
and as a one-status ``DiagnosticArray`` on ``/diagnostics``, stamped with the node's clock, as
``diagnostic_updater`` does, so ``rqt_robot_monitor`` and ``diagnostic_aggregator`` show every
agent and bridge. Callers publish on change and at 1 Hz, never per control tick: a message costs
rclpy 100-200 us, and N agents at 1 Hz are N messages a second.
"""
from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.node import Node

from soliton_encirclement_ros.interface import AGENT_STATUS_TOPIC, DIAGNOSTICS_TOPIC

DIAGNOSTICS_DEPTH = 10


class StatusPublisher:
    """Publishes one node's DiagnosticStatus on ``~/status`` and ``/diagnostics``."""

    def __init__(self, node: Node) -> None:
        self._node = node
        self._status_pub = node.create_publisher(DiagnosticStatus, AGENT_STATUS_TOPIC, 10)
        self._diagnostics_pub = node.create_publisher(DiagnosticArray, DIAGNOSTICS_TOPIC,
                                                      DIAGNOSTICS_DEPTH)

    def publish(self, status: DiagnosticStatus) -> None:
        self._status_pub.publish(status)
        array = DiagnosticArray(status=[status])
        array.header.stamp = self._node.get_clock().now().to_msg()
        self._diagnostics_pub.publish(array)
