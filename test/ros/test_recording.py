"""
BagRecorder with real rclpy/DDS.

Messages published in-process are recorded and read back with two independent readers (rosbags and
mcap-ros2-support).
"""

from builtin_interfaces.msg import Time
from geometry_msgs.msg import Twist
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from nav_msgs.msg import Odometry
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.highlevel import AnyReader
from rosgraph_msgs.msg import Clock
from std_msgs.msg import Float64
import yaml

from soliton_encirclement_ros.recording.recorder import (
    BagRecorder, DEFAULT_TOPICS_REGEX, recording_line, SUBSCRIPTION_DEPTH)
from support.harness import spin_until
from support.senders import NAMES_SENDER, NO_SENDER

SIM_START = 100.0
COUNT = 25
WAIT = 10.0  # upper bound for DDS discovery/delivery; tests normally proceed far sooner


@pytest.fixture
def graph():
    rclpy.init()
    executor = SingleThreadedExecutor()
    publisher_node = rclpy.create_node('test_publisher')
    recorder_node = rclpy.create_node(
        'test_recorder', parameter_overrides=[Parameter('use_sim_time', value=True)])
    executor.add_node(publisher_node)
    executor.add_node(recorder_node)
    yield executor, publisher_node, recorder_node
    executor.shutdown()
    publisher_node.destroy_node()
    recorder_node.destroy_node()
    rclpy.shutdown()


def odometry(i):
    msg = Odometry()
    msg.header.frame_id = 'world'
    msg.child_frame_id = 'uav1/base_link'
    msg.pose.pose.position.x = float(i)
    msg.pose.pose.orientation.w = 1.0
    msg.twist.twist.linear.x = 0.5 * i
    return msg


def record_some(graph, bag, storage):
    executor, pub_node, rec_node = graph
    latched = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.TRANSIENT_LOCAL)
    clock = pub_node.create_publisher(Clock, '/clock', 10)
    odom = pub_node.create_publisher(Odometry, '/uav1/odom', 10)
    cmd = pub_node.create_publisher(Twist, '/uav1/cmd_vel', 10)
    metric = pub_node.create_publisher(Float64, '/swarm/metrics/E_r', latched)
    ignored = pub_node.create_publisher(Float64, '/uav1/battery', 10)
    recorder = BagRecorder(rec_node, bag, storage=storage)
    recorded = {'/clock', '/uav1/odom', '/uav1/cmd_vel', '/swarm/metrics/E_r'}
    assert spin_until(executor, lambda: set(recorder.topics) == recorded, WAIT,
                      each=recorder.discover)
    assert spin_until(executor, lambda: all(
        p.get_subscription_count() for p in (clock, odom, cmd, metric)))
    clock.publish(Clock(clock=Time(sec=int(SIM_START))))
    assert spin_until(executor, lambda: rec_node.get_clock().now().nanoseconds >= SIM_START * 1e9)
    for i in range(COUNT):
        odom.publish(odometry(i))
        cmd.publish(Twist())
        metric.publish(Float64(data=0.1 * i))
        ignored.publish(Float64(data=1.0))
        executor.spin_once(timeout_sec=0.0)
    expected = {'/clock': 1, '/uav1/odom': COUNT, '/uav1/cmd_vel': COUNT,
                '/swarm/metrics/E_r': COUNT}
    assert spin_until(executor, lambda: recorder.message_counts == expected)
    recorder.close()
    recorder.close()  # idempotent
    assert recorder.closed and recorder.message_counts == expected
    assert recorder.missed == {} and recorder.missed_line == ''  # every message is in the bag
    return expected


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_recorded_bag_round_trips_through_rosbags(graph, tmp_path, storage):
    bag = tmp_path / 'bag'
    expected = record_some(graph, bag, storage)
    with AnyReader([bag]) as reader:
        assert {t: i.msgcount for t, i in reader.topics.items()} == expected
        assert reader.topics['/uav1/odom'].msgtype == 'nav_msgs/msg/Odometry'
        assert reader.topics['/clock'].msgtype == 'rosgraph_msgs/msg/Clock'
        odom = [(t, reader.deserialize(raw, c.msgtype)) for c, t, raw in reader.messages(
            [c for c in reader.connections if c.topic == '/uav1/odom'])]
    assert [m.pose.pose.position.x for _, m in odom] == [float(i) for i in range(COUNT)]
    assert [m.twist.twist.linear.x for _, m in odom] == [0.5 * i for i in range(COUNT)]
    assert odom[0][1].child_frame_id == 'uav1/base_link'
    # Log time is the recording node's clock: sim time, published as 100 s.
    assert all(SIM_START * 1e9 <= t < (SIM_START + 1) * 1e9 for t, _ in odom)

    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert info['version'] == 9
    assert info['storage_identifier'] == storage
    assert info['message_count'] == sum(expected.values())
    assert info['relative_file_paths'] == [f'bag.{"mcap" if storage == "mcap" else "db3"}']
    topics = {t['topic_metadata']['name']: t for t in info['topics_with_message_count']}
    assert {name: t['message_count'] for name, t in topics.items()} == expected
    metric = topics['/swarm/metrics/E_r']['topic_metadata']
    assert metric['type'] == 'std_msgs/msg/Float64'
    assert metric['serialization_format'] == 'cdr'
    assert metric['type_description_hash'].startswith('RIHS01_')
    qos, = metric['offered_qos_profiles']  # one publisher, as it offered
    assert qos['reliability'] == 'reliable' and qos['durability'] == 'transient_local'


