"""Deprojection node: segmentation + registered depth + camera info + TF -> 3D observations.

Deprojection is its own node (not part of the segmentation node or the scene graph node) so
the slow model, the geometry and world memory scale and restart independently, and so the
simulation bridge's ground-truth segmentation goes through exactly the same geometry as SAM3's.

For every configured camera ``<cam>`` it subscribes (sensor QoS)

* ``cameras/<cam>/segmentation`` (mimir_msgs/Segmentation),
* ``cameras/<cam>/depth/image_raw`` (registered to color; ``16UC1`` mm or ``32FC1`` m),
* ``cameras/<cam>/color/camera_info``,

matches them by stamp with :class:`mimir_perception.sync.FrameSynchronizer` (within
``sync_tolerance``), looks up the camera optical frame (the segmentation header's frame id)
in ``map_frame`` at the image stamp, deprojects every instance with
:class:`mimir_perception.deprojection.Deprojector` and publishes one
``mimir_msgs/ObjectObservationArray`` per frame on ``observations`` (events QoS, header frame
= ``map_frame``, stamp = image stamp; possibly empty when no instance had enough valid depth).

Message callbacks only convert and queue; matched frames are deprojected in their own callback
group. A frame whose transform is not yet available is retried until ``transform_timeout``
(seconds of waiting, since TF may arrive after the image) and then skipped.

Bad input never crashes the node and never yields an observation: malformed messages,
unsupported depth encodings, camera info with distortion or zero focal length, size mismatches,
missing camera info, transforms unknown or out of the buffered range, frames older than the
last published one, empty masks, masks without valid depth and instances beyond
``max_instances`` are skipped with a rate-limited warning and counted; the counters (plus the
synchroniser's drops) are published on ``/diagnostics`` every ``diagnostics_period``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from mimir import transforms as tfm
from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError, load_bounds
from mimir.nodes.perception.messages import (
    CameraInfoError,
    PerceptionNodeError,
    SegmentationMessageError,
    camera_info_to_intrinsics,
    msg_to_segmentation,
)
from mimir.paths import config_file
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import ImageConversionError, UnsupportedEncodingError, image_to_numpy
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import make_transform_source
from mimir.ros.time import from_seconds, to_seconds
from mimir_memory.observations import ObjectObservation
from mimir_msgs.msg import ObjectObservation as ObservationMsg
from mimir_msgs.msg import ObjectObservationArray, Segmentation
from mimir_perception.camera import matrix_to_quaternion, quaternion_to_matrix
from mimir_perception.deprojection import DeprojectionConfig, Deprojector, DepthUnit, SkipReason
from mimir_perception.errors import (
    DepthError,
    ImageSizeMismatchError,
    PerceptionError,
    PoseOutOfWorkspaceError,
    SynchronizationError,
    TransformError,
)
from mimir_perception.sync import FrameSynchronizer, SyncConfig, SyncedFrame

_DEPTH_UNITS: dict[str, DepthUnit] = {"16UC1": "mm", "mono16": "mm", "32FC1": "m"}
_WARN_KEYS = (
    "bad_segmentation",
    "bad_depth",
    "unsupported_depth_encoding",
    "bad_camera_info",
    "missing_camera_info",
    "size_mismatch",
    "transform_unavailable",
    "transform_extrapolation",
    "out_of_order",
    "backlog",
    "deprojection_failed",
    "pose_outside_workspace",
    *(f"segmentation_{r}" for r in ("stale", "late", "duplicate", "queue_full")),
    *(r.value for r in SkipReason),
)


@dataclass(frozen=True)
class DeprojectionNodeConfig:
    """Parameters of the deprojection node (defaults mirror config/params/deprojection.yaml)."""

    cameras: tuple[str, ...] = field(
        default=("base", "pole", "wrist"),
        metadata={"description": "camera names to deproject", "read_only": True},
    )
    map_frame: str = field(
        default="map", metadata={"description": "fixed frame of the observations",
                                 "read_only": True}
    )
    rectified: bool = field(
        default=True,
        metadata={"description": "camera infos describe rectified images (use P, ignore D); "
                  "false refuses non-zero distortion", "read_only": True},
    )
    sync_tolerance: float = field(
        default=0.02, metadata={"description": "largest stamp difference of a matched "
                                "segmentation, depth and camera info (s)", "read_only": True}
    )
    sync_max_age: float = field(
        default=2.0, metadata={"description": "queued inputs older than the newest stamp "
                               "minus this are dropped (s)", "read_only": True}
    )
    sync_max_queue: int = field(
        default=30, metadata={"description": "most queued inputs per stream and camera",
                              "read_only": True}
    )
    transform_timeout: float = field(
        default=0.5, metadata={"description": "how long a frame waits for its transform "
                               "before it is skipped (s)", "read_only": True}
    )
    tf_cache: float = field(
        default=10.0, metadata={"description": "transform history kept (s)", "read_only": True}
    )
    max_backlog: int = field(
        default=8, metadata={"description": "matched frames waiting for deprojection; older "
                             "ones are dropped beyond this", "read_only": True}
    )
    min_depth: float = field(
        default=0.1, metadata={"description": "nearest valid depth (m)", "read_only": True}
    )
    max_depth: float = field(
        default=10.0, metadata={"description": "farthest valid depth (m)", "read_only": True}
    )
    erode_px: int = field(
        default=2, metadata={"description": "mask erosion radius (pixels)", "read_only": True}
    )
    min_points: int = field(
        default=30, metadata={"description": "fewest valid points behind an observation",
                              "read_only": True}
    )
    max_instances: int = field(
        default=200, metadata={"description": "most instances deprojected per frame (best "
                               "scores kept)", "read_only": True}
    )
    outlier_mad_k: float = field(
        default=3.0, metadata={"description": "depth outlier threshold in scaled MADs "
                               "(0 disables)", "read_only": True}
    )
    centroid: str = field(
        default="median", metadata={"description": "median, mean or trimmed_mean",
                                    "read_only": True}
    )
    pixel_stride: int = field(
        default=1, metadata={"description": "use every n-th row and column", "read_only": True}
    )
    compute_obb: bool = field(
        default=True, metadata={"description": "also compute oriented boxes", "read_only": True}
    )
    diagnostics_period: float = field(
        default=1.0, metadata={"description": "period of the /diagnostics report (s)",
                               "read_only": True}
    )
    memory_config: str = field(
        default="", metadata={"description": "settings YAML whose bounds section limits poses "
                              "and observations; empty for the installed memory.yaml",
                              "read_only": True}
    )

    def __post_init__(self) -> None:
        if not self.cameras or any(not c or "/" in c for c in self.cameras):
            raise ValueError(f"cameras must be plain non-empty names, got {self.cameras!r}")
        if len(set(self.cameras)) != len(self.cameras):
            raise ValueError(f"cameras repeat: {self.cameras!r}")
        if not self.map_frame:
            raise ValueError("map_frame must be non-empty")
        if self.transform_timeout < 0.0 or self.tf_cache <= 0.0 or self.max_backlog < 1:
            raise ValueError("transform_timeout >= 0, tf_cache > 0 and max_backlog >= 1 needed")
        if not self.diagnostics_period > 0.0:
            raise ValueError("diagnostics_period must be positive")

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


def _point(values: npt.ArrayLike) -> Point:
    x, y, z = (float(v) for v in np.asarray(values, dtype=np.float64).reshape(3))
    return Point(x=x, y=y, z=z)


def observation_to_msg(obs: ObjectObservation) -> ObservationMsg:
    """Encode an observation (the oriented box stays all zero when it was not computed)."""
    msg = ObservationMsg()
    msg.header = Header(frame_id=obs.frame_id, stamp=from_seconds(obs.stamp))
    msg.label = obs.label
    msg.detection_id = obs.detection_id
    msg.camera = obs.camera
    msg.centroid = _point(obs.centroid)
    msg.bbox_min = _point(obs.bbox_min)
    msg.bbox_max = _point(obs.bbox_max)
    if obs.obb_center is not None and obs.obb_extent is not None and obs.obb_rotation is not None:
        box = msg.oriented_box
        box.center.position = _point(obs.obb_center)
        qx, qy, qz, qw = (float(v) for v in matrix_to_quaternion(obs.obb_rotation))
        box.center.orientation.x, box.center.orientation.y = qx, qy
        box.center.orientation.z, box.center.orientation.w = qz, qw
        box.size.x, box.size.y, box.size.z = (float(v) for v in obs.obb_extent)
    msg.score = float(obs.score)
    msg.point_count = int(obs.point_count)
    return msg


def msg_to_observation(msg: ObservationMsg) -> ObjectObservation:
    """Decode an observation message (for world memory); raises InvalidObservationError."""
    box = msg.oriented_box
    has_box = (box.size.x, box.size.y, box.size.z) != (0.0, 0.0, 0.0)
    rotation = None
    if has_box:
        q = box.center.orientation
        rotation = quaternion_to_matrix([q.x, q.y, q.z, q.w])
    p = box.center.position

    def vec(x: float, y: float, z: float) -> npt.NDArray[np.float64]:
        return np.array([x, y, z], dtype=np.float64)

    return ObjectObservation(
        label=msg.label,
        centroid=vec(msg.centroid.x, msg.centroid.y, msg.centroid.z),
        bbox_min=vec(msg.bbox_min.x, msg.bbox_min.y, msg.bbox_min.z),
        bbox_max=vec(msg.bbox_max.x, msg.bbox_max.y, msg.bbox_max.z),
        stamp=to_seconds(msg.header.stamp),
        score=float(msg.score),
        point_count=int(msg.point_count),
        camera=msg.camera,
        detection_id=msg.detection_id,
        frame_id=msg.header.frame_id,
        obb_center=vec(p.x, p.y, p.z) if has_box else None,
        obb_extent=vec(box.size.x, box.size.y, box.size.z) if has_box else None,
        obb_rotation=rotation,
    )


@dataclass
class _Pending:
    frame: SyncedFrame
    optical_frame: str
    first_try: float


class DeprojectionNode(Node):
    """Deprojects synchronised segmentation and depth of each camera into map observations."""

    def __init__(self, **kwargs: Any) -> None:
        """Create the node; ``kwargs`` go to :class:`rclpy.node.Node`."""
        super().__init__("deprojection", **kwargs)
        try:
            self.config = declare_config(self, DeprojectionNodeConfig)
            cfg = self.config
            self._sync = FrameSynchronizer(cfg.sync())
            bounds = load_bounds(config_file("memory.yaml", cfg.memory_config))
            self._deprojectors = {
                (cam, unit): Deprojector(cfg.deprojection(unit, bounds))
                for cam in cfg.cameras
                for unit in ("mm", "m")
            }
        except (ValueError, PerceptionError, OSError, BoundsError) as err:
            raise PerceptionNodeError(f"invalid deprojection parameters: {err}") from err
        self.counters = NodeCounters(_WARN_KEYS)
        self._sync_lock = threading.Lock()
        self._queue_lock = threading.Lock()
        self._ready: deque[_Pending] = deque()
        self._retry: list[_Pending] = []
        self._optical: dict[str, str] = {}
        self._has_info: set[str] = set()
        self._last_published: dict[str, float] = {}
        self._tf = make_transform_source(self, cfg.tf_cache)
        self._input_group = MutuallyExclusiveCallbackGroup()
        self._work_group = MutuallyExclusiveCallbackGroup()
        self._obs_pub = self.create_publisher(ObjectObservationArray, "observations", qos.EVENTS,
            publisher_class=FloatSafePublisher)
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
            publisher_class=FloatSafePublisher)
        for cam in cfg.cameras:
            self.create_subscription(
                CameraInfo, f"cameras/{cam}/color/camera_info", partial(self._on_info, cam),
                qos.SENSOR, callback_group=self._input_group,
            )
            self.create_subscription(
                Image, f"cameras/{cam}/depth/image_raw", partial(self._on_depth, cam),
                qos.SENSOR, callback_group=self._input_group,
            )
            self.create_subscription(
                Segmentation, f"cameras/{cam}/segmentation", partial(self._on_segmentation, cam),
                qos.SENSOR, callback_group=self._input_group,
            )
        self._wake = self.create_guard_condition(self._work, callback_group=self._work_group)
        self.create_timer(0.05, self._retry_pending, callback_group=self._work_group)
        self.create_timer(cfg.diagnostics_period, self._report)
        self.get_logger().info(
            f"deprojecting {', '.join(cfg.cameras)} into {cfg.map_frame!r} "
            f"(tf backend {self._tf.backend})"
        )

    # Input side: convert, queue, match (input callback group).

    def _skip(self, camera: str, key: str, text: str, count: int = 1) -> None:
        self.counters.add(f"{camera}.{key}", count)
        self.get_logger().warning(f"{camera}: {text}", throttle_duration_sec=5.0)

    def _offer(self, camera: str, add: Any) -> None:
        try:
            with self._sync_lock:
                frames: list[SyncedFrame] = add()
        except SynchronizationError as err:
            self._skip(camera, "bad_stamp", f"input refused by the synchroniser: {err}")
            return
        if not frames:
            return
        optical = self._optical.get(camera, f"{camera}_color_optical_frame")
        now = time.monotonic()
        with self._queue_lock:
            for frame in frames:
                self._ready.append(_Pending(frame, optical, now))
            while len(self._ready) > self.config.max_backlog:
                dropped = self._ready.popleft()
                self._skip(dropped.frame.camera, "backlog",
                           "deprojection is behind; dropping the oldest matched frame")
        self._wake.trigger()

    def _on_info(self, camera: str, msg: CameraInfo) -> None:
        try:
            intrinsics = camera_info_to_intrinsics(msg, rectified=self.config.rectified)
        except CameraInfoError as err:
            self._skip(camera, "bad_camera_info", f"skipping camera info: {err}")
            return
        self._has_info.add(camera)
        stamp = to_seconds(msg.header.stamp)
        self._offer(camera, lambda: self._sync.add_camera_info(camera, stamp, intrinsics))

    def _on_depth(self, camera: str, msg: Image) -> None:
        if msg.encoding not in _DEPTH_UNITS:
            self._skip(camera, "unsupported_depth_encoding",
                       f"depth encoding {msg.encoding!r} is not 16UC1, mono16 or 32FC1")
            return
        try:
            depth = image_to_numpy(msg)
        except (UnsupportedEncodingError, ImageConversionError) as err:
            self._skip(camera, "bad_depth", f"skipping depth image: {err}")
            return
        stamp = to_seconds(msg.header.stamp)
        self._offer(camera, lambda: self._sync.add_depth(camera, stamp, depth))

    def _on_segmentation(self, camera: str, msg: Segmentation) -> None:
        try:
            result = msg_to_segmentation(msg, camera=camera)
        except SegmentationMessageError as err:
            self._skip(camera, "bad_segmentation", f"skipping segmentation: {err}")
            return
        if camera not in self._has_info:
            self._skip(camera, "missing_camera_info",
                       "segmentation arrived but no valid camera info has been received")
        if msg.header.frame_id:
            self._optical[camera] = msg.header.frame_id
        self._offer(camera, lambda: self._sync.add_segmentation(result, camera))

    # Work side: transform lookup, deprojection, publishing (work callback group).

    def _work(self) -> None:
        while True:
            with self._queue_lock:
                if not self._ready:
                    return
                pending = self._ready.popleft()
            self._process(pending)

    def _retry_pending(self) -> None:
        if not self._retry:
            return
        waiting, self._retry = self._retry, []
        for pending in waiting:
            self._process(pending)

    def _process(self, pending: _Pending) -> None:
        frame = pending.frame
        camera = frame.camera
        if frame.stamp < self._last_published.get(camera, -1.0):
            self._skip(camera, "out_of_order",
                       f"frame at {frame.stamp:.3f} is older than the last published "
                       f"{self._last_published[camera]:.3f}")
            return
        try:
            pose = self._tf.lookup(self.config.map_frame, pending.optical_frame, frame.stamp)
        except tfm.TransformError as err:
            if time.monotonic() - pending.first_try < self.config.transform_timeout:
                self._retry.append(pending)
                return
            key = (
                "transform_extrapolation"
                if isinstance(err, tfm.ExtrapolationError)
                else "transform_unavailable"
            )
            self._skip(camera, key, f"no {self.config.map_frame} <- {pending.optical_frame} "
                       f"transform at {frame.stamp:.3f}: {err}")
            return
        unit: DepthUnit = "mm" if frame.depth.dtype == np.uint16 else "m"
        try:
            result = self._deprojectors[(camera, unit)].deproject(
                frame.segmentation, frame.depth, frame.intrinsics, pose,
                stamp=frame.stamp, camera=camera,
            )
        except ImageSizeMismatchError as err:
            self._skip(camera, "size_mismatch", f"skipping frame: {err}")
            return
        except DepthError as err:
            self._skip(camera, "bad_depth", f"skipping frame: {err}")
            return
        except PoseOutOfWorkspaceError as err:
            self._skip(camera, "pose_outside_workspace", f"skipping frame: {err}")
            return
        except (TransformError, PerceptionError) as err:
            self._skip(camera, "deprojection_failed", f"skipping frame: {err}")
            return
        for skipped in result.skipped:
            self._skip(camera, skipped.reason.value,
                       f"instance {skipped.instance_id} ({skipped.label}) skipped: "
                       f"{skipped.reason.value} ({skipped.point_count} points)")
        out = ObjectObservationArray()
        out.header = Header(frame_id=self.config.map_frame, stamp=from_seconds(frame.stamp))
        out.camera = camera
        out.observations = [observation_to_msg(o) for o in result.observations]
        self._obs_pub.publish(out)
        self._last_published[camera] = frame.stamp
        self.counters.add(f"{camera}.frames_published")
        self.counters.add(f"{camera}.observations", len(out.observations))

    def _report(self) -> None:
        with self._sync_lock:
            sync = self._sync.diagnostics()
        for camera, entries in sync.items():
            for key, value in entries.items():
                if key.startswith("segmentation."):
                    name = f"{camera}.segmentation_{key.split('.', 1)[1]}"
                else:
                    name = f"{camera}.sync.{key}"
                self.counters.set(name, value)
        array = self.counters.report(self.get_fully_qualified_name(), ",".join(self.config.cameras))
        array.header.stamp = self.get_clock().now().to_msg()
        self._diag_pub.publish(array)


def main(args: list[str] | None = None) -> int:
    """Run the deprojection node."""
    return run_node(DeprojectionNode, args)


if __name__ == "__main__":
    sys.exit(main())
