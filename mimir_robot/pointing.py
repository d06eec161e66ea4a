"""3D pointing: from a part's mask in the current camera image to an end-effector target.

The executor receives a planner step such as "open cabinet_3, grasp the handle" and has to turn
it into hand targets without any knowledge of the simulator. Perception (or a VLM) gives a mask
of the part in the latest image of one camera, perhaps with a pixel it pointed at; this module
turns that into a 3D target. It is a pure core: numpy, OpenCV and the project's own camera and
transform helpers, no ROS.

Pipeline of :func:`point_at`:

1. **Freshness.** A frame older than ``max_age_s`` (or stamped ahead of the clock) describes a
   scene the arm may already have changed; it is refused with :class:`StaleFrameError`.
2. **Pixel.** :func:`select_pixel` either checks a given pixel (it must lie in the image and on,
   or within a few pixels of, the mask; a near miss snaps onto the mask) or picks the mask pixel
   deepest inside the mask (largest distance to the mask's border) among pixels with valid depth.
   The mean or median pixel of a thin curved handle (a C or an L) can fall into the gap beside
   it, and a pixel on the mask's rim carries depth mixed with the background; the interior
   maximum is on the part and as far from its rim as possible. Along a straight bar every pixel
   of the centre line is equally deep inside, so among those "ridge" pixels the one closest to
   the mask's centroid wins.
3. **Back-projection.** The depth at the pixel is the median of the valid depths of the *mask*
   pixels in a small window around it (one noisy or missing reading does not move it), and the
   pixel is back-projected with that depth through the pinhole intrinsics into the camera
   optical frame (REP-103: z forward, x right, y down), then into the robot base frame.
4. **Surface normal.** A plane is fitted (RANSAC on three-point samples, then a least-squares
   fit by SVD of the inliers) to the 3D points of a square window around the pixel, using every
   valid pixel of the window and not only the mask. A handle is a thin bar standing off a door:
   its own points barely define a plane, while the door around it does, and the door's normal
   is the direction the hand should come from. The consensus step keeps the dominant surface
   (usually the door), so the bar's own points do not tilt the fit. The normal points toward
   the camera.
5. **Workspace.** The point must lie in an axis-aligned box given in the base frame
   (:class:`WorkspaceBox`), else :class:`OutsideWorkspaceError`.
6. **Grasp.** The hand approaches along ``-normal``. The part's long axis comes from a principal
   component analysis of the part's own 3D points near the target, projected into the plane
   perpendicular to the approach; the fingers close across it (a vertical bar is squeezed
   horizontally). A part without a clear long axis (a knob) gets the closing direction from a
   hint. The pre-grasp pose is the grasp pose backed off along the approach.

Tool frame convention (every pose returned here): z is the approach direction (out of the palm,
between the fingers, toward the part); the fingers close along y by default, or along x when
``closing_axis="x"`` is asked for (the simulator's hand and
:class:`mimir_robot.profile.RobotProfile` use x, so the executor should pass its profile's
``finger_axis``); the third axis completes a right-handed frame. Quaternions are (x, y, z, w)
with ``w >= 0``, positions in metres, all in the frame of ``base_from_camera``'s parent (the
robot base).

:func:`fit_front_face` and :func:`articulation_guess` estimate how a door or drawer front moves
from its mask and the handle's position. That is a guess only: the executor checks it while it
moves (the arm follows the arc or line in small steps and stops when the hand lags its target).

Errors are typed: every failure a caller can act on raises a subclass of :class:`PointingError`
with a short ``code``. Malformed inputs (shapes that disagree, a non-finite transform, bad
intrinsics) raise :class:`PointingInputError`, which is also a ``ValueError``: they are
programming or wiring faults, not facts about the scene.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import cv2
import numpy as np
import numpy.typing as npt

from mimir.transforms import compose, matrix_to_quaternion, quaternion_to_matrix
from mimir_perception.camera import Intrinsics, as_transform, transform_points
from mimir_perception.deprojection import deproject_pixels
from mimir_perception.errors import PerceptionError

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Vector3 = tuple[float, float, float]
Quaternion = tuple[float, float, float, float]
Pixel = tuple[int, int]
ClosingAxis = Literal["x", "y"]

# --- Named defaults -------------------------------------------------------------------------------
DEFAULT_MIN_MASK_PIXELS = 20
"""Fewest mask pixels a part needs to be pointed at (pixels)."""
DEFAULT_PIXEL_TOLERANCE_PX = 3.0
"""How far a given pixel may lie from the mask and still be snapped onto it (pixels)."""
DEFAULT_RIDGE_TOLERANCE_PX = 1.0
"""Pixels whose distance to the mask border is within this of the maximum form the ridge (px)."""
DEFAULT_MIN_DEPTH_M = 0.1
"""Nearest valid depth reading (m)."""
DEFAULT_MAX_DEPTH_M = 10.0
"""Farthest valid depth reading (m)."""
DEFAULT_FINGER_AXIS_HINT: Vector3 = (0.0, 1.0, 0.0)
"""Preferred finger closing direction in the base frame (unitless): base +y, i.e. horizontal."""
DEFAULT_EDGE_FRACTION = 0.5
"""Handle offset from the face centre, as a fraction of the half width, that counts as "near a
vertical edge" (unitless; 0.5 = the outer quarter of the face on either side)."""
DEFAULT_CENTRE_FRACTION = 0.25
"""Handle offset, as a fraction of the half width, that still counts as centred (unitless)."""
DEFAULT_FACE_MARGIN_M = 0.05
"""How far outside the fitted face a handle may lie and still belong to it (m)."""

_EPS = 1e-9
_MIN_AXIS_NORM = 0.1  # sine of the smallest angle two directions may make to define a third
_MIN_UP_NORM = 0.3  # below this, base z is too close to a face's normal to define its "up"
_SIGN_PREFERENCES: tuple[Vector3, ...] = ((0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0))


# --- Errors ---------------------------------------------------------------------------------------
class PointingError(Exception):
    """Base class of every error raised by the pointing core; ``code`` names the reason."""

    code: ClassVar[str] = "pointing_error"


class PointingInputError(PointingError, ValueError):
    """Malformed input: shapes disagree, a dtype is unsupported, a transform is not finite."""

    code: ClassVar[str] = "bad_input"


class NoTargetPixelError(PointingError):
    """No pixel to engage: empty or too small mask, a given pixel outside the image or off it."""

    code: ClassVar[str] = "no_target_pixel"


