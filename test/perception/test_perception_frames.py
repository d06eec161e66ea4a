"""The one frame buffer: ordering, bounds, stamp queries, bad input, and depth pairing."""

from __future__ import annotations

import math
import threading

import pytest

from mimir_perception.frames import FrameBuffer, PairedFrames, StampError


def test_out_of_order_items_are_inserted_in_place() -> None:
    buf: FrameBuffer[str] = FrameBuffer()
    for stamp, item in ((1.0, "a"), (3.0, "c"), (2.0, "b"), (0.5, "z"), (3.0, "c2")):
        assert buf.add(stamp, item)
    assert buf.stamps() == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert [i for _, i in buf] == ["z", "a", "b", "c", "c2"]  # equal stamps keep arrival order
    assert buf.latest_stamp() == 3.0 and len(buf) == 5
    assert buf.oldest() == (0.5, "z") and buf.latest() == (3.0, "c")


def test_queries_by_stamp() -> None:
    buf: FrameBuffer[str] = FrameBuffer()
    for k in range(5):
        buf.add(float(k), f"f{k}")
    assert buf.window(1.0, 3.0) == [(1.0, "f1"), (2.0, "f2"), (3.0, "f3")]
    assert buf.window(3.5, 1.0) == []
    assert buf.nearest(2.4) == (2.0, "f2") and buf.nearest(2.6) == (3.0, "f3")
    assert buf.nearest(2.5) == (2.0, "f2")  # a tie goes to the older frame
    assert buf.nearest(-7.0) == (0.0, "f0") and buf.nearest(70.0) == (4.0, "f4")
    assert buf.before(2.5) == (2.0, "f2") and buf.before(2.0) == (2.0, "f2")
    assert buf.before(2.0, strict=True) == (1.0, "f1") and buf.before(-0.1) is None
    assert buf.after(2.5) == (3.0, "f3") and buf.after(3.0, strict=True) == (4.0, "f4")
    assert buf.after(4.1) is None
    assert buf.nearest(2.6, "before") == (2.0, "f2") and buf.nearest(2.4, "after") == (3.0, "f3")
    with pytest.raises(ValueError):
        buf.nearest(1.0, "sideways")
    assert buf.take(2.0) == "f2" and buf.take(2.0) is None
    assert buf.drop_before(2.0) == 2 and buf.stamps() == [3.0, 4.0]
    empty: FrameBuffer[str] = FrameBuffer()
    assert empty.nearest(1.0) is None and empty.latest() is None and empty.latest_stamp() is None


def test_bounded_by_age_and_count() -> None:
    aged: FrameBuffer[int] = FrameBuffer(max_age_s=2.0)
    for k in range(6):
        aged.add(float(k), k)
    assert aged.stamps() == [3.0, 4.0, 5.0] and aged.evicted_by_age == 3
    assert aged.add(1.0, 1)  # a late item beyond the history goes at once
    assert aged.stamps() == [3.0, 4.0, 5.0] and aged.evicted_by_age == 4

    counted: FrameBuffer[int] = FrameBuffer(max_count=3)
    for k in (5, 1, 4, 2, 3):
        counted.add(float(k), k)
    assert counted.stamps() == [3.0, 4.0, 5.0] and counted.evicted_by_count == 2  # oldest first
    for bad in ({"max_count": 0}, {"max_age_s": -1.0}, {"max_age_s": math.nan},
                {"min_period_s": math.inf}):
        with pytest.raises(ValueError):
            FrameBuffer(**bad)  # type: ignore[arg-type]


