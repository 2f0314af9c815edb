"""
Record live topics into a rosbag2 (MCAP by default, sqlite3 optional) from an rclpy node.

Messages arrive serialized (``raw=True`` subscriptions) and go straight into the bag with the
``rosbags`` writer: no deserialization on the recording path. Type names, message definitions
and type hashes come from the rosbags typestore of the ROS 2 distribution we run on, and each
topic's ``offered_qos_profiles`` from its publishers, as ``ros2 bag record`` does. The log time
of a message is the recording node's clock at receipt (sim time under ``use_sim_time``).

MCAP chunks are zstd-compressed by default (``compression='none'`` turns it off; sqlite3 has no
chunks and is written uncompressed). Every ``COMMIT_PERIOD`` of wall time the bag is made durable
so far: a sqlite3 bag is committed, an MCAP bag closes its chunk and flushes it to the file. A
recorder killed before it closes the bag (no ``metadata.yaml``), or whose disk fills, leaves every
message up to then readable (``analysis.bag_reader`` reads such a bag), where one transaction, or
MCAP chunks of 1 MiB, left nothing of a small run.
``custom_data`` fills the bag's metadata (``custom_data`` of ``metadata.yaml`` and of the MCAP
``rosbag2`` metadata record): what was run, by which version.
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import partial
import importlib
from pathlib import Path
import re
import sqlite3
import struct
import threading
import time
from typing import Mapping
import zlib

from rclpy.executors import ShutdownException, TimeoutException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rosbags.interfaces import (
    Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime)
from rosbags.rosbag2 import CompressionFormat, CompressionMode, StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.typesys import get_typestore, Stores

from ros_support.topics import follow_new
from soliton_encirclement_ros.analysis.outputs import write_problem
from soliton_encirclement_ros.interface import (
    AGENT_CMD_TOPIC, AGENT_ODOM_TOPIC, AGENT_STATES_TOPIC, CLOCK_TOPIC, DIAGNOSTICS_TOPIC,
    MARKERS_TOPIC, METRICS_TOPIC_PREFIX, TARGET_STATE_TOPIC)

# Every agent's odometry and commands (the target's odometry included), the swarm topics,
# the metrics, the markers (Foxglove's 3D panel of a bag shows the ring and trails), the
# clock and /diagnostics (each node's state and each agent's per-sender link figures, what a
# flight report's timeline and who-heard-whom table come from): built from the interface's names.
DEFAULT_TOPICS_REGEX = '^(' + '|'.join([
    f'/[^/]+/{AGENT_ODOM_TOPIC}', f'/[^/]+/{AGENT_CMD_TOPIC}', re.escape(AGENT_STATES_TOPIC),
    re.escape(TARGET_STATE_TOPIC), re.escape(METRICS_TOPIC_PREFIX) + '.+',
    re.escape(MARKERS_TOPIC), re.escape(CLOCK_TOPIC), re.escape(DIAGNOSTICS_TOPIC)]) + ')$'
STORAGE_PLUGINS = {'mcap': StoragePlugin.MCAP, 'sqlite3': StoragePlugin.SQLITE3}
COMPRESSIONS = ('zstd', 'none')  # MCAP chunk compression (a 60 s run: 2.2 MB -> 0.3 MB)
COMMIT_PERIOD = 1.0  # wall s between two commits of a sqlite3 bag or flushed MCAP chunks
# rmw's RMW_MESSAGE_INFO_SEQUENCE_NUMBER_UNSUPPORTED is the largest uint64: at or above this,
# a publication sequence number is no number.
NO_SEQUENCE = 2 ** 63
ROSBAG2_METADATA_VERSION = 9  # the version Jazzy and Kilted write; offered QoS as a YAML list
SUBSCRIPTION_DEPTH = 100
# A subscription created on a topic that the graph shows may match its publisher later (the
# graph and DDS's endpoint discovery travel apart): records() waits for the match this long.
MATCH_WAIT = 2.0  # wall s
TYPESTORE = get_typestore(Stores.ROS2_KILTED)


class CheckedMcapWriter(McapWriter):
    """
    rosbags' MCAP storage writer, with the CRC of each chunk's records (rosbags writes 0: none).

    A reader can then tell a damaged chunk from an intact one (``analysis.bag_scan``); the MCAP
    layout is otherwise rosbags' own. The CRC is written into the chunk's header once the chunk
    is on disk (its place is known from the chunk index).
    """

    CRC_AT = 9 + 8 + 8 + 8  # record header, message start and end times, uncompressed size
    # The log time [ns] of the last message in a chunk flushed to the file; None before one is.
    on_disk_until: int | None = None

    def close_chunk(self) -> None:
        crc = zlib.crc32(self.chunk.bio.getbuffer())
        last = self.chunk.message_end_time
        super().close_chunk()
        chunk_start = struct.unpack_from('<Q', self.chunks[-1].getbuffer(), 16)[0]
        end = self.bio.tell()
        self.bio.seek(chunk_start + self.CRC_AT)
        self.bio.write(struct.pack('<I', crc))
        self.bio.seek(end)
        self.bio.flush()  # the chunk is in the file now, or this raises (a full disk)
        if last > 0:
            self.on_disk_until = last

    def flush(self) -> None:
        """Close the pending chunk, if it holds a message, and write it to the file."""
        if self.chunk.msgs:
            self.close_chunk()


class CheckedWriter(Writer):
    """rosbags' bag writer, its MCAP chunks with CRCs (:class:`CheckedMcapWriter`)."""

    STORAGE_PLUGINS = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: CheckedMcapWriter}


