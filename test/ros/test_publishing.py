"""
A sample the middleware refuses is dropped and said once per topic; the node steps on.

rcl refuses every publish once its context is invalid: a real refusal, the same ``RCLError`` a
Fast DDS writer raises when its history is full of samples it cannot send ("cannot publish
data"), which cannot be brought about on demand.
"""
import rclpy
from rclpy.context import Context
from std_msgs.msg import String

from ros_support.publishing import Publishing
from velocity_mobility_ros.nodes.mobility_node import MobilityNode


class Said:
    """A logger that keeps what it is told."""

    def __init__(self):
        self.warnings = []

    def warning(self, text):
        self.warnings.append(text)


def refusing_context():
    """Return a context whose rcl side can be made to refuse every publish."""
    context = Context()
    rclpy.init(context=context)
    return context


def close(context, node):
    node.destroy_node()
    try:
        context.try_shutdown()
    except Exception:  # the rcl context is already shut down: nothing left to close
        pass


def test_a_refused_sample_is_dropped_counted_and_said_once_per_topic():
    context = refusing_context()
    node = rclpy.create_node('publishing_test', context=context)
    try:
        said = Said()
        publish = Publishing(said)
        first, second = (node.create_publisher(String, topic, 10) for topic in ('a', 'b'))
        assert publish(first, String(data='sent')) is True
        assert said.warnings == [] and not publish.dropped
        context.handle.shutdown()  # rcl refuses from now on
        assert [publish(first, String(data=str(i))) for i in range(3)] == [False] * 3
        assert publish(second, String(data='x')) is False
        assert publish.dropped == {'/a': 3, '/b': 1}
        assert len(said.warnings) == 2, said.warnings
        for topic, text in zip(('/a', '/b'), said.warnings):
            assert text.startswith(f'{topic}: the middleware refused a sample (')
            assert "publisher's context is invalid" in text and '\n' not in text
            assert 'publisher.c' not in text  # rcl's source location is left out
    finally:
        close(context, node)


def test_a_mobility_node_whose_odometry_is_refused_steps_on():
    context = refusing_context()
    node = MobilityNode(namespace='refused', context=context)
    try:
        steps = node._decimation  # one odometry sample per call
        node._step_to(10_000_000, steps)
        context.handle.shutdown()
        before = node._steps
        for k in range(2, 5):
            node._step_to(k * 10_000_000 * steps, steps)
        assert node._steps == before + 3 * steps
        assert node._publish.dropped == {'/refused/odom': 3}
    finally:
        close(context, node)
