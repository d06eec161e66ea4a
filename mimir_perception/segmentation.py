"""Segmentation results, the backend interface, overlap resolution and the simulation backend.

A :class:`SegmentationResult` is the compact form the ROS message carries: one uint16
instance-id image (0 = background, instance ``k`` uses id ``k``) plus a table of per-instance
label, score and pixel box. Backends turn an RGB image and a prompt vocabulary into one.
"""

from __future__ import annotations

import abc
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from mimir import settings
from mimir_perception.errors import SegmentationError
from mimir_perception.vocabulary import Vocabulary

LOG = logging.getLogger(__name__)

BoolArray = npt.NDArray[np.bool_]
MAX_INSTANCES = int(np.iinfo(np.uint16).max)


@dataclass(frozen=True)
class InstanceInfo:
    """Table row of one instance.

    Attributes:
        instance_id: Value of the instance's pixels in the id image (1..65535).
        label: Vocabulary label.
        score: Confidence in [0, 1].
        box: Pixel box ``(x_min, y_min, x_max, y_max)``, inclusive-exclusive
            (``x_max = last column + 1``).
        pixel_count: Number of pixels carrying ``instance_id``; None where they were not
            counted (a decoder whose consumer works from the id image needs no count).
    """

    instance_id: int
    label: str
    score: float
    box: tuple[int, int, int, int]
    pixel_count: int | None

    def __post_init__(self) -> None:
        if not 1 <= int(self.instance_id) <= MAX_INSTANCES:
            raise SegmentationError(f"instance_id must lie in 1..65535, got {self.instance_id}")
        if not isinstance(self.label, str) or not self.label.strip():
            raise SegmentationError("instance label must be a non-empty string")
        if not (math.isfinite(float(self.score)) and 0.0 <= float(self.score) <= 1.0):
            raise SegmentationError(f"score must lie in [0, 1], got {self.score!r}")
        x0, y0, x1, y1 = (int(v) for v in self.box)
        if x1 < x0 or y1 < y0:
            raise SegmentationError(f"box {self.box} has negative size")
        object.__setattr__(self, "box", (x0, y0, x1, y1))
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "instance_id", int(self.instance_id))
        if self.pixel_count is not None:
            object.__setattr__(self, "pixel_count", int(self.pixel_count))


@dataclass(frozen=True)
class SegmentationResult:
    """Instances found in one image.

    Attributes:
        instance_ids: (H, W) uint16 image, 0 = background.
        instances: One row per instance id present.
        stamp: Stamp of the source image (s).
        camera: Name of the source camera.
    """

    instance_ids: npt.NDArray[np.uint16]
    instances: tuple[InstanceInfo, ...]
    stamp: float = 0.0
    camera: str = ""
    _index: dict[int, InstanceInfo] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        ids = self.instance_ids
        if not isinstance(ids, np.ndarray) or ids.ndim != 2 or ids.dtype != np.uint16:
            raise SegmentationError("instance_ids must be a 2D uint16 array")
        if not math.isfinite(float(self.stamp)):
            raise SegmentationError(f"stamp must be finite, got {self.stamp!r}")
        index: dict[int, InstanceInfo] = {}
        for info in self.instances:
            if info.instance_id in index:
                raise SegmentationError(f"instance id {info.instance_id} appears twice")
            index[info.instance_id] = info
        object.__setattr__(self, "_index", index)

    @property
    def shape(self) -> tuple[int, int]:
        """Image shape ``(height, width)``."""
        return (int(self.instance_ids.shape[0]), int(self.instance_ids.shape[1]))

    def __len__(self) -> int:
        return len(self.instances)

    def info(self, instance_id: int) -> InstanceInfo:
        """Table row of ``instance_id``."""
        try:
            return self._index[int(instance_id)]
        except KeyError as err:
            raise SegmentationError(f"no instance with id {instance_id}") from err

    def mask(self, instance_id: int) -> BoolArray:
        """Boolean mask of one instance."""
        self.info(instance_id)
        return np.asarray(self.instance_ids == instance_id)

    def validate(self) -> None:
        """Check that the table and the id image agree (ids, pixel counts and boxes).

        Raises:
            SegmentationError: On any disagreement.
        """
        counts = np.bincount(self.instance_ids.ravel(), minlength=MAX_INSTANCES + 1)
        present = set(np.flatnonzero(counts[1:]) + 1)
        listed = set(self._index)
        if present - listed:
            raise SegmentationError(
                f"id image holds ids without a table row: {sorted(present - listed)}"
            )
        for info in self.instances:
            if info.pixel_count is not None and counts[info.instance_id] != info.pixel_count:
                raise SegmentationError(
                    f"instance {info.instance_id}: table says {info.pixel_count} pixels, "
                    f"image has {counts[info.instance_id]}"
                )
            if counts[info.instance_id]:
                box = _box_of(self.instance_ids == info.instance_id)
                if box != info.box:
                    raise SegmentationError(
                        f"instance {info.instance_id}: box {info.box} differs from mask box {box}"
                    )

    @classmethod
    def empty(
        cls, height: int, width: int, stamp: float = 0.0, camera: str = ""
    ) -> SegmentationResult:
        """A result with no instances."""
        return cls(np.zeros((height, width), dtype=np.uint16), (), stamp, camera)


