"""Deprojection node over real DDS: happy path and every listed bad input, in one graph.

Cameras: ``base`` (static map transform, every case), ``pole`` (transform but never a camera
info) and ``wrist`` (a dynamic transform known only long before the frames).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import DiagnosticsCounters
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import Header

from mimir.nodes.memory.observation_messages import observation_from_msg, view_from_msg
from mimir.nodes.perception.deprojection_node import DeprojectionNode
from mimir.nodes.perception.messages import intrinsics_to_camera_info, segmentation_to_msg
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds, to_seconds
from mimir_msgs.msg import ObjectObservationArray, Segmentation
from mimir_perception.camera import Intrinsics, make_transform
from mimir_perception.segmentation import InstanceInfo, SegmentationResult

pytestmark = pytest.mark.ros

INTR = Intrinsics(50.0, 50.0, 39.5, 29.5, 80, 60)
BIG = Intrinsics(100.0, 100.0, 79.5, 59.5, 160, 120)
# Optical frame looking along map +x from (1, 2, 1.5): x_opt = -y_map, y_opt = -z_map.
MAP_FROM_CAMERA = make_transform(np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]),
                                 [1.0, 2.0, 1.5])


def two_instances(extra_empty: bool = False) -> SegmentationResult:
    ids = np.zeros((60, 80), np.uint16)
    ids[10:30, 10:30] = 1
    ids[35:55, 45:75] = 2
    rows = [InstanceInfo(1, "mug", 0.9, (10, 10, 30, 30), 400),
            InstanceInfo(2, "cabinet", 0.8, (45, 35, 75, 55), 600)]
    if extra_empty:
        rows.append(InstanceInfo(3, "banana", 0.7, (0, 0, 0, 0), 0))
    return SegmentationResult(ids, tuple(rows))


def many_instances() -> SegmentationResult:
    ids = np.zeros((120, 160), np.uint16)
    rows = []
    for k in range(300):
        r, c = divmod(k, 20)
        ids[r * 8:(r + 1) * 8, c * 8:(c + 1) * 8] = k + 1
        rows.append(InstanceInfo(k + 1, "mug", 0.2 + 0.7 * k / 300,
                                 (c * 8, r * 8, c * 8 + 8, r * 8 + 8), 64))
    return SegmentationResult(ids, tuple(rows))


class Driver(DiagnosticsCounters):
    """Publishes camera streams for one camera name and collects the node's output."""

    def __init__(self, node: Node, cameras: tuple[str, ...]) -> None:
        super().__init__(node, "deprojection")
        self.node = node
        self.arrays: list[ObjectObservationArray] = []
        self.pubs: dict[str, tuple] = {
            cam: (
                node.create_publisher(CameraInfo, f"cameras/{cam}/color/camera_info", qos.SENSOR),
                node.create_publisher(Image, f"cameras/{cam}/depth/image_raw", qos.SENSOR),
                node.create_publisher(Segmentation, f"cameras/{cam}/segmentation", qos.SENSOR),
            )
            for cam in cameras
        }
        node.create_subscription(ObjectObservationArray, "observations", self._on_obs, qos.EVENTS)

    def _on_obs(self, msg: ObjectObservationArray) -> None:
        with self._lock:
            self.arrays.append(msg)

    def array(self, camera: str, stamp: float) -> ObjectObservationArray | None:
        with self._lock:
            for msg in self.arrays:
                if msg.camera == camera and abs(to_seconds(msg.header.stamp) - stamp) < 1e-6:
                    return msg
        return None

    def send(self, camera: str, stamp: float, seg: SegmentationResult | None,
             depth: Image | None, *, intr: Intrinsics | None = INTR,
             frame_id: str = "") -> None:
        info_pub, depth_pub, seg_pub = self.pubs[camera]
        header = Header(frame_id=frame_id or f"{camera}_color_optical_frame",
                        stamp=from_seconds(stamp))
        if intr is not None:
            info_pub.publish(intrinsics_to_camera_info(intr, header))
        if depth is not None:
            depth.header = header
            depth_pub.publish(depth)
        if seg is not None:
            seg_pub.publish(segmentation_to_msg(seg, header, "test", camera))


