"""ZED stereo camera capture through the Stereolabs SDK (``pyzed.sl``), optional.

The SDK ships with the ZED installer, not with PyPI (the PyPI package named ``pyzed`` is
unrelated). Without it, :func:`load_sdk` and :class:`ZedCamera` raise
:class:`ZedUnavailableError`. The frame conversion (:func:`convert_frame`) is plain numpy and
works without the SDK.

Depth from the SDK is registered to the left color image, in metres when the SDK runs with
``UNIT.METER``; invalid readings are NaN or +/-inf and are left as they are (deprojection
filters them).
"""

from __future__ import annotations

import importlib
import logging
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from mimir_perception.camera import Intrinsics
from mimir_perception.errors import IntrinsicsError, ZedFrameError, ZedUnavailableError

LOG = logging.getLogger(__name__)


def load_sdk() -> ModuleType:
    """Import ``pyzed.sl``.

    Raises:
        ZedUnavailableError: When the Stereolabs SDK is not installed.
    """
    try:
        return importlib.import_module("pyzed.sl")
    except ImportError as err:
        raise ZedUnavailableError(
            "the Stereolabs ZED SDK Python API (pyzed.sl) is not installed; install the ZED SDK "
            "and run its get_python_api.py (the PyPI package 'pyzed' is not the SDK)"
        ) from err


@dataclass(frozen=True)
class ZedFrame:
    """One converted ZED frame.

    Attributes:
        rgb: (H, W, 3) uint8 RGB left image.
        depth: (H, W) float32 depth registered to ``rgb`` (m; NaN/inf = no reading).
        intrinsics: Intrinsics of the left rectified image.
        stamp: Image capture time (s, SDK clock).
    """

    rgb: npt.NDArray[np.uint8]
    depth: npt.NDArray[np.float32]
    intrinsics: Intrinsics
    stamp: float


def convert_frame(
    bgra: npt.NDArray[np.generic],
    depth: npt.NDArray[np.generic],
    calibration: tuple[float, float, float, float],
    stamp_ns: int,
) -> ZedFrame:
    """Convert SDK arrays into a :class:`ZedFrame`.

    Args:
        bgra: (H, W, 4) uint8 BGRA image as ``sl.Mat.get_data()`` returns it.
        depth: (H, W) float32 depth in metres (``MEASURE.DEPTH`` with ``UNIT.METER``).
        calibration: ``(fx, fy, cx, cy)`` of the left camera at this resolution.
        stamp_ns: Image timestamp in nanoseconds.

    Raises:
        ZedFrameError: Wrong shapes or dtypes, or a size mismatch between color and depth.
        IntrinsicsError: Invalid calibration values.
    """
    if not isinstance(bgra, np.ndarray) or bgra.ndim != 3 or bgra.shape[2] != 4:
        raise ZedFrameError(f"color must be H x W x 4 BGRA, got {getattr(bgra, 'shape', None)}")
    if bgra.dtype != np.uint8:
        raise ZedFrameError(f"color must be uint8, got {bgra.dtype}")
    if not isinstance(depth, np.ndarray) or depth.ndim != 2:
        raise ZedFrameError(f"depth must be H x W, got {getattr(depth, 'shape', None)}")
    if depth.dtype not in (np.float32, np.float64):
        raise ZedFrameError(f"depth must be float (metres), got {depth.dtype}")
    if depth.shape != bgra.shape[:2]:
        raise ZedFrameError(f"color is {bgra.shape[:2]} (H, W) but depth is {depth.shape} (H, W)")
    if isinstance(stamp_ns, bool) or not isinstance(stamp_ns, (int, np.integer)) or stamp_ns < 0:
        raise ZedFrameError(f"stamp_ns must be a non-negative integer, got {stamp_ns!r}")
    if len(calibration) != 4:
        raise IntrinsicsError(f"calibration must be (fx, fy, cx, cy), got {calibration!r}")
    fx, fy, cx, cy = calibration
    intrinsics = Intrinsics(fx, fy, cx, cy, int(bgra.shape[1]), int(bgra.shape[0]))
    rgb = np.asarray(cv2.cvtColor(np.ascontiguousarray(bgra), cv2.COLOR_BGRA2RGB), dtype=np.uint8)
    depth_m = np.array(depth, dtype=np.float32, copy=True)
    return ZedFrame(rgb, depth_m, intrinsics, int(stamp_ns) / 1e9)


