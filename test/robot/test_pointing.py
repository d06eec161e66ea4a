"""Tests of the 3D pointing core on synthetic depth images rendered with a pinhole model.

The scene: a door (a vertical rectangle) 0.8 m in front of a camera that is shifted and turned
(yaw and a downward pitch) relative to the robot base, a thin vertical bar handle standing 4 cm
off the door, and a wall behind. Depth and per-pixel labels come from casting one ray per pixel,
so the true 3D geometry of every part is known exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from mimir_perception.camera import Intrinsics
from mimir_robot.pointing import (
    DEFAULT_CONFIG,
    FrontFace,
    NoDepthError,
    NoTargetPixelError,
    OutsideWorkspaceError,
    PointingConfig,
    PointingError,
    PointingInputError,
    PointingResult,
    Pose,
    StaleFrameError,
    WorkspaceBox,
    articulation_guess,
    fit_front_face,
    grasp_pose,
    point_at,
    select_pixel,
)

INTRINSICS = Intrinsics(fx=500.0, fy=500.0, cx=319.5, cy=239.5, width=640, height=480)
WORKSPACE = WorkspaceBox((0.0, -1.0, 0.0), (1.5, 1.0, 2.0))
DOOR_X = 1.0            # door plane in the base frame (m); its normal is -x, toward the robot
HANDLE_STANDOFF = 0.04  # handle front face in front of the door (m)
DOOR_NORMAL = np.array([-1.0, 0.0, 0.0])
STAMP = 100.0


@dataclass(frozen=True)
class Rect:
    """A rectangle in space: centre, two in-plane unit axes and half sizes along them (m)."""

    center: tuple[float, float, float]
    axis_a: tuple[float, float, float]
    axis_b: tuple[float, float, float]
    half_a: float
    half_b: float


def camera_pose(position: tuple[float, float, float] = (0.2, 0.05, 1.05),
                yaw_deg: float = 8.0, pitch_down_deg: float = 10.0) -> np.ndarray:
    """base_from_camera of an optical frame looking along base +x, then yawed and pitched down."""
    level = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])  # optical -> base
    turn = Rotation.from_euler("zy", [yaw_deg, pitch_down_deg], degrees=True).as_matrix()
    pose = np.eye(4)
    pose[:3, :3] = turn @ level
    pose[:3, 3] = position
    return pose


def render(rects: list[Rect], pose: np.ndarray, wall_x: float = 1.3,
           noise_m: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Depth (float32, m) and labels (index into ``rects``, -1 for the wall) by ray casting."""
    h, w = INTRINSICS.height, INTRINSICS.width
    us, vs = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
    rays_cam = np.stack([(us - INTRINSICS.cx) / INTRINSICS.fx,
                         (vs - INTRINSICS.cy) / INTRINSICS.fy, np.ones_like(us)], axis=-1)
    rays = rays_cam @ pose[:3, :3].T  # base-frame directions; the optical z of each is 1
    origin = pose[:3, 3]
    depth = (wall_x - origin[0]) / rays[..., 0]  # the wall: the plane x = wall_x
    labels = np.full((h, w), -1, dtype=np.int32)
    for i, rect in enumerate(rects):
        c, a, b = (np.asarray(v) for v in (rect.center, rect.axis_a, rect.axis_b))
        n = np.cross(a, b)
        with np.errstate(divide="ignore", invalid="ignore"):
            s = ((c - origin) @ n) / (rays @ n)
        hit_point = origin + s[..., None] * rays
        along_a = (hit_point - c) @ a
        along_b = (hit_point - c) @ b
        hit = (s > 0) & (np.abs(along_a) <= rect.half_a) & (np.abs(along_b) <= rect.half_b)
        hit &= s < depth
        depth = np.where(hit, s, depth)
        labels[hit] = i
    if noise_m:
        depth = depth + np.random.default_rng(7).normal(0.0, noise_m, depth.shape)
    return depth.astype(np.float32), labels


def door(width: float = 0.4, height: float = 0.6, center_z: float = 0.9) -> Rect:
    return Rect((DOOR_X, 0.0, center_z), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
                width / 2, height / 2)


def vertical_bar(y: float, z: float = 0.9, length: float = 0.2, width: float = 0.02) -> Rect:
    return Rect((DOOR_X - HANDLE_STANDOFF, y, z), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
                width / 2, length / 2)


