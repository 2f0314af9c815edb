"""Which distribution an rclpy is, and the Fast DDS commands and variables each one gets."""
from ros_support import distro


def test_a_pip_install_is_named_by_its_rclpy_wheel_and_a_ros_install_by_ros_distro():
    assert distro.distro_name('7.1.6', None) == 'jazzy'
    assert distro.distro_name('9.1.2', 'jazzy') == 'kilted'  # the wheel is what is imported
    assert distro.distro_name('10.0.1', None) == 'kilted'    # newer (Rolling): like the newest
    assert distro.distro_name(None, 'jazzy') == 'jazzy'
    assert distro.distro_name(None, 'humble') == 'humble'
    assert distro.distro_name(None, None) == 'kilted'
    assert not distro.DISTROS['humble'].tested


def test_each_fast_dds_generation_gets_its_own_discovery_command_and_profile_variable():
    jazzy, kilted = distro.DISTROS['jazzy'].fast_dds, distro.DISTROS['kilted'].fast_dds
    assert jazzy.discovery_server('fastdds', '10.0.0.1', 11811) == [
        'fastdds', 'discovery', '-i', '0', '-l', '10.0.0.1', '-p', '11811']
    assert kilted.discovery_server('fastdds', '10.0.0.1', 11811) == [
        'fastdds', 'discovery', '-l', '10.0.0.1', '-p', '11811']
    assert jazzy.profile_environment('/p.xml') == {'FASTRTPS_DEFAULT_PROFILES_FILE': '/p.xml'}
    assert kilted.profile_environment('/p.xml') == {'FASTDDS_DEFAULT_PROFILES_FILE': '/p.xml'}
