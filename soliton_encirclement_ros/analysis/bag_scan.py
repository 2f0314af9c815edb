"""
Read what is intact in a damaged bag, and say what is not: corrupt, cut, or metadata only.

``analysis.bag_reader`` checks every storage file before anything is analysed:

- an MCAP file record by record (:func:`mcap_messages`): a chunk whose CRC does not match, that
  does not decompress to its stated size or whose records do not parse is dropped whole and
  named (byte offset, log-time span, the topics its message indexes name); reading goes on with
  the next record, or, past a record header that is itself broken, with the next chunk found
  whole further on. The file is whole when its Data End record is reached: a footer or summary
  damaged after it loses no message.
- a rosbag2 sqlite3 database row by row (:func:`sqlite_rows`), in batches by row id: a range
  that SQLite reports malformed (a damaged page, a file cut short) is stepped over, and the rows
  beyond it that are readable are read.

:class:`Damage` collects what was found, in the user's words. No rclpy.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path
import sqlite3
import struct

from mcap.data_stream import ReadDataStream
from mcap.reader import make_reader
from mcap.records import Channel, Chunk, Message, Schema
from mcap.stream_reader import breakup_chunk
import numpy as np

MCAP_MAGIC = b'\x89MCAP0\r\n'
OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK, OP_MESSAGE_INDEX, OP_DATA_END = (
    0x03, 0x04, 0x05, 0x06, 0x07, 0x0F)
KNOWN_OPCODES = frozenset(range(0x01, 0x11))
COMPRESSIONS = ('', 'zstd', 'lz4')
RECORD_HEADER = struct.Struct('<BQ')
CHUNK_HEADER = struct.Struct('<QQQII')  # start, end, uncompressed size, crc, compression length
SQLITE_BATCH = 1000  # rows read at a time
SQLITE_MAX_SKIP = 2 ** 40  # row ids probed beyond a malformed range before giving up
MOST_TOPICS_NAMED = 4
# A value this large (in SI units: m, m/s, rad) is no measurement of a vehicle: a damaged message.
PLAUSIBLE_LIMIT = 1e6


def implausible(values) -> bool:
    """Return whether measured values (SI units) cannot be a vehicle's: not finite, or absurd."""
    array = np.asarray(values, dtype=float)
    return not bool(np.all(np.isfinite(array)) and np.all(np.abs(array) < PLAUSIBLE_LIMIT))


@dataclass
class Damage:
    """
    What reading a bag found damaged, in the user's words.

    ``corrupt``: parts dropped (each names where); ``cut``: why the messages stop early, or
    None; ``whole``: every storage file was read to its end (its Data End, or the last row of
    its database); ``messages``: how many messages were read intact.
    """

    corrupt: list[str] = field(default_factory=list)
    cut: str | None = None
    whole: bool = True
    messages: int = 0
    start_ns: int | None = None
    _aside: dict[str, list] = field(default_factory=dict)

    def seen(self, log_time: int) -> None:
        """Count one intact message logged at ``log_time`` [ns]."""
        self.messages += 1
        if self.start_ns is None or log_time < self.start_ns:
            self.start_ns = log_time

    def span(self, first_ns: int, last_ns: int) -> str:
        """Return ``t a-b s`` from the bag's first message, or '' when the times are absurd."""
        if self.start_ns is None or not 0 <= last_ns - first_ns < 10 ** 15:
            return ''
        a, b = (first_ns - self.start_ns) * 1e-9, (last_ns - self.start_ns) * 1e-9
        return f't {a:.2f} s' if first_ns == last_ns else f't {a:.2f}-{b:.2f} s'

    def set_aside(self, topic: str, log_time: int, why: str) -> None:
        """Note one message dropped by its reader: ``why`` is an adjective (``undecodable``)."""
        self._aside.setdefault(f'{topic}: {why}', []).append(log_time)

    def text(self) -> str | None:
        """Return every corrupt part in one line (None: nothing corrupt)."""
        parts = list(self.corrupt)
        for what, times in self._aside.items():
            topic, why = what.split(': ', 1)
            where = self.span(min(times), max(times))
            parts.append(f'{len(times)} {why} message{"s" if len(times) > 1 else ""} on {topic}'
                         f'{f" ({where})" if where else ""} dropped')
        return '; '.join(parts) or None


