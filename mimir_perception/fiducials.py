"""Robot localisation from wall-mounted fiducial markers (AprilTag / ArUco), without ROS.

Frames: a tag's own frame has its origin at the tag centre, x to the right and y up as seen
when facing the printed tag, and z pointing out of the tag face toward the viewer. The corner
order matches OpenCV's detector (top-left, top-right, bottom-right, bottom-left). Tag poses in
the map come from a YAML file; the camera mounting ``base_link -> camera optical frame`` is a
parameter. For each visible known tag the pose of ``base_link`` in the map is

    T_map_base = T_map_tag @ inv(T_cam_tag) @ inv(T_base_cam)

and the per-tag estimates are fused: estimates far from the consensus are rejected, the rest
averaged with weights that fall with the reprojection error. That average seeds the final fit,
chosen by :attr:`LocalizationConfig.solver`:

* ``planar`` (default, for a ground robot): only the base's x, y and heading are free; the
  camera pose is ``T_map_base(x, y, yaw) @ T_base_cam`` with the base on the floor (z = 0,
  level), and the three numbers are fitted to the corners of every consistent tag at once by
  robust least squares on the reprojection error. Camera height and tilt come from the known
  mounting instead of from the image, where a few nearly coplanar tags fix them poorly and
  their error would leak into the position.
* ``full``: one 6-DoF camera pose fitted to all consistent tags (PnP), turned into a base pose,
  then flattened onto the floor when ``planar`` is set.

Fiducial map file (``config/fiducials/<name>.yaml``)::

    dictionary: DICT_APRILTAG_36h11
    tag_size: 0.16            # m, outer edge of the black square
    frame_id: map
    tags:
      - {id: 0, position: [2.0, 0.0, 1.2], orientation: [0.5, -0.5, -0.5, 0.5]}  # x y z w
      - {id: 1, position: [0.0, 3.0, 1.2], orientation: [...], size: 0.1}
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
from scipy.optimize import least_squares

from mimir import settings
from mimir.transforms import InvalidTransformError, matrix_to_quaternion, quaternion_to_matrix
from mimir_perception.camera import (
    FloatArray,
    Intrinsics,
    as_transform,
    invert_transform,
    make_transform,
)
from mimir_perception.errors import FiducialError, FiducialMapError

LOG = logging.getLogger(__name__)


def aruco_dictionary(name: str) -> Any:
    """OpenCV predefined dictionary by name (e.g. ``DICT_APRILTAG_36h11``)."""
    if not isinstance(name, str) or not name.startswith("DICT_"):
        raise FiducialMapError(f"dictionary must be an OpenCV DICT_* name, got {name!r}")
    code = getattr(cv2.aruco, name, None)
    if not isinstance(code, int):
        raise FiducialMapError(f"unknown ArUco dictionary {name!r}")
    return cv2.aruco.getPredefinedDictionary(code)


SOLVERS = ("planar", "full")
# A fit whose weakest direction moves the reprojections this little relative to its strongest
# (singular values of the residual Jacobian) is ill-posed: the corners do not pin the pose down.
_MIN_CONDITION = 1e-4
# Scale (pixels) beyond which a corner's residual counts as an outlier in the robust planar fit.
_ROBUST_SCALE_PX = 1.0
# A detected quadrilateral whose area is below this fraction of its longest side squared is
# (nearly) a line: a tag seen edge-on or a broken detection, useless for a pose.
_MIN_QUAD_AREA_RATIO = 0.05


class FitRejectedError(FiducialError):
    """The tags agreed, but the single pose fitted to all their corners was refused.

    Raised when the fit is ill-posed (degenerate corner geometry), does not converge, puts a
    corner behind the camera, or leaves an RMS reprojection error above the configured limit.
    """


@dataclass(frozen=True)
class TagPose:
    """A known tag: its pose in the map and its edge length (m)."""

    tag_id: int
    map_from_tag: FloatArray
    size: float


@dataclass(frozen=True)
class FiducialMap:
    """Known tags of a site."""

    dictionary: str
    frame_id: str
    tags: Mapping[int, TagPose]

    def __post_init__(self) -> None:
        aruco_dictionary(self.dictionary)
        if not self.tags:
            raise FiducialMapError("a fiducial map needs at least one tag")


def _float_list(value: Any, length: int, where: str) -> list[float]:
    if not isinstance(value, (list, tuple)) or len(value) != length:
        raise FiducialMapError(f"{where} must be a list of {length} numbers, got {value!r}")
    out: list[float] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise FiducialMapError(f"{where} must hold finite numbers, got {value!r}")
        out.append(float(v))
    return out


def parse_fiducial_map(data: Any, source: str = "<data>") -> FiducialMap:
    """Build a :class:`FiducialMap` from parsed YAML data."""
    if not isinstance(data, Mapping):
        raise FiducialMapError(f"{source}: top level must be a mapping")
    unknown = set(data) - {"dictionary", "tag_size", "frame_id", "tags"}
    if unknown:
        raise FiducialMapError(f"{source}: unknown keys {sorted(map(str, unknown))}")
    dictionary = data.get("dictionary", "DICT_APRILTAG_36h11")
    frame_id = data.get("frame_id", "map")
    if not isinstance(frame_id, str) or not frame_id:
        raise FiducialMapError(f"{source}: frame_id must be a non-empty string")
    default_size = data.get("tag_size")
    raw_tags = data.get("tags")
    if not isinstance(raw_tags, list) or not raw_tags:
        raise FiducialMapError(f"{source}: 'tags' must be a non-empty list")
    tags: dict[int, TagPose] = {}
    for i, raw in enumerate(raw_tags):
        where = f"{source}: tags[{i}]"
        if not isinstance(raw, Mapping):
            raise FiducialMapError(f"{where} must be a mapping")
        bad = set(raw) - {"id", "position", "orientation", "size"}
        if bad:
            raise FiducialMapError(f"{where}: unknown keys {sorted(map(str, bad))}")
        tag_id = raw.get("id")
        if isinstance(tag_id, bool) or not isinstance(tag_id, int) or tag_id < 0:
            raise FiducialMapError(f"{where}: id must be a non-negative integer, got {tag_id!r}")
        if tag_id in tags:
            raise FiducialMapError(f"{where}: id {tag_id} repeats")
        position = _float_list(raw.get("position"), 3, f"{where}.position")
        quat = _float_list(raw.get("orientation"), 4, f"{where}.orientation")
        size = raw.get("size", default_size)
        if isinstance(size, bool) or not isinstance(size, (int, float)) or not size > 0:
            raise FiducialMapError(f"{where}: size (or tag_size) must be > 0 m, got {size!r}")
        try:
            rot = quaternion_to_matrix(quat)
        except InvalidTransformError as err:
            raise FiducialMapError(f"{where}.orientation: {err}") from err
        tags[tag_id] = TagPose(tag_id, make_transform(rot, position), float(size))
    try:
        return FiducialMap(str(dictionary), frame_id, tags)
    except FiducialMapError as err:
        raise FiducialMapError(f"{source}: {err}") from err


def load_fiducial_map(path: str | Path) -> FiducialMap:
    """Load a fiducial map YAML file (format in the module docstring)."""
    file = Path(path)
    data = settings.read_mapping(file, "fiducial map", FiducialMapError)
    return parse_fiducial_map(data, str(file))


@dataclass(frozen=True)
class TagDetection:
    """A detected marker: id and its four corners (pixels, detector order)."""

    tag_id: int
    corners: FloatArray


@dataclass(frozen=True)
class TagObservation:
    """A known tag's pose in the camera and what it implies for the robot."""

    tag_id: int
    camera_from_tag: FloatArray
    reprojection_error: float
    map_from_base: FloatArray
    corners: FloatArray
    corners_map: FloatArray


