"""
Write config/foxglove_layout.json: the live view's Foxglove layout (foxglove-sdk's layout API).

A 3D panel of /swarm/markers (ring, trails, target, desired circle) and the odometry in the
world frame, plots of E_gap, E_r and d_min, and every agent's status (/diagnostics).

    .venv/bin/python scripts/foxglove_layout.py      # after changing a topic or a panel
"""
from pathlib import Path

import foxglove.layouts as fl

OUT = Path(__file__).resolve().parents[1] / 'config' / 'foxglove_layout.json'


def plot(title: str, names: list[str], label: str) -> fl.PlotPanel:
    return fl.PlotPanel(title=title, config=fl.PlotConfig(
        paths=[fl.PlotSeries(value=f'/swarm/metrics/{name}.data', label=name,
                             timestamp_method='receiveTime') for name in names],
        show_legend=True, y_axis_label=label, x_axis_val='timestamp'))


def layout() -> fl.Layout:
    three_d = fl.ThreeDeePanel(title='swarm (world frame)', config=fl.ThreeDeeConfig(
        follow_tf='world', fixed_frame='world', topics={
            '/swarm/markers': fl.BaseRendererRosMarkerTopicSettings(visible=True)}))
    plots = fl.SplitContainer(direction='column', items=[
        fl.SplitItem(proportion=1, content=plot('E_gap and E_r', ['E_gap', 'E_r'], '')),
        fl.SplitItem(proportion=1, content=plot('closest two agents', ['d_min'], 'm')),
    ])
    status = fl.DiagnosticsSummaryPanel(title="agents' and bridges' status",
                                        config=fl.DiagnosticsSummaryConfig(
                                            topic_to_render='/diagnostics',
                                            sort_by_level=True))
    right = fl.SplitContainer(direction='column', items=[
        fl.SplitItem(proportion=2, content=plots), fl.SplitItem(proportion=1, content=status)])
    return fl.Layout(content=fl.SplitContainer(direction='row', items=[
        fl.SplitItem(proportion=3, content=three_d), fl.SplitItem(proportion=2, content=right)]))


if __name__ == '__main__':
    import json
    OUT.write_text(json.dumps(json.loads(layout().to_json()), indent=2) + '\n')
    print(f'wrote {OUT}')
