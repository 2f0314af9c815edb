#!/usr/bin/env bash
# Create a venv with one ROS 2 distribution's wheels and this package (editable):
#   bash scripts/setup.sh                     # ROS 2 Kilted into .venv (requirements-ros-kilted.txt)
#   ROS_DISTRO=jazzy bash scripts/setup.sh    # ROS 2 Jazzy into .venv-jazzy (requirements-ros-jazzy.txt)
# ROS_DISTRO unset or kilted is Kilted; another value is refused (exit 2; scripts/ros_distro.sh).
# Idempotent: once installed, a run only checks a stamp (setup.py and the requirements unchanged).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ros_distro.sh
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
stamp=$VENV/.installed-$(cat setup.py "$REQUIREMENTS" | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: installing the ROS 2 ${ROS_WHEELS^} wheels and this package into $VENV: the" \
       "first run takes a few minutes (3 here), later runs skip this step"
  # pip's own progress (one line per package, a bar per download) instead of minutes of silence
  pip=("$VENV/bin/python" -m pip install --progress-bar on --disable-pip-version-check)
  echo "setup: [1/3] pip"
  "${pip[@]}" --quiet --upgrade pip
  echo "setup: [2/3] ROS 2 ${ROS_WHEELS^} wheels ($REQUIREMENTS)"
  "${pip[@]}" -r "$REQUIREMENTS"
  echo "setup: [3/3] this package, its test tools, the live view and the docs tools"
  # The pins hold here too: the extras' ROS wheels (ament's linters) stay this distribution's.
  "${pip[@]}" -c "$REQUIREMENTS" -e '.[standalone,test,live,docs]'
  rm -f "$VENV"/.installed-*
  touch "$stamp"
  echo "setup: done"
fi
# Byte-compile this package's sources: pip compiles what it installs, but not an editable
# install's tree, and where PYTHONDONTWRITEBYTECODE is set every run would compile each module it
# imports again (0.2 CPU-s of swarm_sim's start-up). Only changed files are compiled again.
"$VENV/bin/python" -m compileall -q ros_support soliton_encirclement_ros velocity_mobility_ros \
  >/dev/null
