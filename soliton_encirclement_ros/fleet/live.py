"""
The fleet on the live graph: what its vehicles' nodes say, and their engage, land and hold.

A :class:`FleetOperator` lives on a node (``fleet_node``'s, or the ``fleet`` command's own). It
keeps the newest status of each vehicle's bridge and agent from ``/diagnostics`` and each
vehicle's odometry, makes :class:`~.checks.VehicleView` snapshots for :func:`~.checks.check_fleet`,
and calls every bridge's ``~/engage``, ``~/land`` or ``~/hold`` at once (std_srvs/Trigger).

A :class:`FleetAction` judges each vehicle by what its bridge reports after the call (its
status: :func:`~.checks.confirmed`), the service's answer being a hint: a reply the middleware
lost does not make a vehicle fail, and a reply of success is not the vehicle's word until its
status agrees. A vehicle whose bridge answers with a failure its status does not contradict
has failed; one still undecided at the time limit is named with what its bridge reports.
"""
from __future__ import annotations

import math
import time
from typing import Optional

from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
import numpy as np
from rclpy.node import Node
from std_srvs.srv import Trigger

from soliton_encirclement_ros.fleet.checks import check_fleet, confirmed, VehicleView
from soliton_encirclement_ros.interface import AGENT_ODOM_TOPIC, DIAGNOSTICS_TOPIC

LEVEL_NAMES = {b'\x00': 'OK', b'\x01': 'WARN', b'\x02': 'ERROR', b'\x03': 'STALE'}


def _level(level) -> str:
    key = level if isinstance(level, bytes) else bytes([int(level)])
    return LEVEL_NAMES.get(key, str(level))


REPLY_GRACE = 2.0  # s a bridge's answer may come after the status that confirms the action
# s after which a hold or land neither answered nor confirmed is asked again: a request the
# middleware lost (a client whose writer had not yet matched the service, seen with Fast DDS
# 2.14 under load) is otherwise never served. Both are idempotent on PX4; engage is not re-sent.
RESEND_AFTER = 3.0
RESENT_ACTIONS = ('hold', 'land')


