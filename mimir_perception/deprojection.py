"""Deprojection of segmented instances into 3D observations in the map frame.

All instances of a frame are handled in one pass over the instance-id image: the valid pixels
are selected once, grouped by instance with a radix sort of their uint16 ids, and per-instance
statistics are computed with ``np.*.reduceat`` over the grouped arrays. Robust statistics
(median depth and its spread, median centroid) use a fixed-size, evenly spread sample of each
instance's points so their cost does not grow with the mask size.

Per instance the pipeline is:

1. erode the instance's mask (a pixel survives only if every pixel within ``erode_px`` carries
   the same id; depth at object borders mixes foreground and background);
2. drop invalid depth (0, NaN, infinite, outside ``[min_depth, max_depth]``);
3. drop statistical depth outliers (further than ``outlier_mad_k`` scaled median absolute
   deviations, but at least ``outlier_min_band``, from the instance's median depth);
4. skip the instance if fewer than ``min_points`` points remain;
5. transform into the map and compute the robust centroid, the axis-aligned box and,
   optionally, an oriented box from principal component analysis;
6. grow the axis-aligned box by what erosion took off the mask's sides, ``erode_px`` pixels at
   the centroid's depth along the image axes (the points stay eroded; the extent does not).
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass, field
from typing import Literal

import cv2
import numpy as np
import numpy.typing as npt

from mimir import settings
from mimir.bounds import DEFAULT_BOUNDS
from mimir_memory.observations import ObjectObservation
from mimir_perception.camera import Intrinsics, as_transform
from mimir_perception.errors import (
    DepthError,
    ImageSizeMismatchError,
    InsufficientPointsError,
    MissingIntrinsicsError,
    MissingTransformError,
    PerceptionError,
    PoseOutOfWorkspaceError,
    SegmentationError,
)
from mimir_perception.segmentation import InstanceInfo, SegmentationResult

LOG = logging.getLogger(__name__)

DepthUnit = Literal["mm", "m"]
CentroidMethod = Literal["median", "mean", "trimmed_mean"]
FloatArray = npt.NDArray[np.float64]


class SkipReason(enum.StrEnum):
    """Why an instance produced no observation."""

    EMPTY_MASK = "empty_mask"
    """No pixel of the instance survived erosion (or the mask was empty)."""
    NO_VALID_DEPTH = "no_valid_depth"
    """Every remaining pixel had zero, NaN or out-of-range depth."""
    TOO_FEW_POINTS = "too_few_points"
    """Fewer than ``min_points`` valid points after outlier rejection."""
    INSTANCE_CAP = "instance_cap"
    """The frame had more instances than ``max_instances``; lower scores were skipped."""
    OUTSIDE_WORKSPACE = "outside_workspace"
    """The instance's points lie outside the workspace bound (``workspace_m``)."""


@dataclass(frozen=True)
class DeprojectionConfig(settings.Checked, section="deprojection", error=PerceptionError,
                         positive=("workspace_m",),
                         non_negative=("erode_px", "outlier_mad_k", "outlier_min_band"),
                         positive_int=("pixel_stride", "min_points", "max_instances"),
                         within={"sample_size": (8, math.inf), "obb_sample_size": (8, math.inf)},
                         choices={"centroid": ("median", "mean", "trimmed_mean")}):
    """Settings of the deprojection.

    Attributes:
        depth_unit: ``"mm"`` for integer depth in millimetres (uint16, 0 = no reading) or
            ``"m"`` for float depth in metres (NaN/inf/0 = no reading).
        min_depth: Nearest valid depth (m).
        max_depth: Farthest valid depth (m).
        erode_px: Erosion radius of each mask (pixels); 0 disables erosion.
        min_points: Fewest valid points an observation may be built from.
        max_instances: Instances beyond this count (lowest scores) are skipped.
        outlier_mad_k: Depth outlier threshold in scaled MADs; 0 disables the rejection.
        outlier_min_band: Smallest accepted distance from the median depth (m).
        centroid: ``"median"`` (per axis), ``"mean"`` or ``"trimmed_mean"`` (per axis).
        trim_fraction: Fraction cut from each end for ``"trimmed_mean"``.
        sample_size: Points per instance used for medians and trimmed means.
        compute_obb: Also compute the oriented box (principal axes of the points).
        obb_sample_size: Points per instance (spread evenly over it) behind the oriented box;
            the box's extent can therefore be slightly smaller than the full point set's.
        pixel_stride: Use every n-th row and column only (1 = all pixels); erosion then
            works on the subsampled grid with radius ``max(1, round(erode_px / stride))``.
        map_frame: Frame id written into observations.
        workspace_m: Largest absolute map coordinate of a camera or an observation (m), from
            the bounds table (``mimir.bounds``); a pose beyond it is refused, an instance beyond
            it skipped.
    """

    depth_unit: DepthUnit = "m"
    min_depth: float = 0.1
    max_depth: float = 10.0
    erode_px: int = 2
    min_points: int = 30
    max_instances: int = 200
    outlier_mad_k: float = 3.0
    outlier_min_band: float = 0.05
    centroid: CentroidMethod = "median"
    trim_fraction: float = 0.1
    sample_size: int = 512
    compute_obb: bool = True
    obb_sample_size: int = 512
    pixel_stride: int = 1
    map_frame: str = "map"
    workspace_m: float = DEFAULT_BOUNDS.workspace_m

    @property
    def erosion_radius(self) -> int:
        """Erosion radius on the sampling grid (samples; 0 when erosion is off)."""
        return max(1, round(self.erode_px / self.pixel_stride)) if self.erode_px > 0 else 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.depth_unit not in ("mm", "m"):
            raise DepthError(f"depth_unit must be 'mm' or 'm', got {self.depth_unit!r}")
        if not (0.0 <= self.min_depth < self.max_depth and math.isfinite(self.max_depth)):
            raise DepthError(
                f"need 0 <= min_depth < max_depth, got {self.min_depth}, {self.max_depth}"
            )
        if not 0.0 <= self.trim_fraction < 0.5:
            raise PerceptionError("trim_fraction must lie in [0, 0.5)")
        if not self.map_frame:
            raise PerceptionError("map_frame must be non-empty")


