"""Node counters reported on ``/diagnostics`` (``diagnostic_msgs/DiagnosticArray``)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from std_msgs.msg import Header


def counter_diagnostics(
    name: str,
    hardware_id: str,
    counters: Mapping[str, int],
    *,
    warn: bool,
    message: str = "",
    header: Header | None = None,
) -> DiagnosticArray:
    """One DiagnosticStatus holding ``counters`` as key/value pairs (sorted by key)."""
    status = DiagnosticStatus()
    status.level = DiagnosticStatus.WARN if warn else DiagnosticStatus.OK
    status.name = name
    status.hardware_id = hardware_id
    status.message = message or ("inputs skipped recently" if warn else "ok")
    status.values = [KeyValue(key=k, value=str(int(v))) for k, v in sorted(counters.items())]
    array = DiagnosticArray()
    if header is not None:
        array.header = header
    array.status = [status]
    return array



class NodeCounters:
    """Thread-safe event counters of a node, reported on ``/diagnostics``.

    Counters whose key is in ``warn_keys`` (or starts with one of them followed by a dot)
    turn the status to WARN when they grew since the previous report.
    """

    def __init__(self, warn_keys: tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._reported: dict[str, int] = {}
        self._warn_keys = warn_keys

    def add(self, key: str, count: int = 1) -> None:
        """Increase ``key`` by ``count``."""
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + int(count)

    def set(self, key: str, value: int) -> None:
        """Overwrite ``key`` (for counters kept elsewhere, e.g. by a synchroniser)."""
        with self._lock:
            self._counts[key] = int(value)

    def get(self, key: str) -> int:
        """Current value of ``key`` (0 when never counted)."""
        with self._lock:
            return self._counts.get(key, 0)

    def snapshot(self) -> dict[str, int]:
        """A copy of every counter."""
        with self._lock:
            return dict(self._counts)

    def _is_warning(self, key: str) -> bool:
        return any(key == w or key.endswith("." + w) for w in self._warn_keys)

    def publish(self, node: Any, publisher: Any, hardware_id: str) -> None:
        """Publish :meth:`report` under the node's full name, stamped with the node's clock."""
        array = self.report(node.get_fully_qualified_name(), hardware_id)
        array.header.stamp = node.get_clock().now().to_msg()
        publisher.publish(array)

    def report(self, name: str, hardware_id: str, header: Header | None = None) -> DiagnosticArray:
        """The counters as a DiagnosticArray; WARN when a warning counter grew since last time."""
        with self._lock:
            counts = dict(self._counts)
            grown = sorted(
                k for k, v in counts.items()
                if self._is_warning(k) and v > self._reported.get(k, 0)
            )
            self._reported = counts
        message = f"skipped inputs: {', '.join(grown)}" if grown else "ok"
        return counter_diagnostics(
            name, hardware_id, counts, warn=bool(grown), message=message, header=header
        )


class SkipReasons:
    """The counter each kind of error that makes a node skip an input is counted under.

    Built from ``(exception type, counter key)`` entries; the first entry the error is an instance
    of names its counter, so a subclass goes before its base. ``errors`` is the tuple to catch:

        try:
            rgb = image_to_rgb(msg)
        except IMAGE_SKIPS.errors as err:
            skip(IMAGE_SKIPS.key(err), f"skipping frame: {err}")
    """

    def __init__(self, *entries: tuple[type[Exception], str]) -> None:
        self._entries = entries
        self.errors: tuple[type[Exception], ...] = tuple(kind for kind, _ in entries)

    def key(self, err: Exception) -> str:
        """The counter key of ``err``.

        Raises:
            TypeError: ``err`` is none of the listed types.
        """
        for kind, key in self._entries:
            if isinstance(err, kind):
                return key
        raise TypeError(f"no skip counter for {type(err).__name__}")
