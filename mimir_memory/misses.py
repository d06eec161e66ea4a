"""Negative evidence frame by frame: record a miss for each node a view should have shown.

:func:`mimir_memory.visibility.expected_unseen` says which remembered nodes one camera frame
should have shown and did not; :class:`MissRecorder` turns those into misses in world memory
(:meth:`mimir_memory.world.WorldMemory.record_miss`). One node counts at most one miss per
``min_period_s`` of frame time, so one glance from three cameras is one miss, not three; a node
seen again starts afresh. Enough misses in a row make memory record ``at_last_place`` = false.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from mimir_memory.errors import MemoryStoreError
from mimir_memory.events import EventKind, MemoryEvent
from mimir_memory.visibility import CameraView, VisibilityConfig, expected_unseen
from mimir_memory.world import WorldMemory


@dataclass
class MissReport:
    """What one frame's misses did.

    Attributes:
        events: The stored events, in order (misses, and the ``at_last_place`` they set).
        recorded: Misses stored.
        stale: Nodes these misses marked as gone from their last place.
        throttled: Misses left out, the node's last one being too recent.
        refused: (node id, error) of misses memory did not store.
    """

    events: list[MemoryEvent] = field(default_factory=list)
    recorded: int = 0
    stale: int = 0
    throttled: int = 0
    refused: list[tuple[str, MemoryStoreError]] = field(default_factory=list)


class MissRecorder:
    """Records the misses of successive frames in one world memory, throttled per node.

    Not thread-safe: the caller holds whatever lock guards the world memory.
    """

    def __init__(self, world: WorldMemory, config: VisibilityConfig,
                 min_period_s: float) -> None:
        if not min_period_s >= 0.0:
            raise ValueError(f"min_period_s must be >= 0, got {min_period_s}")
        self.world = world
        self.config = config
        self.min_period_s = min_period_s
        self._last: dict[str, float] = {}  # frame stamp of the last miss stored per node

    def record(self, view: CameraView, seen: Collection[str], *, stamp: float,
               camera: str = "", unsure: Collection[str] = ()) -> MissReport:
        """Record a miss for every node the frame should have shown.

        Args:
            view: What the camera could see.
            seen: Nodes the frame's observations were associated with.
            stamp: The frame's stamp (s).
            camera: The camera's name (may be empty).
            unsure: Labels of observations the frame had but memory refused: nodes of those
                labels may well have been in view, so they are not expected.
        """
        report = MissReport()
        for node_id in seen:
            self._last.pop(node_id, None)
        expected = expected_unseen(self.world.state.nodes.values(), view, seen, self.config,
                                   skip_labels=unsure)
        for node_id, reason in expected:
            last = self._last.get(node_id)
            if last is not None and abs(stamp - last) < self.min_period_s:
                report.throttled += 1
                continue
            try:
                events = self.world.record_miss(
                    node_id, stamp=stamp, camera=camera,
                    reason=f"camera {camera or '(unnamed)'}: {reason}")
            except MemoryStoreError as err:
                report.refused.append((node_id, err))
                continue
            self._last[node_id] = stamp
            report.recorded += 1
            report.stale += sum(e.kind == EventKind.PROPERTY_SET for e in events)
            report.events.extend(events)
        return report
