"""
swarm_sim's direct lock-step (issue 23): in-graph messages skip DDS, the world outside does not.

In one process the lock-step hands the graph's messages straight to the graph's subscriptions
and publishes to DDS only when something outside the graph listens. A listener in another DDS
participant must still hear every topic, the graph's own messages coming back over DDS must not
be delivered twice (the run stays byte-identical to one without the listener), and services
are served while the run goes on.
"""
import time

import numpy as np
from std_msgs.msg import Float64, Float64MultiArray
from std_srvs.srv import SetBool

from soliton_encirclement_ros.interface import (
    agent_state_from_msg, AGENT_STATES_TOPIC, METRICS_TOPIC_PREFIX, RELIABLE, swarm_qos)
from soliton_encirclement_ros.nodes.agent_node import AgentNode
from soliton_encirclement_ros.sim import runner
from soliton_encirclement_ros.sim.inprocess import InProcessGraph
from support.outsider import Outsider
from support.waits import wait_for

DEADLINE = 180.0  # wall s (a loaded machine is slow)
RESEND_AFTER = 3.0  # wall s without a reply before the request is sent again
ARGS = ['--agents', '3', '--control-period', '0.05', '--duration', '3', '--seed', '2']


class Listener(Outsider):
    """Hears the agents' states and E_gap from outside the graph."""

    def __init__(self):
        super().__init__()
        self.states, self.gaps = [], []
        self.node.create_subscription(Float64MultiArray, AGENT_STATES_TOPIC, self.states.append,
                                      swarm_qos(RELIABLE))
        self.node.create_subscription(Float64, METRICS_TOPIC_PREFIX + 'E_gap', self.gaps.append,
                                      10)


def new_graph():
    return InProcessGraph(runner.plan_from_args(runner.parse_args(ARGS)))


def run_alone():
    graph = new_graph()
    try:
        assert graph.lockstep.direct
        graph.run(3.0)
        return graph.metrics.series()[0]
    finally:
        graph.close()


def test_a_listener_outside_hears_the_graph_and_changes_nothing():
    alone = run_alone()
    outsider = Listener()
    graph = new_graph()
    try:
        agent = next(n for n in graph.nodes if isinstance(n, AgentNode))
        gap_pub = graph.metrics._metric_pubs['E_gap']
        # Matched: the graph's publishers see the outsider (the fan-out is the in-graph one).
        wait_for(lambda: agent._state_pub.get_subscription_count() >= 2
                 and gap_pub.get_subscription_count() >= 1, 'the listener to match',
                 timeout=DEADLINE)
        graph.run(3.0)
        wait_for(lambda: outsider.spin() or len(outsider.states) >= 3 * 50 and outsider.gaps,
                 'the states and metrics outside', timeout=DEADLINE)
        with_listener = graph.metrics.series()[0]
    finally:
        graph.close()
        outsider.close()
    assert {agent_state_from_msg(m).agent_id for m in outsider.states} == {1, 2, 3}
    assert all(np.isfinite(m.data) for m in outsider.gaps)
    # The graph's own states also came back over DDS: dropped, not applied twice.
    np.testing.assert_array_equal(with_listener, alone)


def test_a_service_of_a_node_is_served_while_the_graph_runs():
    outsider = Listener()
    graph = new_graph()
    try:
        agent = next(n for n in graph.nodes
                     if isinstance(n, AgentNode) and n.agent_id == 1)
        client = outsider.node.create_client(
            SetBool, f'{agent.get_fully_qualified_name()}/inject_failure')
        graph.run(0.5)
        wait_for(lambda: client.service_is_ready(), 'the service', timeout=DEADLINE)
        futures = [client.call_async(SetBool.Request(data=True))]
        sent, end = time.monotonic(), 0.5

        def served():
            nonlocal end, sent
            end += 0.05
            graph.run(end)
            outsider.spin()
            if not futures[-1].done() and time.monotonic() - sent > RESEND_AFTER:
                # Fast DDS drops a reply whose client reader the service's writer has not
                # matched within 100 ms (discovery is per side): a lost reply is asked again,
                # as the fleet's clients do (the request is idempotent).
                futures.append(client.call_async(SetBool.Request(data=True)))
                sent = time.monotonic()
            return any(f.done() for f in futures)
        wait_for(served, 'the inject_failure reply', timeout=DEADLINE, period=0.0)
        assert next(f for f in futures if f.done()).result().success
        graph.run(end + 0.2)  # the next control tick takes the failure
        assert agent.failed
    finally:
        graph.close()
        outsider.close()