@dataclass(frozen=True)
class ZedConfig:
    """Capture settings (names follow the SDK's enums).

    Attributes:
        serial_number: Open this camera; 0 opens the first one found.
        resolution: ``sl.RESOLUTION`` member name (``HD720``, ``HD1080``, ...).
        fps: Frame rate.
        depth_mode: ``sl.DEPTH_MODE`` member name (``NEURAL``, ``ULTRA``, ...).
        min_depth: Minimum depth distance (m).
        max_depth: Maximum depth distance (m).
    """

    serial_number: int = 0
    resolution: str = "HD720"
    fps: int = 30
    depth_mode: str = "NEURAL"
    min_depth: float = 0.3
    max_depth: float = 10.0

    def __post_init__(self) -> None:
        if self.fps <= 0 or self.serial_number < 0:
            raise ZedUnavailableError("fps must be > 0 and serial_number >= 0")
        if not (0.0 < self.min_depth < self.max_depth and math.isfinite(self.max_depth)):
            raise ZedUnavailableError("need 0 < min_depth < max_depth")


def _enum(sdk: ModuleType, enum_name: str, member: str) -> Any:
    holder = getattr(sdk, enum_name, None)
    value = getattr(holder, member, None) if holder is not None else None
    if value is None:
        raise ZedUnavailableError(f"the ZED SDK has no {enum_name}.{member}")
    return value


class ZedCamera:
    """A ZED camera opened through the SDK; :meth:`grab` returns converted frames.

    The SDK module can be injected (``sdk=``) so the wrapper is testable without hardware.
    """

    def __init__(self, config: ZedConfig | None = None, sdk: ModuleType | None = None) -> None:
        self._config = config or ZedConfig()
        self._sdk = sdk
        self._camera: Any = None
        self._image: Any = None
        self._depth: Any = None
        self._calibration: tuple[float, float, float, float] | None = None

    @property
    def is_open(self) -> bool:
        """Whether the camera is open."""
        return self._camera is not None

    def open(self) -> None:
        """Open the camera.

        Raises:
            ZedUnavailableError: SDK missing or the camera cannot be opened.
        """
        if self._camera is not None:
            return
        sl = self._sdk if self._sdk is not None else load_sdk()
        cfg = self._config
        init = sl.InitParameters()
        init.camera_resolution = _enum(sl, "RESOLUTION", cfg.resolution)
        init.camera_fps = cfg.fps
        init.depth_mode = _enum(sl, "DEPTH_MODE", cfg.depth_mode)
        init.coordinate_units = _enum(sl, "UNIT", "METER")
        init.depth_minimum_distance = cfg.min_depth
        init.depth_maximum_distance = cfg.max_depth
        if cfg.serial_number:
            init.set_from_serial_number(cfg.serial_number)
        camera = sl.Camera()
        status = camera.open(init)
        if status != _enum(sl, "ERROR_CODE", "SUCCESS"):
            raise ZedUnavailableError(f"cannot open ZED camera: {status}")
        left = camera.get_camera_information().camera_configuration.calibration_parameters.left_cam
        self._calibration = (float(left.fx), float(left.fy), float(left.cx), float(left.cy))
        self._image = sl.Mat()
        self._depth = sl.Mat()
        self._sdk = sl
        self._camera = camera
        LOG.info("opened ZED camera (%s @ %d fps)", cfg.resolution, cfg.fps)

    def grab(self) -> ZedFrame | None:
        """Grab and convert one frame; None when the SDK reports no new frame.

        Raises:
            ZedUnavailableError: The camera is not open.
            ZedFrameError: The SDK delivered arrays that cannot be converted.
        """
        if self._camera is None or self._calibration is None:
            raise ZedUnavailableError("the ZED camera is not open")
        sl = self._sdk
        assert sl is not None
        status = self._camera.grab()
        if status != _enum(sl, "ERROR_CODE", "SUCCESS"):
            LOG.debug("ZED grab returned %s", status)
            return None
        self._camera.retrieve_image(self._image, _enum(sl, "VIEW", "LEFT"))
        self._camera.retrieve_measure(self._depth, _enum(sl, "MEASURE", "DEPTH"))
        stamp = self._camera.get_timestamp(_enum(sl, "TIME_REFERENCE", "IMAGE"))
        return convert_frame(
            np.asarray(self._image.get_data()),
            np.asarray(self._depth.get_data()),
            self._calibration,
            int(stamp.get_nanoseconds()),
        )

    def close(self) -> None:
        """Close the camera (idempotent)."""
        if self._camera is not None:
            self._camera.close()
            self._camera = None
