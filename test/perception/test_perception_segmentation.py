"""Segmentation results, overlap resolution and the simulation ground-truth backend."""

from __future__ import annotations

import numpy as np
import pytest

from mimir_perception.errors import SegmentationError
from mimir_perception.segmentation import (
    InstanceInfo,
    SegmentationResult,
    SegmenterConfig,
    SimGroundTruthBackend,
    check_rgb,
    compose_instances,
)
from mimir_perception.vocabulary import Vocabulary


def rect(h: int, w: int, *box: int) -> np.ndarray:
    x0, y0, x1, y1 = box
    m = np.zeros((h, w), dtype=bool)
    m[y0:y1, x0:x1] = True
    return m


def test_overlap_goes_to_higher_score() -> None:
    a = rect(40, 60, 0, 0, 30, 20)  # 600 px
    b = rect(40, 60, 20, 10, 50, 30)  # overlaps a on 10x10
    res = compose_instances([a, b], ["cup", "mug"], [0.6, 0.9], min_pixels=10)
    res.validate()
    assert [i.label for i in res.instances] == ["mug", "cup"]
    mug, cup = res.instances
    assert mug.instance_id == 1 and mug.pixel_count == 600
    assert cup.pixel_count == 600 - 100
    assert mug.box == (20, 10, 50, 30)
    assert res.mask(1)[15, 25] and not res.mask(2)[15, 25]


def test_small_leftover_releases_pixels_to_weaker_instance() -> None:
    big = rect(20, 20, 0, 0, 20, 20)
    inner = rect(20, 20, 5, 5, 10, 10)
    inner_plus = inner | rect(20, 20, 19, 19, 20, 20)
    # "inner_plus" (second best) keeps only 1 free pixel after "best" -> dropped.
    best = rect(20, 20, 0, 0, 20, 19)
    res = compose_instances([big, best, inner_plus], ["a", "b", "c"], [0.5, 0.9, 0.7], min_pixels=5)
    labels = [i.label for i in res.instances]
    assert labels == ["b", "a"]
    assert res.info(2).pixel_count == 20  # the last row goes to the weaker "a"
    res.validate()


def test_instance_cap_keeps_best() -> None:
    masks = [rect(10, 10, i, 0, i + 1, 10) for i in range(10)]
    scores = [i / 10 for i in range(10)]
    res = compose_instances(masks, ["x"] * 10, scores, min_pixels=1, max_instances=3)
    assert len(res) == 3
    assert [i.score for i in res.instances] == [0.9, 0.8, 0.7]


@pytest.mark.parametrize(
    "call",
    [
        lambda: compose_instances([], [], []),
        lambda: compose_instances([np.ones((4, 4), bool)], ["a", "b"], [0.5]),
        lambda: compose_instances([np.ones((4, 4), bool)], ["a"], [1.5]),
        lambda: compose_instances([np.ones((4, 4), bool)], ["a"], [float("nan")]),
        lambda: compose_instances([np.ones(4, bool)], ["a"], [0.5]),
        lambda: compose_instances([np.ones((4, 4), bool)], ["a"], [0.5], min_pixels=0),
    ],
)
def test_compose_rejects_bad_input(call: object) -> None:
    with pytest.raises(SegmentationError):
        call()  # type: ignore[operator]