def plane(value: float, shape: tuple[int, int] = (60, 80)) -> Image:
    return numpy_to_image(np.full(shape, value, np.float32), "32FC1")


def plane_mm(value: int, shape: tuple[int, int] = (60, 80)) -> Image:
    return numpy_to_image(np.full(shape, value, np.uint16), "16UC1")


def check_two(msg: ObjectObservationArray, stamp: float) -> None:
    assert msg.header.frame_id == "map" and msg.camera == "base"
    obs = {o.label: observation_from_msg(o, msg) for o in msg.observations}
    assert set(obs) == {"mug", "cabinet"}
    # Pixel centres 10..29 / 45..74 at 2 m: camera x = (u - 39.5) / 50 * 2, y likewise.
    np.testing.assert_allclose(obs["mug"].centroid, [3.0, 2.8, 1.9], atol=0.05)
    np.testing.assert_allclose(obs["cabinet"].centroid, [3.0, 1.2, 0.9], atol=0.05)
    assert obs["mug"].frame_id == "map" and obs["mug"].stamp == pytest.approx(stamp)
    assert obs["mug"].detection_id.startswith("base@") and obs["mug"].camera == "base"
    assert obs["mug"].obb_extent is not None
    assert obs["mug"].point_count > 100


def check_view(msg: ObjectObservationArray, depth: float | None) -> None:
    """The frame's view: the camera pose and intrinsics, the grid at ``depth`` (None: no depth)."""
    view = view_from_msg(msg.view)
    assert view is not None
    np.testing.assert_allclose(view.camera_to_map, MAP_FROM_CAMERA, atol=1e-6)
    assert (view.fx, view.fy, view.cx, view.cy) == (INTR.fx, INTR.fy, INTR.cx, INTR.cy)
    assert (view.width, view.height) == (80, 60) and view.max_range_m == pytest.approx(10.0)
    assert view.grid_shape == (24, 32)  # the default grid fits the 80 x 60 image
    if depth is None:
        assert np.all(np.isnan(view.depth_min_m))
    else:
        np.testing.assert_allclose(view.depth_min_m, depth, rtol=1e-6)
    assert "mug" in view.labels_sought and "cabinet" in view.labels_sought


