"""Fiducial localisation on synthetic views rendered from known poses."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest
from perception_helpers import assert_unreadable_files_raise

from mimir.transforms import matrix_to_quaternion
from mimir_perception.camera import Intrinsics, invert_transform, make_transform
from mimir_perception.errors import FiducialError, FiducialMapError, TransformError
from mimir_perception.fiducials import (
    FiducialLocalizer,
    LocalizationConfig,
    average_poses,
    load_fiducial_map,
    map_to_odom,
    parse_fiducial_map,
    planar_pose,
    render_tags,
    rotation_angle,
)

LOG = logging.getLogger(__name__)
CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"
INTR = Intrinsics(700.0, 700.0, 639.5, 359.5, 1280, 720)
# Tags on the wall x = 2 m facing -x: tag x = -y_map, tag y = +z_map, tag z = -x_map.
WALL = matrix_to_quaternion(np.column_stack([[0, -1, 0], [0, 0, 1], [-1, 0, 0]])).tolist()
# Camera optical frame on the base: 0.1 m ahead, 1 m up, looking along base x.
BASE_FROM_CAMERA = make_transform(
    np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]), [0.1, 0.0, 1.0]
)


def wall_map(extra: list[dict[str, object]] | None = None) -> dict[str, object]:
    tags: list[dict[str, object]] = [
        {"id": 0, "position": [2.0, 0.0, 1.0], "orientation": WALL},
        {"id": 1, "position": [2.0, 0.5, 1.1], "orientation": WALL},
        {"id": 2, "position": [2.0, -0.5, 0.9], "orientation": WALL, "size": 0.3},
    ]
    return {"dictionary": "DICT_APRILTAG_36h11", "tag_size": 0.25, "tags": tags + (extra or [])}


def base_pose(x: float, y: float, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return make_transform(np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]), [x, y, 0.0])


def pose_error(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    return float(np.linalg.norm(a[:3, 3] - b[:3, 3])), rotation_angle(a[:3, :3].T @ b[:3, :3])


@pytest.mark.parametrize(("x", "y", "yaw"), [(0.3, 0.1, 0.1), (0.8, 0.05, -0.15), (0.0, 0.0, 0.0)])
def test_multi_tag_pose_is_recovered(x: float, y: float, yaw: float) -> None:
    tag_map = parse_fiducial_map(wall_map())
    truth = base_pose(x, y, yaw)
    view = render_tags(tag_map, truth @ BASE_FROM_CAMERA, INTR)
    loc = FiducialLocalizer(tag_map, BASE_FROM_CAMERA)
    result = loc.localize(view.image, INTR, stamp=10.0)
    assert result is not None and not result.held
    assert len(result.used_tags) >= 2
    trans_err, rot_err = pose_error(result.map_from_base, truth)
    LOG.info("fiducial pose error at (%s, %s, %s): %.4f m, %.5f rad", x, y, yaw, trans_err, rot_err)
    print(
        f"\nfiducial pose error (3 tags) at x={x} y={y} yaw={yaw}: {trans_err * 1000:.1f} mm, "
        f"{math.degrees(rot_err):.2f} deg, reprojection {result.reprojection_error:.2f} px"
    )
    assert trans_err < 0.04
    assert rot_err < math.radians(1.5)
    assert result.yaw == pytest.approx(yaw, abs=math.radians(1.5))
    assert result.reprojection_error < 1.0


def test_single_tag_gives_a_coarser_pose_and_tag_poses_in_camera() -> None:
    tag_map = parse_fiducial_map(wall_map())
    truth = base_pose(0.8, 0.1, 0.05)
    view = render_tags(tag_map, truth @ BASE_FROM_CAMERA, INTR, tag_ids=[2])
    loc = FiducialLocalizer(tag_map, BASE_FROM_CAMERA)
    detections = loc.detect(view.image)
    assert [d.tag_id for d in detections] == [2]
    observations, rejected = loc.observe(detections, INTR)
    assert not rejected
    cam_err, _ = pose_error(observations[0].camera_from_tag, view.camera_from_tag[2])
    assert cam_err < 0.02  # the tag itself is located to within 2 cm
    result = loc.localize(view.image, INTR, stamp=1.0)
    assert result is not None
    trans_err, _ = pose_error(result.map_from_base, truth)
    print(f"\nfiducial pose error (1 tag, 1.1 m away): {trans_err * 1000:.1f} mm")
    assert trans_err < 0.10


def test_outlier_tag_is_rejected() -> None:
    """Tag 5 is printed and detected, but the map places it 1 m away from where it hangs."""
    truth_map = parse_fiducial_map(
        wall_map([{"id": 5, "position": [2.0, 0.3, 1.5], "orientation": WALL}])
    )
    wrong_map = parse_fiducial_map(
        wall_map([{"id": 5, "position": [2.0, 1.3, 1.5], "orientation": WALL}])
    )
    truth = base_pose(0.0, 0.0, 0.05)
    view = render_tags(truth_map, truth @ BASE_FROM_CAMERA, INTR)
    result = FiducialLocalizer(wrong_map, BASE_FROM_CAMERA).localize(view.image, INTR, stamp=1.0)
    assert result is not None
    assert 5 not in result.used_tags
    assert (5, "translation_outlier") in result.rejected_tags
    trans_err, _ = pose_error(result.map_from_base, truth)
    assert trans_err < 0.04


def test_unknown_ids_no_tags_and_hold() -> None:
    tag_map = parse_fiducial_map(wall_map())
    other = parse_fiducial_map(
        {
            "dictionary": "DICT_APRILTAG_36h11",
            "tag_size": 0.16,
            "tags": [{"id": 9, "position": [2.0, 0.0, 1.0], "orientation": WALL}],
        }
    )
    truth = base_pose(0.5, 0.0, 0.0)
    cfg = LocalizationConfig(max_hold=2.0)
    loc = FiducialLocalizer(tag_map, BASE_FROM_CAMERA, cfg)
    blank = np.full((INTR.height, INTR.width), 128, np.uint8)
    assert loc.localize(blank, INTR, stamp=0.5) is None  # never localised
    good = render_tags(tag_map, truth @ BASE_FROM_CAMERA, INTR)
    fresh = loc.localize(good.image, INTR, stamp=1.0)
    assert fresh is not None and not fresh.held
    # Only an unknown tag in view: the last estimate is held, with its age.
    unknown = render_tags(other, truth @ BASE_FROM_CAMERA, INTR)
    held = loc.localize(unknown.image, INTR, stamp=2.5)
    assert held is not None and held.held
    assert held.age == pytest.approx(1.5)
    assert (9, "unknown_id") in held.rejected_tags
    np.testing.assert_allclose(held.map_from_base, fresh.map_from_base)
    assert loc.localize(blank, INTR, stamp=3.5) is None  # older than max_hold
    assert loc.last is fresh


def test_image_and_input_errors() -> None:
    loc = FiducialLocalizer(parse_fiducial_map(wall_map()), BASE_FROM_CAMERA)
    with pytest.raises(FiducialError):
        loc.detect(np.zeros((10, 10), np.float32))
    with pytest.raises(FiducialError):
        loc.detect(np.zeros((10, 10, 4), np.uint8))
    with pytest.raises(FiducialError):
        loc.localize(np.zeros((720, 1280), np.uint8), INTR, stamp=float("nan"))
    with pytest.raises(FiducialError):
        loc.fuse([])
    with pytest.raises(TransformError):
        FiducialLocalizer(parse_fiducial_map(wall_map()), np.eye(3))


def test_rgb_input_is_accepted() -> None:
    tag_map = parse_fiducial_map(wall_map())
    view = render_tags(tag_map, base_pose(0.5, 0.0, 0.0) @ BASE_FROM_CAMERA, INTR)
    rgb = np.repeat(view.image[:, :, None], 3, axis=2)
    assert len(FiducialLocalizer(tag_map, BASE_FROM_CAMERA).detect(rgb)) == 3


def test_map_to_odom_composes() -> None:
    map_from_base = base_pose(2.0, 1.0, 0.5)
    odom_from_base = base_pose(0.3, -0.2, 0.1)
    map_from_odom = map_to_odom(map_from_base, odom_from_base)
    np.testing.assert_allclose(map_from_odom @ odom_from_base, map_from_base, atol=1e-12)
    with pytest.raises(TransformError):
        map_to_odom(map_from_base, None)  # type: ignore[arg-type]


def test_pose_helpers() -> None:
    a = base_pose(1.0, 0.0, 0.2)
    b = base_pose(2.0, 0.0, 0.4)
    mean = average_poses([a, b], [1.0, 1.0])
    np.testing.assert_allclose(mean[:3, 3], [1.5, 0.0, 0.0])
    assert math.atan2(mean[1, 0], mean[0, 0]) == pytest.approx(0.3, abs=1e-9)
    with pytest.raises(FiducialError):
        average_poses([a], [1.0, 2.0])
    tilted = make_transform(invert_transform(BASE_FROM_CAMERA)[:3, :3], [1.0, 2.0, 3.0])
    flat = planar_pose(tilted)
    assert flat[2, 3] == 0.0 and flat[2, 2] == pytest.approx(1.0)


def test_shipped_map_loads_and_bad_maps_raise(tmp_path: Path) -> None:
    tag_map = load_fiducial_map(CONFIG_DIR / "fiducials" / "lab.yaml")
    assert set(tag_map.tags) == {0, 1, 2, 3}
    assert tag_map.tags[0].size == pytest.approx(0.16)
    # Every tag faces back into the room (its z axis points away from its wall).
    assert tag_map.tags[0].map_from_tag[0, 2] == pytest.approx(-1.0)
    assert tag_map.tags[3].map_from_tag[1, 2] == pytest.approx(-1.0)
    assert_unreadable_files_raise(load_fiducial_map, FiducialMapError, tmp_path, "tags: [\n")


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"tags": []},
        {"tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL}]},  # no size
        {"tag_size": 0.1, "tags": [{"id": -1, "position": [0, 0, 0], "orientation": WALL}]},
        {"tag_size": 0.1, "tags": [{"id": 0, "position": [0, 0], "orientation": WALL}]},
        {"tag_size": 0.1, "tags": [{"id": 0, "position": [0, 0, "x"], "orientation": WALL}]},
        {"tag_size": 0.1, "tags": [{"id": 0, "position": [0, 0, 0], "orientation": [0, 0, 0, 0]}]},
        {"tag_size": 0.1, "tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL}] * 2},
        {
            "tag_size": 0.1,
            "tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL, "yaw": 1}],
        },
        {
            "tag_size": 0.1,
            "dictionary": "DICT_NOPE",
            "tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL}],
        },
        {
            "tag_size": 0.1,
            "frame_id": "",
            "tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL}],
        },
        {
            "tag_size": 0.1,
            "colour": 1,
            "tags": [{"id": 0, "position": [0, 0, 0], "orientation": WALL}],
        },
    ],
)
def test_malformed_maps_raise(data: object) -> None:
    with pytest.raises(FiducialMapError):
        parse_fiducial_map(data)
