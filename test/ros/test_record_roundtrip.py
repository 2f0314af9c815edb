"""
A simulation recorded with swarm_sim --record, then analysed from the bag alone.

The MCAP bag is also read by the ``mcap`` library's validating reader (CRCs where written, the
summary, the chunk and message indexes) and by rosbags; it is zstd-compressed and describes
itself (custom_data: scenario, seed, version, commit).

metrics_node computes each sample from the agents' broadcasts, which carry positions one
control tick plus up to one odometry period old (0.05-0.07 s at 0.05 s control and 50 Hz
odometry); analyze_run recomputes from odometry at the sample time. While the ring forms the
metrics move by up to ~0.3/s, so the two agree within 0.03 (mean error below 0.01), and, after
8 s, within 0.005 beyond what the sample's age explains (its age times the metric's rate of
change: E_vr still falls by ~0.2/s at 8 s).
"""
import json
import subprocess
import sys

from mcap.reader import make_reader
from mcap.records import DataEnd, Message
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory
import numpy as np
import pytest
from rosbags.highlevel import AnyReader
import yaml

from soliton_encirclement_ros.analysis.animation import animation_file
from soliton_encirclement_ros.analysis.recompute import metrics_from_bag, published_metrics
from soliton_encirclement_ros.core.metrics import METRIC_NAMES
from soliton_encirclement_ros.provenance import git_commit, package_version
from soliton_encirclement_ros.sim import runner


SAMPLE_AGE = 0.1  # s: a published metric's odometry is up to one control tick and one odometry
# period old (0.05 + 0.02 s here), analyze_run's is at the sample time


@pytest.fixture(scope='module', params=['mcap', 'sqlite3'])
def recorded(request, tmp_path_factory):
    base = tmp_path_factory.mktemp(f'rec_{request.param}')
    bag = base / 'bag'
    code = runner.main(
        [
            '--agents',
            '4',
            '--control-period',
            '0.05',
            '--duration',
            '12',
            '--seed',
            '2',
            '--no-progress',
            '--out',
            str(base / 'run'),
            '--record',
            str(bag),
            '--storage',
            request.param,
        ]
    )
    assert code == 0
    return request.param, bag, base / 'run'


def test_bag_is_a_rosbag2_with_the_run_topics(recorded):
    storage, bag, _ = recorded
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    assert info['storage_identifier'] == storage
    topics = {t['topic_metadata']['name']: t for t in info['topics_with_message_count']}
    for name in ('/clock', '/swarm/agent_states', '/target/state', '/target/odom',
                 '/uav1/odom', '/uav4/cmd_vel', '/swarm/metrics/E_gap', '/swarm/markers'):
        assert topics[name]['message_count'] > 0, name
    assert topics['/uav1/odom']['topic_metadata']['type'] == 'nav_msgs/msg/Odometry'
    assert topics['/swarm/markers']['topic_metadata']['type'] == (
        'visualization_msgs/msg/MarkerArray')
    # metrics_node's marker_period 0.5 s over 12 s
    assert topics['/swarm/markers']['message_count'] == pytest.approx(12 / 0.5, abs=2)
    assert topics['/uav1/odom']['message_count'] == pytest.approx(12 * 50, abs=2)
    assert info['duration']['nanoseconds'] == pytest.approx(12e9, abs=0.05e9)
    custom = info['custom_data']
    assert custom['seed'] == '2' and custom['recorder'] == 'swarm_sim'
    assert custom['package_version'] == package_version() != 'unknown'
    assert custom['git_commit'] == git_commit()
    scenario = json.loads(custom['scenario'])  # strict JSON
    assert (scenario['agents'], scenario['duration'], scenario['seed']) == (4, 12.0, 2)
    assert scenario['controller']['control_period'] == 0.05


