"""
The live view offers the fleet's Trigger services to Foxglove (its "Services" capability).

A node in this process serves ``/fleet/check`` (a two-line table) and ``/fleet/land`` (answers
after 2 s); a :class:`FoxgloveRelay` on another node offers them, and the headless client
(``live.client``) calls them as Foxglove's Service Call panel does. A service of another type or
name is not offered; a service that disappears, or answers too late, answers success false
with one line naming it. The ``live_view`` node offers them too.
"""
import asyncio
from contextlib import contextmanager
import importlib.util
import json
import socket
import threading
import time

import pytest

from support.waits import DEADLINE, wait_for

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec('foxglove') and importlib.util.find_spec('websockets')),
    reason='the live extra (foxglove-sdk, websockets) is not installed')

CHECK_TABLE = 'uav1  ready  battery 98%\nuav2  ready  battery 97%'
LAND_DELAY = 2.0  # s: /fleet/land answers this late


@contextmanager
def spinning(*node_names: str):
    """(context, nodes) of a context of their own, spun by a MultiThreadedExecutor meanwhile."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    nodes = [rclpy.create_node(name, context=context) for name in node_names]
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    for node in nodes:
        executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield context, nodes
    finally:
        executor.shutdown()
        thread.join(DEADLINE)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def serve_fleet(node):
    """Serve /fleet/check, /fleet/land (late), /fleet/hold and two not to offer; the servers."""
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from std_srvs.srv import SetBool, Trigger

    def check(request, response):
        response.success, response.message = True, CHECK_TABLE
        return response

    def land(request, response):
        time.sleep(LAND_DELAY)  # the service's own behaviour (a slow answer), not a test wait
        response.success, response.message = True, 'landed: 2 of 2'
        return response

    def hold(request, response):
        response.success, response.message = True, 'holding: 2 of 2'
        return response

    def never(request, response):
        raise AssertionError('a service the live view must not offer was called')

    return {
        '/fleet/check': node.create_service(Trigger, '/fleet/check', check),
        '/fleet/land': node.create_service(Trigger, '/fleet/land', land,
                                           callback_group=MutuallyExclusiveCallbackGroup()),
        '/fleet/hold': node.create_service(Trigger, '/fleet/hold', hold),
        '/fleet/engage': node.create_service(SetBool, '/fleet/engage', never),  # not Trigger
        '/fleet/abort': node.create_service(Trigger, '/fleet/abort', never),  # not matched
    }


def served(node, names) -> bool:
    """Whether ``node`` sees a server of each of ``names`` in the graph."""
    return all(node.count_services(name) for name in names)


def discover_until_offered(relay, node, offered, seen=()) -> None:
    """Discover until ``offered`` are offered, once ``node`` sees ``seen`` in the graph too."""
    def ready():
        visible = served(node, seen)  # before discover: it has seen them
        relay.discover()
        return visible and set(relay.services) >= set(offered)
    wait_for(ready, f'services {sorted(offered)} offered (offered: {relay.services}, '
             f'graph: {sorted(node.get_service_names_and_types())})')


def call(relay, name: str) -> dict:
    from soliton_encirclement_ros.live.client import call_service
    return json.loads(asyncio.run(call_service(relay.url, name, seconds=DEADLINE)))


def test_the_fleet_services_are_offered_and_answer_through_foxglove():
    from soliton_encirclement_ros.live.client import advertised_services
    from soliton_encirclement_ros.live.relay import FoxgloveRelay
    with spinning('fleet', 'live_view') as (_, (fleet, view)):
        servers = serve_fleet(fleet)
        relay = FoxgloveRelay(view, port=0, host='127.0.0.1')
        try:
            offered = ['/fleet/check', '/fleet/hold', '/fleet/land']
            discover_until_offered(relay, view, set(offered), servers)
            assert relay.services == offered
            advertised = asyncio.run(advertised_services(relay.url, offered, DEADLINE))
            assert sorted(advertised) == offered
            check = advertised['/fleet/check']
            assert check['type'] == 'std_srvs/srv/Trigger'
            assert check['request']['encoding'] == 'json'
            assert check['request']['schemaName'] == 'std_srvs/srv/Trigger_Request'
            assert check['request']['schemaEncoding'] == 'jsonschema'
            assert json.loads(check['response']['schema'])['properties'] == {
                'success': {'type': 'boolean'}, 'message': {'type': 'string'}}

            assert call(relay, '/fleet/check') == {'success': True, 'message': CHECK_TABLE}
            assert call(relay, '/fleet/hold') == {'success': True, 'message': 'holding: 2 of 2'}
            started = time.monotonic()
            assert call(relay, '/fleet/land') == {'success': True, 'message': 'landed: 2 of 2'}
            assert time.monotonic() - started >= LAND_DELAY

            # The fleet node's land server goes away: the button answers, naming it.
            fleet.destroy_service(servers['/fleet/land'])
            wait_for(lambda: view.count_services('/fleet/land') == 0,
                     'the /fleet/land server gone from the graph')
            answer = call(relay, '/fleet/land')
            assert answer['success'] is False
            assert '/fleet/land' in answer['message'] and 'not available' in answer['message']
            assert '\n' not in answer['message']
            relay.discover()
            assert '/fleet/engage' not in relay.services  # still: its type is not Trigger
        finally:
            relay.close()
        relay.close()  # idempotent


def test_a_late_answer_times_out_and_an_empty_regex_offers_nothing():
    from soliton_encirclement_ros.live.client import advertised_services, receive
    from soliton_encirclement_ros.live.relay import FoxgloveRelay
    with spinning('fleet', 'live_view') as (_, (fleet, view)):
        servers = serve_fleet(fleet)
        hasty = FoxgloveRelay(view, port=0, service_timeout=0.5)
        silent = FoxgloveRelay(view, port=0, services_regex='')
        try:
            discover_until_offered(hasty, view, {'/fleet/land'}, servers)
            assert call(hasty, '/fleet/land') == {
                'success': False, 'message': '/fleet/land did not answer within 0.5 s'}
            assert call(hasty, '/fleet/check') == {'success': True, 'message': CHECK_TABLE}

            silent.discover()
            assert silent.services == []
            assert asyncio.run(advertised_services(silent.url, seconds=0.5)) == {}
            info = asyncio.run(receive(silent.url, DEADLINE, until=lambda r: r.server_info))
            assert info.server_info['capabilities'] == ['time']
        finally:
            hasty.close()
            silent.close()


def test_the_live_view_node_offers_the_fleet_services():
    """live_view as started (its EventsExecutor, its discovery timer): the buttons answer."""
    from rclpy.experimental import EventsExecutor
    from rclpy.parameter import Parameter

    from soliton_encirclement_ros.live.client import receive
    from soliton_encirclement_ros.nodes.live_view_node import LiveViewNode
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        port = probe.getsockname()[1]
    with spinning('fleet') as (context, (fleet,)):
        serve_fleet(fleet)
        view = LiveViewNode(context=context, parameter_overrides=[
            Parameter('port', value=port), Parameter('discovery_period', value=0.1)])
        executor = EventsExecutor(context=context)
        executor.add_node(view)
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                executor.spin_once(timeout_sec=0.05)

        thread = threading.Thread(target=spin)
        thread.start()
        try:
            wait_for(lambda: '/fleet/check' in view.relay.services, '/fleet/check offered')
            assert call(view.relay, '/fleet/check') == {'success': True, 'message': CHECK_TABLE}
            info = asyncio.run(receive(view.relay.url, DEADLINE, until=lambda r: r.server_info))
            assert info.server_info['capabilities'] == ['time', 'services']
        finally:
            stop.set()
            thread.join()
            executor.shutdown()
            view.destroy_node()
