"""Negative evidence: which remembered nodes a camera view should have shown and did not.

A frame that shows the place where memory last saw an object, with nothing in front of it, and
no detection of it, is evidence that the object is gone from there. :func:`expected_unseen`
finds those nodes for one frame; the scene graph node then records each as a miss
(:meth:`mimir_memory.world.WorldMemory.record_miss`).

The view (:class:`CameraView`) is what the camera could see: its pose in the map, its pinhole
intrinsics and image size, the farthest depth it measures, a coarse grid of the nearest valid
depth in each cell of the registered depth image (:func:`nearest_depth_grid` builds it), and the
labels the segmenter was looking for.

The check is conservative: every doubt means "not expected", since a wrong miss makes memory
forget an object that is still there. A node counts only when all of these hold:

* perception has seen it before (``observation_count`` >= 1) and memory does not already hold
  that it left its last place (``at_last_place`` is not False);
* no observation of this frame was associated with it;
* its label was among the labels sought (when the view names them) and is not a skipped label
  (fixtures: large furniture is seen in parts, never whole);
* nothing in memory hides it: no ancestor holds it as a ``container`` and it is not in the hand;
* its centroid lies in front of the camera within the range limits and projects into the image,
  at least the margin plus half its projected size away from every edge;
* its box spans at least ``min_size_px`` pixels in the image (smaller things go undetected);
* every grid cell its image box touches has a valid depth, and none is closer than the node's
  depth minus the occlusion tolerance (a nearer surface may hide part of it, and a partly hidden
  thing may be too small for the segmenter; an empty cell says nothing).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from mimir import settings
from mimir.labels import label_key, label_words
from mimir_memory.errors import ConfigError, InvalidValueError
from mimir_memory.graph import HAND_PARENT, SceneNode
from mimir_memory.world import AT_LAST_PLACE

HIDING_RELATIONS = frozenset({"container", "hand"})
"""Parent relations that hide a node from a camera outside its parent."""

DEFAULT_SKIP_LABELS: tuple[str, ...] = (
    "cabinet", "cupboard", "drawer", "fridge", "refrigerator", "microwave", "oven",
    "dishwasher", "shelf", "counter", "table", "sink", "chair", "door", "wall", "floor", "room",
)
"""Labels (or label words) of fixtures: seen in parts, never expected whole in one frame."""

_RIGID_TOLERANCE = 1e-3
_UNIT_SLACK = 1e-6
"""Rounding slack of limits in depth units (0.7 m / 0.001 m is 699.999... and means 700)."""


def grid_edges(size: int, cells: int) -> npt.NDArray[np.intp]:
    """First pixel of each of ``cells`` cells that split ``size`` pixels as evenly as possible.

    Cell ``i`` covers pixels ``edges[i]`` up to (not including) ``edges[i + 1]`` (or ``size``).
    """
    return (np.arange(cells, dtype=np.intp) * size) // cells


def nearest_depth_grid(
    depth: npt.NDArray[np.generic],
    rows: int,
    cols: int,
    *,
    scale: float = 1.0,
    min_depth: float = 0.0,
    max_depth: float = math.inf,
) -> npt.NDArray[np.float32]:
    """The nearest valid depth in each cell of a ``rows`` x ``cols`` grid over a depth image.

    Args:
        depth: Registered depth image (2D), integer (e.g. ``uint16`` millimetres) or float.
        rows: Grid rows, 1 to the image height.
        cols: Grid columns, 1 to the image width.
        scale: Metres per depth unit (0.001 for millimetres).
        min_depth: Nearest valid depth (m); nearer values count as no depth.
        max_depth: Farthest valid depth (m); farther values count as no depth.

    Returns:
        A float32 array of shape ``(rows, cols)`` in metres; NaN where a cell holds no valid
        depth (zero, NaN, infinite or outside the limits). Cells follow :func:`grid_edges`.

    Raises:
        InvalidValueError: Not a 2D numeric image, a grid larger than the image or empty, or a
            scale or limits that are not finite numbers in order.
    """
    arr = np.asarray(depth)
    if arr.ndim != 2 or arr.size == 0 or not (
            np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)):
        raise InvalidValueError(
            f"depth must be a non-empty 2D numeric image, got shape {arr.shape} of {arr.dtype}")
    height, width = arr.shape
    _check_grid_size(rows, cols, width, height)
    if not (math.isfinite(scale) and scale > 0.0):
        raise InvalidValueError(f"scale must be a finite number > 0, got {scale!r}")
    if not (math.isfinite(min_depth) and min_depth >= 0.0 and max_depth > min_depth):
        raise InvalidValueError(
            f"depth limits must satisfy 0 <= min_depth < max_depth, got {min_depth!r}, "
            f"{max_depth!r}")
    row_edges, col_edges = grid_edges(height, rows), grid_edges(width, cols)
    if np.issubdtype(arr.dtype, np.unsignedinteger):
        # Stay in the image's unsigned units (2-byte pixels for millimetres): subtracting the
        # lowest valid value wraps every smaller one (zero included) round to a huge value, so
        # a plain minimum prefers any valid depth and a cell without one ends above the limit.
        low = max(1, math.ceil(min_depth / scale - _UNIT_SLACK))
        top = int(np.iinfo(arr.dtype).max)
        high = top
        if math.isfinite(max_depth):
            high = min(top, math.floor(max_depth / scale + _UNIT_SLACK))
        if low > high:
            return np.full((rows, cols), np.nan, np.float32)
        cells = _cell_minimum(arr - arr.dtype.type(low), row_edges, col_edges)
        grid = (cells.astype(np.float32) + np.float32(low)) * np.float32(scale)
        grid[cells > high - low] = np.nan
        return grid
    # Floats (and signed integers, rare in depth images): NaN, zero and too-near values become
    # infinite; a cell whose minimum ends beyond the far limit has no valid depth.
    values = arr.astype(np.float32, copy=False)
    low_units = max(min_depth / scale, float(np.finfo(np.float32).tiny))
    with np.errstate(invalid="ignore"):
        masked = np.where(values >= np.float32(low_units), values, np.float32(np.inf))
    cells = _cell_minimum(masked, row_edges, col_edges)
    grid = cells * np.float32(scale)
    with np.errstate(invalid="ignore"):
        grid[~(cells <= np.float32(max_depth / scale))] = np.nan
    return grid.astype(np.float32, copy=False)


def _cell_minimum(values: npt.NDArray[Any], row_edges: npt.NDArray[np.intp],
                  col_edges: npt.NDArray[np.intp]) -> npt.NDArray[Any]:
    """Minimum of each grid cell: a contiguous minimum per band of rows, then per column span
    (a few times faster than reducing the whole image along its rows)."""
    height, width = values.shape
    bands = np.empty((len(row_edges), width), values.dtype)
    ends = [*row_edges[1:].tolist(), height]
    for index, (start, end) in enumerate(zip(row_edges.tolist(), ends, strict=True)):
        np.min(values[start:end], axis=0, out=bands[index])
    return np.minimum.reduceat(bands, col_edges, axis=1)


def _check_grid_size(rows: object, cols: object, width: int, height: int) -> None:
    for name, value, limit in (("rows", rows, height), ("cols", cols, width)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not (
                1 <= int(value) <= limit):
            raise InvalidValueError(
                f"depth grid {name} must be an integer in [1, {limit}] for a {width}x{height} "
                f"image, got {value!r}")


def _finite(value: object, name: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise InvalidValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or (positive and number <= 0.0):
        what = "a finite number > 0" if positive else "finite"
        raise InvalidValueError(f"{name} must be {what}, got {value!r}")
    return number


def _size(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or int(value) < 1:
        raise InvalidValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True, eq=False)
class CameraView:
    """What one camera could see when it made a frame.

    Attributes:
        camera_to_map: 4x4 rigid pose of the camera optical frame (z forward, x right, y down)
            in the map: it maps camera coordinates into map coordinates.
        fx: Focal length along x (px).
        fy: Focal length along y (px).
        cx: Principal point x (px).
        cy: Principal point y (px).
        width: Image width (px).
        height: Image height (px).
        max_range_m: Farthest depth the camera measures (m).
        depth_min_m: ``(rows, cols)`` grid of the nearest valid depth in each cell of the
            registered depth image (m, float32), cells as :func:`grid_edges` splits the image;
            NaN where a cell has no valid depth.
        labels_sought: Labels the segmenter looked for in this frame; empty when unknown.

    Arrays are copied and made read-only. Raises :class:`InvalidValueError` for a pose that is
    not a finite rigid transform, a focal length that is not positive, a non-finite principal
    point, an empty image, a range that is not positive, a grid that is not 2D, is empty, has
    more cells than the image has pixels along a side, or holds negative or infinite depths, and
    labels that are not non-empty strings.
    """

    camera_to_map: npt.NDArray[np.float64]
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int
    max_range_m: float
    depth_min_m: npt.NDArray[np.float32]
    labels_sought: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            pose = np.array(self.camera_to_map, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise InvalidValueError(f"camera_to_map must be a 4x4 matrix: {err}") from err
        if pose.shape != (4, 4):
            raise InvalidValueError(f"camera_to_map must be 4x4, got shape {pose.shape}")
        if not np.all(np.isfinite(pose)):
            raise InvalidValueError("camera_to_map must be finite")
        rotation = pose[:3, :3]
        if (not np.allclose(pose[3], (0.0, 0.0, 0.0, 1.0), atol=_RIGID_TOLERANCE)
                or not np.allclose(rotation.T @ rotation, np.eye(3), atol=_RIGID_TOLERANCE)
                or np.linalg.det(rotation) <= 0.0):
            raise InvalidValueError("camera_to_map must be a rigid transform (rotation and "
                                    "translation, last row 0 0 0 1)")
        pose.setflags(write=False)
        object.__setattr__(self, "camera_to_map", pose)
        for name in ("fx", "fy"):
            object.__setattr__(self, name, _finite(getattr(self, name), name, positive=True))
        for name in ("cx", "cy"):
            object.__setattr__(self, name, _finite(getattr(self, name), name))
        width, height = _size(self.width, "width"), _size(self.height, "height")
        object.__setattr__(self, "width", width)
        object.__setattr__(self, "height", height)
        object.__setattr__(self, "max_range_m",
                           _finite(self.max_range_m, "max_range_m", positive=True))
        try:
            grid = np.array(self.depth_min_m, dtype=np.float32)
        except (TypeError, ValueError) as err:
            raise InvalidValueError(f"depth_min_m must be a grid of numbers: {err}") from err
        if grid.ndim != 2:
            raise InvalidValueError(f"depth_min_m must be a 2D grid, got shape {grid.shape}")
        _check_grid_size(grid.shape[0], grid.shape[1], width, height)
        known = grid[~np.isnan(grid)]
        if known.size and (not np.all(np.isfinite(known)) or float(known.min()) < 0.0):
            raise InvalidValueError("depth_min_m must hold depths >= 0 (m) or NaN")
        grid.setflags(write=False)
        object.__setattr__(self, "depth_min_m", grid)
        labels = self.labels_sought
        if isinstance(labels, str) or not all(
                isinstance(label, str) and label.strip() for label in labels):
            raise InvalidValueError(
                f"labels_sought must be a list of non-empty strings, got {labels!r}")
        object.__setattr__(self, "labels_sought", tuple(label.strip() for label in labels))

    @classmethod
    def from_flat(
        cls,
        *,
        camera_to_map: npt.ArrayLike,
        fx: float,
        fy: float,
        cx: float,
        cy: float,
        width: int,
        height: int,
        max_range_m: float,
        depth_rows: int,
        depth_cols: int,
        depth_min_m: Sequence[float] | npt.ArrayLike,
        labels_sought: Iterable[str] = (),
    ) -> CameraView:
        """A view whose depth grid comes as a flat row-major list (as messages carry it).

        Raises:
            InvalidValueError: The list does not hold ``depth_rows * depth_cols`` values, or
                anything the constructor refuses.
        """
        rows, cols = _size(depth_rows, "depth_rows"), _size(depth_cols, "depth_cols")
        try:
            flat = np.asarray(depth_min_m, dtype=np.float32).ravel()
        except (TypeError, ValueError) as err:
            raise InvalidValueError(f"depth_min_m must be numbers: {err}") from err
        if flat.size != rows * cols:
            raise InvalidValueError(
                f"depth_min_m holds {flat.size} values, a {rows}x{cols} grid needs {rows * cols}")
        return cls(
            camera_to_map=np.asarray(camera_to_map, dtype=np.float64),
            fx=fx, fy=fy, cx=cx, cy=cy, width=width, height=height, max_range_m=max_range_m,
            depth_min_m=flat.reshape(rows, cols),
            labels_sought=tuple(labels_sought),
        )

    @property
    def grid_shape(self) -> tuple[int, int]:
        """Rows and columns of the depth grid."""
        rows, cols = self.depth_min_m.shape
        return int(rows), int(cols)


@dataclass(frozen=True)
class VisibilityConfig(settings.Checked, section="visibility", error=ConfigError,
                       positive=("max_range_m",),
                       non_negative=("margin_px", "min_range_m", "occlusion_tolerance_m",
                                     "min_size_px")):
    """When a remembered node counts as expected in a view.

    Attributes:
        margin_px: Least distance (px) between the image border and the node's projected
            extent (its centroid plus half its projected size): objects cut by the border are
            often not segmented.
        min_range_m: Nearest depth of a node that counts (m); closer ones may be cut or blurred.
        max_range_m: Farthest depth of a node that counts (m); the view's own range limits it
            further. Detection grows unreliable with distance.
        occlusion_tolerance_m: A grid cell whose nearest depth is closer than the node's depth
            minus this hides the node (m). It absorbs the object's own thickness and the surface
            it stands on.
        min_size_px: Least projected size of the node's box (its longest side, px); smaller
            things go undetected.
        skip_labels: Labels never expected whole: a node is skipped when its label, or one word
            of it (a plural ``s`` forgiven), is one of these (fixtures such as ``counter``
            catch ``kitchen counter``).
    """

    margin_px: float = 10.0
    min_range_m: float = 0.3
    max_range_m: float = 4.0
    occlusion_tolerance_m: float = 0.1
    min_size_px: float = 12.0
    skip_labels: tuple[str, ...] = DEFAULT_SKIP_LABELS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_range_m >= self.max_range_m:
            raise ConfigError(
                f"visibility.min_range_m ({self.min_range_m}) must be below max_range_m "
                f"({self.max_range_m})")
        object.__setattr__(self, "skip_labels", settings.strings(
            "visibility.skip_labels", self.skip_labels, ConfigError))


class ExpectedMiss(NamedTuple):
    """A node the view should have shown: its id and why it counts (plain words)."""

    node_id: str
    reason: str


def label_matches(label: str, keys: Collection[str]) -> bool:
    """Whether ``label`` or one of its words (a plural ``s`` forgiven) is among ``keys``.

    ``keys`` are label keys (:func:`mimir.labels.label_key`).
    """
    if not keys:
        return False
    if label_key(label) in keys:
        return True
    return any(word in keys or word.removesuffix("s") in keys for word in label_words(label))


def hidden_by_memory(node: SceneNode, nodes: dict[str, SceneNode]) -> bool:
    """Whether memory puts the node where no camera outside it sees it: in the hand, or inside
    a container (directly or through any ancestor, e.g. on a plate inside a cabinet)."""
    current: SceneNode | None = node
    visited: set[str] = set()
    while current is not None and current.node_id not in visited:
        visited.add(current.node_id)
        if current.parent == HAND_PARENT or current.parent_relation in HIDING_RELATIONS:
            return True
        current = nodes.get(current.parent) if current.parent else None
    return False


def _away(node: SceneNode) -> bool:
    prop = node.properties.get(AT_LAST_PLACE)
    return prop is not None and prop.value is False


def _pixel_span(centre: float, half: float, size: int) -> tuple[int, int]:
    """First and last pixel (clipped to the image) of ``centre +- half``."""
    return (min(max(math.floor(centre - half + 0.5), 0), size - 1),
            min(max(math.floor(centre + half + 0.5), 0), size - 1))


def expected_unseen(
    nodes: Iterable[SceneNode],
    view: CameraView,
    seen_ids: Collection[str],
    cfg: VisibilityConfig | None = None,
    skip_labels: Collection[str] = (),
) -> list[ExpectedMiss]:
    """Nodes the view should have shown but no observation of its frame matched.

    See the module docstring for every condition.

    Args:
        nodes: The scene graph's nodes (all of them: parents are looked up among them).
        view: The frame's view.
        seen_ids: Ids of the nodes this frame's observations were associated with.
        cfg: The thresholds (defaults when None).
        skip_labels: Labels skipped in this frame on top of ``cfg.skip_labels`` (e.g. labels
            of observations that were refused, whose node may well have been seen).

    Returns:
        One :class:`ExpectedMiss` per node, sorted by node id.
    """
    cfg = cfg if cfg is not None else VisibilityConfig()
    by_id = {node.node_id: node for node in nodes}
    if not by_id:
        return []
    # Geometry first, for every node at once: most of a large memory lies outside any one view,
    # and the per-node checks below (labels, parents, depth cell) then run on the few in it.
    order = sorted(by_id)
    pose = view.camera_to_map
    # one flat pass (np.array over a list of tuples costs several times more)
    packed = np.fromiter(
        chain.from_iterable((*by_id[i].centroid, *by_id[i].bbox_min, *by_id[i].bbox_max)
                            for i in order),
        dtype=np.float64, count=9 * len(order)).reshape(len(order), 9)
    centroids, sides = packed[:, 0:3], packed[:, 6:9] - packed[:, 3:6]
    # map -> camera: R^T (p - t), written for row vectors
    in_camera = (centroids - pose[:3, 3]) @ pose[:3, :3]
    depth = in_camera[:, 2]
    far = min(cfg.max_range_m, view.max_range_m)
    in_range = (depth >= max(cfg.min_range_m, 1e-6)) & (depth <= far)
    safe = np.where(in_range, depth, 1.0)
    u = view.fx * in_camera[:, 0] / safe + view.cx
    v = view.fy * in_camera[:, 1] / safe + view.cy
    size_px = np.max(np.abs(sides), axis=1) * min(view.fx, view.fy) / safe
    border = cfg.margin_px + 0.5 * size_px
    inside = ((u >= border) & (u <= view.width - 1 - border)
              & (v >= border) & (v <= view.height - 1 - border))
    in_view = np.flatnonzero(in_range & inside & (size_px >= cfg.min_size_px))
    if in_view.size == 0:
        return []
    sought = {label_key(label) for label in view.labels_sought}
    skip = {label_key(label) for label in (*cfg.skip_labels, *skip_labels)}
    seen = set(seen_ids)
    rows, cols = view.grid_shape
    row_edges, col_edges = grid_edges(view.height, rows), grid_edges(view.width, cols)
    misses: list[ExpectedMiss] = []
    for index in in_view.tolist():
        node = by_id[order[index]]
        if (node.node_id in seen or node.observation_count < 1 or _away(node)
                or (sought and label_key(node.label) not in sought)
                or label_matches(node.label, skip) or hidden_by_memory(node, by_id)):
            continue
        # every grid cell the node's image box touches must show nothing nearer than the node:
        # a part hidden behind a door frame or another object can leave too little of it for
        # the segmenter, so only a wholly clear view counts
        half = 0.5 * float(size_px[index])
        lo_row, hi_row = (int(np.searchsorted(row_edges, y, side="right")) - 1
                          for y in _pixel_span(float(v[index]), half, view.height))
        lo_col, hi_col = (int(np.searchsorted(col_edges, x, side="right")) - 1
                          for x in _pixel_span(float(u[index]), half, view.width))
        cells = view.depth_min_m[lo_row:hi_row + 1, lo_col:hi_col + 1]
        z = float(depth[index])
        if np.isnan(cells).any():
            continue  # a cell without depth says nothing about what hides the node
        nearest = float(cells.min())
        if nearest < z - cfg.occlusion_tolerance_m:
            continue  # a nearer surface may hide part of it
        misses.append(ExpectedMiss(
            node.node_id,
            f"expected in view at {z:.2f} m depth (pixel {u[index]:.0f}, {v[index]:.0f}; "
            f"about {size_px[index]:.0f} px) with nothing nearer there (nearest depth "
            f"{nearest:.2f} m), but not detected"))
    return misses


__all__ = [
    "DEFAULT_SKIP_LABELS", "HIDING_RELATIONS", "CameraView", "ExpectedMiss",
    "VisibilityConfig", "expected_unseen", "grid_edges", "hidden_by_memory", "label_matches",
    "nearest_depth_grid",
]
