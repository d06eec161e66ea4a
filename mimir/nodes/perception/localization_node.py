"""Fiducial localization node: wall-mounted tags seen by one camera -> robot pose in the map.

Subscribes ``cameras/<camera>/color/image_raw`` and ``cameras/<camera>/color/camera_info``
(sensor QoS). The camera's mounting (``base_frame`` <- the image's optical frame) comes from TF
at the image stamp; the known tags come from ``fiducial_map`` (a file under ``config/`` such as
``fiducials/lab.yaml``, or a path). Each fresh estimate of ``base_frame`` in ``map_frame``
(:class:`mimir_perception.fiducials.FiducialLocalizer`) is published as

* ``localization/pose`` (geometry_msgs/PoseWithCovarianceStamped, events QoS; stamp = image
  stamp, frame = ``map_frame``), and
* a transform on /tf: ``map_frame -> odom_frame`` (``publish: map_to_odom``, the default; uses
  ``odom_frame -> base_frame`` from TF at the image stamp, REP-105) or ``map_frame ->
  base_frame`` (``publish: map_to_base``, for robots without odometry).

The last transform is held when no tag is seen: it is re-sent every ``1 / publish_rate_hz`` s
with a fresh stamp (node clock + ``transform_tolerance``), as AMCL does, until a new estimate
replaces it. Images are processed at most ``max_rate_hz`` (newest frame wins) in their own
callback group. An image whose mounting or odometry transform has not arrived yet (TF trails
the images) is tried again at the next tick while it is younger than ``tf_wait_s`` and no newer
image has come (counted as ``tf_wait``). A fix is used only when odometry says the base stood
still for ``still_window_s`` before the image (counted as ``moving`` otherwise). Bad input (no
camera info yet, size mismatch, unsupported encoding, missing mounting or odometry transform) is
skipped with a rate-limited warning and counted on ``/diagnostics``.
"""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image

from mimir import transforms as tfm
from mimir.nodes import common_params as shared
from mimir.nodes.perception.messages import (
    CameraInfoError,
    CameraModel,
    PerceptionNodeError,
    parse_camera_info,
)
from mimir.paths import config_dir
from mimir.ros import qos
from mimir.ros.diagnostics import NodeCounters, SkipReasons
from mimir.ros.floatfix import FloatSafePublisher
from mimir.ros.images import IMAGE_SKIPS, image_to_rgb
from mimir.ros.params import declare_config
from mimir.ros.runtime import run_node
from mimir.ros.tf import (
    ClosesTransforms,
    TransformPublisher,
    make_transform_source,
    matrix_to_transform,
)
from mimir.ros.time import from_seconds, to_seconds
from mimir.settings import param
from mimir.transforms import matrix_to_quaternion
from mimir_perception.errors import FiducialError, FiducialMapError, IntrinsicsError
from mimir_perception.fiducials import (
    FiducialLocalizer,
    FiducialMap,
    LocalizationConfig,
    load_fiducial_map,
    map_to_odom,
    stood_still,
)

PUBLISH_MODES = ("map_to_odom", "map_to_base")
_WARN_KEYS = (
    "missing_camera_info",
    "bad_camera_info",
    "unsupported_encoding",
    "bad_image",
    "size_mismatch",
    "mount_unavailable",
    "odom_unavailable",
    "fiducial_error",
)
#: Counters of an image the localiser cannot use.
_LOCALIZE_SKIPS = SkipReasons((IntrinsicsError, "size_mismatch"), (FiducialError, "fiducial_error"))


