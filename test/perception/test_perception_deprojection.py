"""Deprojection of instance masks into map-frame observations (synthetic scenes)."""

from __future__ import annotations

import numpy as np
import pytest

from mimir_memory.observations import ObjectObservation
from mimir_perception.camera import Intrinsics, make_transform
from mimir_perception.deprojection import (
    DeprojectionConfig,
    Deprojector,
    SkipReason,
    oriented_box,
)
from mimir_perception.errors import (
    DepthError,
    ImageSizeMismatchError,
    InsufficientPointsError,
    MissingIntrinsicsError,
    MissingTransformError,
    PerceptionError,
    SegmentationError,
    TransformError,
)
from mimir_perception.segmentation import InstanceInfo, SegmentationResult, compose_instances

H, W = 120, 160
INTR = Intrinsics(100.0, 100.0, 79.5, 59.5, W, H)
# Optical frame (x right, y down, z forward) to a REP-103 body frame (x forward, y left, z up),
# placed 1 m up and 2 m along x in the map.
OPTICAL_TO_MAP = make_transform(
    np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), [2.0, 0.0, 1.0]
)


def scene() -> tuple[SegmentationResult, np.ndarray]:
    """Background wall at 4 m, a box face at 1.5 m (rows 40-79, cols 60-99) and a mug at 2 m."""
    depth = np.full((H, W), 4.0, dtype=np.float32)
    depth[40:80, 60:100] = 1.5
    depth[10:20, 10:50] = 2.0
    box = np.zeros((H, W), bool)
    box[40:80, 60:100] = True
    mug = np.zeros((H, W), bool)
    mug[10:20, 10:50] = True
    seg = compose_instances(
        [box, mug], ["box", "mug"], [0.9, 0.7], min_pixels=1, stamp=5.0, camera="base"
    )
    return seg, depth


