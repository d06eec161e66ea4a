"""ZED node: a clean exit without the SDK, and publishing through a stand-in SDK module."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import CameraInfo, Image
from tf2_msgs.msg import TFMessage

from mimir.nodes.perception.messages import PerceptionNodeError, camera_info_to_intrinsics
from mimir.nodes.perception.zed_node import ZedNode
from mimir.ros import qos
from mimir.ros.images import image_to_numpy
from mimir.ros.tf import transform_to_matrix
from mimir.ros.time import to_seconds

pytestmark = pytest.mark.ros

REPO = Path(__file__).resolve().parents[2]
H, W = 36, 64


def fake_sdk(open_status: str = "SUCCESS") -> SimpleNamespace:
    """The parts of ``pyzed.sl`` the capture wrapper touches, serving synthetic frames."""
    rng = np.random.default_rng(0)
    bgra = rng.integers(0, 255, size=(H, W, 4), dtype=np.uint8)
    depth = np.full((H, W), 1.5, np.float32)
    depth[0, 0] = np.nan
    state = {"frame": 0}

    class Mat:
        def __init__(self) -> None:
            self.data: np.ndarray | None = None

        def get_data(self) -> np.ndarray:
            assert self.data is not None
            return self.data

    class Camera:
        def open(self, init: object) -> str:
            return open_status

        def get_camera_information(self) -> SimpleNamespace:
            left = SimpleNamespace(fx=40.0, fy=41.0, cx=31.5, cy=17.5)
            return SimpleNamespace(camera_configuration=SimpleNamespace(
                calibration_parameters=SimpleNamespace(left_cam=left)))

        def grab(self) -> str:
            state["frame"] += 1
            return "SUCCESS"

        def retrieve_image(self, mat: Mat, view: str) -> None:
            mat.data = bgra

        def retrieve_measure(self, mat: Mat, measure: str) -> None:
            mat.data = depth

        def get_timestamp(self, ref: str) -> SimpleNamespace:
            ns = 1_000_000_000 * 100 + state["frame"] * 33_000_000
            return SimpleNamespace(get_nanoseconds=lambda: ns)

        def close(self) -> None:
            state["closed"] = 1

    class InitParameters:
        def set_from_serial_number(self, serial: int) -> None:
            self.serial = serial

    def enum(*names: str) -> SimpleNamespace:
        return SimpleNamespace(**{n: n for n in names})

    return SimpleNamespace(
        InitParameters=InitParameters, Camera=Camera, Mat=Mat,
        RESOLUTION=enum("HD720", "HD1080"), DEPTH_MODE=enum("NEURAL"), UNIT=enum("METER"),
        ERROR_CODE=enum("SUCCESS"), VIEW=enum("LEFT"), MEASURE=enum("DEPTH"),
        TIME_REFERENCE=enum("IMAGE"), bgra=bgra, state=state,
    )


def test_without_sdk_exits_with_status_1() -> None:
    proc = subprocess.run([sys.executable, "-m", "mimir.nodes.perception.zed_node"],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert proc.returncode == 1, proc.stderr
    assert "pyzed.sl" in proc.stderr and "ZED" in proc.stderr


def test_publishes_color_depth_info_and_optical_frame(
    ros_context: Context, ros_executor: MultiThreadedExecutor, spin_node: Node,
    wait_for: Callable[..., bool],
) -> None:
    sdk = fake_sdk()
    node = ZedNode(sdk=sdk, context=ros_context,  # type: ignore[arg-type]
                   parameter_overrides=[Parameter("camera", value="pole"),
                                        Parameter("color_encoding", value="bgr8")])
    ros_executor.add_node(node)
    got: dict[str, object] = {}
    # every colour and depth image by stamp: the node keeps publishing, so the newest colour and
    # the newest depth may belong to different grabs; one grab gives both the same stamp
    frames: dict[str, dict[tuple[int, int], Image]] = {"color": {}, "depth": {}}
    lock = threading.Lock()

    def keep(key: str) -> Callable[[object], None]:
        def store(msg: object) -> None:
            with lock:
                got[key] = msg
                if key in frames:
                    stamp = msg.header.stamp  # type: ignore[attr-defined]
                    frames[key][(stamp.sec, stamp.nanosec)] = msg
        return store

    def paired() -> set[tuple[int, int]]:
        with lock:
            return set(frames["color"]) & set(frames["depth"])

    spin_node.create_subscription(Image, "cameras/pole/color/image_raw", keep("color"),
                                  qos.SENSOR)
    spin_node.create_subscription(Image, "cameras/pole/depth/image_raw", keep("depth"),
                                  qos.SENSOR)
    spin_node.create_subscription(CameraInfo, "cameras/pole/color/camera_info", keep("info"),
                                  qos.SENSOR)
    spin_node.create_subscription(TFMessage, "/tf_static", keep("tf"), qos.TF_STATIC)
    assert wait_for(lambda: {"info", "tf"} <= set(got) and paired())

    stamp = min(paired())
    with lock:
        color, depth = frames["color"][stamp], frames["depth"][stamp]
    info: CameraInfo = got["info"]
    assert color.encoding == "bgr8" and depth.encoding == "32FC1"
    assert color.header.frame_id == "pole_color_optical_frame"
    assert to_seconds(color.header.stamp) > 100.0
    np.testing.assert_array_equal(image_to_numpy(color), sdk.bgra[:, :, :3])
    d = image_to_numpy(depth)
    assert d.shape == (H, W) and np.isnan(d[0, 0]) and d[1, 1] == pytest.approx(1.5)
    intr = camera_info_to_intrinsics(info)
    assert (intr.fx, intr.fy, intr.width, intr.height) == (40.0, 41.0, W, H)
    tf = got["tf"].transforms[0]  # type: ignore[attr-defined]
    assert (tf.header.frame_id, tf.child_frame_id) == ("pole_camera_link",
                                                      "pole_color_optical_frame")
    # Optical z (forward) is the body's x axis, optical x (right) is the body's -y.
    rot = transform_to_matrix(tf)[:3, :3]
    np.testing.assert_allclose(rot[:, 2], [1, 0, 0], atol=1e-9)
    np.testing.assert_allclose(rot[:, 0], [0, -1, 0], atol=1e-9)


def test_camera_that_cannot_open(ros_context: Context) -> None:
    with pytest.raises(PerceptionNodeError, match="cannot open"):
        ZedNode(sdk=fake_sdk("CAMERA_NOT_DETECTED"), context=ros_context)  # type: ignore[arg-type]


def test_bad_color_encoding(ros_context: Context) -> None:
    with pytest.raises(PerceptionNodeError, match="color_encoding"):
        ZedNode(sdk=fake_sdk(), context=ros_context,  # type: ignore[arg-type]
                parameter_overrides=[Parameter("color_encoding", value="yuv422")])
