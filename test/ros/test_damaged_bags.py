"""
Damaged bags recorded by swarm_sim: what is damaged is dropped and named, never analysed.

64 bytes flipped in an MCAP chunk or in a sqlite3 row, a sqlite3 bag cut at half its size, a
footer or a metadata.yaml damaged alone: ``analyze_run`` and ``fit_mobility`` say "corrupt" (and
where), "truncated" (only when messages were cut) or "metadata damaged; all N messages read", and
compute their figures from the intact data alone.
"""
import json
import os
from pathlib import Path
import shutil
import sqlite3

from mcap.reader import make_reader
from mcap.stream_reader import StreamReader
import pytest
import yaml

from soliton_encirclement_ros.analysis import cli, fit_mobility
from soliton_encirclement_ros.analysis.bag_reader import Bag
from soliton_encirclement_ros.sim import runner


def record(root: Path, storage: str) -> Path:
    out, bag = root / f'run_{storage}', root / f'bag_{storage}'
    code = runner.main(['--no-progress', '--agents', '4', '--duration', '12', '--out', str(out),
                        '--record', str(bag), '--storage', storage])
    assert code == 0
    return bag


def analyse(bag: Path, out: Path, capsys) -> tuple[int, dict, list[str]]:
    code = cli.main([str(bag), '--out', str(out), '--max-frames', '0'])
    err = capsys.readouterr().err
    summary = json.loads((out / 'summary.json').read_text()) if (out / 'summary.json').exists() \
        else {}
    return code, summary, err.splitlines()


@pytest.fixture(scope='module')
def bags(tmp_path_factory):
    root = tmp_path_factory.mktemp('damaged')
    return {storage: record(root, storage) for storage in ('mcap', 'sqlite3')}


@pytest.fixture(scope='module')
def intact(bags, tmp_path_factory):
    finals = {}
    for storage, bag in bags.items():
        out = tmp_path_factory.mktemp(f'intact_{storage}')
        assert cli.main([str(bag), '--out', str(out), '--max-frames', '0']) == 0
        finals[storage] = json.loads((out / 'summary.json').read_text())['final']
    return finals


def flip(path: Path, offset: int, count: int = 64) -> None:
    data = bytearray(path.read_bytes())
    for i in range(offset, offset + count):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def chunk_offsets(mcap: Path) -> list[int]:
    with mcap.open('rb') as stream:
        return [index.chunk_start_offset
                for index in make_reader(stream).get_summary().chunk_indexes]


def copy(bag: Path, tmp_path: Path) -> tuple[Path, Path]:
    damaged = tmp_path / 'damaged'
    shutil.copytree(bag, damaged)
    return damaged, next(p for p in damaged.iterdir() if p.suffix in ('.mcap', '.db3'))


@pytest.mark.parametrize('storage', ['mcap', 'sqlite3'])
def test_asking_for_no_topics_reads_no_messages(bags, storage):
    # the storage library reads an empty topic list as "every topic": a reader that asks for
    # none (a bag without agent states whose diagnostics were read already) must get none
    with Bag(bags[storage]) as reader:
        assert list(reader.messages([])) == []
        assert next(iter(reader.messages(['/clock'])), None) is not None


def test_the_recorder_writes_each_chunk_crc(bags):
    mcap = next(bags['mcap'].glob('*.mcap'))
    with mcap.open('rb') as stream:
        chunks = [r for r in StreamReader(stream, emit_chunks=True).records
                  if type(r).__name__ == 'Chunk']
    assert len(chunks) >= 3 and all(chunk.uncompressed_crc != 0 for chunk in chunks)


