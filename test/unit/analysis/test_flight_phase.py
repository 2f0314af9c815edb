"""
analyze_run on recorded PX4 flights: judged over the engaged phase, holds on the timeline.

The bags (support/px4_flight_bag.py) start on the ground, engage at 10 s, form and hold the ring
and land at 45 s; over the whole recording the ring never settles (the landed fleet's agents are
out of the ring: every metric NaN at the end), over the engaged phase it does.
"""
from html import escape
import json
import math

import numpy as np
import pytest

from soliton_encirclement_ros.analysis import cli, plots
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from support.circle_bag import RADIUS, write_circle_bag
from support.px4_flight_bag import Flight, HOLD_WHY, write_flight_bag

PHASE = ('engaged 12.70–44.70 s: from when all 3 PX4 bridges were active (uav1, uav2, uav3) '
         "to the last active status of any (uav3's; then landing at 45.70 s: landing (operator "
         'request))')


def analyse(tmp_path_factory, name, flight, *args):
    tmp = tmp_path_factory.mktemp(name)
    bag = write_flight_bag(tmp / 'bag', flight)
    out = tmp / 'out'
    assert cli.main([str(bag), '--out', str(out), '--max-frames', '0', *args]) == 0
    return out


@pytest.fixture(scope='module')
def landed(tmp_path_factory):
    return analyse(tmp_path_factory, 'landed', Flight(), '--report')


@pytest.fixture(scope='module')
def held(tmp_path_factory):
    return analyse(tmp_path_factory, 'held', Flight(holds={'uav2': (20.0, 40.0)}), '--report')


def test_a_flight_from_the_ground_to_landed_is_judged_over_its_engaged_phase(landed, capsys):
    summary = json.loads((landed / 'summary.json').read_text())
    final = summary['final']
    assert all(final[name] is not None for name in final), final  # null: NaN
    assert summary['phase']['rule'] == 'px4 bridges' and summary['phase']['text'] == PHASE
    assert summary['phase']['start'] == pytest.approx(12.7)
    assert summary['phase']['end'] == pytest.approx(44.7)
    assert final['E_gap'] < 1e-3 and final['E_r'] < 1e-3
    assert final['d_min'] == pytest.approx(2 * RADIUS * math.sin(math.pi / 3), abs=0.01)
    # the vehicles close on their slots with a 3 s time constant from 12 s
    assert summary['settle_time']['E_gap'] is not None, summary['settle_time']
    assert 18.0 < summary['settle_time']['E_gap'] < 25.0
    assert 18.0 < summary['settle_time']['E_r'] < 25.0
    # the whole recording: landed at the end, so never settled (as analyze_run said before)
    assert summary['whole_run']['final']['E_gap'] is None
    assert summary['whole_run']['settle_time'] == {'E_gap': None, 'E_r': None}
    # the closest approach stays the whole recording's (the pads, 4 m apart)
    assert summary['closest']['d_min'] == pytest.approx(4.0)
    assert summary['phase']['closest']['d_min'] > 4.0
    html = (landed / 'report.html').read_text()
    assert f'Judged: {PHASE}'.replace("'", '&#39;') in html
    table = html.split('<table class="metrics">')[1].split('</table>')[0]
    assert 'did not settle' not in table.split('</tr>')[-2].split('<td>')[3]  # E_gap, settles at
    assert '<th>whole recording: final</th>' in table
    assert 'dashboard: shaded, the engaged phase judged (its interval in the legend)' in html
    flight = json.loads((landed / 'flight.json').read_text())
    assert flight['phase'] == {k: v for k, v in summary['phase'].items() if k != 'closest'}


def test_a_hold_while_active_is_holding_on_the_timeline_not_a_phase_change(held):
    flight = json.loads((held / 'flight.json').read_text())
    uav2 = [(round(t['time'], 1), t['before'], t['after'], t['reason'])
            for t in flight['transitions'] if (t['vehicle'], t['source']) == ('uav2', 'px4')]
    assert uav2[3:6] == [
        (12.4, 'arm_requested', 'active', 'engaged: following cmd_vel'),
        (20.4, 'active', 'holding', HOLD_WHY),
        (40.4, 'holding', 'active', 'engaged: following cmd_vel')]
    spans = [(round(s['start'], 1), round(s['end'], 1)) for s in flight['spans']
             if (s['vehicle'], s['source'], s['state']) == ('uav2', 'px4', 'holding')]
    assert spans == [(20.4, 40.4)]
    assert not [s for s in flight['spans'] if s['state'] == 'holding' and s['vehicle'] != 'uav2']
    summary = json.loads((held / 'summary.json').read_text())
    assert summary['phase']['text'] == PHASE  # the hold does not end the engaged phase
    assert '<td class="l">holding</td>' in (held / 'report.html').read_text()