class NoDepthError(PointingError):
    """Too few valid depth readings (zero, NaN, inf, out of range) around the chosen pixel."""

    code: ClassVar[str] = "no_depth"


class OutsideWorkspaceError(PointingError):
    """The target lies outside the workspace box in the base frame."""

    code: ClassVar[str] = "outside_workspace"


class StaleFrameError(PointingError):
    """The frame is too old, or stamped too far ahead of the clock."""

    code: ClassVar[str] = "stale_frame"


# --- Settings and results -------------------------------------------------------------------------
@dataclass(frozen=True)
class PointingConfig:
    """Settings of :func:`point_at` (and of :func:`fit_front_face`).

    Attributes:
        max_age_s: Oldest acceptable frame, relative to ``now`` (s).
        max_future_s: How far a frame may be stamped ahead of ``now`` (clock jitter) (s).
        min_mask_pixels: Fewest pixels a mask needs (pixels).
        pixel_tolerance_px: How far a given pixel may lie from the mask (pixels).
        ridge_tolerance_px: Slack on the largest distance to the mask border when collecting
            the mask's centre-line pixels (pixels).
        min_depth_m: Nearest valid depth (m).
        max_depth_m: Farthest valid depth (m).
        depth_window_px: Half size of the window whose mask pixels give the median depth
            (pixels; the window is ``2 * depth_window_px + 1`` wide).
        min_depth_samples: Fewest valid mask depths the median needs (count).
        normal_radius_m: Half size of the window of the normal fit, measured on the surface
            at the target's depth (m); converted to pixels with the focal length.
        normal_min_radius_px: Smallest half size of that window (pixels).
        normal_max_radius_px: Largest half size of that window (pixels).
        min_plane_points: Fewest inliers a plane fit needs (count).
        plane_inlier_m: Largest distance of an inlier from a plane (m).
        ransac_iterations: Three-point samples drawn per plane fit (count).
        ransac_seed: Seed of those samples, so results repeat exactly (integer).
        max_fit_points: Points used per fit at most; larger sets are thinned evenly (count).
        long_axis_radius_m: Only part points within this distance of the target shape its long
            axis, so a curved part gets its local direction (m).
        min_elongation: Ratio of the spreads (standard deviations) along the first and second
            principal axes above which a part has a long axis (unitless).
        grasp_depth_m: How far past the surface point, along the approach, the tool centre
            goes (m; 0 puts it on the surface).
        pregrasp_backoff_m: Distance of the pre-grasp pose from the grasp pose, backwards along
            the approach (m).
        closing_axis: Tool axis the fingers close along, ``"y"`` (default) or ``"x"``.
        face_erode_px: Erosion radius of a face mask before its plane fit (pixels).
        extent_trim_pct: Percent of points ignored at each end when measuring a face (%).
    """

    max_age_s: float = 0.5
    max_future_s: float = 0.05
    min_mask_pixels: int = DEFAULT_MIN_MASK_PIXELS
    pixel_tolerance_px: float = DEFAULT_PIXEL_TOLERANCE_PX
    ridge_tolerance_px: float = DEFAULT_RIDGE_TOLERANCE_PX
    min_depth_m: float = DEFAULT_MIN_DEPTH_M
    max_depth_m: float = DEFAULT_MAX_DEPTH_M
    depth_window_px: int = 3
    min_depth_samples: int = 3
    normal_radius_m: float = 0.04
    normal_min_radius_px: int = 4
    normal_max_radius_px: int = 60
    min_plane_points: int = 12
    plane_inlier_m: float = 0.005
    ransac_iterations: int = 64
    ransac_seed: int = 0
    max_fit_points: int = 3000
    long_axis_radius_m: float = 0.08
    min_elongation: float = 1.5
    grasp_depth_m: float = 0.0
    pregrasp_backoff_m: float = 0.10
    closing_axis: ClosingAxis = "y"
    face_erode_px: int = 2
    extent_trim_pct: float = 0.5

    def __post_init__(self) -> None:
        positive = ("max_age_s", "pixel_tolerance_px", "max_depth_m", "normal_radius_m",
                    "plane_inlier_m", "long_axis_radius_m", "min_elongation")
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise PointingInputError(f"{name} must be finite and positive, got {value!r}")
        non_negative = ("max_future_s", "ridge_tolerance_px", "min_depth_m", "grasp_depth_m",
                        "pregrasp_backoff_m", "extent_trim_pct")
        for name in non_negative:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise PointingInputError(f"{name} must be finite and >= 0, got {value!r}")
        if self.min_depth_m >= self.max_depth_m:
            raise PointingInputError("min_depth_m must lie below max_depth_m")
        if self.min_mask_pixels < 1 or self.min_depth_samples < 1 or self.depth_window_px < 0:
            raise PointingInputError("min_mask_pixels, min_depth_samples >= 1, window >= 0")
        if not 1 <= self.normal_min_radius_px <= self.normal_max_radius_px:
            raise PointingInputError("need 1 <= normal_min_radius_px <= normal_max_radius_px")
        if self.min_plane_points < 3 or self.ransac_iterations < 1 or self.max_fit_points < 3:
            raise PointingInputError("min_plane_points, max_fit_points >= 3, iterations >= 1")
        if self.closing_axis not in ("x", "y"):
            raise PointingInputError(f"closing_axis must be 'x' or 'y', got {self.closing_axis!r}")
        if self.face_erode_px < 0 or self.extent_trim_pct >= 50.0:
            raise PointingInputError("face_erode_px must be >= 0 and extent_trim_pct < 50")


DEFAULT_CONFIG = PointingConfig()


@dataclass(frozen=True)
class WorkspaceBox:
    """Axis-aligned box in the base frame that targets must lie in (corners in m, inclusive)."""

    min_corner: Vector3
    max_corner: Vector3

    def __post_init__(self) -> None:
        lo = _vector3(self.min_corner, "workspace min_corner")
        hi = _vector3(self.max_corner, "workspace max_corner")
        if np.any(lo > hi):
            raise PointingInputError(f"workspace min_corner {lo} exceeds max_corner {hi}")
        object.__setattr__(self, "min_corner", _tuple3(lo))
        object.__setattr__(self, "max_corner", _tuple3(hi))

    def contains(self, point: npt.ArrayLike) -> bool:
        """Whether a base-frame point lies in the box (borders included)."""
        p = np.asarray(point, dtype=np.float64).reshape(3)
        return bool(
            np.all(np.isfinite(p))
            and np.all(p >= np.asarray(self.min_corner))
            and np.all(p <= np.asarray(self.max_corner))
        )


