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
        (f'share/{PACKAGE}/config',
         glob('config/*.yaml') + glob('config/*.rviz') + glob('config/*.json')),
    ],
    package_data={PACKAGE: ['config/*.yaml']},
    # In a ROS workspace the dependencies come from package.xml (rosdep); pip-only machines
    # install the 'standalone' extra (scripts/setup.sh does). rosbags and mcap-ros2-support
    # (which brings mcap) come from rosdep's pip rules; dask has no rosdep key: a ROS install
    # gets it with `pip install "dask[distributed]"`. numba compiles the batch engine's tick
    # (core.kernels); without it that engine runs its numpy path (same results, slower).
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='soliton_encirclement_ros maintainers',
    maintainer_email='maintainers@soliton-encirclement.invalid',
    description='Velocity mobility model and soliton encirclement for UAV swarms (ROS 2).',
    license='Apache-2.0',
    extras_require={
        'standalone': ['numpy', 'transforms3d', 'pyyaml', 'matplotlib', 'rosbags', 'mcap',
                       'mcap-ros2-support', 'pillow', 'tqdm', 'dask[distributed]', 'scipy',
                       'pymap3d', 'shapely', 'jinja2', 'numba'],
        # The live view (swarm_sim --foxglove, live_view): Foxglove's SDK and, for its headless
        # client (soliton_encirclement_ros.live.client, the CI test), websockets.
        'live': ['foxglove-sdk', 'websockets'],
        # The linters and the flake8 plugins a ROS install gives ament_flake8 (its rosdep keys);
        # pytest-xdist runs the suite on two workers (scripts/test.sh).
        'test': ['pytest', 'pytest-xdist', 'hypothesis', 'ros-ament-flake8', 'ros-ament-pep257',
                 'flake8', 'flake8-blind-except', 'flake8-builtins', 'flake8-class-newline',
                 'flake8-comprehensions', 'flake8-deprecated', 'flake8-docstrings',
                 'flake8-import-order', 'flake8-quotes'],
        # The docs site (scripts/docs.sh, and the strict build the suite runs): MkDocs with the
        # Material theme and mkdocstrings for the API reference, pinned so the site builds the
        # same everywhere.
        'docs': ['mkdocs==1.6.1', 'mkdocs-material==9.6.23', 'mkdocstrings==0.30.1',
                 'mkdocstrings-python==1.18.2'],
    },
    entry_points={
        # Every executable starts in ros_support.entry: a stop handler before the heavy
        # imports (its EXECUTABLES says which module's main() each one runs).
        'console_scripts': [
            f'{name} = ros_support.entry:{name}' for name in (
                'mobility_node', 'swarm_mobility_node', 'agent_node', 'target_node',
                'metrics_node', 'run_recorder', 'sweep_sim', 'swarm_sim', 'batch_sim',
                'analyze_run', 'fit_mobility', 'px4_bridge_node', 'live_view', 'fleet',
                'fleet_node', 'px4_sitl_rehearsal')
        ],
    },
)