def topics_named(topics: list[str]) -> str:
    """Name at most a few topics, then how many more."""
    names = sorted(set(topics))
    more = len(names) - MOST_TOPICS_NAMED
    return ', '.join(names[:MOST_TOPICS_NAMED]) + (f' and {more} more' if more > 0 else '')


class _McapState:
    """The schemas and channels an MCAP file has defined so far."""

    def __init__(self) -> None:
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}

    def take(self, record) -> None:
        if isinstance(record, Schema):
            self.schemas[record.id] = record
        elif isinstance(record, Channel):
            self.channels[record.id] = record


def mcap_topics(path: Path) -> dict[str, str]:
    """Return topic -> message type of every channel an MCAP file defines where it is readable."""
    state = _McapState()
    for _ in mcap_messages(path, Damage(), state):
        pass
    return {channel.topic: (state.schemas[channel.schema_id].name
                            if channel.schema_id in state.schemas else '')
            for channel in state.channels.values()}


def mcap_messages(path: Path, damage: Damage, state: _McapState | None = None
                  ) -> Iterator[tuple[Channel, Schema | None, Message]]:
    """
    Yield ``(channel, schema, message)`` of every intact message of an MCAP file, in file order.

    What is dropped or missing is added to ``damage`` (see the module's description).
    """
    state = state or _McapState()
    size = path.stat().st_size
    undefined: dict[int, int] = {}  # messages of channels defined nowhere readable, by channel
    with path.open('rb') as stream:
        _summary_definitions(stream, state)
        stream.seek(0)
        if stream.read(len(MCAP_MAGIC)) != MCAP_MAGIC:
            damage.cut = damage.cut or f'{path.name} does not start with the MCAP magic bytes'
            damage.whole = False
            return
        offset = len(MCAP_MAGIC)
        lost: dict | None = None  # the corrupt chunk whose message indexes are being read
        while True:
            stream.seek(offset)
            head = stream.read(RECORD_HEADER.size)
            if not head:
                damage.whole = False
                damage.cut = damage.cut or (f'{path.name} ends at byte {offset}, before its '
                                            'Data End record: the recording was cut')
                break
            opcode, length = RECORD_HEADER.unpack(head) if len(head) == 9 else (0, size)
            if opcode not in KNOWN_OPCODES or offset + 9 + length > size:
                found = _next_chunk(stream, offset + 1, size)
                if found is None:
                    damage.whole = False
                    damage.cut = damage.cut or (
                        f'{path.name} unreadable from byte {offset} to its end ('
                        + ('cut inside a record' if len(head) < 9 or opcode in KNOWN_OPCODES
                           else f'a record of unknown type 0x{opcode:02x}') + ')')
                    break
                damage.corrupt.append(f'{path.name} bytes {offset}-{found - 1} unreadable '
                                      '(broken record headers), skipped to the next chunk')
                offset = found
                continue
            body = stream.read(length)
            record_at, offset = offset, offset + 9 + length
            if lost is not None and opcode != OP_MESSAGE_INDEX:
                damage.corrupt.append(_lost_chunk_text(path, lost, state, damage))
                lost = None
            if opcode == OP_DATA_END:
                break
            if opcode in (OP_SCHEMA, OP_CHANNEL):
                try:
                    state.take((Schema if opcode == OP_SCHEMA else Channel).read(
                        ReadDataStream(BytesIO(body))))
                except Exception:  # noqa: BLE001 - a definition garbled: its messages go too
                    damage.corrupt.append(f'{path.name} byte {record_at}: a corrupt '
                                          f'{"schema" if opcode == OP_SCHEMA else "channel"} '
                                          'definition dropped')
            elif opcode == OP_MESSAGE:
                yield from _messages([_read_message(body)], state, damage, path, record_at,
                                     undefined)
            elif opcode == OP_CHUNK:
                chunk, records, problem = _open_chunk(body)
                if problem:
                    lost = {'at': record_at, 'chunk': chunk, 'problem': problem, 'topics': [],
                            'count': 0}
                    continue
                yield from _messages(records, state, damage, path, record_at, undefined)
            elif opcode == OP_MESSAGE_INDEX and lost is not None and len(body) >= 6:
                channel_id, entries = struct.unpack_from('<HI', body)
                lost['topics'].append(channel_id)
                lost['count'] += entries // 16
        if lost is not None:
            damage.corrupt.append(_lost_chunk_text(path, lost, state, damage))
    if undefined:
        count = sum(undefined.values())
        damage.corrupt.append(f'{path.name}: {count} message{"s" if count > 1 else ""} of '
                              f'{len(undefined)} channel{"s" if len(undefined) > 1 else ""} '
                              'defined only in a corrupt part dropped')