@dataclass(frozen=True)
class LocalizationConfig(settings.Checked, section="localization", error=FiducialError,
                         positive=("max_translation_disagreement", "max_rotation_disagreement",
                                   "max_reprojection_error", "max_hold"),
                         non_negative=("min_tag_pixels",), choices={"solver": SOLVERS}):
    """Settings of the fiducial localiser.

    Attributes:
        max_translation_disagreement: A tag whose base estimate lies further than this from
            the consensus (median) is rejected (m).
        max_rotation_disagreement: Same for orientation (rad).
        max_reprojection_error: Tags whose pose fits the corners worse than this are
            rejected (pixels, RMS).
        min_tag_pixels: Tags whose shortest side is shorter than this are ignored (pixels).
        max_hold: The last estimate is reported as held for at most this long (s).
        planar: Project the estimate onto the ground plane (z = 0, roll = pitch = 0).
        refine_corners: Sub-pixel corner refinement in the detector.
        solver: ``planar`` fits only x, y and heading of the base to all tag corners (the
            camera mounting and a flat floor fix the rest; needs ``planar``); ``full`` fits a
            6-DoF camera pose and flattens it afterwards when ``planar`` is set.
    """

    max_translation_disagreement: float = 0.25
    max_rotation_disagreement: float = 0.2
    max_reprojection_error: float = 3.0
    min_tag_pixels: float = 12.0
    max_hold: float = 5.0
    planar: bool = True
    refine_corners: bool = True
    solver: str = "planar"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.solver == "planar" and not self.planar:
            raise FiducialError(
                "localization.solver 'planar' estimates x, y and heading only and needs "
                "localization.planar true; use solver 'full' for a 6-DoF estimate")


