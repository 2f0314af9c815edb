"""ament_python package: installs with colcon in a ROS 2 workspace or with pip alone."""
from glob import glob

from setuptools import find_packages, setup

PACKAGE = 'soliton_encirclement_ros'

setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(include=['ros_support*', 'velocity_mobility_ros*',
                                    'soliton_encirclement_ros*']),
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
        (f'share/{PACKAGE}/launch', glob('launch/*.launch.py')),
        (f'share/{PACKAGE}/config', glob('config/*.yaml') + glob('config/*.rviz')),
    ],
    package_data={PACKAGE: ['config/*.yaml']},
    # In a ROS workspace the dependencies come from package.xml (rosdep); pip-only machines
    # install the 'standalone' extra (scripts/setup.sh does). rosbags and mcap have no rosdep
    # key: a ROS install gets them with `pip install rosbags mcap mcap-ros2-support`.
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='soliton_encirclement_ros maintainers',
    maintainer_email='maintainers@soliton-encirclement.invalid',
    description='Velocity mobility model and soliton encirclement for UAV swarms (ROS 2).',
    license='Apache-2.0',
    extras_require={
        'standalone': ['numpy', 'transforms3d', 'pyyaml', 'matplotlib', 'rosbags', 'mcap',
                       'mcap-ros2-support', 'pillow', 'tqdm', 'dask[distributed]'],
        # The linters and the flake8 plugins a ROS install gives ament_flake8 (its rosdep keys).
        'test': ['pytest', 'hypothesis', 'ros-ament-flake8', 'ros-ament-pep257', 'flake8',
                 'flake8-blind-except', 'flake8-builtins', 'flake8-class-newline',
                 'flake8-comprehensions', 'flake8-deprecated', 'flake8-docstrings',
                 'flake8-import-order', 'flake8-quotes'],
    },
    entry_points={
        'console_scripts': [
            'mobility_node = velocity_mobility_ros.nodes.mobility_node:main',
            'swarm_mobility_node = velocity_mobility_ros.nodes.swarm_mobility_node:main',
            'agent_node = soliton_encirclement_ros.nodes.agent_node:main',
            'target_node = soliton_encirclement_ros.nodes.target_node:main',
            'metrics_node = soliton_encirclement_ros.nodes.metrics_node:main',
            'run_recorder = soliton_encirclement_ros.nodes.recorder_node:main',
            'sweep_sim = soliton_encirclement_ros.sim.sweep_cli:main',
            'swarm_sim = soliton_encirclement_ros.sim.runner:main',
            'batch_sim = soliton_encirclement_ros.sim.batch_sim:main',
            'analyze_run = soliton_encirclement_ros.analysis.cli:main',
            'px4_bridge_node = soliton_encirclement_ros.px4.bridge_node:main',
        ],
    },
)