def test_a_flipped_mcap_chunk_is_dropped_named_and_the_finals_are_the_intact_ones(
        bags, intact, tmp_path, capsys):
    damaged, mcap = copy(bags['mcap'], tmp_path)
    chunks = chunk_offsets(mcap)
    assert len(chunks) >= 3
    first = chunks[len(chunks) // 2]  # a middle one: the finals come from intact data after it
    flip(mcap, first + 200)
    code, summary, lines = analyse(damaged, tmp_path / 'out', capsys)
    assert code == cli.EXIT_TRUNCATED
    warning = [line for line in lines if 'corrupt' in line]
    assert len(warning) == 1 and f'chunk at byte {first}' in warning[0], lines
    assert '/uav1/odom' in warning[0] or 'more' in warning[0]
    assert not any('truncated' in line for line in lines), lines
    assert f'chunk at byte {first}' in summary['params']['corrupt']
    assert summary['params']['truncated'] is None
    for name, value in intact['mcap'].items():
        assert summary['final'][name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_fit_mobility_drops_the_same_chunk_and_exits_3_in_one_line(bags, tmp_path, capsys):
    damaged, mcap = copy(bags['mcap'], tmp_path)
    first = chunk_offsets(mcap)[0]  # the one defining the topics (the summary repeats them)
    flip(mcap, first + 200)
    code = fit_mobility.main([str(damaged), '--out', str(tmp_path / 'fit')])
    err = capsys.readouterr().err.splitlines()
    assert code == 3
    warning = [line for line in err if 'corrupt' in line]
    assert len(warning) == 1 and f'chunk at byte {first}' in warning[0], err
    fit = json.loads((tmp_path / 'fit' / 'fit.json').read_text())
    assert f'chunk at byte {first}' in fit['corrupt'] and fit['truncated'] is None


def odometry_row_offset(db3: Path, topic: str) -> tuple[int, int]:
    """Return (file offset of the middle message of ``topic``, its log time)."""
    database = sqlite3.connect(db3)
    rows = database.execute('SELECT messages.timestamp, messages.data FROM messages JOIN topics '
                            'ON messages.topic_id = topics.id WHERE topics.name = ? '
                            'ORDER BY messages.id', (topic,)).fetchall()
    database.close()
    stamp, blob = rows[len(rows) // 2]
    data = db3.read_bytes()
    offset = data.find(bytes(blob))
    assert offset > 0 and data.find(bytes(blob), offset + 1) < 0
    return offset, stamp


def test_a_flipped_sqlite3_row_is_dropped_named_and_the_finals_are_the_intact_ones(
        bags, intact, tmp_path, capsys):
    damaged, db3 = copy(bags['sqlite3'], tmp_path)
    offset, _ = odometry_row_offset(db3, '/uav2/odom')
    flip(db3, offset + 40)  # from the frame id on: the message no longer decodes
    code, summary, lines = analyse(damaged, tmp_path / 'out', capsys)
    assert code == cli.EXIT_TRUNCATED
    warning = [line for line in lines if 'corrupt' in line]
    assert len(warning) == 1 and '1 undecodable message on /uav2/odom (t ' in warning[0], lines
    assert not any('truncated' in line for line in lines), lines
    for name, value in intact['sqlite3'].items():
        assert summary['final'][name] == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_a_sqlite3_bag_cut_at_half_is_read_up_to_the_cut_in_one_line(bags, tmp_path, capsys):
    damaged, db3 = copy(bags['sqlite3'], tmp_path)
    os.truncate(db3, db3.stat().st_size // 2)
    code, summary, lines = analyse(damaged, tmp_path / 'out', capsys)
    assert code == cli.EXIT_TRUNCATED, lines
    assert not any('Traceback' in line for line in lines), lines
    cut = [line for line in lines if 'truncated bag' in line]
    assert len(cut) == 1 and 'the rows after it are lost' in cut[0], lines
    metrics = summary['params']
    assert 'the rows after it are lost' in metrics['truncated']
    times = [float(line.split(',')[0]) for line in
             (tmp_path / 'out' / 'metrics.csv').read_text().splitlines()[1:]]
    assert 1.0 < times[-1] < 11.0  # the first part of the 12 s run, read


@pytest.mark.parametrize('damage', ['footer', 'metadata.yaml'])
def test_metadata_damaged_alone_says_so_and_reads_every_message(bags, intact, tmp_path, capsys,
                                                                damage):
    damaged, mcap = copy(bags['mcap'], tmp_path)
    total = yaml.safe_load((damaged / 'metadata.yaml').read_text())[
        'rosbag2_bagfile_information']['message_count']
    if damage == 'footer':  # a lone .mcap file: its summary and footer are all it has
        (damaged / 'metadata.yaml').unlink()
        flip(mcap, mcap.stat().st_size - 100)
        target = mcap
    else:
        text = (damaged / 'metadata.yaml').read_text()
        (damaged / 'metadata.yaml').write_text(text[:len(text) // 3])
        target = damaged
    code, summary, lines = analyse(target, tmp_path / 'out', capsys)
    assert code == 0, lines
    warning = [line for line in lines if 'metadata damaged' in line]
    assert len(warning) == 1 and f'all {total} messages read' in warning[0], lines
    assert not any('truncated' in line or 'corrupt' in line for line in lines), lines
    assert summary['final'] == pytest.approx(intact['mcap'], rel=1e-9, abs=1e-12)