class FleetOperator:
    """The fleet file's vehicles as ``node`` hears them; actions on all of them."""

    def __init__(self, node: Node, fleet, callback_group=None) -> None:
        self.node = node
        self.fleet = fleet
        self._statuses = {}   # full node name -> (values dict, steady time)
        self._positions = {}  # vehicle name -> (position (3,), steady time)
        names = {v.bridge for v in fleet.vehicles} | {v.agent for v in fleet.vehicles}
        self._wanted = names
        node.create_subscription(DiagnosticArray, DIAGNOSTICS_TOPIC, self._on_diagnostics, 50,
                                 callback_group=callback_group)
        for vehicle in fleet.vehicles:
            node.create_subscription(
                Odometry, f'/{vehicle.name}/{AGENT_ODOM_TOPIC}',
                lambda msg, name=vehicle.name: self._on_odometry(name, msg), 10,
                callback_group=callback_group)
        self._callback_group = callback_group
        self._clients = {}  # (vehicle name, action) -> client, made on first use: fewer to match

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        now = time.monotonic()
        for status in msg.status:
            if status.name in self._wanted:
                values = {kv.key: kv.value for kv in status.values}
                values.update(level=_level(status.level), message=status.message)
                self._statuses[status.name] = (values, now)

    def _on_odometry(self, name: str, msg: Odometry) -> None:
        p = msg.pose.pose.position
        self._positions[name] = (np.array([p.x, p.y, p.z]), time.monotonic())

    def heard(self, name: str) -> Optional[tuple[dict, float]]:
        """Return ``(status values, steady time heard)`` of node ``name``'s newest, or None."""
        return self._statuses.get(name)

    def status_since(self, name: str, since: float) -> Optional[dict]:
        """Return the status values of node ``name`` heard at or after ``since``, or None."""
        values, heard = self._statuses.get(name, (None, -math.inf))
        return values if heard >= since else None

    def positions_known(self) -> bool:
        """Return whether every vehicle's odometry has been heard."""
        return all(v.name in self._positions for v in self.fleet.vehicles)

    def heard_all(self) -> bool:
        """Return whether every vehicle's bridge and agent has been heard at least once."""
        return self._wanted <= set(self._statuses)

    def links_known(self) -> bool:
        """Return whether every agent reports link figures of every other vehicle."""
        others = {v.agent_id for v in self.fleet.vehicles}
        for vehicle in self.fleet.vehicles:
            values = self._statuses.get(vehicle.agent, ({}, 0.0))[0]
            heard = {int(k[5:]) for k in values if k.startswith('link.')}
            if not others - {vehicle.agent_id} <= heard:
                return False
        return True

    def views(self, stale: float = 3.0) -> dict:
        """Return a :class:`VehicleView` of every vehicle (old odometry: no position)."""
        now = time.monotonic()
        views = {}
        for vehicle in self.fleet.vehicles:
            bridge = self._statuses.get(vehicle.bridge)
            agent = self._statuses.get(vehicle.agent)
            position = self._positions.get(vehicle.name)
            views[vehicle.name] = VehicleView(
                bridge=bridge[0] if bridge else None,
                bridge_age=now - bridge[1] if bridge else float('inf'),
                agent=agent[0] if agent else None,
                agent_age=now - agent[1] if agent else float('inf'),
                position=position[0] if position and now - position[1] <= stale else None)
        return views

    def check(self, stale: float = 3.0):
        """Return the pre-flight :class:`~.checks.Report` of the graph as heard now."""
        return check_fleet(self.fleet, self.views(stale), stale)

    def _client(self, vehicle, action: str):
        key = (vehicle.name, action)
        if key not in self._clients:
            self._clients[key] = self.node.create_client(
                Trigger, f'{vehicle.bridge}/{action}', callback_group=self._callback_group)
        return self._clients[key]

    def prepare(self, actions) -> None:
        """Make every vehicle's clients of ``actions`` now, so they are discovered before use."""
        for vehicle in self.fleet.vehicles:
            for action in actions:
                self._client(vehicle, action)

    def missing_services(self, actions) -> list[str]:
        """Return the bridges' services of ``actions`` not discovered (yet), by full name."""
        return [f'{vehicle.bridge}/{action}' for vehicle in self.fleet.vehicles
                for action in actions if not self._client(vehicle, action).service_is_ready()]

    def call(self, vehicle, action: str):
        """Call ``vehicle``'s bridge's ``~/<action>`` if it is discovered; its future, or None."""
        client = self._client(vehicle, action)
        return client.call_async(Trigger.Request()) if client.service_is_ready() else None


class ActionLine(str):
    """One vehicle's verdict line; ``ok``: confirmed (a FAILED line is logged as an error)."""

    def __new__(cls, text: str, ok: bool):
        line = super().__new__(cls, text)
        line.ok = ok
        return line


