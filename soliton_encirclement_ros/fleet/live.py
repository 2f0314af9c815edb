"""
The fleet on the live graph: what its vehicles' nodes say, and their engage and land services.

A :class:`FleetOperator` lives on a node (``fleet_node``'s, or the ``fleet`` command's own). It
keeps the newest status of each vehicle's bridge and agent from ``/diagnostics`` and each
vehicle's odometry, makes :class:`~.checks.VehicleView` snapshots for :func:`~.checks.check_fleet`,
and calls every bridge's ``~/engage`` or ``~/land`` at once (std_srvs/Trigger). The bridges
answer only once PX4 confirms, so each answer is the vehicle's real outcome.
"""
from __future__ import annotations

import time

from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
import numpy as np
from rclpy.node import Node
from std_srvs.srv import Trigger

from soliton_encirclement_ros.fleet.checks import check_fleet, VehicleView
from soliton_encirclement_ros.interface import AGENT_ODOM_TOPIC, DIAGNOSTICS_TOPIC

LEVEL_NAMES = {b'\x00': 'OK', b'\x01': 'WARN', b'\x02': 'ERROR', b'\x03': 'STALE'}


def _level(level) -> str:
    key = level if isinstance(level, bytes) else bytes([int(level)])
    return LEVEL_NAMES.get(key, str(level))


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
        self._clients = {(v.name, action): node.create_client(
            Trigger, f'{v.bridge}/{action}', callback_group=callback_group)
            for v in fleet.vehicles for action in ('engage', 'land')}

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

    def clients(self, action: str) -> list:
        """Return every bridge's ``~/<action>`` client."""
        return [self._clients[(v.name, action)] for v in self.fleet.vehicles]

    def call(self, action: str) -> dict:
        """Call every bridge's ``~/<action>`` (engage, land) at once; {vehicle: future or why}."""
        calls = {}
        for vehicle in self.fleet.vehicles:
            client = self._clients[(vehicle.name, action)]
            if not client.service_is_ready():
                calls[vehicle.name] = (f'{vehicle.bridge}/{action} is not available (bridge '
                                       'not running, or not discovered yet)')
            else:
                calls[vehicle.name] = client.call_async(Trigger.Request())
        return calls


def outcome_lines(action: str, calls: dict, timed_out: str = '') -> tuple[bool, list[str]]:
    """Return (every vehicle succeeded, one line per vehicle) for :meth:`FleetOperator.call`."""
    ok, lines = True, []
    for name, call in calls.items():
        if isinstance(call, str):
            ok = False
            lines.append(f'{name}: {action} FAILED: {call}')
        elif not call.done():
            ok = False
            lines.append(f'{name}: {action} FAILED: no answer{timed_out}')
        else:
            result = call.result()
            ok &= bool(result.success)
            lines.append(f'{name}: {action} {"ok" if result.success else "FAILED"}: '
                         f'{result.message}')
    return ok, lines
