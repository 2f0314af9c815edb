#!/usr/bin/env bash
# Run the test suite while two CPU spinners keep both cores busy (a loaded laptop, CI on a busy
# machine): the tests wait on conditions, never on fixed sleeps, so they must pass here too.
#   bash scripts/test_under_load.sh [pytest arguments]   (default: the whole suite)
#   SPINNERS=4 bash scripts/test_under_load.sh test/ros
# The spinners are always stopped, whatever happens to the run (exit, Ctrl-C, error).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
spinners=()
stop_spinners() {
  for pid in "${spinners[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${spinners[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
}
trap stop_spinners EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "${SPINNERS:-2}"); do
  # Spins while its parent (this script) lives: even a kill -9 of the script stops it.
  .venv/bin/python -c $'import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass' &
  spinners+=($!)
done
echo "test_under_load: ${#spinners[@]} spinners (pids ${spinners[*]}); load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
status=0
.venv/bin/python -m pytest -q "$@" || status=$?
echo "test_under_load: pytest exit $status in $(( $(date +%s) - start )) s with ${#spinners[@]} spinners; load $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$status"