class BagRecorder:
    """
    Record the topics of ``node``'s graph whose name matches ``topics_regex`` into a new bag.

    Matching is ``re.search``, like ``ros2 bag record -e``; the bag is written at ``bag_path``.

    Call :meth:`discover` periodically to pick up new topics and :meth:`close` once at the end
    (also safe from a signal handler or a ``finally``). A write that fails (a full disk) stops
    the recording there and then, with one error line: the bag keeps what was written before,
    :attr:`failure` says what happened, and the caller's run goes on. ``qos`` overrides the
    subscription QoS; by default it adapts to the publishers (reliable / transient-local only if
    all of them are).
    ``compression`` is the MCAP chunk compression (``zstd`` or ``none``); ``custom_data`` (string
    to string) goes into the bag's metadata.
    """

    def __init__(self, node: Node, bag_path, topics_regex: str = DEFAULT_TOPICS_REGEX,
                 storage: str = 'mcap', qos: QoSProfile | None = None,
                 compression: str = 'zstd', custom_data: Mapping[str, str] | None = None):
        if storage not in STORAGE_PLUGINS:
            raise ValueError(f'storage must be one of {sorted(STORAGE_PLUGINS)}, got {storage!r}')
        if compression not in COMPRESSIONS:
            raise ValueError(f'compression must be one of {list(COMPRESSIONS)}, '
                             f'got {compression!r}')
        try:
            self._pattern = re.compile(topics_regex)
        except re.error as err:
            raise ValueError(f'topics_regex {topics_regex!r} is not a regular expression: {err}')
        self.bag_path = Path(bag_path)
        if self.bag_path.exists():
            raise FileExistsError(f'bag path {str(self.bag_path)!r} exists already; '
                                  'choose a new directory')
        self._node = node
        self._qos = qos
        self.failure = ''  # what stopped the recording early (one line), or ''
        self._writer = CheckedWriter(self.bag_path, version=ROSBAG2_METADATA_VERSION,
                                     storage_plugin=STORAGE_PLUGINS[storage])
        if storage == 'mcap' and compression == 'zstd':
            self._writer.set_compression(CompressionMode.STORAGE, CompressionFormat.ZSTD)
        for key, value in (custom_data or {}).items():
            self._writer.set_custom_data(key, str(value))
        try:
            self._writer.open()
        except OSError as error:
            raise ValueError(write_problem(f'cannot create the bag {self.bag_path}',
                                           error)) from None
        # The sqlite3 connection to commit now and then (rosbags writes one transaction).
        self._database = getattr(self._writer.storage, 'conn', None)
        self._committed_at = time.monotonic()
        self._lock = threading.RLock()
        self._lock_owner: int | None = None
        self._close_pending = False
        self._subscriptions = {}
        self._subscribed_at: dict[str, float] = {}  # monotonic s, per topic
        self._connections = []
        self._final_counts: dict[int, int] = {}
        self._skipped: set[str] = set()
        self._types: dict[str, str] = {}
        # Messages a publisher sent that never reached the bag (a recorder that cannot keep
        # up: they fell out of the subscription's queue), from its publication sequence numbers.
        self.missed: dict[str, int] = {}
        self._missed_from: float | None = None  # the sim time of the first one missed
        self._last_sequence: dict[bytes, int] = {}
        self._from_first = False  # a publisher first heard from now is due from its first

    @property
    def topics(self) -> list[str]:
        """Topics being recorded."""
        return sorted(self._subscriptions)

    @property
    def closed(self) -> bool:
        return self._writer is None

    def records(self, topics) -> bool:
        """
        Say whether every one of ``topics`` this recorder's pattern takes is recorded.

        A topic counts once its subscription is matched with every publisher this node's graph
        shows (a message published before that is lost), or ``MATCH_WAIT`` after it was made,
        or when it is skipped. This is the readers' side of the match only: a publisher's side
        matches when its own participant hears of the subscription, which can come later
        (``ros_support.participants.Roster.call`` asks for that side).
        """
        now = time.monotonic()
        return all(topic in self._skipped or (
            topic in self._subscriptions
            and (self._subscriptions[topic].get_publisher_count()
                 >= max(1, self._node.count_publishers(topic))
                 or now - self._subscribed_at[topic] > MATCH_WAIT))
            for topic in topics if self._pattern.search(topic))

    @property
    def message_counts(self) -> dict[str, int]:
        """Messages written so far per recorded topic."""
        counts = self._writer.counts if self._writer is not None else self._final_counts
        return {c.topic: counts[c.id] for c in self._connections}

    def discover(self) -> list[str]:
        """
        Subscribe to matching topics not seen before; return the newly recorded ones.

        Also makes the bag durable if ``COMMIT_PERIOD`` has passed since it last was (on a
        quiet graph no message comes to do it).
        """
        with self._writer_access():
            self._durable_if_due()
        # A topic with no publisher yet is looked at again at the next discovery.
        added = follow_new(self._node, self._pattern, set(self._subscriptions) | self._skipped,
                           self._subscribe)
        if added:  # one line per discovery round, not one per topic
            self._node.get_logger().info(recording_line(
                {topic: self._types[topic] for topic in added}))
        return added

    def set_custom_data(self, key: str, value: str) -> None:
        """Set ``key`` of the bag's ``custom_data`` (written when it closes); closed: no-op."""
        with self._writer_access():
            if self._writer is not None:
                self._writer.set_custom_data(key, str(value))

    def close(self) -> None:
        """
        Flush the storage and write metadata.yaml.

        Idempotent. Called while this thread is inside the writer (a signal handler interrupting a
        callback), it closes right after.
        """
        if self._lock_owner == threading.get_ident():
            self._close_pending = True
            return
        with self._writer_access():
            self._finish()

    @contextmanager
    def _writer_access(self):
        # Re-entrant: a signal handler may call close() on this thread just outside the writer.
        with self._lock:
            self._lock_owner = threading.get_ident()
            try:
                yield
                if self._close_pending:
                    self._finish()
            finally:
                self._lock_owner = None

    def _subscribe(self, topic: str, types: list[str], publishers) -> bool:
        logger = self._node.get_logger()
        if len(types) != 1:
            logger.warning(f'not recording {topic}: it has several types {types}')
            self._skipped.add(topic)
            return False
        msgtype = types[0]
        if msgtype not in TYPESTORE.types:
            logger.warning(f'not recording {topic}: type {msgtype} has no known definition')
            self._skipped.add(topic)
            return False
        offered = [_rosbags_qos(info.qos_profile) for info in publishers]
        with self._writer_access():
            if self._writer is None:
                return False
            try:
                connection = self._writer.add_connection(
                    topic, msgtype, typestore=TYPESTORE, offered_qos_profiles=offered)
            except OSError as error:
                self._stop_on(error)
                return False
            self._connections.append(connection)
        package, _, name = msgtype.split('/')
        msg_class = getattr(importlib.import_module(f'{package}.msg'), name)
        qos = self._qos or _adapted_qos([info.qos_profile for info in publishers])
        self._subscriptions[topic] = self._node.create_subscription(
            msg_class, topic, partial(self._on_message, connection), qos, raw=True)
        self._subscribed_at[topic] = time.monotonic()
        self._types[topic] = msgtype
        return True

    @property
    def missed_line(self) -> str:
        """Say in one line what the bag misses of what was published while it recorded, or ''."""
        if not self.missed:
            return ''
        count = sum(self.missed.values())
        recorded = sum(self.message_counts.values())
        topic, most = max(self.missed.items(), key=lambda item: item[1])
        return (f'bag {self.bag_path} misses {count} of the {count + recorded} messages '
                f'published on its topics while it recorded, from t={self._missed_from:.2f} s '
                f'(most on {topic}: {most}); the recorder did not keep up with them')

    def expect_first_messages(self) -> None:
        """
        Count from now a publisher's messages before the first that reaches the bag as missed.

        For a graph whose publishers start with the recording (``swarm_sim --processes``: the
        simulated clock starts once the bag's readers are matched with every writer): a
        publisher first heard from now on whose first message here is numbered n > 1 sent n - 1
        that never reached the bag, and :attr:`missed_line` says so. A publisher heard before
        keeps counting from its first message here.
        """
        self._from_first = True

    def _on_message(self, connection, data: bytes, info) -> None:
        stamp = self._node.get_clock().now().nanoseconds
        with self._writer_access():
            if self._writer is not None:
                self._count_missed(connection.topic, info, stamp)
                try:
                    self._writer.write(connection, stamp, data)
                except (OSError, sqlite3.Error) as error:  # sqlite3: a full disk too
                    self._stop_on(error)
                self._durable_if_due()

    def _durable_if_due(self) -> None:
        """
        Make the bag durable once ``COMMIT_PERIOD`` has passed (see the module's doc).

        A sqlite3 bag is committed, an MCAP bag's pending chunk flushed; a write that fails
        stops the recording. Closed: no-op.
        """
        if self._writer is None or time.monotonic() - self._committed_at < COMMIT_PERIOD:
            return
        try:
            if self._database is not None:
                self._database.commit()
            elif isinstance(self._writer.storage, CheckedMcapWriter):
                self._writer.storage.flush()
        except (OSError, sqlite3.Error) as error:
            self._stop_on(error)
        self._committed_at = time.monotonic()

    def _written_until(self, writer=None) -> float:
        """
        Return the log time [s] up to which the bag is in its file.

        An MCAP bag's: its last flushed chunk's last message (0 before one is); a sqlite3 bag's:
        now (its rows are written as they come).
        """
        storage = getattr(writer or self._writer, 'storage', None)
        if isinstance(storage, CheckedMcapWriter):
            return (storage.on_disk_until or 0) * 1e-9
        return self._node.get_clock().now().nanoseconds * 1e-9

    def _count_missed(self, topic: str, info, stamp: int) -> None:
        """Count the messages of this message's publisher that came between it and the last."""
        sequence = (info or {}).get('publication_sequence_number')
        gid = (info or {}).get('publisher_gid')
        if not isinstance(sequence, int) or sequence >= NO_SEQUENCE or not gid:
            return  # the RMW does not number them
        publisher = bytes(gid['data'] if isinstance(gid, dict) else gid)
        last = self._last_sequence.get(publisher, 0 if self._from_first else None)
        if last is not None and sequence > last + 1:
            self.missed[topic] = self.missed.get(topic, 0) + sequence - last - 1
            if self._missed_from is None:
                self._missed_from = stamp * 1e-9
        if last is None or sequence > last:
            self._last_sequence[publisher] = sequence

    def _stop_on(self, error: Exception) -> None:
        """Stop recording after a failed write: close what can be closed, say it once."""
        seconds = self._written_until()
        self.failure = (write_problem(f'bag {self.bag_path} not written beyond t={seconds:.2f} s',
                                      error) + ' (recording stopped; the bag holds what was '
                        'written before)')
        self._node.get_logger().error(self.failure)
        self._finish()

    def _finish(self) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close()
        except (OSError, sqlite3.Error) as error:  # its last chunk or metadata.yaml
            if not self.failure:  # a write that failed before said it already
                seconds = self._written_until(writer)
                self.failure = write_problem(
                    f'bag {self.bag_path} not written beyond t={seconds:.2f} s', error
                ) + ' (not closed whole; the bag holds what was written before)'
                self._node.get_logger().error(self.failure)
        self._final_counts = writer.counts
        count = sum(writer.counts.values())
        self._node.get_logger().info(
            f'closed bag {self.bag_path}: {count} messages on {len(writer.connections)} topics')