def test_deprojection_node(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    wait_for: Callable[..., bool],
) -> None:
    params = {"cameras": ["base", "pole", "wrist"], "erode_px": 1, "min_points": 20,
              "max_instances": 50, "transform_timeout": 0.3, "diagnostics_period": 0.2,
              "sync_max_age": 1.0, "vocabulary": "kitchen"}
    node = DeprojectionNode(context=ros_context,
                            parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    ros_executor.add_node(node)
    static = TransformPublisher(spin_node, static=True)
    static.send([matrix_to_transform(MAP_FROM_CAMERA, "map", f"{cam}_color_optical_frame", 0.0)
                 for cam in ("base", "pole")])
    dynamic = TransformPublisher(spin_node)
    drv = Driver(spin_node, ("base", "pole", "wrist"))
    assert wait_for(lambda: all(p.get_subscription_count() > 0
                                for pubs in drv.pubs.values() for p in pubs))

    # Happy path (resend with new stamps until discovery has settled on both ends).
    stamps = iter(np.arange(10.0, 11.0, 0.05))
    sent: list[float] = []

    def happy() -> bool:
        stamp = float(next(stamps))
        sent.append(stamp)
        drv.send("base", stamp, two_instances(), plane(2.0))
        return wait_for(lambda: drv.array("base", stamp) is not None, timeout=1.0)

    assert wait_for(happy, timeout=15.0), "no observations came back"
    check_two(drv.array("base", sent[-1]), sent[-1])  # type: ignore[arg-type]
    check_view(drv.array("base", sent[-1]), 2.0)  # type: ignore[arg-type]

    def outcome(camera: str, stamp: float, key: str | None) -> bool:
        """Wait for the frame's array (key None) or for counter ``key`` to grow."""
        if key is None:
            return wait_for(lambda: drv.array(camera, stamp) is not None)
        return wait_for(lambda: drv.count(f"{camera}.{key}") > 0)

    # 16UC1 depth in millimetres.
    drv.send("base", 11.0, two_instances(), plane_mm(2000))
    assert outcome("base", 11.0, None)
    check_two(drv.array("base", 11.0), 11.0)  # type: ignore[arg-type]
    check_view(drv.array("base", 11.0), 2.0)  # type: ignore[arg-type]

    # An instance without pixels: skipped and counted, the others still published.
    drv.send("base", 12.0, two_instances(extra_empty=True), plane(2.0))
    assert outcome("base", 12.0, None) and outcome("base", 12.0, "empty_mask")
    check_two(drv.array("base", 12.0), 12.0)  # type: ignore[arg-type]

    # NaN depth and zero depth: frames processed, no observation.
    drv.send("base", 13.0, two_instances(), plane(float("nan")))
    drv.send("base", 13.5, two_instances(), plane_mm(0))
    assert outcome("base", 13.5, None) and outcome("base", 13.0, None)
    assert len(drv.array("base", 13.0).observations) == 0  # type: ignore[union-attr]
    assert len(drv.array("base", 13.5).observations) == 0  # type: ignore[union-attr]
    check_view(drv.array("base", 13.0), None)  # type: ignore[arg-type]
    check_view(drv.array("base", 13.5), None)  # type: ignore[arg-type]
    assert wait_for(lambda: drv.count("base.no_valid_depth") >= 4)

    # Color/segmentation vs depth size mismatch: skipped, nothing published.
    drv.send("base", 14.0, two_instances(), plane(2.0, (30, 40)))
    assert outcome("base", 14.0, "size_mismatch")

    # Frames out of order: 15.0 published, then 14.5 arrives and is skipped.
    drv.send("base", 15.0, two_instances(), plane(2.0))
    assert outcome("base", 15.0, None)
    drv.send("base", 14.5, two_instances(), plane(2.0))
    assert outcome("base", 14.5, "out_of_order")

    # Hundreds of masks: capped at max_instances (best scores), the rest counted.
    drv.send("base", 16.0, many_instances(), plane(2.0, (120, 160)), intr=BIG)
    assert outcome("base", 16.0, None)
    capped = drv.array("base", 16.0)
    assert capped is not None and len(capped.observations) == 50
    assert wait_for(lambda: drv.count("base.instance_cap") == 250)
    assert min(o.score for o in capped.observations) >= 0.2 + 0.7 * 250 / 300 - 1e-3

    # Missing camera info (pole never sends one): counted, nothing published.
    drv.send("pole", 10.0, two_instances(), plane(2.0), intr=None)
    assert outcome("pole", 10.0, "missing_camera_info")

    # Transform extrapolated: the wrist transform is only known at 1.0-1.1 s.
    dynamic.send([matrix_to_transform(MAP_FROM_CAMERA, "map", "wrist_color_optical_frame", t)
                  for t in (1.0, 1.1)])
    drv.send("wrist", 20.0, two_instances(), plane(2.0))
    assert outcome("wrist", 20.0, "transform_extrapolation")
    # Transform unavailable: an optical frame nobody publishes.
    drv.send("wrist", 21.0, two_instances(), plane(2.0), frame_id="nowhere_optical_frame")
    assert outcome("wrist", 21.0, "transform_unavailable")

    # No wrong observation was ever published.
    for stamp in (14.0, 14.5, 20.0, 21.0):
        assert drv.array("base", stamp) is None and drv.array("wrist", stamp) is None
    assert drv.array("pole", 10.0) is None
    assert drv.count("base.frames_published") >= 7
