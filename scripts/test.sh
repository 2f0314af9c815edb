#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite with real rclpy, on one ROS 2 distribution:
#   bash scripts/test.sh                      # ROS 2 Kilted (.venv)
#   ROS_DISTRO=jazzy bash scripts/test.sh     # ROS 2 Jazzy (.venv-jazzy)
# (scripts/ros_distro.sh: another ROS_DISTRO is refused with exit 2). Extra arguments go to pytest.
# Quick tests first (unit, ros, launch, then the minutes-long acceptance tests: test/conftest.py).
# Each test module runs in a DDS domain of its own on loopback, whatever ROS_DOMAIN_ID the shell
# exports; test/ros/test_exported_domain.py checks that with a swarm live in an exported domain.
# Under load: scripts/test_under_load.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ros_distro.sh
bash scripts/setup.sh
# Two workers (pytest-xdist), one per core of the 2-core machines this runs on: each test module
# still holds a DDS domain of its own (test/conftest.py's lock files work across processes), and
# the tests wait on conditions, so they do not race. `-n 0` after the command runs them in one.
echo "test: ROS 2 ${ROS_WHEELS^} ($VENV)"
exec "$VENV/bin/python" -m pytest -q -n 2 --durations=25 "$@"  # testpaths (setup.cfg): test/; the 25 slowest listed