@dataclass(frozen=True)
class Pose:
    """A tool pose: position (m) and orientation quaternion (x, y, z, w; w >= 0)."""

    position: Vector3
    quat_xyzw: Quaternion

    def rotation(self) -> FloatArray:
        """The 3x3 rotation; its columns are the tool's x, y and z axes."""
        return quaternion_to_matrix(self.quat_xyzw)

    def matrix(self) -> FloatArray:
        """The 4x4 homogeneous matrix of the pose."""
        return compose(self.position, self.quat_xyzw)

    @property
    def approach(self) -> FloatArray:
        """Approach direction (the tool's z axis)."""
        return self.rotation()[:, 2]


@dataclass(frozen=True)
class BackProjection:
    """A pixel lifted into 3D.

    Attributes:
        point_camera: The point in the camera optical frame (m).
        point_base: The same point in the base frame (m).
        depth_m: Median depth used (m).
        n_samples: Valid mask depths behind the median (count).
    """

    point_camera: Vector3
    point_base: Vector3
    depth_m: float
    n_samples: int


@dataclass(frozen=True)
class SurfaceFit:
    """A local plane: unit normal in the base frame, toward the camera, and its inlier count."""

    normal_base: Vector3
    n_inliers: int


@dataclass(frozen=True)
class PointingResult:
    """Everything :func:`point_at` found for one part.

    Attributes:
        pixel: Engaged pixel (u = column, v = row).
        point_base: Surface point at that pixel in the base frame (m).
        normal_base: Unit surface normal there (base frame), toward the camera.
        grasp: Tool pose at the grasp (see the module docstring for the tool frame).
        pregrasp: Tool pose backed off from the grasp along the approach.
        long_axis: Unit long axis of the part near the target (base frame), perpendicular to
            the approach; None when the part has no clear long axis.
        n_points: Part (mask) points with valid depth near the target that shaped the long axis.
        n_depth_samples: Mask depths behind the median depth of the point.
        n_normal_inliers: Points on the fitted local plane.
        stamp: Stamp of the frame (s).
    """

    pixel: Pixel
    point_base: Vector3
    normal_base: Vector3
    grasp: Pose
    pregrasp: Pose
    long_axis: Vector3 | None
    n_points: int
    n_depth_samples: int
    n_normal_inliers: int
    stamp: float


@dataclass(frozen=True)
class FrontFace:
    """The plane and extents of a fixture's front (a door, a drawer front), in the base frame.

    Attributes:
        center: Centre of the face's rectangle, on the plane (m).
        normal: Unit normal toward the camera.
        up: Unit in-plane "up": base z projected into the plane (image up for a face seen
            nearly from above or below).
        right: Unit in-plane "right" as seen from the camera, ``up x normal``.
        width_m: Extent along ``right`` (m).
        height_m: Extent along ``up`` (m).
        n_points: Points on the fitted plane (count).
    """

    center: Vector3
    normal: Vector3
    up: Vector3
    right: Vector3
    width_m: float
    height_m: float
    n_points: int

    def edge_point(self, side: Literal["left", "right"], height_m: float = 0.0) -> FloatArray:
        """Point on the left or right vertical edge, ``height_m`` above the centre (m)."""
        sign = 1.0 if side == "right" else -1.0
        return np.asarray(
            np.asarray(self.center)
            + sign * 0.5 * self.width_m * np.asarray(self.right)
            + height_m * np.asarray(self.up),
            dtype=np.float64,
        )


@dataclass(frozen=True)
class ArticulationGuess:
    """How a front probably moves; a guess the executor verifies while moving.

    Attributes:
        kind: ``"revolute"`` (a door on a vertical hinge), ``"prismatic"`` (a drawer) or
            ``"unknown"``.
        axis: Revolute: the hinge axis, signed so that a positive rotation swings the handle
            toward the camera. Prismatic: the pull direction (the face normal). Unknown: the
            face normal.
        origin: Revolute: the point of the hinge line at the handle's height. Otherwise the
            handle point (m, base frame).
        radius_m: Revolute: distance of the handle from the hinge line (m); 0 otherwise.
        hinge_side: Side of the face (as seen from the camera) carrying the hinge, or None.
        handle_offset: Handle position across the face: -1 at the left edge, 0 at the centre,
            +1 at the right edge (unitless).
        reason: One sentence on why this guess was made.
    """

    kind: Literal["revolute", "prismatic", "unknown"]
    axis: Vector3
    origin: Vector3
    radius_m: float
    hinge_side: Literal["left", "right"] | None
    handle_offset: float
    reason: str


# --- Small helpers --------------------------------------------------------------------------------
def _tuple3(v: npt.ArrayLike) -> Vector3:
    a = np.asarray(v, dtype=np.float64).reshape(3)
    return (float(a[0]), float(a[1]), float(a[2]))


