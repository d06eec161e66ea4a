"""Message conversions of the simulation bridge.

* ``JudgeInstruction`` answer entities -> :class:`mimir_sim.instruction_desk.NamedEntity`; the
  instruction desk's results -> ``BeginInstruction`` and ``JudgeInstruction`` responses.
* The camera mounts -> ``/tf`` transforms (the simulator sends none from the map: the
  localization node localises the simulated robot from the kitchen's wall tags).
* Robot joint states -> ``sensor_msgs/JointState``; a rendered
  :class:`mimir_sim.rendering.Frame` -> colour, depth and camera info messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Header

from mimir.nodes.perception.messages import intrinsics_to_camera_info
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_perception.camera import Intrinsics
from mimir_sim.instruction_desk import NONE, BeginResult, JudgeResult, NamedEntity
from mimir_sim.rendering import Frame


def time_msg(seconds: float) -> Time:
    """A stamp from simulation seconds (negative clamps to 0)."""
    return from_seconds(max(0.0, seconds))


def header(stamp: float, frame: str) -> Header:
    """A header at simulation time ``stamp``."""
    return Header(stamp=time_msg(stamp), frame_id=frame)


def answer_entities(entities: Sequence[Any]) -> list[NamedEntity]:
    """``mimir_msgs/AnswerEntity`` list -> entities to bind."""
    return [
        NamedEntity(
            e.node_id,
            e.label,
            (e.position.x, e.position.y, e.position.z) if e.has_position else None,
        )
        for e in entities
    ]


def joint_state_msg(
    stamp: float,
    frame: str,
    names: Sequence[str],
    values: tuple[list[float], list[float], list[float]],
) -> JointState:
    """The robot's joint state from (positions, velocities, efforts)."""
    positions, velocities, efforts = values
    return JointState(
        header=header(stamp, frame),
        name=list(names),
        position=positions,
        velocity=velocities,
        effort=efforts,
    )


def frame_messages(frame: Frame, hdr: Header) -> tuple[Image | None, Image | None, CameraInfo]:
    """Colour (rgb8), depth (32FC1, m) and camera info of a rendered frame."""
    color = numpy_to_image(frame.color, "rgb8", hdr) if frame.color is not None else None
    depth = numpy_to_image(frame.depth, "32FC1", hdr) if frame.depth is not None else None
    info = frame.info
    intrinsics = Intrinsics(info.fx, info.fy, info.cx, info.cy, info.width, info.height)
    return color, depth, intrinsics_to_camera_info(intrinsics, hdr)


def begin_response(response: Any, result: BeginResult) -> Any:
    """Fill a ``BeginInstruction`` response."""
    response.error_code = getattr(type(response), result.code)
    response.error_msg = result.message
    return response


def judge_response(response: Any, result: BeginResult) -> Any:
    """Fill a ``JudgeInstruction`` response (verdict fields only for a judged instruction)."""
    response.error_code = getattr(type(response), result.code)
    response.error_msg = result.message
    if isinstance(result, JudgeResult) and result.code == NONE:
        response.success = result.success
        response.progress = result.progress
        response.details_json = result.details_json
    return response


def sim_transforms(
    stamp: float,
    cameras_in_base: Mapping[str, npt.NDArray[np.float64]],
    base_frame: str,
) -> list[TransformStamped]:
    """``base -> <optical frame>`` for every camera: all the simulator puts on /tf.

    Args:
        stamp: simulation time (s).
        cameras_in_base: 4x4 pose of each optical frame (keyed by its frame id) in the base.
        base_frame: the robot's base frame.
    """
    return [matrix_to_transform(p, base_frame, f, stamp) for f, p in cameras_in_base.items()]
