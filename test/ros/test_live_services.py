"""
The live view offers the fleet's Trigger services to Foxglove (its "Services" capability).

A node in this process serves ``/fleet/check`` (a two-line table) and ``/fleet/land`` (answers
after 2 s); a :class:`FoxgloveRelay` on another node offers them, and the headless client
(``live.client``) calls them as Foxglove's Service Call panel does. A service of another type or
name is not offered; a service that disappears, or answers too late, answers success false
with one line naming it. The ``live_view`` node offers them too.

Commanding (engage, land, hold) is off unless enabled with a token: those services are then not
advertised. A request that is not a JSON object (garbage, empty), or a command with no token or
the wrong one, is answered with an error and reaches no server: the fleet's servers here and,
end to end, the bridges behind a real ``fleet_node`` count what they receive.
"""
import asyncio
from contextlib import contextmanager
from functools import partial
import importlib.util
import json
import re
import socket
import threading
import time

import pytest

from support.waits import DEADLINE, wait_for

pytestmark = pytest.mark.skipif(
    not (importlib.util.find_spec('foxglove') and importlib.util.find_spec('websockets')),
    reason='the live extra (foxglove-sdk, websockets) is not installed')

TOKEN = 'correct-horse-battery-staple-42'
BAD_REQUESTS = {'garbage': b'not json {', 'empty': b'', 'no token': b'{}',
                'wrong token': b'{"token": "correct-horse-battery-staple-43"}',
                'not an object': b'["token"]', 'a token that is not text': b'{"token": 42}'}
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


