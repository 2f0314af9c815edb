"""
Test-wide ROS environment: every test module has a DDS graph of its own.

Whatever the shell exports, each test module runs in a DDS domain that no other test module,
no other test run on this machine and not the user's own domain holds (an ``flock`` on a file
per domain id), with discovery on loopback (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``,
forced). So a test never hears another test's graph, stale discovery data, or a swarm the user
is running in an exported ``ROS_DOMAIN_ID`` (issue 27). The variables that could join another
graph (``ROS_STATIC_PEERS``, ``ROS_LOCALHOST_ONLY``, Fast DDS's discovery server) are removed.
Only a test explicitly about the user's domain asks for the ``user_ros_domain`` fixture.
rclpy reads the variables at ``rclpy.init``; subprocesses started by tests inherit them.

A test that leaves a process it started running fails, and the process is stopped, so the next
test starts on a clean graph. The suite runs the quick tests first (unit, then ros and launch,
then the minutes-long acceptance tests), so a failure shows early.
"""
import fcntl
import os
from pathlib import Path
import signal
import sys
import tempfile
import time

import pytest

from support.domain_range import suite_domain_ids, VARIABLE as DOMAINS_VARIABLE

# What the shell exported, kept aside: only ``user_ros_domain`` gives it back to a test.
USER_ENV = {name: os.environ.pop(name) for name in (
    'ROS_DOMAIN_ID', 'ROS_STATIC_PEERS', 'ROS_LOCALHOST_ONLY', 'ROS_DISCOVERY_SERVER',
    'ROS_SUPER_CLIENT') if name in os.environ}
os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
os.environ.setdefault('RMW_IMPLEMENTATION', 'rmw_fastrtps_cpp')

# Fast DDS domain ids must stay below 233; 0 (the default) and an exported id are the user's.
# SOLITON_TEST_DOMAINS=100-140 keeps the suite to those (support/domain_range.py).
try:
    _DOMAINS = suite_domain_ids(os.environ.get(DOMAINS_VARIABLE), USER_ENV.get('ROS_DOMAIN_ID'))
except ValueError as error:
    raise pytest.UsageError(str(error)) from None
_LOCK_DIR = os.path.join(tempfile.gettempdir(), 'soliton_encirclement_ros-test-domains')
_next_start = [os.getpid() % len(_DOMAINS)]

# Quick tests first: a directory's rank, then collection order (stable sort).
_ORDER = ('unit', 'ros', 'launch', 'acceptance')


def pytest_collection_modifyitems(session, config, items):
    def rank(item):
        parts = Path(str(item.fspath)).parts
        for index, name in enumerate(_ORDER):
            if name in parts:
                return index
        return len(_ORDER)
    items.sort(key=rank)


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
    raise RuntimeError(f'every DDS domain id the suite may take ({_DOMAINS[0]}..{_DOMAINS[-1]}'
                       f', {DOMAINS_VARIABLE}) is held by another test run')


@pytest.fixture(scope='module', autouse=True)
def ros_domain_per_module():
    """Hold a free DDS domain for the module; ``ROS_DOMAIN_ID`` names it meanwhile."""
    domain, handle = _lock_free_domain()
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    try:
        yield domain
    finally:
        os.environ.pop('ROS_DOMAIN_ID', None)
        handle.close()


@pytest.fixture
def user_ros_domain():
    """
    Give this test the user's own domain (an exported ``ROS_DOMAIN_ID``, else 0).

    Only for a test that is about the user's domain: it shares the graph of whatever the user
    runs there. The module's own domain is back after the test.
    """
    own = os.environ.get('ROS_DOMAIN_ID')
    user = USER_ENV.get('ROS_DOMAIN_ID', '0')
    os.environ['ROS_DOMAIN_ID'] = user
    try:
        yield int(user)
    finally:
        if own is None:
            os.environ.pop('ROS_DOMAIN_ID', None)
        else:
            os.environ['ROS_DOMAIN_ID'] = own


def _live_descendants(root: int) -> dict[int, str]:
    """{pid: command line} of the live (not zombie) processes descending from ``root``."""
    children = {}  # every process's stat is read (its parent), only a descendant's command line
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open(f'/proc/{name}/stat', 'rb') as stat:
                state, ppid = stat.read().rsplit(b')', 1)[1].split()[:2]
        except (OSError, ValueError, IndexError):
            continue
        if state not in (b'Z', b'X'):
            children.setdefault(int(ppid), []).append(int(name))
    found, frontier = {}, [root]
    while frontier:
        for pid in children.get(frontier.pop(), ()):
            if pid in found:
                continue
            try:
                with open(f'/proc/{pid}/cmdline', 'rb') as cmdline:
                    found[pid] = cmdline.read().replace(b'\0', b' ').decode(
                        errors='replace').strip()
            except OSError:  # it ended meanwhile
                continue
            frontier.append(pid)
    return found


def _default_context_ok() -> bool:
    """Whether rclpy's default context is initialised (only if a test imported rclpy)."""
    rclpy = sys.modules.get('rclpy')
    return rclpy is not None and rclpy.ok()


def _stop(pids, grace=10.0) -> None:
    for sig in (signal.SIGINT, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _live_descendants(os.getpid()).keys() & set(pids):
            time.sleep(0.1)


# multiprocessing's own helpers live as long as the interpreter that started them: not a graph.
_INTERPRETER_HELPERS = ('multiprocessing.forkserver', 'multiprocessing.resource_tracker')


@pytest.fixture(autouse=True)
def no_process_left_behind():
    """
    Fail a test that leaves a process it started, or rclpy's default context, running.

    A node left alive would be part of the next test's graph (the module's domain); the guard
    stops it. Processes and an rclpy started by module fixtures before the test are not the
    test's.
    """
    before = set(_live_descendants(os.getpid()))
    rclpy_was_up = _default_context_ok()
    yield
    if _default_context_ok() and not rclpy_was_up:
        import rclpy
        rclpy.try_shutdown()
        pytest.fail('left rclpy initialised after the test (now shut down): its nodes would be '
                    "in the next test's graph", pytrace=False)
    deadline = time.monotonic() + 10.0  # a process signalled at the end may still be exiting
    left = {}
    while time.monotonic() < deadline:
        left = {pid: cmd for pid, cmd in _live_descendants(os.getpid()).items()
                if pid not in before and not any(helper in cmd for helper in _INTERPRETER_HELPERS)}
        if not left:
            return
        time.sleep(0.1)
    _stop(list(left))
    pytest.fail('left running after the test (now stopped): '
                + '; '.join(f'{pid} {cmd[:120]}' for pid, cmd in left.items()), pytrace=False)