def expected_map_box(
    z: float, cols: tuple[int, int], rows: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    xs = (np.array(cols, dtype=float) - INTR.cx) / INTR.fx * z
    ys = (np.array(rows, dtype=float) - INTR.cy) / INTR.fy * z
    corners = np.array([[x, y, z] for x in xs for y in ys])
    mapped = corners @ OPTICAL_TO_MAP[:3, :3].T + OPTICAL_TO_MAP[:3, 3]
    return mapped.min(axis=0), mapped.max(axis=0)


def test_frame_deprojects_every_instance_exactly() -> None:
    seg, depth = scene()
    dep = Deprojector(DeprojectionConfig(erode_px=2, min_points=10))
    out = dep.deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    assert out.stamp == 5.0 and out.camera == "base"
    assert not out.skipped
    by_label = {o.label: o for o in out.observations}
    box = by_label["box"]
    assert isinstance(box, ObjectObservation)
    assert box.frame_id == "map"
    assert box.score == pytest.approx(0.9)
    # Erosion by 2 px keeps rows 42..77 and cols 62..97 for the points; the box gets the two
    # pixels a side back, so it spans the mask's rows 40..79 and cols 60..99.
    assert box.point_count == 36 * 36
    lo, hi = expected_map_box(1.5, (60, 99), (40, 79))
    np.testing.assert_allclose(box.bbox_min, lo, atol=1e-5)
    np.testing.assert_allclose(box.bbox_max, hi, atol=1e-5)
    np.testing.assert_allclose(box.centroid, (lo + hi) / 2.0, atol=0.02)
    assert box.centroid[0] == pytest.approx(2.0 + 1.5, abs=1e-5)  # depth 1.5 m ahead of the camera
    assert box.detection_id == "base@5000000000#1"
    mug = by_label["mug"]
    assert mug.centroid[0] == pytest.approx(4.0, abs=1e-5)
    # The mug's face is a flat 36 x 6 pixel rectangle after erosion: its
    # principal axes are the map's y (long side), z (short side) and x (normal).
    assert mug.obb_extent is not None and mug.obb_rotation is not None
    mlo, mhi = expected_map_box(2.0, (12, 47), (12, 17))
    np.testing.assert_allclose(mug.obb_extent, [mhi[1] - mlo[1], mhi[2] - mlo[2], 0.0], atol=1e-3)
    assert abs(mug.obb_rotation[1, 0]) == pytest.approx(1.0, abs=1e-4)
    assert mug.obb_center is not None
    np.testing.assert_allclose(mug.obb_center, (mlo + mhi) / 2.0, atol=1e-3)
    assert out.instance_ids == (1, 2)


def test_depth_in_millimetres_matches_metres() -> None:
    seg, depth = scene()
    metres = Deprojector(DeprojectionConfig()).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    mm = (depth * 1000).astype(np.uint16)
    millis = Deprojector(DeprojectionConfig(depth_unit="mm")).deproject(
        seg, mm, INTR, OPTICAL_TO_MAP
    )
    for a, b in zip(metres.observations, millis.observations, strict=True):
        np.testing.assert_allclose(a.centroid, b.centroid, atol=1e-5)
        assert a.point_count == b.point_count


def test_bleeding_background_is_rejected() -> None:
    """A mask that spills onto the far wall must not stretch the box to the wall."""
    seg, depth = scene()
    spill = np.zeros((H, W), bool)
    spill[36:84, 56:104] = True  # 4 px ring of wall around the box (about 30 % of the pixels)
    seg = compose_instances([spill], ["box"], [0.9], min_pixels=1)
    for cfg in (
        DeprojectionConfig(erode_px=0),
        DeprojectionConfig(erode_px=0, centroid="trimmed_mean"),
    ):
        out = Deprojector(cfg).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
        (obs,) = out.observations
        assert obs.bbox_max[0] < 3.6  # the box face is at x = 3.5, the wall at x = 6
        assert obs.point_count == 40 * 40
    no_filter = Deprojector(DeprojectionConfig(erode_px=0, outlier_mad_k=0.0))
    (raw,) = no_filter.deproject(seg, depth, INTR, OPTICAL_TO_MAP).observations
    assert raw.bbox_max[0] == pytest.approx(6.0, abs=1e-5)


def test_erosion_removes_border_pixels() -> None:
    seg, depth = scene()
    depth_edge = depth.copy()
    depth_edge[40, 60:100] = 3.0  # a mixed-depth border row
    out = Deprojector(DeprojectionConfig(erode_px=1, outlier_mad_k=0.0)).deproject(
        seg, depth_edge, INTR, OPTICAL_TO_MAP
    )
    box = next(o for o in out.observations if o.label == "box")
    assert box.bbox_max[0] == pytest.approx(3.5, abs=1e-5)


def test_invalid_depth_values_are_dropped() -> None:
    seg, depth = scene()
    bad = depth.copy()
    bad[40:60, 60:100] = np.nan
    bad[60:70, 60:100] = 0.0
    bad[70:72, 60:100] = np.inf
    bad[72:74, 60:100] = 50.0  # beyond max_depth
    out = Deprojector(DeprojectionConfig(erode_px=0)).deproject(seg, bad, INTR, OPTICAL_TO_MAP)
    box = next(o for o in out.observations if o.label == "box")
    assert box.point_count == 6 * 40
    assert np.all(np.isfinite(box.centroid))


def test_skip_reasons() -> None:
    seg, depth = scene()
    tiny = np.zeros((H, W), bool)
    tiny[100:103, 100:103] = True  # erodes away with erode_px=2
    sparse = np.zeros((H, W), bool)
    sparse[100:110, 130:140] = True
    nodepth = np.zeros((H, W), bool)
    nodepth[90:100, 10:40] = True
    depth = depth.copy()
    depth[90:100, 10:40] = 0.0
    seg = compose_instances([tiny, sparse, nodepth], ["a", "b", "c"], [0.9, 0.8, 0.7], min_pixels=1)
    out = Deprojector(DeprojectionConfig(erode_px=2, min_points=50)).deproject(
        seg, depth, INTR, OPTICAL_TO_MAP
    )
    assert not out.observations
    reasons = {s.label: s.reason for s in out.skipped}
    assert reasons == {
        "a": SkipReason.EMPTY_MASK,
        "b": SkipReason.TOO_FEW_POINTS,  # 6x6 = 36 < 50 points
        "c": SkipReason.NO_VALID_DEPTH,
    }
    assert next(s for s in out.skipped if s.label == "b").point_count == 36


def test_instance_cap_skips_lowest_scores() -> None:
    masks = []
    for i in range(12):
        m = np.zeros((H, W), bool)
        m[(i // 4) * 30 : (i // 4) * 30 + 20, (i % 4) * 40 : (i % 4) * 40 + 30] = True
        masks.append(m)
    seg = compose_instances(masks, ["x"] * 12, [0.05 * (i + 1) for i in range(12)], min_pixels=1)
    depth = np.full((H, W), 2.0, np.float32)
    out = Deprojector(DeprojectionConfig(max_instances=5)).deproject(
        seg, depth, INTR, OPTICAL_TO_MAP
    )
    assert len(out.observations) == 5
    assert sorted(o.score for o in out.observations) == pytest.approx([0.4, 0.45, 0.5, 0.55, 0.6])
    capped = [s for s in out.skipped if s.reason is SkipReason.INSTANCE_CAP]
    assert len(capped) == 7


def test_stray_ids_and_non_contiguous_ids() -> None:
    ids = np.zeros((H, W), np.uint16)
    ids[10:40, 10:40] = 7
    ids[50:80, 50:80] = 300  # present in the image but not in the table: ignored
    seg = SegmentationResult(ids, (InstanceInfo(7, "cup", 0.5, (10, 10, 40, 40), 900),), 1.0, "c")
    depth = np.full((H, W), 2.0, np.float32)
    out = Deprojector().deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    (obs,) = out.observations
    assert obs.label == "cup" and out.instance_ids == (7,)


def test_pixel_stride_and_centroid_options() -> None:
    seg, depth = scene()
    full = Deprojector(DeprojectionConfig()).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    for cfg in (
        DeprojectionConfig(pixel_stride=2),
        DeprojectionConfig(centroid="mean"),
        DeprojectionConfig(centroid="trimmed_mean", compute_obb=False),
    ):
        other = Deprojector(cfg).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
        for a, b in zip(full.observations, other.observations, strict=True):
            np.testing.assert_allclose(a.centroid, b.centroid, atol=0.03)
    strided = Deprojector(DeprojectionConfig(pixel_stride=2)).deproject(
        seg, depth, INTR, OPTICAL_TO_MAP
    )
    assert strided.observations[0].point_count < full.observations[0].point_count / 3


def test_frame_level_errors() -> None:
    seg, depth = scene()
    dep = Deprojector()
    with pytest.raises(MissingIntrinsicsError):
        dep.deproject(seg, depth, None, OPTICAL_TO_MAP)
    with pytest.raises(MissingTransformError):
        dep.deproject(seg, depth, INTR, None)
    with pytest.raises(TransformError):
        dep.deproject(seg, depth, INTR, np.eye(3))
    with pytest.raises(ImageSizeMismatchError):
        dep.deproject(seg, depth[:, :100], INTR, OPTICAL_TO_MAP)
    with pytest.raises(ImageSizeMismatchError):
        dep.deproject(seg, depth, INTR.scaled(80, 60), OPTICAL_TO_MAP)
    with pytest.raises(DepthError):
        dep.deproject(seg, depth.astype(np.uint16), INTR, OPTICAL_TO_MAP)
    with pytest.raises(DepthError):
        Deprojector(DeprojectionConfig(depth_unit="mm")).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    with pytest.raises(DepthError):
        dep.deproject(seg, depth[None], INTR, OPTICAL_TO_MAP)
    with pytest.raises(SegmentationError):
        dep.deproject(seg, depth, INTR, OPTICAL_TO_MAP, stamp=float("nan"))
    empty = SegmentationResult.empty(H, W, 1.0, "c")
    assert dep.deproject(empty, depth, INTR, OPTICAL_TO_MAP).observations == ()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"depth_unit": "cm"},
        {"min_depth": 2.0, "max_depth": 1.0},
        {"erode_px": -1},
        {"pixel_stride": 0},
        {"min_points": 0},
        {"max_instances": 0},
        {"outlier_mad_k": -1.0},
        {"centroid": "mode"},
        {"trim_fraction": 0.5},
        {"sample_size": 2},
        {"map_frame": ""},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(PerceptionError):
        DeprojectionConfig(**kwargs)  # type: ignore[arg-type]


def test_single_mask_api() -> None:
    seg, depth = scene()
    dep = Deprojector(DeprojectionConfig(min_points=20))
    obs = dep.deproject_mask(seg.mask(1), depth, INTR, OPTICAL_TO_MAP, label="box", stamp=1.0)
    assert obs.centroid[0] == pytest.approx(3.5, abs=1e-5)
    tiny = np.zeros((H, W), bool)
    tiny[0:4, 0:4] = True
    with pytest.raises(InsufficientPointsError):
        dep.deproject_mask(tiny, depth, INTR, OPTICAL_TO_MAP, label="x", stamp=1.0)
    with pytest.raises(InsufficientPointsError):
        dep.deproject_mask(
            np.zeros((H, W), bool), depth, INTR, OPTICAL_TO_MAP, label="x", stamp=1.0
        )
    with pytest.raises(SegmentationError):
        dep.deproject_mask(tiny.astype(np.uint8), depth, INTR, OPTICAL_TO_MAP, label="x", stamp=1.0)


def test_oriented_box_of_rotated_cuboid() -> None:
    rng = np.random.default_rng(3)
    local = rng.uniform(-0.5, 0.5, size=(4000, 3)) * np.array([2.0, 1.0, 0.2])
    angle = 0.6
    rot = np.array(
        [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
    )
    pts = local @ rot.T + [1.0, 2.0, 3.0]
    center, extent, axes = oriented_box(pts)
    np.testing.assert_allclose(center, [1.0, 2.0, 3.0], atol=0.02)
    np.testing.assert_allclose(extent, [2.0, 1.0, 0.2], atol=0.03)
    assert abs(abs(axes[:, 0] @ rot[:, 0]) - 1.0) < 1e-3
    assert np.linalg.det(axes) == pytest.approx(1.0)
    with pytest.raises(PerceptionError):
        oriented_box(np.zeros((0, 3)))
    with pytest.raises(PerceptionError):
        oriented_box(np.full((3, 3), np.nan))


def test_wrong_pixel_boxes_are_corrected_not_trusted() -> None:
    seg, depth = scene()
    dep = Deprojector(DeprojectionConfig(erode_px=2, min_points=10))
    truth = dep.deproject(seg, depth, INTR, OPTICAL_TO_MAP)
    # the table claims boxes that cut the instances: a shifted one, a tiny one and an empty one
    wrong = [
        InstanceInfo(info.instance_id, info.label, info.score, box, info.pixel_count)
        for info, box in zip(seg.instances, [(0, 0, 70, 50), (10, 10, 11, 11)], strict=True)
    ]
    for table in (wrong, [wrong[0], InstanceInfo(2, "mug", 0.7, (0, 0, 0, 0), 400)]):
        bad = SegmentationResult(seg.instance_ids, tuple(table), seg.stamp, seg.camera)
        out = dep.deproject(bad, depth, INTR, OPTICAL_TO_MAP)
        assert [o.point_count for o in out.observations] == [
            o.point_count for o in truth.observations
        ]
        for got, want in zip(out.observations, truth.observations, strict=True):
            np.testing.assert_allclose(got.bbox_min, want.bbox_min, atol=1e-6)
            np.testing.assert_allclose(got.bbox_max, want.bbox_max, atol=1e-6)
            np.testing.assert_allclose(got.centroid, want.centroid, atol=1e-6)
    assert dep.corrected_boxes == 4


def test_matches_a_per_instance_reference_on_random_scenes() -> None:
    rng = np.random.default_rng(7)
    for trial in range(5):
        depth = rng.uniform(1.0, 4.0, size=(H, W)).astype(np.float32)
        depth[rng.random((H, W)) < 0.05] = np.nan
        masks = []
        for _ in range(6):
            cy, cx = rng.integers(10, H - 10), rng.integers(10, W - 10)
            ry, rx = rng.integers(4, 25), rng.integers(4, 30)
            v, u = np.mgrid[0:H, 0:W]
            masks.append(((v - cy) / ry) ** 2 + ((u - cx) / rx) ** 2 <= 1.0)
        seg = compose_instances(masks, ["thing"] * 6, [0.5] * 6, min_pixels=1)
        cfg = DeprojectionConfig(erode_px=1, min_points=5, outlier_mad_k=0.0, pixel_stride=1)
        out = Deprojector(cfg).deproject(seg, depth, INTR, OPTICAL_TO_MAP)
        by_id = dict(zip(out.instance_ids, out.observations, strict=True))
        for info in seg.instances:
            # reference: erode this instance's own mask, keep finite depth in range, deproject
            own = seg.instance_ids == info.instance_id
            inner = own.copy()
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    shifted = np.zeros_like(own)
                    shifted[max(dy, 0) : H + min(dy, 0), max(dx, 0) : W + min(dx, 0)] = own[
                        max(-dy, 0) : H + min(-dy, 0), max(-dx, 0) : W + min(-dx, 0)
                    ]
                    edge = np.zeros_like(own)
                    edge[max(dy, 0) : H + min(dy, 0), max(dx, 0) : W + min(dx, 0)] = True
                    inner &= shifted | ~edge  # the image border repeats the pixel itself
            keep = inner & np.isfinite(depth) & (depth >= cfg.min_depth) & (depth <= cfg.max_depth)
            v, u = np.nonzero(keep)
            z = depth[v, u].astype(np.float64)
            cam = np.stack(((u - INTR.cx) / INTR.fx * z, (v - INTR.cy) / INTR.fy * z, z), axis=1)
            pts = cam @ OPTICAL_TO_MAP[:3, :3].T + OPTICAL_TO_MAP[:3, 3]
            if len(pts) < cfg.min_points:
                assert info.instance_id not in by_id, trial
                continue
            obs = by_id[info.instance_id]
            assert obs.point_count == len(pts), trial
            # the centroid is the per-axis median of the points (of a spread sample of them)
            np.testing.assert_allclose(obs.centroid, np.median(pts, axis=0), atol=0.15)
            # the box of the eroded points, grown by the pixel erosion took off each side at
            # the centroid's depth: camera x is the map's -y, camera y its -z
            z = float((np.asarray(obs.centroid) - OPTICAL_TO_MAP[:3, 3]) @ OPTICAL_TO_MAP[:3, 2])
            grow = np.array([0.0, z / INTR.fx, z / INTR.fy])
            np.testing.assert_allclose(obs.bbox_min, pts.min(axis=0) - grow, atol=1e-4)
            np.testing.assert_allclose(obs.bbox_max, pts.max(axis=0) + grow, atol=1e-4)
