"""rosbag2 fixtures from the real 7-Scenes kitchen frames, written the way a robot records them.

Messages are built with the ROS layer's converters as rclpy messages, serialized to CDR with
rclpy and written with the ``rosbags`` writer, so the bags hold exactly what a live recording of
mimir's topics holds. Segmentation is a deterministic colour rule (the red cabinet fronts and
the black countertop), the same for the bag and for the direct run of the cores it is compared
with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.serialization import serialize_message
from rosbags.rosbag2 import StoragePlugin, Writer
from sensor_msgs.msg import CompressedImage
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from mimir.bags import typestore
from mimir.nodes.perception.messages import intrinsics_to_camera_info, segmentation_to_msg
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_perception.camera import Intrinsics
from mimir_perception.segmentation import SegmentationResult, compose_instances

W, H = 640, 480
#: Unix-epoch stamps, where float seconds carry only about 0.2 microseconds.
T0 = 1_764_000_000.0
PERIOD = 0.2
CAMERA = "pole"
OPTICAL = "pole_color_optical_frame"


@dataclass
class KitchenFrames:
    """The first ``count`` frames of the recording with their segmentation and stamps."""

    root: Path
    count: int
    period: float = PERIOD
    """Seconds between frames."""
    intrinsics: Intrinsics = field(init=False)

    def __post_init__(self) -> None:
        k = np.loadtxt(self.root / "camera-intrinsics.txt")
        self.intrinsics = Intrinsics.from_matrix(k, W, H)
        self.paths = sorted(self.root.glob("frame-*.color.jpg"))[: self.count]

    def stamp(self, i: int) -> float:
        return T0 + self.period * i

    def rgb(self, i: int) -> np.ndarray:
        bgr = cv2.imread(str(self.paths[i]))
        assert bgr is not None
        return np.ascontiguousarray(bgr[:, :, ::-1])

    def depth(self, i: int) -> np.ndarray:
        path = str(self.paths[i]).replace(".color.jpg", ".depth.png")
        depth = cv2.imread(path, cv2.IMREAD_UNCHANGED)
        assert depth is not None and depth.dtype == np.uint16
        return depth

    def pose(self, i: int) -> np.ndarray:
        return np.loadtxt(str(self.paths[i]).replace(".color.jpg", ".pose.txt"))

    def segmentation(self, i: int) -> SegmentationResult:
        """Red cabinet fronts and the black countertop, the largest region of each."""
        hsv = cv2.cvtColor(self.rgb(i)[:, :, ::-1], cv2.COLOR_BGR2HSV)
        red = ((hsv[..., 0] < 10) | (hsv[..., 0] > 170)) & (hsv[..., 1] > 100) & (hsv[..., 2] > 60)
        black = hsv[..., 2] < 45
        masks, labels = [], []
        for mask, label in ((red, "cabinet"), (black, "counter")):
            count, comp, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8))
            if count > 1:
                big = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
                if stats[big, cv2.CC_STAT_AREA] >= 2000:
                    masks.append(comp == big)
                    labels.append(label)
        return compose_instances(masks, labels, [0.9] * len(masks), min_pixels=50,
                                 stamp=self.stamp(i), camera=CAMERA)


def _header(stamp: float, frame: str = OPTICAL) -> Header:
    return Header(stamp=from_seconds(stamp), frame_id=frame)


@dataclass
class BagPlan:
    """What to write; the defaults are a complete, well-formed recording of one camera."""

    storage: StoragePlugin = StoragePlugin.MCAP
    segmentation: bool = True
    depth_float: bool = False
    compressed: bool = False
    camera_info: bool = True
    info_from: int = 0
    """Write camera info from this frame on."""
    tf_until: int | None = None
    """Write /tf only for frames before this index (None: all)."""
    swap_depth: tuple[int, int] | None = None
    """Write these two frames' depth in swapped order (stamps out of order)."""
    extra: Sequence[tuple[str, str, bytes]] = ()
    """(topic, type, CDR bytes) written once at the start, as they are."""
    topics: dict[str, str] = field(default_factory=lambda: {
        "color": f"/cameras/{CAMERA}/color/image_raw",
        "depth": f"/cameras/{CAMERA}/depth/image_raw",
        "camera_info": f"/cameras/{CAMERA}/color/camera_info"})
    """Topic of each camera stream (another driver's layout)."""
    bgra: bool = False
    """Colour as bgra8, as the ZED wrapper publishes it."""
    extra_types: Any = None
    timed: Sequence[tuple[float, str, str, Any]] = ()
    """(stamp, topic, type, rclpy message) written at their stamps among the frames."""
    """The rosbags type store that knows the types of ``extra`` (None: mimir's)."""


