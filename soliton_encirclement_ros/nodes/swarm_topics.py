"""
The swarm topics as every node opens them: QoS from ``swarm_reliability``, loud mismatches.

A best_effort publisher never reaches a reliable subscriber, and DDS says nothing about it. A
subscription made here logs one warning per incompatible publisher it discovers (rclpy's
incompatible-QoS event), naming the publisher's node and offered reliability from the graph.
"""
from __future__ import annotations

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

from soliton_encirclement_ros.interface import RELIABLE, swarm_qos

# ``vehicle_failure``: reliable and latched, so an agent that starts late hears the last word.
VEHICLE_FAILURE_QOS = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)


def create_swarm_publisher(node: Node, msg_type, topic: str, reliability: str):
    return node.create_publisher(msg_type, topic, swarm_qos(reliability, topic))


def create_swarm_subscription(node: Node, msg_type, topic: str, callback, reliability: str):
    """Return a subscription with the swarm QoS that warns about publishers it can never hear."""
    def on_incompatible(event) -> None:
        offered = [f'{info.node_namespace.rstrip("/")}/{info.node_name} '
                   f'({_reliability_name(info.qos_profile.reliability)})'
                   for info in node.get_publishers_info_by_topic(topic)
                   if info.qos_profile.reliability != ReliabilityPolicy.RELIABLE
                   or reliability != RELIABLE]
        node.get_logger().warning(
            f'{topic}: a publisher offers QoS this {reliability} subscription cannot receive '
            f'(incompatible policy {event.last_policy_kind.name}); publishers: '
            f'{", ".join(offered) or "unknown"}. Set swarm_reliability to the same value on '
            'every host.')

    return node.create_subscription(
        msg_type, topic, callback, swarm_qos(reliability, topic),
        event_callbacks=SubscriptionEventCallbacks(incompatible_qos=on_incompatible))


def _reliability_name(policy) -> str:
    return {ReliabilityPolicy.RELIABLE: 'reliable',
            ReliabilityPolicy.BEST_EFFORT: 'best_effort'}.get(policy, str(policy))
