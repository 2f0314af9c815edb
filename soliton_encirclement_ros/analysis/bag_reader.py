"""
Read rosbag2 bags (MCAP or sqlite3, ours or ``ros2 bag record``'s) message by message.

Uses ``rosbags``' AnyReader (message definitions from the bag, ROS 2 Kilted typestore for bags
without them). Every storage file is first checked whole (``analysis.bag_scan``): a damaged part
is dropped and named, never read as data. Three things can be wrong, each said in its own words:

- :attr:`Bag.corrupt`: parts dropped because they are damaged (an MCAP chunk whose CRC does not
  match or that does not decompress, a sqlite3 range SQLite reports malformed, a message that
  does not decode or whose values are absurd); each names where (byte offset or rows, log-time
  span, topics). The rest of the bag is read.
- :attr:`Bag.truncated`: the messages stop early (a recorder killed before closing: no MCAP
  Data End, or no metadata.yaml next to a sqlite3 database; a file cut short).
- :attr:`Bag.metadata_damaged`: the metadata or the MCAP footer alone is damaged, and every
  message was read.

A file that is not a bag at all (no MCAP or SQLite magic) is :class:`BagError` "not an MCAP
bag"; one cut before its first topic (an empty or zero-byte storage file included), or with
nothing readable, is :class:`TruncatedBagError`. No rclpy.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
import sqlite3

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.highlevel import AnyReader
from rosbags.typesys import get_typestore, Stores
import yaml

from soliton_encirclement_ros.analysis.bag_scan import (
    Damage, mcap_messages, mcap_topics, sqlite_cut_short, sqlite_rows)

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
    None or why reading stopped before the end; ``corrupt`` None or what was dropped as
    damaged, and where; ``metadata_damaged`` None or what of the metadata alone was damaged
    (every message read). A reader that finds a message absurd drops it with
    :meth:`set_aside`, which ``corrupt`` then names too.
    """

    def __init__(self, path):
        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f'bag not found: {self.path}')
        self.truncated: str | None = None
        self.metadata_damaged: str | None = None
        self.damage = Damage()
        self._reader: AnyReader | None = None
        self._mcap_files: list[Path] = []
        self._databases: list[Path] = []
        self._raw = False  # read the storage files ourselves, past what is damaged
        index_problem = None
        try:
            reader = AnyReader([self.path], default_typestore=DEFAULT_TYPESTORE)
            reader.open()
            self._reader = reader
            self.topics = {name: info.msgtype for name, info in reader.topics.items()}
        except Exception as err:  # noqa: BLE001 - any unreadable index: read the storage
            self._check_storage()
            index_problem = _one_line(err)
            if self.path.is_dir() and not (self.path / 'metadata.yaml').exists():
                index_problem = 'no metadata.yaml: the recorder never closed the bag'
            self._raw = True
        self._mcap_files = self._stream_files()
        self._databases = [] if self._mcap_files else self._database_files()
        if self._raw:
            if self._databases:
                try:
                    self.topics = self._database_topics()
                except sqlite3.DatabaseError as db_err:
                    raise TruncatedBagError(
                        f'nothing readable in bag {self.path}: its database has no readable '
                        f'topic table ({_one_line(db_err)})') from None
            elif self._mcap_files:
                self.topics = {}
                for path in self._mcap_files:
                    self.topics.update(mcap_topics(path))
            else:
                raise BagError(f'cannot read bag {self.path}: {index_problem}') from None
        self._scan()
        if self.damage.corrupt or not self.damage.whole:
            self._raw = True
        if not self.damage.whole:
            self.truncated = self.damage.cut or 'read up to where it is damaged'
            if index_problem:
                self.truncated += f' (and its index is unreadable: {index_problem})'
        elif index_problem and self._databases and self.path.is_dir() \
                and not (self.path / 'metadata.yaml').exists():
            self.truncated = (f'bag index unreadable ({index_problem}); read from its database, '
                              'up to the last commit of the recorder')
        elif index_problem:
            self.metadata_damaged = (f'metadata damaged ({index_problem}); all '
                                     f'{self.damage.messages} messages read')
        if not self.topics:
            self.close()
            self._check_storage()
            if self.truncated or self.damage.corrupt:
                raise TruncatedBagError(f'truncated bag {self.path}: cut before its first topic '
                                        f'({self.truncated or self.damage.text()})')

    @property
    def corrupt(self) -> str | None:
        """Return what was dropped as damaged, and where, in one line; None: nothing."""
        return self.damage.text()

    def set_aside(self, topic: str, log_time: int, why: str) -> None:
        """Drop one message a reader found absurd: :attr:`corrupt` names it."""
        self.damage.set_aside(topic, log_time, why)

    def _scan(self) -> None:
        """Check every storage file whole; what is damaged goes into :attr:`damage`."""
        for path in self._mcap_files:
            for _ in mcap_messages(path, self.damage):
                pass
        for path in self._databases:
            try:
                cut_short = sqlite_cut_short(path)
                with _database(path) as database:
                    for _, log_time, _ in sqlite_rows(database, self.damage, cut_short):
                        self.damage.seen(log_time)
            except sqlite3.DatabaseError as err:
                self.damage.whole = False
                self.damage.cut = self.damage.cut or cut_short or f'{path.name}: {_one_line(err)}'

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

        In log-time order for an indexed bag (file order for a damaged one, whose damaged parts
        are skipped). A message that does not decode is dropped and named in :attr:`corrupt`.
        """
        wanted = set(topics)
        if not wanted:  # rosbags reads an empty connection list as "every topic"
            return
        try:
            if not self._raw:
                connections = [c for c in self._reader.connections if c.topic in wanted]
                for connection, log_time, raw in self._reader.messages(connections=connections):
                    try:
                        decoded = self._reader.deserialize(raw, connection.msgtype)
                    except Exception:  # noqa: BLE001 - a damaged message: named, not read
                        self.set_aside(connection.topic, log_time, 'undecodable')
                        continue
                    yield connection.topic, log_time, decoded
            elif self._databases:
                yield from self._database_messages(wanted)
            else:
                yield from self._mcap_messages(wanted)
        except Exception as err:  # noqa: BLE001 - keep what was read, report the rest
            self.truncated = f'read stopped early: {_one_line(err)}'

    def _mcap_messages(self, wanted: set[str]) -> Iterator[tuple[str, int, object]]:
        decoders = {}
        factory = DecoderFactory()
        for path in self._mcap_files:
            for channel, schema, message in mcap_messages(path, Damage()):
                if channel.topic not in wanted:
                    continue
                try:
                    if schema is None:
                        raise ValueError('no schema')
                    if schema.id not in decoders:
                        decoders[schema.id] = factory.decoder_for(channel.message_encoding,
                                                                  schema)
                    decoded = decoders[schema.id](message.data)
                except Exception:  # noqa: BLE001 - a damaged message: named, not read
                    self.set_aside(channel.topic, message.log_time, 'undecodable')
                    continue
                yield channel.topic, message.log_time, decoded

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
        """Yield the wanted topics' messages of sqlite3 databases, by row, past damaged rows."""
        typestore = self._reader.typestore if self._reader is not None else DEFAULT_TYPESTORE
        for path in self._databases:
            with _database(path) as database:
                topics = {i: (name, msgtype) for i, name, msgtype in database.execute(
                    'SELECT id, name, type FROM topics').fetchall()}
                for topic_id, log_time, data in sqlite_rows(database, Damage()):
                    topic, msgtype = topics.get(topic_id, (None, None))
                    if topic not in wanted:
                        continue
                    try:
                        decoded = typestore.deserialize_cdr(bytes(data), msgtype)
                    except Exception:  # noqa: BLE001 - a damaged row: named, not read
                        self.set_aside(topic, log_time, 'undecodable')
                        continue
                    yield topic, log_time, decoded

    def _stream_files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path] if self.path.suffix == '.mcap' else []
        return sorted(self.path.glob('*.mcap'))


@contextmanager
def _database(path: Path):
    """
    Open a rosbag2 sqlite3 database to read it.

    SQLite first rolls back what its writer left uncommitted (a hot journal), as every SQLite
    reader does; a database that cannot be written, or whose schema is damaged, is read as it
    is.
    """
    try:
        database = sqlite3.connect(f'file:{path}?mode=rw', uri=True)
        database.execute('SELECT count(*) FROM topics').fetchone()
    except sqlite3.Error:
        database = sqlite3.connect(f'file:{path}?immutable=1', uri=True)
        # A schema naming pages past the end of a file cut short (the timestamp index rosbags
        # makes at closing) would make every query "malformed": read the tables it can.
        database.execute('PRAGMA writable_schema=ON')
    try:
        yield database
    finally:
        database.close()


def _one_line(err: BaseException) -> str:
    text = ' '.join(str(err).split()) or type(err).__name__
    return text if len(text) < 300 else text[:297] + '...'