def serve_fleet(node, received=None):
    """
    Serve /fleet/check, /fleet/land (late), /fleet/hold, /fleet/engage and two not to offer.

    Returns the servers; each call received is appended to ``received`` (its name).
    """
    from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
    from std_srvs.srv import SetBool, Trigger
    received = [] if received is None else received

    def check(request, response):
        received.append('/fleet/check')
        response.success, response.message = True, CHECK_TABLE
        return response

    def land(request, response):
        received.append('/fleet/land')
        time.sleep(LAND_DELAY)  # the service's own behaviour (a slow answer), not a test wait
        response.success, response.message = True, 'landed: 2 of 2'
        return response

    def hold(request, response):
        received.append('/fleet/hold')
        response.success, response.message = True, 'holding: 2 of 2'
        return response

    def engage(request, response):
        received.append('/fleet/engage')
        response.success, response.message = True, 'engaged: 2 of 2'
        return response

    def never(request, response):
        raise AssertionError('a service the live view must not offer was called')

    return {
        '/fleet/check': node.create_service(Trigger, '/fleet/check', check),
        '/fleet/land': node.create_service(Trigger, '/fleet/land', land,
                                           callback_group=MutuallyExclusiveCallbackGroup()),
        '/fleet/hold': node.create_service(Trigger, '/fleet/hold', hold),
        '/fleet/engage': node.create_service(Trigger, '/fleet/engage', engage),
        '/fleet/arm': node.create_service(SetBool, '/fleet/arm', never),  # not Trigger
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


def call(relay, name: str, request: bytes = b'{}') -> dict:
    from soliton_encirclement_ros.live.client import call_service
    return json.loads(asyncio.run(call_service(relay.url, name, request, seconds=DEADLINE)))


def command(relay, name: str, token: str = TOKEN) -> dict:
    """Call ``name`` with the commanding token in the request, as an operator does."""
    return call(relay, name, json.dumps({'token': token}).encode())


def refusal(url: str, name: str, request: bytes) -> str:
    """Return the error a call of ``name`` with ``request`` is answered with (fail if none)."""
    from soliton_encirclement_ros.live.client import call_service, ServiceCallFailed
    with pytest.raises(ServiceCallFailed) as refused:
        asyncio.run(call_service(url, name, request, seconds=DEADLINE))
    return str(refused.value)


def test_the_fleet_services_are_offered_and_answer_through_foxglove():
    from soliton_encirclement_ros.live.client import advertised_services
    from soliton_encirclement_ros.live.relay import FoxgloveRelay
    with spinning('fleet', 'live_view') as (_, (fleet, view)):
        servers = serve_fleet(fleet)
        relay = FoxgloveRelay(view, port=0, host='127.0.0.1', command_token=TOKEN,
                              services_regex='^/fleet/(check|engage|land|hold|arm)$')
        try:
            offered = ['/fleet/check', '/fleet/engage', '/fleet/hold', '/fleet/land']
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
            assert json.loads(advertised['/fleet/hold']['request']['schema'])['required'] == [
                'token']

            assert call(relay, '/fleet/check') == {'success': True, 'message': CHECK_TABLE}
            assert command(relay, '/fleet/hold') == {'success': True,
                                                     'message': 'holding: 2 of 2'}
            started = time.monotonic()
            assert command(relay, '/fleet/land') == {'success': True,
                                                     'message': 'landed: 2 of 2'}
            assert time.monotonic() - started >= LAND_DELAY

            # The fleet node's land server goes away: the button answers, naming it.
            fleet.destroy_service(servers['/fleet/land'])
            wait_for(lambda: view.count_services('/fleet/land') == 0,
                     'the /fleet/land server gone from the graph')
            answer = command(relay, '/fleet/land')
            assert answer['success'] is False
            assert '/fleet/land' in answer['message'] and 'not available' in answer['message']
            assert '\n' not in answer['message']
            relay.discover()
            assert '/fleet/arm' not in relay.services  # still: its type is not Trigger
        finally:
            relay.close()
        relay.close()  # idempotent


def test_a_late_answer_times_out_and_an_empty_regex_offers_nothing():
    from soliton_encirclement_ros.live.client import advertised_services, receive
    from soliton_encirclement_ros.live.relay import FoxgloveRelay
    with spinning('fleet', 'live_view') as (_, (fleet, view)):
        servers = serve_fleet(fleet)
        hasty = FoxgloveRelay(view, port=0, service_timeout=0.5, command_token=TOKEN)
        silent = FoxgloveRelay(view, port=0, services_regex='')
        try:
            discover_until_offered(hasty, view, {'/fleet/land'}, servers)
            assert command(hasty, '/fleet/land') == {
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


def test_commanding_is_off_unless_enabled_and_a_bad_request_calls_nothing(capfd, tmp_path):
    from soliton_encirclement_ros.live.client import advertised_services, main as client_main
    from soliton_encirclement_ros.live.relay import FoxgloveRelay
    commands = ['/fleet/engage', '/fleet/hold', '/fleet/land']
    with spinning('fleet', 'live_view') as (_, (fleet, view)):
        received = []
        servers = serve_fleet(fleet, received)
        closed = FoxgloveRelay(view, port=0)  # the default: commanding off
        relay = FoxgloveRelay(view, port=0, command_token=TOKEN)
        try:
            discover_until_offered(relay, view, {'/fleet/check', *commands}, servers)
            closed.discover()
            assert closed.services == ['/fleet/check']
            assert sorted(asyncio.run(advertised_services(closed.url, seconds=1.0))) == [
                '/fleet/check']

            for name in commands:
                for why, request in BAD_REQUESTS.items():
                    error = refusal(relay.url, name, request)
                    assert error.startswith(f'{name}: CallRefused: {name}: refused: '), why
                    assert error.endswith('nothing was called') and '\n' not in error, error
            assert 'wrong token' in refusal(relay.url, '/fleet/hold', BAD_REQUESTS['wrong token'])
            assert 'no token' in refusal(relay.url, '/fleet/hold', BAD_REQUESTS['no token'])
            assert 'not a JSON object' in refusal(relay.url, '/fleet/hold',
                                                  BAD_REQUESTS['garbage'])
            assert 'empty' in refusal(relay.url, '/fleet/hold', BAD_REQUESTS['empty'])
            for why in ('garbage', 'empty', 'not an object'):  # a read-only call too
                assert 'refused' in refusal(relay.url, '/fleet/check', BAD_REQUESTS[why])
            assert received == []  # nothing reached any server

            assert command(relay, '/fleet/engage') == {'success': True,
                                                       'message': 'engaged: 2 of 2'}
            assert call(relay, '/fleet/check') == {'success': True, 'message': CHECK_TABLE}
            assert received == ['/fleet/engage', '/fleet/check']
            token_file = tmp_path / 'token'
            token_file.write_text(TOKEN + '\n')
            assert client_main([relay.url, '--call', '/fleet/hold', '--token-file',
                                str(token_file)]) == 0  # the operator's command line
            assert received == ['/fleet/engage', '/fleet/check', '/fleet/hold']
        finally:
            relay.close()
            closed.close()
    logged = capfd.readouterr()
    logged = logged.out + logged.err
    assert TOKEN not in logged
    assert re.search(r'live view: Foxglove client \d+ calls /fleet/engage', logged), logged
    assert re.search(r'live view: Foxglove client \d+: /fleet/land: refused: wrong token',
                     logged), logged


class Bridges:
    """Two vehicles' bridges as fleet_node sees them: ``~/engage``, ``~/land``, ``~/hold``."""

    NAMES = ('uav1', 'uav2')

    def __init__(self, node):
        from std_srvs.srv import Trigger
        self.calls = []
        for name in self.NAMES:
            for action in ('engage', 'land', 'hold'):
                node.create_service(Trigger, f'/{name}/px4_bridge/{action}',
                                    partial(self._answer, name, action))

    def _answer(self, name, action, request, response):
        self.calls.append((name, action))
        response.success, response.message = True, f'{action}: done'
        return response


def test_through_live_view_and_fleet_node_only_the_token_reaches_the_bridges(tmp_path):
    """live_view (commanding on, the token from a file) in front of a real fleet_node."""
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    import yaml

    from soliton_encirclement_ros.live.client import advertised_services
    from soliton_encirclement_ros.nodes.fleet_node import FleetNode
    from soliton_encirclement_ros.nodes.live_view_node import LiveViewNode
    fleet_file = tmp_path / 'fleet.yaml'
    fleet_file.write_text(yaml.safe_dump({'geo_reference': [47.0, 8.0, 400.0], 'vehicles': [
        {'name': name, 'agent_id': i + 1, 'host': f'c{i + 1}'}
        for i, name in enumerate(Bridges.NAMES)]}))
    token_file = tmp_path / 'token'
    token_file.write_text(TOKEN + '\n')
    context = rclpy.Context()
    rclpy.init(args=[], context=context)
    executors, threads, nodes = [], [], []
    try:
        stand_in = rclpy.create_node('bridges', context=context)
        bridges = Bridges(stand_in)
        fleet = FleetNode(context=context, cli_args=[
            '--ros-args', '-p', f'fleet_file:={fleet_file}', '-p', 'timeout:=1.0'])
        view = LiveViewNode(context=context, parameter_overrides=[
            Parameter('port', value=0), Parameter('discovery_period', value=0.1),
            Parameter('commanding', value=True),
            Parameter('command_token_file', value=str(token_file))])
        nodes += [stand_in, fleet, view]
        for group in ([stand_in, fleet], [view]):  # fleet_node's coroutines: single-threaded
            executor = SingleThreadedExecutor(context=context)
            for node in group:
                executor.add_node(node)
            executors.append(executor)
            threads.append(threading.Thread(target=executor.spin, daemon=True))
            threads[-1].start()
        commands = ['/fleet/engage', '/fleet/hold', '/fleet/land']
        wait_for(lambda: set(view.relay.services) >= {'/fleet/check', *commands},
                 f'the fleet services offered (offered: {view.relay.services})')
        assert sorted(asyncio.run(advertised_services(view.relay.url, commands, DEADLINE))) \
            == ['/fleet/check', *commands]
        wait_for(lambda: all(fleet.count_services(f'/{n}/px4_bridge/hold') for n in
                             Bridges.NAMES), "the bridges' services in fleet_node's graph")

        for name in commands:
            for why, request in BAD_REQUESTS.items():
                assert 'nothing was called' in refusal(view.relay.url, name, request), why
        assert bridges.calls == []  # no bridge was asked anything

        answer = command(view.relay, '/fleet/hold')
        assert 'uav1: hold' in answer['message'] and 'uav2: hold' in answer['message'], answer
        assert sorted(bridges.calls) == [('uav1', 'hold'), ('uav2', 'hold')]
    finally:
        for executor in executors:
            executor.shutdown()
        for thread in threads:
            thread.join(DEADLINE)
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def test_commanding_without_a_token_is_refused_in_one_line():
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != 'SOLITON_LIVE_VIEW_TOKEN'}
    result = subprocess.run(
        [sys.executable, '-m', 'soliton_encirclement_ros.nodes.live_view_node', '--ros-args',
         '-p', 'port:=0', '-p', 'commanding:=true'],
        capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        'LiveViewNode: invalid configuration: commanding needs a secret token: give '
        'command_token_file (a file holding it) or set SOLITON_LIVE_VIEW_TOKEN; commanding '
        'stays off without one')
