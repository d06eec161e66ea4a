"""The 3D object observation: what perception hands to world memory.

Perception (segmentation + registered depth + camera pose) produces these; the scene graph's
association step consumes them. Everything is expressed in the map frame, in metres.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Vec3 = npt.NDArray[np.float64]


class InvalidObservationError(ValueError):
    """An observation whose fields are missing, non-finite or inconsistent."""


def finite_vec3(value: object, name: str,
                error: type[Exception] = InvalidObservationError) -> Vec3:
    """``value`` as three finite floats; otherwise raises ``error`` saying what is wrong.

    The reasoning core checks its boxes and positions with this too, passing its own error.
    """
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(3)
    except (TypeError, ValueError) as err:
        raise error(f"{name} must be three numbers, got {value!r}") from err
    if not np.all(np.isfinite(arr)):
        raise error(f"{name} must be finite, got {arr.tolist()}")
    return arr


@dataclass(frozen=True)
class Sighting:
    """One time a camera saw a remembered node: an observation that created it or was fused
    into it.

    The observation's own box was deprojected with the pose of that very image, so it lands on
    the object in that image; the node's fused box, pooled over many views and poses, can miss
    a small object by a few centimetres at close range.

    Attributes:
        camera: Camera whose image the observation came from.
        stamp: Stamp of that image (s).
        bbox_min: Minimum corner of the observation's axis-aligned box (m, map).
        bbox_max: Maximum corner of that box (m, map).
    """

    camera: str
    stamp: float
    bbox_min: tuple[float, float, float]
    bbox_max: tuple[float, float, float]


@dataclass(frozen=True)
class ObjectObservation:
    """One segmented instance deprojected into the map frame.

    Attributes:
        label: Semantic label from the prompt vocabulary (e.g. ``"cabinet"``).
        centroid: Robust centroid of the instance's points (m, map frame).
        bbox_min: Minimum corner of the axis-aligned 3D box (m, map frame).
        bbox_max: Maximum corner of the axis-aligned 3D box (m, map frame).
        stamp: Stamp of the source image (s, ROS time as float).
        score: Segmentation confidence in [0, 1].
        point_count: Number of valid 3D points behind the observation.
        camera: Name of the camera that saw it (``base``, ``pole``, ``wrist``...).
        detection_id: Unique id of the detection (evidence reference).
        frame_id: Frame of the coordinates; world memory only accepts its own map frame.
        obb_center: Centre of the oriented box (m), when computed.
        obb_extent: Full side lengths of the oriented box (m), when computed.
        obb_rotation: 3x3 rotation of the oriented box (columns = box axes in map), when computed.
    """

    label: str
    centroid: Vec3
    bbox_min: Vec3
    bbox_max: Vec3
    stamp: float
    score: float = 1.0
    point_count: int = 0
    camera: str = ""
    detection_id: str = ""
    frame_id: str = "map"
    obb_center: Vec3 | None = None
    obb_extent: Vec3 | None = None
    obb_rotation: npt.NDArray[np.float64] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise InvalidObservationError("label must be a non-empty string")
        object.__setattr__(self, "centroid", finite_vec3(self.centroid, "centroid"))
        lo = finite_vec3(self.bbox_min, "bbox_min")
        hi = finite_vec3(self.bbox_max, "bbox_max")
        if np.any(lo > hi):
            raise InvalidObservationError(f"bbox_min {lo.tolist()} exceeds bbox_max {hi.tolist()}")
        object.__setattr__(self, "bbox_min", lo)
        object.__setattr__(self, "bbox_max", hi)
        if not isinstance(self.stamp, (int, float)) or not math.isfinite(self.stamp):
            raise InvalidObservationError(f"stamp must be a finite number, got {self.stamp!r}")
        if not (0.0 <= float(self.score) <= 1.0):
            raise InvalidObservationError(f"score must lie in [0, 1], got {self.score!r}")
        if int(self.point_count) < 0:
            raise InvalidObservationError("point_count must be >= 0")
        if self.obb_center is not None:
            object.__setattr__(self, "obb_center", finite_vec3(self.obb_center, "obb_center"))
        if self.obb_extent is not None:
            object.__setattr__(self, "obb_extent", finite_vec3(self.obb_extent, "obb_extent"))
        if self.obb_rotation is not None:
            rot = np.asarray(self.obb_rotation, dtype=np.float64)
            if rot.shape != (3, 3) or not np.all(np.isfinite(rot)):
                raise InvalidObservationError("obb_rotation must be a finite 3x3 matrix")
            object.__setattr__(self, "obb_rotation", rot)

    @classmethod
    def many(
        cls,
        *,
        labels: Sequence[str],
        centroids: npt.ArrayLike,
        bbox_min: npt.ArrayLike,
        bbox_max: npt.ArrayLike,
        stamp: float,
        scores: Sequence[float],
        point_counts: Sequence[int],
        detection_ids: Sequence[str],
        camera: str = "",
        frame_id: str = "map",
        obb_centers: npt.ArrayLike | None = None,
        obb_extents: npt.ArrayLike | None = None,
        obb_rotations: npt.ArrayLike | None = None,
    ) -> list[ObjectObservation]:
        """Build the observations of one frame at once.

        Applies the same checks as the constructor, on whole arrays instead of one
        observation at a time (vectors are ``(n, 3)``, rotations ``(n, 3, 3)``).

        Raises:
            InvalidObservationError: any field of any observation fails a check.
        """
        n = len(labels)

        def block(value: npt.ArrayLike, name: str, shape: tuple[int, ...]) -> npt.NDArray[
            np.float64
        ]:
            try:
                arr = np.array(value, dtype=np.float64).reshape(n, *shape)
            except (TypeError, ValueError) as err:
                raise InvalidObservationError(f"{name} must be {n} arrays of {shape}") from err
            if not np.all(np.isfinite(arr)):
                row = int(np.flatnonzero(~np.isfinite(arr.reshape(n, -1)).all(axis=1))[0])
                raise InvalidObservationError(f"{name} of observation {row} must be finite")
            return arr

        cen = block(centroids, "centroid", (3,))
        lo = block(bbox_min, "bbox_min", (3,))
        hi = block(bbox_max, "bbox_max", (3,))
        if np.any(lo > hi):
            row = int(np.flatnonzero((lo > hi).any(axis=1))[0])
            raise InvalidObservationError(
                f"bbox_min {lo[row].tolist()} exceeds bbox_max {hi[row].tolist()}"
            )
        obb = (
            (block(obb_centers, "obb_center", (3,)), block(obb_extents, "obb_extent", (3,)),
             block(obb_rotations, "obb_rotation", (3, 3)))
            if obb_centers is not None and obb_extents is not None and obb_rotations is not None
            else None
        )
        score = np.asarray(scores, dtype=np.float64)
        counts = [int(c) for c in point_counts]
        if len(score) != n or len(counts) != n or len(detection_ids) != n:
            raise InvalidObservationError("every per-observation sequence needs one entry each")
        if not np.all((score >= 0.0) & (score <= 1.0)):
            raise InvalidObservationError(f"scores must lie in [0, 1], got {score.tolist()}")
        if any(c < 0 for c in counts):
            raise InvalidObservationError("point_count must be >= 0")
        if not all(isinstance(label, str) and label.strip() for label in labels):
            raise InvalidObservationError("label must be a non-empty string")
        if not isinstance(stamp, (int, float)) or not math.isfinite(stamp):
            raise InvalidObservationError(f"stamp must be a finite number, got {stamp!r}")
        out: list[ObjectObservation] = []
        for i in range(n):
            # Every field was checked above; build without repeating the checks per object.
            obs = object.__new__(cls)
            obs.__dict__.update(
                label=labels[i], centroid=cen[i], bbox_min=lo[i], bbox_max=hi[i],
                stamp=stamp, score=float(score[i]), point_count=counts[i], camera=camera,
                detection_id=detection_ids[i], frame_id=frame_id,
                obb_center=None if obb is None else obb[0][i],
                obb_extent=None if obb is None else obb[1][i],
                obb_rotation=None if obb is None else obb[2][i],
            )
            out.append(obs)
        return out

    @property
    def extent(self) -> Vec3:
        """Side lengths of the axis-aligned box (m)."""
        return np.asarray(self.bbox_max - self.bbox_min, dtype=np.float64)
