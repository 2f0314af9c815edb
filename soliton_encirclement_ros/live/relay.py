"""
Relay a live ROS graph to Foxglove: serialized messages in, the SDK's WebSocket server out.

Topics are discovered like the recorder's (``re.search`` on the name, subscription QoS adapted
to the publishers) and subscribed with ``raw=True``: no deserialization, each message goes to
a ``foxglove.Channel`` as CDR with its ``ros2msg`` definition (the rosbags Kilted typestore's, as
in our bags), so Foxglove decodes it as it decodes a bag. The log time of a message is the
relaying node's clock at receipt: sim time under ``use_sim_time``, which is also broadcast as
the server's time (Foxglove's "Time" capability), so the view follows the simulation.

Services of type ``std_srvs/srv/Trigger`` whose name matches ``services_regex`` (the fleet's
``/fleet/check``, ``/fleet/engage``, ``/fleet/land``, ``/fleet/hold``) are offered through
Foxglove's "Services" capability, JSON-encoded, so an operator presses them in Foxglove's
Service Call panel with no ROS install. Those that move vehicles (all but the read-only check,
``live.authority``) are offered only with a commanding token, and called only when the request
carries it (``{"token": "..."}``); a request that is not a JSON object is refused, whatever the
service, before anything is called (a ``serviceCallFailure``), and every call and refusal is
logged with the SDK's client id. The SDK calls the handler on a thread of its own, which calls
the ROS service (``call_async``; the node's executor, elsewhere, delivers the answer) and waits
for it, at most ``service_timeout``. The answer is ``{"success": bool, "message": str}``; a
service that is gone or too slow answers success false and one line saying which and why.

The server speaks the SDK's subprotocol ``foxglove.sdk.v1``: clients that offer only the older
``foxglove.websocket.v1`` are refused (HTTP 400). Foxglove 2.x (app and web) connects; see
docs/simulate/live-view.md for Lichtblick.
"""
from __future__ import annotations

from functools import partial
import importlib
import json
import re
import threading

from rclpy.node import Node

from ros_support.topics import follow_new
from soliton_encirclement_ros.interface import (
    AGENT_ODOM_TOPIC, AGENT_STATES_TOPIC, DIAGNOSTICS_TOPIC, MARKERS_TOPIC, METRICS_TOPIC_PREFIX,
    TARGET_STATE_TOPIC)