def test_result_validation_catches_inconsistent_tables() -> None:
    ids = np.zeros((5, 5), np.uint16)
    ids[1:3, 1:3] = 1
    ok = SegmentationResult(ids, (InstanceInfo(1, "a", 0.5, (1, 1, 3, 3), 4),))
    ok.validate()
    with pytest.raises(SegmentationError):
        SegmentationResult(ids, (InstanceInfo(1, "a", 0.5, (1, 1, 3, 3), 5),)).validate()
    with pytest.raises(SegmentationError):
        SegmentationResult(ids, (InstanceInfo(1, "a", 0.5, (0, 0, 3, 3), 4),)).validate()
    with pytest.raises(SegmentationError):
        SegmentationResult(ids, ()).validate()
    with pytest.raises(SegmentationError):
        SegmentationResult(ids.astype(np.int32), ())
    with pytest.raises(SegmentationError):
        SegmentationResult(
            ids,
            (
                InstanceInfo(1, "a", 0.5, (1, 1, 3, 3), 4),
                InstanceInfo(1, "b", 0.5, (1, 1, 3, 3), 4),
            ),
        )
    with pytest.raises(SegmentationError):
        InstanceInfo(0, "a", 0.5, (0, 0, 1, 1), 1)
    with pytest.raises(SegmentationError):
        InstanceInfo(1, "", 0.5, (0, 0, 1, 1), 1)
    with pytest.raises(SegmentationError):
        InstanceInfo(1, "a", 0.5, (3, 0, 1, 1), 1)
    with pytest.raises(SegmentationError):
        ok.info(7)


def test_check_rgb() -> None:
    check_rgb(np.zeros((4, 4, 3), np.uint8))
    for bad in (
        np.zeros((4, 4), np.uint8),
        np.zeros((4, 4, 3), np.float32),
        np.zeros((0, 4, 3), np.uint8),
    ):
        with pytest.raises(SegmentationError):
            check_rgb(bad)


def test_sim_backend_maps_ids_groups_and_vocabulary() -> None:
    render = np.full((30, 40), -1, dtype=np.int32)
    render[0:10, 0:10] = 3  # cabinet door
    render[0:10, 10:20] = 4  # cabinet body, same instance
    render[20:30, 0:10] = 7  # mug
    render[20:22, 30:32] = 8  # tiny banana (4 px)
    render[15:18, 30:40] = 99  # unmapped geom -> background
    backend = SimGroundTruthBackend(
        {3: "cabinet", 4: "cabinet", 7: "mug", 8: "banana"},
        groups={3: "cabinet_1", 4: "cabinet_1"},
        config=SegmenterConfig(min_pixels=5),
    )
    res = backend.segment_ids(render, stamp=2.5, camera="pole")
    res.validate()
    assert res.stamp == 2.5 and res.camera == "pole"
    assert sorted((i.label, i.pixel_count) for i in res.instances) == [
        ("cabinet", 200),
        ("mug", 100),
    ]
    cab = next(i for i in res.instances if i.label == "cabinet")
    assert cab.box == (0, 0, 20, 10)
    only_mug = backend.segment_ids(render, Vocabulary.from_labels(["mug"]))
    assert [i.label for i in only_mug.instances] == ["mug"]
    # MuJoCo's (H, W, 2) segmentation render: channel 0 holds the object id.
    stacked = np.stack([render, np.zeros_like(render)], axis=2)
    assert len(backend.segment_ids(stacked)) == 2
    empty = backend.segment_ids(render, Vocabulary.from_labels(["plate"]))
    assert len(empty) == 0 and empty.shape == (30, 40)


def test_sim_backend_rejects_bad_input() -> None:
    with pytest.raises(SegmentationError):
        SimGroundTruthBackend({-1: "mug"})
    with pytest.raises(SegmentationError):
        SimGroundTruthBackend({1: ""})
    with pytest.raises(SegmentationError):
        SimGroundTruthBackend({1: "mug"}, groups={2: "x"})
    mixed = SimGroundTruthBackend({1: "mug", 2: "cup"}, groups={1: "g", 2: "g"})
    with pytest.raises(SegmentationError):
        mixed.segment_ids(np.ones((4, 4), np.int32))
    backend = SimGroundTruthBackend({1: "mug"})
    with pytest.raises(SegmentationError):
        backend.segment_ids(np.ones((4, 4), np.float32))
    with pytest.raises(SegmentationError):
        backend.segment_ids(np.ones((4,), np.int32))
