"""
Read rosbag2 bags (MCAP or sqlite3, ours or ``ros2 bag record``'s) message by message.

Uses ``rosbags``' AnyReader (message definitions from the bag, ROS 2 Kilted typestore for bags
without them). A bag cut short (a recorder killed before closing: no MCAP footer or no
metadata.yaml) is read as an MCAP stream up to the first broken record, or, for sqlite3, from
its database (every message the recorder committed); a read that fails part-way is kept up
to that point. Either way :attr:`Bag.truncated` says what happened. A
file that is not a bag at all (no MCAP or SQLite magic) is :class:`BagError` "not an MCAP
bag"; one cut before its first topic (an empty or zero-byte storage file included) is
:class:`TruncatedBagError`. No rclpy.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
import sqlite3

from mcap.reader import make_reader, NonSeekingReader
from mcap.records import Channel, Schema
from mcap.stream_reader import StreamReader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader
from rosbags.typesys import get_typestore, Stores
import yaml

DEFAULT_TYPESTORE = get_typestore(Stores.ROS2_KILTED)
MCAP_MAGIC = b'\x89MCAP0\r\n'
SQLITE_MAGIC = b'SQLite format 3\x00'


class BagError(Exception):
    """A bag that cannot be read at all; the message is one line for the user."""


class TruncatedBagError(BagError):
    """A bag cut before anything usable was written (e.g. a zero-byte storage file)."""


class Bag:
    """
    An opened bag.

    ``topics`` maps topic name to message type; iterate with :meth:`messages`; ``truncated`` is
    None or why reading stopped before the end.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f'bag not found: {self.path}')
        self.truncated: str | None = None
        self._reader: AnyReader | None = None
        self._mcap_files: list[Path] = []
        self._databases: list[Path] = []
        try:
            reader = AnyReader([self.path], default_typestore=DEFAULT_TYPESTORE)
            reader.open()
            self._reader = reader
            self.topics = {name: info.msgtype for name, info in reader.topics.items()}
        except Exception as err:  # noqa: BLE001 - any unreadable index: try the raw stream
            self._check_storage()
            self._mcap_files = self._stream_files()
            self._databases = [] if self._mcap_files else self._database_files()
            if self._databases:
                self.truncated = (f'bag index unreadable ({_one_line(err)}); read from its '
                                  'database, up to the last commit of the recorder')
                self.topics = self._database_topics()
            elif not self._mcap_files:
                raise BagError(f'cannot read bag {self.path}: {_one_line(err)}') from None
            else:
                self.truncated = f'bag index unreadable ({_one_line(err)}); read as a stream'
                self.topics = self._stream_topics()
        if not self.topics:
            self.close()
            self._check_storage()
            if self.truncated:
                raise TruncatedBagError(f'truncated bag {self.path}: cut before its first topic '
                                        f'({self.truncated})')

    def _storage_files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.iterdir()
                      if p.is_file() and p.suffix in ('.mcap', '.db3'))

    def _check_storage(self) -> None:
        """Raise if a storage file is not a bag at all, or is empty (a bag cut at its start)."""
        files = self._storage_files()
        if not files and self.path.is_dir():
            raise BagError(f'not a bag: {self.path} holds no .mcap or .db3 storage file')
        for path in files:
            with path.open('rb') as f:
                head = f.read(len(SQLITE_MAGIC))
            if not head:
                raise TruncatedBagError(f'truncated bag: {path} is empty (0 bytes): the '
                                        'recording stopped before anything was written')
            sqlite = path.suffix == '.db3' or head.startswith(SQLITE_MAGIC)
            magic = SQLITE_MAGIC if sqlite else MCAP_MAGIC
            kind = 'a rosbag2 sqlite3' if sqlite else 'an MCAP'
            if len(head) < len(magic) and magic.startswith(head):
                raise TruncatedBagError(f'truncated bag: {path} ends inside its header')
            if not head.startswith(magic):
                raise BagError(f'not {kind} bag: {path} does not start with the '
                               f'{"SQLite" if sqlite else "MCAP"} magic bytes')

    @property
    def custom_data(self) -> dict[str, str]:
        """
        Return the bag's ``custom_data`` (what was run, by which version), or {}.

        From ``metadata.yaml``, or for a lone ``.mcap`` file from its ``rosbag2`` metadata record.
        """
        try:
            if self.path.is_dir() and (self.path / 'metadata.yaml').is_file():
                info = yaml.safe_load((self.path / 'metadata.yaml').read_text())
            elif self.path.suffix == '.mcap':
                with self.path.open('rb') as stream:
                    info = next((yaml.safe_load(m.metadata.get('serialized_metadata', ''))
                                 for m in make_reader(stream).iter_metadata()
                                 if m.name == 'rosbag2'), None)
                info = {'rosbag2_bagfile_information': info}
            else:
                return {}
            data = (info or {}).get('rosbag2_bagfile_information', {}).get('custom_data')
        except Exception:  # noqa: BLE001 - a description we cannot read is no description
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def __enter__(self) -> Bag:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def messages(self, topics: Iterable[str]) -> Iterator[tuple[str, int, object]]:
        """
        ``(topic, log_time_ns, message)`` for the given topics.

        In log-time order for an indexed bag (file order for a streamed one). Stops quietly at
        unreadable data, noting it in :attr:`truncated`.
        """
        wanted = set(topics)
        try:
            if self._reader is not None:
                connections = [c for c in self._reader.connections if c.topic in wanted]
                for connection, log_time, raw in self._reader.messages(connections=connections):
                    yield connection.topic, log_time, self._reader.deserialize(
                        raw, connection.msgtype)
            elif self._databases:
                yield from self._database_messages(wanted)
            else:
                for path in self._mcap_files:
                    with path.open('rb') as stream:
                        reader = NonSeekingReader(stream, decoder_factories=[DecoderFactory()])
                        for _, channel, message, decoded in reader.iter_decoded_messages(
                                topics=wanted, log_time_order=False):
                            yield channel.topic, message.log_time, decoded
        except Exception as err:  # noqa: BLE001 - keep what was read, report the rest
            self.truncated = f'read stopped early: {_one_line(err)}'

    def _database_files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path] if self.path.suffix == '.db3' else []
        return sorted(self.path.glob('*.db3'))

    def _database_topics(self) -> dict[str, str]:
        topics: dict[str, str] = {}
        for path in self._databases:
            with _database(path) as database:
                topics.update(database.execute('SELECT name, type FROM topics').fetchall())
        return topics

    def _database_messages(self, wanted: set[str]) -> Iterator[tuple[str, int, object]]:
        """Yield the wanted topics' messages of sqlite3 databases, in log-time order each."""
        for path in self._databases:
            with _database(path) as database:
                rows = database.execute(
                    'SELECT topics.name, topics.type, messages.timestamp, messages.data '
                    'FROM messages JOIN topics ON messages.topic_id = topics.id '
                    'ORDER BY messages.timestamp')
                for topic, msgtype, log_time, data in rows:
                    if topic in wanted:
                        yield topic, log_time, DEFAULT_TYPESTORE.deserialize_cdr(
                            bytes(data), msgtype)

    def _stream_files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path] if self.path.suffix == '.mcap' else []
        return sorted(self.path.glob('*.mcap'))

    def _stream_topics(self) -> dict[str, str]:
        schemas: dict[int, str] = {}
        topics: dict[str, str] = {}
        for path in self._mcap_files:
            try:
                with path.open('rb') as stream:
                    for record in StreamReader(stream).records:
                        if isinstance(record, Schema):
                            schemas[record.id] = record.name
                        elif isinstance(record, Channel):
                            topics[record.topic] = schemas.get(record.schema_id, '')
            except Exception:  # noqa: BLE001 - the readable part ends here
                pass
        return topics


@contextmanager
def _database(path: Path):
    """
    Open a rosbag2 sqlite3 database to read it.

    SQLite first rolls back what its writer left uncommitted (a hot journal), as every SQLite
    reader does; a database that cannot be written is read as it is.
    """
    try:
        database = sqlite3.connect(f'file:{path}?mode=rw', uri=True)
        database.execute('SELECT count(*) FROM topics').fetchone()
    except sqlite3.Error:
        database = sqlite3.connect(f'file:{path}?immutable=1', uri=True)
    try:
        yield database
    finally:
        database.close()


def _one_line(err: BaseException) -> str:
    text = ' '.join(str(err).split()) or type(err).__name__
    return text if len(text) < 300 else text[:297] + '...'
