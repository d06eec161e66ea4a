"""Camera views for 3D pointing: depth, calibration and segmentation of one stamp, with poses.

:class:`CameraViews` subscribes, for every pointing camera, to the registered depth, the camera
info, the object segmentation (``cameras/<cam>/segmentation``) and the part segmentation
(``cameras/<cam>/parts``: handles and the like), keeps the last few stamps of each, and builds a
:class:`~mimir_robot.targeting.CameraView` from the newest stamp that has depth and object
segmentation, looking the camera and base poses up in TF at that stamp.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from mimir.nodes.perception.messages import (
    CameraInfoError,
    SegmentationMessageError,
    camera_info_to_intrinsics,
    msg_to_segmentation,
)
from mimir.ros import qos
from mimir.ros.images import ImageConversionError, depth_to_metres
from mimir.ros.tf import TransformSource, lookup_waiting
from mimir.ros.time import to_seconds
from mimir.transforms import TransformError
from mimir_msgs.msg import Segmentation
from mimir_robot.targeting import CameraView

Warn = Callable[[str, str], None]
_KEPT_STAMPS = 8


class CameraViews:
    """The latest complete views of the pointing cameras."""

    def __init__(self, node: Node, cameras: tuple[str, ...], *, tf: TransformSource,
                 frames: tuple[str, str], optical_suffix: str, warn: Warn,
                 group: CallbackGroup) -> None:
        self.cameras = cameras
        self._tf = tf
        self._map, self._base = frames
        self._suffix = optical_suffix
        self._warn = warn
        self._cond = threading.Condition()
        self._stamps: dict[str, OrderedDict[float, dict[str, Any]]] = {
            c: OrderedDict() for c in cameras}
        self._info: dict[str, CameraInfo] = {}
        self._has_parts: set[str] = set()  # cameras whose part segmentation has been seen
        for cam in cameras:
            root = f"cameras/{cam}"
            node.create_subscription(Image, f"{root}/depth/image_raw",
                                     lambda m, c=cam: self._keep(c, "depth", m),
                                     qos.SENSOR, callback_group=group)
            node.create_subscription(Segmentation, f"{root}/segmentation",
                                     lambda m, c=cam: self._keep(c, "objects", m),
                                     qos.SENSOR, callback_group=group)
            node.create_subscription(Segmentation, f"{root}/parts",
                                     lambda m, c=cam: self._keep(c, "parts", m),
                                     qos.SENSOR, callback_group=group)
            node.create_subscription(CameraInfo, f"{root}/color/camera_info",
                                     lambda m, c=cam: self._set_info(c, m),
                                     qos.SENSOR, callback_group=group)

    def _keep(self, camera: str, kind: str, msg: Any) -> None:
        stamp = to_seconds(msg.header.stamp)
        with self._cond:
            table = self._stamps[camera]
            table.setdefault(stamp, {"frame": msg.header.frame_id})[kind] = msg
            if kind == "parts":
                self._has_parts.add(camera)
            while len(table) > _KEPT_STAMPS:
                table.popitem(last=False)
            self._cond.notify_all()

    def _set_info(self, camera: str, msg: CameraInfo) -> None:
        with self._cond:
            self._info[camera] = msg

    def _newest(self, camera: str, after: float) -> tuple[float, dict[str, Any]] | None:
        for stamp in sorted(self._stamps[camera], reverse=True):
            entry = self._stamps[camera][stamp]
            needed = ("depth", "objects", "parts") if camera in self._has_parts else (
                "depth", "objects")
            if stamp >= after and all(k in entry for k in needed):
                return stamp, dict(entry)
        return None

    def wait(self, camera: str, after: float, timeout_s: float) -> CameraView | None:
        """The newest view of ``camera`` stamped at or after ``after`` (waits up to the timeout).

        None when no such frame came, or it cannot be used (bad image, no pose in TF); the
        reason goes to ``warn``.
        """
        deadline = time.monotonic() + timeout_s
        deadline_tf = deadline + 0.5
        with self._cond:
            found = self._newest(camera, after)
            while found is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0.0:
                    return None
                self._cond.wait(remaining)
                found = self._newest(camera, after)
            info = self._info.get(camera)
        stamp, entry = found
        if info is None:
            self._warn(f"{camera}.no_camera_info", f"{camera}: no camera info yet")
            return None
        optical = entry["frame"] or camera + self._suffix
        try:
            intrinsics = camera_info_to_intrinsics(info, rectified=True)
            depth = depth_to_metres(entry["depth"])
            objects = msg_to_segmentation(entry["objects"], camera)
            parts = msg_to_segmentation(entry["parts"], camera) if "parts" in entry else None
            base_from_camera = lookup_waiting(self._tf, self._base, optical, stamp,
                                              deadline=deadline_tf)
            map_from_base = lookup_waiting(self._tf, self._map, self._base, stamp,
                                           deadline=deadline_tf)
        except (CameraInfoError, ImageConversionError, SegmentationMessageError) as err:
            self._warn(f"{camera}.bad_view", f"{camera}: view unusable: {err}")
            return None
        except TransformError as err:
            self._warn(f"{camera}.no_pose", f"{camera}: no pose at {stamp:.2f}: {err}")
            return None
        return CameraView(camera, stamp, depth, intrinsics, base_from_camera, map_from_base,
                          objects, parts)
