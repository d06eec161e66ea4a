"""Parameters of the deprojection node, declared as ROS parameters with descriptions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mimir.bounds import DEFAULT_BOUNDS, Bounds
from mimir.nodes import common_params as shared
from mimir.settings import param
from mimir_memory.visibility import CameraView, nearest_depth_grid
from mimir_perception.camera import Intrinsics
from mimir_perception.deprojection import DeprojectionConfig, DepthUnit
from mimir_perception.sync import SyncConfig


@dataclass(frozen=True)
class DeprojectionNodeConfig:
    """Parameters of the deprojection node."""

    cameras: tuple[str, ...] = shared.cameras("camera names to deproject")
    map_frame: str = shared.map_frame("fixed frame of the observations")
    rectified: bool = shared.rectified(
        "camera infos describe rectified images (use P, ignore D); false refuses non-zero "
        "distortion")
    sync_tolerance: float = param(
        0.02,
        "largest stamp difference of a matched segmentation, depth and camera info (s)",
        read_only=True)
    sync_max_age: float = param(
        2.0, "queued inputs older than the newest stamp minus this are dropped (s)", read_only=True)
    sync_max_queue: int = param(30, "most queued inputs per stream and camera", read_only=True)
    transform_timeout: float = param(
        0.5, "how long a frame waits for its transform before it is skipped (s)", read_only=True)
    tf_cache: float = shared.tf_cache()
    max_backlog: int = param(
        8,
        "matched frames waiting for deprojection; older ones are dropped beyond this",
        read_only=True)
    min_depth: float = param(0.1, "nearest valid depth (m)", read_only=True)
    max_depth: float = param(10.0, "farthest valid depth (m)", read_only=True)
    erode_px: int = param(2, "mask erosion radius (pixels)", read_only=True)
    min_points: int = param(30, "fewest valid points behind an observation", read_only=True)
    max_instances: int = param(
        200, "most instances deprojected per frame (best scores kept)", read_only=True)
    outlier_mad_k: float = param(
        3.0, "depth outlier threshold in scaled MADs (0 disables)", read_only=True)
    centroid: str = param("median", "median, mean or trimmed_mean", read_only=True)
    pixel_stride: int = param(1, "use every n-th row and column", read_only=True)
    compute_obb: bool = param(True, "also compute oriented boxes", read_only=True)
    view_grid_rows: int = param(
        24,
        "rows of the nearest-depth grid each published view carries (at most the image height)",
        read_only=True)
    view_grid_cols: int = param(
        32,
        "columns of the nearest-depth grid each published view carries (at most the image width)",
        read_only=True)
    vocabulary: str = param(
        "",
        "the segmenter's prompt vocabulary (a name under config/vocabularies or a YAML path): its "
        "labels go out as each view's labels_sought; empty leaves them unknown",
        read_only=True)
    diagnostics_period: float = shared.diagnostics_period()
    memory_config: str = shared.memory_config(
        "settings YAML whose bounds section limits poses and observations; empty for the "
        "installed memory.yaml")

    def __post_init__(self) -> None:
        shared.check_cameras(self.cameras)
        if not self.map_frame:
            raise ValueError("map_frame must be non-empty")
        if self.transform_timeout < 0.0 or self.tf_cache <= 0.0 or self.max_backlog < 1:
            raise ValueError("transform_timeout >= 0, tf_cache > 0 and max_backlog >= 1 needed")
        if not self.diagnostics_period > 0.0:
            raise ValueError("diagnostics_period must be positive")
        if self.view_grid_rows < 1 or self.view_grid_cols < 1:
            raise ValueError("view_grid_rows and view_grid_cols must be at least 1")

    def deprojection(self, unit: DepthUnit, bounds: Bounds = DEFAULT_BOUNDS
                     ) -> DeprojectionConfig:
        """The core deprojection settings for depth in ``unit``."""
        return DeprojectionConfig(
            workspace_m=bounds.workspace_m,
            depth_unit=unit,
            min_depth=self.min_depth,
            max_depth=self.max_depth,
            erode_px=self.erode_px,
            min_points=self.min_points,
            max_instances=self.max_instances,
            outlier_mad_k=self.outlier_mad_k,
            centroid=self.centroid,  # type: ignore[arg-type]
            compute_obb=self.compute_obb,
            pixel_stride=self.pixel_stride,
            map_frame=self.map_frame,
        )

    def sync(self) -> SyncConfig:
        """The synchroniser settings."""
        return SyncConfig(
            tolerance=self.sync_tolerance, max_age=self.sync_max_age, max_queue=self.sync_max_queue
        )

    def view(self, depth: npt.NDArray[np.generic], intrinsics: Intrinsics,
             camera_to_map: npt.NDArray[np.float64], unit: DepthUnit,
             labels_sought: Sequence[str] = ()) -> CameraView:
        """What a frame's camera could see (its ``view`` for negative evidence): the pose, the
        intrinsics, ``max_depth`` as the range and the nearest-depth grid of its depth image.

        Raises:
            InvalidValueError: a depth image, pose or intrinsics the view cannot be built from.
        """
        height, width = depth.shape[:2]
        grid = nearest_depth_grid(
            depth, min(self.view_grid_rows, height), min(self.view_grid_cols, width),
            scale=0.001 if unit == "mm" else 1.0, min_depth=self.min_depth,
            max_depth=self.max_depth)
        return CameraView(
            camera_to_map=camera_to_map, fx=intrinsics.fx, fy=intrinsics.fy, cx=intrinsics.cx,
            cy=intrinsics.cy, width=intrinsics.width, height=intrinsics.height,
            max_range_m=self.max_depth, depth_min_m=grid, labels_sought=tuple(labels_sought))