def _vector3(value: object, name: str) -> FloatArray:
    """``value`` as a finite 3-vector, else :class:`PointingInputError`."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise PointingInputError(f"{name} is not numeric: {value!r}") from err
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise PointingInputError(f"{name} must be three finite numbers, got {value!r}")
    return arr


def _unit(value: object, name: str) -> FloatArray:
    v = _vector3(value, name)
    norm = float(np.linalg.norm(v))
    if norm < _EPS:
        raise PointingInputError(f"{name} has zero length")
    return v / norm


def _orthogonal_part(v: FloatArray, axis: FloatArray) -> FloatArray:
    """Component of ``v`` perpendicular to the unit vector ``axis``."""
    return np.asarray(v - axis * float(v @ axis), dtype=np.float64)


def _fix_sign(v: FloatArray, preferred: Sequence[FloatArray]) -> FloatArray:
    """``v`` or ``-v``: positive along the first preferred direction it is not perpendicular to."""
    for p in preferred:
        dot = float(v @ p)
        if abs(dot) > 1e-6:
            return v if dot > 0.0 else -v
    return v


def _as_mask(mask: npt.ArrayLike) -> BoolArray:
    arr = np.asarray(mask)
    if arr.ndim != 2 or arr.size == 0:
        raise PointingInputError(f"mask must be a non-empty 2D array, got shape {arr.shape}")
    if arr.dtype == np.bool_:
        return arr
    if arr.dtype.kind not in "uif":
        raise PointingInputError(f"mask must be boolean or numeric, got {arr.dtype}")
    return np.asarray(arr != 0, dtype=np.bool_)


def _as_depth(depth: npt.ArrayLike) -> FloatArray:
    """Depth in metres as float64; uint16 input is read as millimetres (0 = no reading)."""
    arr = np.asarray(depth)
    if arr.ndim != 2 or arr.size == 0:
        raise PointingInputError(f"depth must be a non-empty 2D array, got shape {arr.shape}")
    if arr.dtype == np.uint16:
        return arr.astype(np.float64) / 1000.0
    if arr.dtype.kind != "f":
        raise PointingInputError(
            f"depth must be float metres or uint16 millimetres, got {arr.dtype}"
        )
    return arr.astype(np.float64, copy=False)


def _valid_depth(depth: FloatArray, lo: float, hi: float) -> BoolArray:
    with np.errstate(invalid="ignore"):
        return np.asarray(np.isfinite(depth) & (depth >= lo) & (depth <= hi), dtype=np.bool_)


def _same_shape(mask: BoolArray, depth: FloatArray) -> None:
    if mask.shape != depth.shape:
        raise PointingInputError(
            f"mask is {mask.shape[1]}x{mask.shape[0]} but depth is "
            f"{depth.shape[1]}x{depth.shape[0]} (width x height)"
        )


def _check_camera(
    shape: tuple[int, ...], intrinsics: Intrinsics, base_from_camera: npt.ArrayLike
) -> FloatArray:
    """Check the intrinsics against the image and return the validated 4x4 transform."""
    if not isinstance(intrinsics, Intrinsics):
        raise PointingInputError(f"intrinsics must be an Intrinsics, got {type(intrinsics)}")
    try:
        intrinsics.check_image(shape, "depth")
        return as_transform(base_from_camera, "base_from_camera")
    except PerceptionError as err:
        raise PointingInputError(str(err)) from err


def _window(center: int, radius: int, size: int) -> slice:
    return slice(max(0, center - radius), min(size, center + radius + 1))


def _lift(
    rows: npt.NDArray[np.intp], cols: npt.NDArray[np.intp], z: FloatArray, intrinsics: Intrinsics
) -> FloatArray:
    """(N, 3) camera-frame points of pixels (row, column) with valid depths ``z`` (m)."""
    if rows.size == 0:
        return np.zeros((0, 3), dtype=np.float64)
    uv = np.stack([cols, rows], axis=1).astype(np.float64)
    return deproject_pixels(uv, z, intrinsics, np.eye(4))


def _thin(count: int, limit: int) -> npt.NDArray[np.intp]:
    """Indices of at most ``limit`` items spread evenly over ``count``."""
    if count <= limit:
        return np.arange(count, dtype=np.intp)
    return np.asarray((np.arange(limit, dtype=np.int64) * count) // limit, dtype=np.intp)


@dataclass(frozen=True)
class _Frame:
    """One validated camera frame: part mask, depth (m), intrinsics and base_from_camera."""

    mask: BoolArray
    depth: FloatArray
    intrinsics: Intrinsics
    pose: FloatArray

    @classmethod
    def checked(
        cls,
        mask: npt.ArrayLike,
        depth: npt.ArrayLike,
        intrinsics: Intrinsics,
        base_from_camera: npt.ArrayLike,
    ) -> _Frame:
        m = _as_mask(mask)
        d = _as_depth(depth)
        _same_shape(m, d)
        return cls(m, d, intrinsics, _check_camera(d.shape, intrinsics, base_from_camera))

    def valid(self, cfg: PointingConfig) -> BoolArray:
        """Where the depth is a usable reading."""
        return _valid_depth(self.depth, cfg.min_depth_m, cfg.max_depth_m)


# --- Pixel selection ------------------------------------------------------------------------------
def select_pixel(
    mask: npt.ArrayLike,
    depth: npt.ArrayLike,
    *,
    pixel: Sequence[float] | None = None,
    min_pixels: int = DEFAULT_MIN_MASK_PIXELS,
    pixel_tolerance_px: float = DEFAULT_PIXEL_TOLERANCE_PX,
    ridge_tolerance_px: float = DEFAULT_RIDGE_TOLERANCE_PX,
    min_depth_m: float = DEFAULT_MIN_DEPTH_M,
    max_depth_m: float = DEFAULT_MAX_DEPTH_M,
) -> Pixel:
    """The pixel (u = column, v = row) to engage on a part's mask.

    Args:
        mask: (H, W) part mask (boolean, or numeric with non-zero = part).
        depth: (H, W) registered depth (float m, NaN/inf/0 = no reading; or uint16 mm).
        pixel: A pixel (u, v) chosen elsewhere (a VLM's answer); rounded to the nearest pixel,
            it must lie in the image and on the mask or within ``pixel_tolerance_px`` of it
            (then it snaps to the nearest mask pixel). Its depth is not checked here.
        min_pixels: Fewest mask pixels (pixels).
        pixel_tolerance_px: Largest distance of ``pixel`` from the mask (pixels).
        ridge_tolerance_px: Slack on the interior distance defining the centre line (pixels).
        min_depth_m: Nearest valid depth (m).
        max_depth_m: Farthest valid depth (m).

    Without ``pixel`` the result is the mask pixel farthest from the mask's border among those
    with valid depth (the image border counts as border); ties along a centre line go to the
    pixel nearest the mask's centroid. Unlike a mean or median, this always lies on the part,
    also for thin curved shapes, and away from the rim where depth mixes with the background.

    Raises:
        PointingInputError: Shapes differ or an array is malformed.
        NoTargetPixelError: The mask is empty or too small, or ``pixel`` is outside the image
            or too far from the mask.
        NoDepthError: No mask pixel has valid depth (only without ``pixel``).
    """
    m = _as_mask(mask)
    d = _as_depth(depth)
    _same_shape(m, d)
    count = int(np.count_nonzero(m))
    if count == 0:
        raise NoTargetPixelError("the part's mask is empty")
    if count < min_pixels:
        raise NoTargetPixelError(f"the part's mask has {count} pixels (fewer than {min_pixels})")
    if pixel is not None:
        return _snap_pixel(m, pixel, pixel_tolerance_px)
    valid = m & _valid_depth(d, min_depth_m, max_depth_m)
    if not valid.any():
        raise NoDepthError("no pixel of the part's mask has a valid depth reading")
    padded = np.pad(m.astype(np.uint8), 1)  # the image border is the mask's border too
    inside = cv2.distanceTransform(padded, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)[1:-1, 1:-1]
    score = np.where(valid, inside, -1.0)
    best = float(score.max())
    rows, cols = np.nonzero(score >= best - ridge_tolerance_px)
    all_rows, all_cols = np.nonzero(m)
    centre_v, centre_u = float(all_rows.mean()), float(all_cols.mean())
    k = int(np.argmin((cols - centre_u) ** 2 + (rows - centre_v) ** 2))
    return (int(cols[k]), int(rows[k]))


def _snap_pixel(mask: BoolArray, pixel: Sequence[float], tolerance_px: float) -> Pixel:
    try:
        u, v = (float(x) for x in pixel)
    except (TypeError, ValueError) as err:
        raise NoTargetPixelError(f"pixel must be two numbers (u, v), got {pixel!r}") from err
    if not (math.isfinite(u) and math.isfinite(v)):
        raise NoTargetPixelError(f"pixel must be finite, got {pixel!r}")
    height, width = mask.shape
    ui, vi = math.floor(u + 0.5), math.floor(v + 0.5)
    if not (0 <= ui < width and 0 <= vi < height):
        raise NoTargetPixelError(f"pixel ({u:g}, {v:g}) lies outside the {width}x{height} image")
    if mask[vi, ui]:
        return (ui, vi)
    radius = math.ceil(tolerance_px)
    rs, cs = _window(vi, radius, height), _window(ui, radius, width)
    rows, cols = np.nonzero(mask[rs, cs])
    if rows.size:
        rows = rows + rs.start
        cols = cols + cs.start
        dist2 = (rows - vi) ** 2 + (cols - ui) ** 2
        k = int(np.argmin(dist2))
        if math.sqrt(float(dist2[k])) <= tolerance_px:
            return (int(cols[k]), int(rows[k]))
    raise NoTargetPixelError(
        f"pixel ({u:g}, {v:g}) lies more than {tolerance_px:g} px from the part's mask"
    )


# --- Back-projection and local geometry -----------------------------------------------------------
def back_project(
    pixel: Pixel,
    mask: npt.ArrayLike,
    depth: npt.ArrayLike,
    intrinsics: Intrinsics,
    base_from_camera: npt.ArrayLike,
    *,
    config: PointingConfig = DEFAULT_CONFIG,
) -> BackProjection:
    """Lift a pixel to 3D with the median depth of the valid mask pixels around it.

    The window is ``2 * config.depth_window_px + 1`` pixels wide; ``base_from_camera`` maps
    camera optical-frame points into the base frame (4x4).

    Raises:
        PointingInputError: Malformed inputs (shapes, intrinsics, transform).
        NoTargetPixelError: The pixel lies outside the image.
        NoDepthError: Fewer than ``config.min_depth_samples`` valid depths in the window.
    """
    return _back_project(_Frame.checked(mask, depth, intrinsics, base_from_camera), pixel, config)


def _back_project(frame: _Frame, pixel: Pixel, cfg: PointingConfig) -> BackProjection:
    u, v = pixel
    mask, depth = frame.mask, frame.depth
    height, width = depth.shape
    if not (0 <= u < width and 0 <= v < height):
        raise NoTargetPixelError(f"pixel ({u}, {v}) lies outside the {width}x{height} image")
    rs = _window(v, cfg.depth_window_px, height)
    cs = _window(u, cfg.depth_window_px, width)
    patch = depth[rs, cs]
    values = patch[mask[rs, cs] & _valid_depth(patch, cfg.min_depth_m, cfg.max_depth_m)]
    if values.size < cfg.min_depth_samples:
        raise NoDepthError(
            f"{values.size} valid depth readings on the part around pixel ({u}, {v}) "
            f"(need {cfg.min_depth_samples}; zero, NaN, inf and readings outside "
            f"{cfg.min_depth_m:g}..{cfg.max_depth_m:g} m do not count)"
        )
    z = float(np.median(values))
    cam = deproject_pixels([(u, v)], [z], frame.intrinsics, np.eye(4))[0]
    base = transform_points(frame.pose, cam[None, :])[0]
    return BackProjection(_tuple3(cam), _tuple3(base), z, int(values.size))


def _fit_plane(points: FloatArray, cfg: PointingConfig) -> tuple[FloatArray, FloatArray, int]:
    """Dominant plane of (N, 3) points: (centroid, unit normal, inlier count).

    RANSAC over three-point samples (seeded, so repeatable) finds the plane with most points
    within ``plane_inlier_m``; a least-squares fit (SVD) of its inliers refines it, twice.

    Raises:
        NoDepthError: Too few points or inliers, or the inliers lie on a line.
    """
    if points.shape[0] < cfg.min_plane_points:
        raise NoDepthError(
            f"{points.shape[0]} valid 3D points for a plane fit (need {cfg.min_plane_points})"
        )
    pts = points[_thin(points.shape[0], cfg.max_fit_points)]
    rng = np.random.default_rng(cfg.ransac_seed)
    picks = rng.integers(0, pts.shape[0], size=(cfg.ransac_iterations, 3))
    p0, p1, p2 = pts[picks[:, 0]], pts[picks[:, 1]], pts[picks[:, 2]]
    normals = np.cross(p1 - p0, p2 - p0)
    norms = np.linalg.norm(normals, axis=1)
    good = norms > 1e-12
    if good.any():
        normals = normals[good] / norms[good, None]
        offsets = np.einsum("ij,ij->i", normals, p0[good])
        counts = (np.abs(pts @ normals.T - offsets) <= cfg.plane_inlier_m).sum(axis=0)
        best = int(np.argmax(counts))
        inliers = np.abs(pts @ normals[best] - offsets[best]) <= cfg.plane_inlier_m
    else:
        inliers = np.ones(pts.shape[0], dtype=np.bool_)
    centroid, normal = pts.mean(axis=0), np.zeros(3)
    for _ in range(2):
        if int(inliers.sum()) < cfg.min_plane_points:
            raise NoDepthError(
                f"{int(inliers.sum())} points on the dominant plane (need {cfg.min_plane_points})"
            )
        chosen = pts[inliers]
        centroid = chosen.mean(axis=0)
        _, sing, vt = np.linalg.svd(chosen - centroid, full_matrices=False)
        if sing[1] <= 1e-6 * max(float(sing[0]), _EPS):
            raise NoDepthError("the valid 3D points lie on a line; no plane to fit")
        normal = vt[2]
        inliers = np.abs((pts - centroid) @ normal) <= cfg.plane_inlier_m
    return centroid, normal / np.linalg.norm(normal), int(inliers.sum())


def surface_normal(
    pixel: Pixel,
    depth: npt.ArrayLike,
    intrinsics: Intrinsics,
    base_from_camera: npt.ArrayLike,
    *,
    depth_m: float | None = None,
    config: PointingConfig = DEFAULT_CONFIG,
) -> SurfaceFit:
    """Normal of the dominant surface in a window around a pixel, toward the camera.

    The window's half size is ``config.normal_radius_m`` on the surface at ``depth_m`` (the
    median valid depth of the window when None), converted to pixels and clamped. Every valid
    pixel of the window is used, not only the part's: a thin handle takes the normal of the door
    it stands on (see the module docstring).

    Raises:
        PointingInputError: Malformed inputs.
        NoDepthError: Too few valid points, or no plane among them.
    """
    d = _as_depth(depth)
    frame = _Frame.checked(np.ones(d.shape, np.bool_), d, intrinsics, base_from_camera)
    return _surface_normal(frame, pixel, depth_m, config)


def _surface_normal(
    frame: _Frame, pixel: Pixel, depth_m: float | None, cfg: PointingConfig
) -> SurfaceFit:
    u, v = pixel
    depth, intrinsics = frame.depth, frame.intrinsics
    height, width = depth.shape
    focal = 0.5 * (intrinsics.fx + intrinsics.fy)
    if depth_m is None:
        rs = _window(v, cfg.normal_min_radius_px, height)
        cs = _window(u, cfg.normal_min_radius_px, width)
        patch = depth[rs, cs]
        values = patch[_valid_depth(patch, cfg.min_depth_m, cfg.max_depth_m)]
        if values.size == 0:
            raise NoDepthError(f"no valid depth around pixel ({u}, {v}) for the normal")
        depth_m = float(np.median(values))
    radius = math.ceil(focal * cfg.normal_radius_m / max(depth_m, _EPS))
    radius = min(max(radius, cfg.normal_min_radius_px), cfg.normal_max_radius_px)
    rs, cs = _window(v, radius, height), _window(u, radius, width)
    patch = depth[rs, cs]
    rows, cols = np.nonzero(_valid_depth(patch, cfg.min_depth_m, cfg.max_depth_m))
    z = patch[rows, cols]
    points = _lift(rows + rs.start, cols + cs.start, z, intrinsics)
    centroid, normal, inliers = _fit_plane(points, cfg)
    if float(normal @ centroid) > 0.0:  # the camera sits at the origin of its frame
        normal = -normal
    normal_base = frame.pose[:3, :3] @ normal
    return SurfaceFit(_tuple3(normal_base / np.linalg.norm(normal_base)), inliers)


def part_long_axis(
    points: npt.ArrayLike, approach: npt.ArrayLike, *, min_elongation: float = 1.5
) -> FloatArray | None:
    """Long axis of a part's points, perpendicular to the approach; None for a compact part.

    The points (N, 3) are projected into the plane perpendicular to ``approach`` and their
    principal axes computed; the first is returned (unit, sign made positive along base z, else
    y, else x) when its spread (standard deviation) is at least ``min_elongation`` (unitless)
    times the second's.
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    z = _unit(approach, "approach")
    if pts.shape[0] < 3 or not np.all(np.isfinite(pts)):
        return None
    centred = pts - pts.mean(axis=0)
    flat = centred - np.outer(centred @ z, z)
    values, vectors = np.linalg.eigh(flat.T @ flat / pts.shape[0])
    first, second = float(values[2]), float(values[1])
    if first <= _EPS or first < (min_elongation**2) * max(second, 0.0):
        return None
    axis = _orthogonal_part(vectors[:, 2], z)
    axis /= np.linalg.norm(axis)
    return _fix_sign(axis, [np.asarray(p) for p in _SIGN_PREFERENCES])


