"""
A graph spread over processes: its clock counts a member's node only once that node spins.

The swarm mobility node holds ``/clock`` at 0 until every node of the run subscribes to it
(``listening_nodes``). A node's time source subscribes ``/clock`` as the node is made, before
the rest of its set-up: under load the clock ran while a node still built, and the target's
first message reached the bag 0.68 s into the run.
"""
import os

from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock

from ros_support.participants import listening_nodes, Roster
from support.outsider import Outsider
from support.waits import wait_for


def test_a_member_counts_for_the_clock_only_once_its_node_spins():
    topic = f'/_test_roster_{os.getpid()}'
    source = Outsider('clock_source')  # the clock's side, a member of the roster
    member = Outsider('_roster_member')  # another process's participant: its roster node...
    built = None
    try:
        roster = Roster(source.node, topic)
        roster.mark_ready()
        clock = source.node.create_publisher(Clock, '/clock', 10)
        other = Roster(member.node, topic)
        # ...and its real node, being made: its time source subscribes /clock already
        built = Node('slow_to_build', context=member.context,
                     parameter_overrides=[Parameter('use_sim_time', value=True)])

        def subscribed() -> bool:
            return any(info.node_name == 'slow_to_build'
                       for info in source.node.get_subscriptions_info_by_topic('/clock'))
        wait_for(lambda: subscribed() and len(roster.members) == 2,
                 "the member's /clock subscription and its place on the roster")
        assert listening_nodes(source.node, clock) == 0  # on the roster, but still building

        other.mark_ready()  # built: it spins from now on
        wait_for(lambda: listening_nodes(source.node, clock) == 1,
                 'the member counted once its node spins')
        assert roster.ready == roster.members
    finally:
        if built is not None:
            built.destroy_node()
        member.close()
        source.close()
