"""What the sweep tests share: the impaired scenario, spec files, a sweep's rows."""
import csv
import math
from pathlib import Path

import numpy as np
import yaml

from soliton_encirclement_ros.sim.sweep import RESULT_COLUMNS

# Failures with outages shorter than the liveness timeouts, loss, delay and a moving target:
# everything that makes receivers disagree, so nothing here can hold by accident.
IMPAIRED = {'agents': 6, 'duration': 12.0, 'control_period': 0.05, 'target_motion': 'random',
            'failures_per_min': 8.0, 'failure_off_time': 0.1, 'loss': 0.2, 'delay': 0.05}


def write_spec(path: Path, **spec) -> Path:
    path.write_text(yaml.safe_dump(spec))
    return path


def rows(out: Path) -> list[dict]:
    with (out / 'runs.csv').open(newline='') as f:
        return list(csv.DictReader(f))


def results(row: dict) -> np.ndarray:
    return np.array([float(row[c]) if row[c] else math.nan for c in RESULT_COLUMNS])