@dataclass(frozen=True)
class LocalizationResult:
    """Pose of ``base_link`` in the map.

    Attributes:
        map_from_base: 4x4 pose of the robot base in the map.
        stamp: Stamp of the image the estimate comes from (s).
        used_tags: Ids of tags fused into the estimate.
        rejected_tags: Ids of known tags seen but rejected, with the reason.
        reprojection_error: RMS reprojection error of the final fit over the used tags'
            corners (pixels); the weighted mean of the per-tag errors when no joint fit ran.
        held: True when no tag was usable now and this is the last good estimate.
        age: Time since the estimate's image (s); 0 for a fresh estimate.
    """

    map_from_base: FloatArray
    stamp: float
    used_tags: tuple[int, ...]
    rejected_tags: tuple[tuple[int, str], ...] = ()
    reprojection_error: float = 0.0
    held: bool = False
    age: float = 0.0

    @property
    def yaw(self) -> float:
        """Heading of the base in the map (rad)."""
        return float(math.atan2(self.map_from_base[1, 0], self.map_from_base[0, 0]))


def rotation_angle(rotation: npt.ArrayLike) -> float:
    """Angle (rad) of a 3x3 rotation."""
    r = np.asarray(rotation, dtype=np.float64)
    return float(math.acos(max(-1.0, min(1.0, (np.trace(r) - 1.0) / 2.0))))


def planar_pose(transform: npt.ArrayLike) -> FloatArray:
    """Flatten a pose onto the ground: keep x, y and heading; z = roll = pitch = 0."""
    mat = as_transform(transform)
    yaw = math.atan2(mat[1, 0], mat[0, 0])
    c, s = math.cos(yaw), math.sin(yaw)
    return make_transform([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], [mat[0, 3], mat[1, 3], 0.0])


def average_poses(poses: list[FloatArray], weights: npt.ArrayLike) -> FloatArray:
    """Weighted mean of rigid poses (translation mean, quaternion eigen-mean)."""
    w = np.asarray(weights, dtype=np.float64)
    if len(poses) == 0 or w.shape != (len(poses),) or np.any(w < 0) or w.sum() <= 0:
        raise FiducialError("average_poses needs poses and matching non-negative weights")
    w = w / w.sum()
    trans = sum(wi * p[:3, 3] for wi, p in zip(w, poses, strict=True))
    acc = np.zeros((4, 4))
    for wi, p in zip(w, poses, strict=True):
        q = matrix_to_quaternion(p[:3, :3])
        acc += wi * np.outer(q, q)
    _, vecs = np.linalg.eigh(acc)
    return make_transform(quaternion_to_matrix(vecs[:, -1]), np.asarray(trans))


def stood_still(before: npt.ArrayLike, now: npt.ArrayLike, *, translation_m: float,
                rotation_rad: float) -> bool:
    """Whether the base moved at most ``translation_m`` and turned at most ``rotation_rad``
    between two odometry poses (``odom -> base`` 4x4 matrices), in the floor plane."""
    step = np.linalg.inv(np.asarray(before, dtype=np.float64)) @ np.asarray(now, dtype=np.float64)
    turn = abs(math.atan2(step[1, 0], step[0, 0]))
    return float(np.linalg.norm(step[:2, 3])) <= translation_m and turn <= rotation_rad


