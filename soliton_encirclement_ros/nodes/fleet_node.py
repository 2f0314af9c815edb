"""
fleet_node: the ``fleet`` command's actions as services, for an operator's station or Foxglove.

Node ``/fleet`` (parameter ``fleet_file``) serves std_srvs/Trigger:

- ``/fleet/check``: the pre-flight table (``fleet.checks``); success when every check passes;
- ``/fleet/engage``: the check, and only if it passes every bridge's ``~/engage`` at once;
  success when every vehicle's bridge reports it engaged;
- ``/fleet/land``: every bridge's ``~/land`` at once; success when every vehicle's bridge
  reports it landed and disarmed;
- ``/fleet/hold``: the operator's stop: every bridge's ``~/hold`` at once (PX4's Hold mode);
  success when every vehicle's bridge reports PX4 in Hold.

Each vehicle's verdict is what its bridge reports (``fleet.live.FleetAction``), within
``timeout``. The answer's message is the table, or one line per vehicle. The live view
(``live_view``, ``swarm_sim --foxglove``) offers these services in Foxglove (its services
capability), so an operator can check, engage, land and hold with no ROS install.
"""
from __future__ import annotations

from dataclasses import dataclass

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger

from ros_support.ros_parameters import declare, specs_of
from ros_support.settings import check_fields, setting
from ros_support.spin import spin_node
from ros_support.validation import from_mapping
from soliton_encirclement_ros.fleet.checks import render
from soliton_encirclement_ros.fleet.fleet_file import load_fleet
from soliton_encirclement_ros.fleet.live import FleetAction, FleetOperator

ACTIONS = ('check', 'engage', 'land', 'hold')
POLL = 0.05  # s between looks at the vehicles' statuses while an action is under way


@dataclass(frozen=True)
class FleetNodeSettings:
    """fleet_node's parameters."""

    fleet_file: str = setting('', 'fleet file (YAML: vehicles, geo_reference, safety_area, '
                              'd_safe, min_battery, max_clock_offset)', read_only=True)
    stale: float = setting(3.0, 'a status or odometry older than this counts as unheard at '
                           'the check', 's', 0.1, 60.0, read_only=True)
    timeout: float = setting(60.0, 'wait this long for every vehicle to confirm an engage, a '
                             'landing or a hold', 's', 1.0, 600.0, read_only=True)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.fleet_file:
            raise ValueError("fleet_file must name a fleet file, got ''")

    @classmethod
    def from_mapping(cls, values):
        return from_mapping(cls, values)


PARAMETERS = specs_of(FleetNodeSettings)


class FleetNode(Node):
    """The fleet's check, engage, land and hold as Trigger services."""

    def __init__(self, **kwargs) -> None:
        super().__init__('fleet', **kwargs)
        self.settings = FleetNodeSettings.from_mapping(declare(self, PARAMETERS))
        self.fleet = load_fleet(self.settings.fleet_file)
        self.operator = FleetOperator(self, self.fleet)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        for action, handler in (('check', self._on_check), ('engage', self._on_engage),
                                ('land', self._on_land), ('hold', self._on_hold)):
            # each waits for the bridges while the subscriptions keep running
            self.create_service(Trigger, f'~/{action}', handler,
                                callback_group=MutuallyExclusiveCallbackGroup())
        self.get_logger().info(
            f'fleet of {len(self.fleet.vehicles)} from {self.fleet.path}: '
            + ', '.join(v.name for v in self.fleet.vehicles) + '; services '
            + ', '.join(self.resolve_service_name(f'~/{a}') for a in ACTIONS))

    def _on_check(self, request, response):
        report = self.operator.check(self.settings.stale)
        response.success, response.message = report.passed, render(report)
        return response

    async def _on_engage(self, request, response):
        report = self.operator.check(self.settings.stale)
        if not report.passed:
            response.success = False
            response.message = (render(report) + '\nengage refused: the pre-flight check '
                                'failed; nothing was engaged')
            self.get_logger().warning('fleet engage refused: the pre-flight check failed')
            return response
        return await self._act('engage', response)

    async def _on_land(self, request, response):
        return await self._act('land', response)

    async def _on_hold(self, request, response):
        return await self._act('hold', response)

    async def _act(self, action, response):
        """Run ``action`` on every vehicle; answer once each has reported, or at timeout."""
        run = FleetAction(self.operator, action)
        started = self._steady.now()
        done = Future()

        def look():
            for line in run.update():  # a vehicle that failed is an error, not news
                if line.ok:
                    self.get_logger().info(f'fleet {line}')
                else:
                    self.get_logger().error(f'fleet {line}')
            late = (self._steady.now() - started).nanoseconds * 1e-9 > self.settings.timeout
            if (run.done or late) and not done.done():
                done.set_result(None)
        timer = self.create_timer(POLL, look, clock=self._steady)
        await done
        self.destroy_timer(timer)
        for line in run.finish(f' within {self.settings.timeout:g} s'):  # each FAILED
            self.get_logger().error(f'fleet {line}')
        response.success, response.message = run.ok, '\n'.join(run.lines)
        return response


def main(args=None) -> None:
    # The engage and land answers await the bridges in coroutines: SingleThreadedExecutor.
    spin_node(FleetNode, args, executor_class=SingleThreadedExecutor)


if __name__ == '__main__':
    main()