def test_rate_limit_and_unique_stamps() -> None:
    rated: FrameBuffer[int] = FrameBuffer(min_period_s=0.2)
    assert rated.add(1.0, 1) and not rated.add(1.1, 2) and rated.add(1.2, 3)
    assert rated.add(0.5, 4)  # older than the newest kept frame: not rate limited
    assert rated.stamps() == [0.5, 1.0, 1.2]
    # admits answers as add would, without adding
    assert not rated.admits(1.3) and rated.admits(1.4) and rated.admits(0.7)
    assert rated.stamps() == [0.5, 1.0, 1.2]
    unique: FrameBuffer[int] = FrameBuffer(unique_stamps=True)
    assert unique.add(1.0, 1) and not unique.add(1.0, 2) and unique.items() == [(1.0, 1)]
    assert not unique.admits(1.0) and unique.admits(2.0)


@pytest.mark.parametrize("stamp", [math.nan, math.inf, -math.inf, "1.0", None, True])
def test_bad_stamps_are_refused(stamp: object) -> None:
    buf: FrameBuffer[int] = FrameBuffer(max_age_s=5.0, max_count=4)
    buf.add(1.0, 1)
    with pytest.raises(StampError):
        buf.add(stamp, 2)  # type: ignore[arg-type]
    for query in (buf.nearest, buf.before, buf.after, buf.take, buf.drop_before, buf.admits):
        with pytest.raises(StampError):
            query(stamp)  # type: ignore[operator]
    with pytest.raises(StampError):
        buf.window(0.0, stamp)  # type: ignore[arg-type]
    assert buf.items() == [(1.0, 1)]  # nothing changed


def test_threads_share_one_buffer() -> None:
    buf: FrameBuffer[int] = FrameBuffer(max_count=500)

    def feed(offset: int) -> None:
        for k in range(300):
            buf.add(float(k * 4 + offset), k)

    threads = [threading.Thread(target=feed, args=(o,)) for o in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stamps = buf.stamps()
    assert len(stamps) == 500 and stamps == sorted(stamps) and buf.evicted_by_count == 700


def test_paired_frames_attach_depth_whichever_comes_first() -> None:
    stream: PairedFrames[str, str, str] = PairedFrames(seconds=2.0, min_period=0.2,
                                                       tolerance=0.01)
    stream.add_depth(1.0, "d1")  # depth first, colour later
    assert stream.add_color(1.0, "c1")
    assert not stream.add_color(1.1, "c-skip")  # within the rate limit
    assert stream.add_color(1.3, "c13")
    stream.add_depth(1.305, "d13")  # colour first, depth later
    stream.add_depth(5.0, "d5")  # matches nothing yet
    assert stream.add_color(0.7, "c07")  # a late frame goes in order
    entries = stream.window(0.0, 2.0)
    assert [(e.stamp, e.color, e.depth) for e in entries] == [
        (0.7, "c07", None), (1.0, "c1", "d1"), (1.3, "c13", "d13")]
    assert stream.add_color(5.004, "c5")  # the waiting depth image pairs with it
    assert [(e.stamp, e.depth) for e in stream.window(0.0, 9.0)] == [(5.004, "d5")]
    assert stream.latest_stamp() == 5.004 and stream.info is None
    stream.set_info("info")
    assert stream.info == "info"
    with pytest.raises(StampError):
        stream.add_color(math.nan, "bad")


def test_paired_frames_bounded_by_count_find_the_nearest_frame() -> None:
    stream: PairedFrames[str, str, None] = PairedFrames(seconds=60.0, min_period=0.1,
                                                        tolerance=0.001, max_count=3)
    for k in range(5):
        assert stream.admits(1.0 + 0.2 * k)
        stream.add_color(1.0 + 0.2 * k, f"c{k}")
    assert not stream.admits(1.85)  # within the rate limit of the newest
    assert stream.stamps() == pytest.approx([1.4, 1.6, 1.8])  # the two oldest went
    stream.add_depth(1.6, "s3")
    found = stream.nearest(1.55)
    assert found is not None and (found.color, found.depth) == ("c3", "s3")
    before = stream.nearest(1.75, "before")
    assert before is not None and before.color == "c3"
    assert stream.nearest(0.5, "before") is None
