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
    FiducialMap,
    FitRejectedError,
    LocalizationConfig,
    LocalizationResult,
    TagDetection,
    average_poses,
    load_fiducial_map,
    map_to_odom,
    parse_fiducial_map,
    planar_pose,
    render_tags,
    rotation_angle,
    solve_planar_base,
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


# ------------------------------------------------------------------------- planar (x, y, yaw) solve

# A kitchen-like wall: 0.16 m tags in two rows (0.88 m and 1.11 m up) on the wall x = 2 m, seen
# by a 640 x 480 camera 1.5 m up on a pole, pitched 25 degrees down, 0.15 m behind the base.
# (At 320 x 240 and 0.5 px noise single-tag poses scatter past the consensus gate.)
SMALL = Intrinsics(415.7, 415.7, 319.5, 239.5, 640, 480)
_PITCH = math.radians(25.0)
POLE_FROM_CAMERA = make_transform(
    np.array([[math.cos(_PITCH), 0.0, math.sin(_PITCH)], [0.0, 1.0, 0.0],
              [-math.sin(_PITCH), 0.0, math.cos(_PITCH)]])
    @ np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]),
    [-0.15, 0.0, 1.5],
)


def kitchen_wall(columns: tuple[float, ...] = (-0.12, 0.12)) -> dict[str, object]:
    tags = [
        {"id": 10 * c + r, "position": [2.0, y, z], "orientation": WALL}
        for c, y in enumerate(columns)
        for r, z in enumerate((0.88, 1.11))
    ]
    return {"dictionary": "DICT_APRILTAG_36h11", "tag_size": 0.16, "tags": tags}


def projected_detections(
    tag_map: FiducialMap, map_from_camera: np.ndarray, noise_px: float, rng: np.random.Generator
) -> list[TagDetection]:
    """Exact projections of every tag's corners (detector order) plus Gaussian pixel noise."""
    camera_from_map = invert_transform(map_from_camera)
    out = []
    for tag in tag_map.tags.values():
        h = tag.size / 2.0
        corners = np.array([[-h, h, 0, 1], [h, h, 0, 1], [h, -h, 0, 1], [-h, -h, 0, 1]]).T
        cam = (camera_from_map @ tag.map_from_tag @ corners)[:3]
        pixels = (SMALL.matrix @ cam)[:2] / cam[2]
        out.append(TagDetection(tag.tag_id, pixels.T + rng.normal(0.0, noise_px, (4, 2))))
    return out


def planar_errors(result: LocalizationResult | None, truth: np.ndarray) -> tuple[float, float]:
    assert result is not None and not result.held
    position = float(np.linalg.norm(result.map_from_base[:2, 3] - truth[:2, 3]))
    return position, abs(math.remainder(result.yaw - math.atan2(truth[1, 0], truth[0, 0]),
                                         math.tau))


@pytest.mark.parametrize(("x", "y", "yaw"), [(0.75, 0.0, 0.0), (0.6, 0.3, -0.2), (0.9, -0.2, 0.15)])
def test_planar_solve_beats_the_full_solve_on_noisy_corners(x: float, y: float, yaw: float) -> None:
    tag_map = parse_fiducial_map(kitchen_wall())
    truth = base_pose(x, y, yaw)
    rng = np.random.default_rng(7)
    planar = FiducialLocalizer(tag_map, POLE_FROM_CAMERA)
    full = FiducialLocalizer(tag_map, POLE_FROM_CAMERA, LocalizationConfig(solver="full"))
    figures: dict[str, list[tuple[float, float]]] = {"planar": [], "full": []}
    for trial in range(20):
        detections = projected_detections(tag_map, truth @ POLE_FROM_CAMERA, 0.5, rng)
        for name, loc in (("planar", planar), ("full", full)):
            result = loc.localize_detections(detections, SMALL, stamp=float(trial))
            assert result is not None and len(result.used_tags) >= 2
            assert 0.0 < result.reprojection_error < 1.5
            figures[name].append(planar_errors(result, truth))
    p_pos, p_yaw = np.array(figures["planar"]).T
    f_pos, f_yaw = np.array(figures["full"]).T
    print(f"\n({x}, {y}, {yaw}) over 20 draws of 0.5 px noise: planar mean "
          f"{1000 * p_pos.mean():.1f} max {1000 * p_pos.max():.1f} mm "
          f"{math.degrees(p_yaw.max()):.2f} deg; full mean "
          f"{1000 * f_pos.mean():.1f} max {1000 * f_pos.max():.1f} mm "
          f"{math.degrees(f_yaw.max()):.2f} deg")
    # Four 0.16 m tags spanning 0.4 m leave turning about them weakly observed: a degree of
    # heading with a matching sideways shift moves a corner by a fraction of a pixel.
    assert p_pos.mean() < 0.010 and p_pos.max() < 0.03 and p_yaw.max() < math.radians(1.2)
    assert f_pos.mean() > 1.4 * p_pos.mean()


