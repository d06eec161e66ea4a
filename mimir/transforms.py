"""A time-aware transform tree, free of ROS.

It answers the question tf2 answers: where was frame ``source`` relative to frame ``target`` at
time ``t``? Transforms arrive as (parent, child, stamp, translation, rotation) samples; static
ones hold at every time. A lookup walks both frames up to their common ancestor, interpolating
every dynamic edge at the requested stamp (linear in translation, spherical in rotation).

Stamps are floats in seconds (ROS time). A stamp of ``0.0`` asks for the latest time at which
every edge on the path is known, as tf2 does.

On a robot the ROS adapter in :mod:`mimir.ros.tf` uses tf2_ros when it is importable; this class
serves where it is not (the PyPI wheels) and in tests.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.spatial.transform import Rotation

Matrix4 = npt.NDArray[np.float64]


class TransformError(Exception):
    """Base class of transform lookup failures."""


class UnknownFrameError(TransformError):
    """A frame that no transform has mentioned."""


class ConnectivityError(TransformError):
    """Both frames are known but belong to different trees."""


class ExtrapolationError(TransformError):
    """The requested stamp lies outside the buffered samples of an edge on the path."""


class InvalidTransformError(TransformError, ValueError):
    """A transform sample with bad frames, a non-finite value or a zero quaternion."""


@dataclass(frozen=True)
class Transform:
    """A rigid transform mapping coordinates in ``child`` into ``parent`` at ``stamp``."""

    parent: str
    child: str
    stamp: float
    translation: npt.NDArray[np.float64]
    rotation: npt.NDArray[np.float64]  # quaternion x, y, z, w

    def matrix(self) -> Matrix4:
        """The 4x4 homogeneous matrix (parent <- child)."""
        return compose(self.translation, self.rotation)


def compose(translation: npt.ArrayLike, quaternion_xyzw: npt.ArrayLike) -> Matrix4:
    """Build a 4x4 homogeneous matrix from a translation and an x, y, z, w quaternion
    (normalised here)."""
    return _homogeneous(np.asarray(quaternion_xyzw, dtype=np.float64).reshape(4).tolist(),
                        np.asarray(translation, dtype=np.float64).reshape(3).tolist())


def _homogeneous(quat: Sequence[float], translation: Sequence[float]) -> Matrix4:
    # The rotation matrix of a quaternion written out: one small array and no SciPy objects,
    # since a lookup composes a matrix per edge and the analyzer asks for thousands of them.
    x, y, z, w = quat
    tx, ty, tz = translation
    n = x * x + y * y + z * z + w * w
    s = 2.0 / n if n > 0.0 else 0.0
    xs, ys, zs = x * s, y * s, z * s
    wx, wy, wz = w * xs, w * ys, w * zs
    xx, xy, xz = x * xs, x * ys, x * zs
    yy, yz, zz = y * ys, y * zs, z * zs
    return np.array([[1.0 - (yy + zz), xy - wz, xz + wy, tx],
                     [xy + wz, 1.0 - (xx + zz), yz - wx, ty],
                     [xz - wy, yz + wx, 1.0 - (xx + yy), tz],
                     [0.0, 0.0, 0.0, 1.0]])


def _slerp(q0: npt.NDArray[np.float64], q1: npt.NDArray[np.float64],
           alpha: float) -> tuple[float, float, float, float]:
    """The unit quaternion ``alpha`` of the way from ``q0`` to ``q1`` along the shorter arc."""
    a = [float(v) for v in q0]
    b = [float(v) for v in q1]
    dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    if dot < 0.0:  # q and -q are one rotation; take the shorter way round
        b = [-v for v in b]
        dot = -dot
    if dot > 0.9995:  # nearly the same rotation: the arc is a line, and sin(theta) ~ 0
        wa, wb = 1.0 - alpha, alpha
    else:
        theta = math.acos(dot)
        sin_theta = math.sin(theta)
        wa = math.sin((1.0 - alpha) * theta) / sin_theta
        wb = math.sin(alpha * theta) / sin_theta
    q = [wa * u + wb * v for u, v in zip(a, b, strict=True)]
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    return q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm


def _rigid_inverse(mat: Matrix4) -> Matrix4:
    """Inverse of a rotation-plus-translation matrix: transpose the rotation, turn the
    translation back."""
    inv = np.eye(4)
    rot_t = mat[:3, :3].T
    inv[:3, :3] = rot_t
    inv[:3, 3] = -rot_t @ mat[:3, 3]
    return inv


def planar_pose(x: float, y: float, yaw: float) -> Matrix4:
    """4x4 pose of a frame at (x, y) turned by ``yaw`` (rad) about z: a base on the floor."""
    mat = np.eye(4)
    c, s = float(np.cos(yaw)), float(np.sin(yaw))
    mat[:2, :2] = [[c, -s], [s, c]]
    mat[:2, 3] = (x, y)
    return mat


def quaternion_to_matrix(quat_xyzw: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """3x3 rotation of a quaternion ``[x, y, z, w]`` (normalised here).

    Raises:
        InvalidTransformError: The quaternion is not four finite numbers or has zero length.
    """
    try:
        q = np.asarray(quat_xyzw, dtype=np.float64).reshape(4)
    except (TypeError, ValueError) as err:
        raise InvalidTransformError(f"a quaternion needs four numbers, got {quat_xyzw!r}") from err
    norm = float(np.linalg.norm(q))
    if not np.isfinite(norm) or norm < 1e-9:
        raise InvalidTransformError(f"quaternion must be finite and non-zero, got {q.tolist()}")
    return _homogeneous([float(v) for v in q / norm], (0.0, 0.0, 0.0))[:3, :3].copy()


def matrix_to_quaternion(rotation: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Quaternion ``[x, y, z, w]`` (with ``w >= 0``) of a 3x3 rotation matrix.

    A matrix that is slightly off orthonormal gives the quaternion of the nearest rotation.
    """
    return matrices_to_quaternions(np.asarray(rotation, dtype=np.float64).reshape(1, 3, 3))[0]


