"""Which node wrote a message: named once the graph has named it, never guessed before."""
from types import SimpleNamespace

from ros_support.topics import node_of_writer, publisher_node, UNKNOWN_NODE_NAME


def endpoint(name, namespace, gid):
    """Return the fields of rclpy's ``TopicEndpointInfo`` these functions read."""
    return SimpleNamespace(node_name=name, node_namespace=namespace, endpoint_gid=list(gid))


def test_a_writer_is_named_only_once_its_node_is_known():
    clock = endpoint('swarm_mobility', '/', b'\x01' * 16)
    agent = endpoint('agent_node', '/uav3', b'\x02' * 16)
    early = endpoint(UNKNOWN_NODE_NAME, '/', b'\x03' * 16)
    assert publisher_node(clock) == '/swarm_mobility'
    assert publisher_node(agent) == '/uav3/agent_node'
    assert publisher_node(early) is None
    infos = [clock, agent, early]
    assert node_of_writer(b'\x02' * 16, infos) == '/uav3/agent_node'
    # Before the graph names its node (its first /clock can come first on a busy machine) a
    # writer is neither ours nor another graph's; nor is one not discovered at all.
    assert node_of_writer(b'\x03' * 16, infos) is None
    assert node_of_writer(b'\x09' * 16, infos) is None
