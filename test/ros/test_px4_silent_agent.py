"""
A PX4 bridge whose agent was killed speaks for its vehicle, and the others keep clear of it.

The SITL launch's graph for N = 3 on the PX4 test double. Once the ring has formed, the middle
vehicle's agent process dies without a word (its node destroyed: no state, no presence, no
status). Its bridge hears the agent's ``~/status`` stop, and from then on announces the
vehicle's presence on ``/swarm/agent_states`` itself (incarnation 0, from PX4's odometry) while
the vehicle holds on the stale ``cmd_vel`` and lands after ``land_after``; once PX4 has landed
and disarmed it, the presence says ``landed``. The other vehicles keep at least 1 m from it
throughout, measured in the fakes' true positions. Needs a built px4_msgs.
"""
import time

import numpy as np
import pytest

from support.harness import default_context_executor, spin_until
from support.px4_ring import (
    DEADLINE, engage_and_form_ring, every, needs_px4_msgs, observe_graph, ready, sitl_plan,
    start_graph, true_position_enu)

pytestmark = needs_px4_msgs

ros = pytest.fixture(default_context_executor)


def test_a_bridge_whose_agent_was_killed_announces_its_vehicle_until_it_has_landed(ros):
    from soliton_encirclement_ros.core.identity import BRIDGE_INCARNATION
    from soliton_encirclement_ros.interface import (
        agent_state_from_msg, AGENT_STATES_TOPIC, swarm_qos)
    from rclpy.node import Node
    from std_msgs.msg import Float64MultiArray

    defaults, plan = sitl_plan(3)
    nodes = start_graph(ros, plan)
    bridges, fakes, odoms, engage = observe_graph(ros, plan, nodes)
    victim = 1
    name = plan.names[victim]
    agent = nodes[f'/{name}/agent']
    spoken = []   # (monotonic, AgentBroadcast) of the bridge's presence broadcasts
    listener = Node('presence_listener')
    ros.add_node(listener)

    def on_state(msg):
        state = agent_state_from_msg(msg)
        if state.incarnation == BRIDGE_INCARNATION:
            spoken.append((time.monotonic(), state, true_position_enu(fakes[victim])))
    listener.create_subscription(Float64MultiArray, AGENT_STATES_TOPIC, on_state,
                                 swarm_qos(plan.swarm_reliability))
    closest = {'d': np.inf}

    def observe():
        p = np.array([true_position_enu(fake) for fake in fakes])
        for other in set(range(3)) - {victim}:
            closest['d'] = min(closest['d'], float(np.hypot(*(p[victim, :2] - p[other, :2]))))
    observe = every(0.01, observe)

    assert spin_until(ros, lambda: ready(odoms, plan.names, engage, bridges), timeout=DEADLINE)
    formed, _, _, _ = engage_and_form_ring(
        ros, dict(zip(plan.names, engage)), odoms, plan.names, float(defaults['radius']),
        float(defaults['altitude']), lambda: None)
    assert formed, 'the ring never formed'
    assert not spoken, 'the bridge spoke while its agent was alive'
    ros.remove_node(agent)   # the agent process dies without a word
    agent.destroy_node()
    killed = time.monotonic()
    assert spin_until(ros, lambda: bool(spoken), timeout=10.0, each=observe), (
        'the bridge never announced its vehicle after its agent fell silent')
    first = spoken[0][0] - killed
    _, state, true_position = spoken[0]
    assert state.agent_id == victim + 1 and not state.member and not state.landed
    assert np.hypot(*(state.position[:2] - true_position[:2])) < 0.5   # where the vehicle is
    assert spin_until(ros, lambda: spoken[-1][1].landed, timeout=DEADLINE, each=observe), (
        'the bridge never said the vehicle had landed')
    landed = spoken[-1][0] - killed
    print(f'\n{name} agent killed: its bridge spoke for it {first:.1f} s later, said landed '
          f'{landed:.1f} s later; closest approach of another vehicle to it {closest["d"]:.2f} m')
    assert closest['d'] >= 1.0
