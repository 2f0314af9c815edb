"""
Run analysis: metrics recomputed from any recorded bag, published series, outputs and plots.

    from soliton_encirclement_ros.analysis import metrics_from_bag, summarise
"""
from soliton_encirclement_ros.analysis.recompute import (
    load_run, metrics_from_bag, published_metrics, recompute_metrics, RunDataError)
from soliton_encirclement_ros.analysis.report import RunResult, summarise, write_run_outputs

__all__ = ['load_run', 'metrics_from_bag', 'published_metrics', 'recompute_metrics',
           'RunDataError', 'RunResult', 'summarise', 'write_run_outputs']
