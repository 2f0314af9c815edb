"""
Three vehicles' bridges and agents as the wire shows them, for the fleet tools' tests.

Each bridge's and agent's DiagnosticStatus on ``/diagnostics`` (the keys ``px4_bridge_node``
and ``agent_node`` publish), odometry, and the bridges' ``~/engage``, ``~/land`` and ``~/hold``
(std_srvs/Trigger), with no px4_msgs: test_px4_fleet.py and test_fleet_console.py fly the same
with real bridges and the PX4 test double, where px4_msgs is built.
"""
import functools

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from nav_msgs.msg import Odometry
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from std_srvs.srv import Trigger
import yaml

NAMES = ('uav1', 'uav2', 'uav3')


class StandIn(Node):
    """
    Three vehicles' bridges and agents, as the wire shows them.

    Each bridge's status follows its requests as a bridge's does (phase, out_of_ring, PX4's
    nav_state and arming_state); uav3 refuses its landing; uav2's ``~/land`` never answers
    (the reply lost by the middleware) though its vehicle lands.
    """

    def __init__(self):
        super().__init__('stand_in')
        self.battery = dict.fromkeys(NAMES, '0.80')
        self.calls = []
        self.state = {name: {'phase': 'idle', 'nav_state': '2 (POSCTL)',
                             'arming_state': 'DISARMED'} for name in NAMES}
        self._diag = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._odom = {name: self.create_publisher(Odometry, f'/{name}/odom', 10)
                      for name in NAMES}
        for name in NAMES:
            for action in ('engage', 'land', 'hold'):
                self.create_service(Trigger, f'/{name}/px4_bridge/{action}',
                                    functools.partial(self._answer, name, action),
                                    callback_group=ReentrantCallbackGroup())
        self.silent = set()  # vehicles whose companion is gone: nothing of them published
        # vehicles whose first request is lost: never served nor answered (reentrant services:
        # a lost request blocks no later one)
        self.lose_first = set()
        self.create_timer(0.2, self._publish)

    async def _answer(self, name, action, request, response):
        self.calls.append((name, action))
        if name in self.lose_first:  # as a request the middleware lost: nothing happens
            self.lose_first.discard(name)
            await Future()
        state = self.state[name]
        if action == 'engage':
            state.update(phase='active', nav_state='14 (OFFBOARD)', arming_state='ARMED')
            state.pop('out_of_ring', None)
            response.success = True
            response.message = 'engaged: PX4 confirmed OFFBOARD and ARMED; following cmd_vel'
        elif action == 'hold':
            state.update(phase='idle', nav_state='4 (AUTO_LOITER)',
                         out_of_ring='hold (operator request)')
            response.success, response.message = True, 'holding: PX4 reports AUTO_LOITER'
        elif name == 'uav3':
            response.success = False
            response.message = 'PX4 refused NAV_LAND: DENIED; offboard heartbeat stopped'
        else:
            state.update(phase='idle', nav_state='18 (AUTO_LAND)', arming_state='DISARMED',
                         out_of_ring='landed (operator request)')
            response.success, response.message = True, 'landed: PX4 reports DISARMED'
            if name == 'uav2':
                await Future()  # the reply is lost: never sent
        return response

    def _publish(self):
        statuses = []
        for i, name in enumerate(NAMES):
            if name in self.silent:
                continue
            bridge = {'ready': 'yes', 'origin_source': 'gps',
                      'origin_enu': f'({5.0 * i:.2f}, 0.00, 0.00)',
                      'battery_remaining': self.battery[name], 'target_system': '1',
                      'px4_namespace': '', 'geo_reference': '47,8,400', **self.state[name]}
            agent = {'agent_id': str(i + 1), 'duplicate_id': 'false', 'radius': '20',
                     'altitude': '10', 'd_safe': '2',
                     **{f'link.{j + 1}': 'heard=20 lost=0 offset=+0.0010'
                        for j in range(len(NAMES)) if j != i}}
            for full, values in ((f'/{name}/px4_bridge', bridge), (f'/{name}/agent', agent)):
                message = (f'{values["out_of_ring"]}: ...' if 'out_of_ring' in values
                           else values.get('phase', 'ok'))
                statuses.append(DiagnosticStatus(name=full, message=message, values=[
                    KeyValue(key=k, value=v) for k, v in values.items()]))
            odom = Odometry()
            odom.pose.pose.position.x = 5.0 * i
            self._odom[name].publish(odom)
        self._diag.publish(DiagnosticArray(status=statuses))


def fleet_file(tmp_path):
    path = tmp_path / 'fleet.yaml'
    path.write_text(yaml.safe_dump({'geo_reference': [47.0, 8.0, 400.0], 'vehicles': [
        {'name': name, 'agent_id': i + 1, 'host': f'c{i + 1}'} for i, name in enumerate(NAMES)]}))
    return path
