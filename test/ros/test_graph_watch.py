"""
A run's look at the ROS graph for another swarm running beside it (``sim.domain.GraphWatch``).

Where rclpy does not name a message's publisher (Jazzy), this look is what tells a run that
another swarm got past the domain check beside it: another run's roster topic with two
publishers (``Claim.mark_running``). A run still at its own check (one publisher) and the run's
own roster are not another swarm.
"""
import os

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ros_support import distro
from soliton_encirclement_ros.sim.domain import Claim, GraphWatch
from support.waits import wait_for


def test_the_watch_finds_another_run_past_its_check_not_one_still_looking_nor_its_own():
    own, other = Claim(), Claim()
    context = Context()
    rclpy.init(args=[], context=context, signal_handler_options=SignalHandlerOptions.NO)
    node = Node('graph_watch_test', context=context)
    try:
        own.mark_running()
        watch = GraphWatch(own.topic, active=True)
        wait_for(lambda: node.count_publishers(own.topic) == 2
                 and node.count_publishers(other.topic) == 1, 'both claims to be discovered')
        assert watch.look(node, 1.0) == ''  # the other is still at its check; ours runs
        other.mark_running()
        wait_for(lambda: watch.look(node, 2.0), 'the watch to see the other run past its check')
        assert watch.found == f'the swarm started by process {os.getpid()} is running'
        assert watch.at == 2.0  # the sim time it was seen at
        assert GraphWatch(own.topic, active=False).look(node, 3.0) == ''
    finally:
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        context.destroy()
        own.close()
        other.close()


def test_the_watch_looks_only_where_rclpy_cannot_tell_another_graphs_messages_by_sender():
    assert GraphWatch('/_swarm_run_1_2_ab').active == \
        (not distro.current().message_info_names_publisher)