def test_recorded_mcap_reads_with_mcap_ros2_support(graph, tmp_path):
    bag = tmp_path / 'bag'
    record_some(graph, bag, 'mcap')
    with (bag / 'bag.mcap').open('rb') as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        messages = list(reader.iter_decoded_messages(topics=['/swarm/metrics/E_r']))
        assert reader.get_header().profile == 'ros2'
    assert [m.decoded_message.data for m in messages] == pytest.approx(
        [0.1 * i for i in range(COUNT)])
    assert messages[0].schema.name == 'std_msgs/msg/Float64'
    assert messages[0].schema.encoding == 'ros2msg'
    assert messages[0].channel.message_encoding == 'cdr'


@pytest.mark.skipif(not NAMES_SENDER, reason=NO_SENDER + ' (the recorder numbers each '
                    "publisher's messages)")
def test_messages_that_never_reached_the_bag_are_counted_and_said(graph, tmp_path):
    # A recorder that does not keep up loses what falls out of its subscription's queue; the
    # publishers number their messages, so the bag says how many it misses.
    executor, pub_node, rec_node = graph
    odom = pub_node.create_publisher(Odometry, '/uav1/odom', 10)
    bag = tmp_path / 'bag'
    recorder = BagRecorder(rec_node, bag)
    assert spin_until(executor, lambda: recorder.topics == ['/uav1/odom'], WAIT,
                      each=recorder.discover)
    assert spin_until(executor, lambda: odom.get_subscription_count())
    odom.publish(odometry(0))
    assert spin_until(executor, lambda: recorder.message_counts == {'/uav1/odom': 1})
    published = 1 + 10 * SUBSCRIPTION_DEPTH
    for i in range(1, published):  # nothing takes them meanwhile: the queue keeps the last
        odom.publish(odometry(i))

    def accounted() -> int:
        return recorder.message_counts['/uav1/odom'] + recorder.missed.get('/uav1/odom', 0)
    assert spin_until(executor, lambda: accounted() == published), accounted()
    recorded = recorder.message_counts['/uav1/odom']
    assert recorded <= 1 + SUBSCRIPTION_DEPTH
    recorder.close()
    assert recorder.missed_line == (
        f'bag {bag} misses {published - recorded} of the {published} messages published on '
        f'its topics while it recorded, from t=0.00 s (most on /uav1/odom: '
        f'{published - recorded}); the recorder did not keep up with them')


@pytest.mark.skipif(not NAMES_SENDER, reason=NO_SENDER + ' (the recorder numbers each '
                    "publisher's messages)")