@dataclass(frozen=True)
class LocalizationNodeConfig:
    """Parameters of the localization node."""

    camera: str = param("base", "camera that sees the tags", read_only=True)
    fiducial_map: str = param(
        "fiducials/lab.yaml", "tag map: a file under the config folder or a path", read_only=True)
    map_frame: str = shared.map_frame("map frame")
    odom_frame: str = shared.odom_frame()
    base_frame: str = shared.base_frame()
    publish: str = param(
        "map_to_odom", "transform to publish: map_to_odom or map_to_base", read_only=True)
    publish_rate_hz: float = param(
        10.0, "rate of re-sending the held transform (Hz)", read_only=True)
    transform_tolerance: float = param(
        0.1, "re-sent transforms are stamped this far ahead of the node clock (s)", read_only=True)
    max_rate_hz: float = param(10.0, "most images processed per second (Hz)", read_only=True)
    rectified: bool = shared.rectified(
        "camera info describes rectified images (use P, no distortion); false passes D to the "
        "pose solver")
    max_translation_disagreement: float = param(
        0.25, "tags farther than this from the consensus are rejected (m)", read_only=True)
    max_rotation_disagreement: float = param(0.2, "same for orientation (rad)", read_only=True)
    max_reprojection_error: float = param(
        3.0, "tags fitting worse are rejected (pixels RMS)", read_only=True)
    min_tag_pixels: float = param(
        12.0, "tags with a shorter side are ignored (pixels)", read_only=True)
    planar: bool = param(True, "estimate x, y, yaw only", read_only=True)
    position_stddev: float = param(0.05, "reported position standard deviation (m)", read_only=True)
    yaw_stddev: float = param(0.03, "reported orientation standard deviation (rad)", read_only=True)
    tf_cache: float = shared.tf_cache()
    tf_wait_s: float = param(
        1.0,
        "an image newer than the newest transform it needs is tried again at the next work "
        "tick while it is younger than this (node clock, s); TF can trail the images",
        read_only=True)
    still_window_s: float = param(
        0.5,
        "a tag fix is used only when odometry says the base stood still over this window "
        "before the image (map_to_odom; 0 takes every fix): a moving camera blurs the tags and "
        "puts the image between odometry samples (s)",
        read_only=True)
    still_translation_m: float = param(
        0.02, "most the base may have moved over still_window_s (m)", read_only=True)
    still_rotation_rad: float = param(
        0.02, "most the base may have turned over still_window_s (rad)", read_only=True)
    diagnostics_period: float = shared.diagnostics_period()

    def __post_init__(self) -> None:
        if not self.camera or "/" in self.camera:
            raise ValueError(f"camera must be a plain non-empty name, got {self.camera!r}")
        if self.publish not in PUBLISH_MODES:
            raise ValueError(f"publish must be one of {PUBLISH_MODES}, got {self.publish!r}")
        rates = (self.publish_rate_hz, self.max_rate_hz, self.diagnostics_period, self.tf_cache,
                 self.tf_wait_s)
        if any(not (math.isfinite(r) and r > 0.0) for r in rates):
            raise ValueError("rates, periods, tf_cache and tf_wait_s must be positive")
        if not (self.position_stddev > 0.0 and self.yaw_stddev > 0.0):
            raise ValueError("standard deviations must be positive")
        if self.transform_tolerance < 0.0:
            raise ValueError("transform_tolerance must be >= 0")
        still = (self.still_window_s, self.still_translation_m, self.still_rotation_rad)
        if any(not (math.isfinite(v) and v >= 0.0) for v in still):
            raise ValueError("still_window_s, still_translation_m and still_rotation_rad must "
                             "be finite and >= 0")

    def localization(self) -> LocalizationConfig:
        """The core localiser settings."""
        return LocalizationConfig(
            max_translation_disagreement=self.max_translation_disagreement,
            max_rotation_disagreement=self.max_rotation_disagreement,
            max_reprojection_error=self.max_reprojection_error,
            min_tag_pixels=self.min_tag_pixels,
            planar=self.planar,
        )


def resolve_fiducial_map(value: str) -> FiducialMap:
    """Load the tag map from a path, or from a file relative to the config folder.

    Raises:
        PerceptionNodeError: Missing or malformed map.
    """
    path = Path(value).expanduser()
    if not path.is_absolute() and not path.is_file():
        path = config_dir() / value
    try:
        return load_fiducial_map(path)
    except FiducialMapError as err:
        raise PerceptionNodeError(f"cannot load fiducial map {value!r}: {err}") from err


