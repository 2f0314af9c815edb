"""
A headless client of the live view, speaking the SDK's subprotocol ``foxglove.sdk.v1``.

What the CI test uses to prove the stream, and a way to look at a live run without a GUI::

    python -m soliton_encirclement_ros.live.client ws://127.0.0.1:8765 --seconds 10 --png frame.png

``--call /fleet/check`` calls a service the server offers (Foxglove's "Services" capability,
JSON-encoded) and prints its answer instead; a command (``--call /fleet/hold``) carries the
commanding token, read from ``--token-file`` or ``$SOLITON_LIVE_VIEW_TOKEN``.

It subscribes to every advertised channel it wants, decodes each message (CDR, with the rosbags
Kilted typestore, as Foxglove decodes it from the advertised ``ros2msg`` schema) and keeps them
with their log times; ``--png`` draws the last markers frame and the metric curves it received.
Needs ``websockets`` (a dependency of the live extra); no rclpy.
"""
from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from dataclasses import dataclass, field
import json
import os
import re
import struct
import sys
import time

from soliton_encirclement_ros.live.authority import load_token, TOKEN_ENV, TOKEN_FIELD

SUBPROTOCOL = 'foxglove.sdk.v1'
OLD_SUBPROTOCOL = 'foxglove.websocket.v1'  # what clients before the SDK offer: refused (400)
MESSAGE_DATA, TIME, SERVICE_CALL_RESPONSE = 0x01, 0x02, 0x03  # binary opcodes server -> client
SERVICE_CALL_REQUEST = 0x02  # binary opcode client -> server
SERVICE_ENCODING = 'json'
UNKNOWN_CHANNEL = re.compile(r'Unknown channel ID: (\d+)')
MAX_RETRIES, RETRY_DELAY = 20, 0.05  # s


@dataclass
class Received:
    """What a client got: channels by topic, (log time ns, decoded message) per topic, times."""

    channels: dict[str, dict] = field(default_factory=dict)
    messages: dict[str, list] = field(default_factory=dict)
    server_times: list[int] = field(default_factory=list)
    server_info: dict = field(default_factory=dict)


async def receive(url: str, seconds: float, topics: str = '.*',
                  until=lambda received: False) -> Received:
    """Subscribe to the topics matching ``topics``; collect for ``seconds`` or until ``until``."""
    import websockets
    from rosbags.typesys import get_typestore, Stores
    typestore = get_typestore(Stores.ROS2_KILTED)
    pattern = re.compile(topics)
    received = Received()
    by_subscription: dict[int, dict] = {}
    advertised: dict[int, dict] = {}
    retries: dict[int, int] = {}

    async def subscribe(ws, channels: list[dict]) -> None:
        subscriptions = []
        for channel in channels:
            sub_id = len(by_subscription) + 1
            by_subscription[sub_id] = channel
            subscriptions.append({'id': sub_id, 'channelId': channel['id']})
        if subscriptions:
            await ws.send(json.dumps({'op': 'subscribe', 'subscriptions': subscriptions}))

    deadline = time.monotonic() + seconds
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None) as ws:
        while time.monotonic() < deadline and not until(received):
            try:
                frame = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
            except (asyncio.TimeoutError, websockets.ConnectionClosed):
                break
            if isinstance(frame, str):
                op = json.loads(frame)
                if op.get('op') == 'serverInfo':
                    received.server_info = op
                elif op.get('op') == 'advertise':
                    wanted = [c for c in op['channels'] if pattern.search(c['topic'])]
                    for channel in wanted:
                        received.channels[channel['topic']] = channel
                        advertised[channel['id']] = channel
                    await subscribe(ws, wanted)
                elif op.get('op') == 'status' and (
                        refused := UNKNOWN_CHANNEL.search(op.get('message', ''))):
                    # foxglove-sdk can refuse a subscription sent right after the channel's
                    # advertisement (a channel added while this client is connected): again.
                    channel = advertised.get(int(refused.group(1)))
                    if channel is not None and retries.get(channel['id'], 0) < MAX_RETRIES:
                        retries[channel['id']] = retries.get(channel['id'], 0) + 1
                        await asyncio.sleep(RETRY_DELAY)
                        await subscribe(ws, [channel])
                continue
            if frame[0] == TIME:
                received.server_times.append(struct.unpack_from('<Q', frame, 1)[0])
            elif frame[0] == MESSAGE_DATA:
                sub_id, log_time = struct.unpack_from('<IQ', frame, 1)
                channel = by_subscription[sub_id]
                message = typestore.deserialize_cdr(bytes(frame[13:]), channel['schemaName'])
                received.messages.setdefault(channel['topic'], []).append((log_time, message))
    return received