@dataclass(frozen=True)
class SkippedInstance:
    """An instance that produced no observation, with the reason."""

    instance_id: int
    label: str
    reason: SkipReason
    point_count: int = 0


@dataclass(frozen=True)
class FrameObservations:
    """Everything one frame produced.

    Attributes:
        observations: One observation per instance with enough valid points.
        skipped: Instances without an observation and why.
        stamp: Image stamp (s).
        camera: Camera name.
        instance_ids: Instance id of each observation (aligned with ``observations``).
    """

    observations: tuple[ObjectObservation, ...]
    skipped: tuple[SkippedInstance, ...]
    stamp: float
    camera: str
    instance_ids: tuple[int, ...] = field(default=())


def _check_depth(depth: npt.NDArray[np.generic], unit: DepthUnit) -> None:
    if not isinstance(depth, np.ndarray) or depth.ndim != 2:
        raise DepthError(f"depth must be a 2D array, got shape {getattr(depth, 'shape', None)}")
    if unit == "mm" and depth.dtype != np.uint16:
        raise DepthError(f"depth_unit 'mm' needs uint16 depth, got {depth.dtype}")
    if unit == "m" and depth.dtype not in (np.float32, np.float64):
        raise DepthError(f"depth_unit 'm' needs float32/float64 depth, got {depth.dtype}")


def detection_id(camera: str, stamp: float, instance_id: int) -> str:
    """Deterministic detection id: ``<camera>@<stamp in ns>#<instance id>``."""
    return f"{camera or 'camera'}@{round(stamp * 1e9)}#{instance_id}"


@dataclass(frozen=True)
class _Grid:
    """One frame on the sampling grid (every ``stride``-th row and column).

    Attributes:
        ids: Instance-id image.
        low: Ids after erosion (a pixel keeps its id where its whole neighbourhood shares it).
        interior: 1 where a pixel survived erosion, else 0.
        valid: 1 where a pixel survived erosion and has a depth in range, else 0.
        depth: Depth image, in the configured unit and dtype.
        ray_x: ``(u - cx) / fx`` of every grid column.
        ray_y: ``(v - cy) / fy`` of every grid row.
        ray_x_image: ``ray_x`` repeated on every row (an image of the grid's size).
        ray_y_image: ``ray_y`` repeated on every column.
        stride: Grid spacing in image pixels.
    """

    ids: npt.NDArray[np.uint16]
    low: npt.NDArray[np.uint16]
    interior: npt.NDArray[np.uint8]
    valid: npt.NDArray[np.uint8]
    depth: npt.NDArray[np.generic]
    ray_x: npt.NDArray[np.float32]
    ray_y: npt.NDArray[np.float32]
    ray_x_image: npt.NDArray[np.float32]
    ray_y_image: npt.NDArray[np.float32]
    stride: int


