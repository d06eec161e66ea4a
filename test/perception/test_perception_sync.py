"""Stamp matching of segmentation, depth and camera info."""

from __future__ import annotations

import numpy as np
import pytest

from mimir_perception.camera import Intrinsics
from mimir_perception.errors import SynchronizationError
from mimir_perception.segmentation import SegmentationResult
from mimir_perception.sync import FrameSynchronizer, SyncConfig

INTR = Intrinsics(100.0, 100.0, 3.5, 2.5, 8, 6)


def seg(stamp: float, camera: str = "base") -> SegmentationResult:
    return SegmentationResult.empty(6, 8, stamp, camera)


def depth(value: float = 1.0) -> np.ndarray:
    return np.full((6, 8), value, np.float32)


def test_matches_within_tolerance_in_any_arrival_order() -> None:
    sync = FrameSynchronizer(SyncConfig(tolerance=0.01))
    assert sync.add_camera_info("base", 0.0, INTR) == []
    assert sync.add_depth("base", 1.000, depth(1)) == []
    assert sync.add_depth("base", 1.033, depth(2)) == []
    out = sync.add_segmentation(seg(1.032))
    assert len(out) == 1
    frame = out[0]
    assert frame.stamp == 1.032 and frame.depth_stamp == 1.033
    assert frame.depth[0, 0] == 2.0
    assert frame.intrinsics is INTR
    # Segmentation first, depth later.
    assert sync.add_segmentation(seg(1.066)) == []
    out = sync.add_depth("base", 1.067, depth(3))
    assert [f.stamp for f in out] == [1.066]
    assert sync.diagnostics()["base"]["emitted"] == 2


def _matched_latest(in_order: bool) -> FrameSynchronizer:
    """Depth at 1.0, 1.1 and 1.2 s, then the segmentation of 1.2 s matched into one frame."""
    sync = FrameSynchronizer(SyncConfig(tolerance=0.005, in_order=in_order))
    sync.add_camera_info("base", 0.0, INTR)
    for t in (1.0, 1.1, 1.2):
        sync.add_depth("base", t, depth(t))
    assert len(sync.add_segmentation(seg(1.2))) == 1
    return sync


def test_out_of_order_segmentations_are_matched() -> None:
    sync = _matched_latest(in_order=False)
    late = sync.add_segmentation(seg(1.0))
    assert len(late) == 1 and late[0].depth[0, 0] == pytest.approx(1.0)


def test_in_order_mode_releases_superseded_depth() -> None:
    sync = _matched_latest(in_order=True)
    assert sync.drop_counts()["superseded"] == 2
    # Nothing left for an old segmentation: it waits and later goes stale.
    assert sync.add_segmentation(seg(1.0)) == []
    sync.add_depth("base", 5.0, depth())
    assert sync.drop_counts()["stale"] >= 1


def test_no_match_outside_tolerance_and_stale_drops() -> None:
    sync = FrameSynchronizer(SyncConfig(tolerance=0.01, max_age=1.0))
    sync.add_camera_info("base", 0.0, INTR)
    sync.add_depth("base", 1.0, depth())
    assert sync.add_segmentation(seg(1.05)) == []
    sync.add_depth("base", 3.0, depth())
    drops = sync.drop_counts()
    assert drops["stale"] == 2  # the old depth and the unmatched segmentation
    diag = sync.diagnostics()["base"]
    assert diag["depth.stale"] == 1 and diag["segmentation.stale"] == 1
    # Arrivals older than max_age are refused outright.
    assert sync.add_segmentation(seg(1.5)) == []
    assert sync.drop_counts()["late"] == 1


def test_duplicates_queue_limit_and_cameras_are_separate() -> None:
    sync = FrameSynchronizer(SyncConfig(tolerance=0.001, max_queue=3, max_age=100.0))
    sync.add_depth("pole", 1.0, depth())
    sync.add_depth("pole", 1.0, depth())
    assert sync.drop_counts()["duplicate"] == 1
    for t in (2.0, 3.0, 4.0):
        sync.add_depth("pole", t, depth())
    assert sync.drop_counts()["queue_full"] == 1
    # A base segmentation never matches pole depth.
    sync.add_camera_info("base", 0.0, INTR)
    assert sync.add_segmentation(seg(4.0, "base")) == []
    sync.add_camera_info("pole", 0.0, INTR)
    assert len(sync.add_segmentation(seg(4.0, "pole"))) == 1
    assert set(sync.diagnostics()) == {"pole", "base"}