class ServiceCallFailed(RuntimeError):
    """The server answered a service call with ``serviceCallFailure``: its message."""


async def _read_services(ws, services: dict[str, dict], names, deadline: float) -> None:
    """Read the server's ops into ``services`` (by name) until ``names`` are all advertised."""
    import websockets
    while not set(names) <= services.keys():
        try:
            frame = await asyncio.wait_for(ws.recv(), max(0.01, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise TimeoutError(f'services {sorted(set(names) - services.keys())} not advertised'
                               f' (advertised: {sorted(services)})') from None
        except websockets.ConnectionClosed as closed:
            raise ConnectionError(f'the server closed the connection: {closed}') from None
        if not isinstance(frame, str):
            continue
        op = json.loads(frame)
        if op.get('op') == 'advertiseServices':
            services.update({service['name']: service for service in op['services']})
        elif op.get('op') == 'unadvertiseServices':
            gone = set(op['serviceIds'])
            for name in [n for n, service in services.items() if service['id'] in gone]:
                del services[name]


async def advertised_services(url: str, names=(), seconds: float = 10.0) -> dict[str, dict]:
    """
    Return the services the server advertises, by name (its ``advertiseServices`` entries).

    Waits until all of ``names`` are advertised (``TimeoutError`` after ``seconds``); with no
    ``names``, returns what was advertised within ``seconds``.
    """
    import websockets
    services: dict[str, dict] = {}
    deadline = time.monotonic() + seconds
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None) as ws:
        try:
            await _read_services(ws, services, names or ['(all, until the deadline)'], deadline)
        except TimeoutError:
            if names:
                raise
    return services


async def call_service(url: str, name: str, request: bytes = b'{}',
                       seconds: float = 180.0) -> bytes:
    """
    Call the service ``name`` the server advertises; return the answer's payload (JSON bytes).

    The request is Foxglove's binary "Service Call Request" (opcode 0x02: service id, call id,
    encoding length, encoding ``json``, payload; little-endian uint32s); the answer is the
    binary "Service Call Response" (0x03, the same layout) of that call, or a
    ``serviceCallFailure`` op (:class:`ServiceCallFailed`). ``TimeoutError`` if the service is
    not advertised, or does not answer, within ``seconds`` of the connection.
    """
    import websockets
    deadline = time.monotonic() + seconds
    call_id = 1
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None) as ws:
        services: dict[str, dict] = {}
        await _read_services(ws, services, [name], deadline)
        service_id = services[name]['id']
        encoding = SERVICE_ENCODING.encode()
        await ws.send(struct.pack('<BIII', SERVICE_CALL_REQUEST, service_id, call_id,
                                  len(encoding)) + encoding + bytes(request))
        while True:
            try:
                frame = await asyncio.wait_for(ws.recv(),
                                               max(0.01, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise TimeoutError(f'{name}: no answer within {seconds:g} s') from None
            except websockets.ConnectionClosed as closed:
                raise ConnectionError(f'{name}: the server closed the connection: '
                                      f'{closed}') from None
            if isinstance(frame, str):
                op = json.loads(frame)
                if (op.get('op') == 'serviceCallFailure' and op.get('callId') == call_id
                        and op.get('serviceId') == service_id):
                    raise ServiceCallFailed(f'{name}: {op.get("message", "")}')
                continue
            if frame[0] != SERVICE_CALL_RESPONSE or len(frame) < 13:
                continue
            answered_service, answered_call, length = struct.unpack_from('<III', frame, 1)
            if (answered_service, answered_call) == (service_id, call_id):
                return bytes(frame[13 + length:])


def plot_frame(received: Received, path, title: str = '') -> None:
    """Draw the last markers frame (ring, trails, target) and the metric curves received."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (top, side) = plt.subplots(1, 2, figsize=(12, 5.2),
                                    gridspec_kw={'width_ratios': [1, 1.3]})
    frames = received.messages.get('/swarm/markers', [])
    if frames:
        stamp, last = frames[-1]
        for marker in last.markers:
            color = (marker.color.r, marker.color.g, marker.color.b)
            if marker.type == 4:  # LINE_STRIP: trails and the desired circle
                xs = [p.x for p in marker.points]
                ys = [p.y for p in marker.points]
                top.plot(xs, ys, color=color, alpha=max(marker.color.a, 0.5),
                         lw=2 if marker.ns == 'desired_circle' else 2.5,
                         ls='--' if marker.ns == 'desired_circle' else '-')
            elif marker.type == 2:  # SPHERE: agents and target
                p = marker.pose.position
                top.plot(p.x, p.y, 'o', color=color, ms=12 if marker.ns == 'target' else 9)
                if marker.ns == 'agents':
                    top.annotate(str(marker.id), (p.x, p.y), textcoords='offset points',
                                 xytext=(6, 6), fontsize=9)
        top.set_title(f'/swarm/markers at sim t = {stamp * 1e-9:.1f} s')
    statuses = Counter(m[-1][1].message.split(' (')[0] for topic, m in received.messages.items()
                       if topic.endswith('/agent/status') and m)
    if statuses:
        top.set_xlabel("x [m] (world, ENU); agents' status: " + ', '.join(
            f'{count} {status}' for status, count in statuses.most_common()))
    top.set_aspect('equal')
    if not statuses:
        top.set_xlabel('x [m] (world, ENU)')
    top.set_ylabel('y [m]')
    top.grid(alpha=0.3)
    for name in ('E_gap', 'E_r', 'd_min'):
        samples = received.messages.get(f'/swarm/metrics/{name}', [])
        if samples:
            axis = side if name != 'd_min' else side.twinx()
            axis.plot([t * 1e-9 for t, _ in samples], [m.data for _, m in samples],
                      label=name, color={'E_gap': 'C0', 'E_r': 'C1', 'd_min': 'C2'}[name])
            axis.set_ylabel('d_min [m]' if name == 'd_min' else 'E_gap, E_r')
            if name != 'd_min':
                axis.set_yscale('log')
            axis.legend(loc='center right' if name == 'd_min' else 'lower left')
    side.set_xlabel('sim time [s] (log time of the messages received)')
    side.set_title('/swarm/metrics/* as received')
    side.grid(alpha=0.3)
    total = sum(len(m) for m in received.messages.values())
    fig.suptitle(title or f'What a {SUBPROTOCOL} client received: {total} messages on '
                 f'{len(received.messages)} topics')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='python -m soliton_encirclement_ros.live.client',
                                     description=__doc__.split('\n')[1])
    parser.add_argument('url', nargs='?', default='ws://127.0.0.1:8765')
    parser.add_argument('--seconds', type=float, default=10.0, help='how long to listen')
    parser.add_argument('--topics', default='.*', help='regular expression of topics')
    parser.add_argument('--png', default='', help='draw what was received into this PNG')
    parser.add_argument('--call', default='', metavar='SERVICE',
                        help='call this service (e.g. /fleet/check), print its answer, exit')
    parser.add_argument('--request', default='{}', help="the call's JSON request (--call)")
    parser.add_argument('--token-file', default='', metavar='FILE',
                        help="file holding the live view's commanding token, added to the "
                        'request (default: $SOLITON_LIVE_VIEW_TOKEN, when set)')
    args = parser.parse_args(argv)
    if args.call:
        request = args.request.encode()
        if args.token_file or os.environ.get(TOKEN_ENV):
            try:
                request = _with_token(args.request, load_token(args.token_file))
            except ValueError as error:
                print(f'live client: error: {error}', file=sys.stderr)
                return 2
        return _call(args.url, args.call, request)
    try:
        received = asyncio.run(receive(args.url, args.seconds, args.topics))
    except OSError as error:
        print(f'live client: error: cannot connect to {args.url}: {error}', file=sys.stderr)
        return 1
    for topic, messages in sorted(received.messages.items()):
        print(f'{topic}: {len(messages)} messages, last at {messages[-1][0] * 1e-9:.2f} s')
    if args.png:
        plot_frame(received, args.png)
    return 0


def _with_token(request: str, token: str) -> bytes:
    """Return ``request`` (a JSON object) with the token added; other text unchanged."""
    try:
        decoded = json.loads(request)
    except ValueError:
        return request.encode()
    if not isinstance(decoded, dict):
        return request.encode()
    return json.dumps({**decoded, TOKEN_FIELD: token}).encode()


def _call(url: str, name: str, request: bytes) -> int:
    try:
        answer = asyncio.run(call_service(url, name, request))
    except (OSError, TimeoutError, ServiceCallFailed) as error:
        print(f'live client: error: {error}', file=sys.stderr)
        return 1
    try:
        decoded = json.loads(answer)
    except ValueError:
        print(answer.decode(errors='replace'))
        return 0
    if isinstance(decoded, dict) and set(decoded) == {'success', 'message'}:
        print(f"{name}: {'success' if decoded['success'] else 'FAILED'}\n{decoded['message']}")
        return 0 if decoded['success'] else 1
    print(json.dumps(decoded, indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())