def drain(executor, limit: float, idle: float) -> None:
    """
    Run the callbacks still ready on ``executor`` (the messages queued for a bag) after a stop.

    Until none is ready for ``idle`` s, for ``limit`` s at most. A reliable writer counts a
    message delivered once the bag's reader holds it: a bag closed before its callback ran
    would lose it. A callback that raises is not news now: the recording is over.
    """
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            handler, _, _ = executor.wait_for_ready_callbacks(timeout_sec=idle)
        except (TimeoutException, ShutdownException):
            return
        handler()  # a task: what its callback raises stays in it


def recording_line(topics: dict[str, str]) -> str:
    """
    Return one line naming the topics (name -> type) that start being recorded, grouped.

    Agents' topics share a line: ``/uav{1..10}/odom [nav_msgs/msg/Odometry]``; so do the
    topics of one namespace and type: ``/swarm/metrics/{E_gap,E_r} [std_msgs/msg/Float64]``.
    """
    agents, rest = {}, {}
    for topic, msgtype in topics.items():
        match = re.fullmatch(r'/(.*?)(\d+)/([^/]+)', topic)
        if match:
            agents.setdefault((match[1], match[3], msgtype), []).append(int(match[2]))
        else:
            rest[topic] = msgtype
    groups = []
    for (prefix, leaf, msgtype), numbers in agents.items():
        if len(numbers) == 1:
            rest[f'/{prefix}{numbers[0]}/{leaf}'] = msgtype
        else:
            groups.append((f'/{prefix}{_numbers(sorted(numbers))}/{leaf}', msgtype))
    by_parent = {}
    for topic, msgtype in rest.items():
        parent, _, leaf = topic.rpartition('/')
        by_parent.setdefault((parent, msgtype), []).append(leaf)
    for (parent, msgtype), leaves in by_parent.items():
        name = leaves[0] if len(leaves) == 1 else '{' + ','.join(sorted(leaves)) + '}'
        groups.append((f'{parent}/{name}', msgtype))
    count = len(topics)
    return (f'recording {count} topic{"" if count == 1 else "s"}: '
            + ', '.join(f'{name} [{msgtype}]' for name, msgtype in sorted(groups)))


