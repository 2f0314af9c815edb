"""
A graph spread over processes: its clock counts a member's node only once that node spins.

The swarm mobility node holds ``/clock`` at 0 until every node of the run subscribes to it
(``listening_nodes``). A node's time source subscribes ``/clock`` as the node is made, before
the rest of its set-up: under load the clock ran while a node still built, and the target's
first message reached the bag 0.68 s into the run.

A member that makes readers later (the recorder) asks the others whether their writers are
matched with them (``Roster.call``): a member's answer means they are, and that a node on
simulated time hears the clock.
"""
import os

from rclpy.node import Node
from rclpy.parameter import Parameter
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64

from ros_support import participants
from ros_support.participants import (
    answer_calls, HEARD_SUFFIX, hears_clock, listening_nodes, participant_of, Roster)
from ros_support.topics import CLOCK_TOPIC

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


def test_a_member_answers_a_call_once_its_writers_are_matched_with_the_readers_before_it():
    topic = f'/_test_roster_call_{os.getpid()}'
    recorder = Outsider('recorder')  # the caller, with a reader made once the others are up
    node = Outsider('writer')  # another process's participant, with a writer
    try:
        asker, member = Roster(recorder.node, topic), Roster(node.node, topic)
        writer = node.node.create_publisher(Float64, '/_test_call_data', 10)
        wait_for(lambda: recorder.node.count_publishers('/_test_call_data') == 1,
                 "the writer in the recorder's graph")
        reader = recorder.node.create_subscription(Float64, '/_test_call_data',
                                                   lambda msg: None, 10)
        asker.call()
        matched_on_answer = wait_for(lambda: member.answer() and [
            writer.get_subscription_count()], "the member's answer")
        assert matched_on_answer == [1]  # the writer's side of the match, when it answered
        wait_for(lambda: asker.answered, 'the answer heard by the caller')
        assert asker.answered == {participant_of(
            recorder.node.get_publishers_info_by_topic('/_test_call_data')[0].endpoint_gid)}
        assert reader.get_publisher_count() == 1
    finally:
        node.close()
        recorder.close()


def test_a_node_on_simulated_time_answers_a_call_only_once_it_hears_the_clock(monkeypatch):
    """
    A node that answered before its time source heard a ``/clock`` writer would start late.

    Seen on a loaded machine: a target that had answered matched the clock's writer 0.25 s
    after the clock started, and published nothing before 0.51 s of the run.
    """
    monkeypatch.setattr(participants, 'REFRESH_PERIOD', 0.0)  # look at every call of answer()
    topic = f'/_test_roster_clock_{os.getpid()}'
    recorder = Outsider('recorder')  # the caller, also the clock's side here
    member = Outsider('_roster_member')
    built = None
    try:
        asker, other = Roster(recorder.node, topic), Roster(member.node, topic)
        built = Node('on_sim_time', context=member.context,
                     parameter_overrides=[Parameter('use_sim_time', value=True)])
        answer = answer_calls(built, other)
        asker.call()
        wait_for(lambda: member.node.count_subscribers(topic + HEARD_SUFFIX) == 1,
                 "the call in the member's graph")
        answer()
        assert not other.answered and not hears_clock(built)  # no /clock writer anywhere yet

        recorder.node.create_publisher(Clock, CLOCK_TOPIC, 10)

        def answered():
            answer()
            return other.answered
        wait_for(answered, "the member's answer once it hears the clock")
        assert hears_clock(built)
        wait_for(lambda: asker.answered == other.answered, 'the answer heard by the caller')
    finally:
        if built is not None:
            built.destroy_node()
        member.close()
        recorder.close()
