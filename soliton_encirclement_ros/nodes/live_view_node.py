"""
``live_view``: serve the swarm's topics to Foxglove from a live graph (``ros2 launch``, flights).

A Foxglove WebSocket server (foxglove-sdk, the ``live`` extra) in this node relays odometry, the
swarm and target states, the metrics, the markers, every status and ``/diagnostics`` as received;
open ``ws://HOST:PORT`` in Foxglove and load config/foxglove_layout.json. With ``use_sim_time``
the messages' log times and the server's time are sim time. The fleet's ``std_srvs/srv/Trigger``
services (``services_regex``) are offered to Foxglove's Service Call panel: the read-only check
always, those that move vehicles (engage, land, hold) only with ``commanding:=true`` and a
secret token (``command_token_file``, or ``$SOLITON_LIVE_VIEW_TOKEN``) that each call presents
(``live.authority``).

    ros2 run soliton_encirclement_ros live_view --ros-args -p port:=8765 -p use_sim_time:=true
"""
from __future__ import annotations

from dataclasses import dataclass

from rclpy.clock import Clock
from rclpy.node import Node

from ros_support.ros_parameters import declare, specs_of
from ros_support.settings import check_fields, setting
from ros_support.spin import spin_node
from ros_support.validation import from_mapping, regular_expression
from soliton_encirclement_ros.live.authority import (
    load_token, MIN_TOKEN_LENGTH, TOKEN_ENV, TOKEN_FIELD)
from soliton_encirclement_ros.live.relay import (
    DEFAULT_HOST, DEFAULT_LIVE_TOPICS, DEFAULT_PORT, DEFAULT_SERVICES, FoxgloveRelay)

TIME_PERIOD = 0.05  # s (wall) between broadcasts of the clock as the server's time


@dataclass(frozen=True)
class LiveViewSettings:
    """live_view's parameters."""

    port: int = setting(DEFAULT_PORT, 'TCP port of the Foxglove WebSocket server (0: any free '
                        'port, logged)', low=0, high=65535, read_only=True)
    host: str = setting(DEFAULT_HOST, "address to bind: '127.0.0.1' this machine only, "
                        "'0.0.0.0' every interface (anyone on the network can watch; only a "
                        'client with the token can command)', read_only=True)
    topics_regex: str = setting(DEFAULT_LIVE_TOPICS, 'serve topics whose name matches this '
                                'regular expression (re.search)', read_only=True)
    services_regex: str = setting(DEFAULT_SERVICES, 'offer the std_srvs/srv/Trigger services '
                                  'whose name matches this regular expression (re.search) to '
                                  "Foxglove's Service Call panel ('': none)", read_only=True)
    commanding: bool = setting(False, 'offer the services that move vehicles (engage, land, '
                               'hold) to the clients whose request carries the token, '
                               f'{{"{TOKEN_FIELD}": "..."}}; refused without a token',
                               read_only=True)
    command_token_file: str = setting('', 'file holding the commanding token (at least '
                                      f"{MIN_TOKEN_LENGTH} characters); '': ${TOKEN_ENV}",
                                      read_only=True)
    discovery_period: float = setting(1.0, 'time between topic and service discoveries (wall '
                                      'clock)', 's', 0.05, 60.0, read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)
        regular_expression('topics_regex', self.topics_regex)
        regular_expression('services_regex', self.services_regex)


PARAMETERS = tuple(specs_of(LiveViewSettings))  # everything live_view declares


class LiveViewNode(Node):
    """Owns a :class:`FoxgloveRelay`; re-discovers topics and services every period."""

    def __init__(self, **kwargs) -> None:
        super().__init__('live_view', **kwargs)
        settings = from_mapping(LiveViewSettings, declare(self, PARAMETERS))
        token = load_token(settings.command_token_file) if settings.commanding else None
        self.relay = FoxgloveRelay(self, settings.port, settings.host, settings.topics_regex,
                                   settings.services_regex, command_token=token)
        self.relay.discover()
        wall = Clock()  # discovery and the time broadcast must not wait for /clock
        self.create_timer(settings.discovery_period, self.relay.discover, clock=wall)
        self.create_timer(TIME_PERIOD, self.relay.tick, clock=wall)
        self.get_logger().info(
            f'live view on {self.relay.url}: in Foxglove, Open connection > Foxglove WebSocket '
            '(layout config/foxglove_layout.json); commanding '
            + ('on: the services that move vehicles need the token' if token is not None
               else 'off: only the read-only services are offered'))

    def destroy_node(self):
        relay = getattr(self, 'relay', None)  # None: refused before it started
        if relay is not None:
            relay.close()
        return super().destroy_node()


def main(args=None) -> None:
    spin_node(LiveViewNode, args)


if __name__ == '__main__':
    main()
