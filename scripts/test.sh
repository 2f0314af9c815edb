#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite with real rclpy, on one ROS 2 distribution:
#   bash scripts/test.sh                      # ROS 2 Kilted (.venv)
#   ROS_DISTRO=jazzy bash scripts/test.sh     # ROS 2 Jazzy (.venv-jazzy)
#   ROS_DISTRO=jazzy bash scripts/test.sh --distribution-tests   # what CI runs on Jazzy
# (scripts/ros_distro.sh: another ROS_DISTRO is refused with exit 2). Extra arguments go to pytest.
# --distribution-tests runs only the tests of code that differs between distributions: the unit,
# ros and launch tiers (rclpy, DDS, Fast DDS tools, launch) and, of the acceptance tier, the
# shared-domain tests (a graph tells another graph's messages by their sender, which only
# Kilted's rclpy names). The rest of the acceptance tier runs the same code on either: CI runs
# it once, on Kilted (`ROS_DISTRO=jazzy bash scripts/test.sh` runs the whole suite on Jazzy).
# Quick tests first (unit, ros, launch, then the minutes-long acceptance tests: test/conftest.py).
# Each test module runs in a DDS domain of its own on loopback, whatever ROS_DOMAIN_ID the shell
# exports; test/ros/test_exported_domain.py checks that with a swarm live in an exported domain.
# Under load: scripts/test_under_load.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ros_distro.sh
if [[ ${1:-} == --distribution-tests ]]; then
  shift
  set -- test/unit test/ros test/launch test/acceptance/test_shared_domain_acceptance.py "$@"
fi
bash scripts/setup.sh
# Two workers (pytest-xdist), one per core of the 2-core machines this runs on: each test module
# still holds a DDS domain of its own (test/conftest.py's lock files work across processes), and
# the tests wait on conditions, so they do not race. `-n 0` after the command runs them in one.
echo "test: ROS 2 ${ROS_WHEELS^} ($VENV)"
exec "$VENV/bin/python" -m pytest -q -n 2 --durations=25 "$@"  # testpaths (setup.cfg): test/; the 25 slowest listed