def test_a_vehicle_leaving_the_ring_alone_is_a_failed_agent_within_the_phase(tmp_path_factory):
    out = analyse(tmp_path_factory, 'left', Flight(vehicles=4, leaves={'uav3': 30.0}))
    summary = json.loads((out / 'summary.json').read_text())
    phase = summary['phase']
    assert (phase['start'], phase['end']) == (pytest.approx(13.0), pytest.approx(44.4))
    assert phase['text'].endswith(
        'out of the ring before: uav3 (landing at 30.70 s: landing (land_after))')
    # from 30 s uav3's agent broadcasts its presence only: the three others make the ring (with
    # uav3, stopped on it, the largest gap would be 4/3 of the ideal and d_min smaller)
    assert summary['final']['G_max'] == pytest.approx(1.0, abs=0.01)
    assert summary['final']['d_min'] == pytest.approx(2 * RADIUS * math.sin(math.pi / 3),
                                                      abs=0.1)
    assert 30.0 < summary['settle_time']['E_gap'] < phase['end']  # the three spread again


def test_a_simulated_run_is_judged_whole_as_before(tmp_path):
    bag = write_circle_bag(tmp_path / 'sim', agents=4)
    assert cli.main([str(bag), '--out', str(tmp_path / 'out'), '--max-frames', '0',
                     '--report']) == 0
    summary = json.loads((tmp_path / 'out' / 'summary.json').read_text())
    metrics = np.loadtxt(tmp_path / 'out' / 'metrics.csv', delimiter=',', skiprows=1)
    assert summary['phase']['rule'] == 'whole run' and 'whole_run' not in summary
    assert (summary['phase']['start'], summary['phase']['end']) == (
        pytest.approx(metrics[0, 0]), pytest.approx(metrics[-1, 0]))
    assert summary['phase']['text'].endswith('no PX4 bridge status in the bag')
    assert summary['final']['E_gap'] == pytest.approx(metrics[-1, 5])
    html = (tmp_path / 'out' / 'report.html').read_text()
    assert 'Judged' not in html and 'whole recording' not in html
    assert '<figcaption>E_gap</figcaption>' in html  # nothing shaded on its plots
    assert ('<tr><th class="l">metric</th>\n<th>final</th><th>mean</th><th>settles at</th>'
            '</tr>') in html


@pytest.fixture(scope='module')
def twice(tmp_path_factory):
    # A short first sortie (landed 3 s after the engage: the ring has not formed), then the
    # fleet flies again from where it landed, forms the ring and holds it.
    return analyse(tmp_path_factory, 'twice', Flight(land=15.0, again=((30.0, 75.0),), end=85.0),
                   '--report')


def test_each_engaged_phase_is_judged_and_named(twice):
    # Only the first engaged phase used to be judged: the ring that formed and held in the
    # second one read 'E_gap did not settle'.
    summary = json.loads((twice / 'summary.json').read_text())
    first, second = summary['phases']
    assert (first['number'], first['count'], second['number']) == (1, 2, 2)
    assert first['settle_time']['E_gap'] is None  # 3 s engaged: no ring yet
    assert second['start'] == pytest.approx(32.7) and second['end'] == pytest.approx(74.7)
    assert 32.0 < second['settle_time']['E_gap'] < 50.0, second['settle_time']
    assert second['final']['E_gap'] < 1e-3
    assert second['final']['d_min'] == pytest.approx(2 * RADIUS * math.sin(math.pi / 3),
                                                     abs=0.01)
    assert second['closest']['d_min'] <= second['final']['d_min']  # its own, from take-off
    assert second['text'].endswith('; engaged phase 2 of 2')
    html = (twice / 'report.html').read_text()
    verdicts = html.split('<table class="verdicts">')[1].split('</table>')[0]
    rows = verdicts.split('</tr>')[1:3]
    assert 'engaged phase 1 of 2' in rows[0] and 'did not settle' in rows[0]
    assert 'engaged phase 2 of 2' in rows[1]
    assert f'{second["settle_time"]["E_gap"]:.2f} s' in rows[1]
    assert 'did not settle' not in rows[1].split('<td>')[2]  # its E_gap
    assert 'Engaged phase 2 of 2: engaged 32.70' in html  # its own metrics table
    assert 'Shown first: engaged phase 1 of 2' in html


@pytest.fixture(scope='module')
def thrice(tmp_path_factory):
    # Three sorties; the dashboard analyze_run drew is kept to look at its axes.
    drawn = {}

    def dashboard(path, *args, **kwargs):
        drawn['dashboard'] = draw(path, *args, **kwargs)
        return drawn['dashboard']
    draw = plots.dashboard
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, 'dashboard', dashboard)
        out = analyse(tmp_path_factory, 'thrice', Flight(
            land=15.0, again=((30.0, 45.0), (55.0, 75.0)), end=85.0), '--report')
    return out, drawn['dashboard']