def _read_message(body: bytes) -> Message | None:
    try:
        return Message.read(ReadDataStream(BytesIO(body)), len(body))
    except Exception:  # noqa: BLE001 - counted as corrupt by the caller
        return None


def _summary_definitions(stream, state: _McapState) -> None:
    """Take the schemas and channels the summary section repeats, when it is readable."""
    try:
        summary = make_reader(stream).get_summary()
    except Exception:  # noqa: BLE001 - a damaged summary: the definitions in the data only
        return
    if summary is not None:
        state.schemas.update(summary.schemas)
        state.channels.update(summary.channels)


def _messages(records, state: _McapState, damage: Damage, path: Path, at: int,
              undefined: dict[int, int]):
    for record in records:
        if isinstance(record, Message):
            channel = state.channels.get(record.channel_id)
            if channel is None:
                undefined[record.channel_id] = undefined.get(record.channel_id, 0) + 1
                continue
            damage.seen(record.log_time)
            yield channel, state.schemas.get(channel.schema_id), record
        elif record is None:
            damage.corrupt.append(f'{path.name} byte {at}: a corrupt message record dropped')
        else:
            state.take(record)


def _open_chunk(body: bytes):
    """Return (chunk or None, its records, why it is corrupt or '')."""
    try:
        chunk = Chunk.read(ReadDataStream(BytesIO(body)))
    except Exception:  # noqa: BLE001 - a chunk header garbled
        return None, [], 'its header does not parse'
    if chunk.compression not in COMPRESSIONS:
        return chunk, [], 'its compression name is garbled'
    try:
        records = breakup_chunk(chunk, validate_crc=True)
    except Exception as err:  # noqa: BLE001 - CRC, decompression or a record inside
        name = type(err).__name__
        return chunk, [], ('its CRC does not match' if 'CRC' in name
                           else f'it does not decode ({" ".join(str(err).split()) or name})')
    return chunk, records, ''


def _lost_chunk_text(path: Path, lost: dict, state: _McapState, damage: Damage) -> str:
    chunk = lost['chunk']
    where = '' if chunk is None else damage.span(chunk.message_start_time,
                                                 chunk.message_end_time)
    topics = [state.channels[c].topic for c in lost['topics'] if c in state.channels]
    what = (f'{lost["count"]} messages' + (f' on {topics_named(topics)}' if topics else '')
            if lost['count'] else 'its messages')
    return (f'{path.name} chunk at byte {lost["at"]}{f" ({where})" if where else ""} '
            f'dropped, {what}: {lost["problem"]}')


def _next_chunk(stream, start: int, size: int) -> int | None:
    """Return the offset of the next whole, well-formed chunk record from ``start``, or None."""
    window = 1 << 20
    position = start
    while position < size:
        stream.seek(position)
        block = stream.read(window + 64)
        index = block.find(bytes([OP_CHUNK]))
        while 0 <= index < window:
            at = position + index
            if _chunk_at(stream, at, size):
                return at
            index = block.find(bytes([OP_CHUNK]), index + 1)
        position += window
    return None


def _chunk_at(stream, at: int, size: int) -> bool:
    stream.seek(at)
    head = stream.read(9 + CHUNK_HEADER.size)
    if len(head) < 9 + CHUNK_HEADER.size:
        return False
    _, length = RECORD_HEADER.unpack_from(head)
    *_, name_length = CHUNK_HEADER.unpack_from(head, 9)
    if at + 9 + length > size or name_length > 4:
        return False
    stream.seek(at + 9)
    _, records, problem = _open_chunk(stream.read(length))
    return not problem


def sqlite_cut_short(path: Path) -> str | None:
    """
    Return how a database file is cut short of the size its header states, or None.

    SQLite's header holds the page size and, valid while its "version-valid-for" number equals
    the change counter, the database's size in pages: a file shorter than that lost its end.
    """
    with path.open('rb') as stream:
        head = stream.read(100)
    if len(head) < 100:
        return None
    page_size = int.from_bytes(head[16:18], 'big')
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], 'big')
    if not pages or head[92:96] != head[24:28]:
        return None
    size, stated = path.stat().st_size, pages * page_size
    return (f'{path.name} ends at byte {size}, short of the {stated} bytes its header states'
            if size < stated else None)


