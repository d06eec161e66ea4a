"""The DDS bag player behind ``mimir replay BAG``: a rosbag2 recording republished over DDS on
the bag's own clock.

Running nodes (started with ``use_sim_time``) then see the recording as live data: every message
goes out as the bytes it was recorded as (no decoding), paced by its recording time divided by
``rate``, and ``/clock`` carries the bag's time, ticking at least every ``clock_period_s`` of bag
time through quiet stretches. Topics whose recorded QoS was transient-local (``/tf_static``,
latched graph topics) are republished transient-local so late subscribers still get them;
everything else goes out reliable, which best-effort subscribers (the camera pipeline) accept.
A topic whose message type this installation cannot import is left out and reported.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosbags.highlevel import AnyReader
from rosbags.interfaces import QosDurability
from rosgraph_msgs.msg import Clock

from mimir.bags import BagError, message_class, topic_key, typestore
from mimir.ros.floatfix import FloatSafePublisher

#: Topics that stay global under a namespace.
_GLOBAL = ("tf", "tf_static", "clock")


@dataclass
class PlaySummary:
    """What a playback published and left out."""

    bag: str
    published: Counter[str] = field(default_factory=Counter)
    left_out: dict[str, str] = field(default_factory=dict)
    bag_seconds: float = 0.0
    wall_seconds: float = 0.0
    stopped: bool = False

    def lines(self) -> list[str]:
        """The summary as printed at the end of a playback."""
        total = sum(self.published.values())
        out = [f"played {self.bag}: {total} messages on {len(self.published)} topics, "
               f"{self.bag_seconds:.1f} s of bag in {self.wall_seconds:.1f} s"
               + (" (stopped early)" if self.stopped else "")]
        out += [f"  {topic}: {count}" for topic, count in sorted(self.published.items())]
        out += [f"  left out {topic}: {why}" for topic, why in sorted(self.left_out.items())]
        return out


def _latched(conn: Any) -> bool:
    profiles = getattr(conn.ext, "offered_qos_profiles", None) or []
    return topic_key(conn.topic) == "tf_static" or any(
        getattr(p, "durability", None) == QosDurability.TRANSIENT_LOCAL for p in profiles)


class BagPlayer:
    """Republishes a bag over DDS, paced by its recording time.

    Args:
        bag: The bag folder or file.
        rate: Playback speed relative to the recording (2.0: twice as fast).
        start: Seconds of the bag to skip.
        end: Stop at this many seconds from the bag's start (None: its end).
        topics: Only these bag topics (leading slash optional); empty: all.
        namespace: Prefix of every topic but ``/tf``, ``/tf_static`` and ``/clock``.
        clock: Publish ``/clock`` with the bag's time.
        clock_period_s: Longest stretch of bag time without a ``/clock`` tick (s).
        context: rclpy context (initialised by the caller); None for the default one.
    """

    def __init__(self, bag: Path, *, rate: float = 1.0, start: float = 0.0,
                 end: float | None = None, topics: Sequence[str] = (), namespace: str = "",
                 clock: bool = True, clock_period_s: float = 0.05,
                 context: Context | None = None) -> None:
        if not (rate > 0.0 and rate < float("inf")):
            raise ValueError(f"rate must be a positive number, got {rate}")
        if not start >= 0.0 or (end is not None and not end > start):
            raise ValueError(f"need 0 <= start < end, got start {start}, end {end}")
        if not clock_period_s > 0.0:
            raise ValueError(f"clock_period_s must be positive, got {clock_period_s}")
        self.bag = Path(bag)
        self.rate, self.start, self.end = rate, start, end
        self.topics = {topic_key(t) for t in topics}
        self.namespace = namespace.strip("/")
        self.clock, self.clock_period_s = clock, clock_period_s
        self.node: Node = rclpy.create_node("mimir_replay", context=context,
                                            start_parameter_services=False)
        self._clock_pub = self.node.create_publisher(
            Clock, "/clock", 100, publisher_class=FloatSafePublisher) if clock else None
        self.summary = PlaySummary(bag=str(self.bag))
        self._reader: AnyReader | None = None
        self._publishers: dict[int, tuple[Any, Any]] = {}

    def open(self) -> None:
        """Open the bag and create the publishers (``run`` does it when not done yet), so
        subscribers can match them before the first message goes out.

        Raises:
            BagError: the bag cannot be opened.
        """
        if self._reader is not None:
            return
        try:
            reader = AnyReader([self.bag], default_typestore=typestore())
            reader.open()
        except Exception as err:  # rosbags raises several unrelated types for a bad bag
            raise BagError(f"cannot open the bag {self.bag}: {err}") from err
        self._reader = reader
        self._publishers = self._make_publishers(reader)

    def close(self) -> None:
        """Close the bag and destroy the node and its publishers."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.node.destroy_node()

    def _name(self, topic: str) -> str:
        key = topic_key(topic)
        if not self.namespace or key in _GLOBAL:
            return f"/{key}"
        return f"/{self.namespace}/{key}"

    def _tick(self, stamp_ns: int) -> None:
        if self._clock_pub is not None:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = divmod(int(stamp_ns), 1_000_000_000)
            self._clock_pub.publish(msg)

    def run(self, stop: threading.Event | None = None,
            on_message: Callable[[str, int], None] | None = None) -> PlaySummary:
        """Play the bag (or its slice) to the end, or until ``stop`` is set.

        Raises:
            BagError: the bag cannot be opened or breaks off mid-way (what was published
                before stays published).
        """
        stop = stop or threading.Event()
        self.open()
        reader, publishers = self._reader, self._publishers
        assert reader is not None
        began = time.monotonic()
        try:
            first = reader.start_time + round(self.start * 1e9)
            last = None if self.end is None else reader.start_time + round(self.end * 1e9)
            clock_ns = first
            self._tick(first)
            messages = reader.messages(connections=[c for c, _ in publishers.values()],
                                       start=first,
                                       stop=None if last is None else last + 1)
            while True:
                try:
                    conn, stamp_ns, raw = next(messages)
                except StopIteration:
                    break
                except Exception as err:  # a truncated or corrupt file fails in the reader
                    raise BagError(
                        f"the bag broke off after {sum(self.summary.published.values())} "
                        f"messages: {type(err).__name__}: {err}") from err
                clock_ns = self._wait(clock_ns, stamp_ns, first, began, stop)
                if stop.is_set():
                    self.summary.stopped = True
                    break
                publishers[conn.id][1].publish(bytes(raw))
                name = self._name(conn.topic)
                self.summary.published[name] += 1
                self.summary.bag_seconds = (stamp_ns - first) * 1e-9
                if on_message is not None:
                    on_message(name, stamp_ns)
        finally:
            self.summary.wall_seconds = time.monotonic() - began
        return self.summary

    def _make_publishers(self, reader: AnyReader) -> dict[int, tuple[Any, Any]]:
        """Connection id -> (connection, publisher) of every topic played."""
        out: dict[int, tuple[Any, Any]] = {}
        made: dict[str, Any] = {}
        for conn in reader.connections:
            key = topic_key(conn.topic)
            if self.topics and key not in self.topics:
                continue
            name = self._name(conn.topic)
            try:
                cls = message_class(conn.msgtype)
            except ImportError as err:
                self.summary.left_out[name] = f"type {conn.msgtype} not installed here ({err})"
                continue
            if name not in made:
                profile = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE,
                                     durability=DurabilityPolicy.TRANSIENT_LOCAL
                                     if _latched(conn) else DurabilityPolicy.VOLATILE)
                # recorded bytes go out as they are (the float fix applies to messages)
                made[name] = self.node.create_publisher(cls, name, profile,
                                                        publisher_class=FloatSafePublisher)
            out[conn.id] = (conn, made[name])
        missing = self.topics - {topic_key(c.topic) for c, _ in out.values()}
        for key in sorted(missing):
            self.summary.left_out.setdefault(self._name(key), "not in the bag")
        return out

    def _wait(self, clock_ns: int, stamp_ns: int, first: int, began: float,
              stop: threading.Event) -> int:
        """Sleep until the message is due, ticking ``/clock`` through the gap; the clock."""
        step = round(self.clock_period_s * 1e9)
        while not stop.is_set():
            due = began + (stamp_ns - first) * 1e-9 / self.rate
            ahead = due - time.monotonic()
            if clock_ns + step < stamp_ns:
                nap = min(ahead, self.clock_period_s / self.rate)
                if nap > 0.0:
                    stop.wait(nap)
                clock_ns += step
                self._tick(clock_ns)
                continue
            if ahead > 0.0:
                stop.wait(ahead)
            self._tick(stamp_ns)
            return stamp_ns
        return clock_ns


def play(bag: Path, *, progress: Callable[[PlaySummary], None] | None = None,
         **options: Any) -> PlaySummary:
    """Play a bag in a context of its own until its end or Ctrl-C (``summary.stopped``);
    ``options`` are :class:`BagPlayer`'s, ``progress`` is called after each message.

    Raises:
        ValueError: invalid options.
        BagError: the bag cannot be opened or breaks off.
    """
    context = Context()
    rclpy.init(context=context)
    try:
        player = BagPlayer(bag, context=context, **options)
        try:
            return player.run(on_message=(lambda _t, _s: progress(player.summary))
                              if progress is not None else None)
        except KeyboardInterrupt:
            player.summary.stopped = True
            return player.summary
        finally:
            player.close()
    finally:
        rclpy.try_shutdown(context=context)