def test_the_metric_plots_shade_every_engaged_phase(thrice):
    # They used to shade the first only: the later phases, judged on their own in the
    # verdicts, were not to be told from the ground time between them.
    out, dashboard = thrice
    phases = json.loads((out / 'summary.json').read_text())['phases']
    assert [p['number'] for p in phases] == [1, 2, 3]
    want = [(pytest.approx(p['start']), pytest.approx(p['end'])) for p in phases]
    for ax in dashboard.axes[:len(METRIC_NAMES)]:
        spans = sorted(ax.patches, key=lambda patch: patch.get_x())
        assert [(s.get_x(), s.get_x() + s.get_width()) for s in spans] == want
        assert [s.get_alpha() for s in spans] == [0.12, 0.06, 0.06]  # the judged one darker
        assert [s.get_label().split(':')[0] for s in spans] == [
            'phase 1 (judged)', 'phase 2', 'phase 3']
    html = (out / 'report.html').read_text()
    caption = html.split('<img alt="E_gap"')[1].split('</figcaption>')[0]
    assert 'shaded, each of the 3 engaged phases, judged on its own' in caption
    assert 'the darker, phase 1 (judged), is the one the metrics table gives first' in caption
    assert '<img alt="trajectories"' in html and 'trajectories: shaded' not in html


def test_the_report_leads_with_the_verdicts_and_the_figures(held):
    # As PX4's Flight Review: what a reader needs first, the tables after.
    html = (held / 'report.html').read_text()
    order = [html.index(f'<h2>{title}</h2>') for title in (
        'Verdicts', 'Figures', 'Run', 'Metrics', 'Links', 'Vehicle timeline')]
    assert order == sorted(order)
    verdicts = html[order[0]:order[1]]
    assert 'engaged phase 1 of 1' in verdicts and 'Closest approach' in verdicts
    # the hold of uav2 (engaged, holding zero velocity) is a safety event, named with its time
    assert f'20.40 s: uav2 (px4) holding: {escape(HOLD_WHY)}' in verdicts
    assert '<img alt="vehicle timeline"' in html[order[1]:order[2]]


def test_a_clean_flight_says_it_had_no_safety_event(landed):
    html = (landed / 'report.html').read_text()
    verdicts = html.split('<h2>Verdicts</h2>')[1].split('<h2>')[0]
    assert 'No safety event: no pair closer than d_safe (2.00 m)' in verdicts


def test_the_link_table_shows_the_pairs_worth_a_look_and_folds_the_rest(tmp_path_factory):
    # A clean 10-agent run printed 90 rows of 0.0000: now only the pairs over the thresholds
    # (flight.LOOK_*), the full table behind a fold.
    from soliton_encirclement_ros.analysis import flight
    links = {('uav1', 'uav2'): {'lost': 2},  # 2 of 22: 9 % loss
             ('uav3', 'uav1'): {'offset': 0.08},
             ('uav2', 'uav3'): {'age_mean': 0.3, 'age_max': 0.4},
             ('uav2', 'uav1'): {'lost': 1, 'heard': 99}}  # 1 %: not worth a look
    out = analyse(tmp_path_factory, 'links', Flight(vehicles=4, links=links), '--report')
    html = (out / 'report.html').read_text()
    section = html.split('<h2>Links</h2>')[1].split('<h2>')[0]
    shown, folded = section.split('<details>')
    assert f'Pairs worth a look ({flight.LOOK_RULE}): 3 of\n12.' in shown
    look = shown.split('<table class="look">')[1].split('</table>')[0]
    rows = [row.split('<td>')[1:3] for row in look.split('</tr>')[1:-1]]
    pairs = [tuple(int(cell.split('<')[0]) for cell in row) for row in rows]
    assert sorted(pairs) == [(1, 2), (2, 3), (3, 1)]
    full = folded.split('<table class="receivers">')[1].split('</table>')[0]
    assert full.count('</tr>') == 1 + 12  # the header and every pair


def test_the_run_table_names_the_version_when_the_commit_is_unknown(tmp_path_factory):
    # A bag recorded by a non-editable install said only 'commit unknown'.
    from soliton_encirclement_ros.provenance import package_version
    tmp = tmp_path_factory.mktemp('version')
    bag = write_flight_bag(tmp / 'bag', Flight(), custom_data={
        'recorder': 'run_recorder', 'package_version': '0.1.0', 'git_commit': 'unknown'})
    assert cli.main([str(bag), '--out', str(tmp / 'out'), '--max-frames', '0', '--report']) == 0
    html = (tmp / 'out' / 'report.html').read_text()
    run = html.split('<h2>Run</h2>')[1].split('</table>')[0]
    assert ('<th class="l">recorded by version</th><td class="l">soliton_encirclement_ros '
            '0.1.0</td>') in run
    assert '>unknown<' not in run and 'commit unknown' not in run
    assert ('<th class="l">recorded by commit</th><td class="l">not recorded: the code was '
            'installed without its git checkout (the version identifies it)</td>') in run
    assert ('<th class="l">analysed by version</th><td class="l">soliton_encirclement_ros '
            f'{package_version()}</td>') in run
    summary = json.loads((tmp / 'out' / 'summary.json').read_text())
    assert summary['params']['analysed_with']['version'] == package_version()