@dataclass
class _Instance:
    """Working state of one instance: its crop of the grid and its surviving pixels."""

    info: InstanceInfo
    rows: slice
    cols: slice
    mask: npt.NDArray[np.uint8] | None = None
    """1 on the crop's pixels that survived every filter so far."""
    pixels: npt.NDArray[np.intp] | None = None
    """Flat crop positions of those pixels, in raster order."""
    depth: npt.NDArray[np.float32] | None = None
    """The crop's depth in metres (float32; NaN or garbage off the mask)."""

    @property
    def count(self) -> int:
        return 0 if self.pixels is None else int(self.pixels.size)

    def grid_index(self, positions: npt.NDArray[np.intp], grid_width: int) -> npt.NDArray[np.intp]:
        """Flat grid indices of flat crop positions."""
        width = self.cols.stop - self.cols.start
        rows, cols = np.divmod(positions, width)
        return np.asarray((rows + self.rows.start) * grid_width + cols + self.cols.start, np.intp)


def _sample(instances: list[_Instance], k: int, grid_width: int) -> npt.NDArray[np.intp]:
    """(n, k) flat grid indices of ``k`` pixels spread evenly over each instance's survivors.

    Every instance needs at least one surviving pixel; small ones repeat pixels.
    """
    steps = np.arange(k, dtype=np.int64)
    picks = np.stack(
        [inst.pixels[(steps * inst.count) // k] for inst in instances if inst.pixels is not None]
    )
    widths = np.array([[inst.cols.stop - inst.cols.start] for inst in instances], np.int64)
    rows, cols = np.divmod(picks, widths)
    rows += np.array([[inst.rows.start] for inst in instances], np.int64)
    cols += np.array([[inst.cols.start] for inst in instances], np.int64)
    return np.asarray(rows * grid_width + cols, np.intp)


def _wide(start: int, stop: int, width: int) -> slice:
    """Grid columns ``start:stop`` clipped to the grid, at least two wide where it can be.

    OpenCV reads a one-column array of up to four rows as a scalar, so crops keep two columns.
    """
    start, stop = min(start, width), min(stop, width)
    if stop - start < 2 and width >= 2:
        start = max(0, min(start, width - 2))
        stop = start + 2
    return slice(start, stop)


def _median(values: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """Median along the last axis (numpy's SIMD sort beats ``np.median`` on these sizes)."""
    k = values.shape[-1]
    ordered = np.sort(values, axis=-1)
    return np.asarray(
        (ordered[..., (k - 1) // 2] + ordered[..., k // 2]) * np.float32(0.5), np.float32
    )


def _surviving(mask: npt.NDArray[np.uint8]) -> npt.NDArray[np.intp]:
    """Flat positions of the non-zero pixels of a 0/1 mask (through a bool view, no copy)."""
    return np.flatnonzero(mask.view(np.bool_))


def _required_geometry(intrinsics: Intrinsics | None, camera_to_map: npt.ArrayLike | None
                       ) -> tuple[Intrinsics, FloatArray]:
    """A frame's intrinsics and checked camera-to-map pose, both of which must be known.

    Raises:
        MissingIntrinsicsError: ``intrinsics`` is None.
        MissingTransformError: ``camera_to_map`` is None.
        TransformError: The transform is not rigid or not finite.
    """
    if intrinsics is None:
        raise MissingIntrinsicsError("no camera intrinsics for this frame")
    if camera_to_map is None:
        raise MissingTransformError("no camera-to-map transform at the image stamp")
    return intrinsics, as_transform(camera_to_map, "camera_to_map")


class Deprojector:
    """Turns segmentation + registered depth + camera pose into map-frame observations.

    Keeps a cache of per-pixel viewing rays for the last intrinsics it saw, so consecutive
    frames of one camera do not recompute them.
    """

    def __init__(self, config: DeprojectionConfig | None = None) -> None:
        self._config = config or DeprojectionConfig()
        self._ray_key: tuple[Intrinsics, int] | None = None
        self._rays: tuple[npt.NDArray[np.float32], ...] | None = None
        self.corrected_boxes = 0
        """Instances whose pixel box did not hold all their pixels (the box was recomputed)."""

    @property
    def config(self) -> DeprojectionConfig:
        """The deprojection settings."""
        return self._config

    def _ray_tables(self, intrinsics: Intrinsics) -> tuple[npt.NDArray[np.float32], ...]:
        """``(u - cx) / fx`` per grid column, ``(v - cy) / fy`` per grid row, and both as images."""
        stride = self._config.pixel_stride
        key = (intrinsics, stride)
        if self._rays is None or self._ray_key != key:
            us = np.arange(0, intrinsics.width, stride, dtype=np.float64)
            vs = np.arange(0, intrinsics.height, stride, dtype=np.float64)
            ray_x = ((us - intrinsics.cx) / intrinsics.fx).astype(np.float32)
            ray_y = ((vs - intrinsics.cy) / intrinsics.fy).astype(np.float32)
            self._rays = (
                ray_x,
                ray_y,
                np.ascontiguousarray(np.broadcast_to(ray_x[None, :], (ray_y.size, ray_x.size))),
                np.ascontiguousarray(np.broadcast_to(ray_y[:, None], (ray_y.size, ray_x.size))),
            )
            self._ray_key = key
        return self._rays

    def deproject(
        self,
        segmentation: SegmentationResult,
        depth: npt.NDArray[np.generic],
        intrinsics: Intrinsics | None,
        camera_to_map: npt.ArrayLike | None,
        *,
        stamp: float | None = None,
        camera: str | None = None,
    ) -> FrameObservations:
        """Deproject every instance of a frame.

        Args:
            segmentation: Instance-id image and table (same size as ``depth``).
            depth: Registered depth image, dtype per ``config.depth_unit``.
            intrinsics: Intrinsics of the depth image; None raises.
            camera_to_map: 4x4 pose of the camera optical frame in the map at the image stamp;
                None (transform unavailable) raises.
            stamp: Overrides ``segmentation.stamp``.
            camera: Overrides ``segmentation.camera``.

        Raises:
            MissingIntrinsicsError: ``intrinsics`` is None.
            MissingTransformError: ``camera_to_map`` is None.
            TransformError: The transform is not rigid or not finite.
            DepthError: Unsupported depth dtype/shape.
            ImageSizeMismatchError: Segmentation, depth and intrinsics disagree on image size.
        """
        cfg = self._config
        intrinsics, pose = _required_geometry(intrinsics, camera_to_map)
        position = pose[:3, 3]
        if np.max(np.abs(position)) > cfg.workspace_m:
            raise PoseOutOfWorkspaceError(
                f"camera_to_map puts the camera at {np.array2string(position, precision=4)} m, "
                f"outside the workspace (|coordinate| <= {cfg.workspace_m:g} m)")
        self._check_frame(segmentation, depth, intrinsics)
        frame_stamp = float(segmentation.stamp if stamp is None else stamp)
        if not math.isfinite(frame_stamp):
            raise SegmentationError(f"stamp must be finite, got {frame_stamp!r}")
        frame_camera = segmentation.camera if camera is None else camera

        skipped: list[SkippedInstance] = []
        infos = list(segmentation.instances)
        if len(infos) > cfg.max_instances:
            order = sorted(range(len(infos)), key=lambda i: -infos[i].score)
            dropped = sorted(order[cfg.max_instances :])
            for i in dropped:
                skipped.append(
                    SkippedInstance(infos[i].instance_id, infos[i].label, SkipReason.INSTANCE_CAP)
                )
            LOG.warning(
                "frame %s@%.3f has %d instances, cap is %d",
                frame_camera,
                frame_stamp,
                len(infos),
                cfg.max_instances,
            )
            keep_idx = sorted(order[: cfg.max_instances])
            infos = [infos[i] for i in keep_idx]
        if not infos:
            return FrameObservations((), tuple(skipped), frame_stamp, frame_camera)

        grid = self._grid(segmentation, depth, intrinsics)
        instances = self._filtered(grid, infos)
        good: list[_Instance] = []
        for inst in instances:
            if inst.count >= cfg.min_points:
                good.append(inst)
            else:
                skipped.append(self._skip(grid, inst))
        if not good:
            return FrameObservations((), tuple(skipped), frame_stamp, frame_camera)
        observations = self._summarise(grid, good, pose, intrinsics, stamp=frame_stamp,
                                       camera=frame_camera)
        inside: list[ObjectObservation] = []
        kept: list[int] = []
        for inst, obs in zip(good, observations, strict=True):
            reach = max(float(np.max(np.abs(obs.bbox_min))), float(np.max(np.abs(obs.bbox_max))))
            if reach > cfg.workspace_m:
                skipped.append(SkippedInstance(inst.info.instance_id, inst.info.label,
                                               SkipReason.OUTSIDE_WORKSPACE, inst.count))
                continue
            inside.append(obs)
            kept.append(inst.info.instance_id)
        return FrameObservations(
            tuple(inside),
            tuple(skipped),
            frame_stamp,
            frame_camera,
            tuple(kept),
        )

    def instance_points(
        self,
        segmentation: SegmentationResult,
        depth: npt.NDArray[np.generic],
        intrinsics: Intrinsics | None,
        camera_to_map: npt.ArrayLike | None,
    ) -> dict[int, npt.NDArray[np.float32]]:
        """The filtered map points of every instance (same filters as :meth:`deproject`).

        Returns:
            Instance id -> (N, 3) float32 points in the map frame (possibly empty).
        """
        intrinsics, pose = _required_geometry(intrinsics, camera_to_map)
        self._check_frame(segmentation, depth, intrinsics)
        infos = list(segmentation.instances)
        if not infos:
            return {}
        grid = self._grid(segmentation, depth, intrinsics)
        width = grid.ids.shape[1]
        points: dict[int, npt.NDArray[np.float32]] = {}
        for inst in self._filtered(grid, infos):
            if inst.pixels is None or not inst.pixels.size:
                points[inst.info.instance_id] = np.zeros((0, 3), np.float32)
                continue
            cam = self._camera_points(grid, inst.grid_index(inst.pixels, width))
            mapped = cam @ pose[:3, :3].T.astype(np.float32) + pose[:3, 3].astype(np.float32)
            points[inst.info.instance_id] = np.ascontiguousarray(mapped, np.float32)
        return points

    def _check_frame(
        self,
        segmentation: SegmentationResult,
        depth: npt.NDArray[np.generic],
        intrinsics: Intrinsics,
    ) -> None:
        _check_depth(depth, self._config.depth_unit)
        if segmentation.shape != depth.shape:
            raise ImageSizeMismatchError(
                f"segmentation is {segmentation.shape[1]}x{segmentation.shape[0]} but depth is "
                f"{depth.shape[1]}x{depth.shape[0]}"
            )
        if intrinsics.shape != depth.shape:
            raise ImageSizeMismatchError(
                f"depth is {depth.shape[1]}x{depth.shape[0]} but intrinsics describe "
                f"{intrinsics.width}x{intrinsics.height}"
            )

    def _grid(
        self,
        segmentation: SegmentationResult,
        depth: npt.NDArray[np.generic],
        intrinsics: Intrinsics,
    ) -> _Grid:
        """Subsample, erode and test depth validity once for the whole frame."""
        cfg = self._config
        stride = cfg.pixel_stride
        ids: npt.NDArray[np.uint16] = segmentation.instance_ids
        if stride > 1:
            ids = np.ascontiguousarray(ids[::stride, ::stride])
        low: npt.NDArray[np.uint16]
        interior: npt.NDArray[np.uint8]
        if cfg.erode_px > 0:
            # With a stride the erosion runs on the subsampled ids, rounded to whole samples.
            radius = cfg.erosion_radius
            kernel = np.ones((2 * radius + 1, 2 * radius + 1), dtype=np.uint8)
            low = np.asarray(cv2.erode(ids, kernel, borderType=cv2.BORDER_REPLICATE), np.uint16)
            high = np.asarray(cv2.dilate(ids, kernel, borderType=cv2.BORDER_REPLICATE), np.uint16)
            same = np.asarray(cv2.compare(low, high, cv2.CMP_EQ), np.uint8)
            inside = np.greater(low, 0).view(np.uint8)
            interior = np.asarray(cv2.bitwise_and(same, inside), np.uint8)
        else:
            low = ids
            interior = np.greater(low, 0).view(np.uint8)
        dimg = np.ascontiguousarray(depth[::stride, ::stride]) if stride > 1 else depth
        if cfg.depth_unit == "mm":
            lo_mm = max(1, math.ceil(cfg.min_depth * 1000.0 - 1e-9))
            hi_mm = min(65535, math.floor(cfg.max_depth * 1000.0 + 1e-9))
            depth_ok = cv2.inRange(np.asarray(dimg, np.uint16), lo_mm, hi_mm)
        else:
            # inRange rejects NaN; infinities fall outside the range.
            depth_ok = cv2.inRange(np.asarray(dimg), cfg.min_depth, cfg.max_depth)
        valid = np.asarray(cv2.bitwise_and(interior, depth_ok), np.uint8)
        ray_x, ray_y, ray_x_image, ray_y_image = self._ray_tables(intrinsics)
        return _Grid(
            ids, low, interior, valid, dimg, ray_x, ray_y, ray_x_image, ray_y_image, stride
        )

    def _crops(self, grid: _Grid, infos: list[InstanceInfo]) -> list[_Instance]:
        """Each instance with the crop of the grid its pixel box covers.

        Boxes come from the segmentation and are only trusted once they are shown to hold
        every pixel of their instance: the crops' pixel counts must add up to all labelled
        pixels of the frame. Otherwise each count is checked against a histogram of the id
        image, and a box that misses pixels is recomputed from the id image.
        """
        stride = grid.stride
        height, width = grid.ids.shape
        instances: list[_Instance] = []
        in_crop: list[int] = []
        for info in infos:
            x0, y0, x1, y1 = info.box
            rows = slice(min(height, -(-y0 // stride)), min(height, -(-y1 // stride)))
            inst = _Instance(info, rows, _wide(-(-x0 // stride), -(-x1 // stride), width))
            instances.append(inst)
            crop = grid.ids[inst.rows, inst.cols]
            in_crop.append(int(np.count_nonzero(crop == info.instance_id)))
        if sum(in_crop) == cv2.countNonZero(grid.ids):
            return instances
        top = max(int(grid.ids.max(initial=0)), *(info.instance_id for info in infos))
        totals = np.bincount(grid.ids.ravel(), minlength=top + 1)
        for inst, count in zip(instances, in_crop, strict=True):
            if count == totals[inst.info.instance_id]:
                continue
            self.corrected_boxes += 1
            own = np.equal(grid.ids, inst.info.instance_id).view(np.uint8)
            x, y, w, h = cv2.boundingRect(own)
            inst.rows, inst.cols = slice(y, y + h), _wide(x, x + w, width)
            LOG.debug(
                "instance %d: box %s misses pixels; recomputed on the grid",
                inst.info.instance_id,
                inst.info.box,
            )
        return instances

    def _filtered(self, grid: _Grid, infos: list[InstanceInfo]) -> list[_Instance]:
        """Crop, erode, drop invalid depth and depth outliers for every instance."""
        cfg = self._config
        instances = self._crops(grid, infos)
        width = grid.ids.shape[1]
        for inst in instances:
            low = grid.low[inst.rows, inst.cols]
            if not low.size:
                continue
            inst.mask = np.equal(low, inst.info.instance_id).view(np.uint8)
            inst.mask &= grid.valid[inst.rows, inst.cols]
            inst.pixels = _surviving(inst.mask)
            crop = grid.depth[inst.rows, inst.cols]
            if cfg.depth_unit == "mm":
                inst.depth = crop.astype(np.float32) * np.float32(0.001)
            else:
                inst.depth = np.asarray(crop, np.float32)
        present = [inst for inst in instances if inst.count]
        if cfg.outlier_mad_k <= 0.0 or not present:
            return instances
        # Median depth and its spread from an evenly spread sample of each instance.
        index = _sample(present, cfg.sample_size, width)
        sample = np.take(grid.depth.ravel(), index).astype(np.float32)
        if cfg.depth_unit == "mm":
            sample *= np.float32(0.001)
        med = _median(sample)
        mad = _median(np.abs(sample - med[:, None]))
        band = np.maximum(np.float32(cfg.outlier_mad_k * 1.4826) * mad, cfg.outlier_min_band)
        for inst, m, b in zip(present, med.tolist(), band.tolist(), strict=True):
            assert inst.mask is not None and inst.depth is not None
            inst.mask &= cv2.inRange(inst.depth, m - b, m + b)
            inst.pixels = _surviving(inst.mask)
        return instances

    def _skip(self, grid: _Grid, inst: _Instance) -> SkippedInstance:
        """Why an instance with too few points gave no observation."""
        info = inst.info
        low = grid.low[inst.rows, inst.cols]
        if inst.count:
            reason = SkipReason.TOO_FEW_POINTS
        else:
            interior = grid.interior[inst.rows, inst.cols].view(np.bool_)
            inside = bool(np.any((low == info.instance_id) & interior))
            reason = SkipReason.NO_VALID_DEPTH if inside else SkipReason.EMPTY_MASK
        return SkippedInstance(info.instance_id, info.label, reason, inst.count)

    def _camera_points(self, grid: _Grid, index: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """Camera-frame points (..., 3) of flat grid indices of any shape."""
        width = grid.ids.shape[1]
        rows, cols = np.divmod(index, width)
        z = np.take(grid.depth.ravel(), index).astype(np.float32)
        if self._config.depth_unit == "mm":
            z *= np.float32(0.001)
        out = np.empty((*index.shape, 3), np.float32)
        np.multiply(grid.ray_x[cols], z, out=out[..., 0])
        np.multiply(grid.ray_y[rows], z, out=out[..., 1])
        out[..., 2] = z
        return out

    def _map_sample(
        self,
        grid: _Grid,
        instances: list[_Instance],
        k: int,
        rot_t: npt.NDArray[np.float32],
        trans: npt.NDArray[np.float32],
    ) -> npt.NDArray[np.float32]:
        """(n, 3, k) map coordinates of ``k`` points spread evenly over each instance."""
        index = _sample(instances, k, grid.ids.shape[1])
        mapped = self._camera_points(grid, index) @ rot_t + trans  # (n, k, 3)
        return np.ascontiguousarray(mapped.transpose(0, 2, 1))

    def _summarise(
        self,
        grid: _Grid,
        good: list[_Instance],
        pose: FloatArray,
        intrinsics: Intrinsics,
        *,
        stamp: float,
        camera: str,
    ) -> list[ObjectObservation]:
        """Boxes, centroids and oriented boxes of the instances with enough points.

        Erosion takes the same number of pixels off every side of a mask; each box gets them
        back at its instance's depth, along the image's axes (:meth:`_restore_eroded`).
        """
        cfg = self._config
        rot = pose[:3, :3]
        trans = pose[:3, 3]
        n = len(good)
        lo = np.empty((n, 3))
        hi = np.empty((n, 3))
        means = np.empty((n, 3)) if cfg.centroid == "mean" else None
        rows = rot.tolist()
        for row, inst in enumerate(good):
            assert inst.depth is not None and inst.mask is not None
            # A map coordinate is z * (r0 * x + r1 * y + r2) + t for the ray (x, y, 1), so the
            # exact box of all points is one masked min/max per axis over the crop.
            ray_x = grid.ray_x_image[inst.rows, inst.cols]
            ray_y = grid.ray_y_image[inst.rows, inst.cols]
            for axis, (r0, r1, r2) in enumerate(rows):
                coord = cv2.multiply(inst.depth, cv2.addWeighted(ray_x, r0, ray_y, r1, r2))
                low, high, _, _ = cv2.minMaxLoc(coord, inst.mask)
                lo[row, axis] = low + trans[axis]
                hi[row, axis] = high + trans[axis]
                if means is not None:
                    means[row, axis] = cv2.mean(coord, inst.mask)[0] + trans[axis]
        rot32 = rot.T.astype(np.float32)
        trans32 = trans.astype(np.float32)
        per_axis: npt.NDArray[np.float32] | None = None
        if means is not None:
            centroids = means
        else:
            per_axis = self._map_sample(grid, good, cfg.sample_size, rot32, trans32)
            if cfg.centroid == "median":
                centroids = _median(per_axis).astype(np.float64)
            else:
                k = per_axis.shape[2]
                cut = int(k * cfg.trim_fraction)
                trimmed = np.sort(per_axis, axis=2)[:, :, cut : k - cut]
                centroids = trimmed.mean(axis=2, dtype=np.float64)
        self._restore_eroded(lo, hi, centroids, pose, intrinsics)
        boxes = None
        if cfg.compute_obb:
            if per_axis is None or cfg.obb_sample_size != cfg.sample_size:
                per_axis = self._map_sample(grid, good, cfg.obb_sample_size, rot32, trans32)
            boxes = _oriented_boxes(per_axis)
        return ObjectObservation.many(
            labels=[inst.info.label for inst in good],
            centroids=centroids,
            bbox_min=lo,
            bbox_max=hi,
            stamp=stamp,
            scores=[inst.info.score for inst in good],
            point_counts=[inst.count for inst in good],
            detection_ids=[detection_id(camera, stamp, inst.info.instance_id) for inst in good],
            camera=camera,
            frame_id=cfg.map_frame,
            obb_centers=None if boxes is None else boxes[0],
            obb_extents=None if boxes is None else boxes[1],
            obb_rotations=None if boxes is None else boxes[2],
        )

    def _restore_eroded(self, lo: FloatArray, hi: FloatArray, centroids: FloatArray,
                        pose: FloatArray, intrinsics: Intrinsics) -> None:
        """Grow the boxes (in place) by what erosion took off the masks.

        A small object far away is a few pixels wide, and an erosion of two pixels a side
        left a 6.7 cm cup 2-5 cm wide in memory, too small to crop its keyframes by or to judge
        the room around it. The pixels come back as metres at the depth of the instance's
        centroid: ``r * z / f`` along the camera's x and y axes, whose share of each map axis
        the box's growth takes.
        """
        cfg = self._config
        if cfg.erode_px <= 0 or not len(lo):
            return
        eroded = cfg.erosion_radius * cfg.pixel_stride  # image pixels taken per side
        rot, trans = pose[:3, :3], pose[:3, 3]
        depth = np.maximum((centroids - trans) @ rot, 0.0)[:, 2]  # camera z of each centroid
        across = eroded * depth / intrinsics.fx
        down = eroded * depth / intrinsics.fy
        grow = (np.abs(rot[:, 0])[None, :] * across[:, None]
                + np.abs(rot[:, 1])[None, :] * down[:, None])
        lo -= grow
        hi += grow

    def deproject_mask(
        self,
        mask: npt.NDArray[np.bool_],
        depth: npt.NDArray[np.generic],
        intrinsics: Intrinsics | None,
        camera_to_map: npt.ArrayLike | None,
        *,
        label: str,
        stamp: float,
        score: float = 1.0,
        camera: str = "",
    ) -> ObjectObservation:
        """Deproject a single boolean mask.

        Raises:
            InsufficientPointsError: Fewer than ``min_points`` valid points.
            SegmentationError: ``mask`` is not a 2D boolean array.
            (and the frame errors of :meth:`deproject`)
        """
        if not isinstance(mask, np.ndarray) or mask.ndim != 2 or mask.dtype != np.bool_:
            raise SegmentationError("mask must be a 2D boolean array")
        count = int(np.count_nonzero(mask))
        ids = mask.astype(np.uint16)
        rows = np.flatnonzero(mask.any(axis=1))
        cols = np.flatnonzero(mask.any(axis=0))
        box = (
            (0, 0, 0, 0)
            if count == 0
            else (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
        )
        seg = SegmentationResult(ids, (InstanceInfo(1, label, score, box, count),), stamp, camera)
        result = self.deproject(seg, depth, intrinsics, camera_to_map)
        if not result.observations:
            reason = result.skipped[0]
            raise InsufficientPointsError(
                f"mask of {label!r} gave {reason.point_count} valid points "
                f"(minimum {self._config.min_points}): {reason.reason.value}"
            )
        return result.observations[0]


def _oriented_boxes(
    per_axis: npt.NDArray[np.float32],
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """PCA boxes of (n, 3, k) point samples (coordinates along the middle axis), one per row."""
    k = per_axis.shape[2]
    mean = per_axis.mean(axis=2, dtype=np.float64)  # (n, 3)
    centred = per_axis - mean[:, :, None].astype(np.float32)  # (n, 3, k)
    cov = np.einsum("nik,njk->nij", centred, centred).astype(np.float64) / k
    _, vecs = np.linalg.eigh(cov)
    axes = vecs[:, :, ::-1].copy()
    flip = np.linalg.det(axes) < 0.0
    axes[flip, :, 2] *= -1.0
    local = axes.transpose(0, 2, 1).astype(np.float32) @ centred  # (n, 3, k)
    lo = local.min(axis=2).astype(np.float64)
    hi = local.max(axis=2).astype(np.float64)
    centers = mean + (axes @ ((lo + hi) / 2.0)[:, :, None])[:, :, 0]
    return centers, hi - lo, axes


def _principal_axes(cov: FloatArray) -> FloatArray:
    """Right-handed eigenvector basis of a covariance, largest spread first."""
    _, vecs = np.linalg.eigh(cov)
    axes = np.asarray(vecs[:, ::-1], dtype=np.float64).copy()
    if np.linalg.det(axes) < 0.0:
        axes[:, 2] = -axes[:, 2]
    return axes


def oriented_box(points: npt.ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Oriented box of an (N, 3) point set from its principal axes.

    Returns:
        ``(center, extent, rotation)``: box centre (m), full side lengths along the box axes
        (m, largest spread first) and the 3x3 rotation whose columns are the axes
        (right-handed).
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or pts.shape[0] == 0:
        raise PerceptionError(f"need an (N>0, 3) point array, got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise PerceptionError("points must be finite")
    mean = pts.mean(axis=0)
    centred = pts - mean
    axes = _principal_axes(centred.T @ centred / pts.shape[0])
    local = centred @ axes
    lo = local.min(axis=0)
    hi = local.max(axis=0)
    return mean + axes @ ((lo + hi) / 2.0), hi - lo, axes


def deproject_pixels(
    uv: npt.ArrayLike,
    depth_m: npt.ArrayLike,
    intrinsics: Intrinsics,
    camera_to_map: npt.ArrayLike,
) -> FloatArray:
    """Back-project pixel coordinates with known depth (m) into map points (N, 3).

    Useful for single points (a VLM's pointing target through the aligned depth map).
    """
    pix = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
    z = np.asarray(depth_m, dtype=np.float64).reshape(-1)
    if z.shape[0] != pix.shape[0]:
        raise DepthError(f"{pix.shape[0]} pixels but {z.shape[0]} depths")
    if not np.all(np.isfinite(z)) or np.any(z <= 0.0):
        raise DepthError("depths must be finite and positive")
    pose = as_transform(camera_to_map, "camera_to_map")
    cam = np.stack(
        (
            (pix[:, 0] - intrinsics.cx) / intrinsics.fx * z,
            (pix[:, 1] - intrinsics.cy) / intrinsics.fy * z,
            z,
        ),
        axis=1,
    )
    return np.asarray(cam @ pose[:3, :3].T + pose[:3, 3], dtype=np.float64)
