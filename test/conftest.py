"""
Test-wide ROS environment.

DDS discovery stays on loopback. An exported ``ROS_DOMAIN_ID`` is kept as it is (every module
then shares it). Otherwise every test module gets a DDS domain of its own that no other test run
on this machine holds (an ``flock`` on a file per domain id), so a module never sees the graph,
or stale discovery data, of another module or of a concurrent test run. rclpy reads the
variables at ``rclpy.init``; subprocesses started by tests inherit them.
"""
import fcntl
import os
import tempfile

import pytest

os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

# Fast DDS domain ids must stay below 233; 0 is the user's default domain, so never taken here.
_DOMAINS = range(1, 233)
_LOCK_DIR = os.path.join(tempfile.gettempdir(), 'soliton_encirclement_ros-test-domains')
_USER_DOMAIN = os.environ.get('ROS_DOMAIN_ID')
_next_start = [os.getpid() % len(_DOMAINS)]


def _lock_free_domain():
    """(domain id, open lock file) of a domain no other test run on this machine holds."""
    os.makedirs(_LOCK_DIR, exist_ok=True)
    for offset in range(len(_DOMAINS)):
        index = (_next_start[0] + offset) % len(_DOMAINS)
        domain = _DOMAINS[index]
        handle = open(os.path.join(_LOCK_DIR, f'{domain}.lock'), 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _next_start[0] = index + 1  # the next module starts past this one (no stale discovery)
        return domain, handle
    raise RuntimeError(f'every DDS domain id in {_DOMAINS} is held by another test run')


@pytest.fixture(scope='module', autouse=True)
def ros_domain_per_module():
    if _USER_DOMAIN is not None:
        os.environ['ROS_DOMAIN_ID'] = _USER_DOMAIN
        yield
        return
    domain, handle = _lock_free_domain()
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    try:
        yield
    finally:
        os.environ.pop('ROS_DOMAIN_ID', None)
        handle.close()