def map_to_odom(map_from_base: npt.ArrayLike, odom_from_base: npt.ArrayLike) -> FloatArray:
    """The ``map -> odom`` transform that makes ``map -> odom -> base_link`` match the estimate.

    Both inputs must describe the same instant (the image stamp).
    """
    return np.asarray(
        as_transform(map_from_base, "map_from_base") @ invert_transform(odom_from_base),
        dtype=np.float64,
    )


def _rms_error(
    obj: FloatArray, img: FloatArray, pose: tuple[Any, Any], camera: tuple[FloatArray, FloatArray]
) -> float:
    """RMS reprojection error (pixels) of ``obj`` under ``pose = (rvec, tvec)``."""
    proj, _ = cv2.projectPoints(obj, pose[0], pose[1], camera[0], camera[1])
    return float(np.sqrt(np.mean(np.sum((proj.reshape(-1, 2) - img) ** 2, axis=1))))


def _solve_square(
    obj: FloatArray, corners: FloatArray, k: FloatArray, dist: FloatArray
) -> tuple[Any, Any, float] | None:
    """Pose of one square tag: best of the IPPE-square solutions and SQPnP, each refined.

    IPPE-square is the intended solver; its two solutions plus SQPnP's are refined with
    Levenberg-Marquardt and the one with the smallest RMS reprojection error wins (a tag
    seen nearly head-on can otherwise come back flipped).
    """
    candidates: list[tuple[Any, Any]] = []
    for flag in (cv2.SOLVEPNP_IPPE_SQUARE, cv2.SOLVEPNP_SQPNP):
        try:
            count, rvecs, tvecs, _ = cv2.solvePnPGeneric(obj, corners, k, dist, flags=flag)
        except cv2.error as cv_err:
            LOG.debug("solvePnPGeneric flag %d failed: %s", flag, cv_err)
            continue
        candidates.extend(zip(rvecs[:count], tvecs[:count], strict=True))
    best: tuple[Any, Any, float] | None = None
    for rvec, tvec in candidates:
        r, t = cv2.solvePnPRefineLM(obj, corners, k, dist, rvec.copy(), tvec.copy())
        err = _rms_error(obj, corners, (r, t), (k, dist))
        if math.isfinite(err) and (best is None or err < best[2]):
            best = (r, t, err)
    return best


def floor_pose(x: float, y: float, yaw: float) -> FloatArray:
    """Pose on the floor: position ``(x, y, 0)``, heading ``yaw`` (rad), level."""
    c, s = math.cos(yaw), math.sin(yaw)
    return make_transform([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], [x, y, 0.0])


