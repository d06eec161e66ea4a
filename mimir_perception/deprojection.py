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
   optionally, an oriented box from principal component analysis.
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

from mimir_memory.observations import ObjectObservation
from mimir_perception.camera import Intrinsics, as_transform
from mimir_perception.errors import (
    DepthError,
    ImageSizeMismatchError,
    InsufficientPointsError,
    MissingIntrinsicsError,
    MissingTransformError,
    PerceptionError,
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


@dataclass(frozen=True)
class DeprojectionConfig:
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

    def __post_init__(self) -> None:
        if self.depth_unit not in ("mm", "m"):
            raise DepthError(f"depth_unit must be 'mm' or 'm', got {self.depth_unit!r}")
        if not (0.0 <= self.min_depth < self.max_depth and math.isfinite(self.max_depth)):
            raise DepthError(
                f"need 0 <= min_depth < max_depth, got {self.min_depth}, {self.max_depth}"
            )
        if self.erode_px < 0 or self.pixel_stride < 1:
            raise PerceptionError("erode_px must be >= 0 and pixel_stride >= 1")
        if (
            self.min_points < 1
            or self.max_instances < 1
            or self.sample_size < 8
            or self.obb_sample_size < 8
        ):
            raise PerceptionError("min_points, max_instances must be >= 1 and sample sizes >= 8")
        if self.outlier_mad_k < 0.0 or self.outlier_min_band < 0.0:
            raise PerceptionError("outlier settings must be non-negative")
        if self.centroid not in ("median", "mean", "trimmed_mean"):
            raise PerceptionError(f"unknown centroid method {self.centroid!r}")
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
class _InteriorProbe:
    """Eroded id image and interior mask of a frame, to explain empty instances lazily."""

    ids: npt.NDArray[np.uint16]
    interior: npt.NDArray[np.uint8]

    def has_pixels(self, instance_id: int) -> bool:
        return bool(np.any((self.ids == instance_id) & (self.interior > 0)))


class Deprojector:
    """Turns segmentation + registered depth + camera pose into map-frame observations.

    Keeps a cache of per-pixel viewing rays for the last intrinsics it saw, so consecutive
    frames of one camera do not recompute them.
    """

    def __init__(self, config: DeprojectionConfig | None = None) -> None:
        self._config = config or DeprojectionConfig()
        self._ray_key: tuple[Intrinsics, int] | None = None
        self._rays: npt.NDArray[np.float32] | None = None

    @property
    def config(self) -> DeprojectionConfig:
        """The deprojection settings."""
        return self._config

    def _ray_table(self, intrinsics: Intrinsics) -> npt.NDArray[np.float32]:
        """(H*W, 2) table of ``((u - cx) / fx, (v - cy) / fy)`` per (strided) pixel."""
        stride = self._config.pixel_stride
        key = (intrinsics, stride)
        if self._rays is None or self._ray_key != key:
            us = np.arange(0, intrinsics.width, stride, dtype=np.float64)
            vs = np.arange(0, intrinsics.height, stride, dtype=np.float64)
            table = np.empty((vs.size, us.size, 2), dtype=np.float32)
            table[:, :, 0] = ((us - intrinsics.cx) / intrinsics.fx)[None, :]
            table[:, :, 1] = ((vs - intrinsics.cy) / intrinsics.fy)[:, None]
            self._rays = table.reshape(-1, 2)
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
        if intrinsics is None:
            raise MissingIntrinsicsError("no camera intrinsics for this frame")
        if camera_to_map is None:
            raise MissingTransformError("no camera-to-map transform at the image stamp")
        pose = as_transform(camera_to_map, "camera_to_map")
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

        points, counts, probe = self._valid_points(segmentation, depth, infos, intrinsics, pose)
        observations, obs_ids, more_skips = self._summarise(
            points, counts, probe, infos, stamp=frame_stamp, camera=frame_camera
        )
        skipped.extend(more_skips)
        return FrameObservations(
            tuple(observations), tuple(skipped), frame_stamp, frame_camera, tuple(obs_ids)
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
        if intrinsics is None:
            raise MissingIntrinsicsError("no camera intrinsics for this frame")
        if camera_to_map is None:
            raise MissingTransformError("no camera-to-map transform at the image stamp")
        pose = as_transform(camera_to_map, "camera_to_map")
        self._check_frame(segmentation, depth, intrinsics)
        infos = list(segmentation.instances)
        if not infos:
            return {}
        points, counts, _ = self._valid_points(segmentation, depth, infos, intrinsics, pose)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        return {
            info.instance_id: np.ascontiguousarray(points[:, bounds[k] : bounds[k + 1]].T)
            for k, info in enumerate(infos)
        }

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

    def _valid_points(
        self,
        segmentation: SegmentationResult,
        depth: npt.NDArray[np.generic],
        infos: list[InstanceInfo],
        intrinsics: Intrinsics,
        pose: FloatArray,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.intp], _InteriorProbe]:
        """Grouped map points of all kept instances.

        Returns:
            ``(points, counts, probe)``: (3, N) float32 map points grouped by slot (slot ``s``
            is ``infos[s - 1]``; groups follow slot order), the number of points of each slot
            (length ``len(infos)``), and a probe telling whether an instance kept any pixel
            after erosion (asked only for instances that produced no point).
        """
        cfg = self._config
        ids: npt.NDArray[np.uint16] = segmentation.instance_ids
        n = len(infos)
        top = max(int(ids.max(initial=0)), *(i.instance_id for i in infos))
        identity = top <= n and all(info.instance_id == k + 1 for k, info in enumerate(infos))
        stride = cfg.pixel_stride
        if stride > 1:
            ids = np.ascontiguousarray(ids[::stride, ::stride])
        low: npt.NDArray[np.uint16]
        interior: npt.NDArray[np.uint8]
        if cfg.erode_px > 0:
            # With a stride the erosion runs on the subsampled ids, rounded to whole samples.
            radius = max(1, round(cfg.erode_px / stride))
            kernel = np.ones((2 * radius + 1, 2 * radius + 1), dtype=np.uint8)
            low = np.asarray(cv2.erode(ids, kernel, borderType=cv2.BORDER_REPLICATE), np.uint16)
            high = np.asarray(cv2.dilate(ids, kernel, borderType=cv2.BORDER_REPLICATE), np.uint16)
            same = np.asarray(cv2.compare(low, high, cv2.CMP_EQ), np.uint8)
            # 0/1 values, so the final mask can be viewed as bool without a copy.
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
        sel = np.flatnonzero(valid.ravel().view(np.bool_))
        probe = _InteriorProbe(low, interior)
        raw = np.take(low.ravel(), sel)
        if identity:
            slots = raw
        else:
            # Instance id -> slot 1..n for kept instances; capped and stray ids map to 0.
            lut = np.zeros(top + 1, np.uint16)
            for slot, info in enumerate(infos, start=1):
                lut[info.instance_id] = slot
            slots = lut[raw]
            kept = slots > 0
            sel = sel[kept]
            slots = slots[kept]
        counts = np.bincount(slots, minlength=n + 1)[1:]
        # Stable sort of small integers is a radix sort; one byte is one pass.
        keys = slots.astype(np.uint8) if n < 256 else slots.astype(np.uint16)
        sel = np.take(sel, np.argsort(keys, kind="stable"))
        flat_depth = dimg.ravel()
        zf = np.take(flat_depth, sel).astype(np.float32, copy=False)
        if cfg.depth_unit == "mm":
            zf *= np.float32(0.001)
        if cfg.outlier_mad_k > 0.0 and sel.size:
            keep = self._depth_inliers(zf, counts)
            if not np.all(keep):
                sel = sel[keep]
                zf = zf[keep]
                present = counts > 0
                starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
                kept_counts = np.zeros_like(counts)
                kept_counts[present] = np.add.reduceat(keep, starts[present], dtype=np.intp)
                counts = kept_counts
        rays = np.take(self._ray_table(intrinsics), sel, axis=0)  # both components at once
        camera_points = np.empty((3, sel.size), dtype=np.float32)
        np.multiply(rays[:, 0], zf, out=camera_points[0])
        np.multiply(rays[:, 1], zf, out=camera_points[1])
        camera_points[2] = zf
        points = pose[:3, :3].astype(np.float32) @ camera_points
        points += pose[:3, 3].astype(np.float32)[:, None]
        return points, counts.astype(np.intp), probe

    def _sample_index(
        self, starts: npt.NDArray[np.intp], counts: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.intp]:
        """(n, K) indices spread evenly over each group (repeating when a group is small)."""
        k = self._config.sample_size
        steps = np.arange(k, dtype=np.int64)
        offsets = (steps[None, :] * counts[:, None].astype(np.int64)) // k
        return np.asarray(starts[:, None] + offsets, dtype=np.intp)

    def _depth_inliers(
        self, z: npt.NDArray[np.float32], counts: npt.NDArray[np.integer]
    ) -> npt.NDArray[np.bool_]:
        """Points whose depth lies within the robust band around their group's median."""
        cfg = self._config
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.intp)
        present = counts > 0
        med = np.zeros(counts.size, dtype=np.float32)
        band = np.full(counts.size, np.inf, dtype=np.float32)
        if np.any(present):
            sample = z[self._sample_index(starts[present], counts[present].astype(np.intp))]
            m = np.median(sample, axis=1)
            mad = np.median(np.abs(sample - m[:, None]), axis=1)
            med[present] = m
            band[present] = np.maximum(
                np.float32(cfg.outlier_mad_k * 1.4826) * mad, np.float32(cfg.outlier_min_band)
            )
        lower = np.repeat(med - band, counts)
        upper = np.repeat(med + band, counts)
        result: npt.NDArray[np.bool_] = (z >= lower) & (z <= upper)
        return result

    def _summarise(
        self,
        points: npt.NDArray[np.float32],
        counts: npt.NDArray[np.intp],
        probe: _InteriorProbe,
        infos: list[InstanceInfo],
        *,
        stamp: float,
        camera: str,
    ) -> tuple[list[ObjectObservation], list[int], list[SkippedInstance]]:
        cfg = self._config
        n = len(infos)
        skipped: list[SkippedInstance] = []
        good = counts >= cfg.min_points
        for i in np.flatnonzero(~good):
            info = infos[i]
            if counts[i] == 0 and not probe.has_pixels(info.instance_id):
                reason = SkipReason.EMPTY_MASK
            elif counts[i] == 0:
                reason = SkipReason.NO_VALID_DEPTH
            else:
                reason = SkipReason.TOO_FEW_POINTS
            skipped.append(SkippedInstance(info.instance_id, info.label, reason, int(counts[i])))
        if not np.any(good):
            return [], [], skipped
        g_idx = np.flatnonzero(good)
        g_counts = counts[g_idx].astype(np.intp)
        if g_idx.size != n:
            # Keep only the points of good groups so every reduceat span is exactly one group.
            points = points[:, np.repeat(good, counts)]
        g_starts = np.concatenate(([0], np.cumsum(g_counts)[:-1])).astype(np.intp)
        lo = np.minimum.reduceat(points, g_starts, axis=1).T.astype(np.float64)
        hi = np.maximum.reduceat(points, g_starts, axis=1).T.astype(np.float64)
        if cfg.centroid == "mean":
            sums = np.add.reduceat(points, g_starts, axis=1, dtype=np.float64).T
            centroids = sums / g_counts[:, None]
        else:
            sample = points[:, self._sample_index(g_starts, g_counts)].astype(np.float64)
            if cfg.centroid == "median":
                centroids = np.median(sample, axis=2).T
            else:
                k = sample.shape[2]
                cut = int(k * cfg.trim_fraction)
                centroids = np.sort(sample, axis=2)[:, :, cut : k - cut].mean(axis=2).T
        boxes = self._oriented_boxes(points, g_starts, g_counts) if cfg.compute_obb else None
        observations: list[ObjectObservation] = []
        obs_ids: list[int] = []
        for row, i in enumerate(g_idx):
            info = infos[i]
            obb_center = obb_extent = obb_rot = None
            if boxes is not None:
                obb_center, obb_extent, obb_rot = boxes[0][row], boxes[1][row], boxes[2][row]
            observations.append(
                ObjectObservation(
                    label=info.label,
                    centroid=centroids[row],
                    bbox_min=lo[row],
                    bbox_max=hi[row],
                    stamp=stamp,
                    score=info.score,
                    point_count=int(g_counts[row]),
                    camera=camera,
                    detection_id=detection_id(camera, stamp, info.instance_id),
                    frame_id=cfg.map_frame,
                    obb_center=obb_center,
                    obb_extent=obb_extent,
                    obb_rotation=obb_rot,
                )
            )
            obs_ids.append(info.instance_id)
        return observations, obs_ids, skipped

    def _oriented_boxes(
        self,
        points: npt.NDArray[np.float32],
        starts: npt.NDArray[np.intp],
        counts: npt.NDArray[np.intp],
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """PCA boxes of all groups at once from ``obb_sample_size`` points spread over each."""
        k = self._config.obb_sample_size
        steps = np.arange(k, dtype=np.int64)
        idx = starts[:, None] + (steps[None, :] * counts[:, None].astype(np.int64)) // k
        sample = points[:, idx]  # (3, n, k)
        mean = sample.mean(axis=2, dtype=np.float64)  # (3, n)
        centred = np.moveaxis(sample - mean[:, :, None].astype(np.float32), 0, 1)  # (n, 3, k)
        cov = (centred @ centred.transpose(0, 2, 1)).astype(np.float64) / k
        _, vecs = np.linalg.eigh(cov)
        axes = vecs[:, :, ::-1].copy()
        flip = np.linalg.det(axes) < 0.0
        axes[flip, :, 2] *= -1.0
        local = axes.transpose(0, 2, 1).astype(np.float32) @ centred  # (n, 3, k)
        lo = local.min(axis=2).astype(np.float64)
        hi = local.max(axis=2).astype(np.float64)
        centers = mean.T + (axes @ ((lo + hi) / 2.0)[:, :, None])[:, :, 0]
        return centers, hi - lo, axes

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
