"""Stamp-based matching of segmentation results, depth images and camera infos (no ROS).

Segmentation arrives late (the model is slow) and may skip frames; depth and camera info
arrive at camera rate. Each camera has three queues keyed by stamp. A segmentation result is
matched with the depth image and camera info whose stamps lie closest to its own within
``tolerance``; a matched triple is emitted once and its entries leave the queues.

Entries are dropped, and counted by reason, when:

* ``stale``: older than the newest stamp seen on that camera minus ``max_age``;
* ``queue_full``: a queue exceeds ``max_queue`` (oldest first);
* ``duplicate``: an entry repeats a stamp already queued for that stream;
* ``late``: it arrives already older than ``max_age`` relative to the newest stamp;
* ``superseded``: a depth image or camera info older than an emitted segmentation (minus the
  tolerance) when ``in_order`` is True, since no later segmentation can use it.

With ``latch_camera_info`` (the default) the camera info queue holds the changes of a camera's
intrinsics, not every message: an info equal to the newest queued one and newer than it says
nothing new, so it is not queued and not counted as a drop (a camera publishing its info with
every frame would otherwise fill the queue and count a ``queue_full`` per frame).

Out-of-order arrivals within ``max_age`` are accepted and matched normally. All times are
message stamps in seconds; wall time is never consulted.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mimir import settings
from mimir_perception.camera import Intrinsics
from mimir_perception.errors import SynchronizationError
from mimir_perception.frames import FrameBuffer
from mimir_perception.segmentation import SegmentationResult

LOG = logging.getLogger(__name__)

STREAMS = ("segmentation", "depth", "camera_info")


@dataclass(frozen=True)
class SyncConfig(settings.Checked, section="sync", error=SynchronizationError,
                 non_negative=("tolerance",), positive_int=("max_queue",)):
    """Settings of the synchroniser.

    Attributes:
        tolerance: Largest stamp difference between matched entries (s).
        max_age: Entries older than the newest stamp of the camera minus this are dropped (s).
        max_queue: Most entries kept per stream and camera.
        latch_camera_info: Match the newest camera info at or before the stamp regardless of
            tolerance (intrinsics rarely change); if none precedes it, the oldest after it.
        in_order: Segmentation results of a camera arrive in stamp order, so depth and infos
            older than an emitted result can be released early.
    """

    tolerance: float = 0.02
    max_age: float = 2.0
    max_queue: int = 60
    latch_camera_info: bool = True
    in_order: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.max_age) and self.max_age > self.tolerance):
            raise SynchronizationError("sync.max_age must be finite and larger than tolerance")


@dataclass(frozen=True)
class SyncedFrame:
    """A matched triple ready for deprojection."""

    camera: str
    stamp: float
    segmentation: SegmentationResult
    depth: npt.NDArray[np.generic]
    intrinsics: Intrinsics
    depth_stamp: float
    info_stamp: float  # with latched infos: the first stamp of the unchanged intrinsics


def _queue(max_queue: int) -> FrameBuffer[Any]:
    """One stream's queue: stamps unique, at most ``max_queue`` entries (oldest leave first)."""
    return FrameBuffer(max_count=max_queue, unique_stamps=True)


@dataclass
class _CameraQueues:
    segmentation: FrameBuffer[SegmentationResult]
    depth: FrameBuffer[npt.NDArray[np.generic]]
    camera_info: FrameBuffer[Intrinsics]
    newest: float = -math.inf
    last_emitted: float = -math.inf