def _box_of(mask: BoolArray) -> tuple[int, int, int, int]:
    rows = np.flatnonzero(mask.any(axis=1))
    cols = np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return (0, 0, 0, 0)
    return (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)


def compose_instances(
    masks: Sequence[BoolArray] | npt.NDArray[np.bool_],
    labels: Sequence[str],
    scores: Sequence[float],
    *,
    min_pixels: int = 1,
    max_instances: int = 256,
    stamp: float = 0.0,
    camera: str = "",
) -> SegmentationResult:
    """Merge possibly overlapping candidate masks into one instance-id image.

    Candidates are visited by decreasing score; each claims the pixels of its mask that no
    better candidate holds. A candidate left with fewer than ``min_pixels`` pixels claims
    nothing (its pixels stay free for weaker candidates). At most ``max_instances`` instances
    are kept (the best ones); ids are assigned 1..N in score order.

    Raises:
        SegmentationError: On inconsistent lengths, shapes or bad scores.
    """
    n = len(labels)
    if len(scores) != n or len(masks) != n:
        raise SegmentationError(
            f"masks ({len(masks)}), labels ({n}) and scores ({len(scores)}) must have equal length"
        )
    if min_pixels < 1 or not 1 <= max_instances <= MAX_INSTANCES:
        raise SegmentationError("min_pixels must be >= 1 and max_instances in 1..65535")
    if n == 0:
        raise SegmentationError("compose_instances needs at least one mask to know the image size")
    stack = np.asarray(masks)
    if stack.ndim != 3:
        raise SegmentationError(f"masks must be N x H x W, got shape {stack.shape}")
    if stack.dtype != np.bool_:
        stack = stack.astype(bool)
    score_arr = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(score_arr)) or np.any((score_arr < 0) | (score_arr > 1)):
        raise SegmentationError("scores must be finite and in [0, 1]")
    height, width = int(stack.shape[1]), int(stack.shape[2])
    ids = np.zeros((height, width), dtype=np.uint16)
    claimed = np.zeros((height, width), dtype=bool)
    rows: list[InstanceInfo] = []
    for k in np.argsort(-score_arr, kind="stable"):
        if len(rows) >= max_instances:
            LOG.debug("instance cap %d reached, dropping remaining candidates", max_instances)
            break
        free = stack[k] & ~claimed
        count = int(np.count_nonzero(free))
        if count < min_pixels:
            continue
        new_id = len(rows) + 1
        ids[free] = new_id
        claimed |= free
        rows.append(InstanceInfo(new_id, labels[k], float(score_arr[k]), _box_of(free), count))
    return SegmentationResult(ids, tuple(rows), stamp, camera)


@dataclass(frozen=True)
class SegmenterConfig(settings.Checked, section="segmenter", error=SegmentationError,
                      positive_int=("min_pixels",), within={"max_instances": (1, MAX_INSTANCES)}):
    """Settings common to every segmentation backend.

    Attributes:
        min_pixels: Instances with fewer pixels (after overlap resolution) are dropped.
        max_instances: At most this many instances per image (best scores kept).
    """

    min_pixels: int = 50
    max_instances: int = 256


def check_rgb(image: npt.NDArray[np.generic]) -> npt.NDArray[np.uint8]:
    """Validate an (H, W, 3) uint8 RGB image."""
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3:
        shape = getattr(image, "shape", None)
        raise SegmentationError(f"image must be an H x W x 3 array, got shape {shape}")
    if image.dtype != np.uint8:
        raise SegmentationError(f"image must be uint8 RGB, got dtype {image.dtype}")
    if image.shape[0] == 0 or image.shape[1] == 0:
        raise SegmentationError("image is empty")
    return np.asarray(image, dtype=np.uint8)


