"""ZED capture wrapper: conversion without the SDK, and the camera driven by a fake SDK."""

from __future__ import annotations

import importlib.util
import types

import numpy as np
import pytest

from mimir_perception.errors import IntrinsicsError, ZedFrameError, ZedUnavailableError
from mimir_perception.zed import ZedCamera, ZedConfig, convert_frame, load_sdk


def bgra_frame(h: int = 4, w: int = 6) -> np.ndarray:
    img = np.zeros((h, w, 4), np.uint8)
    img[..., 0] = 10  # blue
    img[..., 1] = 20  # green
    img[..., 2] = 30  # red
    img[..., 3] = 255
    return img


def test_convert_frame() -> None:
    depth = np.full((4, 6), 1.5, np.float32)
    depth[0, 0] = np.nan
    frame = convert_frame(bgra_frame(), depth, (500.0, 501.0, 2.5, 1.5), 1_700_000_000_123_000_000)
    assert frame.rgb.shape == (4, 6, 3) and frame.rgb.dtype == np.uint8
    assert frame.rgb[1, 1].tolist() == [30, 20, 10]
    assert np.isnan(frame.depth[0, 0]) and frame.depth[1, 1] == 1.5
    assert frame.intrinsics.width == 6 and frame.intrinsics.height == 4
    assert frame.intrinsics.fy == 501.0
    assert frame.stamp == pytest.approx(1_700_000_000.123)
    depth[1, 1] = 9.0
    assert frame.depth[1, 1] == 1.5  # the SDK buffer is copied


def _good_input() -> dict[str, object]:
    """Arguments ``convert_frame`` accepts; each bad case below replaces one of them."""
    return {"bgra": np.zeros((4, 6, 4), np.uint8), "depth": np.zeros((4, 6), np.float32),
            "calib": (1, 1, 1, 1), "stamp": 0}


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"bgra": np.zeros((4, 6, 3), np.uint8)}, ZedFrameError),
        ({"bgra": np.zeros((4, 6, 4), np.float32)}, ZedFrameError),
        ({"depth": np.zeros((4, 6), np.uint16)}, ZedFrameError),
        ({"depth": np.zeros((4, 5), np.float32)}, ZedFrameError),
        ({"depth": np.zeros((4, 6, 1), np.float32)}, ZedFrameError),
        ({"stamp": -5}, ZedFrameError),
        ({"calib": (0, 1, 1, 1)}, IntrinsicsError),
        ({"calib": (1, 1, 1)}, IntrinsicsError),
    ],
)
def test_convert_frame_rejects_bad_input(bad: dict[str, object], error: type[Exception]) -> None:
    args = {**_good_input(), **bad}
    with pytest.raises(error):
        convert_frame(args["bgra"], args["depth"], args["calib"], args["stamp"])  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("pyzed") is not None, reason="the ZED SDK is installed here"
)
def test_missing_sdk_is_a_typed_error() -> None:
    with pytest.raises(ZedUnavailableError, match="ZED SDK"):
        load_sdk()
    with pytest.raises(ZedUnavailableError):
        ZedCamera().open()


class _Enum:
    def __init__(self, *names: str) -> None:
        for name in names:
            setattr(self, name, name)


def fake_sdk(open_status: str = "SUCCESS", grab_status: str = "SUCCESS") -> types.ModuleType:
    sdk = types.ModuleType("fake_sl")
    sdk.RESOLUTION = _Enum("HD720", "HD1080")  # type: ignore[attr-defined]
    sdk.DEPTH_MODE = _Enum("NEURAL")  # type: ignore[attr-defined]
    sdk.UNIT = _Enum("METER")  # type: ignore[attr-defined]
    sdk.ERROR_CODE = _Enum("SUCCESS", "FAILURE")  # type: ignore[attr-defined]
    sdk.VIEW = _Enum("LEFT")  # type: ignore[attr-defined]
    sdk.MEASURE = _Enum("DEPTH")  # type: ignore[attr-defined]
    sdk.TIME_REFERENCE = _Enum("IMAGE")  # type: ignore[attr-defined]

    class InitParameters:
        serial = 0

        def set_from_serial_number(self, serial: int) -> None:
            self.serial = serial

    class Mat:
        def __init__(self) -> None:
            self.data = np.zeros((0,))

        def get_data(self) -> np.ndarray:
            return self.data

    class Stamp:
        def get_nanoseconds(self) -> int:
            return 2_000_000_000

    class Camera:
        def open(self, init: InitParameters) -> str:
            self.init = init
            return open_status

        def get_camera_information(self) -> object:
            left = types.SimpleNamespace(fx=600.0, fy=600.0, cx=3.0, cy=2.0)
            calib = types.SimpleNamespace(left_cam=left)
            return types.SimpleNamespace(
                camera_configuration=types.SimpleNamespace(calibration_parameters=calib)
            )

        def grab(self) -> str:
            return grab_status

        def retrieve_image(self, mat: Mat, view: str) -> None:
            assert view == "LEFT"
            mat.data = bgra_frame(4, 6)

        def retrieve_measure(self, mat: Mat, measure: str) -> None:
            assert measure == "DEPTH"
            mat.data = np.full((4, 6), 2.0, np.float32)

        def get_timestamp(self, ref: str) -> Stamp:
            return Stamp()

        def close(self) -> None:
            self.closed = True

    sdk.InitParameters = InitParameters  # type: ignore[attr-defined]
    sdk.Mat = Mat  # type: ignore[attr-defined]
    sdk.Camera = Camera  # type: ignore[attr-defined]
    return sdk


def test_camera_with_fake_sdk() -> None:
    cam = ZedCamera(ZedConfig(serial_number=1234), sdk=fake_sdk())
    with pytest.raises(ZedUnavailableError):
        cam.grab()
    cam.open()
    assert cam.is_open
    frame = cam.grab()
    assert frame is not None
    assert frame.stamp == pytest.approx(2.0)
    assert frame.depth.shape == (4, 6) and frame.intrinsics.fx == 600.0
    cam.close()
    assert not cam.is_open
    cam.close()


def test_camera_failures() -> None:
    with pytest.raises(ZedUnavailableError):
        ZedCamera(sdk=fake_sdk(open_status="FAILURE")).open()
    cam = ZedCamera(sdk=fake_sdk(grab_status="FAILURE"))
    cam.open()
    assert cam.grab() is None
    with pytest.raises(ZedUnavailableError):
        ZedCamera(ZedConfig(resolution="HD4K"), sdk=fake_sdk()).open()
    with pytest.raises(ZedUnavailableError):
        ZedConfig(fps=0)
    with pytest.raises(ZedUnavailableError):
        ZedConfig(min_depth=5.0, max_depth=1.0)