def matrices_to_quaternions(rotations: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """:func:`matrix_to_quaternion` of each of ``n`` 3x3 matrices, ``(n, 3, 3)`` -> ``(n, 4)``,
    in one call (SciPy's cost is mostly per call: a frame's boxes convert together)."""
    mats = np.asarray(rotations, dtype=np.float64).reshape(-1, 3, 3)
    if not len(mats):
        return np.empty((0, 4))
    quats = np.asarray(Rotation.from_matrix(mats).as_quat(), dtype=np.float64).reshape(-1, 4)
    return np.where(quats[:, 3:] < 0, -quats, quats)


def decompose(matrix: npt.ArrayLike) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Split a rigid 4x4 homogeneous matrix into (translation, quaternion x, y, z, w).

    The rotation block is taken as a rotation (as a transform tree's products are), not
    projected onto the nearest one: that check costs SciPy five times the conversion, and the
    simulation splits every camera's pose at every frame. :func:`matrix_to_quaternion`
    projects.
    """
    mat = np.asarray(matrix, dtype=np.float64)
    return mat[:3, 3].copy(), Rotation.from_matrix(mat[:3, :3], assume_valid=True).as_quat()


#: Stamps this close to an edge's first or last sample count as that sample (s). Float seconds
#: hold only about 0.24 microseconds at Unix-epoch times, so two conversions of one recorded
#: ``sec``/``nanosec`` stamp (``sec + nanosec * 1e-9`` and ``nanoseconds / 1e9``) can differ by a
#: rounding step; a lookup at a bag's own last stamp must not fail on that.
STAMP_TOLERANCE_S = 1e-6


class _Edge:
    """Time-sorted samples of one parent->child edge."""

    __slots__ = ("parent", "rotations", "stamps", "static", "translations")

    def __init__(self, parent: str, static: bool) -> None:
        self.parent = parent
        self.static = static
        self.stamps: list[float] = []
        self.translations: list[npt.NDArray[np.float64]] = []
        self.rotations: list[npt.NDArray[np.float64]] = []

    def insert(self, stamp: float, translation: npt.NDArray[np.float64],
               rotation: npt.NDArray[np.float64]) -> None:
        if self.static:
            self.stamps, self.translations, self.rotations = [stamp], [translation], [rotation]
            return
        idx = bisect.bisect_left(self.stamps, stamp)
        if idx < len(self.stamps) and self.stamps[idx] == stamp:
            self.translations[idx], self.rotations[idx] = translation, rotation
            return
        self.stamps.insert(idx, stamp)
        self.translations.insert(idx, translation)
        self.rotations.insert(idx, rotation)

    def prune(self, oldest: float) -> None:
        if self.static or len(self.stamps) < 2:
            return
        cut = bisect.bisect_left(self.stamps, oldest)
        cut = min(cut, len(self.stamps) - 1)  # always keep the newest sample
        if cut > 0:
            del self.stamps[:cut], self.translations[:cut], self.rotations[:cut]

    def sample(self, stamp: float, child: str) -> Matrix4:
        if self.static:
            return compose(self.translations[0], self.rotations[0])
        first, last = self.stamps[0], self.stamps[-1]
        if first - STAMP_TOLERANCE_S <= stamp < first:
            stamp = first
        elif last < stamp <= last + STAMP_TOLERANCE_S:
            stamp = last
        if stamp < first or stamp > last:
            raise ExtrapolationError(
                f"transform {self.parent} -> {child} requested at {stamp:.6f} s, but known only "
                f"from {first:.6f} to {last:.6f} s"
            )
        idx = bisect.bisect_left(self.stamps, stamp)
        if self.stamps[idx] == stamp:
            return compose(self.translations[idx], self.rotations[idx])
        t0, t1 = self.stamps[idx - 1], self.stamps[idx]
        alpha = (stamp - t0) / (t1 - t0)
        trans = (1.0 - alpha) * self.translations[idx - 1] + alpha * self.translations[idx]
        quat = _slerp(self.rotations[idx - 1], self.rotations[idx], alpha)
        return _homogeneous(quat, trans.tolist())

    def latest(self) -> float:
        return float("inf") if self.static else self.stamps[-1]

    def earliest(self) -> float:
        return float("-inf") if self.static else self.stamps[0]


class TransformBuffer:
    """Thread-safe store of transform samples answering lookups at a stamp.

    Args:
        cache_seconds: Dynamic samples older than the newest sample of their edge by more than
            this are dropped.
    """

    def __init__(self, cache_seconds: float = 10.0) -> None:
        if not cache_seconds > 0.0:
            raise ValueError(f"cache_seconds must be positive, got {cache_seconds}")
        self._cache = float(cache_seconds)
        self._edges: dict[str, _Edge] = {}
        self._lock = threading.Lock()

    def set_transform(
        self,
        parent: str,
        child: str,
        stamp: float,
        translation: npt.ArrayLike,
        rotation_xyzw: npt.ArrayLike,
        *,
        static: bool = False,
    ) -> None:
        """Add one sample of the transform that maps ``child`` coordinates into ``parent``."""
        parent, child = parent.lstrip("/"), child.lstrip("/")
        if not parent or not child:
            raise InvalidTransformError("parent and child frame ids must be non-empty")
        if parent == child:
            raise InvalidTransformError(f"a frame cannot be its own parent ({child!r})")
        trans = np.asarray(translation, dtype=np.float64).reshape(3)
        quat = np.asarray(rotation_xyzw, dtype=np.float64).reshape(4)
        if not (np.all(np.isfinite(trans)) and np.all(np.isfinite(quat)) and np.isfinite(stamp)):
            raise InvalidTransformError(f"non-finite transform {parent} -> {child}")
        norm = float(np.linalg.norm(quat))
        if norm < 1e-9:
            raise InvalidTransformError(f"zero quaternion in transform {parent} -> {child}")
        quat = quat / norm
        with self._lock:
            edge = self._edges.get(child)
            if edge is None or edge.parent != parent or edge.static != static:
                # A frame has one parent; a new parent (re-parenting) replaces the old edge.
                edge = _Edge(parent, static)
                self._edges[child] = edge
            edge.insert(float(stamp), trans, quat)
            edge.prune(edge.latest() - self._cache)

    def frames(self) -> set[str]:
        """Every frame mentioned so far."""
        with self._lock:
            return set(self._edges) | {edge.parent for edge in self._edges.values()}

    def can_transform(self, target: str, source: str, stamp: float = 0.0) -> bool:
        """Whether :meth:`lookup` would succeed."""
        try:
            self.lookup(target, source, stamp)
        except TransformError:
            return False
        return True

    def lookup(self, target: str, source: str, stamp: float = 0.0) -> Matrix4:
        """The 4x4 matrix mapping points in ``source`` into ``target`` at ``stamp``.

        Raises:
            UnknownFrameError: a frame was never mentioned.
            ConnectivityError: the frames are in different trees.
            ExtrapolationError: an edge on the path has no samples around ``stamp``.
        """
        target, source = target.lstrip("/"), source.lstrip("/")
        with self._lock:
            known = set(self._edges) | {edge.parent for edge in self._edges.values()}
            for frame in (target, source):
                if frame not in known:
                    raise UnknownFrameError(f"frame {frame!r} does not exist in the buffer")
            if target == source:
                return np.eye(4)
            up_source = self._chain(source)
            up_target = self._chain(target)
            ancestors_target = {frame: i for i, frame in enumerate(up_target)}
            common = next((f for f in up_source if f in ancestors_target), None)
            if common is None:
                raise ConnectivityError(
                    f"frames {target!r} and {source!r} are not connected (roots "
                    f"{up_target[-1]!r} and {up_source[-1]!r})"
                )
            src_path = up_source[: up_source.index(common)]
            tgt_path = up_target[: ancestors_target[common]]
            if stamp == 0.0:
                stamp = self._latest_common(src_path + tgt_path)
            common_from_source = np.eye(4)
            for frame in reversed(src_path):  # from just below the common frame down to source
                common_from_source = common_from_source @ self._edges[frame].sample(stamp, frame)
            common_from_target = np.eye(4)
            for frame in reversed(tgt_path):
                common_from_target = common_from_target @ self._edges[frame].sample(stamp, frame)
        return _rigid_inverse(common_from_target) @ common_from_source

    def _chain(self, frame: str) -> list[str]:
        chain = [frame]
        seen = {frame}
        while frame in self._edges:
            frame = self._edges[frame].parent
            if frame in seen:
                raise ConnectivityError(f"transform tree has a cycle through {frame!r}")
            seen.add(frame)
            chain.append(frame)
        return chain

    def _latest_common(self, frames: list[str]) -> float:
        if not frames:
            return 0.0
        latest = min(self._edges[f].latest() for f in frames)
        earliest = max(self._edges[f].earliest() for f in frames)
        if latest == float("inf"):
            return 0.0  # only static edges: any stamp will do
        if latest < earliest:
            raise ExtrapolationError("the edges on the path share no common time")
        return latest
