#!/usr/bin/env bash
# Create .venv with the ROS 2 Kilted wheels and this package (editable). Idempotent: once
# installed, a run only checks a stamp (setup.py and requirements-ros.txt unchanged).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat setup.py requirements-ros.txt | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  echo "setup: installing the ROS 2 Kilted wheels and this package into .venv: the first run" \
       "takes a few minutes (3 here), later runs skip this step"
  # pip's own progress (one line per package, a bar per download) instead of minutes of silence
  pip=(.venv/bin/python -m pip install --progress-bar on --disable-pip-version-check)
  echo "setup: [1/3] pip"
  "${pip[@]}" --quiet --upgrade pip
  echo "setup: [2/3] ROS 2 Kilted wheels (requirements-ros.txt)"
  "${pip[@]}" -r requirements-ros.txt
  echo "setup: [3/3] this package, its test tools, the live view and the docs tools"
  "${pip[@]}" -e '.[standalone,test,live,docs]'
  rm -f .venv/.installed-*
  touch "$stamp"
  echo "setup: done"
fi