def grasp_pose(
    point: npt.ArrayLike,
    normal: npt.ArrayLike,
    finger_axis_hint: npt.ArrayLike = DEFAULT_FINGER_AXIS_HINT,
    *,
    long_axis: npt.ArrayLike | None = None,
    depth_m: float = 0.0,
    closing_axis: ClosingAxis = "y",
) -> Pose:
    """Tool pose grasping a surface point, approaching against its normal.

    Tool frame: z = approach = ``-normal``; the fingers close along y (``closing_axis="y"``) or
    x (``"x"``); the frame is right-handed. With ``long_axis`` (not along the approach), the
    fingers close across it, in the plane perpendicular to the approach; otherwise along
    ``finger_axis_hint`` projected into that plane. The closing direction's sign follows the
    hint (a parallel gripper is symmetric; this only keeps the wrist from flipping), then base
    z, y, x where the hint is perpendicular. The position is ``point + depth_m * approach``.

    Args:
        point: Surface point (m, base frame).
        normal: Surface normal toward the tool's side (unitless, normalised here).
        finger_axis_hint: Preferred closing direction (unitless, base frame).
        long_axis: Long axis of the part (unitless), or None.
        depth_m: How far past the surface the tool centre goes (m).
        closing_axis: Tool axis the fingers close along.

    Raises:
        PointingInputError: A vector is not finite or zero, or ``closing_axis`` is unknown.
    """
    p = _vector3(point, "point")
    z = -_unit(normal, "normal")
    hint = _unit(finger_axis_hint, "finger_axis_hint")
    if not math.isfinite(depth_m):
        raise PointingInputError(f"depth_m must be finite, got {depth_m!r}")
    if closing_axis not in ("x", "y"):
        raise PointingInputError(f"closing_axis must be 'x' or 'y', got {closing_axis!r}")
    closing: FloatArray | None = None
    if long_axis is not None:
        along = _orthogonal_part(_unit(long_axis, "long_axis"), z)
        if np.linalg.norm(along) >= _MIN_AXIS_NORM:
            closing = np.cross(z, along / np.linalg.norm(along))
    if closing is None:
        for candidate in (hint, *(np.asarray(c) for c in _SIGN_PREFERENCES)):
            flat = _orthogonal_part(candidate, z)
            if np.linalg.norm(flat) >= _MIN_AXIS_NORM:
                closing = flat
                break
    assert closing is not None  # three orthogonal candidates cannot all be along z
    closing = closing / np.linalg.norm(closing)
    closing = _fix_sign(closing, [hint, *(np.asarray(c) for c in _SIGN_PREFERENCES)])
    if closing_axis == "y":
        x, y = np.cross(closing, z), closing
    else:
        x, y = closing, np.cross(z, closing)
    rotation = np.column_stack([x, y, z])
    quat = matrix_to_quaternion(rotation)
    return Pose(_tuple3(p + depth_m * z), (float(quat[0]), float(quat[1]), float(quat[2]),
                                          float(quat[3])))


