"""Conversions of what perception hands memory: observations and the camera views behind them.

The deprojection node encodes them, the scene graph node decodes them; each has one encoder and
one decoder here, and an observation's oriented box survives the round trip.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from mimir.nodes.memory.messages import MessageValueError, point_msg, stamp_or_zero
from mimir.ros.time import to_seconds
from mimir.transforms import (
    InvalidTransformError,
    matrices_to_quaternions,
    matrix_to_quaternion,
    quaternion_to_matrix,
)
from mimir_memory.errors import InvalidValueError
from mimir_memory.observations import InvalidObservationError
from mimir_memory.observations import ObjectObservation as CoreObservation
from mimir_memory.visibility import CameraView as CoreView
from mimir_msgs.msg import CameraView, ObjectObservation, ObjectObservationArray


def observations_to_msgs(observations: Sequence[CoreObservation]) -> list[ObjectObservation]:
    """:func:`observation_to_msg` of each, their box rotations converted in one call."""
    boxed = [o.obb_center is not None and o.obb_extent is not None for o in observations]
    quats = iter(matrices_to_quaternions(
        [o.obb_rotation if o.obb_rotation is not None else np.eye(3)
         for o, box in zip(observations, boxed, strict=True) if box]))
    return [observation_to_msg(o, next(quats) if box else None)
            for o, box in zip(observations, boxed, strict=True)]


def observation_to_msg(obs: CoreObservation,
                       quaternion: npt.ArrayLike | None = None) -> ObjectObservation:
    """The one encoder of an observation (header frame and stamp are the observation's).

    The oriented box travels in ``oriented_box`` when it was computed (its rotation as a
    quaternion, identity when only centre and extent are known); otherwise the box stays all
    zero, which :func:`observation_from_msg` reads as "not computed". ``quaternion``, when
    given, is that rotation already converted (:func:`observations_to_msgs`).
    """
    msg = ObjectObservation(
        label=obs.label,
        detection_id=obs.detection_id,
        camera=obs.camera,
        centroid=point_msg(obs.centroid),
        bbox_min=point_msg(obs.bbox_min),
        bbox_max=point_msg(obs.bbox_max),
        score=float(obs.score),
        point_count=int(obs.point_count),
    )
    msg.header.frame_id = obs.frame_id
    msg.header.stamp = stamp_or_zero(obs.stamp)
    if obs.obb_center is not None and obs.obb_extent is not None:
        rotation = obs.obb_rotation if obs.obb_rotation is not None else np.eye(3)
        box = msg.oriented_box
        box.center.position = point_msg(obs.obb_center)
        q = box.center.orientation
        if quaternion is None:
            quaternion = matrix_to_quaternion(rotation)
        q.x, q.y, q.z, q.w = (float(v) for v in np.asarray(quaternion).reshape(4))
        box.size.x, box.size.y, box.size.z = (float(v) for v in obs.obb_extent)
    return msg


def observation_from_msg(item: ObjectObservation,
                         array: ObjectObservationArray | None = None) -> CoreObservation:
    """The one decoder of an observation; header, camera and frame default to the array's.

    Raises:
        InvalidObservationError: the core refuses it (NaN, inverted box, a zero quaternion on
            an oriented box...).
    """
    c, lo, hi = item.centroid, item.bbox_min, item.bbox_max
    stamp = to_seconds(item.header.stamp)
    if not stamp and array is not None:
        stamp = to_seconds(array.header.stamp)
    box = item.oriented_box
    size = (box.size.x, box.size.y, box.size.z)
    obb: dict[str, Any] = {}
    if size != (0.0, 0.0, 0.0):
        q = box.center.orientation
        try:
            rotation = quaternion_to_matrix([q.x, q.y, q.z, q.w])
        except InvalidTransformError as err:
            raise InvalidObservationError(f"oriented box of {item.label!r}: {err}") from err
        p = box.center.position
        obb = {"obb_center": np.array([p.x, p.y, p.z]), "obb_extent": np.array(size),
               "obb_rotation": rotation}
    return CoreObservation(
        label=item.label,
        centroid=np.array([c.x, c.y, c.z]),
        bbox_min=np.array([lo.x, lo.y, lo.z]),
        bbox_max=np.array([hi.x, hi.y, hi.z]),
        stamp=stamp,
        score=float(item.score),
        point_count=int(item.point_count),
        camera=item.camera or (array.camera if array is not None else ""),
        detection_id=item.detection_id,
        frame_id=item.header.frame_id or (array.header.frame_id if array is not None else ""),
        **obb,
    )


class RefusedObservation(NamedTuple):
    """An observation of an array that did not decode: why (``invalid``, ``wrong_frame``), its
    label and the error's text."""

    reason: str
    label: str
    text: str


def observations_from_msg(msg: ObjectObservationArray, frame: str
                          ) -> tuple[list[CoreObservation], list[RefusedObservation]]:
    """An array's observations that decode and lie in ``frame``, and those that do not, with
    why: each stands or falls alone, so a bad one costs only itself."""
    taken: list[CoreObservation] = []
    refused: list[RefusedObservation] = []
    for item in msg.observations:
        try:
            obs = observation_from_msg(item, msg)
        except InvalidObservationError as err:
            refused.append(RefusedObservation("invalid", str(item.label), str(err)))
            continue
        if obs.frame_id != frame:
            refused.append(RefusedObservation("wrong_frame", obs.label,
                                              f"observation in frame {obs.frame_id!r}"))
            continue
        taken.append(obs)
    return taken, refused


def view_to_msg(view: CoreView | None) -> CameraView:
    """The one encoder of a camera view; None gives a view marked invalid (unknown)."""
    msg = CameraView()
    if view is None:
        return msg
    msg.valid = True
    pose = view.camera_to_map
    msg.pose.position = point_msg(pose[:3, 3])
    q = msg.pose.orientation
    q.x, q.y, q.z, q.w = (float(v) for v in matrix_to_quaternion(pose[:3, :3]))
    msg.fx, msg.fy, msg.cx, msg.cy = view.fx, view.fy, view.cx, view.cy
    msg.width, msg.height = view.width, view.height
    msg.max_range_m = float(view.max_range_m)
    msg.depth_rows, msg.depth_cols = view.grid_shape
    # an array.array of typecode "f" is taken as it is (no per-item check of 768 floats)
    msg.depth_min_m = array.array("f", np.ascontiguousarray(view.depth_min_m,
                                                            dtype=np.float32).tobytes())
    msg.labels_sought = list(view.labels_sought)
    return msg


def view_from_msg(msg: CameraView) -> CoreView | None:
    """The one decoder of a camera view: None when the message marks it unknown.

    Raises:
        MessageValueError: A pose, intrinsics, size or depth grid the core refuses (a zero or
            non-finite quaternion, zero focal length, a grid whose length is not rows x cols...).
    """
    if not msg.valid:
        return None
    p, q = msg.pose.position, msg.pose.orientation
    try:
        pose = np.eye(4)
        pose[:3, :3] = quaternion_to_matrix([q.x, q.y, q.z, q.w])
        pose[:3, 3] = (p.x, p.y, p.z)
        return CoreView.from_flat(
            camera_to_map=pose, fx=msg.fx, fy=msg.fy, cx=msg.cx, cy=msg.cy,
            width=int(msg.width), height=int(msg.height), max_range_m=float(msg.max_range_m),
            depth_rows=int(msg.depth_rows), depth_cols=int(msg.depth_cols),
            depth_min_m=np.asarray(msg.depth_min_m, dtype=np.float32),
            labels_sought=[str(label) for label in msg.labels_sought],
        )
    except (InvalidTransformError, InvalidValueError) as err:
        raise MessageValueError(f"camera view: {err}") from err