def horizontal_bar(y: float, z: float, length: float = 0.2, width: float = 0.02) -> Rect:
    return Rect((DOOR_X - HANDLE_STANDOFF, y, z), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0),
                length / 2, width / 2)


@dataclass(frozen=True)
class Scene:
    depth: np.ndarray
    door_mask: np.ndarray
    handle_mask: np.ndarray
    pose: np.ndarray
    handle_center: np.ndarray


def door_scene(handle_y: float = -0.14, noise_m: float = 0.0005,
               handle_width: float = 0.02) -> Scene:
    """A door with a vertical bar handle (handle_y < 0: on the right as seen from the robot)."""
    pose = camera_pose()
    bar = vertical_bar(handle_y, width=handle_width)
    depth, labels = render([door(), bar], pose, noise_m=noise_m)
    return Scene(depth, labels >= 0, labels == 1, pose, np.asarray(bar.center))


@pytest.fixture(scope="module")
def scene() -> Scene:
    return door_scene()


def run(scene: Scene, *, stamp: float = STAMP, now: float = STAMP + 0.1,
        workspace: WorkspaceBox = WORKSPACE, pixel: tuple[float, float] | None = None,
        config: PointingConfig = DEFAULT_CONFIG) -> PointingResult:
    """``point_at`` on the scene's handle with the test defaults."""
    return point_at(scene.handle_mask, scene.depth, INTRINSICS, scene.pose, stamp=stamp,
                    now=now, workspace=workspace, pixel=pixel, config=config)


def angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
    return math.degrees(math.acos(min(1.0, max(-1.0, cos))))


# --- The nominal case -----------------------------------------------------------------------------
def test_point_at_vertical_handle(scene: Scene) -> None:
    res = run(scene)
    u, v = res.pixel
    assert scene.handle_mask[v, u]
    assert np.linalg.norm(np.asarray(res.point_base) - scene.handle_center) < 0.01
    assert angle_deg(np.asarray(res.normal_base), DOOR_NORMAL) < 3.0
    assert res.long_axis is not None
    assert angle_deg(np.asarray(res.long_axis), np.array([0.0, 0.0, 1.0])) < 5.0
    rot = res.grasp.rotation()
    approach, closing = rot[:, 2], rot[:, 1]
    assert angle_deg(approach, -DOOR_NORMAL) < 3.0
    assert abs(closing[2]) < math.sin(math.radians(3.0))  # fingers close horizontally
    assert abs(float(closing @ np.asarray(res.long_axis))) < 1e-6
    assert closing[1] > 0.99  # the default hint (base +y) fixes the sign: no wrist flips
    assert np.allclose(rot.T @ rot, np.eye(3), atol=1e-9) and np.linalg.det(rot) > 0.0
    assert res.grasp.quat_xyzw[3] >= 0.0 and math.isclose(np.linalg.norm(res.grasp.quat_xyzw), 1.0)
    assert res.n_points > 50 and res.n_depth_samples >= 3 and res.n_normal_inliers > 50
    assert res.stamp == STAMP


def test_very_thin_handle_with_noisy_depth() -> None:
    """A 1 cm bar (about 6 px) barely defines a plane; the door around it does."""
    sc = door_scene(handle_width=0.01, noise_m=0.002)
    res = run(sc)
    assert sc.handle_mask[res.pixel[1], res.pixel[0]]
    assert np.linalg.norm(np.asarray(res.point_base) - sc.handle_center) < 0.01
    assert angle_deg(np.asarray(res.normal_base), DOOR_NORMAL) < 3.0
    assert abs(res.grasp.rotation()[2, 1]) < math.sin(math.radians(3.0))


def test_pregrasp_is_backed_off_along_the_approach(scene: Scene) -> None:
    res = run(scene)
    backoff = DEFAULT_CONFIG.pregrasp_backoff_m
    offset = np.asarray(res.grasp.position) - np.asarray(res.pregrasp.position)
    assert np.isclose(np.linalg.norm(offset), backoff)
    assert np.allclose(offset / backoff, res.grasp.approach)
    assert res.pregrasp.quat_xyzw == res.grasp.quat_xyzw
    # the pre-grasp stands in front of the handle, toward the robot
    assert res.pregrasp.position[0] < res.grasp.position[0] - 0.09


