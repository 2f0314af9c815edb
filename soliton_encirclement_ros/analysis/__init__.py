"""
Run analysis: metrics recomputed from any recorded bag, published series, outputs and plots.

    from soliton_encirclement_ros.analysis import metrics_from_bag, summarise

The names are imported when first used: a run that only writes its outputs (batch_sim, a
sweep's runs) never loads the bag readers (rosbags, mcap).
"""
__all__ = ['load_run', 'metrics_from_bag', 'published_metrics', 'recompute_metrics',
           'RunDataError', 'RunResult', 'summarise', 'write_run_outputs']
_FROM = {'load_run': 'recompute', 'metrics_from_bag': 'recompute',
         'published_metrics': 'recompute', 'recompute_metrics': 'recompute',
         'RunDataError': 'recompute', 'RunResult': 'report', 'summarise': 'report',
         'write_run_outputs': 'report'}


def __getattr__(name: str):
    if name in _FROM:
        import importlib
        return getattr(importlib.import_module(f'{__name__}.{_FROM[name]}'), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
