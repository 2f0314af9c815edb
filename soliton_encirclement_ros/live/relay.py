"""
Relay a live ROS graph to Foxglove: serialized messages in, the SDK's WebSocket server out.

Topics are discovered like the recorder's (``re.search`` on the name, subscription QoS adapted
to the publishers) and subscribed with ``raw=True``: no deserialization, each message goes to
a ``foxglove.Channel`` as CDR with its ``ros2msg`` definition (the rosbags Kilted typestore's, as
in our bags), so Foxglove decodes it as it decodes a bag. The log time of a message is the
relaying node's clock at receipt: sim time under ``use_sim_time``, which is also broadcast as
the server's time (Foxglove's "Time" capability), so the view follows the simulation.

The server speaks the SDK's subprotocol ``foxglove.sdk.v1``: clients that offer only the older
``foxglove.websocket.v1`` are refused (HTTP 400). Foxglove 2.x (app and web) connects; see
docs/live_view.md for Lichtblick.
"""
from __future__ import annotations

from functools import partial
import importlib
import re

from rclpy.node import Node

from ros_support.topics import follow_new
from soliton_encirclement_ros.interface import (
    AGENT_ODOM_TOPIC, AGENT_STATES_TOPIC, DIAGNOSTICS_TOPIC, MARKERS_TOPIC, METRICS_TOPIC_PREFIX,
    TARGET_STATE_TOPIC)
from soliton_encirclement_ros.recording.recorder import _adapted_qos, TYPESTORE

# Odometry (agents and target), the swarm and target states, the metrics, the markers, every
# node's status and /diagnostics, and /tf: what the layout in config/ shows. Not /clock (the
# server's time says it) nor cmd_vel (the commands are in the states' velocities).
DEFAULT_LIVE_TOPICS = '^(' + '|'.join([
    f'/[^/]+/{AGENT_ODOM_TOPIC}', re.escape(AGENT_STATES_TOPIC), re.escape(TARGET_STATE_TOPIC),
    re.escape(METRICS_TOPIC_PREFIX) + '.+', re.escape(MARKERS_TOPIC), '/.+/status',
    re.escape(DIAGNOSTICS_TOPIC), '/tf', '/tf_static']) + ')$'
DEFAULT_PORT = 8765
DEFAULT_HOST = '127.0.0.1'  # this machine only, unless asked (--foxglove-host)
TIME_BROADCAST_NS = 50_000_000  # the server's time follows the clock in 0.05 s steps
SERVER_NAME = 'soliton_encirclement_ros'


class LiveViewUnavailable(ValueError):
    """foxglove-sdk is not installed, or the server cannot start; one line for the user."""


def import_foxglove():
    """Return the ``foxglove`` module, or raise :class:`LiveViewUnavailable` saying what to do."""
    try:
        return importlib.import_module('foxglove')
    except ImportError:
        raise LiveViewUnavailable(
            'the live view needs foxglove-sdk: pip install foxglove-sdk (or the live extra: '
            "pip install -e '.[live]')") from None


class FoxgloveRelay:
    """
    Serve ``node``'s graph on a Foxglove WebSocket server at ``host:port`` (0: a free port).

    Call :meth:`discover` periodically (new topics), :meth:`tick` as the clock moves (the
    server's time) and :meth:`close` at the end (idempotent).
    """

    def __init__(self, node: Node, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST,
                 topics_regex: str = DEFAULT_LIVE_TOPICS):
        try:
            self._pattern = re.compile(topics_regex)
        except re.error as err:
            raise ValueError(f'topics_regex {topics_regex!r} is not a regular expression: {err}')
        foxglove = import_foxglove()
        self._foxglove = foxglove
        self._node = node
        self._context = foxglove.Context()  # our channels only, not the SDK's global ones
        try:
            self._server = foxglove.start_server(
                name=SERVER_NAME, host=host, port=port, context=self._context,
                capabilities=[foxglove.Capability.Time])
        except Exception as err:  # noqa: BLE001 - the SDK raises its own types: one line
            raise LiveViewUnavailable(f'cannot start the Foxglove server on {host}:{port}: '
                                      f'{err}') from None
        self.host, self.port = host, self._server.port
        self._channels = {}
        self._subscriptions = {}
        self._skipped: set[str] = set()
        self._last_time_ns = None
        self.message_count = 0

    @property
    def topics(self) -> list[str]:
        """Topics being served."""
        return sorted(self._subscriptions)

    @property
    def url(self) -> str:
        return f'ws://{self.host}:{self.port}'

    def discover(self) -> list[str]:
        """Serve matching topics not seen before; return the new ones."""
        return follow_new(self._node, self._pattern, set(self._subscriptions) | self._skipped,
                          self._serve)

    def tick(self) -> None:
        """Broadcast the node's clock as the server's time (at most every 0.05 s of it)."""
        now = self._node.get_clock().now().nanoseconds
        if self._last_time_ns is None or not 0 <= now - self._last_time_ns < TIME_BROADCAST_NS:
            self._last_time_ns = now
            if self._server is not None:
                self._server.broadcast_time(now)

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        for sub in self._subscriptions.values():
            self._node.destroy_subscription(sub)
        self._subscriptions.clear()
        server.stop()

    def _serve(self, topic: str, types: list[str], publishers) -> bool:
        if len(types) != 1 or types[0] not in TYPESTORE.types:
            self._skipped.add(topic)
            self._node.get_logger().warning(f'live view: not serving {topic} ({types}): '
                                            'one known message type is needed')
            return False
        msgtype = types[0]
        package, _, name = msgtype.split('/')
        try:  # e.g. tf2_msgs on a pip-only machine, heard from a ROS install on the network
            msg_class = getattr(importlib.import_module(f'{package}.msg'), name)
        except (ImportError, AttributeError):
            self._skipped.add(topic)
            self._node.get_logger().warning(f'live view: not serving {topic}: {package} is not '
                                            'installed here')
            return False
        msgdef, _ = TYPESTORE.generate_msgdef(msgtype, ros_version=2)
        schema = self._foxglove.Schema(name=msgtype, encoding='ros2msg',
                                       data=msgdef.encode())
        channel = self._foxglove.Channel(topic, schema=schema, message_encoding='cdr',
                                         context=self._context)
        self._channels[topic] = channel
        self._subscriptions[topic] = self._node.create_subscription(
            msg_class, topic, partial(self._on_message, channel),
            _adapted_qos([info.qos_profile for info in publishers]), raw=True)
        return True

    def _on_message(self, channel, data: bytes) -> None:
        self.message_count += 1
        if channel.has_sinks():  # a client subscribed to it
            channel.log(data, log_time=self._node.get_clock().now().nanoseconds)
