"""
A host clock off by OFFSET seconds, for a node run with ``use_sim_time``.

Publishes wall time plus OFFSET as rosgraph_msgs/Clock on TOPIC at 200 Hz.

    python skewed_clock.py OFFSET TOPIC

A companion computer whose system clock is off: its node runs on this clock (``use_sim_time``
with ``/clock`` remapped to TOPIC), so its stamps are off by OFFSET from every other host's.
"""
import signal
import sys
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from rclpy.time import Time
from rosgraph_msgs.msg import Clock

PERIOD = 0.005


def main() -> None:
    offset, topic = float(sys.argv[1]), sys.argv[2]
    stop = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.append(True))
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = Node('skewed_clock')
    publisher = node.create_publisher(Clock, topic, 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    print(f'publishing wall time {offset:+g} s on {topic}', flush=True)
    while not stop:
        publisher.publish(Clock(clock=Time(nanoseconds=int((time.time() + offset) * 1e9))
                                .to_msg()))
        executor.spin_once(timeout_sec=PERIOD)
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == '__main__':
    main()
