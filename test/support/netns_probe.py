"""
A listener run inside an emulated host (network namespace): prints one JSON line per message.

    python netns_probe.py TOPIC:TYPE [TOPIC:TYPE ...]

TYPE is one of twist, odom, float, status, diagnostics (each status: name, level, message and
its values), log (/rosout: node name, level, text). Each line: {"topic", "t" (wall time, s),
"v"}.
"""
import json
import signal
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Twist
from nav_msgs.msg import Odometry
from rcl_interfaces.msg import Log
import rclpy
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Float64

TYPES = {
    'twist': (Twist, lambda m: [m.linear.x, m.linear.y, m.linear.z]),
    'odom': (Odometry, lambda m: [m.pose.pose.position.x, m.pose.pose.position.y]),
    'float': (Float64, lambda m: m.data),
    'status': (DiagnosticStatus, lambda m: m.message),
    'diagnostics': (DiagnosticArray, lambda m: [
        {'name': s.name, 'level': int.from_bytes(s.level, 'little') if isinstance(s.level, bytes)
         else int(s.level), 'message': s.message, 'values': {v.key: v.value for v in s.values}}
        for s in m.status]),
    'log': (Log, lambda m: {'name': m.name, 'level': int(m.level), 'text': m.msg}),
}


def main() -> None:
    stop = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.append(True))
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node('netns_probe')
    qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.BEST_EFFORT)  # matches any writer
    for spec in sys.argv[1:]:
        topic, kind = spec.rsplit(':', 1)
        msg_type, read = TYPES[kind]

        def on_message(msg, topic=topic, read=read):
            print(json.dumps({'topic': topic, 't': time.time(), 'v': read(msg)}), flush=True)
        node.create_subscription(msg_type, topic, on_message, qos)
    print(json.dumps({'topic': 'ready', 't': time.time(), 'v': None}), flush=True)
    while not stop:
        rclpy.spin_once(node, timeout_sec=0.1)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
