"""Camera and segmentation message conversions for the perception nodes.

* ``sensor_msgs/CameraInfo`` <-> :class:`mimir_perception.camera.Intrinsics`.
* ``mimir_msgs/Segmentation`` <-> :class:`mimir_perception.segmentation.SegmentationResult`.

Distortion policy: mimir deprojects and projects with an ideal pinhole model, so it only
accepts images that carry no lens distortion. A camera info passes when its distortion model
is ``plumb_bob``, ``rational_polynomial``, ``equidistant`` or empty and every coefficient of
``D`` is zero, or when the caller states that the images are rectified (``rectified=True``):
then the projection matrix ``P`` (its left 3x3 block) describes the image and ``D`` is ignored,
as ROS specifies for ``image_rect`` topics. Non-zero distortion on an unrectified image raises
:class:`DistortedImageError` (a :class:`CameraInfoError`); callers that can handle distortion
themselves (fiducial pose estimation) use :func:`parse_camera_info`, which returns the
coefficients instead of refusing them.

Binning and a region of interest are honoured: the intrinsics returned describe the image
actually published (``roi`` size divided by the binning factors).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt
from sensor_msgs.msg import CameraInfo, RegionOfInterest
from std_msgs.msg import Header

from mimir.ros.images import ImageConversionError, image_to_numpy, numpy_to_image
from mimir.ros.time import to_seconds
from mimir_msgs.msg import Segmentation
from mimir_perception.camera import Intrinsics
from mimir_perception.errors import IntrinsicsError, SegmentationError
from mimir_perception.segmentation import MAX_INSTANCES, InstanceInfo, SegmentationResult

#: Distortion models whose all-zero coefficient vector means "no distortion".
KNOWN_DISTORTION_MODELS = ("", "plumb_bob", "rational_polynomial", "equidistant")


class PerceptionNodeError(RuntimeError):
    """A perception node cannot start (bad parameters, missing model, missing SDK).

    A RuntimeError so that :func:`mimir.ros.runtime.run_node` reports it and exits with 1.
    """


class CameraInfoError(ValueError):
    """A camera info message that does not describe a usable pinhole camera."""


class DistortedImageError(CameraInfoError):
    """The camera info declares non-zero lens distortion for an unrectified image."""


class SegmentationMessageError(ValueError):
    """A Segmentation message whose image or tables are inconsistent."""


@dataclass(frozen=True)
class CameraModel:
    """What a camera info says about the published image.

    Attributes:
        intrinsics: Pinhole intrinsics of the published image.
        distortion: Distortion coefficients (empty or all zero for an ideal image).
        distortion_model: The message's distortion model name.
        frame_id: Optical frame of the camera.
    """

    intrinsics: Intrinsics
    distortion: npt.NDArray[np.float64]
    distortion_model: str
    frame_id: str

    @property
    def is_distorted(self) -> bool:
        """Whether any distortion coefficient is non-zero."""
        return bool(np.any(self.distortion != 0.0))


def _matrix(values: object, rows: int, cols: int, name: str) -> npt.NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    if arr.size != rows * cols:
        raise CameraInfoError(f"camera info {name} must hold {rows * cols} numbers, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise CameraInfoError(f"camera info {name} must be finite")
    return arr.reshape(rows, cols)


def parse_camera_info(msg: CameraInfo, rectified: bool = False) -> CameraModel:
    """Read a camera info into a :class:`CameraModel` (distortion returned, not refused).

    Args:
        msg: The camera info.
        rectified: The images are rectified: use ``P`` and report no distortion.

    Raises:
        CameraInfoError: Wrong K/P length, non-finite values, zero or negative focal length,
            zero image size, a region of interest outside the image or an unknown distortion
            model with non-zero coefficients.
    """
    width, height = int(msg.width), int(msg.height)
    if width <= 0 or height <= 0:
        raise CameraInfoError(f"camera info image size must be positive, got {width}x{height}")
    k = _matrix(msg.k, 3, 3, "K")
    if rectified:
        p = _matrix(msg.p, 3, 4, "P")
        if p[0, 0] != 0.0 or p[1, 1] != 0.0:
            k = p[:, :3]
    distortion = np.asarray(msg.d, dtype=np.float64).ravel()
    if not np.all(np.isfinite(distortion)):
        raise CameraInfoError("camera info D must be finite")
    model = str(msg.distortion_model)
    if rectified:
        distortion = np.zeros(0)
    elif np.any(distortion != 0.0) and model not in KNOWN_DISTORTION_MODELS:
        raise CameraInfoError(f"unknown distortion model {model!r} with non-zero coefficients")
    bin_x, bin_y = max(1, int(msg.binning_x)), max(1, int(msg.binning_y))
    roi = msg.roi
    x0, y0 = int(roi.x_offset), int(roi.y_offset)
    roi_w = int(roi.width) or width - x0
    roi_h = int(roi.height) or height - y0
    if x0 < 0 or y0 < 0 or x0 + roi_w > width or y0 + roi_h > height or roi_w <= 0 or roi_h <= 0:
        raise CameraInfoError(
            f"region of interest {x0},{y0} {roi_w}x{roi_h} lies outside {width}x{height}"
        )
    try:
        intrinsics = Intrinsics.from_matrix(k, roi_w // bin_x, roi_h // bin_y)
        if (x0, y0, bin_x, bin_y) != (0, 0, 1, 1):
            intrinsics = Intrinsics(
                fx=intrinsics.fx / bin_x,
                fy=intrinsics.fy / bin_y,
                cx=(intrinsics.cx - x0) / bin_x,
                cy=(intrinsics.cy - y0) / bin_y,
                width=intrinsics.width,
                height=intrinsics.height,
            )
    except IntrinsicsError as err:
        raise CameraInfoError(f"camera info does not describe a pinhole camera: {err}") from err
    return CameraModel(intrinsics, distortion, model, str(msg.header.frame_id))


def camera_info_to_intrinsics(msg: CameraInfo, rectified: bool = False) -> Intrinsics:
    """Intrinsics of an undistorted or rectified image.

    Raises:
        DistortedImageError: Non-zero distortion and ``rectified`` is False.
        CameraInfoError: Any other defect (see :func:`parse_camera_info`).
    """
    camera = parse_camera_info(msg, rectified=rectified)
    if camera.is_distorted:
        raise DistortedImageError(
            f"camera info of {camera.frame_id or 'the camera'} declares {camera.distortion_model} "
            f"distortion {camera.distortion.tolist()}; publish rectified images or set "
            "rectified=true"
        )
    return camera.intrinsics


def intrinsics_to_camera_info(
    intrinsics: Intrinsics, header: Header | None = None, distortion_model: str = "plumb_bob"
) -> CameraInfo:
    """A camera info for an ideal (undistorted) pinhole image."""
    msg = CameraInfo()
    if header is not None:
        msg.header = header
    msg.width, msg.height = intrinsics.width, intrinsics.height
    msg.distortion_model = distortion_model
    msg.d = [0.0] * (8 if distortion_model == "rational_polynomial" else 5)
    k = intrinsics.matrix
    msg.k = k.ravel().tolist()
    msg.r = np.eye(3).ravel().tolist()
    msg.p = np.hstack([k, np.zeros((3, 1))]).ravel().tolist()
    return msg


def segmentation_to_msg(
    result: SegmentationResult, header: Header, backend: str, camera: str | None = None
) -> Segmentation:
    """Encode a segmentation result (``header`` is the color image's header)."""
    msg = Segmentation()
    msg.header = header
    msg.camera = result.camera if camera is None else camera
    msg.backend = backend
    msg.instance_ids = numpy_to_image(result.instance_ids, "mono16", header)
    msg.ids = [info.instance_id for info in result.instances]
    msg.labels = [info.label for info in result.instances]
    msg.scores = [float(info.score) for info in result.instances]
    msg.boxes = [
        RegionOfInterest(
            x_offset=info.box[0],
            y_offset=info.box[1],
            width=info.box[2] - info.box[0],
            height=info.box[3] - info.box[1],
        )
        for info in result.instances
    ]
    return msg


def msg_to_segmentation(msg: Segmentation, camera: str | None = None, *,
                        count_pixels: bool = True) -> SegmentationResult:
    """Decode a Segmentation message.

    The message carries no pixel counts: with ``count_pixels`` they are recomputed from the id
    image (a histogram, about 2 ms on an HD frame), without it they are None, for consumers
    that work from the id image anyway (deprojection checks its boxes itself).

    Raises:
        SegmentationMessageError: Wrong encoding, empty image, tables of different lengths,
            repeated or out-of-range ids, bad scores or empty labels.
    """
    if msg.instance_ids.encoding not in ("mono16", "16UC1"):
        raise SegmentationMessageError(
            f"instance_ids must be mono16, got {msg.instance_ids.encoding!r}"
        )
    try:
        ids = np.asarray(image_to_numpy(msg.instance_ids), dtype=np.uint16)
    except ImageConversionError as err:
        raise SegmentationMessageError(f"instance_ids: {err}") from err
    n = len(msg.ids)
    if not len(msg.labels) == len(msg.scores) == len(msg.boxes) == n:
        raise SegmentationMessageError(
            f"tables differ in length: ids {n}, labels {len(msg.labels)}, "
            f"scores {len(msg.scores)}, boxes {len(msg.boxes)}"
        )
    counts = None
    if count_pixels:  # one bin per id (OpenCV's is about twice as fast as np.bincount here)
        counts = cv2.calcHist([np.ascontiguousarray(ids)], [0], None, [MAX_INSTANCES + 1],
                              [0, MAX_INSTANCES + 1]).ravel().astype(np.int64)
    rows: list[InstanceInfo] = []
    try:
        for instance_id, label, score, box in zip(
            msg.ids, msg.labels, msg.scores, msg.boxes, strict=True
        ):
            x0, y0 = int(box.x_offset), int(box.y_offset)
            rows.append(
                InstanceInfo(
                    int(instance_id),
                    str(label),
                    float(score),
                    (x0, y0, x0 + int(box.width), y0 + int(box.height)),
                    None if counts is None
                    else int(counts[int(instance_id)]) if 0 < int(instance_id) <= MAX_INSTANCES
                    else 0,
                )
            )
        return SegmentationResult(
            ids,
            tuple(rows),
            to_seconds(msg.header.stamp),
            msg.camera if camera is None else camera,
        )
    except SegmentationError as err:
        raise SegmentationMessageError(f"invalid segmentation message: {err}") from err
