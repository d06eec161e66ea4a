"""Keyframe store: selected RGB frames linked to scene graph nodes (messymem.md §3.3, B.2).

Each keyframe keeps a full image and a thumbnail as files named after the hash of the pixels
(never after a path from a message or a model answer), and a metadata row in the keyframe
database, which the keyframe node owns. Every change is also an event of the database's
append-only log, so the index can be rebuilt from it.

Perception-triggered frames are dropped when blank, blurry or a near-duplicate (dHash) of a
recent frame of the same camera showing the same nodes; interaction-triggered frames are always
kept. Analyzer labels are appended later; images are never overwritten.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from mimir.bounds import BoundsError
from mimir.transforms import InvalidTransformError, compose, quaternion_to_matrix
from mimir_memory.config import MemoryConfig
from mimir_memory.errors import (
    ImageTooLargeError,
    InvalidImageError,
    InvalidValueError,
    ReadOnlyStoreError,
    StorageError,
    UnknownKeyframeError,
)
from mimir_memory.events import (
    EventKind,
    EventLog,
    Evidence,
    MemoryEvent,
    Source,
    canonical_json,
)
from mimir_memory.files import write_file_atomic
from mimir_memory.graph import finite_point
from mimir_memory.locking import synchronized
from mimir_memory.schema import DatabaseHandle, Store, open_database, storage_error

LOG = logging.getLogger(__name__)

Image = npt.NDArray[np.uint8]
AnyImage = npt.NDArray[Any]
InstanceImage = npt.NDArray[np.uint16]


class Trigger(StrEnum):
    """Why a keyframe was saved (messymem.md table 4)."""

    INTERACTION_PRE = "interaction_pre"
    INTERACTION_DURING = "interaction_during"
    INTERACTION_POST = "interaction_post"
    INTERACTION_PEAK = "interaction_peak"
    NEW_NODE = "new_node"
    NODE_UPDATE = "node_update"
    OPERATOR = "operator"

    @property
    def interaction(self) -> bool:
        """True for interaction frames."""
        return self.value.startswith("interaction")

    @property
    def kept(self) -> bool:
        """True for frames asked for on purpose (an interaction's or an operator's): they skip
        the blank/blurry/duplicate filters and retention never deletes them."""
        return self.interaction or self is Trigger.OPERATOR


@dataclass(frozen=True)
class KeyframeLabel:
    """A free-text label of a keyframe with its origin (``analyzer``, ``perception``...)."""

    label: str
    source: str
    stamp: float

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"label": self.label, "source": self.source, "stamp": self.stamp}


def box_corners(bbox_min: Sequence[float], bbox_max: Sequence[float]
                ) -> npt.NDArray[np.float64]:
    """The eight corners (8, 3) of an axis-aligned box; corner ``i`` takes the maximum along
    x, y, z where bit 0, 1, 2 of ``i`` is set."""
    lo, hi = np.asarray(bbox_min, dtype=np.float64), np.asarray(bbox_max, dtype=np.float64)
    return np.array([[hi[0] if i & 1 else lo[0], hi[1] if i & 2 else lo[1],
                      hi[2] if i & 4 else lo[2]] for i in range(8)])


@dataclass(frozen=True)
class CameraView:
    """Where a keyframe was taken from and how its camera maps the world onto its pixels.

    Attributes:
        position: Optical frame origin in the map frame (m).
        orientation: Optical frame orientation in the map frame, quaternion x, y, z, w (unit).
        fx, fy, cx, cy: Pinhole intrinsics of the stored image (pixels; z forward, x right,
            y down, as ROS optical frames are).
    """

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float]
    fx: float
    fy: float
    cx: float
    cy: float

    @classmethod
    def parse(cls, value: object) -> CameraView:
        """A camera view from its JSON form ``{"position", "orientation", "fx", "fy", "cx",
        "cy"}``, checked: finite numbers, a non-zero quaternion (normalised here), positive
        focal lengths.

        Raises:
            InvalidValueError: Anything else.
        """
        if isinstance(value, CameraView):
            value = value.to_dict()
        keys = ("position", "orientation", "fx", "fy", "cx", "cy")
        if not isinstance(value, dict) or set(value) != set(keys):
            raise InvalidValueError(f"camera_view must be an object with the keys {keys}, "
                                    f"got {str(value)[:120]!r}")
        position = finite_point(value["position"], "camera_view position")
        quat = value["orientation"]
        if (not isinstance(quat, (list, tuple)) or len(quat) != 4
                or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in quat)):
            raise InvalidValueError(f"camera_view orientation must be four numbers, got {quat!r}")
        try:
            quaternion_to_matrix(quat)
        except InvalidTransformError as err:
            raise InvalidValueError(f"camera_view orientation: {err}") from err
        norm = float(np.linalg.norm(quat))
        numbers = {}
        for name in ("fx", "fy", "cx", "cy"):
            item = value[name]
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not np.isfinite(
                    item):
                raise InvalidValueError(f"camera_view {name} must be a finite number, "
                                        f"got {item!r}")
            numbers[name] = float(item)
        if numbers["fx"] <= 0.0 or numbers["fy"] <= 0.0:
            raise InvalidValueError(f"camera_view focal lengths must be positive, got "
                                    f"fx={numbers['fx']} fy={numbers['fy']}")
        orientation = tuple(float(v) / norm for v in quat)
        return cls(position, (orientation[0], orientation[1], orientation[2], orientation[3]),
                   **numbers)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form :meth:`parse` reads."""
        return {"position": list(self.position), "orientation": list(self.orientation),
                "fx": self.fx, "fy": self.fy, "cx": self.cx, "cy": self.cy}

    def camera_to_map(self) -> npt.NDArray[np.float64]:
        """The 4x4 pose of the optical frame in the map (map <- camera)."""
        return compose(self.position, self.orientation)

    def project(self, points_map: npt.ArrayLike) -> tuple[npt.NDArray[np.float64],
                                                          npt.NDArray[np.float64]]:
        """Pixel coordinates (N, 2) of map points and their depth along the optical axis (N,).

        Points behind the camera get a depth <= 0 and meaningless pixels; the caller clips.
        """
        pts = np.asarray(points_map, dtype=np.float64).reshape(-1, 3)
        pose = self.camera_to_map()
        cam = (pts - pose[:3, 3]) @ pose[:3, :3]
        depth = cam[:, 2]
        safe = np.where(np.abs(depth) > 1e-9, depth, 1e-9)
        uv = np.stack([self.fx * cam[:, 0] / safe + self.cx,
                       self.fy * cam[:, 1] / safe + self.cy], axis=1)
        return uv, depth

    def box_edges(self, bbox_min: Sequence[float], bbox_max: Sequence[float],
                  near: float = 0.05) -> list[tuple[tuple[float, float], tuple[float, float]]]:
        """The twelve edges of an axis-aligned map box as pixel segments, each cut where it
        passes behind the plane ``near`` m in front of the camera (fully hidden edges are left
        out; segments may reach outside the image, the caller clips to its canvas)."""
        corners = box_corners(bbox_min, bbox_max)
        pose = self.camera_to_map()
        cam = (corners - pose[:3, 3]) @ pose[:3, :3]
        segments = []
        for a in range(8):
            for bit in (1, 2, 4):
                b = a | bit
                if b == a:
                    continue
                p, r = cam[a], cam[b]
                if p[2] < near and r[2] < near:
                    continue
                if p[2] < near or r[2] < near:  # cut at the near plane
                    t = (near - p[2]) / (r[2] - p[2])
                    cut = p + t * (r - p)
                    p, r = (cut, r) if p[2] < near else (p, cut)
                ends = [(self.fx * q[0] / q[2] + self.cx, self.fy * q[1] / q[2] + self.cy)
                        for q in (p, r)]
                segments.append(((float(ends[0][0]), float(ends[0][1])),
                                 (float(ends[1][0]), float(ends[1][1]))))
        return segments

    def frustum(self, width: int, height: int, depth: float) -> npt.NDArray[np.float64]:
        """The camera drawn as a pyramid: its origin, then the image corners (top left, top
        right, bottom right, bottom left) placed ``depth`` m along the optical axis, all in the
        map frame (5, 3)."""
        corners = np.array([[0.0, 0.0], [width, 0.0], [width, height], [0.0, height]])
        rays = np.column_stack([(corners[:, 0] - self.cx) / self.fx,
                                (corners[:, 1] - self.cy) / self.fy, np.ones(4)]) * depth
        pose = self.camera_to_map()
        points = np.vstack([np.zeros(3), rays]) @ pose[:3, :3].T + pose[:3, 3]
        return np.asarray(points, dtype=np.float64)