class SegmentationBackend(abc.ABC):
    """Turns an RGB image into labelled instances for a prompt vocabulary."""

    @abc.abstractmethod
    def segment(
        self,
        image: npt.NDArray[np.uint8],
        vocabulary: Vocabulary,
        stamp: float = 0.0,
        camera: str = "",
    ) -> SegmentationResult:
        """Segment ``image`` (H x W x 3 uint8 RGB) for every category of ``vocabulary``."""


class SimGroundTruthBackend:
    """Segmentation from the simulator's per-pixel id image (no model).

    The renderer gives each pixel the id of the geom (or body) it shows. ``labels`` maps ids to
    vocabulary labels; ids absent from it are background. ``groups`` optionally merges several
    ids into one instance (e.g. every geom of one cabinet maps to ``"cabinet_1"``); ids without
    a group form their own instance.
    """

    def __init__(
        self,
        labels: Mapping[int, str],
        groups: Mapping[int, str] | None = None,
        config: SegmenterConfig | None = None,
    ) -> None:
        self._config = config or SegmenterConfig()
        for key, label in labels.items():
            if isinstance(key, bool) or not isinstance(key, (int, np.integer)) or key < 0:
                raise SegmentationError(f"render ids must be non-negative integers, got {key!r}")
            if not isinstance(label, str) or not label.strip():
                raise SegmentationError(f"label of render id {key} must be a non-empty string")
        self._labels = {int(k): v for k, v in labels.items()}
        self._groups = {int(k): v for k, v in (groups or {}).items()}
        unknown = set(self._groups) - set(self._labels)
        if unknown:
            raise SegmentationError(f"groups name ids without a label: {sorted(unknown)}")

    def segment_ids(
        self,
        render_ids: npt.NDArray[np.integer],
        vocabulary: Vocabulary | None = None,
        stamp: float = 0.0,
        camera: str = "",
    ) -> SegmentationResult:
        """Convert a render id image into a :class:`SegmentationResult`.

        Args:
            render_ids: (H, W) integer ids, or MuJoCo's (H, W, 2) segmentation render
                (channel 0 = object id, -1 = nothing).
            vocabulary: If given, labels outside it are treated as background.
            stamp: Stamp of the rendered frame (s).
            camera: Camera name.
        """
        arr = np.asarray(render_ids)
        if arr.ndim == 3 and arr.shape[2] == 2:
            arr = arr[:, :, 0]
        if arr.ndim != 2 or not np.issubdtype(arr.dtype, np.integer):
            raise SegmentationError(
                f"render ids must be an H x W integer image, got {arr.shape} {arr.dtype}"
            )
        height, width = arr.shape
        if height == 0 or width == 0:
            raise SegmentationError("render id image is empty")
        keys: list[str] = []
        key_index: dict[str, int] = {}
        key_label: list[str] = []
        mapped_ids: list[int] = []
        mapped_keys: list[int] = []
        for render_id, label in sorted(self._labels.items()):
            if vocabulary is not None and label not in vocabulary:
                continue
            key = self._groups.get(render_id, f"{label}#{render_id}")
            if key not in key_index:
                key_index[key] = len(keys)
                keys.append(key)
                key_label.append(label)
            elif key_label[key_index[key]] != label:
                raise SegmentationError(
                    f"group {key!r} mixes labels {key_label[key_index[key]]!r} and {label!r}"
                )
            mapped_ids.append(render_id)
            mapped_keys.append(key_index[key] + 1)
        if not mapped_ids:
            return SegmentationResult.empty(height, width, stamp, camera)
        # Lookup table from render id to candidate number (0 = background), applied in one pass.
        flat = arr.ravel().astype(np.int64)
        lut_size = max(*mapped_ids, int(flat.max(initial=0))) + 1
        lut = np.zeros(lut_size, dtype=np.int64)
        lut[np.asarray(mapped_ids)] = np.asarray(mapped_keys)
        candidate = np.where(flat >= 0, lut[np.clip(flat, 0, None)], 0).reshape(height, width)
        counts = np.bincount(candidate.ravel(), minlength=len(keys) + 1)
        order = [k for k in range(1, len(keys) + 1) if counts[k] >= self._config.min_pixels]
        order = order[: self._config.max_instances]
        remap = np.zeros(len(keys) + 1, dtype=np.uint16)
        rows: list[InstanceInfo] = []
        for new_id, cand in enumerate(order, start=1):
            remap[cand] = new_id
        ids = remap[candidate]
        for new_id, cand in enumerate(order, start=1):
            rows.append(
                InstanceInfo(
                    new_id, key_label[cand - 1], 1.0, _box_of(ids == new_id), int(counts[cand])
                )
            )
        return SegmentationResult(ids, tuple(rows), stamp, camera)