def test_grasp_depth_and_x_closing_axis(scene: Scene) -> None:
    cfg = replace(DEFAULT_CONFIG, closing_axis="x", grasp_depth_m=0.01, pregrasp_backoff_m=0.2)
    res = run(scene, config=cfg)
    rot = res.grasp.rotation()
    assert abs(rot[2, 0]) < math.sin(math.radians(3.0))  # now the tool x axis is horizontal
    assert np.isclose(float(rot[:, 2] @ (np.asarray(res.grasp.position)
                                         - np.asarray(res.point_base))), 0.01)
    assert np.isclose(np.linalg.norm(np.asarray(res.grasp.position)
                                     - np.asarray(res.pregrasp.position)), 0.2)


def test_vlm_pixel_on_and_near_the_mask(scene: Scene) -> None:
    rows, cols = np.nonzero(scene.handle_mask)
    k = len(rows) // 3
    on = (int(cols[k]), int(rows[k]))
    assert run(scene, pixel=on).pixel == on
    # two pixels right of the mask's right border on that row snaps back onto the mask
    row_cols = cols[rows == rows[k]]
    near = (float(row_cols.max() + 2), float(rows[k]))
    snapped = run(scene, pixel=near).pixel
    assert scene.handle_mask[snapped[1], snapped[0]]
    assert abs(snapped[0] - near[0]) <= 3


def test_uint16_millimetre_depth(scene: Scene) -> None:
    mm = np.round(np.nan_to_num(scene.depth) * 1000.0).astype(np.uint16)
    res = point_at(scene.handle_mask, mm, INTRINSICS, scene.pose, stamp=STAMP, now=STAMP,
                   workspace=WORKSPACE)
    assert np.linalg.norm(np.asarray(res.point_base) - scene.handle_center) < 0.01


# --- Pixel selection on awkward shapes ------------------------------------------------------------
def test_l_shaped_and_curved_thin_masks_give_a_pixel_on_the_mask() -> None:
    depth = np.full((120, 160), 0.8, np.float32)
    l_mask = np.zeros((120, 160), bool)
    l_mask[20:100, 30:36] = True   # vertical stroke, 6 px wide
    l_mask[94:100, 30:130] = True  # horizontal stroke
    rows, cols = np.nonzero(l_mask)
    assert not l_mask[round(rows.mean()), round(cols.mean())]  # the mean misses the part
    u, v = select_pixel(l_mask, depth)
    assert l_mask[v, u]

    yy, xx = np.mgrid[0:120, 0:160]
    radius = np.hypot(xx - 80.0, yy - 60.0)
    arc = (np.abs(radius - 40.0) <= 2.5) & (yy < 60)  # a thin upper half ring, like a C handle
    rows, cols = np.nonzero(arc)
    assert not arc[round(np.median(rows)), round(np.median(cols))]
    u, v = select_pixel(arc, depth)
    assert arc[v, u]


def test_selected_pixel_skips_pixels_without_depth() -> None:
    mask = np.zeros((60, 60), bool)
    mask[10:50, 10:50] = True
    depth = np.full((60, 60), 0.8, np.float32)
    depth[20:40, 20:40] = np.nan  # the centre of the blob has no reading
    u, v = select_pixel(mask, depth)
    assert mask[v, u] and np.isfinite(depth[v, u])


# --- Fronts and articulation guesses --------------------------------------------------------------
def test_front_face_of_the_door(scene: Scene) -> None:
    face = fit_front_face(scene.door_mask, scene.depth, INTRINSICS, scene.pose)
    assert angle_deg(np.asarray(face.normal), DOOR_NORMAL) < 2.0
    assert abs(face.width_m - 0.4) < 0.02 and abs(face.height_m - 0.6) < 0.02
    assert np.linalg.norm(np.asarray(face.center) - np.array([DOOR_X, 0.0, 0.9])) < 0.02
    assert angle_deg(np.asarray(face.up), np.array([0.0, 0.0, 1.0])) < 2.0
    assert angle_deg(np.asarray(face.right), np.array([0.0, -1.0, 0.0])) < 2.0


