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

Each array also carries the frame's ``view`` (``mimir_msgs/CameraView``): the optical frame's
pose in the map, the intrinsics and image size, ``max_depth`` as the range, a
``view_grid_rows`` x ``view_grid_cols`` grid of the nearest valid depth in each cell of the
depth image (:func:`mimir_memory.visibility.nearest_depth_grid`, a few milliseconds on an HD
frame), and the labels of ``vocabulary`` as the labels sought (empty when no vocabulary is
set). World memory uses it to notice remembered objects the frame should have shown and did
not. A frame whose view cannot be built still goes out, with ``view.valid`` false
(``view_failed``).

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
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from mimir import transforms as tfm
from mimir.bounds import BoundsError, load_bounds
from mimir.nodes.memory.observation_messages import observations_to_msgs, view_to_msg
from mimir.nodes.perception.deprojection_params import DeprojectionNodeConfig
from mimir.nodes.perception.messages import (
    CameraInfoError,
    PerceptionNodeError,
    SegmentationMessageError,
    camera_info_to_intrinsics,
    msg_to_segmentation,
)
from mimir.nodes.perception.segmentation_node import resolve_vocabulary
from mimir.paths import config_file
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters, SkipReasons
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import ImageConversionError, UnsupportedEncodingError, image_to_numpy
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import ClosesTransforms, make_transform_source
from mimir.ros.time import clock_seconds, from_seconds, to_seconds
from mimir_memory.errors import InvalidValueError
from mimir_memory.visibility import CameraView
from mimir_msgs.msg import ObjectObservationArray, Segmentation
from mimir_perception.deprojection import Deprojector, DepthUnit, SkipReason
from mimir_perception.errors import (
    DepthError,
    ImageSizeMismatchError,
    PerceptionError,
    PoseOutOfWorkspaceError,
    SynchronizationError,
)
from mimir_perception.sync import FrameSynchronizer, SyncedFrame

_DEPTH_UNITS: dict[str, DepthUnit] = {"16UC1": "mm", "mono16": "mm", "32FC1": "m"}
_WARN_KEYS = (
    "bad_segmentation",
    "bad_stamp",
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
    "view_failed",
    *(f"segmentation_{r}" for r in ("stale", "late", "duplicate", "queue_full")),
    *(r.value for r in SkipReason),
)
#: Counters of a matched frame the deprojector refuses (subclasses before their bases).
_DEPROJECT_SKIPS = SkipReasons(
    (ImageSizeMismatchError, "size_mismatch"),
    (DepthError, "bad_depth"),
    (PoseOutOfWorkspaceError, "pose_outside_workspace"),
    (PerceptionError, "deprojection_failed"),
)


@dataclass
class _Pending:
    frame: SyncedFrame
    optical_frame: str
    first_try: float


class DeprojectionNode(ClosesTransforms, Node):
    """Deprojects synchronised segmentation and depth of each camera into map observations."""

    def __init__(self, **kwargs: Any) -> None:
        """Create the node; ``kwargs`` go to :class:`rclpy.node.Node`."""
        super().__init__("deprojection", **kwargs)
        try:
            self.config = declare_config(self, DeprojectionNodeConfig)
            cfg = self.config
            self._sync = FrameSynchronizer(cfg.sync())
            bounds = self._bounds = load_bounds(config_file("memory.yaml", cfg.memory_config))
            self._deprojectors = {
                (cam, unit): Deprojector(cfg.deprojection(unit, bounds))
                for cam in cfg.cameras
                for unit in ("mm", "m")
            }
            self._labels_sought = (resolve_vocabulary(cfg.vocabulary).labels
                                   if cfg.vocabulary else ())
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

    def _offer(self, camera: str, add: Any, stamp: float) -> None:
        try:  # one input stamped far ahead would make every later one late for the sync
            self._bounds.stamp(stamp, clock_seconds(self), f"{camera} input stamp")
        except BoundsError as err:
            self._skip(camera, "bad_stamp", f"input refused: {err}")
            return
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
        self._offer(camera, lambda: self._sync.add_camera_info(camera, stamp, intrinsics), stamp)

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
        self._offer(camera, lambda: self._sync.add_depth(camera, stamp, depth), stamp)

    def _on_segmentation(self, camera: str, msg: Segmentation) -> None:
        try:
            result = msg_to_segmentation(msg, camera=camera, count_pixels=False)
        except SegmentationMessageError as err:
            self._skip(camera, "bad_segmentation", f"skipping segmentation: {err}")
            return
        if camera not in self._has_info:
            self._skip(camera, "missing_camera_info",
                       "segmentation arrived but no valid camera info has been received")
        if msg.header.frame_id:
            self._optical[camera] = msg.header.frame_id
        self._offer(camera, lambda: self._sync.add_segmentation(result, camera),
                    to_seconds(msg.header.stamp))

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
        except _DEPROJECT_SKIPS.errors as err:
            self._skip(camera, _DEPROJECT_SKIPS.key(err), f"skipping frame: {err}")
            return
        for skipped in result.skipped:
            self._skip(camera, skipped.reason.value,
                       f"instance {skipped.instance_id} ({skipped.label}) skipped: "
                       f"{skipped.reason.value} ({skipped.point_count} points)")
        out = ObjectObservationArray()
        out.header = Header(frame_id=self.config.map_frame, stamp=from_seconds(frame.stamp))
        out.camera = camera
        out.observations = observations_to_msgs(result.observations)
        out.view = view_to_msg(self._view(frame, pose, unit))
        self._obs_pub.publish(out)
        self._last_published[camera] = frame.stamp
        self.counters.add(f"{camera}.frames_published")
        self.counters.add(f"{camera}.observations", len(out.observations))

    def _view(self, frame: SyncedFrame, pose: tfm.Matrix4, unit: DepthUnit) -> CameraView | None:
        """What the frame's camera could see, or None (counted) when it cannot be built."""
        try:
            return self.config.view(frame.depth, frame.intrinsics, pose, unit,
                                    self._labels_sought)
        except InvalidValueError as err:
            self._skip(frame.camera, "view_failed", f"frame at {frame.stamp:.3f} goes out "
                       f"without a view: {err}")
            return None

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
        self.counters.publish(self, self._diag_pub, ",".join(self.config.cameras))


def main(args: list[str] | None = None) -> int:
    """Run the deprojection node."""
    return run_node(DeprojectionNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