def _ns(stamp: float) -> int:
    return round(stamp * 1e9)


def write_bag(path: Path, frames: KitchenFrames, plan: BagPlan | None = None) -> Path:
    """Write the frames into a rosbag2 at ``path`` as the plan says; returns ``path``."""
    plan = plan or BagPlan()
    store = typestore()
    with Writer(path, version=9, storage_plugin=plan.storage) as writer:
        conns: dict[str, Any] = {}

        def put(topic: str, msgtype: str, msg: Any, stamp: float) -> None:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msgtype, typestore=store)
            writer.write(conns[topic], _ns(stamp), serialize_message(msg))

        for topic, msgtype, raw in plan.extra:
            conn = writer.add_connection(topic, msgtype, typestore=plan.extra_types or store)
            writer.write(conn, _ns(frames.stamp(0)) - 1, raw)
        for stamp, topic, msgtype, msg in plan.timed:
            put(topic, msgtype, msg, stamp)
        static = TransformStamped(header=_header(frames.stamp(0), "map"), child_frame_id="odom")
        static.transform.rotation.w = 1.0
        put("/tf_static", "tf2_msgs/msg/TFMessage", TFMessage(transforms=[static]),
            frames.stamp(0))
        for i in range(frames.count):
            stamp = frames.stamp(i)
            if plan.tf_until is None or i < plan.tf_until:
                moving = matrix_to_transform(frames.pose(i), "odom", OPTICAL, stamp)
                put("/tf", "tf2_msgs/msg/TFMessage", TFMessage(transforms=[moving]), stamp)
            if plan.camera_info and i >= plan.info_from:
                put(plan.topics["camera_info"], "sensor_msgs/msg/CameraInfo",
                    intrinsics_to_camera_info(frames.intrinsics, _header(stamp)), stamp)
            put(plan.topics["color"], *_colour(frames.rgb(i), stamp, plan),
                stamp)
            j = i
            if plan.swap_depth is not None and i in plan.swap_depth:
                j = plan.swap_depth[1] if i == plan.swap_depth[0] else plan.swap_depth[0]
            put(plan.topics["depth"], *_depth(frames, j, plan), stamp)
            if plan.segmentation:
                seg = segmentation_to_msg(frames.segmentation(i), _header(stamp), "colour_rule",
                                          CAMERA)
                put(f"/cameras/{CAMERA}/segmentation", "mimir_msgs/msg/Segmentation", seg, stamp)
    return path


def _colour(rgb: np.ndarray, stamp: float, plan: BagPlan) -> tuple[str, Any]:
    if plan.compressed:
        ok, data = cv2.imencode(".jpg", rgb[:, :, ::-1])
        assert ok
        return "sensor_msgs/msg/CompressedImage", CompressedImage(
            header=_header(stamp), format="rgb8; jpeg compressed bgr8", data=data.tobytes())
    if plan.bgra:
        bgra = np.dstack([rgb[:, :, ::-1], np.full(rgb.shape[:2], 255, np.uint8)])
        return "sensor_msgs/msg/Image", numpy_to_image(bgra, "bgra8", _header(stamp))
    return "sensor_msgs/msg/Image", numpy_to_image(rgb, "rgb8", _header(stamp))


def _depth(frames: KitchenFrames, i: int, plan: BagPlan) -> tuple[str, Any]:
    depth, stamp = frames.depth(i), frames.stamp(i)
    if plan.compressed:
        ok, data = cv2.imencode(".png", depth)
        assert ok
        raw = bytes(12) + data.tobytes()  # the compressedDepth header, then the PNG
        return "sensor_msgs/msg/CompressedImage", CompressedImage(
            header=_header(stamp), format="16UC1; compressedDepth png", data=raw)
    if plan.depth_float:
        metres = depth.astype(np.float32) / 1000.0
        return "sensor_msgs/msg/Image", numpy_to_image(metres, "32FC1", _header(stamp))
    return "sensor_msgs/msg/Image", numpy_to_image(depth, "16UC1", _header(stamp))


def serialized(msg: Any) -> bytes:
    """CDR bytes of an rclpy message."""
    return bytes(serialize_message(msg))