def test_mcap_bag_passes_the_mcap_validating_reader(recorded):
    storage, bag, _ = recorded
    if storage != 'mcap':
        pytest.skip('MCAP only')
    info = yaml.safe_load((bag / 'metadata.yaml').read_text())['rosbag2_bagfile_information']
    counts = {t['topic_metadata']['name']: t['message_count']
              for t in info['topics_with_message_count']}
    path = bag / 'bag.mcap'
    # Every record, front to back, chunks decompressed, with CRC validation of each chunk and
    # of the data section (the rosbags writer leaves both CRC fields 0: "not computed").
    records = list(StreamReader(str(path), validate_crcs=True, skip_magic=False).records)
    assert sum(isinstance(r, Message) for r in records) == info['message_count']
    assert sum(isinstance(r, DataEnd) for r in records) == 1
    with path.open('rb') as stream:
        reader = make_reader(stream, validate_crcs=True, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None and reader.get_header().profile == 'ros2'
        assert summary.statistics.message_count == info['message_count']
        chunks = summary.chunk_indexes
        assert chunks and summary.statistics.chunk_count == len(chunks)
        assert all(c.compression == 'zstd' for c in chunks)
        assert sum(c.compressed_size for c in chunks) < 0.5 * sum(
            c.uncompressed_size for c in chunks)
        assert {c.topic: summary.statistics.channel_message_counts[i]
                for i, c in summary.channels.items()} == counts
        for index in chunks:  # every chunk indexes the messages it holds
            assert index.message_index_offsets
        # Through the indexes (seeking reader), decoded: the markers Foxglove's 3D panel shows.
        markers = [m.decoded_message for m in reader.iter_decoded_messages(
            topics=['/swarm/markers'])]
        assert len(markers) == counts['/swarm/markers']
        assert {m.ns for m in markers[-1].markers} >= {'agents', 'target'}
        assert [m.name for m in reader.iter_metadata()] == ['rosbag2']
    with AnyReader([bag]) as reader:  # and rosbags reads every message of it
        read = {}
        for connection, _, raw in reader.messages():
            reader.deserialize(raw, connection.msgtype)
            read[connection.topic] = read.get(connection.topic, 0) + 1
    assert read == counts


def test_recomputed_metrics_match_what_metrics_node_published(recorded):
    _, bag, _ = recorded
    published = published_metrics(bag)
    times = published['E_gap'][:, 0]
    recomputed = metrics_from_bag(bag, times=times)
    for column, name in enumerate(METRIC_NAMES, start=1):
        error = np.abs(recomputed[:, column] - published[name][:, 1])
        # what a sample up to SAMPLE_AGE old explains: the metric's own rate of change
        drift = SAMPLE_AGE * np.abs(np.gradient(published[name][:, 1], times))
        if name == 'd_min':  # metres: compared relative to the radius like E_r
            error, drift = error / 20.0, drift / 20.0
        settled = times > 8.0
        if name != 'E_vr':  # the radial speed swings fastest before the ring settles
            assert error.max() < 0.03, (name, error.max())
            assert error.mean() < 0.01, (name, error.mean())
        excess = error[settled] - drift[settled]
        assert excess.max() < 0.005, (name, error[settled].max(), excess.max())


def test_analyze_run_reports_the_run_the_runner_reported(recorded, tmp_path):
    _, bag, run = recorded
    out = tmp_path / 'analysis'
    proc = subprocess.run([sys.executable, '-m', 'soliton_encirclement_ros.analysis.cli', str(bag),
                           '--out', str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f'{bag}: recorded with scenario: agents 4, radius 20.0, duration 12.0' in proc.stdout
    assert f'seed 2; package version {package_version()}; git commit {git_commit()}' in (
        proc.stdout)
    analysed = json.loads((out / 'summary.json').read_text())
    assert analysed['params']['bag_custom_data']['seed'] == '2'
    simulated = json.loads((run / 'summary.json').read_text())
    for name in ('E_r', 'E_gap', 'G_max', 'rho'):
        assert analysed['final'][name] == pytest.approx(simulated['final'][name], abs=0.01)
    assert analysed['settle_time']['E_gap'] == pytest.approx(
        simulated['settle_time']['E_gap'], abs=0.5
    )
    for name in ('metrics.csv', 'dashboard.png', 'trajectories.png', animation_file()):
        assert (out / name).stat().st_size > 0
