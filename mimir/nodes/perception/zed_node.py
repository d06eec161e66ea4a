"""ZED capture node: a Stereolabs ZED camera -> mimir's camera topics.

Needs the Stereolabs ZED SDK Python API (``pyzed.sl``, shipped with the ZED installer; the PyPI
package called ``pyzed`` is something else). Without it the node stops at startup with exit
status 1 and a message saying so. The camera is opened in the constructor, so a camera that
cannot be opened stops the node the same way.

For camera name ``<camera>`` it publishes (sensor QoS), every frame with the SDK's image stamp:

* ``cameras/<camera>/color/image_raw``: left rectified image, ``rgb8`` or ``bgr8``;
* ``cameras/<camera>/depth/image_raw``: depth registered to it, ``32FC1`` metres
  (NaN/inf = no reading);
* ``cameras/<camera>/color/camera_info``: its pinhole intrinsics, zero distortion;
* on /tf_static once: ``camera_frame -> optical_frame`` (REP-103 optical axes: x right, y down,
  z forward). ``camera_frame`` (default ``<camera>_camera_link``) is the left camera's body
  frame; its pose on the robot comes from the robot description.

Grabbing blocks until the SDK has a new frame, so it runs in its own callback group.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from mimir.nodes import common_params as shared
from mimir.nodes.perception.messages import PerceptionNodeError, intrinsics_to_camera_info
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import numpy_to_image
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir.settings import param
from mimir_perception.camera import make_transform
from mimir_perception.errors import IntrinsicsError, ZedFrameError, ZedUnavailableError
from mimir_perception.zed import ZedCamera, ZedConfig

#: Rotation of a REP-103 optical frame in its camera body frame (x forward, y left, z up).
BODY_FROM_OPTICAL = make_transform(
    np.column_stack([[0.0, -1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]]), [0.0, 0.0, 0.0]
)


@dataclass(frozen=True)
class ZedNodeConfig:
    """Parameters of the ZED node."""

    camera: str = param("base", "camera name used in topic and frame names", read_only=True)
    serial_number: int = param(0, "camera serial number; 0 opens the first one", read_only=True)
    resolution: str = param("HD720", "SDK resolution (HD720, HD1080, ...)", read_only=True)
    fps: int = param(30, "frame rate", read_only=True)
    depth_mode: str = param("NEURAL", "SDK depth mode (NEURAL, ULTRA, ...)", read_only=True)
    min_depth: float = param(0.3, "nearest depth the SDK reports (m)", read_only=True)
    max_depth: float = param(10.0, "farthest depth the SDK reports (m)", read_only=True)
    color_encoding: str = param("rgb8", "rgb8 or bgr8", read_only=True)
    camera_frame: str = param(
        "", "left camera body frame (default <camera>_camera_link)", read_only=True)
    optical_frame: str = param(
        "", "optical frame of the images (default <camera>_color_optical_frame)", read_only=True)
    publish_optical_tf: bool = param(
        True, "publish camera_frame -> optical_frame on /tf_static", read_only=True)
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if not self.camera or "/" in self.camera:
            raise ValueError(f"camera must be a plain non-empty name, got {self.camera!r}")
        if self.color_encoding not in ("rgb8", "bgr8"):
            raise ValueError(f"color_encoding must be rgb8 or bgr8, got {self.color_encoding!r}")
        if not self.diagnostics_period > 0.0:
            raise ValueError("diagnostics_period must be positive")

    @property
    def camera_frame_id(self) -> str:
        """The camera body frame."""
        return self.camera_frame or f"{self.camera}_camera_link"

    @property
    def optical_frame_id(self) -> str:
        """The optical frame of the published images."""
        return self.optical_frame or f"{self.camera}_color_optical_frame"


class ZedNode(Node):
    """Publishes color, registered depth and camera info of one ZED camera."""

    def __init__(self, sdk: ModuleType | None = None, **kwargs: Any) -> None:
        """Create the node and open the camera.

        Args:
            sdk: An object standing in for ``pyzed.sl`` (tests); None imports the real SDK.
            **kwargs: Passed to :class:`rclpy.node.Node`.

        Raises:
            PerceptionNodeError: SDK missing, camera not openable, or bad parameters.
        """
        super().__init__("zed", **kwargs)
        try:
            self.config = declare_config(self, ZedNodeConfig)
            cfg = self.config
            zed_config = ZedConfig(
                serial_number=cfg.serial_number, resolution=cfg.resolution, fps=cfg.fps,
                depth_mode=cfg.depth_mode, min_depth=cfg.min_depth, max_depth=cfg.max_depth,
            )
        except (ValueError, ZedUnavailableError) as err:
            raise PerceptionNodeError(f"invalid ZED parameters: {err}") from err
        self._zed = ZedCamera(zed_config, sdk=sdk)
        try:
            self._zed.open()
        except ZedUnavailableError as err:
            raise PerceptionNodeError(f"ZED camera unavailable: {err}") from err
        self.counters = NodeCounters(("bad_frame",))
        prefix = f"cameras/{cfg.camera}"
        self._color_pub = self.create_publisher(Image, f"{prefix}/color/image_raw", qos.SENSOR,
                                                publisher_class=FloatSafePublisher)
        self._depth_pub = self.create_publisher(Image, f"{prefix}/depth/image_raw", qos.SENSOR,
                                                publisher_class=FloatSafePublisher)
        self._info_pub = self.create_publisher(
            CameraInfo, f"{prefix}/color/camera_info", qos.SENSOR,
            publisher_class=FloatSafePublisher,
        )
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        if cfg.publish_optical_tf:
            self._static_tf = TransformPublisher(self, static=True)
            self._static_tf.send([matrix_to_transform(
                BODY_FROM_OPTICAL, cfg.camera_frame_id, cfg.optical_frame_id, 0.0
            )])
        self._grab_group = MutuallyExclusiveCallbackGroup()
        self.create_timer(1.0 / cfg.fps, self._grab, callback_group=self._grab_group)
        self.create_timer(cfg.diagnostics_period, self._report)
        self.get_logger().info(
            f"ZED {cfg.resolution}@{cfg.fps} publishing on {prefix} ({cfg.optical_frame_id})"
        )

    def _grab(self) -> None:
        try:
            frame = self._zed.grab()
        except (ZedFrameError, IntrinsicsError) as err:
            self.counters.add("bad_frame")
            self.get_logger().warning(f"skipping ZED frame: {err}", throttle_duration_sec=5.0)
            return
        if frame is None:
            self.counters.add("no_frame")
            return
        cfg = self.config
        header = Header(frame_id=cfg.optical_frame_id, stamp=from_seconds(frame.stamp))
        color = frame.rgb if cfg.color_encoding == "rgb8" else frame.rgb[:, :, ::-1]
        self._color_pub.publish(numpy_to_image(color, cfg.color_encoding, header))
        self._depth_pub.publish(numpy_to_image(frame.depth, "32FC1", header))
        self._info_pub.publish(intrinsics_to_camera_info(frame.intrinsics, header))
        self.counters.add("frames")

    def _report(self) -> None:
        self.counters.publish(self, self._diag_pub, self.config.camera)

    def destroy_node(self) -> None:
        """Close the camera, then destroy the node."""
        zed = getattr(self, "_zed", None)
        if zed is not None:
            zed.close()
        super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Run the ZED node."""
    return run_node(ZedNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
