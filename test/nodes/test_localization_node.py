"""Localization node over real DDS with synthetic tag images from ``render_tags``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from geometry_msgs.msg import PoseWithCovarianceStamped
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import DiagnosticsCounters
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header
from tf2_msgs.msg import TFMessage

from mimir.nodes.perception.localization_node import LocalizationNode
from mimir.nodes.perception.messages import PerceptionNodeError, intrinsics_to_camera_info
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform, transform_to_matrix
from mimir.ros.time import from_seconds, to_seconds
from mimir_perception.camera import Intrinsics, invert_transform, make_transform
from mimir_perception.fiducials import parse_fiducial_map, render_tags, rotation_angle

pytestmark = pytest.mark.ros

INTR = Intrinsics(350.0, 350.0, 319.5, 179.5, 640, 360)
# Tags on the wall x = 2 m facing -x (tag x = -y_map, tag y = +z_map, tag z = -x_map).
WALL = [0.5, -0.5, -0.5, 0.5]
TAGS = {
    "dictionary": "DICT_APRILTAG_36h11",
    "tag_size": 0.25,
    "tags": [
        {"id": 0, "position": [2.0, 0.0, 1.0], "orientation": WALL},
        {"id": 1, "position": [2.0, 0.5, 1.1], "orientation": WALL},
        {"id": 2, "position": [2.0, -0.5, 0.9], "orientation": WALL, "size": 0.3},
    ],
}
BASE_FROM_CAMERA = make_transform(np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]),
                                  [0.1, 0.0, 1.0])
OPTICAL = "base_color_optical_frame"


def planar(x: float, y: float, yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return make_transform([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], [x, y, 0.0])


TRUTH = planar(0.3, 0.1, 0.1)
ODOM_FROM_BASE = planar(0.5, -0.2, 0.3)


@pytest.fixture
def tag_file(tmp_path: Path) -> Path:
    path = tmp_path / "tags.yaml"
    path.write_text(yaml.safe_dump(TAGS))
    return path


class Driver(DiagnosticsCounters):
    def __init__(self, node: Node) -> None:
        super().__init__(node, "localization")
        self.tf: list[tuple[float, np.ndarray]] = []
        self.poses: list[PoseWithCovarianceStamped] = []
        self.image = node.create_publisher(Image, "cameras/base/color/image_raw", qos.SENSOR)
        self.info = node.create_publisher(CameraInfo, "cameras/base/color/camera_info",
                                          qos.SENSOR)
        node.create_subscription(TFMessage, "/tf", self._on_tf, qos.TF)
        node.create_subscription(PoseWithCovarianceStamped, "localization/pose", self._on_pose,
                                 qos.EVENTS)

    def _on_tf(self, msg: TFMessage) -> None:
        for t in msg.transforms:
            if (t.header.frame_id, t.child_frame_id) == ("map", "odom"):
                with self._lock:
                    self.tf.append((to_seconds(t.header.stamp), transform_to_matrix(t)))

    def _on_pose(self, msg: PoseWithCovarianceStamped) -> None:
        with self._lock:
            self.poses.append(msg)

    def send(self, image: np.ndarray, stamp: float, info: bool = True) -> None:
        header = Header(frame_id=OPTICAL, stamp=from_seconds(stamp))
        if info:
            self.info.publish(intrinsics_to_camera_info(INTR, header))
        self.image.publish(numpy_to_image(image, "mono8", header))


def test_localizes_publishes_and_holds(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    tag_file: Path, wait_for: Callable[..., bool],
) -> None:
    _, odom, drv, view = _mounted_node(ros_context, ros_executor, spin_node, wait_for,
                                       fiducial_map=str(tag_file), publish_rate_hz=20.0)

    # Bad input first: an image before any camera info is skipped and counted.
    assert wait_for(lambda: (drv.send(view.image, 9.0, info=False), wait_for(
        lambda: drv.count("missing_camera_info") > 0, timeout=0.5))[1], timeout=20.0)
    assert not drv.tf and not drv.poses

    # Odometry around the image stamp, then the tag image.
    odom.send([matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", t) for t in (9.0, 11.0)])

    def localized() -> bool:
        drv.send(view.image, 10.0)
        return wait_for(lambda: bool(drv.poses), timeout=0.5)

    assert wait_for(localized, timeout=20.0), "no pose came back"
    pose = drv.poses[0]
    assert pose.header.frame_id == "map" and to_seconds(pose.header.stamp) == pytest.approx(10.0)
    p = pose.pose.pose.position
    assert math.hypot(p.x - 0.3, p.y - 0.1) < 0.04
    assert pose.pose.covariance[0] == pytest.approx(0.05**2)
    assert wait_for(lambda: bool(drv.tf))
    expected = TRUTH @ invert_transform(ODOM_FROM_BASE)
    _, got = drv.tf[-1]
    assert np.linalg.norm(got[:3, 3] - expected[:3, 3]) < 0.04
    assert rotation_angle(got[:3, :3].T @ expected[:3, :3]) < math.radians(1.5)

    # No tag in view: the estimate is held and re-sent with fresh stamps.
    blank = np.full((INTR.height, INTR.width), 128, np.uint8)
    assert wait_for(lambda: (drv.send(blank, 10.5), wait_for(
        lambda: drv.count("no_tag") > 0, timeout=0.5))[1], timeout=20.0)
    seen = len(drv.tf)
    last_stamp = drv.tf[-1][0]
    assert wait_for(lambda: len(drv.tf) >= seen + 3)
    assert drv.tf[-1][0] > last_stamp
    np.testing.assert_allclose(drv.tf[-1][1], got, atol=1e-9)
    assert len(drv.poses) == 1  # held estimates are not re-published as new poses

    # A wrongly sized image (camera info says 640x360) is skipped and counted.
    small = np.full((100, 100), 128, np.uint8)
    assert wait_for(lambda: (drv.send(small, 11.0), wait_for(
        lambda: drv.count("size_mismatch") > 0, timeout=0.5))[1], timeout=20.0)


def _mounted_node(ctx: Context, executor: MultiThreadedExecutor, spin_node: Node,
                  wait_for: Callable[..., bool], **params: object
                  ) -> tuple[LocalizationNode, TransformPublisher, Driver, Any]:
    """A localization node (fast diagnostics and images) with the camera mounted on the base,
    an odometry publisher, the driver and a rendered view of the tags from TRUTH."""
    values = {"diagnostics_period": 0.2, "max_rate_hz": 20.0, **params}
    node = LocalizationNode(context=ctx,
                            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    executor.add_node(node)
    TransformPublisher(spin_node, static=True).send(
        [matrix_to_transform(BASE_FROM_CAMERA, "base_link", OPTICAL, 0.0)])
    odom = TransformPublisher(spin_node)
    drv = Driver(spin_node)
    assert wait_for(lambda: drv.image.get_subscription_count() > 0
                    and drv.info.get_subscription_count() > 0)
    return node, odom, drv, render_tags(parse_fiducial_map(TAGS), TRUTH @ BASE_FROM_CAMERA, INTR)


def test_an_image_ahead_of_its_odometry_waits_for_it(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    tag_file: Path, wait_for: Callable[..., bool],
) -> None:
    """TF can trail the images: the image is kept and localised once odometry reaches it."""
    node, odom, drv, view = _mounted_node(ros_context, ros_executor, spin_node, wait_for,
                                          fiducial_map=str(tag_file), tf_wait_s=5.0)
    now = node.get_clock().now().nanoseconds * 1e-9
    odom.send([matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", now - 2.0),
               matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", now - 1.0)])
    assert wait_for(lambda: (drv.send(view.image, now), wait_for(
        lambda: drv.count("tf_wait") > 0, timeout=0.5))[1], timeout=10.0)
    assert not drv.poses  # odometry has not reached the image yet
    odom.send([matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", now + 0.5)])
    assert wait_for(lambda: bool(drv.poses), timeout=5.0), "the kept image was not localised"
    assert to_seconds(drv.poses[0].header.stamp) == pytest.approx(now)
    assert drv.count("odom_unavailable") == 0


def test_a_fix_waits_for_the_base_to_stand_still(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    tag_file: Path, wait_for: Callable[..., bool],
) -> None:
    """An image taken while odometry moved (or jumped) gives no fix; one taken standing does."""
    _, odom, drv, view = _mounted_node(ros_context, ros_executor, spin_node, wait_for,
                                       fiducial_map=str(tag_file))
    # odometry says the base came 0.3 m in the second before the image, then stood
    odom.send([matrix_to_transform(planar(0.2, -0.4, 0.3), "odom", "base_link", 19.0),
               matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", 20.0),
               matrix_to_transform(ODOM_FROM_BASE, "odom", "base_link", 22.0)])
    assert wait_for(lambda: (drv.send(view.image, 20.0), wait_for(
        lambda: drv.count("moving") > 0, timeout=0.5))[1], timeout=20.0)
    assert not drv.poses and not drv.tf
    assert wait_for(lambda: (drv.send(view.image, 21.0), wait_for(
        lambda: bool(drv.poses), timeout=0.5))[1], timeout=20.0)
    assert to_seconds(drv.poses[0].header.stamp) == pytest.approx(21.0)


@pytest.mark.parametrize(
    ("params", "match"),
    [({"fiducial_map": "/nonexistent/tags.yaml"}, "fiducial map"),
     ({"publish": "odom_to_map"}, "publish"),
     ({"still_window_s": -1.0}, "still_window_s")],
)
def test_bad_parameters(ros_context: Context, tag_file: Path, params: dict[str, object],
                        match: str) -> None:
    values = {"fiducial_map": str(tag_file), **params}
    with pytest.raises(PerceptionNodeError, match=match):
        LocalizationNode(context=ros_context,
                         parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])


def test_default_tag_map_loads(ros_context: Context) -> None:
    node = LocalizationNode(context=ros_context)
    try:
        assert len(node.tag_map.tags) >= 1
    finally:
        node.destroy_node()
