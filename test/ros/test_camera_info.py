"""CameraInfo <-> Intrinsics and Segmentation message conversions (no rclpy.init needed)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sensor_msgs.msg import CameraInfo, RegionOfInterest
from std_msgs.msg import Header

from mimir.nodes.perception.messages import (
    CameraInfoError,
    DistortedImageError,
    SegmentationMessageError,
    camera_info_to_intrinsics,
    intrinsics_to_camera_info,
    msg_to_segmentation,
    parse_camera_info,
    segmentation_to_msg,
)
from mimir.ros.diagnostics import counter_diagnostics
from mimir.ros.images import numpy_to_image
from mimir.ros.time import from_seconds
from mimir_perception.camera import Intrinsics
from mimir_perception.segmentation import SegmentationError, compose_instances

INTR = Intrinsics(500.0, 510.0, 319.5, 239.5, 640, 480)


def info(**overrides: object) -> CameraInfo:
    msg = intrinsics_to_camera_info(INTR, Header(frame_id="base_color_optical_frame"))
    for key, value in overrides.items():
        setattr(msg, key, value)
    return msg


def test_round_trip() -> None:
    msg = info()
    assert msg.distortion_model == "plumb_bob" and list(msg.d) == [0.0] * 5
    assert camera_info_to_intrinsics(msg) == INTR
    model = parse_camera_info(msg)
    assert model.frame_id == "base_color_optical_frame" and not model.is_distorted
    rational = intrinsics_to_camera_info(INTR, distortion_model="rational_polynomial")
    assert len(rational.d) == 8
    assert camera_info_to_intrinsics(rational) == INTR


def test_empty_distortion_vector_is_accepted() -> None:
    assert camera_info_to_intrinsics(info(d=[], distortion_model="")) == INTR


def test_nonzero_distortion_is_refused_unless_rectified() -> None:
    msg = info(d=[0.1, -0.05, 0.0, 0.0, 0.0])
    with pytest.raises(DistortedImageError, match="rectified"):
        camera_info_to_intrinsics(msg)
    model = parse_camera_info(msg)
    assert model.is_distorted and model.distortion[0] == pytest.approx(0.1)
    # Rectified: P describes the image, D is ignored.
    p = np.array(msg.p).reshape(3, 4)
    p[0, 0], p[1, 1] = 450.0, 455.0
    msg.p = p.ravel().tolist()
    rect = camera_info_to_intrinsics(msg, rectified=True)
    assert (rect.fx, rect.fy, rect.width) == (450.0, 455.0, 640)


def test_unknown_distortion_model_with_coefficients() -> None:
    with pytest.raises(CameraInfoError, match="unknown distortion model"):
        parse_camera_info(info(d=[0.3], distortion_model="fisheye_v9"))


def test_binning_and_roi_describe_the_published_image() -> None:
    msg = info(binning_x=2, binning_y=2)
    msg.roi = RegionOfInterest(x_offset=100, y_offset=40, width=400, height=300)
    intr = camera_info_to_intrinsics(msg)
    assert (intr.width, intr.height) == (200, 150)
    assert intr.fx == pytest.approx(250.0) and intr.fy == pytest.approx(255.0)
    assert intr.cx == pytest.approx((319.5 - 100) / 2) and intr.cy == pytest.approx(99.75)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"k": [0.0, 0.0, 319.5, 0.0, 510.0, 239.5, 0.0, 0.0, 1.0]}, "focal"),
        ({"k": [-5.0, 0.0, 319.5, 0.0, 510.0, 239.5, 0.0, 0.0, 1.0]}, "focal"),
        ({"width": 0}, "size"),
        ({"height": 0}, "size"),
        ({"k": [500.0, 0.0, 319.5, 0.0, 510.0, 239.5, 0.0, 0.0]}, "9 numbers"),
        ({"k": [500.0, 0.0, 319.5, 0.0, float("nan"), 239.5, 0.0, 0.0, 1.0]}, "finite"),
        ({"k": [500.0, 3.0, 319.5, 0.0, 510.0, 239.5, 0.0, 0.0, 1.0]}, "pinhole"),
        ({"d": [0.0, float("inf")]}, "finite"),
    ],
)
def test_bad_camera_info(overrides: dict[str, object], match: str) -> None:
    with pytest.raises(CameraInfoError, match=match):
        camera_info_to_intrinsics(info(**overrides))


def test_roi_outside_the_image() -> None:
    msg = info()
    msg.roi = RegionOfInterest(x_offset=600, y_offset=0, width=100, height=10)
    with pytest.raises(CameraInfoError, match="region of interest"):
        parse_camera_info(msg)


def test_segmentation_round_trip() -> None:
    masks = np.zeros((2, 30, 40), dtype=bool)
    masks[0, 2:10, 3:12] = True
    masks[1, 5:20, 8:30] = True
    result = compose_instances(masks, ["mug", "cabinet"], [0.9, 0.6], stamp=12.5, camera="base")
    header = Header(frame_id="base_color_optical_frame", stamp=from_seconds(12.5))
    msg = segmentation_to_msg(result, header, "sam3")
    assert msg.instance_ids.encoding == "mono16" and msg.backend == "sam3"
    assert list(msg.labels) == ["mug", "cabinet"] and msg.camera == "base"
    back = msg_to_segmentation(msg)
    back.validate()
    assert back.stamp == pytest.approx(12.5) and back.camera == "base"
    assert np.array_equal(back.instance_ids, result.instance_ids)
    assert [i.box for i in back.instances] == [i.box for i in result.instances]
    assert [i.pixel_count for i in back.instances] == [i.pixel_count for i in result.instances]
    # a consumer that works from the id image can skip the count; nothing else changes
    uncounted = msg_to_segmentation(msg, count_pixels=False)
    uncounted.validate()  # ids and boxes are still checked against the image
    assert [i.pixel_count for i in uncounted.instances] == [None, None]
    assert [dataclasses.replace(i, pixel_count=None) for i in back.instances] == list(
        uncounted.instances)
    assert np.array_equal(uncounted.instance_ids, result.instance_ids)


def test_an_uncounted_table_still_fails_validation_on_a_wrong_box() -> None:
    masks = np.zeros((1, 30, 40), dtype=bool)
    masks[0, 2:10, 3:12] = True
    msg = segmentation_to_msg(compose_instances(masks, ["mug"], [0.9]), Header(), "sam3")
    msg.boxes[0].width = 4  # the box no longer covers the mask
    with pytest.raises(SegmentationError, match="box"):
        msg_to_segmentation(msg, count_pixels=False).validate()


def _seg_msg(**overrides: object):  # type: ignore[no-untyped-def]
    result = compose_instances(np.ones((1, 4, 4), bool), ["mug"], [0.5], stamp=1.0)
    msg = segmentation_to_msg(result, Header(), "sam3")
    for key, value in overrides.items():
        setattr(msg, key, value)
    return msg


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"labels": []}, "length"),
        ({"scores": [1.5]}, "score"),
        ({"labels": [" "]}, "label"),
        ({"ids": [0]}, "instance_id"),
        ({"instance_ids": numpy_to_image(np.zeros((4, 4), np.uint8), "mono8")}, "mono16"),
    ],
)
def test_bad_segmentation_messages(overrides: dict[str, object], match: str) -> None:
    with pytest.raises(SegmentationMessageError, match=match):
        msg_to_segmentation(_seg_msg(**overrides))


def test_empty_instance_image_is_refused() -> None:
    msg = _seg_msg()
    msg.instance_ids.height = 0
    msg.instance_ids.width = 0
    msg.instance_ids.data = b""
    with pytest.raises(SegmentationMessageError, match="empty"):
        msg_to_segmentation(msg)


def test_counter_diagnostics() -> None:
    array = counter_diagnostics("deprojection", "base", {"b": 2, "a": 1}, warn=True)
    status = array.status[0]
    assert status.level == status.WARN
    assert [(kv.key, kv.value) for kv in status.values] == [("a", "1"), ("b", "2")]