@dataclass(frozen=True)
class KeyframeRecord:
    """Metadata of one stored keyframe (messymem.md B.2)."""

    frame_id: str
    timestamp: float
    session: str
    camera: str
    trigger: Trigger
    action: str | None
    parent_frame: str | None
    node_ids: tuple[str, ...]
    robot_pose: tuple[float, float, float] | None
    tags: tuple[str, ...]
    labels: tuple[KeyframeLabel, ...]
    caption: str
    image_path: Path
    thumb_path: Path
    width: int
    height: int
    bytes: int
    camera_view: CameraView | None = None
    mask_path: Path | None = None

    def _shared_fields(self) -> dict[str, Any]:
        """The JSON fields that the B.2 form and the index form name alike."""
        return {
            "frame_id": self.frame_id,
            "timestamp": self.timestamp,
            "camera": self.camera,
            "trigger": self.trigger.value,
            "action": self.action,
            "parent_frame": self.parent_frame,
            "robot_pose": list(self.robot_pose) if self.robot_pose else None,
            "camera_view": self.camera_view.to_dict() if self.camera_view else None,
            "tags": list(self.tags),
            "labels": [lab.to_dict() for lab in self.labels],
            "caption": self.caption,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON form with the B.2 field names."""
        return {
            **self._shared_fields(),
            "session_id": self.session,
            "scene_graph_nodes": list(self.node_ids),
            "image_path": str(self.image_path),
            "thumb_path": str(self.thumb_path),
            "mask_path": str(self.mask_path) if self.mask_path else None,
        }

    def index_entry(self, dhash_hex: str) -> dict[str, Any]:
        """The record as the ``keyframe_saved`` event logs it (see ``index_from_log``)."""
        return {
            **self._shared_fields(),
            "session": self.session,
            "node_ids": list(self.node_ids),
            "image_file": self.image_path.name,
            "thumb_file": self.thumb_path.name,
            "mask_file": self.mask_path.name if self.mask_path else None,
            "width": self.width,
            "height": self.height,
            "dhash": dhash_hex,
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class SaveResult:
    """Outcome of :meth:`KeyframeStore.save`.

    Attributes:
        saved: True when a new keyframe was stored.
        frame_id: Id of the stored (or already present) keyframe; None when dropped.
        reason: ``saved``, ``exists``, ``blank``, ``blurry`` or ``duplicate``.
        duplicate_of: The recent frame a dropped duplicate matched.
        grey_std: Grey-level standard deviation of the frame.
        sharpness: Variance of the Laplacian of the frame.
    """

    saved: bool
    frame_id: str | None
    reason: str
    duplicate_of: str | None = None
    grey_std: float = 0.0
    sharpness: float = 0.0


@dataclass
class _Recent:
    frame_id: str
    timestamp: float
    camera: str
    nodes: frozenset[str]
    dhash: int


def _check_image(image: object, max_pixels: int) -> Image:
    if not isinstance(image, np.ndarray):
        raise InvalidImageError(f"image must be a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise InvalidImageError(f"image must be uint8, got {image.dtype}")
    if image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] not in (1, 3)):
        raise InvalidImageError(f"image must be HxW or HxWx3 (BGR), got shape {image.shape}")
    height, width = image.shape[:2]
    if height == 0 or width == 0:
        raise InvalidImageError("image is empty")
    if height * width > max_pixels:
        raise ImageTooLargeError(
            f"image has {height * width} pixels, more than the limit of {max_pixels}"
        )
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    return np.ascontiguousarray(image)


def _digest(image: AnyImage) -> str:
    """SHA-256 of an image's shape and pixels (names its files by content)."""
    digest = hashlib.sha256()
    digest.update(repr(image.shape).encode())
    digest.update(image.data)
    return digest.hexdigest()


def _check_instances(instances: object, height: int, width: int) -> InstanceImage:
    """A frame's instance-id image, checked against the frame's size."""
    if not isinstance(instances, np.ndarray):
        raise InvalidImageError(
            f"instances must be a numpy array, got {type(instances).__name__}")
    if instances.dtype != np.uint16 or instances.shape != (height, width):
        raise InvalidImageError(
            f"instances must be a uint16 image of the frame's {width}x{height}, got "
            f"{instances.dtype} of shape {instances.shape}")
    return np.ascontiguousarray(instances)


def dhash(grey: AnyImage) -> int:
    """64-bit difference hash of a grey image (horizontal gradient signs on a 9x8 grid)."""
    small = cv2.resize(grey, (9, 8), interpolation=cv2.INTER_AREA).astype(np.int16)
    bits = (small[:, 1:] > small[:, :-1]).flatten()
    value = 0
    for bit in bits:
        value = (value << 1) | int(bit)
    return value


def _text_tuple(values: Iterable[str], name: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise InvalidValueError(f"{name} must be a sequence of strings, not a string")
    out = tuple(values)
    for item in out:
        if not isinstance(item, str) or not item.strip():
            raise InvalidValueError(f"{name} must hold non-empty strings, got {item!r}")
    return out


def _labels(
    labels: Iterable[KeyframeLabel | tuple[str, str]], stamp: float
) -> tuple[KeyframeLabel, ...]:
    out: list[KeyframeLabel] = []
    for item in labels:
        if isinstance(item, KeyframeLabel):
            label = item
        elif isinstance(item, tuple) and len(item) == 2:
            label = KeyframeLabel(label=item[0], source=item[1], stamp=stamp)
        else:
            raise InvalidValueError(f"label must be KeyframeLabel or (label, source), got {item!r}")
        if not isinstance(label.label, str) or not label.label.strip():
            raise InvalidValueError(f"label text must be a non-empty string, got {label.label!r}")
        if not isinstance(label.source, str) or not label.source.strip():
            raise InvalidValueError(
                f"label source must be a non-empty string, got {label.source!r}"
            )
        out.append(label)
    return tuple(out)


def _stamp(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValueError(f"{name} must be a number, got {value!r}")
    if not np.isfinite(value):
        raise InvalidValueError(f"{name} must be finite, got {value!r}")
    return float(value)


_SELECT = (
    "SELECT frame_id, timestamp, session, camera, trigger, action, parent_frame, robot_pose, "
    "tags, caption, image_file, thumb_file, width, height, bytes, camera_view, mask_file "
    "FROM keyframes k"
)


class KeyframeStore(Store):
    """Keyframe images on disk plus their index in a SQLite database.

    Files live under ``root``: ``keyframes.db``, ``images/``, ``thumbs/`` and ``masks/`` (the
    segmentation of a frame whose saver had one: an instance-id image, 16-bit PNG).
    """

    DB_NAME = "keyframes.db"

    def __init__(
        self, root: Path, handle: DatabaseHandle, config: MemoryConfig | None = None
    ) -> None:
        self.root = root
        self.lock = threading.RLock()
        self.handle = handle
        self.config = config or MemoryConfig()
        self.log = EventLog(handle)
        self.image_dir = root / "images"
        self.thumb_dir = root / "thumbs"
        self.mask_dir = root / "masks"
        self._recent: deque[_Recent] = deque(maxlen=self.config.keyframes.dedup_recent_count)
        self._load_recent()

    @classmethod
    def open(
        cls, root: str | Path, *, config: MemoryConfig | None = None, readonly: bool = False,
        snapshot: bool = False,
    ) -> KeyframeStore:
        """Open (or create) the store under ``root``.

        Raises:
            StorageError: The folder cannot be created or the database cannot be opened.
            SchemaVersionError: The database is newer than this code or of another kind.
            WriterBusyError: Another writer holds the database.
        """
        config = config or MemoryConfig()
        root = Path(root)
        if not readonly:
            try:
                for folder in ("images", "thumbs", "masks"):
                    (root / folder).mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StorageError(err.errno or 0, f"cannot create {root}: {err}") from err
        handle = open_database(
            root / cls.DB_NAME, "keyframes", readonly=readonly, storage=config.storage,
            snapshot=snapshot,
        )
        try:
            return cls(root, handle, config)
        except BaseException:
            handle.close()
            raise

    def _load_recent(self) -> None:
        rows = self.handle.db.execute(
            "SELECT frame_id, timestamp, camera, dhash FROM keyframes "
            "WHERE trigger NOT LIKE 'interaction%' AND trigger != 'operator' "
            "ORDER BY seq DESC LIMIT ?",
            [self.config.keyframes.dedup_recent_count],
        ).fetchall()
        for frame_id, timestamp, camera, hash_hex in reversed(rows):
            nodes = frozenset(self._nodes_of(frame_id))
            self._recent.append(_Recent(frame_id, timestamp, camera, nodes, int(hash_hex, 16)))

    # ------------------------------------------------------------------ writing
    def assess(self, image: AnyImage) -> tuple[str | None, float, float]:
        """Blank/blurry check of a frame: (reason or None, grey std, Laplacian variance)."""
        frame = _check_image(image, self.config.keyframes.max_pixels)
        grey = frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
        return self._assess_grey(grey)

    def _assess_grey(self, grey: AnyImage) -> tuple[str | None, float, float]:
        cfg = self.config.keyframes
        _, std = cv2.meanStdDev(grey)
        grey_std = float(std[0][0])
        if grey_std < cfg.blank_std_threshold:
            return "blank", grey_std, 0.0
        lap = cv2.Laplacian(grey, cv2.CV_16S, ksize=1)
        _, lap_std = cv2.meanStdDev(lap)
        sharpness = float(lap_std[0][0]) ** 2
        if sharpness < cfg.blur_threshold:
            return "blurry", grey_std, sharpness
        return None, grey_std, sharpness

    @synchronized
    def save(
        self,
        image: AnyImage,
        *,
        timestamp: float,
        camera: str,
        trigger: Trigger | str,
        session: str = "",
        action: str | None = None,
        parent_frame: str | None = None,
        node_ids: Sequence[str] = (),
        robot_pose: Sequence[float] | None = None,
        tags: Sequence[str] = (),
        labels: Iterable[KeyframeLabel | tuple[str, str]] = (),
        caption: str = "",
        camera_view: CameraView | dict[str, Any] | None = None,
        instances: InstanceImage | None = None,
    ) -> SaveResult:
        """Filter and store one frame.

        Args:
            image: uint8 BGR (HxWx3) or grey (HxW) image.
            timestamp: Stamp of the image (s).
            camera: Camera name.
            trigger: Why the frame is saved; interaction triggers skip the filters.
            session: Session id.
            action: Originating action (interaction frames).
            parent_frame: Frame this one follows (e.g. the pre-interaction frame).
            node_ids: Scene graph nodes visible or targeted.
            robot_pose: ``[x, y, theta]`` of the base in the map frame (m, rad).
            tags: Short tags.
            labels: Initial labels as KeyframeLabel or ``(label, source)``.
            caption: Free-text caption.
            camera_view: Pose of the optical frame in the map and the image's intrinsics, when
                the saver knows them (lets a viewer draw the camera and project nodes onto the
                image).
            instances: The frame's segmentation, when the saver has it: a uint16 image of the
                frame's size, 0 where no instance lies and an instance's id elsewhere (as the
                ``Segmentation`` message carries it). A reader then takes an object's pixels
                from the segmenter's mask instead of guessing them from colour.

        Raises:
            InvalidImageError, ImageTooLargeError: The image is not acceptable.
            InvalidValueError: Bad metadata.
            StorageError: Files or database cannot be written (nothing partial remains).
        """
        self._require_writer()
        cfg = self.config.keyframes
        frame = _check_image(image, cfg.max_pixels)
        stamp = _stamp(timestamp, "timestamp")
        try:
            trig = Trigger(trigger)
        except ValueError as err:
            raise InvalidValueError(f"unknown trigger {trigger!r}") from err
        nodes, tag_tuple, label_tuple, pose = self._check_metadata(
            stamp, camera=camera, session=session, action=action, parent_frame=parent_frame,
            caption=caption, node_ids=node_ids, tags=tags, labels=labels, robot_pose=robot_pose)
        view = None if camera_view is None else CameraView.parse(camera_view)
        height, width = frame.shape[:2]
        mask = None if instances is None else _check_instances(instances, height, width)
        thumb, frame_hash = self._thumbnail(frame)

        reason, grey_std, sharpness = None, 0.0, 0.0
        if not trig.kept:
            grey = frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
            reason, grey_std, sharpness = self._assess_grey(grey)
            if reason is not None:
                return SaveResult(False, None, reason, None, grey_std, sharpness)
            dup = self._duplicate_of(stamp, camera, frozenset(nodes), frame_hash)
            if dup is not None:
                return SaveResult(False, None, "duplicate", dup, grey_std, sharpness)

        content = _digest(frame)
        identity = canonical_json(
            {
                "pixels": content,
                "timestamp": stamp,
                "camera": camera,
                "trigger": trig.value,
                "session": session,
            }
        )
        frame_id = hashlib.sha256(identity.encode()).hexdigest()[:32]
        if self._exists(frame_id):
            return SaveResult(False, frame_id, "exists", None, grey_std, sharpness)
        meta = {
            "frame_id": frame_id,
            "timestamp": stamp,
            "session": session,
            "camera": camera,
            "trigger": trig.value,
            "action": action,
            "parent_frame": parent_frame,
            "node_ids": list(nodes),
            "robot_pose": list(pose) if pose else None,
            "camera_view": view.to_dict() if view else None,
            "tags": list(tag_tuple),
            "labels": [lab.to_dict() for lab in label_tuple],
            "caption": caption,
            "image_file": f"{content[:32]}.{cfg.image_format}",
            "thumb_file": f"{content[:32]}.jpg",
            "mask_file": None if mask is None else f"{_digest(mask)[:32]}.png",
            "width": width,
            "height": height,
            "dhash": f"{frame_hash:016x}",
            "bytes": 0,
        }
        self._store(frame, thumb, mask, meta, trig)
        if not trig.kept:
            self._recent.append(_Recent(frame_id, stamp, camera, frozenset(nodes), frame_hash))
        return SaveResult(True, frame_id, "saved", None, grey_std, sharpness)

    def _check_metadata(
        self, stamp: float, *, camera: object, session: object, action: object,
        parent_frame: object, caption: object, node_ids: Iterable[str], tags: Iterable[str],
        labels: Iterable[KeyframeLabel | tuple[str, str]], robot_pose: Sequence[float] | None,
    ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[KeyframeLabel, ...],
               tuple[float, float, float] | None]:
        """Validate a keyframe's metadata; returns (nodes, tags, labels, pose)."""
        if not isinstance(camera, str) or not camera.strip():
            raise InvalidValueError(f"camera must be a non-empty string, got {camera!r}")
        if not isinstance(session, str) or not isinstance(caption, str):
            raise InvalidValueError("session and caption must be strings")
        if action is not None and not isinstance(action, str):
            raise InvalidValueError(f"action must be a string or None, got {action!r}")
        if parent_frame is not None and not isinstance(parent_frame, str):
            raise InvalidValueError(f"parent_frame must be a string or None, got {parent_frame!r}")
        nodes = tuple(dict.fromkeys(_text_tuple(node_ids, "node_ids")))
        tag_tuple = _text_tuple(tags, "tags")
        label_tuple = _labels(labels, stamp)
        bounds = self.config.bounds
        try:
            bounds.ident(camera, "camera")
            bounds.ident(session, "session", allow_empty=True)
            bounds.text(caption, "caption")
            for name, value in (("action", action), ("parent_frame", parent_frame)):
                if value is not None:
                    bounds.ident(value, name, allow_empty=True)
            for name, seq in (("node_ids", nodes), ("tags", tag_tuple)):
                for item in bounds.items(seq, name):
                    bounds.ident(item, name)
            for lab in bounds.items(label_tuple, "labels"):
                bounds.text(lab.label, "label")
                bounds.ident(lab.source, "label source")
        except BoundsError as err:
            raise InvalidValueError(str(err)) from err
        pose: tuple[float, float, float] | None = None
        if robot_pose is not None:
            pose = finite_point(robot_pose, "robot_pose")
        return nodes, tag_tuple, label_tuple, pose

    def _thumbnail(self, frame: AnyImage) -> tuple[AnyImage, int]:
        """The thumbnail of a frame and its dHash."""
        height, width = frame.shape[:2]
        thumb_w = min(self.config.keyframes.thumbnail_width, width)
        thumb_h = max(1, round(height * thumb_w / width))
        thumb = cv2.resize(frame, (thumb_w, thumb_h), interpolation=cv2.INTER_AREA)
        thumb_grey = thumb if thumb.ndim == 2 else cv2.cvtColor(thumb, cv2.COLOR_BGR2GRAY)
        return thumb, dhash(thumb_grey)

    def _store(self, frame: AnyImage, thumb: AnyImage, mask: InstanceImage | None,
               meta: dict[str, Any], trig: Trigger) -> None:
        """Write the image files (and the instance image, when given), then log and index
        the keyframe in one transaction.

        Files follow the database's durability level: synced for FULL/EXTRA (power cut safe),
        only atomically renamed for NORMAL (safe against a killed process). A failure removes
        the files this call wrote, so nothing partial remains.
        """
        cfg = self.config.keyframes
        image_bytes = self._encode(frame, cfg.image_format, cfg.jpeg_quality)
        thumb_bytes = self._encode(thumb, "jpg", cfg.thumbnail_quality)
        files = [(self.image_dir, meta["image_file"], image_bytes),
                 (self.thumb_dir, meta["thumb_file"], thumb_bytes)]
        if mask is not None:
            files.append((self.mask_dir, meta["mask_file"], self._encode(mask, "png", 0)))
        meta["bytes"] = sum(len(data) for _, _, data in files)
        frame_id = meta["frame_id"]
        created: list[Path] = []
        durable = self.config.storage.synchronous != "NORMAL"
        try:
            for folder, name, data in files:
                target = folder / name
                if not target.exists():
                    write_file_atomic(target, data, durable=durable)
                    created.append(target)
            event = MemoryEvent(
                kind=EventKind.KEYFRAME_SAVED,
                stamp=meta["timestamp"],
                source=(Source.INTERACTION if trig.interaction else
                        Source.OPERATOR if trig is Trigger.OPERATOR else Source.PERCEPTION),
                payload=meta,
                evidence=Evidence(keyframe_ids=(frame_id,)),
                event_id=f"keyframe-{frame_id}",
            )
            with self.handle.transaction() as db:
                stored = self.log.insert(db, event)
                if stored is None:
                    raise StorageError(0, f"keyframe {frame_id} already logged")
                self._insert_row(db, meta, stored.seq or 0)
        except sqlite3.Error as err:
            self._discard(created)
            raise storage_error(f"cannot index keyframe {frame_id}", err) from err
        except BaseException:
            self._discard(created)
            raise

    @staticmethod
    def _discard(paths: Iterable[Path]) -> None:
        """Remove files written for a keyframe whose save failed."""
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _require_writer(self) -> None:
        if self.handle.readonly:
            raise ReadOnlyStoreError(f"{self.handle.path} is opened read-only")

    @staticmethod
    def _encode(image: AnyImage, ext: str, quality: int) -> bytes:
        params = (
            [cv2.IMWRITE_JPEG_QUALITY, quality]
            if ext == "jpg"
            else [cv2.IMWRITE_PNG_COMPRESSION, 1]
        )
        ok, buf = cv2.imencode(f".{ext}", image, params)
        if not ok:
            raise InvalidImageError(f"the image cannot be encoded as {ext}")
        return bytes(buf.tobytes())

    @staticmethod
    def _insert_row(db: Any, meta: dict[str, Any], seq: int) -> None:
        db.execute(
            "INSERT INTO keyframes (frame_id, seq, timestamp, session, camera, trigger, action,"
            " parent_frame, robot_pose, tags, caption, image_file, thumb_file, width, height,"
            " dhash, bytes, camera_view, mask_file)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                meta["frame_id"],
                seq,
                meta["timestamp"],
                meta["session"],
                meta["camera"],
                meta["trigger"],
                meta["action"],
                meta["parent_frame"],
                json.dumps(meta["robot_pose"]),
                json.dumps(meta["tags"]),
                meta["caption"],
                meta["image_file"],
                meta["thumb_file"],
                meta["width"],
                meta["height"],
                meta["dhash"],
                meta["bytes"],
                json.dumps(meta.get("camera_view")),
                meta.get("mask_file"),
            ],
        )
        for node_id in meta["node_ids"]:
            db.execute(
                "INSERT INTO keyframe_nodes (frame_id, node_id) VALUES (?, ?)",
                [meta["frame_id"], node_id],
            )
        for position, lab in enumerate(meta["labels"]):
            db.execute(
                "INSERT INTO keyframe_labels (frame_id, position, label, source, stamp)"
                " VALUES (?, ?, ?, ?, ?)",
                [meta["frame_id"], position, lab["label"], lab["source"], lab["stamp"]],
            )

    def _duplicate_of(
        self, stamp: float, camera: str, nodes: frozenset[str], frame_hash: int
    ) -> str | None:
        cfg = self.config.keyframes
        for recent in reversed(self._recent):
            if recent.camera != camera or abs(recent.timestamp - stamp) > cfg.dedup_window_s:
                continue
            if not nodes <= recent.nodes:
                continue
            if (recent.dhash ^ frame_hash).bit_count() <= cfg.dedup_hamming_threshold:
                return recent.frame_id
        return None

    @synchronized
    def add_labels(
        self,
        frame_id: str,
        labels: Iterable[KeyframeLabel | tuple[str, str]],
        *,
        stamp: float,
        source: Source = Source.INTERACTION,
    ) -> KeyframeRecord:
        """Append labels (e.g. from the analyzer) to an existing keyframe.

        Raises:
            UnknownKeyframeError: No such keyframe.
            InvalidValueError: Malformed labels.
        """
        self._require_writer()
        when = _stamp(stamp, "stamp")
        label_tuple = _labels(labels, when)
        if not label_tuple:
            raise InvalidValueError("no labels given")
        bounds = self.config.bounds
        try:
            for lab in bounds.items(label_tuple, "labels"):
                bounds.text(lab.label, "label")
                bounds.ident(lab.source, "label source")
        except BoundsError as err:
            raise InvalidValueError(str(err)) from err
        self.get(frame_id)
        label_dicts = [lab.to_dict() for lab in label_tuple]
        payload = {"frame_id": frame_id, "labels": label_dicts}
        event = MemoryEvent(
            kind=EventKind.KEYFRAME_LABELS_ADDED,
            stamp=when,
            source=source,
            payload=payload,
            evidence=Evidence(keyframe_ids=(frame_id,)),
        )
        with self.handle.transaction() as db:
            self.log.insert(db, event)
            self._append_labels(db, frame_id, label_dicts)
        return self.get(frame_id)

    @staticmethod
    def _append_labels(db: Any, frame_id: str, labels: list[dict[str, Any]]) -> None:
        row = db.execute(
            "SELECT COALESCE(MAX(position), -1) FROM keyframe_labels WHERE frame_id = ?",
            [frame_id],
        ).fetchone()
        start = int(row[0]) + 1
        for offset, lab in enumerate(labels):
            db.execute(
                "INSERT INTO keyframe_labels (frame_id, position, label, source, stamp)"
                " VALUES (?, ?, ?, ?, ?)",
                [frame_id, start + offset, lab["label"], lab["source"], lab["stamp"]],
            )

    # ------------------------------------------------------------------ reading
    def _exists(self, frame_id: str) -> bool:
        row = self.handle.db.execute(
            "SELECT 1 FROM keyframes WHERE frame_id = ?", [frame_id]
        ).fetchone()
        return row is not None

    def _nodes_of(self, frame_id: str) -> list[str]:
        rows = self.handle.db.execute(
            "SELECT node_id FROM keyframe_nodes WHERE frame_id = ? ORDER BY rowid", [frame_id]
        ).fetchall()
        return [r[0] for r in rows]

    def _record(self, row: Sequence[Any]) -> KeyframeRecord:
        (
            frame_id,
            timestamp,
            session,
            camera,
            trigger,
            action,
            parent_frame,
            robot_pose,
            tags,
            caption,
            image_file,
            thumb_file,
            width,
            height,
            size,
            camera_view,
            mask_file,
        ) = row
        label_rows = self.handle.db.execute(
            "SELECT label, source, stamp FROM keyframe_labels WHERE frame_id = ? ORDER BY position",
            [frame_id],
        ).fetchall()
        pose = json.loads(robot_pose) if robot_pose else None
        view = json.loads(camera_view) if camera_view else None
        return KeyframeRecord(
            frame_id=frame_id,
            timestamp=timestamp,
            session=session,
            camera=camera,
            trigger=Trigger(trigger),
            action=action,
            parent_frame=parent_frame,
            node_ids=tuple(self._nodes_of(frame_id)),
            robot_pose=(float(pose[0]), float(pose[1]), float(pose[2])) if pose else None,
            tags=tuple(json.loads(tags)),
            labels=tuple(KeyframeLabel(r[0], r[1], r[2]) for r in label_rows),
            caption=caption,
            image_path=self.image_dir / image_file,
            thumb_path=self.thumb_dir / thumb_file,
            width=width,
            height=height,
            bytes=size,
            camera_view=CameraView.parse(view) if view else None,
            mask_path=self.mask_dir / mask_file if mask_file else None,
        )

    @synchronized
    def get(self, frame_id: str) -> KeyframeRecord:
        """Metadata of a keyframe.

        Raises:
            UnknownKeyframeError: No such keyframe.
        """
        if not isinstance(frame_id, str):
            raise UnknownKeyframeError(f"frame id must be a string, got {frame_id!r}")
        row = self.handle.db.execute(f"{_SELECT} WHERE frame_id = ?", [frame_id]).fetchone()
        if row is None:
            raise UnknownKeyframeError(f"unknown keyframe {frame_id!r}")
        return self._record(row)

    @synchronized
    def query(
        self,
        *,
        node_ids: Iterable[str] | None = None,
        label: str | None = None,
        start: float | None = None,
        end: float | None = None,
        trigger: Trigger | str | Iterable[Trigger | str] | None = None,
        camera: str | None = None,
        limit: int = 20,
    ) -> list[KeyframeRecord]:
        """Keyframes matching every given filter, newest first.

        Args:
            node_ids: Frames linked to any of these nodes.
            label: Case-insensitive substring of a label, tag or caption.
            start: Earliest timestamp (inclusive).
            end: Latest timestamp (inclusive).
            trigger: One trigger or several.
            camera: Camera name.
            limit: Maximum number of results (>= 1).
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidValueError(f"limit must be a positive integer, got {limit!r}")
        where: list[str] = []
        params: list[Any] = []
        if node_ids is not None:
            ids = list(_text_tuple(node_ids, "node_ids"))
            if not ids:
                return []
            where.append(
                "frame_id IN (SELECT frame_id FROM keyframe_nodes WHERE node_id IN "
                f"({','.join('?' * len(ids))}))"
            )
            params.extend(ids)
        if label is not None:
            if not isinstance(label, str) or not label.strip():
                raise InvalidValueError("label must be a non-empty string")
            needle = label.strip().lower()
            where.append(
                "(EXISTS (SELECT 1 FROM keyframe_labels l WHERE l.frame_id = k.frame_id"
                " AND instr(lower(l.label), ?) > 0) OR instr(lower(k.tags), ?) > 0"
                " OR instr(lower(k.caption), ?) > 0)"
            )
            params.extend([needle, needle, needle])
        if start is not None:
            where.append("timestamp >= ?")
            params.append(_stamp(start, "start"))
        if end is not None:
            where.append("timestamp <= ?")
            params.append(_stamp(end, "end"))
        if trigger is not None:
            items = [trigger] if isinstance(trigger, str) else list(trigger)
            try:
                values = [Trigger(t).value for t in items]
            except ValueError as err:
                raise InvalidValueError(f"unknown trigger in {trigger!r}") from err
            where.append(f"trigger IN ({','.join('?' * len(values))})")
            params.extend(values)
        if camera is not None:
            where.append("camera = ?")
            params.append(camera)
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        rows = self.handle.db.execute(
            f"{_SELECT}{clause} ORDER BY timestamp DESC, seq DESC LIMIT ?", [*params, limit]
        ).fetchall()
        return [self._record(row) for row in rows]

    @synchronized
    def load_image(self, frame_id: str, thumbnail: bool = False) -> Image:
        """Decode the full image or the thumbnail of a keyframe (BGR or grey uint8).

        Raises:
            UnknownKeyframeError: No such keyframe.
            StorageError: The file is missing or unreadable.
        """
        record = self.get(frame_id)
        path = record.thumb_path if thumbnail else record.image_path
        try:
            data = np.fromfile(path, dtype=np.uint8)
        except OSError as err:
            raise StorageError(err.errno or 0, f"cannot read {path}: {err}") from err
        image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if image is None:
            raise StorageError(0, f"{path} is not a decodable image")
        return np.asarray(image, dtype=np.uint8)

    @synchronized
    def load_instances(self, frame_id: str) -> InstanceImage | None:
        """The segmentation saved with a keyframe (see :meth:`save`), or None when it was saved
        without one.

        Raises:
            UnknownKeyframeError: No such keyframe.
            StorageError: The file is missing, unreadable or not a 16-bit image of the frame's
                size.
        """
        record = self.get(frame_id)
        path = record.mask_path
        if path is None:
            return None
        try:
            data = np.fromfile(path, dtype=np.uint8)
        except OSError as err:
            raise StorageError(err.errno or 0, f"cannot read {path}: {err}") from err
        image = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
        if image is None or image.dtype != np.uint16 or image.shape != (record.height,
                                                                         record.width):
            raise StorageError(0, f"{path} is not a 16-bit instance image of "
                                  f"{record.width}x{record.height}")
        return np.asarray(image)

    @synchronized
    def count(self) -> int:
        """Number of stored keyframes."""
        return int(self.handle.db.execute("SELECT COUNT(*) FROM keyframes").fetchone()[0])

    @synchronized
    def total_bytes(self) -> int:
        """Bytes of image and thumbnail files (files shared by frames counted once)."""
        row = self.handle.db.execute(
            "SELECT COALESCE(SUM(b), 0) FROM"
            " (SELECT MAX(bytes) AS b FROM keyframes GROUP BY image_file)"
        ).fetchone()
        return int(row[0])

    # ---------------------------------------------------------------- retention
    @synchronized
    def enforce_budget(
        self,
        max_bytes: int,
        protected: Callable[[str], bool] | Collection[str] = (),
        *,
        stamp: float,
    ) -> list[str]:
        """Delete the oldest unprotected perception frames until the files fit ``max_bytes``.

        Interaction frames and protected frames (e.g. the evidence of a fact in world memory)
        are never deleted, so the budget may stay exceeded.

        Returns:
            Ids of the removed keyframes, oldest first.
        """
        self._require_writer()
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise InvalidValueError(f"max_bytes must be an integer >= 0, got {max_bytes!r}")
        when = _stamp(stamp, "stamp")
        is_protected: Callable[[str], bool]
        if callable(protected):
            is_protected = protected
        else:
            keep = frozenset(protected)
            is_protected = keep.__contains__
        total = self.total_bytes()
        if total <= max_bytes:
            return []
        rows = self.handle.db.execute(
            "SELECT frame_id, image_file, thumb_file, bytes FROM keyframes"
            " WHERE trigger NOT LIKE 'interaction%' AND trigger != 'operator'"
            " ORDER BY timestamp, seq"
        ).fetchall()
        parents = {
            r[0]
            for r in self.handle.db.execute(
                "SELECT DISTINCT parent_frame FROM keyframes WHERE parent_frame IS NOT NULL"
            ).fetchall()
        }
        removed: list[str] = []
        for frame_id, image_file, _thumb_file, size in rows:
            if total <= max_bytes:
                break
            if is_protected(frame_id) or frame_id in parents:
                continue
            shared = self.handle.db.execute(
                "SELECT COUNT(*) FROM keyframes WHERE image_file = ?", [image_file]
            ).fetchone()[0]
            self._remove(frame_id, when)
            removed.append(frame_id)
            if shared == 1:
                total -= size
        return removed

    def _remove(self, frame_id: str, stamp: float) -> None:
        record = self.get(frame_id)
        event = MemoryEvent(
            kind=EventKind.KEYFRAME_REMOVED,
            stamp=stamp,
            source=Source.SYSTEM,
            payload={"frame_id": frame_id, "reason": "retention"},
            evidence=Evidence(keyframe_ids=(frame_id,)),
        )
        with self.handle.transaction() as db:
            self.log.insert(db, event)
            db.execute("DELETE FROM keyframes WHERE frame_id = ?", [frame_id])
        self._recent = deque(
            (r for r in self._recent if r.frame_id != frame_id), maxlen=self._recent.maxlen
        )
        files = [("image_file", record.image_path), ("thumb_file", record.thumb_path)]
        if record.mask_path is not None:
            files.append(("mask_file", record.mask_path))
        for column, path in files:
            still = self.handle.db.execute(
                f"SELECT 1 FROM keyframes WHERE {column} = ? LIMIT 1", [path.name]
            ).fetchone()
            if still is None:
                try:
                    path.unlink()
                except FileNotFoundError:
                    LOG.warning("keyframe file %s was already missing", path)
                except OSError as err:
                    raise StorageError(err.errno or 0, f"cannot delete {path}: {err}") from err

    @synchronized
    def index_from_log(self) -> dict[str, dict[str, Any]]:
        """Rebuild the keyframe index (frame id -> metadata with labels) from the event log."""
        index: dict[str, dict[str, Any]] = {}
        for event in self.log.iter_events():
            data = event.payload
            if event.kind is EventKind.KEYFRAME_SAVED:
                # views are logged from schema 3 on, segmentations from 4
                index[data["frame_id"]] = {"camera_view": None, "mask_file": None, **data,
                                           "labels": list(data["labels"])}
            elif event.kind is EventKind.KEYFRAME_LABELS_ADDED:
                index[data["frame_id"]]["labels"].extend(data["labels"])
            elif event.kind is EventKind.KEYFRAME_REMOVED:
                index.pop(data["frame_id"], None)
        return index

    @synchronized
    def index_from_tables(self) -> dict[str, dict[str, Any]]:
        """The live keyframe index in the same form as :meth:`index_from_log`."""
        out: dict[str, dict[str, Any]] = {}
        rows = self.handle.db.execute(
            "SELECT frame_id, dhash FROM keyframes ORDER BY seq"
        ).fetchall()
        for frame_id, hash_hex in rows:
            out[frame_id] = self.get(frame_id).index_entry(hash_hex)
        return out


def files_on_disk(store: KeyframeStore) -> set[str]:
    """Names of the image, thumbnail and instance files present under the store (for audits
    and tests)."""
    names: set[str] = set()
    for folder in (store.image_dir, store.thumb_dir, store.mask_dir):
        if folder.is_dir():
            names.update(p.name for p in folder.iterdir())
    return names
