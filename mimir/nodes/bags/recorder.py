"""The bag recorder behind ``mimir record``: live topics into an mcap rosbag2 bag, no ``ros2``.

The recorder is an rclpy node that subscribes in raw mode, so every message reaches it as the
CDR bytes that crossed DDS and is written to the bag as is, with the ``rosbags`` writer; nothing
is deserialized. A topic's type is read from the ROS graph, and the graph is looked at again
every half second, so topics whose publishers appear after the recording began are recorded
too. Each message is stamped with its receive time (the recorder node's clock, nanoseconds).

QoS follows the publishers, as ``ros2 bag record`` does: a topic is subscribed reliable when
every publisher offers reliable delivery and best effort otherwise, and transient-local when
every publisher is latched (``/tf_static``, the scene graph), so the latched value is caught
even when it was sent before the recorder started. A publisher that appears later with weaker
QoS makes the recorder subscribe again with the weaker setting. The publishers' offered QoS is
stored with each topic in the bag, so a replay can publish the same way.

The default topic set is what a replay on a machine without a GPU needs: per camera the colour
and depth images, the colour camera info, the segmentation masks and the part masks; ``/tf`` and
``/tf_static``; the robot contract's signals (odometry, commanded and achieved end-effector
pose, gripper, interaction events, ``/diagnostics``); the observations and the memory events.
The planner publishes no trace topic (it writes its trace to a file), so none is recorded.

Bag layout. The output folder is one rosbag2 bag in mcap storage: ``metadata.yaml`` plus the
files ``<name>_0.mcap``, ``<name>_1.mcap`` ... (``<name>`` is the folder's name), exactly the
layout ``ros2 bag record --max-bag-size`` writes. The ``rosbags`` writer cannot split a bag by
itself, so the recorder writes each file as a bag of its own in the staging folder
``<output>/<name>_<N>/``; when the file reaches ``--split-size`` (counted as the bytes written
to it, messages plus their record headers, because the writer holds up to 1 MiB in memory
before the file grows), or when the recording stops, that bag is closed, its file moves up into
the output folder and ``metadata.yaml`` is rewritten to describe every closed file. A recording
that is killed outright (SIGKILL, power loss) therefore keeps a readable bag of the files closed
before, and leaves the file it was writing in its staging folder, unindexed.

Stopping. ``--duration`` ends the recording after that many seconds; SIGINT and SIGTERM stop it
at once. Either way the node stops spinning first and the bag is then closed in a ``finally``,
so ``metadata.yaml`` is always written. A one-line summary follows: messages per topic, bytes,
duration and path.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from mimir.bags import BagError, message_class, typestore
from mimir.signals import handling
from mimir_robot import contract

if TYPE_CHECKING:
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile
    from rclpy.subscription import Subscription
    from rclpy.topic_endpoint_info import TopicEndpointInfo
    from rosbags.interfaces import Connection, Qos
    from rosbags.rosbag2 import Writer

# rclpy, rosbags, PyYAML and mimir.bags (which loads rosbags) are imported where they are used:
# ``mimir`` builds every subcommand's parser at start, and loading them takes most of a second.

#: rosbag2 metadata version written (the newest the ``rosbags`` writer knows; Jazzy and later).
BAG_VERSION: Final = 9

#: Seconds between two looks at the ROS graph for topics that appeared.
SCAN_PERIOD_S = 0.5

#: Queue depth of every subscription (keep-last); latched topics replay up to this many values.
QUEUE_DEPTH = 100

#: Bytes an mcap file holds per message besides its payload: the message record's header
#: (opcode, length, channel, sequence, two timestamps) and its entry in the message index.
RECORD_OVERHEAD_BYTES = 47

#: ``--split-size`` is given in megabytes of this many bytes.
BYTES_PER_MB = 1_000_000

#: Exit status of a recording refused before it started (the CLI's usage-error status).
USAGE_ERROR_STATUS = 2

_SPIN_STEP_S = 0.1


# ------------------------------------------------------------------------------- topic names


def default_topics(cameras: Sequence[str] = contract.CAMERAS) -> list[str]:
    """The topics a replay without a GPU needs, for the given cameras (names as published)."""
    topics: list[str] = []
    for camera in cameras:
        names = contract.camera_topics(camera)
        topics += [names.color, names.depth, names.camera_info,
                   f"cameras/{camera}/segmentation", f"cameras/{camera}/parts"]
    topics += ["/tf", "/tf_static", contract.TOPIC_ODOM, contract.TOPIC_EE_COMMANDED,
               contract.TOPIC_EE_ACHIEVED, contract.TOPIC_GRIPPER,
               contract.TOPIC_INTERACTION_EVENTS, contract.TOPIC_DIAGNOSTICS,
               "observations", "memory_events"]
    return topics


def _first_line(err: Exception) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def resolve_topics(topics: Sequence[str], namespace: str = "") -> list[str]:
    """Absolute topic names: relative ones are put under ``namespace``; duplicates dropped.

    Raises:
        BagError: the list is empty, the namespace is invalid, or a name is not a valid ROS
            topic name (every invalid name is listed).
    """
    from rclpy.exceptions import (  # noqa: PLC0415 - see the imports
        InvalidNamespaceException,
        InvalidTopicNameException,
    )
    from rclpy.validate_full_topic_name import validate_full_topic_name  # noqa: PLC0415
    from rclpy.validate_namespace import validate_namespace  # noqa: PLC0415


    prefix = ""
    if namespace.strip("/"):
        prefix = "/" + namespace.strip("/")
        try:
            validate_namespace(prefix)
        except InvalidNamespaceException as err:
            raise BagError(f"invalid namespace {namespace!r}: {_first_line(err)}") from err
    if not topics:
        raise BagError("no topic to record — name at least one with --topics")
    resolved: list[str] = []
    invalid: list[str] = []
    for name in topics:
        full = name if name.startswith("/") else f"{prefix}/{name}"
        try:
            validate_full_topic_name(full)
        except InvalidTopicNameException as err:
            reason = _first_line(err).removeprefix("Invalid topic name: ").rstrip(":")
            invalid.append(f"{name!r} ({reason})")
            continue
        if full not in resolved:
            resolved.append(full)
    if invalid:
        raise BagError("invalid topic name(s): " + "; ".join(invalid)
                       + " — topic names use letters, digits, '_' and '/'")
    return resolved


# ----------------------------------------------------------------------------------------- QoS


def subscription_qos(offered: Sequence[QoSProfile]) -> QoSProfile:
    """The QoS that matches every offered profile: reliable and transient-local only when all
    publishers offer them (an empty list is treated as all of them offering both)."""
    from rclpy.qos import (  # noqa: PLC0415 - see the imports
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,
    )

    reliable = all(q.reliability == ReliabilityPolicy.RELIABLE for q in offered)
    latched = all(q.durability == DurabilityPolicy.TRANSIENT_LOCAL for q in offered)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=QUEUE_DEPTH,
        reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE,
    )


def _weakest(current: QoSProfile, wanted: QoSProfile) -> QoSProfile:
    """``current`` weakened wherever ``wanted`` asks for less (never strengthened)."""
    from rclpy.qos import (  # noqa: PLC0415 - see the imports
        DurabilityPolicy,
        HistoryPolicy,
        QoSProfile,
        ReliabilityPolicy,
    )

    best_effort = ReliabilityPolicy.BEST_EFFORT in (current.reliability, wanted.reliability)
    volatile = DurabilityPolicy.VOLATILE in (current.durability, wanted.durability)
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=QUEUE_DEPTH,
        reliability=ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE if volatile else DurabilityPolicy.TRANSIENT_LOCAL,
    )


def bag_qos(profile: QoSProfile) -> Qos:
    """A publisher's offered QoS as the ``rosbags`` writer stores it in the bag."""
    from rosbags.interfaces import (  # noqa: PLC0415 - see the imports
        Qos,
        QosDurability,
        QosHistory,
        QosLiveliness,
        QosReliability,
        QosTime,
    )

    def _qos_time(nanoseconds: int) -> QosTime:
        return QosTime(nanoseconds // 1_000_000_000, nanoseconds % 1_000_000_000)

    return Qos(
        history=QosHistory.__members__.get(profile.history.name, QosHistory.UNKNOWN),
        depth=profile.depth,
        reliability=QosReliability.__members__.get(profile.reliability.name,
                                                   QosReliability.UNKNOWN),
        durability=QosDurability.__members__.get(profile.durability.name,
                                                 QosDurability.UNKNOWN),
        deadline=_qos_time(profile.deadline.nanoseconds),
        lifespan=_qos_time(profile.lifespan.nanoseconds),
        liveliness=QosLiveliness.__members__.get(profile.liveliness.name,
                                                 QosLiveliness.UNKNOWN),
        liveliness_lease_duration=_qos_time(profile.liveliness_lease_duration.nanoseconds),
        avoid_ros_namespace_conventions=profile.avoid_ros_namespace_conventions,
    )


# ----------------------------------------------------------------------------- output folder


def default_output() -> Path:
    """``rosbag2_<date>-<time>`` in the current folder, the name ``ros2 bag record`` picks."""
    return Path(datetime.now().strftime("rosbag2_%Y_%m_%d-%H_%M_%S"))


def check_output(path: Path) -> None:
    """Refuse an output that would overwrite something or cannot be created.

    An absent path or an empty folder is accepted.

    Raises:
        BagError: the path is a file, a folder that is not empty, or lies where no folder can be
            created (below a file, or in a folder this user cannot write).
    """

    hint = " — give --output a new folder"
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise BagError(f"output {path} exists and is not a folder; not overwriting it{hint}")
        if any(path.iterdir()):
            raise BagError(f"output folder {path} exists and is not empty; not overwriting "
                           f"it{hint}")
        if not os.access(path, os.W_OK | os.X_OK):
            raise BagError(f"output folder {path} is not writable{hint}")
        return
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BagError(f"cannot create output folder {path}: {parent} is not a folder{hint}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BagError(f"cannot create output folder {path}: {parent} is not writable{hint}")


# ---------------------------------------------------------------------------------- recorder


def _size_text(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


@dataclass(frozen=True)
class RecordSummary:
    """What a recording wrote."""

    path: Path                    # the bag folder
    messages: dict[str, int]      # messages per recorded topic (absolute names)
    bytes: int                    # size of the bag's mcap files
    duration_s: float             # wall-clock time spent recording
    files: tuple[str, ...]        # the bag's files, in order
    not_seen: tuple[str, ...] = ()  # requested topics that never had a recordable publisher

    @property
    def total_messages(self) -> int:
        """Messages over every topic."""
        return sum(self.messages.values())

    def line(self) -> str:
        """The one-line summary printed at the end of ``mimir record``."""
        per_topic = ", ".join(f"{name} {count}" for name, count in sorted(self.messages.items()))
        text = (f"recorded {self.total_messages} messages, {_size_text(self.bytes)} in "
                f"{self.duration_s:.1f} s to {self.path} ({len(self.files)} file"
                f"{'' if len(self.files) == 1 else 's'})")
        if per_topic:
            text += f": {per_topic}"
        if self.not_seen:
            text += f"; not seen: {', '.join(self.not_seen)}"
        return text


@dataclass
class _Topic:
    """A topic being recorded: its type, the QoS its publishers offered, its subscription."""

    name: str
    msgtype: str
    msg_class: Any
    offered: list[Qos]
    qos: QoSProfile
    subscription: Subscription[Any] | None = None


@dataclass
class _Part:
    """The bag file being written: a one-file bag in its staging folder."""

    index: int
    folder: Path
    writer: Writer
    connections: dict[str, Connection] = field(default_factory=dict)
    size: int = 0


class BagRecorder:
    """Records topics into an mcap rosbag2 bag folder from live raw subscriptions.

    Use :meth:`start` and :meth:`stop` to record in a background thread, or :meth:`open`,
    :meth:`spin` and :meth:`close` to record in the calling thread (what :func:`record` does).
    Everything the constructor checks (topic names, output folder, split size) is refused
    before anything is created.

    Args:
        output: the bag folder to create (absent, or an empty folder).
        topics: topic names; relative ones are put under ``namespace``.
        namespace: prefix of relative topic names.
        split_size_bytes: start a new file in the bag when the current one reaches this size.
        context: the rclpy context to record in; None creates (and later shuts down) one.
        node_name: name of the recorder node.
        scan_period_s: seconds between two looks at the ROS graph.
    """

    def __init__(self, output: Path | str, topics: Sequence[str], *, namespace: str = "",
                 split_size_bytes: int | None = None, context: Context | None = None,
                 node_name: str = "mimir_record", scan_period_s: float = SCAN_PERIOD_S) -> None:

        self.output = Path(output).absolute()
        self.topics = resolve_topics(topics, namespace)
        check_output(self.output)
        if split_size_bytes is not None and split_size_bytes <= 0:
            raise BagError(f"split size must be positive, got {split_size_bytes} bytes")
        self._split_size = split_size_bytes
        self._given_context = context
        self._node_name = node_name
        self._scan_period_s = scan_period_s
        self._context: Context | None = None
        self._node: Node | None = None
        self._executor: SingleThreadedExecutor | None = None
        self._created_output = False
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._recorded: dict[str, _Topic] = {}
        self._skipped: dict[str, str] = {}      # topic -> the type it was skipped for
        self._part: _Part | None = None
        self._closed_parts: list[dict[str, Any]] = []
        self._opened_at = 0.0
        self._summary: RecordSummary | None = None
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None

    # --------------------------------------------------------------------- life cycle

    def open(self) -> None:
        """Create the bag folder and its first file, start the node and subscribe to the
        requested topics that already have publishers."""
        import rclpy  # noqa: PLC0415 - see the imports
        from rclpy.context import Context  # noqa: PLC0415
        from rclpy.executors import SingleThreadedExecutor  # noqa: PLC0415
        from rclpy.signals import SignalHandlerOptions  # noqa: PLC0415


        if self._node is not None or self._summary is not None:
            raise BagError("this recorder was already opened")
        try:
            existed = self.output.exists()
            self.output.mkdir(parents=True, exist_ok=True)
            self._created_output = not existed
        except OSError as err:
            raise BagError(f"cannot create output folder {self.output}: {err}") from err
        try:
            if self._given_context is None:
                context = Context()
                rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)
                self._context = context
            else:
                context = self._given_context
            self._node = rclpy.create_node(self._node_name, context=context)
            self._executor = SingleThreadedExecutor(context=context)
            self._executor.add_node(self._node)
            self._open_part()
            self._node.create_timer(self._scan_period_s, self._scan)
            self._opened_at = time.monotonic()
            self._scan()
        except BaseException:
            try:
                self._teardown()
            finally:
                if self._created_output and not any(self.output.iterdir()):
                    self.output.rmdir()  # leave nothing behind a start that failed
            raise

    def spin(self, duration_s: float | None = None) -> None:
        """Record until :meth:`request_stop` (or a signal) or ``duration_s`` seconds pass."""

        if self._executor is None:
            raise BagError("the recorder is not open")
        deadline = None if duration_s is None else time.monotonic() + duration_s
        while not self._stop.is_set():
            step = _SPIN_STEP_S
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0.0:
                    break
                step = min(step, left)
            self._executor.spin_once(timeout_sec=step)

    def request_stop(self) -> None:
        """Ask :meth:`spin` to return (safe from any thread and from a signal handler)."""
        self._stop.set()

    def close(self) -> RecordSummary:
        """Stop the node, close the bag (``metadata.yaml`` written) and say what was recorded.

        Call it after :meth:`spin` returned; calling it again returns the same summary.
        """
        if self._summary is None:
            self._summary = self._teardown()
        return self._summary

    def start(self) -> None:
        """:meth:`open`, then record in a background thread until :meth:`stop`."""
        self.open()
        self._thread = threading.Thread(target=self._spin_in_thread, name="mimir-record",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> RecordSummary:
        """End a recording begun with :meth:`start`: stop spinning, close the bag.

        Raises:
            BagError: recording failed in the background thread (the bag is closed first).
        """

        self.request_stop()
        if self._thread is not None:
            self._thread.join()
        try:
            summary = self.close()
        finally:
            if self._thread_error is not None:
                raise BagError(f"recording failed: {self._thread_error}") from self._thread_error
        return summary

    def _spin_in_thread(self) -> None:
        try:
            self.spin()
        except BaseException as err:  # noqa: BLE001 - kept and raised again by stop()
            self._thread_error = err

    # ------------------------------------------------------------------- progress

    def message_counts(self) -> dict[str, int]:
        """Messages recorded so far per topic (safe from any thread)."""
        with self._lock:
            return dict(self._counts)

    def subscribed_topics(self) -> list[str]:
        """The topics subscribed so far."""
        with self._lock:
            return sorted(self._counts)

    # ------------------------------------------------------------------- the graph

    def _scan(self) -> None:
        node = self._node
        if node is None:
            return
        present = {name for name, _types in node.get_topic_names_and_types()}
        for name in self.topics:
            if name not in present:
                continue
            publishers = node.get_publishers_info_by_topic(name)
            if not publishers:
                continue
            known = self._recorded.get(name)
            if known is None:
                self._subscribe(node, name, publishers)
            else:
                self._weaken(node, known, publishers)

    def _warn(self, text: str) -> None:
        if self._node is not None:
            self._node.get_logger().warning(text)

    def _subscribe(self, node: Node, name: str, publishers: list[TopicEndpointInfo]) -> None:

        types = sorted({info.topic_type for info in publishers})
        msgtype = types[0]
        if self._skipped.get(name) == msgtype:
            return
        if len(types) > 1:
            self._warn(f"{name} is published with several types ({', '.join(types)}); "
                       f"recording {msgtype} only")
        if msgtype not in typestore().fielddefs:
            self._skipped[name] = msgtype
            self._warn(f"not recording {name}: type {msgtype} is not known to the bag type "
                       "store (neither a standard ROS 2 message nor a mimir_msgs message)")
            return
        try:
            msg_class = message_class(msgtype)
        except ImportError as err:
            self._skipped[name] = msgtype
            self._warn(f"not recording {name}: cannot import message type {msgtype}: {err}")
            return
        offered = [info.qos_profile for info in publishers]
        topic = _Topic(name, msgtype, msg_class, [bag_qos(q) for q in offered],
                       subscription_qos(offered))
        if self._part is not None:
            self._add_connection(self._part, topic)
        self._recorded[name] = topic
        with self._lock:
            self._counts[name] = 0
        topic.subscription = self._create_subscription(node, topic)

    def _create_subscription(self, node: Node, topic: _Topic) -> Subscription[Any]:
        callback = functools.partial(self._on_message, topic.name)
        return node.create_subscription(topic.msg_class, topic.name, callback, topic.qos,
                                        raw=True)

    def _weaken(self, node: Node, topic: _Topic, publishers: list[TopicEndpointInfo]) -> None:
        """Subscribe again when a publisher appeared whose QoS the subscription cannot match."""
        wanted = _weakest(topic.qos, subscription_qos([p.qos_profile for p in publishers]))
        if (wanted.reliability, wanted.durability) == (topic.qos.reliability,
                                                       topic.qos.durability):
            return
        self._warn(f"{topic.name}: a publisher offers weaker QoS; subscribing again "
                   f"{wanted.reliability.name.lower()}, {wanted.durability.name.lower()}")
        if topic.subscription is not None:
            node.destroy_subscription(topic.subscription)
        topic.qos = wanted
        topic.subscription = self._create_subscription(node, topic)

    # ------------------------------------------------------------------- the bag

    def _on_message(self, name: str, data: bytes) -> None:
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415 - see the imports


        node = self._node
        if node is None:
            return
        stamp = node.get_clock().now().nanoseconds
        if self._part is None:
            self._open_part()
        part = self._part
        assert part is not None
        try:
            part.writer.write(part.connections[name], stamp, data)
        except WriterError as err:
            raise BagError(f"cannot write to {part.folder}: {err}") from err
        part.size += len(data) + RECORD_OVERHEAD_BYTES
        with self._lock:
            self._counts[name] += 1
        if self._split_size is not None and part.size >= self._split_size:
            self._close_part()

    def _open_part(self) -> None:
        from rosbags.rosbag2 import StoragePlugin, Writer, WriterError  # noqa: PLC0415


        index = len(self._closed_parts)
        folder = self.output / f"{self.output.name}_{index}"
        try:
            writer = Writer(folder, version=BAG_VERSION, storage_plugin=StoragePlugin.MCAP)
            writer.set_custom_data("recorded_by", "mimir record")
            writer.open()
        except (WriterError, OSError) as err:
            raise BagError(f"cannot open bag file in {folder}: {err}") from err
        part = _Part(index, folder, writer)
        for topic in self._recorded.values():
            self._add_connection(part, topic)
        self._part = part

    @staticmethod
    def _add_connection(part: _Part, topic: _Topic) -> None:
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415 - see the imports


        try:
            part.connections[topic.name] = part.writer.add_connection(
                topic.name, topic.msgtype, typestore=typestore(),
                offered_qos_profiles=topic.offered)
        except WriterError as err:
            raise BagError(f"cannot add topic {topic.name} to the bag: {err}") from err

    def _close_part(self) -> None:
        """Close the file being written, move it into the bag folder, rewrite the metadata."""
        import yaml  # noqa: PLC0415 - see the imports
        from rosbags.rosbag2 import WriterError  # noqa: PLC0415


        part, self._part = self._part, None
        if part is None:
            return
        try:
            part.writer.close()
            staged_meta = part.folder / "metadata.yaml"
            info = yaml.safe_load(staged_meta.read_text(encoding="utf-8"))
            info = info["rosbag2_bagfile_information"]
            (staged,) = part.folder.glob("*.mcap")
            final = self.output / staged.name
            staged.replace(final)
            staged_meta.unlink()
            part.folder.rmdir()
        except (WriterError, OSError, yaml.YAMLError, KeyError, ValueError) as err:
            raise BagError(f"cannot close bag file in {part.folder}: {err}") from err
        info["relative_file_paths"] = [final.name]
        for entry in info.get("files", []):
            entry["path"] = final.name
        self._closed_parts.append(info)
        self._write_metadata()

    def _write_metadata(self) -> None:
        """``metadata.yaml`` of the bag folder, describing every closed file."""
        import yaml  # noqa: PLC0415 - see the imports


        parts = self._closed_parts
        first = parts[0]
        with_messages = [p for p in parts if p["message_count"] > 0]
        if with_messages:
            start = min(p["starting_time"]["nanoseconds_since_epoch"] for p in with_messages)
            end = max(p["starting_time"]["nanoseconds_since_epoch"]
                      + p["duration"]["nanoseconds"] for p in with_messages)
        else:
            start = first["starting_time"]["nanoseconds_since_epoch"]
            end = start
        topics: dict[tuple[str, str], dict[str, Any]] = {}
        for part in parts:
            for entry in part["topics_with_message_count"]:
                meta = entry["topic_metadata"]
                key = (meta["name"], meta["type"])
                if key in topics:
                    topics[key]["message_count"] += entry["message_count"]
                else:
                    topics[key] = {"topic_metadata": meta,
                                   "message_count": entry["message_count"]}
        info = {
            "version": first["version"],
            "storage_identifier": first["storage_identifier"],
            "duration": {"nanoseconds": end - start},
            "starting_time": {"nanoseconds_since_epoch": start},
            "message_count": sum(p["message_count"] for p in parts),
            "topics_with_message_count": list(topics.values()),
            "compression_format": first.get("compression_format", ""),
            "compression_mode": first.get("compression_mode", ""),
            "relative_file_paths": [path for p in parts for path in p["relative_file_paths"]],
            "files": [entry for p in parts for entry in p.get("files", [])],
            "custom_data": first.get("custom_data"),
            "ros_distro": first.get("ros_distro"),
        }
        target = self.output / "metadata.yaml"
        scratch = target.with_suffix(".yaml.tmp")
        try:
            scratch.write_text(yaml.safe_dump({"rosbag2_bagfile_information": info},
                                               sort_keys=False), encoding="utf-8")
            scratch.replace(target)
        except OSError as err:
            raise BagError(f"cannot write {target}: {err}") from err

    # ------------------------------------------------------------------- teardown

    def _teardown(self) -> RecordSummary:
        """Stop the node (and the context it created), then close the bag in ``finally``."""
        import rclpy  # noqa: PLC0415 - see the imports

        duration = time.monotonic() - self._opened_at if self._opened_at else 0.0
        self._stop.set()
        try:
            if self._executor is not None:
                self._executor.shutdown(timeout_sec=5.0)
            if self._node is not None:
                self._node.destroy_node()
        finally:
            self._executor = None
            self._node = None
            try:
                if self._context is not None:
                    rclpy.try_shutdown(context=self._context)
            finally:
                self._context = None
                self._close_part()
        return self._summarize(duration)

    def _summarize(self, duration_s: float) -> RecordSummary:
        files = tuple(path for p in self._closed_parts for path in p["relative_file_paths"])
        size = 0
        for name in files:
            size += (self.output / name).stat().st_size
        counts = self.message_counts()
        not_seen = tuple(t for t in self.topics if t not in counts)
        return RecordSummary(self.output, counts, size, duration_s, files, not_seen)


# ---------------------------------------------------------------------------- entry points


def stop_on_signals(stop: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
    """SIGINT and SIGTERM call ``stop`` while the block runs (main thread only)."""
    return handling((signal.SIGINT, signal.SIGTERM), lambda _sig, _frame: stop())


def record(output: Path | str, topics: Sequence[str], *, duration_s: float | None = None,
           namespace: str = "", split_size_bytes: int | None = None,
           context: Context | None = None, handle_signals: bool = False,
           on_open: Callable[[BagRecorder], None] | None = None) -> RecordSummary:
    """Record ``topics`` into the bag folder ``output`` until ``duration_s`` passes or, with
    ``handle_signals``, SIGINT or SIGTERM arrives; the bag is closed in every case.

    ``on_open`` is called once the bag is open and the node subscribed to what it found.

    Raises:
        BagError: the recording was refused (names, output folder) or the bag failed.
    """

    if duration_s is not None and not duration_s > 0.0:
        raise BagError(f"duration must be positive, got {duration_s} s")
    recorder = BagRecorder(output, topics, namespace=namespace,
                           split_size_bytes=split_size_bytes, context=context)
    signals = (stop_on_signals(recorder.request_stop) if handle_signals
               else contextlib.nullcontext())
    with signals:
        recorder.open()
        try:
            if on_open is not None:
                on_open(recorder)
            recorder.spin(duration_s)
        finally:
            summary = recorder.close()
    return summary