def test_camera_info_without_latch_needs_close_stamp() -> None:
    sync = FrameSynchronizer(SyncConfig(tolerance=0.01, latch_camera_info=False))
    sync.add_camera_info("base", 0.0, INTR)
    sync.add_depth("base", 1.0, depth())
    assert sync.add_segmentation(seg(1.0)) == []
    out = sync.add_camera_info("base", 1.001, INTR)
    assert len(out) == 1 and out[0].info_stamp == 1.001


def test_latched_info_sent_with_every_frame_is_no_drop() -> None:
    # A driver publishes its camera info with every image: 15 Hz for 10 s through queues of
    # five. Each frame is matched, and the repeated infos neither fill the queue nor count.
    sync = FrameSynchronizer(SyncConfig(tolerance=0.005, max_queue=5))
    stamps = [round(i / 15.0, 6) for i in range(150)]
    matched = []
    for t in stamps:
        sync.add_camera_info("base", t, Intrinsics(100.0, 100.0, 3.5, 2.5, 8, 6))
        sync.add_depth("base", t, depth(t))
        matched += sync.add_segmentation(seg(t))
    assert [f.stamp for f in matched] == stamps
    assert all(f.info_stamp == 0.0 and f.intrinsics == INTR for f in matched)
    assert sync.drop_counts() == {}


def test_latched_info_change_applies_from_its_stamp() -> None:
    # The intrinsics change at 1.0 s (a new resolution) and change back at 2.0 s; each frame
    # gets the intrinsics in force at its stamp, a segmentation arriving late included.
    wide = Intrinsics(200.0, 200.0, 7.5, 5.5, 16, 12)
    sync = FrameSynchronizer(SyncConfig(tolerance=0.005, in_order=False))
    for t, intr in ((0.0, INTR), (0.5, INTR), (1.0, wide), (1.5, wide), (2.0, INTR)):
        sync.add_camera_info("base", t, intr)
        sync.add_depth("base", t, depth(t))
    got = {f.stamp: (f.intrinsics, f.info_stamp)
           for t in (2.0, 0.5, 1.5) for f in sync.add_segmentation(seg(t))}
    assert got == {0.5: (INTR, 0.0), 1.5: (wide, 1.0), 2.0: (INTR, 2.0)}
    assert sync.drop_counts() == {}


def test_unlatched_infos_are_each_queued() -> None:
    # Without latching every info is kept for its own stamp, so repeats fill the queue.
    sync = FrameSynchronizer(SyncConfig(tolerance=0.005, max_queue=3, latch_camera_info=False))
    for t in (0.0, 0.1, 0.2, 0.3, 0.4):
        sync.add_camera_info("base", t, INTR)
    assert sync.drop_counts() == {"queue_full": 2}


def test_missing_camera_info_holds_frames() -> None:
    sync = FrameSynchronizer()
    sync.add_depth("base", 1.0, depth())
    assert sync.add_segmentation(seg(1.0)) == []
    out = sync.add_camera_info("base", 0.5, INTR)
    assert len(out) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.add_depth("base", float("nan"), depth()),
        lambda s: s.add_depth("base", -1.0, depth()),
        lambda s: s.add_depth("base", True, depth()),
        lambda s: s.add_depth("", 1.0, depth()),
        lambda s: s.add_depth("base", 1.0, np.zeros(3)),
        lambda s: s.add_camera_info("base", 1.0, "K"),
        lambda s: s.add_segmentation("mask"),
        lambda s: s.add_segmentation(seg(1.0, "")),
    ],
)
def test_bad_messages_raise(call: object) -> None:
    with pytest.raises(SynchronizationError):
        call(FrameSynchronizer())  # type: ignore[operator]


def test_config_validation_and_reset() -> None:
    with pytest.raises(SynchronizationError):
        SyncConfig(tolerance=-1.0)
    with pytest.raises(SynchronizationError):
        SyncConfig(tolerance=1.0, max_age=0.5)
    with pytest.raises(SynchronizationError):
        SyncConfig(max_queue=0)
    sync = FrameSynchronizer()
    sync.add_depth("base", 100.0, depth())
    sync.reset()
    # After a reset (bag loop), earlier stamps are accepted again.
    sync.add_camera_info("base", 0.0, INTR)
    sync.add_depth("base", 1.0, depth())
    assert len(sync.add_segmentation(seg(1.0))) == 1
