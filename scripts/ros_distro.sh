# Sourced by the scripts (not run): which ROS 2 distribution's PyPI wheels, in which venv.
# ROS_DISTRO picks it, as a sourced ROS shell exports it: unset, empty or kilted gives Kilted in
# .venv; jazzy gives Jazzy in .venv-jazzy. Sets ROS_WHEELS (the distribution), VENV and
# REQUIREMENTS; any other value is refused (exit 2): no other distribution has wheels on PyPI.
ROS_WHEELS=${ROS_DISTRO:-kilted}
case "$ROS_WHEELS" in
  kilted) VENV=.venv ;;
  jazzy) VENV=.venv-jazzy ;;
  *)
    echo "ROS_DISTRO=$ROS_WHEELS has no ROS 2 wheels here: supported are kilted (the default," \
         ".venv) and jazzy (.venv-jazzy); on another ROS install build with colcon" >&2
    exit 2 ;;
esac
REQUIREMENTS=requirements-ros-$ROS_WHEELS.txt
