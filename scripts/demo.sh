#!/usr/bin/env bash
# Set up (if needed), then the main job: 10 simulated UAVs encircle a target through a real
# ROS 2 graph for 60 sim-s; plots + summary in runs/demo, a rosbag2 (MCAP) in runs/demo-bag,
# and the bag's analysis (metrics recomputed from topics, dashboard, animation) in
# runs/demo-analysis. Extra arguments go to swarm_sim (e.g. --agents 16 --target-motion random).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "demo: set-up, then 10 UAVs for 60 sim-s (the first run installs the ROS 2 wheels into" \
     ".venv first: a few minutes, with pip's progress below)"
bash scripts/setup.sh
export ROS_AUTOMATIC_DISCOVERY_RANGE=${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}
rm -rf runs/demo-bag
.venv/bin/swarm_sim --agents 10 --duration 60 --control-period 0.05 --seed 0 --out runs/demo --record runs/demo-bag "$@"
.venv/bin/analyze_run runs/demo-bag --out runs/demo-analysis
echo "plots and summary: runs/demo   bag: runs/demo-bag   analysis and animation: runs/demo-analysis"
