"""
What differs between the ROS 2 distributions this package runs on, in one place (no rclpy).

Kilted and Jazzy are supported and tested (Kilted's Fast DDS is 3.2, Jazzy's 2.14). Code that
meets a difference asks :func:`current` instead of branching on a version itself:

- ``fastdds discovery`` (Fast DDS's CLI): 2.x wants a server id (``-i 0``) and says
  ``Server is running`` once it serves; 3.x takes none and says ``Server started``.
- Fast DDS XML profiles: the same ``<dds>`` file parses in both, but 2.x reads it from
  ``FASTRTPS_DEFAULT_PROFILES_FILE`` only, 3.x from ``FASTDDS_DEFAULT_PROFILES_FILE`` (Kilted's
  RMW still reads the old name, with a deprecation warning). 2.x logs its errors on stdout.
- rclpy's message info: Kilted's names the publisher (``publisher_gid``), so a graph tells its own
  messages from another graph's; Jazzy's (rclpy 7) does not, so a message from outside the graph
  cannot be told apart by its sender there.

The distribution is the one whose rclpy this interpreter imports: a pip install names it by the
``ros-rclpy`` wheel's version; a ROS install (apt, colcon) by ``ROS_DISTRO``, which its
``setup.bash`` exports. Humble (Fast DDS 2.6) is described like Jazzy but is not tested.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
import os


@dataclass(frozen=True)
class FastDds:
    """The Fast DDS generation a distribution ships: its discovery CLI and profile variable."""

    major: int
    profiles_variable: str  # the environment variable it reads an XML profile file from
    server_started: str     # what ``fastdds discovery`` prints once the server runs
    server_id: bool         # ``fastdds discovery`` needs ``-i ID``

    def discovery_server(self, fastdds: str, address: str, port: int) -> list[str]:
        """Return the command that runs a Discovery Server listening on ``address:port``."""
        ids = ['-i', '0'] if self.server_id else []
        return [fastdds, 'discovery', *ids, '-l', address, '-p', str(port)]

    def profile_environment(self, path: str) -> dict[str, str]:
        """Return the environment that makes this Fast DDS load the XML profiles in ``path``."""
        return {self.profiles_variable: path}


FAST_DDS_2 = FastDds(2, 'FASTRTPS_DEFAULT_PROFILES_FILE', 'Server is running', server_id=True)
FAST_DDS_3 = FastDds(3, 'FASTDDS_DEFAULT_PROFILES_FILE', 'Server started', server_id=False)


@dataclass(frozen=True)
class Distro:
    """One ROS 2 distribution, as far as this package meets its differences."""

    name: str
    fast_dds: FastDds
    message_info_names_publisher: bool  # rclpy's MessageInfo carries ``publisher_gid``
    tested: bool                        # the suite runs on it (scripts/test.sh, CI)


DISTROS = {
    'humble': Distro('humble', FAST_DDS_2, message_info_names_publisher=False, tested=False),
    'jazzy': Distro('jazzy', FAST_DDS_2, message_info_names_publisher=False, tested=True),
    'kilted': Distro('kilted', FAST_DDS_3, message_info_names_publisher=True, tested=True),
}
NEWEST = 'kilted'  # a distribution newer than the table (Rolling): taken to be like this one
RCLPY_MAJOR = {3: 'humble', 7: 'jazzy', 9: 'kilted'}  # the ros-rclpy wheel's major version


def distro_name(rclpy_version: str | None, ros_distro: str | None) -> str:
    """Return the distribution of an rclpy wheel's version, else of ``ROS_DISTRO``'s value."""
    if rclpy_version:
        major = int(rclpy_version.split('.')[0])
        return RCLPY_MAJOR.get(major, NEWEST if major > max(RCLPY_MAJOR) else 'humble')
    return ros_distro if ros_distro in DISTROS else NEWEST


@lru_cache(maxsize=1)
def current() -> Distro:
    """Return the distribution whose rclpy this interpreter imports."""
    try:
        version = metadata.version('ros-rclpy')
    except metadata.PackageNotFoundError:  # a ROS install: rclpy is no pip distribution
        version = None
    return DISTROS[distro_name(version, os.environ.get('ROS_DISTRO'))]