def pose_message(
    map_from_base: npt.NDArray[np.float64], stamp: float, frame: str, position_var: float,
    angle_var: float,
) -> PoseWithCovarianceStamped:
    """A PoseWithCovarianceStamped of the base with a diagonal covariance."""
    msg = PoseWithCovarianceStamped()
    msg.header.frame_id = frame
    msg.header.stamp = from_seconds(stamp)
    pose = msg.pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in map_from_base[:3, 3])
    qx, qy, qz, qw = (float(v) for v in matrix_to_quaternion(map_from_base[:3, :3]))
    pose.orientation.x, pose.orientation.y = qx, qy
    pose.orientation.z, pose.orientation.w = qz, qw
    msg.pose.covariance = np.diag([position_var] * 3 + [angle_var] * 3).ravel().tolist()
    return msg


class LocalizationNode(ClosesTransforms, Node):
    """Publishes the robot's pose in the map from fiducial tags."""

    def __init__(self, **kwargs: Any) -> None:
        """Create the node; ``kwargs`` go to :class:`rclpy.node.Node`."""
        super().__init__("localization", **kwargs)
        try:
            self.config = declare_config(self, LocalizationNodeConfig)
            self._loc_config = self.config.localization()
        except (ValueError, FiducialError) as err:
            raise PerceptionNodeError(f"invalid localization parameters: {err}") from err
        cfg = self.config
        self.tag_map = resolve_fiducial_map(cfg.fiducial_map)
        self.counters = NodeCounters(_WARN_KEYS)
        self._lock = threading.Lock()
        self._pending: Image | None = None
        self._camera: CameraModel | None = None
        self._localizer: FiducialLocalizer | None = None
        self._mount: npt.NDArray[np.float64] | None = None
        self._estimate: tuple[npt.NDArray[np.float64], str] | None = None
        self._tf = make_transform_source(self, cfg.tf_cache)
        self._tf_pub = TransformPublisher(self)
        self._work_group = MutuallyExclusiveCallbackGroup()
        self._pose_pub = self.create_publisher(
            PoseWithCovarianceStamped, "localization/pose", qos.EVENTS,
            publisher_class=FloatSafePublisher,
        )
        self._diag_pub = self.create_publisher(DiagnosticArray, "/diagnostics", qos.EVENTS,
                                               publisher_class=FloatSafePublisher)
        prefix = f"cameras/{cfg.camera}/color"
        self.create_subscription(Image, f"{prefix}/image_raw", self._on_image, qos.SENSOR)
        self.create_subscription(CameraInfo, f"{prefix}/camera_info", self._on_info, qos.SENSOR)
        self.create_timer(1.0 / cfg.max_rate_hz, self._work, callback_group=self._work_group)
        self.create_timer(1.0 / cfg.publish_rate_hz, self._republish)
        self.create_timer(cfg.diagnostics_period, self._report)
        self.get_logger().info(
            f"localizing from {len(self.tag_map.tags)} tags seen by {cfg.camera!r}, "
            f"publishing {cfg.publish}"
        )

    def _skip(self, key: str, text: str) -> None:
        self.counters.add(key)
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def _on_info(self, msg: CameraInfo) -> None:
        try:
            camera = parse_camera_info(msg, rectified=self.config.rectified)
        except CameraInfoError as err:
            self._skip("bad_camera_info", f"skipping camera info: {err}")
            return
        with self._lock:
            self._camera = camera

    def _on_image(self, msg: Image) -> None:
        self.counters.add("received")
        with self._lock:
            if self._pending is not None:
                self.counters.add("dropped")
            self._pending = msg

    def _work(self) -> None:
        with self._lock:
            msg, self._pending = self._pending, None
            camera = self._camera
        if msg is None:
            return
        if camera is None:
            self._skip("missing_camera_info", "image arrived before any valid camera info")
            return
        try:
            rgb = image_to_rgb(msg)
        except IMAGE_SKIPS.errors as err:
            self._skip(IMAGE_SKIPS.key(err), f"skipping image: {err}")
            return
        stamp = to_seconds(msg.header.stamp)
        cfg = self.config
        optical = msg.header.frame_id or camera.frame_id or f"{cfg.camera}_color_optical_frame"
        try:
            mount = self._tf.lookup(cfg.base_frame, optical, stamp)
        except tfm.TransformError as err:
            if not self._retry_later(msg, stamp, err):
                self._skip("mount_unavailable",
                           f"no {cfg.base_frame} <- {optical} transform: {err}")
            return
        localizer = self._localizer_for(mount)
        distortion = None if camera.distortion.size == 0 else camera.distortion
        try:
            result = localizer.localize(rgb, camera.intrinsics, stamp, distortion)
        except _LOCALIZE_SKIPS.errors as err:
            self._skip(_LOCALIZE_SKIPS.key(err), f"skipping image: {err}")
            return
        if result is None or result.held:
            self.counters.add("no_tag")
            return
        if cfg.publish == "map_to_odom":
            try:
                odom_from_base = self._tf.lookup(cfg.odom_frame, cfg.base_frame, stamp)
            except tfm.TransformError as err:
                if self._retry_later(msg, stamp, err):
                    return
                self._skip("odom_unavailable",
                           f"no {cfg.odom_frame} <- {cfg.base_frame} transform at {stamp:.3f}: "
                           f"{err}")
                return
            if not self._stood_still(odom_from_base, stamp):
                self.counters.add("moving")
                return
            estimate = (map_to_odom(result.map_from_base, odom_from_base), cfg.odom_frame)
        else:
            estimate = (result.map_from_base, cfg.base_frame)
        with self._lock:
            self._estimate = estimate
        self.counters.add("estimates")
        self._pose_pub.publish(
            pose_message(result.map_from_base, stamp, cfg.map_frame, cfg.position_stddev**2,
                         cfg.yaw_stddev**2)
        )
        self._republish()

    def _stood_still(self, odom_from_base: npt.NDArray[np.float64], stamp: float) -> bool:
        """Whether odometry moved the base at most the still limits over the window before
        ``stamp`` (True when the window is off or odometry does not reach that far back).

        Between two odometry samples TF interpolates, so an image taken while the base moved
        (or jumped, as a put-down robot does) would pair the tags with a pose the base never had
        at that instant; the fix would hold a wrong ``map -> odom`` until the next one."""
        cfg = self.config
        if cfg.still_window_s <= 0.0:
            return True
        try:
            before = self._tf.lookup(cfg.odom_frame, cfg.base_frame, stamp - cfg.still_window_s)
        except tfm.TransformError:
            return True
        return stood_still(before, odom_from_base, translation_m=cfg.still_translation_m,
                           rotation_rad=cfg.still_rotation_rad)

    def _retry_later(self, msg: Image, stamp: float, err: tfm.TransformError) -> bool:
        """Keep an image whose transform has not arrived yet for the next work tick (unless a
        newer image came meanwhile or it is older than ``tf_wait_s``); True when kept."""
        now = self.get_clock().now().nanoseconds * 1e-9
        if not isinstance(err, tfm.ExtrapolationError) or now - stamp > self.config.tf_wait_s:
            return False
        with self._lock:
            if self._pending is not None:
                return False
            self._pending = msg
        self.counters.add("tf_wait")
        return True

    def _localizer_for(self, mount: npt.NDArray[np.float64]) -> FiducialLocalizer:
        """The localiser for the current mounting (rebuilt when the mounting moves)."""
        if self._localizer is None or self._mount is None or not np.allclose(
            mount, self._mount, atol=1e-6
        ):
            self._localizer = FiducialLocalizer(self.tag_map, mount, self._loc_config)
            self._mount = mount
        return self._localizer

    def _republish(self) -> None:
        with self._lock:
            estimate = self._estimate
        if estimate is None:
            return
        matrix, child = estimate
        now = self.get_clock().now().nanoseconds * 1e-9
        self._tf_pub.send([matrix_to_transform(
            matrix, self.config.map_frame, child, now + self.config.transform_tolerance
        )])

    def _report(self) -> None:
        self.counters.publish(self, self._diag_pub, self.config.camera)


def main(args: list[str] | None = None) -> int:
    """Run the localization node."""
    return run_node(LocalizationNode, args, threads=1)  # callbacks never wait on each other


if __name__ == "__main__":
    sys.exit(main())
