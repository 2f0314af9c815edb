"""
package.xml declares what the code imports (issue 24 §2).

So ``rosdep install --from-paths src`` on a ROS install leaves no ImportError.

Every ROS package imported by the installed code (its module names: ``*_msgs``,
``*_interfaces``, ``std_srvs``, ``rclpy``, ``launch*``, ``ament_index_python``) must be an
``exec_depend``, and so must the rosdep keys of the Python libraries that have one.
"""
import ast
from pathlib import Path
import xml.etree.ElementTree as ET

ROOT = Path(__file__).resolve().parents[2]
CODE = ['ros_support', 'velocity_mobility_ros', 'soliton_encirclement_ros', 'launch']
ROS_MODULES = ('rclpy', 'launch', 'launch_ros', 'ament_index_python', 'std_srvs')
NOT_DECLARED = {'px4_msgs'}  # built from source next to PX4 (docs/px4/index.md); imported at start
PIP_KEYS = {'rosbags': 'python3-rosbags-pip', 'mcap_ros2': 'mcap-ros2-support',
            'yaml': 'python3-yaml', 'numpy': 'python3-numpy', 'matplotlib': 'python3-matplotlib',
            'transforms3d': 'python3-transforms3d', 'PIL': 'python3-pil', 'tqdm': 'python3-tqdm',
            'scipy': 'python3-scipy', 'pymap3d': 'python3-pymap3d',
            'shapely': 'python3-shapely'}


def imported_modules() -> set[str]:
    names = set()
    for folder in CODE:
        for path in (ROOT / folder).rglob('*.py'):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split('.')[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split('.')[0])
    return names


def exec_depends() -> set[str]:
    root = ET.parse(ROOT / 'package.xml').getroot()
    return {e.text.strip() for e in root.iter() if e.tag in ('exec_depend', 'depend')}


def test_every_imported_ros_package_and_keyed_library_is_an_exec_depend():
    imported = imported_modules()
    ros = {m for m in imported if m.endswith(('_msgs', '_interfaces')) or m in ROS_MODULES}
    assert {'diagnostic_msgs', 'tf2_msgs', 'builtin_interfaces', 'ament_index_python'} <= ros
    wanted = (ros - NOT_DECLARED) | {key for module, key in PIP_KEYS.items()
                                     if module in imported}
    assert sorted(wanted - exec_depends()) == []


# The ROS packages package.xml may name: each is released for Humble, Jazzy and Kilted (ROS 2's
# core and common_interfaces, launch, ament_lint), so `rosdep install` resolves on all three.
IN_HUMBLE_JAZZY_AND_KILTED = {
    'rclpy', 'ament_index_python', 'builtin_interfaces', 'std_msgs', 'std_srvs',
    'geometry_msgs', 'nav_msgs', 'visualization_msgs', 'rosgraph_msgs', 'diagnostic_msgs',
    'tf2_msgs', 'rcl_interfaces', 'launch', 'launch_ros', 'launch_pytest', 'ament_flake8',
    'ament_pep257'}


def test_package_xml_names_no_ros_package_newer_than_humble():
    root = ET.parse(ROOT / 'package.xml').getroot()
    named = {e.text.strip() for e in root if e.tag.endswith('depend')}
    ros = {n for n in named if not n.startswith('python3-') and n != 'mcap-ros2-support'}
    assert sorted(ros - IN_HUMBLE_JAZZY_AND_KILTED) == []
