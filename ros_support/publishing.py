"""
Publish from a simulator node without dying on a sample the middleware refuses.

Fast DDS's ``write()`` can refuse a sample: a RELIABLE writer whose history is full of samples
it could not yet send or have acknowledged (a reader that stopped answering, a starved host)
waits ``max_blocking_time`` and gives up, and rclpy raises ``RCLError: cannot publish data``
(ros2/rmw_fastrtps#313, ros2/ros2#714). A lost sample is something every subscriber here already
tolerates (each input has a freshness limit); a simulator node that dies of it takes every
vehicle's odometry or the clock with it. So a refused sample is dropped, the node says so once
per topic with the middleware's reason, and the drops are counted per topic (``dropped``).
"""
from __future__ import annotations

from collections import Counter

from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

# rclpy's exception for an rcl call that failed; rcl_publish raises it when rmw refuses a sample.
RCLError = _rclpy.RCLError


class Publishing:
    """
    ``publish(publisher, msg)``: publish, or drop a sample the middleware refuses (warned once).

    ``dropped`` counts the refused samples per topic.
    """

    def __init__(self, logger) -> None:
        self._logger = logger
        self.dropped: Counter[str] = Counter()

    def __call__(self, publisher, msg) -> bool:
        """Return True if ``msg`` went to the middleware, False if it was refused and dropped."""
        try:
            publisher.publish(msg)
        except RCLError as error:
            topic = publisher.topic_name
            if not self.dropped[topic]:
                reason = str(error).split(', at ')[0]
                self._logger.warning(
                    f'{topic}: the middleware refused a sample ({reason}); dropping refused '
                    'samples and publishing the next ones (said once per topic)')
            self.dropped[topic] += 1
            return False
        return True
