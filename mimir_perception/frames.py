"""Time-ordered buffers of stamped items (camera frames, depth images, robot states...).

:class:`FrameBuffer` is the one buffer behind every "keep the recent past of a stream and look
things up by stamp" use: the analyzer's camera, gripper, fixture and detection streams, the
keyframe node's recent colour frames and the synchroniser's per-camera queues. Stamps are
message stamps in seconds; wall time is never read. :class:`PairedFrames` builds on it to attach
registered depth images to their colour frames.

No ROS: items are whatever the caller stores (a message, an array, a record).
"""

from __future__ import annotations

import bisect
import math
import numbers
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
ColorT = TypeVar("ColorT")
DepthT = TypeVar("DepthT")
InfoT = TypeVar("InfoT")


class StampError(ValueError):
    """A stamp that is not a finite number of seconds."""


def _check(stamp: float, what: str = "stamp") -> float:
    if isinstance(stamp, bool) or not isinstance(stamp, numbers.Real):
        raise StampError(f"{what} must be a number of seconds, got {stamp!r}")
    if not math.isfinite(stamp):
        raise StampError(f"{what} must be finite, got {stamp!r}")
    return float(stamp)


class FrameBuffer(Generic[T]):
    """Items kept in stamp order, bounded by age and by count; safe to share between threads.

    Args:
        max_age_s: items older than the newest stamp minus this are forgotten (inf: no limit).
        max_count: most items kept; the oldest go first (None: no limit).
        min_period_s: an item whose stamp lies less than this after the newest kept stamp is
            not kept (rate limit; 0 keeps everything).
        unique_stamps: refuse an item whose stamp is already held.

    Items arriving out of order are inserted in place (after items of the same stamp).
    ``evicted_by_age`` and ``evicted_by_count`` count what the bounds removed.
    """

    def __init__(self, max_age_s: float = math.inf, max_count: int | None = None, *,
                 min_period_s: float = 0.0, unique_stamps: bool = False) -> None:
        if math.isnan(max_age_s) or max_age_s < 0.0:
            raise ValueError(f"max_age_s must be >= 0, got {max_age_s!r}")
        if max_count is not None and max_count < 1:
            raise ValueError(f"max_count must be at least 1, got {max_count!r}")
        if not (math.isfinite(min_period_s) and min_period_s >= 0.0):
            raise ValueError(f"min_period_s must be finite and >= 0, got {min_period_s!r}")
        self.max_age_s = float(max_age_s)
        self.max_count = max_count
        self.min_period_s = float(min_period_s)
        self.unique_stamps = unique_stamps
        self.evicted_by_age = 0
        self.evicted_by_count = 0
        self._stamps: list[float] = []
        self._items: list[T] = []
        self._lock = threading.RLock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._stamps)

    def __iter__(self) -> Iterator[tuple[float, T]]:
        """A snapshot of every (stamp, item), oldest first."""
        return iter(self.items())

    def add(self, stamp: float, item: T) -> bool:
        """Inserts an item in stamp order, then applies the bounds.

        Returns:
            False when the item was refused: its stamp is already held (``unique_stamps``)
            or it falls within ``min_period_s`` after the newest item. True otherwise, even
            when the bounds evicted it at once (counted in ``evicted_*``).

        Raises:
            StampError: ``stamp`` is NaN, infinite or not a number.
        """
        stamp = _check(stamp)
        with self._lock:
            stamps = self._stamps
            if stamps and self.min_period_s > 0.0:
                last = stamps[-1]
                if last <= stamp < last + self.min_period_s:
                    return False
            if self.unique_stamps:
                i = bisect.bisect_left(stamps, stamp)
                if i < len(stamps) and stamps[i] == stamp:
                    return False
            i = bisect.bisect_right(stamps, stamp)
            stamps.insert(i, stamp)
            self._items.insert(i, item)
            if self.max_count is not None and len(stamps) > self.max_count:
                extra = len(stamps) - self.max_count
                del stamps[:extra]
                del self._items[:extra]
                self.evicted_by_count += extra
            if math.isfinite(self.max_age_s):
                self.evicted_by_age += self._drop_before(stamps[-1] - self.max_age_s)
            return True

    def _drop_before(self, limit: float) -> int:
        cut = bisect.bisect_left(self._stamps, limit)
        if cut:
            del self._stamps[:cut]
            del self._items[:cut]
        return cut

    def admits(self, stamp: float) -> bool:
        """Whether :meth:`add` would keep an item at ``stamp`` now (the rate limit and the
        unique stamps); lets a caller skip preparing an item that would be refused.

        Raises:
            StampError: ``stamp`` is NaN, infinite or not a number.
        """
        stamp = _check(stamp)
        with self._lock:
            stamps = self._stamps
            if stamps and self.min_period_s > 0.0 and stamps[-1] <= stamp < stamps[-1] \
                    + self.min_period_s:
                return False
            if self.unique_stamps:
                i = bisect.bisect_left(stamps, stamp)
                if i < len(stamps) and stamps[i] == stamp:
                    return False
            return True

    def drop_before(self, limit: float) -> int:
        """Forgets items with a stamp below ``limit``; returns how many."""
        limit = _check(limit, "limit")
        with self._lock:
            return self._drop_before(limit)

    def clear(self) -> None:
        """Forgets every item (the eviction counters are kept)."""
        with self._lock:
            self._stamps.clear()
            self._items.clear()

    def items(self) -> list[tuple[float, T]]:
        """Every (stamp, item), oldest first."""
        with self._lock:
            return list(zip(self._stamps, self._items, strict=True))

    def stamps(self) -> list[float]:
        """Every stamp, oldest first."""
        with self._lock:
            return list(self._stamps)

    def latest_stamp(self) -> float | None:
        """Stamp of the newest item."""
        with self._lock:
            return self._stamps[-1] if self._stamps else None

    def latest(self) -> tuple[float, T] | None:
        """The newest (stamp, item)."""
        with self._lock:
            return self._at(len(self._stamps) - 1)

    def oldest(self) -> tuple[float, T] | None:
        """The oldest (stamp, item)."""
        with self._lock:
            return self._at(0)

    def _at(self, index: int) -> tuple[float, T] | None:
        if not 0 <= index < len(self._stamps):
            return None
        # among items of one stamp, the first inserted answers
        index = bisect.bisect_left(self._stamps, self._stamps[index])
        return self._stamps[index], self._items[index]

    def window(self, lo: float, hi: float) -> list[tuple[float, T]]:
        """Items with ``lo <= stamp <= hi``, oldest first (empty when ``lo > hi``)."""
        lo, hi = _check(lo, "lo"), _check(hi, "hi")
        with self._lock:
            i = bisect.bisect_left(self._stamps, lo)
            j = bisect.bisect_right(self._stamps, hi)
            return list(zip(self._stamps[i:j], self._items[i:j], strict=True))

    def before(self, stamp: float, *, strict: bool = False) -> tuple[float, T] | None:
        """The newest item at or before ``stamp`` (strictly before with ``strict``)."""
        stamp = _check(stamp)
        with self._lock:
            cut = (bisect.bisect_left if strict else bisect.bisect_right)(self._stamps, stamp)
            return self._at(cut - 1)

    def after(self, stamp: float, *, strict: bool = False) -> tuple[float, T] | None:
        """The oldest item at or after ``stamp`` (strictly after with ``strict``)."""
        stamp = _check(stamp)
        with self._lock:
            cut = (bisect.bisect_right if strict else bisect.bisect_left)(self._stamps, stamp)
            return self._at(cut)

    def nearest(self, stamp: float, side: str = "any") -> tuple[float, T] | None:
        """The item whose stamp lies closest to ``stamp`` (the older one on a tie).

        ``side`` "before" or "after" restricts the search to that side (inclusive).
        """
        if side == "before":
            return self.before(stamp)
        if side == "after":
            return self.after(stamp)
        if side != "any":
            raise ValueError(f"side must be any, before or after, got {side!r}")
        stamp = _check(stamp)
        with self._lock:
            i = bisect.bisect_left(self._stamps, stamp)
            candidates = [j for j in (i - 1, i) if 0 <= j < len(self._stamps)]
            if not candidates:
                return None
            return self._at(min(candidates, key=lambda j: abs(self._stamps[j] - stamp)))

    def take(self, stamp: float) -> T | None:
        """Removes and returns the first item with exactly this stamp (None when absent)."""
        stamp = _check(stamp)
        with self._lock:
            i = bisect.bisect_left(self._stamps, stamp)
            if i < len(self._stamps) and self._stamps[i] == stamp:
                del self._stamps[i]
                return self._items.pop(i)
            return None


