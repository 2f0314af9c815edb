#!/usr/bin/env bash
# Create .venv with the ROS 2 Kilted wheels and this package (editable). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat setup.py requirements-ros.txt | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r requirements-ros.txt
  .venv/bin/python -m pip install --quiet -e '.[standalone,test,live]'
  rm -f .venv/.installed-*
  touch "$stamp"
fi