class FleetAction:
    """
    One action (engage, land, hold) on every vehicle at once, judged by what each reports.

    Each bridge's service is called as soon as it is discovered (a fleet command that has just
    started discovers them one by one: none waits for the others), within ``discover`` s.
    :meth:`update` after each spin calls and decides what can be (returns the new lines);
    :meth:`finish` at the time limit fails the undecided, naming what each bridge reports;
    :attr:`ok` and :attr:`lines` then say how it ended.
    """

    def __init__(self, operator: FleetOperator, action: str, discover: float = 10.0) -> None:
        self.operator, self.action = operator, action
        self.started = time.monotonic()
        self._discover_until = self.started + discover
        self.calls: dict = {}  # vehicle name -> the call's future, or why it was not made
        self.called_at: dict[str, float] = {}  # vehicle name -> steady time its call went out
        self.verdicts: dict[str, tuple[bool, str]] = {}
        self._confirmed_at: dict[str, float] = {}  # when each status first confirmed it
        self._sent_at: dict[str, float] = {}  # vehicle name -> steady time of its latest request
        self._call_discovered()

    def _call_discovered(self) -> None:
        late = time.monotonic() > self._discover_until
        for vehicle in self.operator.fleet.vehicles:
            if vehicle.name not in self.calls:
                future = self.operator.call(vehicle, self.action)
                if future is not None:
                    self.calls[vehicle.name] = future
                    self.called_at[vehicle.name] = self._sent_at[vehicle.name] = time.monotonic()
                elif late:
                    self.calls[vehicle.name] = (
                        f'{vehicle.bridge}/{self.action} is not available (bridge not running, '
                        'or not discovered yet)')

    @property
    def all_called(self) -> bool:
        """Return whether every vehicle's bridge has been called."""
        return len(self.called_at) == len(self.operator.fleet.vehicles)

    @property
    def done(self) -> bool:
        """Return whether every vehicle is decided."""
        return len(self.verdicts) == len(self.operator.fleet.vehicles)

    def update(self) -> list[str]:
        """Call the services discovered since, decide what can be now; return the new lines."""
        self._call_discovered()
        self._resend_unanswered()
        lines = []
        for vehicle in self.operator.fleet.vehicles:
            if vehicle.name not in self.verdicts:
                verdict = self._judge(vehicle)
                if verdict is not None:
                    self.verdicts[vehicle.name] = verdict
                    lines.append(self._line(vehicle.name, *verdict))
        return lines

    def _resend_unanswered(self) -> None:
        """Ask again for a hold or land neither answered nor confirmed in RESEND_AFTER s."""
        if self.action not in RESENT_ACTIONS:
            return
        now = time.monotonic()
        for vehicle in self.operator.fleet.vehicles:
            call = self.calls.get(vehicle.name)
            if (vehicle.name in self.verdicts or call is None or isinstance(call, str)
                    or call.done() or vehicle.name in self._confirmed_at
                    or now - self._sent_at[vehicle.name] < RESEND_AFTER):
                continue
            future = self.operator.call(vehicle, self.action)
            if future is not None:
                self.calls[vehicle.name], self._sent_at[vehicle.name] = future, now

    def finish(self, limit: str = '') -> list[str]:
        """Fail the vehicles still undecided, naming what each bridge reports; their lines."""
        lines = []
        for vehicle in self.operator.fleet.vehicles:
            if vehicle.name not in self.verdicts:
                status = self.operator.status_since(vehicle.bridge, -math.inf)
                now = ('no status heard from its bridge' if status is None
                       else f'its bridge reports: {status.get("message", "?")}')
                if vehicle.name in self.calls:
                    why = f'not confirmed{limit}; {now}'
                else:
                    why = (f'{vehicle.bridge}/{self.action} was never discovered{limit} (bridge '
                           f'not running?); {now}')
                self.verdicts[vehicle.name] = (False, why)
                lines.append(self._line(vehicle.name, *self.verdicts[vehicle.name]))
        return lines

    @property
    def ok(self) -> bool:
        """Return whether every vehicle is decided and confirmed."""
        return self.done and all(verdict[0] for verdict in self.verdicts.values())

    @property
    def lines(self) -> list[str]:
        """Return one line per vehicle decided so far, in the fleet file's order."""
        return [self._line(v.name, *self.verdicts[v.name])
                for v in self.operator.fleet.vehicles if v.name in self.verdicts]

    def _line(self, name: str, ok: bool, message: str) -> 'ActionLine':
        return ActionLine(f'{name}: {self.action} {"ok" if ok else "FAILED"}: {message}', ok)

    def _judge(self, vehicle) -> Optional[tuple[bool, str]]:
        call = self.calls.get(vehicle.name)
        if call is None:
            return None  # its service is not discovered yet
        if isinstance(call, str):
            return False, call
        reply = call.result() if call.done() else None
        status = self.operator.status_since(vehicle.bridge, self.started)
        if status is not None and confirmed(self.action, status):
            if reply is not None and reply.success:
                return True, reply.message
            # the status of the tick that ended the request may come before its answer
            seen = self._confirmed_at.setdefault(vehicle.name, time.monotonic())
            if reply is None and time.monotonic() - seen < REPLY_GRACE:
                return None
            return True, (status.get('message', '') + ' (as its status says; its answer '
                          + ('was lost)' if reply is None else f'said: {reply.message})'))
        if reply is not None and not reply.success:
            return False, reply.message
        return None
