"""
ros_support.distro describes the ROS 2 this interpreter runs (Kilted or Jazzy), checked on it.

The Discovery Server starts with the command it builds and says what it expects; the Fast DDS
of rclpy's RMW reads an XML profile from the variable it names; rclpy's message info names the
publisher exactly where it says so.
"""
import os
from pathlib import Path
import signal
import socket
import subprocess
import sys

import pytest

from ros_support import distro
from support.waits import Running, wait_for

FASTDDS = Path(sys.executable).parent / 'fastdds'
# A profile Fast DDS refuses (an element its transport descriptor does not have): the error it
# logs shows the file was read.
BROKEN_PROFILE = """<?xml version="1.0" encoding="UTF-8" ?>
<dds xmlns="http://www.eprosima.com">
  <profiles>
    <transport_descriptors>
      <transport_descriptor>
        <transport_id>broken</transport_id>
        <type>UDPv4</type>
        <notAnElement>1</notAnElement>
      </transport_descriptor>
    </transport_descriptors>
  </profiles>
</dds>
"""
NODE = 'import rclpy; rclpy.init(); rclpy.create_node("profile_probe"); rclpy.shutdown()'


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def test_the_distribution_is_the_one_whose_rclpy_is_installed():
    here = distro.current()
    assert here.tested and here.name in ('jazzy', 'kilted')
    if os.environ.get('ROS_DISTRO') in ('jazzy', 'kilted'):  # scripts/test.sh's choice
        assert here.name == os.environ['ROS_DISTRO']


@pytest.mark.skipif(not FASTDDS.exists(), reason=f'no Fast DDS CLI at {FASTDDS}')
def test_the_discovery_server_starts_with_the_distribution_s_command():
    fast_dds = distro.current().fast_dds
    env = {**os.environ, 'PATH': f'{FASTDDS.parent}{os.pathsep}{os.environ.get("PATH", "")}'}
    command = fast_dds.discovery_server(str(FASTDDS), '127.0.0.1', free_udp_port())
    # Its own session: the CLI (a shell script running Python running the server) is stopped
    # as one process group.
    with Running(command, env=env, start_new_session=True) as server:
        try:
            server.wait_for_line(fast_dds.server_started)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait()


def test_fast_dds_reads_the_profile_from_the_variable_named(tmp_path):
    fast_dds = distro.current().fast_dds
    profile = tmp_path / 'broken.xml'
    profile.write_text(BROKEN_PROFILE)
    env = {k: v for k, v in os.environ.items() if not k.endswith('_DEFAULT_PROFILES_FILE')}
    read = subprocess.run([sys.executable, '-c', NODE], capture_output=True, text=True,
                          timeout=120, env={**env, **fast_dds.profile_environment(str(profile))})
    # Fast DDS 2.x logs its errors on stdout, 3.x on stderr
    assert read.returncode == 0 and 'notAnElement' in read.stdout + read.stderr, read
    if fast_dds.major == 2:  # Fast DDS 2.x does not read 3.x's variable: the right one matters
        ignored = subprocess.run(
            [sys.executable, '-c', NODE], capture_output=True, text=True, timeout=120,
            env={**env, **distro.FAST_DDS_3.profile_environment(str(profile))})
        assert ignored.returncode == 0 and 'notAnElement' not in ignored.stdout + ignored.stderr


def test_the_message_info_names_the_publisher_where_the_distribution_says_so():
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Empty
    context = Context()
    rclpy.init(context=context)
    try:
        node = Node('message_info_probe', context=context)
        infos = []
        node.create_subscription(Empty, '/message_info_probe', lambda _, info: infos.append(info),
                                 10)
        pub = node.create_publisher(Empty, '/message_info_probe', 10)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def heard():
            pub.publish(Empty())
            executor.spin_once(timeout_sec=0.05)
            return infos
        wait_for(heard, 'the probe to hear itself')
        named = 'publisher_gid' in infos[0]
        assert named == distro.current().message_info_names_publisher, infos[0]
    finally:
        rclpy.try_shutdown(context=context)
