"""
analyze_run --report and --compare on bags swarm_sim recorded: links, timeline, margins.

Two short runs (20 Hz control): one with emulated loss 0.2 and delay 0.1 s (the receivers'
figures must measure them), one with injected failures (the timeline must show them). The
closest approach is checked against the odometry read from the bag independently, and a copy
of the bag without /diagnostics must give everything else and one line saying what is missing.
"""
import json
import math
import re

import pytest
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import get_typestore, Stores

from soliton_encirclement_ros.analysis import cli
from soliton_encirclement_ros.sim import runner

LOSS, DELAY, PERIOD = 0.2, 0.1, 0.05
TYPESTORE = get_typestore(Stores.ROS2_KILTED)


def simulate(tmp_path, name, *args):
    bag = tmp_path / f'{name}_bag'
    code = runner.main(['--no-progress', '--control-period', str(PERIOD), '--out',
                        str(tmp_path / name), '--record', str(bag), *args])
    assert code == 0
    return bag


def analyse(out, *args):
    code = cli.main([*map(str, args), '--out', str(out), '--max-frames', '0'])
    return code


@pytest.fixture(scope='module')
def lossy(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('lossy')
    return simulate(tmp, 'lossy', '--agents', '4', '--duration', '12', '--seed', '2',
                    '--loss', str(LOSS), '--delay', str(DELAY))


@pytest.fixture(scope='module')
def failing(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('failing')
    return simulate(tmp, 'failing', '--agents', '3', '--duration', '10', '--seed', '3',
                    '--failures-per-min', '20', '--failure-off-time', '3')


@pytest.fixture(scope='module')
def lossy_report(lossy, tmp_path_factory):
    out = tmp_path_factory.mktemp('lossy_report') / 'out'
    assert analyse(out, lossy, '--report') == 0
    return out


@pytest.fixture(scope='module')
def failing_report(failing, tmp_path_factory):
    out = tmp_path_factory.mktemp('failing_report') / 'out'
    assert analyse(out, failing, '--report', '--d-safe', '15') == 0
    return out


def test_receivers_measure_the_configured_loss_and_delay(lossy_report):
    data = json.loads((lossy_report / 'flight.json').read_text())
    pairs = data['receivers']
    assert {(p['receiver'], p['sender']) for p in pairs} == {
        (r, s) for r in range(1, 5) for s in range(1, 5) if r != s}
    total = 0
    for p in pairs:
        n = p['heard'] + p['lost']
        total += n
        assert n > 150  # a 10 s link window at 20 Hz
        # binomial sampling error: 4.5 standard deviations
        assert abs(p['loss'] - LOSS) < 4.5 * math.sqrt(LOSS * (1 - LOSS) / n), p
        # the age is the emulated delay, plus at most one control period
        assert DELAY - 1e-6 <= p['age_mean'] <= p['age_max'] <= DELAY + PERIOD + 1e-6, p
    assert abs(data['pooled_loss'] - LOSS) < 4 * math.sqrt(LOSS * (1 - LOSS) / total)
    # the recorder drops nothing: the loss happens at the receivers
    senders = data['senders']
    assert [s['sender'] for s in senders] == [1, 2, 3, 4]
    for s in senders:
        assert s['lost'] == 0 and s['restarts'] == 0
        assert s['recorded'] == pytest.approx(12 / PERIOD, abs=3)
        assert s['longest_silence'] == pytest.approx(PERIOD, abs=1e-6)
        assert abs(s['age_mean']) < 1e-6  # sim time: the recorder and the agents share a clock
    assert data['has_diagnostics'] and data['missing'] is None


def test_failures_show_on_the_timeline(failing_report):
    data = json.loads((failing_report / 'flight.json').read_text())
    failed = [t for t in data['transitions'] if t['after'] == 'failed']
    assert failed, data['transitions']
    assert all('injected' in t['reason'] and t['source'] == 'agent' for t in failed)
    recovered = [t for t in data['transitions'] if t['before'] == 'failed' and t['after'] == 'ok']
    assert recovered
    rows = {(s['vehicle'], s['source']) for s in data['spans']}
    assert rows == {('uav1', 'agent'), ('uav2', 'agent'), ('uav3', 'agent')}  # no PX4 bridges
    html = (failing_report / 'report.html').read_text()
    assert 'failed (injected)' in html and '<table class="transitions">' in html


def test_closest_approach_is_the_smallest_distance_in_the_bag(failing, failing_report):
    data = json.loads((failing_report / 'flight.json').read_text())
    assert data['d_safe'] == 15.0 and data['d_safe_source'] == '--d-safe'
    by_time = {}
    with AnyReader([failing], default_typestore=TYPESTORE) as reader:
        connections = [c for c in reader.connections if re.fullmatch(r'/uav\d+/odom', c.topic)]
        for connection, log_time, raw in reader.messages(connections=connections):
            p = reader.deserialize(raw, connection.msgtype).pose.pose.position
            by_time.setdefault(log_time, {})[connection.topic] = (p.x, p.y)
    closest = {}
    for sample in by_time.values():
        if len(sample) < 3:
            continue
        for a in sample:
            for b in sample:
                if a < b:
                    d = math.dist(sample[a], sample[b])
                    key = (a.split('/')[1], b.split('/')[1])
                    closest[key] = min(closest.get(key, math.inf), d)
    pairs = data['pairs']
    assert [p['closest'] for p in pairs] == sorted(p['closest'] for p in pairs)  # worst first
    for p in pairs:
        assert p['closest'] == pytest.approx(closest[(p['a'], p['b'])], abs=1e-9)
    assert pairs[0]['closest'] == pytest.approx(min(closest.values()), abs=1e-9)


@pytest.mark.parametrize('report', ['lossy_report', 'failing_report'])
def test_report_is_one_self_contained_file(report, request):
    out = request.getfixturevalue(report)
    html = (out / 'report.html').read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*https?://', html)
    assert 'http://' not in html and 'https://' not in html
    assert '<script' not in html
    images = re.findall(r'src="data:image/png;base64,', html)
    # links, timeline, dashboard, trajectories and the six metrics
    assert len(images) >= 10
    for table in ('senders', 'receivers', 'transitions', 'margins'):
        assert f'<table class="{table}">' in html
    assert 'Verdicts' in html and 'Metrics' in html and 'E_gap' in html


def without_diagnostics(bag, copy):
    with AnyReader([bag], default_typestore=TYPESTORE) as reader:
        writer = Writer(copy, version=9, storage_plugin=StoragePlugin.MCAP)
        writer.open()
        out = {}
        for connection in reader.connections:
            if connection.topic != '/diagnostics':
                out[connection.id] = writer.add_connection(
                    connection.topic, connection.msgtype, typestore=reader.typestore)
        for connection, log_time, raw in reader.messages(
                connections=[c for c in reader.connections if c.id in out]):
            writer.write(out[connection.id], log_time, raw)
        writer.close()
    return copy


def test_a_bag_without_diagnostics_gives_the_rest_and_says_what_is_missing(
        failing, tmp_path, capsys):
    bag = without_diagnostics(failing, tmp_path / 'plain')
    out = tmp_path / 'out'
    capsys.readouterr()
    assert analyse(out, bag, '--report') == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f'analyze_run: {bag} has no /diagnostics: no per-receiver link figures and '
                   'no vehicle timeline']
    data = json.loads((out / 'flight.json').read_text())
    assert not data['has_diagnostics'] and data['receivers'] == [] and data['spans'] == []
    assert len(data['senders']) == 3 and len(data['pairs']) == 3
    assert data['d_safe'] == 2.0 and data['d_safe_source'].startswith('default')
    html = (out / 'report.html').read_text()
    assert 'has no /diagnostics' in html and '<table class="margins">' in html
    assert not (out / 'links.png').exists() and not (out / 'timeline.png').exists()


def test_flight_next_to_simulation(lossy, failing, tmp_path):
    out = tmp_path / 'cmp'
    area = tmp_path / 'area.yaml'
    area.write_text('polygon: [[-60, -60], [60, -60], [60, 60], [-60, 60]]\n'
                    'z_min: -5\nz_max: 50\n')
    assert analyse(out, failing, '--compare', lossy, '--safety-area', area) == 0
    page = (out / 'comparison.html').read_text()
    assert (out / 'comparison.png').is_file()
    assert failing.name in page and lossy.name in page
    assert page.count('<table class="senders">') == 2 and page.count('<table class="area">') == 2
    assert 'https://' not in page and 'http://' not in page


def test_bad_options_exit_2_with_one_line(lossy, failing, tmp_path, capsys):
    for args, text in (
            (['--safety-area', tmp_path / 'none.yaml'], 'argument --safety-area'),
            (['--d-safe', '0'], 'argument --d-safe: must be > 0, got 0'),
            ([lossy, '--compare', failing], 'argument --compare: compares one BAG with '
                                            'SIM_BAG, got 2 BAGs')):
        with pytest.raises(SystemExit) as exit_info:
            analyse(tmp_path / 'bad', failing, *args)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and text in err[0], err
        assert not (tmp_path / 'bad').exists()