def sqlite_rows(database: sqlite3.Connection, damage: Damage, cut_short: str | None = None
                ) -> Iterator[tuple[int, int, bytes]]:
    """
    Yield ``(topic_id, timestamp, data)`` of every readable row of ``messages``, by row id.

    A batch SQLite cannot read (a damaged page, a file cut short) is read again row by row; a
    range of row ids that stays unreadable is stepped over (the next readable id found by
    doubling steps, then bisection) and named in ``damage``. Where nothing reads again to the
    end, ``damage.cut`` says after which row.

    ``cut_short`` (see :func:`sqlite_cut_short`) says the file lost its end. Then every loss
    is the cut's: a page cut part-way loses some of its rows and keeps others (SQLite fills a
    page from its end), so the rows lost before the last one read are named in the same line,
    not as damage.
    """
    last, garbled, skipped, ended = -1, [], [], None
    query = ('SELECT id, topic_id, timestamp, data FROM messages WHERE id > ? ORDER BY id '
             'LIMIT ?')
    while True:
        try:
            rows = database.execute(query, (last, SQLITE_BATCH)).fetchall()
        except sqlite3.DatabaseError:
            rows = None
        if rows is None:
            try:  # the readable rows just before the damage
                rows = database.execute(query, (last, 1)).fetchall()
            except sqlite3.DatabaseError:
                found = _next_readable(database, last)
                if found is None:
                    ended = (last, 'SQLite: database disk image is malformed')
                    break
                skipped.append((last + 1, found - 1, f'rows {last + 1}-{found - 1} of the '
                                'database unreadable (SQLite: database disk image is '
                                'malformed), skipped'))
                last = found - 1
                continue
        if not rows:
            break
        if rows[0][0] <= last:  # a damaged tree going round: step past it as unreadable
            found = _next_readable(database, last + 1)
            if found is None:
                ended = (last, 'its index is damaged there')
                break
            skipped.append((last + 1, found - 1, f'the database index around row {last + 1} '
                            f'is damaged, rows from there to {found - 1} skipped'))
            last = found - 1
            continue
        for row_id, topic_id, timestamp, data in rows:
            if row_id <= last:
                break
            last = row_id
            if isinstance(timestamp, int) and isinstance(data, bytes) \
                    and isinstance(topic_id, int):
                yield topic_id, timestamp, data
            else:
                garbled.append(row_id)
    if ended is not None:
        damage.whole = False
    if ended is not None and cut_short:
        lost = sum(high - low + 1 for low, high, _ in skipped) + len(garbled)
        ids = ', '.join([f'{low}-{high}' if high > low else f'{low}' for low, high, _ in skipped]
                        + [str(row_id) for row_id in garbled])
        damage.cut = damage.cut or (
            f'database unreadable after row {ended[0]} ({cut_short}): the rows after it are '
            'lost' + (f', and {lost} row{"s" if lost > 1 else ""} before it '
                      f'(id{"s" if lost > 1 else ""} {ids})' if lost else ''))
        return
    damage.corrupt.extend(note for _, _, note in skipped)
    if garbled:
        damage.corrupt.append(f'{len(garbled)} garbled row{"s" if len(garbled) > 1 else ""} '
                              f'of the database dropped (ids {garbled[0]}-{garbled[-1]})')
    if ended is not None:
        damage.cut = damage.cut or (f'database unreadable after row {ended[0]} ({ended[1]}): '
                                    'the rows after it are lost')


def _probe(database: sqlite3.Connection, row_id: int) -> str:
    """Return 'bad' (SQLite cannot read from ``row_id``), 'end' (no row from it) or 'rows'."""
    try:
        rows = database.execute('SELECT id, topic_id, timestamp, data FROM messages WHERE '
                                'id >= ? ORDER BY id LIMIT 1', (row_id,)).fetchall()
    except sqlite3.DatabaseError:
        return 'bad'
    return 'rows' if rows else 'end'


def _next_readable(database: sqlite3.Connection, last: int) -> int | None:
    """Return the smallest row id > ``last`` from which rows read again (bisected), or None."""
    step = 1
    while step <= SQLITE_MAX_SKIP and _probe(database, last + step) == 'bad':
        step *= 2
    if step > SQLITE_MAX_SKIP:
        return None
    low, high = last + step // 2, last + step  # low unreadable (or last), high readable
    while high - low > 1:
        middle = (low + high) // 2
        if _probe(database, middle) != 'bad':
            high = middle
        else:
            low = middle
    return high if _probe(database, high) == 'rows' else None
