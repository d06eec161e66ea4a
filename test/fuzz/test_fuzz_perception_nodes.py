"""Fuzz the perception nodes over DDS: deprojection, fiducial localisation and segmentation.

Each reads camera streams only (images, depth, camera info, segmentations). Generated messages
include images whose size, step, encoding and data disagree, camera infos with NaN and zero
focal lengths, segmentations whose masks do not match their image, and stamps far in the
past and the future. The nodes must keep spinning and, afterwards, still turn one valid input
into their normal output (the deprojection a 3D observation, the segmentation a mask set).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import rclpy
import yaml
from fuzz_messages import cases
from fuzz_runner import TIMEOUT_S, Row, Watched, fuzz_interface, watched
from rclpy.context import Context
from rclpy.node import Node
from rclpy.parameter import Parameter
from ros_helpers import wait_until
from sensor_msgs.msg import CameraInfo, Image, RegionOfInterest
from std_msgs.msg import Header
from tiny_sam3 import save_tiny_sam3

from mimir.nodes.perception.deprojection_node import DeprojectionNode
from mimir.nodes.perception.localization_node import LocalizationNode
from mimir.nodes.perception.messages import intrinsics_to_camera_info
from mimir.nodes.perception.segmentation_node import SegmentationNode
from mimir.ros import qos
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import TransformPublisher, matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_msgs.msg import ObjectObservationArray, Segmentation
from mimir_perception.camera import Intrinsics, make_transform

pytestmark = [pytest.mark.ros, pytest.mark.timeout(TIMEOUT_S)]

CAMERA = "base"
OPTICAL = f"{CAMERA}_color_optical_frame"
INTR = Intrinsics(60.0, 60.0, 31.5, 23.5, 64, 48)
TAGS = {"dictionary": "DICT_APRILTAG_36h11", "tag_size": 0.25,
        "tags": [{"id": 0, "position": [2.0, 0.0, 1.0], "orientation": [0.5, -0.5, -0.5, 0.5]}]}


@dataclass
class PerceptionRig:
    driver: Node
    ex: Watched
    segmentations: list[Segmentation]
    observations: list[ObjectObservationArray]

    def probe(self) -> None:
        """A valid colour frame still comes back segmented, and a valid camera info, depth
        image and segmentation of one stamp still become a 3D observation."""
        self._segmented()
        pubs = [self.driver.create_publisher(kind, f"cameras/{CAMERA}/{topic}", qos.SENSOR)
                for kind, topic in ((CameraInfo, "color/camera_info"),
                                    (Image, "depth/image_raw"), (Segmentation, "segmentation"))]
        before = len(self.observations)

        def send() -> bool:
            stamp = time.time()
            for pub, msg in zip(pubs, (_info(stamp), _depth(stamp), _segmentation(stamp)),
                                strict=True):
                pub.publish(msg)
            time.sleep(0.2)
            return len(self.observations) > before
        try:
            assert wait_until(send, 30.0), "valid inputs no longer make an observation"
        finally:
            for pub in pubs:
                self.driver.destroy_publisher(pub)

    def _segmented(self) -> None:
        pub = self.driver.create_publisher(Image, f"cameras/{CAMERA}/color/image_raw",
                                           qos.SENSOR)
        before = len(self.segmentations)
        rng = np.random.default_rng(7)
        header = Header(frame_id=OPTICAL)

        def send() -> bool:
            header.stamp = from_seconds(time.time())
            pub.publish(numpy_to_image(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8),
                                       "rgb8", header))
            time.sleep(0.2)
            return len(self.segmentations) > before
        try:
            assert wait_until(send, 30.0), "a valid frame is no longer segmented"
        finally:
            self.driver.destroy_publisher(pub)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PerceptionRig]:
    folder = tmp_path_factory.mktemp("fuzz_perception")
    model = save_tiny_sam3(folder / "sam3")
    vocab, parts, tags = folder / "vocab.yaml", folder / "parts.yaml", folder / "tags.yaml"
    vocab.write_text("name: tiny\ndefaults: {score_threshold: 0.0}\nfixtures: [cabinet]\n"
                     "objects: [mug]\n")
    parts.write_text("name: parts\ndefaults: {score_threshold: 0.0}\nfixtures: [handle]\n")
    tags.write_text(yaml.safe_dump(TAGS))
    context = Context()
    rclpy.init(context=context)
    try:
        with watched(context) as ex:
            nodes = [
                DeprojectionNode(context=context, parameter_overrides=[
                    Parameter("cameras", value=[CAMERA]), Parameter("min_points", value=5),
                    Parameter("transform_timeout", value=0.1)]),
                LocalizationNode(context=context, parameter_overrides=[
                    Parameter("fiducial_map", value=str(tags)),
                    Parameter("camera", value=CAMERA)]),
                SegmentationNode(context=context, parameter_overrides=[
                    Parameter("model", value=str(model)), Parameter("vocabulary", value=str(vocab)),
                    Parameter("part_vocabulary", value=str(parts)),
                    Parameter("cameras", value=[CAMERA]), Parameter("min_pixels", value=1),
                    Parameter("max_rate_hz", value=20.0)]),
            ]
            driver = rclpy.create_node("fuzz_driver", context=context)
            for node in (*nodes, driver):
                ex.add(node)
            seen: list[Segmentation] = []
            driver.create_subscription(Segmentation, f"cameras/{CAMERA}/segmentation",
                                       seen.append, qos.SENSOR)
            made: list[ObjectObservationArray] = []
            driver.create_subscription(ObjectObservationArray, "observations", made.append,
                                       qos.EVENTS)
            # the camera 1 m up, looking along map +x
            TransformPublisher(driver, static=True).send([matrix_to_transform(
                make_transform(np.column_stack([[0, -1, 0], [0, 0, -1], [1, 0, 0]]),
                               [0.0, 0.0, 1.0]), "map", OPTICAL, 0.0)])
            yield PerceptionRig(driver, ex, seen, made)
    finally:
        rclpy.try_shutdown(context=context)


def _header(stamp: float | None) -> Header:
    return Header(frame_id=OPTICAL, stamp=from_seconds(time.time() if stamp is None else stamp))


def _info(stamp: float | None = None) -> CameraInfo:
    return intrinsics_to_camera_info(INTR, _header(stamp))


def _depth(stamp: float | None = None) -> Image:
    return numpy_to_image(np.full((48, 64), 1.5, dtype=np.float32), "32FC1", _header(stamp))


def _segmentation(stamp: float | None = None) -> Segmentation:
    header = _header(stamp)
    ids = np.zeros((48, 64), dtype=np.uint16)
    ids[10:30, 20:40] = 1
    return Segmentation(header=header, camera=CAMERA,
                        instance_ids=numpy_to_image(ids, "mono16", header), ids=[1],
                        labels=["mug"], scores=[0.9], backend="fuzz",
                        boxes=[RegionOfInterest(x_offset=20, y_offset=10, width=20, height=20)])


INTERFACES: dict[str, tuple[str, type, Any]] = {
    f"cameras/{CAMERA}/color/image_raw": ("segmentation+localization", Image, cases(Image)),
    f"cameras/{CAMERA}/color/camera_info": ("deprojection+localization", CameraInfo,
                                            cases(CameraInfo, _info)),
    f"cameras/{CAMERA}/depth/image_raw": ("deprojection", Image, cases(Image, _depth)),
    f"cameras/{CAMERA}/segmentation": ("deprojection", Segmentation,
                                       cases(Segmentation, _segmentation)),
}


@pytest.mark.parametrize("interface", list(INTERFACES))
def test_perception_node_interface_survives_fuzzing(rig: PerceptionRig, interface: str) -> None:
    node, msg_type, strategy = INTERFACES[interface]
    fuzz_interface(Row(node, interface, "topic"), rig.driver, rig.ex, msg_type, strategy,
                   probe=rig.probe)