def solve_planar_base(
    points_map: npt.ArrayLike,
    corners: npt.ArrayLike,
    camera: tuple[npt.ArrayLike, npt.ArrayLike],
    base_from_camera: npt.ArrayLike,
    initial: npt.ArrayLike,
) -> tuple[FloatArray, float]:
    """Fit the floor pose (x, y, yaw) of the base to known points seen by its camera.

    The camera sits at ``floor_pose(x, y, yaw) @ base_from_camera``; the three numbers are
    found by robust (soft-L1) least squares on the pixel offsets between ``corners`` and the
    projections of ``points_map``, starting from ``initial`` flattened onto the floor.

    Args:
        points_map: (N, 3) points in the map (m), N >= 4.
        corners: (N, 2) where each point was seen (pixels).
        camera: ``(K, distortion)`` as OpenCV takes them.
        base_from_camera: 4x4 mounting of the camera's optical frame on the base.
        initial: 4x4 starting guess of ``map_from_base``.

    Returns:
        ``(map_from_base, rms)``: the fitted floor pose and its plain RMS reprojection error
        (pixels per point).

    Raises:
        FiducialError: Malformed or non-finite input, or fewer than 4 points.
        FitRejectedError: The fit is ill-posed (the points cannot fix all three numbers, e.g.
            they lie on one vertical line), fails to converge, or ends with a point behind
            the camera.
    """
    obj = np.asarray(points_map, dtype=np.float64)
    img = np.asarray(corners, dtype=np.float64)
    if obj.ndim != 2 or obj.shape[1] != 3 or img.shape != (obj.shape[0], 2):
        raise FiducialError(
            f"planar fit needs (N, 3) map points and (N, 2) corners, got {obj.shape} and "
            f"{img.shape}")
    if obj.shape[0] < 4:
        raise FiducialError(f"planar fit needs at least 4 points, got {obj.shape[0]}")
    k = np.asarray(camera[0], dtype=np.float64)
    dist = np.asarray(camera[1], dtype=np.float64)
    if not all(np.all(np.isfinite(a)) for a in (obj, img, k, dist)):
        raise FiducialError("planar fit input holds non-finite values")
    camera_from_base = invert_transform(as_transform(base_from_camera, "base_from_camera"))
    start = planar_pose(as_transform(initial, "initial"))
    x0 = np.array([start[0, 3], start[1, 3], math.atan2(start[1, 0], start[0, 0])])
    rot_cb, trans_cb = camera_from_base[:3, :3], camera_from_base[:3, 3]
    zero = np.zeros(3)

    def in_camera(p: FloatArray) -> FloatArray:
        c, s = math.cos(p[2]), math.sin(p[2])
        rot_mb = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
        in_base = (obj - np.array([p[0], p[1], 0.0])) @ rot_mb  # rows: R_mb^T (P - t)
        return np.asarray(in_base @ rot_cb.T + trans_cb, dtype=np.float64)

    def residuals(p: FloatArray) -> FloatArray:
        proj, _ = cv2.projectPoints(in_camera(p), zero, zero, k, dist)
        return np.asarray((proj.reshape(-1, 2) - img).ravel(), dtype=np.float64)

    if np.any(in_camera(x0)[:, 2] <= 0.0):
        raise FitRejectedError("planar fit: the starting pose puts a point behind the camera")
    start_residuals = residuals(x0)
    if not np.all(np.isfinite(start_residuals)):
        raise FitRejectedError("planar fit: the starting pose projects to non-finite pixels")
    fit = least_squares(
        residuals, x0, method="trf", loss="soft_l1", f_scale=_ROBUST_SCALE_PX, x_scale="jac",
        max_nfev=200,
    )
    if fit.status <= 0 or not np.all(np.isfinite(fit.x)):
        raise FitRejectedError(f"planar fit did not converge: {fit.message}")
    if np.any(in_camera(fit.x)[:, 2] <= 0.0):
        raise FitRejectedError("planar fit put a point behind the camera")
    singular = np.linalg.svd(np.asarray(fit.jac, dtype=np.float64), compute_uv=False)
    if not np.all(np.isfinite(singular)) or singular[-1] <= _MIN_CONDITION * singular[0]:
        raise FitRejectedError(
            "planar fit is ill-posed: the points do not fix x, y and heading (singular values "
            f"{singular.tolist()})")
    final = residuals(fit.x).reshape(-1, 2)
    rms = float(np.sqrt(np.mean(np.sum(final**2, axis=1))))
    return floor_pose(float(fit.x[0]), float(fit.x[1]), float(fit.x[2])), rms