class FrameSynchronizer:
    """Matches segmentation, depth and camera info per camera by stamp."""

    def __init__(self, config: SyncConfig | None = None) -> None:
        self._config = config or SyncConfig()
        self._cameras: dict[str, _CameraQueues] = {}
        self._drops: Counter[tuple[str, str, str]] = Counter()
        self._emitted: Counter[str] = Counter()

    @property
    def config(self) -> SyncConfig:
        """The synchroniser settings."""
        return self._config

    def _camera(self, camera: str) -> _CameraQueues:
        if not isinstance(camera, str) or not camera:
            raise SynchronizationError(f"camera name must be a non-empty string, got {camera!r}")
        cams = self._cameras.get(camera)
        if cams is None:
            size = self._config.max_queue
            cams = self._cameras[camera] = _CameraQueues(_queue(size), _queue(size), _queue(size))
        return cams

    @staticmethod
    def _check_stamp(stamp: float) -> float:
        if isinstance(stamp, bool) or not isinstance(stamp, (int, float)):
            raise SynchronizationError(f"stamp must be a number, got {stamp!r}")
        if not math.isfinite(stamp) or stamp < 0.0:
            raise SynchronizationError(f"stamp must be finite and >= 0, got {stamp!r}")
        return float(stamp)

    def _drop(self, camera: str, stream: str, reason: str, count: int = 1) -> None:
        if count > 0:
            self._drops[(camera, stream, reason)] += count
            LOG.debug("dropped %d %s of %s (%s)", count, stream, camera, reason)

    def _add(self, camera: str, stream: str, stamp: float, item: object) -> list[SyncedFrame]:
        cfg = self._config
        stamp = self._check_stamp(stamp)
        cams = self._camera(camera)
        if stamp < cams.newest - cfg.max_age:
            self._drop(camera, stream, "late")
            return []
        queue: FrameBuffer[Any] = getattr(cams, stream)
        if not (stream == "camera_info" and self._repeats_latched(queue, stamp, item)):
            overflowed = queue.evicted_by_count
            if not queue.add(stamp, item):
                self._drop(camera, stream, "duplicate")
                return []
            self._drop(camera, stream, "queue_full", queue.evicted_by_count - overflowed)
        cams.newest = max(cams.newest, stamp)
        self._expire(camera, cams)
        return self._match(camera, cams)

    def _repeats_latched(self, queue: FrameBuffer[Intrinsics], stamp: float,
                         intrinsics: object) -> bool:
        """Whether a latched camera info only repeats the newest queued one, later."""
        if not self._config.latch_camera_info:
            return False
        latest = queue.latest()
        return latest is not None and latest[0] < stamp and latest[1] == intrinsics

    def add_segmentation(
        self, result: SegmentationResult, camera: str | None = None
    ) -> list[SyncedFrame]:
        """Queue a segmentation result (stamp and camera from the result unless given)."""
        if not isinstance(result, SegmentationResult):
            raise SynchronizationError("expected a SegmentationResult")
        return self._add(camera or result.camera, "segmentation", result.stamp, result)

    def add_depth(
        self, camera: str, stamp: float, depth: npt.NDArray[np.generic]
    ) -> list[SyncedFrame]:
        """Queue a depth image."""
        if not isinstance(depth, np.ndarray) or depth.ndim != 2:
            raise SynchronizationError("depth must be a 2D array")
        return self._add(camera, "depth", stamp, depth)

    def add_camera_info(
        self, camera: str, stamp: float, intrinsics: Intrinsics
    ) -> list[SyncedFrame]:
        """Queue a camera info."""
        if not isinstance(intrinsics, Intrinsics):
            raise SynchronizationError("expected Intrinsics")
        return self._add(camera, "camera_info", stamp, intrinsics)

    def _expire(self, camera: str, cams: _CameraQueues) -> None:
        limit = cams.newest - self._config.max_age
        for stream in STREAMS:
            queue: FrameBuffer[Any] = getattr(cams, stream)
            if stream == "camera_info" and self._config.latch_camera_info and len(queue):
                # Keep the newest info before the limit: it still describes later frames.
                kept = queue.before(limit, strict=True)
                dropped = queue.drop_before(kept[0]) if kept is not None else 0
            else:
                dropped = queue.drop_before(limit)
            self._drop(camera, stream, "stale", dropped)

    def _info(self, queue: FrameBuffer[Intrinsics],
              stamp: float) -> tuple[float, Intrinsics] | None:
        if not len(queue):
            return None
        if self._config.latch_camera_info:
            return queue.before(stamp + self._config.tolerance) or queue.oldest()
        found = queue.nearest(stamp)
        if found is not None and abs(found[0] - stamp) <= self._config.tolerance:
            return found
        return None

    def _match(self, camera: str, cams: _CameraQueues) -> list[SyncedFrame]:
        cfg = self._config
        out: list[SyncedFrame] = []
        for stamp, seg in cams.segmentation.items():
            depth_entry = cams.depth.nearest(stamp)
            if depth_entry is None or abs(depth_entry[0] - stamp) > cfg.tolerance:
                continue
            info = self._info(cams.camera_info, stamp)
            if info is None:
                continue
            cams.segmentation.take(stamp)
            depth_stamp, depth = depth_entry
            cams.depth.take(depth_stamp)
            info_stamp, intrinsics = info
            if not cfg.latch_camera_info:
                cams.camera_info.take(info_stamp)
            out.append(SyncedFrame(camera, stamp, seg, depth, intrinsics, depth_stamp, info_stamp))
            self._emitted[camera] += 1
            cams.last_emitted = max(cams.last_emitted, stamp)
        if out and cfg.in_order:
            limit = cams.last_emitted - cfg.tolerance
            self._drop(camera, "depth", "superseded", cams.depth.drop_before(limit))
            if not cfg.latch_camera_info:
                self._drop(camera, "camera_info", "superseded", cams.camera_info.drop_before(limit))
        return out

    def drop_counts(self) -> dict[str, int]:
        """Drops by reason over all cameras and streams."""
        totals: Counter[str] = Counter()
        for (_, _, reason), count in self._drops.items():
            totals[reason] += count
        return dict(totals)

    def diagnostics(self) -> dict[str, dict[str, int]]:
        """Per camera: emitted count, queue lengths and drops as ``<stream>.<reason>``."""
        report: dict[str, dict[str, int]] = {}
        for camera, cams in self._cameras.items():
            entry: dict[str, int] = {"emitted": self._emitted[camera]}
            for stream in STREAMS:
                entry[f"queued.{stream}"] = len(getattr(cams, stream))
            for (cam, stream, reason), count in self._drops.items():
                if cam == camera:
                    entry[f"{stream}.{reason}"] = count
            report[camera] = entry
        return report

    def reset(self) -> None:
        """Forget all queues (counters are kept), e.g. after a jump back in time (bag loop)."""
        self._cameras.clear()
