"""The bag recorder behind ``mimir record``: live topics into an mcap rosbag2 bag, no ``ros2``.

The recorder is an rclpy node that subscribes in raw mode, so every message reaches it as the
CDR bytes that crossed DDS and is written to the bag as is (:class:`mimir.bag_writer.
SplitBagWriter`, which also splits the bag into files); nothing is deserialized. A topic's type
is read from the ROS graph, and the graph is looked at again every half second, so topics whose
publishers appear after the recording began are recorded too. Each message is stamped with its
receive time (the recorder node's clock, nanoseconds). Which topics are recorded by default and
with which QoS: :mod:`mimir.nodes.bags.topics`; the bag's layout on disk:
:mod:`mimir.bag_writer`.

Stopping. ``--duration`` ends the recording after that many seconds; SIGINT and SIGTERM stop it
at once. Either way the node stops spinning first and the bag is then closed in a ``finally``,
so ``metadata.yaml`` is always written. A one-line summary follows: messages per topic, bytes,
duration and path.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimir.bag_writer import SplitBagWriter, check_output
from mimir.bags import BagError, message_class, typestore
from mimir.nodes.bags.topics import bag_qos, resolve_topics, subscription_qos, weakest

if TYPE_CHECKING:
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from rclpy.qos import QoSProfile
    from rclpy.subscription import Subscription
    from rclpy.topic_endpoint_info import TopicEndpointInfo

# rclpy is imported where it is used: ``mimir`` builds every subcommand's parser at start, and
# loading it takes most of a second.

#: Seconds between two looks at the ROS graph for topics that appeared.
SCAN_PERIOD_S = 0.5

#: ``--split-size`` is given in megabytes of this many bytes.
BYTES_PER_MB = 1_000_000

#: Exit status of a recording refused before it started (the CLI's usage-error status).
USAGE_ERROR_STATUS = 2

_SPIN_STEP_S = 0.1


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
    """A topic being recorded: its type, the QoS it is subscribed with, its subscription."""

    name: str
    msgtype: str
    msg_class: Any
    qos: QoSProfile
    subscription: Subscription[Any] | None = None


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
        self._bag = SplitBagWriter(self.output, split_size_bytes=split_size_bytes,
                                   recorded_by="mimir record")
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
            self._bag.open()
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
        self._bag.add_topic(name, msgtype, [bag_qos(q) for q in offered])
        topic = _Topic(name, msgtype, msg_class, subscription_qos(offered))
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
        wanted = weakest(topic.qos, subscription_qos([p.qos_profile for p in publishers]))
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
        node = self._node
        if node is None:
            return
        self._bag.write(name, node.get_clock().now().nanoseconds, data)
        with self._lock:
            self._counts[name] += 1

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
                self._bag.close()
        return self._summarize(duration)

    def _summarize(self, duration_s: float) -> RecordSummary:
        counts = self.message_counts()
        not_seen = tuple(t for t in self.topics if t not in counts)
        return RecordSummary(self.output, counts, self._bag.size_bytes(), duration_s,
                             self._bag.files, not_seen)