@dataclass
class PairedFrame(Generic[ColorT, DepthT]):
    """A colour frame and, once it arrived, its registered depth."""

    stamp: float
    color: ColorT
    depth: DepthT | None = None


class PairedFrames(Generic[ColorT, DepthT, InfoT]):
    """Colour frames of one camera with their registered depth and the newest camera info.

    (The paired image may be any image of the same frame that travels apart from it, such as
    the frame's segmentation; "depth" names the common case.)

    Colour frames closer than ``min_period`` after the newest kept frame are not kept (the
    history stays bounded at camera rate). A depth image is attached to the kept colour frame
    whose stamp lies within ``tolerance``, whichever of the two arrives first; a depth image
    without its frame waits (the last 30) until that frame comes.
    """

    def __init__(self, seconds: float, min_period: float, tolerance: float, *,
                 max_count: int | None = None) -> None:
        self._frames: FrameBuffer[PairedFrame[ColorT, DepthT]] = FrameBuffer(
            seconds, max_count, min_period_s=min_period)
        self._tolerance = tolerance
        self._loose_depth: deque[tuple[float, DepthT]] = deque(maxlen=30)
        self._info: InfoT | None = None
        self._lock = threading.Lock()

    def add_color(self, stamp: float, color: ColorT) -> bool:
        """Buffers a colour frame; False when the rate limit skipped it."""
        with self._lock:
            entry: PairedFrame[ColorT, DepthT] = PairedFrame(stamp, color)
            if not self._frames.add(stamp, entry):
                return False
            entry.depth = self._take_depth(stamp)
            return True

    def _take_depth(self, stamp: float) -> DepthT | None:
        best: tuple[float, int] | None = None
        for index, (depth_stamp, _) in enumerate(self._loose_depth):
            gap = abs(depth_stamp - stamp)
            if gap <= self._tolerance and (best is None or gap < best[0]):
                best = (gap, index)
        if best is None:
            return None
        depth = self._loose_depth[best[1]][1]
        del self._loose_depth[best[1]]
        return depth

    def add_depth(self, stamp: float, depth: DepthT) -> None:
        """Attaches a depth image to its colour frame, or keeps it until that frame arrives."""
        stamp = _check(stamp)
        with self._lock:
            near = self._frames.window(stamp - 2.0 * self._tolerance,
                                       stamp + 2.0 * self._tolerance)
            for _, entry in reversed(near):
                if entry.depth is None and abs(entry.stamp - stamp) <= self._tolerance:
                    entry.depth = depth
                    return
            self._loose_depth.append((stamp, depth))

    def set_info(self, info: InfoT) -> None:
        """Keeps the newest camera info."""
        with self._lock:
            self._info = info

    @property
    def info(self) -> InfoT | None:
        """Newest camera info, if any."""
        with self._lock:
            return self._info

    def window(self, lo: float, hi: float) -> list[PairedFrame[ColorT, DepthT]]:
        """Kept frames with ``lo <= stamp <= hi``, oldest first."""
        return [entry for _, entry in self._frames.window(lo, hi)]

    def stamps(self) -> list[float]:
        """Stamps of the kept frames, oldest first."""
        return self._frames.stamps()

    def admits(self, stamp: float) -> bool:
        """Whether :meth:`add_color` would keep a frame at ``stamp`` now (lets a caller skip
        decoding a frame the rate limit would drop)."""
        return self._frames.admits(stamp)

    def nearest(self, stamp: float, side: str = "any") -> PairedFrame[ColorT, DepthT] | None:
        """The kept frame nearest ``stamp`` (see :meth:`FrameBuffer.nearest`)."""
        found = self._frames.nearest(stamp, side)
        return None if found is None else found[1]

    def latest_stamp(self) -> float | None:
        """Stamp of the newest kept frame."""
        return self._frames.latest_stamp()
