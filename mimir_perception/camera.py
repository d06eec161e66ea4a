"""Pinhole camera model, rigid-transform helpers and projection of map points into images.

Conventions: camera optical frames follow REP-103 (``*_optical_frame``: x right, y down,
z forward). A transform ``T_a_b`` is a 4x4 homogeneous matrix that maps points expressed in
frame ``b`` into frame ``a`` (so ``camera_to_map`` maps camera points into the map).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mimir_perception.errors import IntrinsicsError, TransformError

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Intrinsics:
    """Pinhole intrinsics of an undistorted (or rectified) image.

    Attributes:
        fx: Focal length along x (pixels).
        fy: Focal length along y (pixels).
        cx: Principal point x (pixels).
        cy: Principal point y (pixels).
        width: Image width (pixels).
        height: Image height (pixels).
    """

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    def __post_init__(self) -> None:
        for name in ("fx", "fy", "cx", "cy"):
            value = getattr(self, name)
            if not isinstance(value, (int, float, np.floating, np.integer)) or not math.isfinite(
                float(value)
            ):
                raise IntrinsicsError(f"intrinsics {name} must be a finite number, got {value!r}")
            object.__setattr__(self, name, float(value))
        if self.fx <= 0.0 or self.fy <= 0.0:
            raise IntrinsicsError(f"focal lengths must be positive, got fx={self.fx} fy={self.fy}")
        for name in ("width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
                raise IntrinsicsError(
                    f"intrinsics {name} must be a positive integer, got {value!r}"
                )
            object.__setattr__(self, name, int(value))

    @classmethod
    def from_matrix(cls, k: npt.ArrayLike, width: int, height: int) -> Intrinsics:
        """Build intrinsics from a 3x3 camera matrix K (row-major, skew ignored if zero)."""
        try:
            mat = np.asarray(k, dtype=np.float64).reshape(3, 3)
        except (TypeError, ValueError) as err:
            raise IntrinsicsError(f"K must hold 9 numbers, got {k!r}") from err
        if not np.all(np.isfinite(mat)):
            raise IntrinsicsError("K must be finite")
        if abs(mat[0, 1]) > 1e-9 or np.any(np.abs(mat[2] - (0.0, 0.0, 1.0)) > 1e-9):
            raise IntrinsicsError(f"K is not a zero-skew pinhole matrix: {mat.tolist()}")
        if abs(mat[1, 0]) > 1e-9:
            raise IntrinsicsError(f"K is not a zero-skew pinhole matrix: {mat.tolist()}")
        return cls(mat[0, 0], mat[1, 1], mat[0, 2], mat[1, 2], width, height)

    @property
    def matrix(self) -> FloatArray:
        """The 3x3 camera matrix K."""
        return np.array(
            [[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]], dtype=np.float64
        )

    @property
    def shape(self) -> tuple[int, int]:
        """Image shape as ``(height, width)``."""
        return (self.height, self.width)

    def scaled(self, width: int, height: int) -> Intrinsics:
        """Intrinsics of the same camera after resizing the whole image to ``width`` x ``height``.

        Uses the pixel-centre convention (a pixel's centre sits at integer + 0.5 before scaling),
        which is what ``cv2.resize`` does.
        """
        if width <= 0 or height <= 0:
            raise IntrinsicsError(f"target size must be positive, got {width}x{height}")
        sx = width / self.width
        sy = height / self.height
        return Intrinsics(
            fx=self.fx * sx,
            fy=self.fy * sy,
            cx=(self.cx + 0.5) * sx - 0.5,
            cy=(self.cy + 0.5) * sy - 0.5,
            width=width,
            height=height,
        )

    def check_image(self, shape: tuple[int, ...], what: str = "image") -> None:
        """Raise :class:`IntrinsicsError` when ``shape`` (H, W, ...) differs from the intrinsics."""
        if tuple(shape[:2]) != (self.height, self.width):
            raise IntrinsicsError(
                f"{what} is {shape[1]}x{shape[0]} but intrinsics describe "
                f"{self.width}x{self.height}"
            )


def as_transform(value: npt.ArrayLike | None, name: str = "transform") -> FloatArray:
    """Validate a 4x4 rigid homogeneous transform and return it as float64.

    Raises:
        TransformError: When the value is None, not 4x4, non-finite, has a bad last row or a
            rotation block that is not orthonormal with determinant +1 (tolerance 1e-3).
    """
    if value is None:
        raise TransformError(f"{name} is missing")
    try:
        mat = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TransformError(f"{name} is not numeric") from err
    if mat.shape != (4, 4):
        raise TransformError(f"{name} must be 4x4, got shape {mat.shape}")
    if not np.all(np.isfinite(mat)):
        raise TransformError(f"{name} must be finite")
    if np.any(np.abs(mat[3] - (0.0, 0.0, 0.0, 1.0)) > 1e-9):
        raise TransformError(f"{name} last row must be [0, 0, 0, 1], got {mat[3].tolist()}")
    rot = mat[:3, :3]
    if np.max(np.abs(rot @ rot.T - np.eye(3))) > 1e-3 or np.linalg.det(rot) < 0.0:
        raise TransformError(f"{name} rotation block is not a proper rotation")
    return mat


def invert_transform(transform: npt.ArrayLike) -> FloatArray:
    """Inverse of a rigid 4x4 transform (uses the transpose of the rotation)."""
    mat = as_transform(transform)
    inv = np.eye(4)
    rot_t = mat[:3, :3].T
    inv[:3, :3] = rot_t
    inv[:3, 3] = -rot_t @ mat[:3, 3]
    return inv


def make_transform(rotation: npt.ArrayLike, translation: npt.ArrayLike) -> FloatArray:
    """4x4 transform from a 3x3 rotation and a translation (m)."""
    mat = np.eye(4)
    mat[:3, :3] = np.asarray(rotation, dtype=np.float64).reshape(3, 3)
    mat[:3, 3] = np.asarray(translation, dtype=np.float64).reshape(3)
    return mat


def transform_points(transform: npt.ArrayLike, points: npt.ArrayLike) -> FloatArray:
    """Apply a 4x4 transform to an (N, 3) array of points."""
    mat = as_transform(transform)
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    return np.asarray(pts @ mat[:3, :3].T + mat[:3, 3], dtype=np.float64)


@dataclass(frozen=True)
class Projection:
    """Result of projecting map points into an image.

    Attributes:
        uv: (N, 2) pixel coordinates (u right, v down); meaningless where ``visible`` is False.
        depth: (N,) distance along the optical axis (m); <= 0 means behind the camera.
        visible: (N,) True where the point is in front of the camera and inside the image.
    """

    uv: FloatArray
    depth: FloatArray
    visible: npt.NDArray[np.bool_]


def project_points(
    points_map: npt.ArrayLike,
    intrinsics: Intrinsics,
    camera_to_map: npt.ArrayLike,
    min_depth: float = 0.05,
) -> Projection:
    """Project 3D map points into an image (for Set-of-Mark overlays).

    Args:
        points_map: (N, 3) points in the map frame (m).
        intrinsics: Intrinsics of the image.
        camera_to_map: 4x4 pose of the camera optical frame in the map at the image stamp.
        min_depth: Points closer than this along the optical axis are not visible (m).
    """
    pts = np.asarray(points_map, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise TransformError(f"points must be an (N, 3) array, got shape {pts.shape}")
    map_to_camera = invert_transform(camera_to_map)
    cam = pts @ map_to_camera[:3, :3].T + map_to_camera[:3, 3]
    z = cam[:, 2]
    safe_z = np.where(z > 1e-12, z, 1.0)
    u = intrinsics.fx * cam[:, 0] / safe_z + intrinsics.cx
    v = intrinsics.fy * cam[:, 1] / safe_z + intrinsics.cy
    visible = (
        (z >= min_depth)
        & np.all(np.isfinite(cam), axis=1)
        & (u >= -0.5)
        & (u < intrinsics.width - 0.5)
        & (v >= -0.5)
        & (v < intrinsics.height - 0.5)
    )
    return Projection(uv=np.stack([u, v], axis=1), depth=z, visible=visible)