@pytest.mark.parametrize(("handle_y", "hinge_side", "hinge_y"),
                         [(-0.14, "left", 0.2), (0.14, "right", -0.2)])
def test_revolute_guess_puts_the_hinge_opposite_the_handle(
    handle_y: float, hinge_side: str, hinge_y: float
) -> None:
    sc = door_scene(handle_y)
    face = fit_front_face(sc.door_mask, sc.depth, INTRINSICS, sc.pose)
    handle = run(sc).point_base
    guess = articulation_guess(face, handle)
    assert guess.kind == "revolute"
    assert guess.hinge_side == hinge_side
    assert abs(guess.origin[1] - hinge_y) < 0.02 and abs(guess.origin[0] - DOOR_X) < 0.02
    assert angle_deg(np.abs(np.asarray(guess.axis)), np.array([0.0, 0.0, 1.0])) < 2.0
    expected_radius = math.hypot(abs(hinge_y - handle_y), HANDLE_STANDOFF)
    assert abs(guess.radius_m - expected_radius) < 0.02
    # a positive rotation about the axis swings the handle toward the robot
    swing = np.cross(np.asarray(guess.axis), np.asarray(handle) - np.asarray(guess.origin))
    assert float(swing @ DOOR_NORMAL) > 0.0


def test_wide_drawer_with_centred_handle_is_prismatic() -> None:
    pose = camera_pose()
    front = door(width=0.5, height=0.2, center_z=0.85)
    bar = horizontal_bar(0.0, 0.85)
    depth, labels = render([front, bar], pose)
    face = fit_front_face(labels >= 0, depth, INTRINSICS, pose)
    assert face.width_m > face.height_m
    res = point_at(labels == 1, depth, INTRINSICS, pose, stamp=STAMP, now=STAMP,
                   workspace=WORKSPACE)
    guess = articulation_guess(face, res.point_base)
    assert guess.kind == "prismatic"
    assert angle_deg(np.asarray(guess.axis), DOOR_NORMAL) < 2.0
    # a horizontal bar is squeezed vertically
    assert abs(res.grasp.rotation()[2, 1]) > math.cos(math.radians(3.0))


def test_centred_handle_on_a_tall_face_is_unknown() -> None:
    face = FrontFace(center=(1.0, 0.0, 0.9), normal=(-1.0, 0.0, 0.0), up=(0.0, 0.0, 1.0),
                     right=(0.0, -1.0, 0.0), width_m=0.4, height_m=0.6, n_points=100)
    assert articulation_guess(face, (0.96, 0.0, 0.9)).kind == "unknown"
    assert articulation_guess(face, (0.96, 0.5, 0.9)).kind == "unknown"  # off the face


# --- Grasp geometry alone -------------------------------------------------------------------------
def test_grasp_pose_without_long_axis_follows_the_hint() -> None:
    pose = grasp_pose((0.5, 0.0, 0.8), (0.0, 0.0, 1.0), (0.0, 1.0, 0.0))  # from above
    rot = pose.rotation()
    assert np.allclose(rot[:, 2], (0.0, 0.0, -1.0))
    assert np.allclose(rot[:, 1], (0.0, 1.0, 0.0))
    assert isinstance(pose, Pose) and pose.quat_xyzw[3] >= 0.0
    # a hint along the approach falls back to another axis instead of failing
    rot = grasp_pose((0.5, 0.0, 0.8), (-1.0, 0.0, 0.0), (1.0, 0.0, 0.0)).rotation()
    assert abs(float(rot[:, 1] @ rot[:, 2])) < 1e-9


def test_grasp_pose_closes_across_a_vertical_bar() -> None:
    rot = grasp_pose((0.9, 0.0, 0.9), (-1.0, 0.0, 0.0), (0.0, 0.0, 1.0),
                     long_axis=(0.0, 0.0, 1.0)).rotation()
    assert abs(rot[2, 1]) < 1e-9 and np.isclose(abs(rot[1, 1]), 1.0)


# --- Refusals -------------------------------------------------------------------------------------
def test_empty_and_tiny_masks(scene: Scene) -> None:
    empty = np.zeros_like(scene.handle_mask)
    with pytest.raises(NoTargetPixelError):
        run(replace(scene, handle_mask=empty))
    tiny = empty.copy()
    rows, cols = np.nonzero(scene.handle_mask)
    tiny[rows[0], cols[0]] = True
    with pytest.raises(NoTargetPixelError) as err:
        run(replace(scene, handle_mask=tiny))
    assert err.value.code == "no_target_pixel"