def pregrasp_pose(grasp: Pose, backoff_m: float) -> Pose:
    """The grasp pose moved ``backoff_m`` (m) back along its approach, same orientation."""
    if not (math.isfinite(backoff_m) and backoff_m >= 0.0):
        raise PointingInputError(f"backoff_m must be finite and >= 0, got {backoff_m!r}")
    position = np.asarray(grasp.position) - backoff_m * grasp.approach
    return Pose(_tuple3(position), grasp.quat_xyzw)


# --- Entry point ----------------------------------------------------------------------------------
def check_fresh(stamp: float, now: float, config: PointingConfig = DEFAULT_CONFIG) -> None:
    """Refuse a frame older than ``config.max_age_s`` or ahead of ``now`` by ``max_future_s``.

    Raises:
        PointingInputError: ``stamp`` or ``now`` is not a finite number.
        StaleFrameError: The frame is too old or from the future.
    """
    for name, value in (("stamp", stamp), ("now", now)):
        numeric = isinstance(value, (int, float, np.integer, np.floating))
        if isinstance(value, bool) or not numeric or not math.isfinite(float(value)):
            raise PointingInputError(f"{name} must be a finite number of seconds, got {value!r}")
    age = float(now) - float(stamp)
    if age > config.max_age_s:
        raise StaleFrameError(
            f"the frame is {age:.3f} s old (at most {config.max_age_s:g} s allowed)"
        )
    if -age > config.max_future_s:
        raise StaleFrameError(
            f"the frame is stamped {-age:.3f} s ahead of the clock "
            f"(at most {config.max_future_s:g} s allowed)"
        )