def _numbers(numbers: list[int]) -> str:
    """``{1..10}`` for a contiguous run of integers, else ``{1,3,7}``."""
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f'{{{numbers[0]}..{numbers[-1]}}}'
    return '{' + ','.join(str(n) for n in numbers) + '}'


def _adapted_qos(offered: list[QoSProfile]) -> QoSProfile:
    """Subscription QoS compatible with every publisher, as ``ros2 bag record`` adapts it."""
    reliable = all(p.reliability == ReliabilityPolicy.RELIABLE for p in offered)
    latched = all(p.durability == DurabilityPolicy.TRANSIENT_LOCAL for p in offered)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=SUBSCRIPTION_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def _rosbags_qos(profile: QoSProfile) -> Qos:
    return Qos(
        history=QosHistory[profile.history.name],
        depth=profile.depth,
        reliability=QosReliability[profile.reliability.name],
        durability=QosDurability[profile.durability.name],
        deadline=_qos_time(profile.deadline.nanoseconds),
        lifespan=_qos_time(profile.lifespan.nanoseconds),
        liveliness=QosLiveliness[profile.liveliness.name],
        liveliness_lease_duration=_qos_time(profile.liveliness_lease_duration.nanoseconds),
        avoid_ros_namespace_conventions=profile.avoid_ros_namespace_conventions,
    )


def _qos_time(nanoseconds: int) -> QosTime:
    return QosTime(*divmod(int(nanoseconds), 1_000_000_000))
