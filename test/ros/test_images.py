"""sensor_msgs/Image <-> numpy conversions, including the bad cases."""

from __future__ import annotations

import numpy as np
import pytest
from sensor_msgs.msg import Image

from mimir.ros.images import (
    ImageConversionError,
    UnsupportedEncodingError,
    depth_to_metres,
    image_to_numpy,
    image_to_rgb,
    numpy_to_image,
)

RNG = np.random.default_rng(3)


@pytest.mark.parametrize(
    ("encoding", "shape", "dtype"),
    [
        ("rgb8", (5, 7, 3), np.uint8),
        ("bgr8", (5, 7, 3), np.uint8),
        ("rgba8", (4, 6, 4), np.uint8),
        ("mono8", (5, 7), np.uint8),
        ("16UC1", (5, 7), np.uint16),
        ("mono16", (3, 2), np.uint16),
        ("32FC1", (5, 7), np.float32),
    ],
)
def test_round_trip(encoding: str, shape: tuple[int, ...], dtype: type) -> None:
    array = (RNG.random(shape) * 1000).astype(dtype)
    msg = numpy_to_image(array, encoding)
    assert msg.step == shape[1] * (shape[2] if len(shape) == 3 else 1) * np.dtype(dtype).itemsize
    back = image_to_numpy(msg)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, array)


def test_step_padding_is_skipped() -> None:
    array = np.arange(3 * 4, dtype=np.uint16).reshape(3, 4)
    padded = np.zeros((3, 6), dtype=np.uint16)  # 4 bytes of padding per row
    padded[:, :4] = array
    msg = Image(height=3, width=4, encoding="16UC1", is_bigendian=0, step=12,
                data=padded.tobytes())
    np.testing.assert_array_equal(image_to_numpy(msg), array)


def test_big_endian_depth() -> None:
    array = np.array([[1, 256], [513, 65535]], dtype=np.uint16)
    msg = Image(height=2, width=2, encoding="16UC1", is_bigendian=1, step=4,
                data=array.astype(">u2").tobytes())
    np.testing.assert_array_equal(image_to_numpy(msg), array)


def test_colour_orders_become_rgb() -> None:
    rgb = RNG.integers(0, 255, (4, 5, 3), dtype=np.uint8)
    np.testing.assert_array_equal(image_to_rgb(numpy_to_image(rgb, "rgb8")), rgb)
    np.testing.assert_array_equal(image_to_rgb(numpy_to_image(rgb[:, :, ::-1].copy(), "bgr8")), rgb)
    bgra = np.concatenate([rgb[:, :, ::-1], np.full((4, 5, 1), 255, np.uint8)], axis=2)
    np.testing.assert_array_equal(image_to_rgb(numpy_to_image(bgra, "bgra8")), rgb)
    grey = rgb[:, :, 0].copy()
    assert image_to_rgb(numpy_to_image(grey, "mono8")).shape == (4, 5, 3)


def test_depth_units_and_invalid_readings() -> None:
    mm = np.array([[0, 1500], [65535, 250]], dtype=np.uint16)
    metres = depth_to_metres(numpy_to_image(mm, "16UC1"))
    assert np.isnan(metres[0, 0])
    assert metres[0, 1] == pytest.approx(1.5)
    assert metres[1, 1] == pytest.approx(0.25)
    m = np.array([[np.nan, 2.0], [np.inf, 0.0]], dtype=np.float32)
    out = depth_to_metres(numpy_to_image(m, "32FC1"))
    assert out[0, 1] == pytest.approx(2.0)
    assert np.isnan(out[0, 0]) and np.isnan(out[1, 0]) and np.isnan(out[1, 1])


def test_unsupported_encoding() -> None:
    msg = Image(height=1, width=1, encoding="yuv422", step=2, data=b"\x00\x00")
    with pytest.raises(UnsupportedEncodingError, match="yuv422"):
        image_to_numpy(msg)
    with pytest.raises(UnsupportedEncodingError):
        numpy_to_image(np.zeros((2, 2), np.uint8), "bayer_rggb8")
    with pytest.raises(UnsupportedEncodingError):
        depth_to_metres(numpy_to_image(np.zeros((2, 2), np.uint8), "mono8"))


def test_buffer_too_short() -> None:
    msg = Image(height=4, width=4, encoding="rgb8", step=12, data=bytes(12 * 3))
    with pytest.raises(ImageConversionError, match="expected step"):
        image_to_numpy(msg)


def test_step_smaller_than_row() -> None:
    msg = Image(height=2, width=4, encoding="32FC1", step=8, data=bytes(32))
    with pytest.raises(ImageConversionError, match="step 8"):
        image_to_numpy(msg)


def test_empty_image() -> None:
    with pytest.raises(ImageConversionError, match="empty"):
        image_to_numpy(Image(height=0, width=0, encoding="rgb8"))


def test_array_does_not_fit_encoding() -> None:
    with pytest.raises(ImageConversionError, match="shape"):
        numpy_to_image(np.zeros((2, 2), np.uint8), "rgb8")
    with pytest.raises(ImageConversionError, match="dtype"):
        numpy_to_image(np.zeros((2, 2), np.float64), "32FC1")