def point_at(
    mask: npt.ArrayLike,
    depth: npt.ArrayLike,
    intrinsics: Intrinsics,
    base_from_camera: npt.ArrayLike,
    *,
    stamp: float,
    now: float,
    workspace: WorkspaceBox,
    pixel: Sequence[float] | None = None,
    finger_axis_hint: npt.ArrayLike = DEFAULT_FINGER_AXIS_HINT,
    config: PointingConfig = DEFAULT_CONFIG,
) -> PointingResult:
    """Grasp target for a part seen in one camera frame (see the module docstring).

    Args:
        mask: (H, W) mask of the part (boolean, or numeric with non-zero = part).
        depth: (H, W) depth registered to the mask's image (float m with NaN/inf/0 = no
            reading, or uint16 mm with 0 = no reading).
        intrinsics: Pinhole intrinsics of that image (must describe an H x W image).
        base_from_camera: 4x4 transform mapping camera optical-frame points into the base frame
            at the frame's stamp.
        stamp: Stamp of the frame (s).
        now: Current time on the same clock (s).
        workspace: Box the target point must lie in (base frame).
        pixel: Pixel (u, v) chosen elsewhere (a VLM), or None to pick the part's centre.
        finger_axis_hint: Preferred closing direction (base frame) for parts without a clear
            long axis, and the sign of the closing direction otherwise.
        config: Thresholds and distances.

    Raises:
        StaleFrameError, PointingInputError, NoTargetPixelError, NoDepthError,
        OutsideWorkspaceError: see their docstrings.
    """
    check_fresh(stamp, now, config)
    frame = _Frame.checked(mask, depth, intrinsics, base_from_camera)
    hint = _unit(finger_axis_hint, "finger_axis_hint")
    cfg = config
    chosen = select_pixel(
        frame.mask, frame.depth, pixel=pixel, min_pixels=cfg.min_mask_pixels,
        pixel_tolerance_px=cfg.pixel_tolerance_px, ridge_tolerance_px=cfg.ridge_tolerance_px,
        min_depth_m=cfg.min_depth_m, max_depth_m=cfg.max_depth_m,
    )
    lifted = _back_project(frame, chosen, cfg)
    surface = _surface_normal(frame, chosen, lifted.depth_m, cfg)
    point = np.asarray(lifted.point_base)
    if not workspace.contains(point):
        raise OutsideWorkspaceError(
            f"target {np.round(point, 3).tolist()} m lies outside the workspace "
            f"{workspace.min_corner}..{workspace.max_corner} m (base frame)"
        )
    normal = np.asarray(surface.normal_base)
    part = _part_points_near(frame, chosen, point, lifted.depth_m, cfg)
    axis = part_long_axis(part, -normal, min_elongation=cfg.min_elongation)
    grasp = grasp_pose(point, normal, hint, long_axis=axis, depth_m=cfg.grasp_depth_m,
                       closing_axis=cfg.closing_axis)
    return PointingResult(
        pixel=chosen,
        point_base=lifted.point_base,
        normal_base=surface.normal_base,
        grasp=grasp,
        pregrasp=pregrasp_pose(grasp, cfg.pregrasp_backoff_m),
        long_axis=None if axis is None else _tuple3(axis),
        n_points=int(part.shape[0]),
        n_depth_samples=lifted.n_samples,
        n_normal_inliers=surface.n_inliers,
        stamp=float(stamp),
    )


def _part_points_near(
    frame: _Frame, pixel: Pixel, point: FloatArray, depth_m: float, cfg: PointingConfig
) -> FloatArray:
    """Base-frame points of the mask with valid depth within ``long_axis_radius_m`` of ``point``."""
    u, v = pixel
    mask, depth, intrinsics = frame.mask, frame.depth, frame.intrinsics
    height, width = depth.shape
    focal = min(intrinsics.fx, intrinsics.fy)
    radius = math.ceil(focal * cfg.long_axis_radius_m / max(depth_m, _EPS)) + 1
    rs, cs = _window(v, radius, height), _window(u, radius, width)
    patch = depth[rs, cs]
    rows, cols = np.nonzero(mask[rs, cs] & _valid_depth(patch, cfg.min_depth_m, cfg.max_depth_m))
    keep = _thin(rows.size, cfg.max_fit_points)
    rows, cols = rows[keep], cols[keep]
    cam = _lift(rows + rs.start, cols + cs.start, patch[rows, cols], intrinsics)
    if cam.shape[0] == 0:
        return cam
    base = transform_points(frame.pose, cam)
    near = np.linalg.norm(base - point, axis=1) <= cfg.long_axis_radius_m
    return np.asarray(base[near], dtype=np.float64)