def _quad_area(corners: FloatArray) -> float:
    """Signed area (pixels^2) of a quadrilateral; positive in detector order (image y down)."""
    x, y = corners[:, 0], corners[:, 1]
    return float(0.5 * np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


class FiducialLocalizer:
    """Detects known tags in images and estimates the robot's pose in the map."""

    def __init__(
        self,
        tag_map: FiducialMap,
        base_from_camera: npt.ArrayLike,
        config: LocalizationConfig | None = None,
    ) -> None:
        self._map = tag_map
        self._config = config or LocalizationConfig()
        self._base_from_camera = as_transform(base_from_camera, "base_from_camera")
        self._camera_from_base = invert_transform(self._base_from_camera)
        params = cv2.aruco.DetectorParameters()
        if self._config.refine_corners:
            params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
        self._detector = cv2.aruco.ArucoDetector(aruco_dictionary(tag_map.dictionary), params)
        self._last: LocalizationResult | None = None
        self._intrinsics: tuple[FloatArray, FloatArray] | None = None

    @property
    def last(self) -> LocalizationResult | None:
        """The last fresh estimate, if any."""
        return self._last

    def detect(self, image: npt.NDArray[np.uint8]) -> list[TagDetection]:
        """Detect markers in a grayscale (H, W) or RGB (H, W, 3) uint8 image."""
        if not isinstance(image, np.ndarray) or image.dtype != np.uint8:
            raise FiducialError("image must be a uint8 array")
        if image.ndim == 3 and image.shape[2] == 3:
            gray = cv2.cvtColor(image, cv2.COLOR_RGB2GRAY)
        elif image.ndim == 2:
            gray = image
        else:
            raise FiducialError(f"image must be H x W or H x W x 3, got shape {image.shape}")
        corners, ids, _ = self._detector.detectMarkers(gray)
        if ids is None:
            return []
        return [
            TagDetection(int(i), np.asarray(c, dtype=np.float64).reshape(4, 2))
            for c, i in zip(corners, ids.ravel(), strict=True)
        ]

    def observe(
        self,
        detections: list[TagDetection],
        intrinsics: Intrinsics,
        distortion: npt.ArrayLike | None = None,
    ) -> tuple[list[TagObservation], list[tuple[int, str]]]:
        """Solve each known tag's pose; returns observations and (id, reason) rejections."""
        k = intrinsics.matrix
        dist = np.zeros(5) if distortion is None else np.asarray(distortion, dtype=np.float64)
        if dist.ndim != 1 or not np.all(np.isfinite(dist)):
            raise FiducialError(f"distortion must be a finite 1-D array, got {dist!r}")
        self._intrinsics = (k, dist)
        observations: list[TagObservation] = []
        rejected: list[tuple[int, str]] = []
        for det in detections:
            tag = self._map.tags.get(det.tag_id)
            if tag is None:
                rejected.append((det.tag_id, "unknown_id"))
                continue
            if np.shape(det.corners) != (4, 2):
                raise FiducialError(
                    f"tag {det.tag_id}: corners must be 4 x 2, got {np.shape(det.corners)}")
            if not np.all(np.isfinite(det.corners)):
                rejected.append((det.tag_id, "non_finite_corners"))
                continue
            sides = np.linalg.norm(det.corners - np.roll(det.corners, -1, axis=0), axis=1)
            if float(sides.min()) < self._config.min_tag_pixels:
                rejected.append((det.tag_id, "too_small"))
                continue
            if _quad_area(det.corners) <= _MIN_QUAD_AREA_RATIO * float(sides.max()) ** 2:
                rejected.append((det.tag_id, "degenerate_corners"))
                continue
            half = tag.size / 2.0
            obj = np.array(
                [[-half, half, 0.0], [half, half, 0.0], [half, -half, 0.0], [-half, -half, 0.0]]
            )
            solved = _solve_square(obj, det.corners, k, dist)
            if solved is None:
                rejected.append((det.tag_id, "pnp_failed"))
                continue
            rvec, tvec, err = solved
            if err > self._config.max_reprojection_error:
                rejected.append((det.tag_id, "reprojection_error"))
                continue
            rot, _ = cv2.Rodrigues(rvec)
            cam_from_tag = make_transform(rot, tvec.ravel())
            if cam_from_tag[2, 3] <= 0.0:
                rejected.append((det.tag_id, "behind_camera"))
                continue
            map_from_base = (
                tag.map_from_tag @ invert_transform(cam_from_tag) @ self._camera_from_base
            )
            corners_map = obj @ tag.map_from_tag[:3, :3].T + tag.map_from_tag[:3, 3]
            observations.append(
                TagObservation(
                    det.tag_id, cam_from_tag, err, map_from_base, det.corners, corners_map
                )
            )
        return observations, rejected

    def fuse(
        self, observations: list[TagObservation]
    ) -> tuple[FloatArray, list[TagObservation], list[tuple[int, str]], float]:
        """Robustly fuse per-tag base estimates.

        Returns:
            ``(map_from_base, used, rejected, mean_error)``.

        Raises:
            FiducialError: When ``observations`` is empty.
        """
        if not observations:
            raise FiducialError("no tag observations to fuse")
        cfg = self._config
        poses = [
            planar_pose(o.map_from_base) if cfg.planar else o.map_from_base for o in observations
        ]
        trans = np.array([p[:3, 3] for p in poses])
        center = np.median(trans, axis=0)
        # Consensus orientation: the estimate closest in translation to the median.
        ref = poses[int(np.argmin(np.linalg.norm(trans - center, axis=1)))]
        used: list[TagObservation] = []
        used_poses: list[FloatArray] = []
        rejected: list[tuple[int, str]] = []
        for obs, pose in zip(observations, poses, strict=True):
            if np.linalg.norm(pose[:3, 3] - center) > cfg.max_translation_disagreement:
                rejected.append((obs.tag_id, "translation_outlier"))
            elif rotation_angle(ref[:3, :3].T @ pose[:3, :3]) > cfg.max_rotation_disagreement:
                rejected.append((obs.tag_id, "rotation_outlier"))
            else:
                used.append(obs)
                used_poses.append(pose)
        if not used:
            raise FiducialError("every tag estimate disagreed with the consensus")
        errors = np.array([o.reprojection_error for o in used])
        weights = 1.0 / (errors**2 + 0.25)
        fused = average_poses(used_poses, weights)
        mean_error = float(np.sum(weights * errors) / np.sum(weights))
        if len(used) >= 2 and self._intrinsics is not None:
            joint = self._joint_refine(used, fused)
            if joint is not None:
                fused, mean_error = joint
        if cfg.solver == "planar":
            fused, mean_error = self._planar_fit(used, planar_pose(fused))
        elif cfg.planar:
            fused = planar_pose(fused)
        return fused, used, rejected, mean_error

    def _planar_fit(
        self, used: list[TagObservation], initial: FloatArray
    ) -> tuple[FloatArray, float]:
        """x, y and heading of the base fitted to the corners of all consistent tags.

        Raises:
            FiducialError: No camera is known yet (:meth:`observe` sets it).
            FitRejectedError: The fit is ill-posed, fails, or its RMS reprojection error
                exceeds ``max_reprojection_error``.
        """
        if self._intrinsics is None:
            raise FiducialError("the planar fit needs the camera that observe() was given")
        obj = np.concatenate([o.corners_map for o in used])
        img = np.concatenate([o.corners for o in used])
        pose, rms = solve_planar_base(obj, img, self._intrinsics, self._base_from_camera, initial)
        if rms > self._config.max_reprojection_error:
            raise FitRejectedError(
                f"planar fit RMS {rms:.2f} px exceeds max_reprojection_error "
                f"{self._config.max_reprojection_error:g} px")
        return pose, rms

    def _joint_refine(
        self, used: list[TagObservation], initial: FloatArray
    ) -> tuple[FloatArray, float] | None:
        """One camera pose fitted to the corners of all consistent tags at once.

        A single small tag fixes its orientation poorly, which the lever arm to the base
        amplifies; several tags seen together constrain the camera far better.
        """
        assert self._intrinsics is not None
        k, dist = self._intrinsics
        obj = np.concatenate([o.corners_map for o in used])
        img = np.concatenate([o.corners for o in used])
        map_from_cam = initial @ self._base_from_camera
        cam_from_map = invert_transform(map_from_cam)
        rvec, _ = cv2.Rodrigues(cam_from_map[:3, :3])
        guess_t = cam_from_map[:3, 3].reshape(3, 1).copy()
        ok, rvec, tvec = cv2.solvePnP(
            obj, img, k, dist, rvec, guess_t, useExtrinsicGuess=True, flags=cv2.SOLVEPNP_ITERATIVE
        )
        if not ok:
            return None
        err = _rms_error(obj, img, (rvec, tvec), (k, dist))
        if not math.isfinite(err) or err > self._config.max_reprojection_error:
            LOG.debug("joint tag refinement rejected (rms %.2f px)", err)
            return None
        rot, _ = cv2.Rodrigues(rvec)
        cam_from_map = make_transform(rot, tvec.ravel())
        return invert_transform(cam_from_map) @ self._camera_from_base, err

    def localize(
        self,
        image: npt.NDArray[np.uint8],
        intrinsics: Intrinsics,
        stamp: float,
        distortion: npt.ArrayLike | None = None,
    ) -> LocalizationResult | None:
        """Estimate ``base_link`` in the map from one image.

        Returns the fresh estimate; when no tag is usable, the last estimate marked ``held``
        with its age (or None if there is none, or it is older than ``max_hold``).
        """
        if not math.isfinite(stamp):
            raise FiducialError(f"stamp must be finite, got {stamp!r}")
        intrinsics.check_image(image.shape, "fiducial image")
        return self.localize_detections(self.detect(image), intrinsics, stamp, distortion)

    def localize_detections(
        self,
        detections: list[TagDetection],
        intrinsics: Intrinsics,
        stamp: float,
        distortion: npt.ArrayLike | None = None,
    ) -> LocalizationResult | None:
        """:meth:`localize` for markers already found in an image (by :meth:`detect` or else).

        Raises:
            FiducialError: A non-finite stamp, non-finite distortion or malformed corners.
        """
        if not math.isfinite(stamp):
            raise FiducialError(f"stamp must be finite, got {stamp!r}")
        observations, rejected = self.observe(detections, intrinsics, distortion)
        if observations:
            try:
                pose, used, outliers, err = self.fuse(observations)
            except FitRejectedError as fit_err:
                LOG.warning("tag fit rejected at %.3f: %s", stamp, fit_err)
                rejected.extend((o.tag_id, "fit_rejected") for o in observations)
            except FiducialError as fuse_err:
                LOG.warning("all %d tag estimates rejected at %.3f: %s", len(observations), stamp,
                            fuse_err)
                rejected.extend((o.tag_id, "no_consensus") for o in observations)
            else:
                result = LocalizationResult(
                    pose, stamp, tuple(o.tag_id for o in used), tuple(rejected + outliers), err
                )
                self._last = result
                return result
        return self.held(stamp, tuple(rejected))

    def held(
        self, stamp: float, rejected: tuple[tuple[int, str], ...] = ()
    ) -> LocalizationResult | None:
        """The last estimate as seen at ``stamp``, or None when absent or too old."""
        last = self._last
        if last is None:
            return None
        age = stamp - last.stamp
        if age > self._config.max_hold or age < 0.0:
            return None
        return LocalizationResult(
            last.map_from_base, last.stamp, (), rejected, last.reprojection_error, True, age
        )


@dataclass(frozen=True)
class SyntheticView:
    """A rendered view of tags, for tests and benchmarks."""

    image: npt.NDArray[np.uint8]
    intrinsics: Intrinsics
    camera_from_tag: dict[int, FloatArray] = field(default_factory=dict)


def render_tags(
    tag_map: FiducialMap,
    map_from_camera: npt.ArrayLike,
    intrinsics: Intrinsics,
    tag_ids: list[int] | None = None,
    *,
    background: int = 128,
    marker_pixels: int = 240,
) -> SyntheticView:
    """Render known tags into a synthetic pinhole view by warping generated marker images.

    Each marker image (with its one-module white quiet zone) is mapped onto the image through
    the homography of its plane; tags behind the camera are skipped.
    """
    dictionary = aruco_dictionary(tag_map.dictionary)
    camera_from_map = invert_transform(map_from_camera)
    image = np.full((intrinsics.height, intrinsics.width), background, dtype=np.uint8)
    k = intrinsics.matrix
    seen: dict[int, FloatArray] = {}
    for tag_id in tag_ids if tag_ids is not None else sorted(tag_map.tags):
        tag = tag_map.tags[tag_id]
        cam_from_tag = camera_from_map @ tag.map_from_tag
        bits = dictionary.markerSize + 2
        marker = cv2.aruco.generateImageMarker(dictionary, tag_id, marker_pixels)
        pad = marker_pixels // bits
        canvas = cv2.copyMakeBorder(marker, pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=255)
        half = tag.size / 2.0
        outer = half * (bits + 2) / bits
        span = marker_pixels + 2 * pad
        corners_tag = np.array(
            [[-outer, outer, 0.0], [outer, outer, 0.0], [outer, -outer, 0.0], [-outer, -outer, 0.0]]
        )
        pts_cam = corners_tag @ cam_from_tag[:3, :3].T + cam_from_tag[:3, 3]
        if np.any(pts_cam[:, 2] <= 0.05):
            continue
        proj = (pts_cam @ k.T)[:, :2] / pts_cam[:, 2:3]
        src = np.array([[0, 0], [span, 0], [span, span], [0, span]], dtype=np.float32) - 0.5
        h = cv2.getPerspectiveTransform(src, proj.astype(np.float32))
        warped = cv2.warpPerspective(
            canvas, h, (intrinsics.width, intrinsics.height), flags=cv2.INTER_LINEAR
        )
        cover = cv2.warpPerspective(
            np.full_like(canvas, 255),
            h,
            (intrinsics.width, intrinsics.height),
            flags=cv2.INTER_LINEAR,
        )
        alpha = cover.astype(np.float32) / 255.0
        image = (alpha * warped + (1.0 - alpha) * image).astype(np.uint8)
        seen[tag_id] = cam_from_tag
    return SyntheticView(image, intrinsics, seen)