from soliton_encirclement_ros.live.authority import (
    CallRefused, check_request, COMMAND_REQUEST_SCHEMA, is_read_only, MIN_TOKEN_LENGTH,
    READ_ONLY_REQUEST_SCHEMA, REQUEST_ENCODING)
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
# The fleet's buttons (fleet_node): services offered to Foxglove; '' offers none.
DEFAULT_SERVICES = '^/fleet/(check|engage|land|hold)$'
SERVICE_TYPE = 'std_srvs/srv/Trigger'  # the only type offered: no request fields, one answer
SERVICE_TIMEOUT = 120.0  # s: an engage may wait for PX4 up to a minute
SERVICE_ENCODING = REQUEST_ENCODING
TRIGGER_RESPONSE_SCHEMA = {
    'type': 'object',
    'properties': {'success': {'type': 'boolean'}, 'message': {'type': 'string'}},
    'required': ['success', 'message']}
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

    Call :meth:`discover` periodically (new topics and services), :meth:`tick` as the clock
    moves (the server's time) and :meth:`close` at the end (idempotent). ``node`` must be spun
    by an executor meanwhile (another thread, or the caller's loop): the answers of the services
    offered arrive through it. ``command_token`` (``live.authority.load_token``): offer the
    services that move vehicles to the clients that present it; None (the default) offers only
    the read-only ones.
    """

    def __init__(self, node: Node, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST,
                 topics_regex: str = DEFAULT_LIVE_TOPICS,
                 services_regex: str = DEFAULT_SERVICES,
                 service_timeout: float = SERVICE_TIMEOUT,
                 command_token: str | None = None):
        try:
            self._pattern = re.compile(topics_regex)
        except re.error as err:
            raise ValueError(f'topics_regex {topics_regex!r} is not a regular expression: {err}')
        try:
            self._services_pattern = re.compile(services_regex) if services_regex else None
        except re.error as err:
            raise ValueError(f'services_regex {services_regex!r} is not a regular expression: '
                             f'{err}')
        if not service_timeout > 0:
            raise ValueError(f'service_timeout must be > 0 s, got {service_timeout!r}')
        self._service_timeout = float(service_timeout)
        if command_token is not None and len(command_token) < MIN_TOKEN_LENGTH:
            raise ValueError(f'the commanding token must be at least {MIN_TOKEN_LENGTH} '
                             f'characters, got {len(command_token)}')
        self._token = command_token  # never logged
        foxglove = import_foxglove()
        self._foxglove = foxglove
        self._node = node
        self._context = foxglove.Context()  # our channels only, not the SDK's global ones
        capabilities = [foxglove.Capability.Time]
        if self._services_pattern is not None:
            capabilities.append(foxglove.Capability.Services)
        try:
            self._server = foxglove.start_server(
                name=SERVER_NAME, host=host, port=port, context=self._context,
                capabilities=capabilities, supported_encodings=[SERVICE_ENCODING])
        except Exception as err:  # noqa: BLE001 - the SDK raises its own types: one line
            raise LiveViewUnavailable(f'cannot start the Foxglove server on {host}:{port}: '
                                      f'{err}') from None
        self.host, self.port = host, self._server.port
        self._channels = {}
        self._subscriptions = {}
        self._skipped: set[str] = set()
        self._clients = {}  # ROS service name -> rclpy client, one per service offered
        self._skipped_services: set[str] = set()
        self._waiting: set[threading.Event] = set()  # calls in progress, released by close()
        self._lock = threading.Lock()
        self._closing = False
        self._last_time_ns = None
        self.message_count = 0

    @property
    def topics(self) -> list[str]:
        """Topics being served."""
        return sorted(self._subscriptions)

    @property
    def services(self) -> list[str]:
        """ROS services offered to Foxglove's clients."""
        return sorted(self._clients)

    @property
    def url(self) -> str:
        return f'ws://{self.host}:{self.port}'

    def discover(self) -> list[str]:
        """Serve matching topics and offer matching services not seen before; the new topics."""
        self.discover_services()
        return follow_new(self._node, self._pattern, set(self._subscriptions) | self._skipped,
                          self._serve)

    def discover_services(self) -> list[str]:
        """Offer the matching ``std_srvs/srv/Trigger`` services not seen before; the new ones."""
        if self._services_pattern is None or self._server is None:
            return []
        offered = []
        for name, types in self._node.get_service_names_and_types():
            if (name in self._clients or name in self._skipped_services
                    or not self._services_pattern.search(name)
                    or not self._node.count_services(name)):  # a client's name: no server yet
                continue
            if types != [SERVICE_TYPE]:
                self._skipped_services.add(name)
                self._node.get_logger().warning(f'live view: not offering service {name} '
                                                f'({types}): only {SERVICE_TYPE} is')
                continue
            if self._token is None and not is_read_only(name):
                self._skipped_services.add(name)
                self._node.get_logger().info(
                    f'live view: not offering {name}: it commands the vehicles and commanding '
                    'is off (live_view: commanding:=true with a token)')
                continue
            if self._offer(name):
                offered.append(name)
        return offered

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
        with self._lock:  # a call still waiting answers now (closing), not at its timeout
            self._closing = True
            waiting = list(self._waiting)
        for event in waiting:
            event.set()
        server.stop()
        for client in self._clients.values():
            self._node.destroy_client(client)
        self._clients.clear()

    def _offer(self, name: str) -> bool:
        from std_srvs.srv import Trigger
        foxglove = self._foxglove

        def message_schema(kind: str, schema: dict):
            return foxglove.MessageSchema(encoding=SERVICE_ENCODING, schema=foxglove.Schema(
                name=f'{SERVICE_TYPE}_{kind}', encoding='jsonschema',
                data=json.dumps(schema).encode()))

        client = self._node.create_client(Trigger, name)
        request_schema = READ_ONLY_REQUEST_SCHEMA if is_read_only(name) else COMMAND_REQUEST_SCHEMA
        service = foxglove.Service(
            name=name, schema=foxglove.ServiceSchema(
                name=SERVICE_TYPE, request=message_schema('Request', request_schema),
                response=message_schema('Response', TRIGGER_RESPONSE_SCHEMA)),
            handler=partial(self._on_service_call, name, client))
        try:
            self._server.add_services([service])
        except Exception as err:  # noqa: BLE001 - the SDK's RuntimeError: log, do not stop
            self._node.destroy_client(client)
            self._skipped_services.add(name)
            self._node.get_logger().warning(f'live view: cannot offer service {name}: {err}')
            return False
        self._clients[name] = client
        return True

    def _on_service_call(self, name: str, client, request) -> bytes:
        """
        Foxglove's call of ``name`` (the SDK's thread): the ROS answer as JSON.

        A request ``live.authority.check_request`` refuses raises :class:`CallRefused`, which
        the SDK answers with a ``serviceCallFailure`` carrying its line; nothing is called.
        """
        log = self._node.get_logger()
        caller = f'Foxglove client {request.client_id}'  # the SDK gives no address
        try:
            check_request(name, request.encoding, request.payload, self._token)
        except CallRefused as refused:
            log.warning(f'live view: {caller}: {refused}')
            raise
        log.info(f'live view: {caller} calls {name}')
        try:
            success, message = self._call(name, client)
        except Exception as err:  # noqa: BLE001 - the SDK would only say "failed"
            success, message = False, f'{name}: the call failed: {type(err).__name__}: {err}'
        first = message.splitlines()[0] if message else ''
        log.info(f'live view: {name} for {caller}: {"success" if success else "FAILED"}: '
                 f'{first[:200]}')
        return json.dumps({'success': success, 'message': message}).encode()

    def _call(self, name: str, client) -> tuple[bool, str]:
        from std_srvs.srv import Trigger
        if not client.service_is_ready():
            return False, f'{name} is not available: no server of it in the ROS graph'
        answered = threading.Event()
        with self._lock:
            if self._closing:
                return False, f'{name}: not called, the live view is closing'
            self._waiting.add(answered)
        try:
            future = client.call_async(Trigger.Request())
            future.add_done_callback(lambda _: answered.set())
            answered.wait(self._service_timeout)
        finally:
            with self._lock:
                self._waiting.discard(answered)
        if not future.done():
            client.remove_pending_request(future)
            future.cancel()
            if self._closing:
                return False, f'{name}: no answer, the live view is closing'
            return False, f'{name} did not answer within {self._service_timeout:g} s'
        if future.cancelled() or future.exception() is not None:
            return False, f'{name}: the call failed: {future.exception() or "cancelled"}'
        response = future.result()
        return bool(response.success), str(response.message)

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
