"""Whether this distribution's rclpy names a message's publisher: the tests that need it skip."""
from ros_support import distro

# Only then (Kilted's rclpy) can a graph tell another graph's messages by their sender.
NAMES_SENDER = distro.current().message_info_names_publisher
NO_SENDER = (f'rclpy on {distro.current().name} does not say which publisher sent a message: '
             'a graph cannot tell a message of another graph by its sender')
