"""The planner camera: its latest image, calibration and pose as the planner's current view.

:class:`PlannerCamera` subscribes to ``cameras/<cam>/color/image_raw`` and ``.../camera_info`` of
the planner camera, keeps the latest of each, and on request converts them, with the optical
frame's pose in the map from TF, into the :class:`~mimir_planner.planner.Observation` the planner
draws its Set-of-Mark overlay on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from mimir.nodes.perception.messages import CameraInfoError, camera_info_to_intrinsics
from mimir.ros import qos
from mimir.ros.images import ImageConversionError, image_to_rgb
from mimir.ros.tf import make_transform_source
from mimir.ros.time import to_seconds
from mimir.transforms import TransformError
from mimir_planner.runs import Observation

Warn = Callable[[str, str], None]
"""Reports a problem: (diagnostics counter key, log text)."""


class PlannerCamera:
    """Latest view of one camera for the planner.

    Args:
        node: Node that owns the subscriptions and the transform source.
        camera: Camera name (``pole``...).
        map_frame: Frame the pose is looked up in.
        optical_frame_suffix: Optical frame = camera name + suffix when an image has none.
        rectified: Camera infos describe rectified images.
        warn: Called with a counter key and a text when something is unusable.
        group: Callback group of the subscriptions.
    """

    def __init__(self, node: Node, camera: str, *, map_frame: str, optical_frame_suffix: str,
                 rectified: bool, warn: Warn, group: CallbackGroup) -> None:
        self.camera = camera
        self.map_frame = map_frame
        self.optical_frame = camera + optical_frame_suffix
        self.rectified = rectified
        self._warn = warn
        self._image: Image | None = None
        self._info: CameraInfo | None = None
        self._lock = threading.Lock()
        self._tf = make_transform_source(node)
        node.create_subscription(Image, f"cameras/{camera}/color/image_raw", self._on_image,
                                 qos.SENSOR, callback_group=group)
        node.create_subscription(CameraInfo, f"cameras/{camera}/color/camera_info",
                                 self._on_info, qos.SENSOR, callback_group=group)

    def close(self) -> None:
        """Stop listening to transforms (the owner's ``destroy_node`` calls this)."""
        self._tf.close()

    def _on_image(self, msg: Image) -> None:
        with self._lock:
            self._image = msg

    def _on_info(self, msg: CameraInfo) -> None:
        with self._lock:
            self._info = msg

    def observation(self) -> Observation | None:
        """The latest image with intrinsics and pose (when known), or None."""
        with self._lock:
            image, info = self._image, self._info
        if image is None:
            return None
        try:
            rgb = image_to_rgb(image)
        except ImageConversionError as err:
            self._warn("bad_image", f"planner camera image unusable: {err}")
            return None
        stamp = to_seconds(image.header.stamp)
        intrinsics = None
        if info is not None:
            try:
                intrinsics = camera_info_to_intrinsics(info, rectified=self.rectified)
            except CameraInfoError as err:
                self._warn("bad_camera_info", f"planner camera info unusable: {err}")
            if intrinsics is not None and (intrinsics.width, intrinsics.height) != (
                    rgb.shape[1], rgb.shape[0]):
                self._warn("bad_camera_info", "planner camera info does not match the image")
                intrinsics = None
        pose = None
        frame = image.header.frame_id or self.optical_frame
        try:
            pose = self._tf.lookup(self.map_frame, frame, stamp)
        except TransformError as err:
            self._warn("camera_pose_unavailable", f"no pose of {frame} at {stamp:.3f}: {err}")
        return Observation(rgb=rgb, intrinsics=intrinsics, camera_to_map=pose, stamp=stamp)