def test_one_tag_gives_a_coarse_planar_estimate() -> None:
    """One small tag fixes heading about itself poorly (as in the 6-DoF case): decimetre class."""
    tag_map = parse_fiducial_map(kitchen_wall(columns=(0.0,)))
    truth = base_pose(0.7, 0.1, 0.1)
    rng = np.random.default_rng(3)
    detections = projected_detections(tag_map, truth @ POLE_FROM_CAMERA, 0.5, rng)[:1]
    result = FiducialLocalizer(tag_map, POLE_FROM_CAMERA).localize_detections(
        detections, SMALL, stamp=1.0)
    position, yaw = planar_errors(result, truth)
    print(f"\none tag, 0.5 px noise: {1000 * position:.1f} mm {math.degrees(yaw):.2f} deg")
    assert position < 0.10 and yaw < math.radians(5.0)


def test_degenerate_and_non_finite_corners_give_no_estimate() -> None:
    tag_map = parse_fiducial_map(kitchen_wall())
    loc = FiducialLocalizer(tag_map, POLE_FROM_CAMERA)
    line = np.array([[100.0, 100.0], [120.0, 110.0], [140.0, 120.0], [160.0, 130.0]])
    nan = np.array([[100.0, 100.0], [120.0, 100.0], [120.0, np.nan], [100.0, 120.0]])
    result = loc.localize_detections(
        [TagDetection(0, line), TagDetection(1, nan)], SMALL, stamp=1.0)
    assert result is None
    observations, rejected = loc.observe([TagDetection(0, line), TagDetection(1, nan)], SMALL)
    assert observations == []
    assert rejected == [(0, "degenerate_corners"), (1, "non_finite_corners")]
    with pytest.raises(FiducialError, match="4 x 2"):
        loc.observe([TagDetection(0, line[:3])], SMALL)
    with pytest.raises(FiducialError, match="distortion"):
        loc.observe([], SMALL, [0.0, float("nan"), 0.0, 0.0, 0.0])
    with pytest.raises(FiducialError, match="stamp"):
        loc.localize_detections([], SMALL, stamp=float("inf"))


def test_planar_fit_refuses_ill_posed_and_malformed_input() -> None:
    truth = base_pose(0.7, 0.0, 0.0)
    camera = (SMALL.matrix, np.zeros(5))
    # Points on one vertical line: turning the robot about that line leaves every projection
    # where it was, so heading and position cannot be told apart.
    column = np.array([[2.0, 0.0, z] for z in (0.8, 0.9, 1.0, 1.1, 1.2)])
    cam = (invert_transform(truth @ POLE_FROM_CAMERA) @ np.c_[column, np.ones(5)].T)[:3]
    pixels = ((SMALL.matrix @ cam)[:2] / cam[2]).T
    with pytest.raises(FitRejectedError, match="ill-posed"):
        solve_planar_base(column, pixels, camera, POLE_FROM_CAMERA, base_pose(0.72, 0.02, 0.01))
    with pytest.raises(FiducialError, match="at least 4"):
        solve_planar_base(column[:3], pixels[:3], camera, POLE_FROM_CAMERA, truth)
    with pytest.raises(FiducialError, match="non-finite"):
        solve_planar_base(column, np.where(pixels > 0, np.nan, 0), camera, POLE_FROM_CAMERA, truth)
    with pytest.raises(FiducialError, match="N, 3"):
        solve_planar_base(column[:, :2], pixels, camera, POLE_FROM_CAMERA, truth)
    # Starting behind the camera (facing away from the wall) is refused rather than fitted.
    with pytest.raises(FitRejectedError, match="behind"):
        solve_planar_base(column, pixels, camera, POLE_FROM_CAMERA, base_pose(0.7, 0.0, math.pi))


def test_a_planar_fit_worse_than_the_limit_is_rejected() -> None:
    """The mounting is 0.2 m off in height: each tag alone fits, the floor-bound camera cannot."""
    tag_map = parse_fiducial_map(kitchen_wall())
    truth = base_pose(0.75, 0.0, 0.0)
    detections = projected_detections(
        tag_map, truth @ POLE_FROM_CAMERA, 0.0, np.random.default_rng(0))
    wrong_mount = POLE_FROM_CAMERA.copy()
    wrong_mount[2, 3] += 0.2
    loc = FiducialLocalizer(tag_map, wrong_mount, LocalizationConfig(max_reprojection_error=1.0))
    result = loc.localize_detections(detections, SMALL, stamp=1.0)
    assert result is None
    observations, _ = loc.observe(detections, SMALL)
    with pytest.raises(FitRejectedError, match="max_reprojection_error"):
        loc.fuse(observations)
    # The full solve takes the camera's height from the image and still answers.
    full = FiducialLocalizer(tag_map, wrong_mount,
                             LocalizationConfig(max_reprojection_error=1.0, solver="full"))
    assert full.localize_detections(detections, SMALL, stamp=1.0) is not None


def test_solver_setting_is_checked() -> None:
    assert LocalizationConfig().solver == "planar"
    assert LocalizationConfig(solver="full", planar=False).solver == "full"
    with pytest.raises(FiducialError, match=r"localization\.solver must be one of"):
        LocalizationConfig(solver="gauss")
    with pytest.raises(FiducialError, match=r"needs localization\.planar"):
        LocalizationConfig(solver="planar", planar=False)
