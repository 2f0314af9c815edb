"""Test-wide ROS environment: keep DDS discovery on loopback and give each pytest session
its own domain, so parallel test runs (and other ROS graphs on the machine) never cross-talk.
Set before any test imports rclpy; subprocesses started by tests inherit it."""
import os

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('ROS_DOMAIN_ID', str(1 + os.getpid() % 100))
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')