@pytest.mark.parametrize("pixel", [(-1.0, 100.0), (640.0, 100.0), (100.0, 480.0),
                                   (float("nan"), 5.0)])
def test_vlm_pixel_outside_the_image(scene: Scene, pixel: tuple[float, float]) -> None:
    with pytest.raises(NoTargetPixelError):
        run(scene, pixel=pixel)


def test_vlm_pixel_off_the_mask(scene: Scene) -> None:
    with pytest.raises(NoTargetPixelError):
        run(scene, pixel=(20.0, 20.0))


@pytest.mark.parametrize("bad", [0.0, np.nan, np.inf, -np.inf, 50.0])
def test_no_valid_depth_at_the_part(scene: Scene, bad: float) -> None:
    depth = scene.depth.copy()
    depth[scene.handle_mask] = bad
    with pytest.raises(NoDepthError) as err:
        run(replace(scene, depth=depth))
    assert err.value.code == "no_depth"
    rows, cols = np.nonzero(scene.handle_mask)
    with pytest.raises(NoDepthError):  # the same through a VLM's pixel
        run(replace(scene, depth=depth), pixel=(float(cols[0]), float(rows[0])))


def test_point_outside_the_workspace(scene: Scene) -> None:
    with pytest.raises(OutsideWorkspaceError) as err:
        run(scene, workspace=WorkspaceBox((0.0, -1.0, 0.0), (0.9, 1.0, 2.0)))
    assert err.value.code == "outside_workspace"


def test_stale_and_future_frames(scene: Scene) -> None:
    with pytest.raises(StaleFrameError):
        run(scene, stamp=STAMP, now=STAMP + 2.0)
    with pytest.raises(StaleFrameError) as err:
        run(scene, stamp=STAMP + 0.5, now=STAMP)
    assert err.value.code == "stale_frame"
    run(scene, stamp=STAMP + 0.01, now=STAMP)  # clock jitter within the tolerance


def test_mismatched_shapes_are_input_errors(scene: Scene) -> None:
    with pytest.raises(PointingInputError) as err:
        run(replace(scene, handle_mask=scene.handle_mask[:-1]))
    assert isinstance(err.value, ValueError) and err.value.code == "bad_input"
    small = Intrinsics(fx=500.0, fy=500.0, cx=159.5, cy=119.5, width=320, height=240)
    with pytest.raises(PointingInputError):
        point_at(scene.handle_mask, scene.depth, small, scene.pose, stamp=STAMP, now=STAMP,
                 workspace=WORKSPACE)
    with pytest.raises(PointingInputError):
        select_pixel(scene.handle_mask, scene.depth[:, :-1])


def test_non_finite_or_non_rigid_transform(scene: Scene) -> None:
    bad = scene.pose.copy()
    bad[0, 3] = np.nan
    with pytest.raises(PointingInputError):
        run(replace(scene, pose=bad))
    with pytest.raises(PointingInputError):
        fit_front_face(scene.door_mask, scene.depth, INTRINSICS, bad)
    sheared = scene.pose.copy()
    sheared[:3, :3] *= 2.0
    with pytest.raises(PointingInputError):
        run(replace(scene, pose=sheared))


def test_bad_workspace_and_config_are_refused() -> None:
    with pytest.raises(PointingInputError):
        WorkspaceBox((1.0, 0.0, 0.0), (0.0, 1.0, 1.0))
    with pytest.raises(PointingInputError):
        WorkspaceBox((0.0, 0.0, float("nan")), (1.0, 1.0, 1.0))
    with pytest.raises(PointingInputError):
        replace(DEFAULT_CONFIG, max_age_s=-1.0)


def test_error_codes_are_distinct() -> None:
    classes = [PointingError, PointingInputError, NoTargetPixelError, NoDepthError,
               OutsideWorkspaceError, StaleFrameError]
    codes = {cls.code for cls in classes}
    assert len(codes) == len(classes)
    assert all(issubclass(cls, PointingError) for cls in classes)