# --- Fixture fronts -------------------------------------------------------------------------------
def fit_front_face(
    mask: npt.ArrayLike,
    depth: npt.ArrayLike,
    intrinsics: Intrinsics,
    base_from_camera: npt.ArrayLike,
    *,
    config: PointingConfig = DEFAULT_CONFIG,
) -> FrontFace:
    """Plane and in-plane extents of a fixture's front from its mask (base frame).

    The mask is eroded by ``config.face_erode_px`` first (rim pixels mix depths); the dominant
    plane of its valid points is fitted as for the surface normal, so a handle inside the mask
    does not tilt it. Extents are measured along the in-plane up and right axes over the plane's
    inliers, ignoring ``config.extent_trim_pct`` percent at each end.

    Raises:
        PointingInputError: Malformed inputs.
        NoTargetPixelError: The mask is empty or smaller than ``config.min_mask_pixels``.
        NoDepthError: Too few valid points or no plane among them.
    """
    frame = _Frame.checked(mask, depth, intrinsics, base_from_camera)
    m, d, pose = frame.mask, frame.depth, frame.pose
    cfg = config
    count = int(np.count_nonzero(m))
    if count < cfg.min_mask_pixels:
        raise NoTargetPixelError(f"the face's mask has {count} pixels (need {cfg.min_mask_pixels})")
    region = m
    if cfg.face_erode_px > 0:
        size = 2 * cfg.face_erode_px + 1
        eroded = cv2.erode(m.astype(np.uint8), np.ones((size, size), np.uint8)).astype(np.bool_)
        if int(np.count_nonzero(eroded)) >= cfg.min_mask_pixels:
            region = eroded
    rows, cols = np.nonzero(region & frame.valid(cfg))
    keep = _thin(rows.size, cfg.max_fit_points)
    rows, cols = rows[keep], cols[keep]
    cam = _lift(rows, cols, d[rows, cols], intrinsics)
    if cam.shape[0] < cfg.min_plane_points:
        raise NoDepthError(
            f"{cam.shape[0]} valid depth readings on the face (need {cfg.min_plane_points})"
        )
    pts = transform_points(pose, cam)
    centroid, normal, _ = _fit_plane(pts, cfg)
    camera_position = pose[:3, 3]
    if float(normal @ (camera_position - centroid)) < 0.0:
        normal = -normal
    up = _orthogonal_part(np.array([0.0, 0.0, 1.0]), normal)
    if np.linalg.norm(up) < _MIN_UP_NORM:  # a face lying nearly flat (a lid, a shelf)
        up = _orthogonal_part(-pose[:3, 1], normal)  # image up
    up /= np.linalg.norm(up)
    right = np.cross(up, normal)
    inliers = pts[np.abs((pts - centroid) @ normal) <= cfg.plane_inlier_m]
    across = (inliers - centroid) @ right
    along = (inliers - centroid) @ up
    trim = cfg.extent_trim_pct
    a_lo, a_hi = np.percentile(across, [trim, 100.0 - trim])
    b_lo, b_hi = np.percentile(along, [trim, 100.0 - trim])
    center = centroid + right * 0.5 * (a_lo + a_hi) + up * 0.5 * (b_lo + b_hi)
    return FrontFace(
        center=_tuple3(center),
        normal=_tuple3(normal),
        up=_tuple3(up),
        right=_tuple3(right),
        width_m=float(a_hi - a_lo),
        height_m=float(b_hi - b_lo),
        n_points=int(inliers.shape[0]),
    )


def articulation_guess(
    face: FrontFace,
    handle_point: npt.ArrayLike,
    *,
    edge_fraction: float = DEFAULT_EDGE_FRACTION,
    centre_fraction: float = DEFAULT_CENTRE_FRACTION,
    margin_m: float = DEFAULT_FACE_MARGIN_M,
) -> ArticulationGuess:
    """Guess how a front moves from where its handle sits on it.

    * Handle within the outer part of the face on one side (offset at least ``edge_fraction``
      of the half width from the centre): a door on a vertical hinge along the *opposite*
      vertical edge. The axis is vertical and signed so a positive angle swings the handle
      toward the camera; the radius is the handle's distance from the hinge line.
    * Handle centred (offset at most ``centre_fraction`` of the half width) on a face wider
      than tall: a drawer pulled along the face normal.
    * Anything else (a centred handle on a tall face, a handle more than ``margin_m`` m off the
      face): ``"unknown"``. Horizontal hinges (flaps, oven doors) are not guessed.

    This is a guess: the executor follows the arc or line in small steps and stops when the
    hand lags its target, so a wrong guess ends in a stall, not in force.

    Raises:
        PointingInputError: ``handle_point`` is not three finite numbers, or a fraction is
            outside 0..1.
    """
    h = _vector3(handle_point, "handle_point")
    if not (0.0 <= centre_fraction <= edge_fraction <= 1.0) or not margin_m >= 0.0:
        raise PointingInputError("need 0 <= centre_fraction <= edge_fraction <= 1, margin >= 0")
    center, normal = np.asarray(face.center), np.asarray(face.normal)
    up, right = np.asarray(face.up), np.asarray(face.right)
    half_w, half_h = 0.5 * face.width_m, 0.5 * face.height_m
    across = float((h - center) @ right)
    height = float((h - center) @ up)
    offset = across / max(half_w, _EPS)
    if abs(across) > half_w + margin_m or abs(height) > half_h + margin_m:
        return ArticulationGuess(
            "unknown", _tuple3(normal), _tuple3(h), 0.0, None, offset,
            "the handle lies off the face",
        )
    if abs(offset) >= edge_fraction:
        side: Literal["left", "right"] = "left" if offset > 0.0 else "right"
        origin = face.edge_point(side, height)
        lever = h - origin
        axis = up if float(np.cross(up, lever) @ normal) > 0.0 else -up
        radius = float(np.linalg.norm(_orthogonal_part(lever, up)))
        return ArticulationGuess(
            "revolute", _tuple3(axis), _tuple3(origin), radius, side, offset,
            f"the handle sits near the {'right' if side == 'left' else 'left'} edge, "
            f"so the hinge is guessed on the {side} edge",
        )
    if abs(offset) <= centre_fraction and face.width_m > face.height_m:
        return ArticulationGuess(
            "prismatic", _tuple3(normal), _tuple3(h), 0.0, None, offset,
            "a centred handle on a face wider than tall: a drawer pulled along its normal",
        )
    return ArticulationGuess(
        "unknown", _tuple3(normal), _tuple3(h), 0.0, None, offset,
        "the handle is neither near a vertical edge nor centred on a wide face",
    )
