"""A metrics table for the figure tests: exponential convergence over decades."""
import numpy as np

from soliton_encirclement_ros.core.metrics import METRIC_NAMES


def converging_metrics(duration=20.0, dt=0.1):
    """Exponential convergence over decades: E_gap < 0.05 from 4 s, E_r < 0.01 from 6 s."""
    t = np.arange(0.0, duration + 1e-9, dt)
    decay = np.exp(-t / 1.3)
    columns = {'E_r': 1.0 * decay, 'E_vr': 0.5 * decay, 'rho': 0.3 * decay, 'G_max': 1 + decay,
               'E_gap': 2.0 * decay * np.exp(-t / 6.0), 'd_min': 5.0 - decay}
    return np.column_stack([t] + [columns[name] for name in METRIC_NAMES])
