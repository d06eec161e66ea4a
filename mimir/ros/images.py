"""sensor_msgs/Image <-> numpy, without cv_bridge.

cv_bridge has no wheel outside a ROS distribution, so the few encodings mimir uses are converted
here: ``rgb8``, ``bgr8``, ``rgba8``, ``bgra8``, ``mono8``, ``mono16``, ``16UC1`` (depth in mm) and
``32FC1`` (depth in m). Row padding (``step``) and byte order (``is_bigendian``) are honoured.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sensor_msgs.msg import Image
from std_msgs.msg import Header

from mimir.ros.diagnostics import SkipReasons


class ImageConversionError(ValueError):
    """An image message that cannot be converted (encoding, size or buffer length)."""


class UnsupportedEncodingError(ImageConversionError):
    """An encoding this module does not convert."""


IMAGE_SKIPS = SkipReasons(
    (UnsupportedEncodingError, "unsupported_encoding"),
    (ImageConversionError, "bad_image"),
)
"""Counters of a colour image a node skips because it cannot be converted."""


@dataclass(frozen=True)
class _Encoding:
    dtype: np.dtype[np.generic]
    channels: int


ENCODINGS: dict[str, _Encoding] = {
    "rgb8": _Encoding(np.dtype(np.uint8), 3),
    "bgr8": _Encoding(np.dtype(np.uint8), 3),
    "rgba8": _Encoding(np.dtype(np.uint8), 4),
    "bgra8": _Encoding(np.dtype(np.uint8), 4),
    "mono8": _Encoding(np.dtype(np.uint8), 1),
    "8UC1": _Encoding(np.dtype(np.uint8), 1),
    "mono16": _Encoding(np.dtype(np.uint16), 1),
    "16UC1": _Encoding(np.dtype(np.uint16), 1),
    "32FC1": _Encoding(np.dtype(np.float32), 1),
}

_HOST_BIG_ENDIAN = sys.byteorder == "big"


def _encoding(name: str) -> _Encoding:
    try:
        return ENCODINGS[name]
    except KeyError as err:
        raise UnsupportedEncodingError(
            f"unsupported image encoding {name!r}; supported: {', '.join(sorted(ENCODINGS))}"
        ) from err


def image_to_numpy(msg: Image) -> npt.NDArray[np.generic]:
    """Convert an image message into an array of shape (H, W) or (H, W, C).

    The array is a copy in host byte order, in the message's own encoding (no colour swap).

    Raises:
        UnsupportedEncodingError: the encoding is not one of :data:`ENCODINGS`.
        ImageConversionError: ``step`` or the buffer length disagree with the size.
    """
    enc = _encoding(msg.encoding)
    height, width = int(msg.height), int(msg.width)
    row_bytes = width * enc.channels * enc.dtype.itemsize
    if height == 0 or width == 0:
        raise ImageConversionError(f"empty image ({width}x{height})")
    if msg.step < row_bytes:
        raise ImageConversionError(
            f"step {msg.step} is smaller than one row of {width} {msg.encoding} pixels "
            f"({row_bytes} bytes)"
        )
    buffer = msg.data
    if not isinstance(buffer, (bytes, bytearray, memoryview)):
        buffer = bytes(buffer)
    if len(buffer) < msg.step * height:
        raise ImageConversionError(
            f"buffer holds {len(buffer)} bytes, expected step*height = {msg.step * height}"
        )
    dtype = enc.dtype.newbyteorder(">" if msg.is_bigendian else "<")
    rows = np.frombuffer(buffer, dtype=np.uint8, count=msg.step * height).reshape(height, msg.step)
    pixels = rows[:, :row_bytes].copy().view(dtype)
    array = pixels.astype(enc.dtype.newbyteorder("="), copy=False)
    if enc.channels > 1:
        return array.reshape(height, width, enc.channels)
    return array.reshape(height, width)


def numpy_to_image(array: npt.ArrayLike, encoding: str, header: Header | None = None) -> Image:
    """Build an image message from an array of shape (H, W) or (H, W, C).

    Raises:
        UnsupportedEncodingError: unknown encoding.
        ImageConversionError: the array's shape or dtype does not match the encoding.
    """
    enc = _encoding(encoding)
    arr = np.asarray(array)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    expected_ndim = 2 if enc.channels == 1 else 3
    if arr.ndim != expected_ndim or (enc.channels > 1 and arr.shape[2] != enc.channels):
        raise ImageConversionError(
            f"array of shape {arr.shape} does not fit encoding {encoding!r} "
            f"({enc.channels} channel(s))"
        )
    if arr.dtype != enc.dtype:
        raise ImageConversionError(
            f"array dtype {arr.dtype} does not fit {encoding!r} ({enc.dtype})"
        )
    msg = Image()
    if header is not None:
        msg.header = header
    msg.height, msg.width = int(arr.shape[0]), int(arr.shape[1])
    msg.encoding = encoding
    msg.is_bigendian = int(_HOST_BIG_ENDIAN)
    msg.step = msg.width * enc.channels * enc.dtype.itemsize
    msg.data = np.ascontiguousarray(arr).tobytes()
    return msg


def image_to_rgb(msg: Image) -> npt.NDArray[np.uint8]:
    """A colour or grey image message as an (H, W, 3) RGB uint8 array."""
    array = image_to_numpy(msg)
    if msg.encoding == "rgb8":
        return np.asarray(array, dtype=np.uint8)
    if msg.encoding == "bgr8":
        return np.ascontiguousarray(np.asarray(array, dtype=np.uint8)[:, :, ::-1])
    if msg.encoding == "rgba8":
        return np.ascontiguousarray(np.asarray(array, dtype=np.uint8)[:, :, :3])
    if msg.encoding == "bgra8":
        return np.ascontiguousarray(np.asarray(array, dtype=np.uint8)[:, :, 2::-1])
    if msg.encoding in ("mono8", "8UC1"):
        return np.repeat(np.asarray(array, dtype=np.uint8)[:, :, None], 3, axis=2)
    raise UnsupportedEncodingError(f"{msg.encoding!r} is not a colour encoding")


def depth_to_metres(msg: Image) -> npt.NDArray[np.float32]:
    """A depth image message as float32 metres, NaN where there is no reading.

    ``16UC1``/``mono16`` are millimetres with 0 meaning no reading; ``32FC1`` is metres where
    0, NaN and infinities mean no reading.
    """
    array = image_to_numpy(msg)
    if msg.encoding in ("16UC1", "mono16"):
        depth = np.asarray(array, dtype=np.float32) * np.float32(0.001)
        depth[np.asarray(array) == 0] = np.nan
        return depth
    if msg.encoding == "32FC1":
        depth = np.array(array, dtype=np.float32)
        depth[~np.isfinite(depth) | (depth <= 0.0)] = np.nan
        return depth
    raise UnsupportedEncodingError(f"{msg.encoding!r} is not a depth encoding (16UC1, 32FC1)")