@pytest.mark.parametrize('from_first', [False, True], ids=['joining', 'starting_with'])
def test_a_run_that_starts_with_the_bag_says_what_of_its_start_the_bag_missed(
        graph, tmp_path, from_first):
    # A bag that joins a graph already publishing records from what it first hears; a run whose
    # publishers start with the recording (swarm_sim --processes) expects each from its first
    # message, and what came before the first in the bag is counted and said.
    executor, pub_node, rec_node = graph
    odom = pub_node.create_publisher(Odometry, '/uav1/odom', 10)
    for i in range(3):  # before any reader: lost for the bag
        odom.publish(odometry(i))
    bag = tmp_path / 'bag'
    recorder = BagRecorder(rec_node, bag)
    assert spin_until(executor, lambda: recorder.topics == ['/uav1/odom'], WAIT,
                      each=recorder.discover)
    assert spin_until(executor, lambda: odom.get_subscription_count())
    if from_first:
        recorder.expect_first_messages()
    odom.publish(odometry(3))
    odom.publish(odometry(4))
    assert spin_until(executor, lambda: recorder.message_counts == {'/uav1/odom': 2})
    recorder.close()
    if not from_first:
        assert recorder.missed == {} and recorder.missed_line == ''
        return
    assert recorder.missed == {'/uav1/odom': 3}
    assert recorder.missed_line == (
        f'bag {bag} misses 3 of the 5 messages published on its topics while it recorded, '
        'from t=0.00 s (most on /uav1/odom: 3); the recorder did not keep up with '
        'them')


def test_default_regex_selects_the_run_topics():
    import re
    pattern = re.compile(DEFAULT_TOPICS_REGEX)
    for topic in ['/uav1/odom', '/uav12/cmd_vel', '/swarm/agent_states', '/target/odom',
                  '/target/state', '/swarm/metrics/E_gap', '/swarm/markers', '/clock']:
        assert pattern.search(topic), topic
    for topic in ['/uav1/battery', '/swarm/markers_old', '/rosout', '/a/b/odom',
                  '/parameter_events']:
        assert not pattern.search(topic), topic


def test_bad_arguments_are_refused_by_name(graph, tmp_path):
    _, _, node = graph
    with pytest.raises(ValueError, match="storage must be one of .*'bag2'"):
        BagRecorder(node, tmp_path / 'a', storage='bag2')
    with pytest.raises(ValueError, match="compression must be one of .*'lz5'"):
        BagRecorder(node, tmp_path / 'd', compression='lz5')
    with pytest.raises(ValueError, match="topics_regex '\\(' is not a regular expression"):
        BagRecorder(node, tmp_path / 'b', topics_regex='(')
    (tmp_path / 'c').mkdir()
    with pytest.raises(FileExistsError, match='exists already'):
        BagRecorder(node, tmp_path / 'c')


def test_the_topics_recorded_are_named_in_one_grouped_line():
    topics = {f'/uav{i}/{leaf}': msgtype for i in range(1, 11) for leaf, msgtype in
              (('odom', 'nav_msgs/msg/Odometry'), ('cmd_vel', 'geometry_msgs/msg/Twist'))}
    topics.update({f'/swarm/metrics/{m}': 'std_msgs/msg/Float64' for m in ('E_r', 'rho')})
    topics.update({'/clock': 'rosgraph_msgs/msg/Clock', '/target/odom': 'nav_msgs/msg/Odometry',
                   '/uav12/odom': 'nav_msgs/msg/Odometry'})
    assert recording_line(topics) == (
        'recording 25 topics: /clock [rosgraph_msgs/msg/Clock], '
        '/swarm/metrics/{E_r,rho} [std_msgs/msg/Float64], /target/odom [nav_msgs/msg/Odometry], '
        '/uav{1,2,3,4,5,6,7,8,9,10,12}/odom [nav_msgs/msg/Odometry], '
        '/uav{1..10}/cmd_vel [geometry_msgs/msg/Twist]')
    assert recording_line({'/uav1/odom': 'nav_msgs/msg/Odometry'}) == \
        'recording 1 topic: /uav1/odom [nav_msgs/msg/Odometry]'
