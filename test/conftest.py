"""Test-wide ROS environment: DDS discovery stays on loopback, and every test module gets a
DDS domain of its own, so a module never sees the graph (or stale discovery data) of another
module or of another test run on the machine. rclpy reads the variables at ``rclpy.init``;
subprocesses started by tests inherit them."""
import itertools
import os

import pytest

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

# Fast DDS domain ids must stay below 233; 30 consecutive ids per pytest run.
_BASE_DOMAIN = 1 + (os.getpid() % 7) * 30
_module_domains = itertools.count()


@pytest.fixture(scope='module', autouse=True)
def ros_domain_per_module():
    previous = os.environ.get('ROS_DOMAIN_ID')
    os.environ['ROS_DOMAIN_ID'] = str(_BASE_DOMAIN + next(_module_domains) % 30)
    yield
    if previous is None:
        os.environ.pop('ROS_DOMAIN_ID', None)
    else:
        os.environ['ROS_DOMAIN_ID'] = previous
