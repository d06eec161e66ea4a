"""Message conversions of the simulation bridge.

* ``ExecutePrimitive`` goal -> :class:`mimir_sim.embodiment.PrimitiveRequest`; a primitive's
  outcome -> ``ExecutePrimitive.Result`` and ``InteractionEvent``.
* ``JudgeInstruction`` answer entities -> :class:`mimir_sim.instruction_desk.NamedEntity`; the
  instruction desk's results -> ``BeginInstruction`` and ``JudgeInstruction`` responses.
* The base and camera poses -> ``/tf`` transforms.
* Robot and fixture joint states -> ``sensor_msgs/JointState``; a rendered
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

from mimir.labels import label_text
from mimir.nodes.perception.messages import intrinsics_to_camera_info
from mimir.ros.images import numpy_to_image
from mimir.ros.tf import matrix_to_transform
from mimir.ros.time import from_seconds
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent
from mimir_perception.camera import Intrinsics
from mimir_sim.embodiment import (
    EmbodimentError,
    FixtureJointState,
    PrimitiveOutcome,
    PrimitiveRequest,
    build_request,
    yaw_from_quaternion,
)
from mimir_sim.instruction_desk import NONE, BeginResult, JudgeResult, NamedEntity
from mimir_sim.rendering import Frame

RESULT_CODES = (
    "NONE",
    "UNKNOWN_PRIMITIVE",
    "UNKNOWN_TARGET",
    "PRECONDITION_FAILED",
    "UNREACHABLE",
    "EXECUTION_FAILED",
    "DENIED_BY_OPERATOR",
    "CANCELED",
)


class RequestError(Exception):
    """A goal refused while converting it (carries the result code)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def time_msg(seconds: float) -> Time:
    """A stamp from simulation seconds (negative clamps to 0)."""
    return from_seconds(max(0.0, seconds))


def header(stamp: float, frame: str) -> Header:
    """A header at simulation time ``stamp``."""
    return Header(stamp=time_msg(stamp), frame_id=frame)


def result_code(name: str) -> int:
    """The ``ExecutePrimitive.Result`` constant of a code name."""
    return int(getattr(ExecutePrimitive.Result, name))


def result_code_name(code: int) -> str:
    """Name of an ``ExecutePrimitive.Result`` code (the number itself if unknown)."""
    names = {result_code(n): n for n in RESULT_CODES}
    return names.get(int(code), str(code))


def goal_to_request(goal: Any, accepted_frames: Sequence[str]) -> PrimitiveRequest:
    """The request an ``ExecutePrimitive`` goal asks for.

    Raises:
        RequestError: the target pose is in another frame, or the request is malformed.
    """
    params = {kv.key.strip(): kv.value for kv in goal.parameters}
    position: tuple[float, float, float] | None = None
    yaw: float | None = None
    if goal.use_target_pose:
        frame = goal.target_pose.header.frame_id
        if frame not in ("", *accepted_frames):
            raise RequestError(
                ExecutePrimitive.Result.UNKNOWN_TARGET,
                f"target_pose must be in {accepted_frames[0]!r}, got {frame!r}",
            )
        p, q = goal.target_pose.pose.position, goal.target_pose.pose.orientation
        position = (float(p.x), float(p.y), float(p.z))
        yaw = yaw_from_quaternion(q.x, q.y, q.z, q.w)
    try:
        return build_request(goal.primitive, goal.target_id, position, yaw, params)
    except EmbodimentError as err:
        raise RequestError(result_code(err.code), str(err)) from err


def refusal_result(code: int, message: str) -> ExecutePrimitive.Result:
    """Result of a goal refused before or while preparing it."""
    return ExecutePrimitive.Result(
        success=False, outcome="REFUSED", error_code=code, error_msg=message
    )


def canceled_result() -> ExecutePrimitive.Result:
    """Result of a goal canceled while it waited."""
    return ExecutePrimitive.Result(
        success=False,
        outcome="CANCELED",
        error_code=ExecutePrimitive.Result.CANCELED,
        error_msg="canceled before it started",
    )


def outcome_result(
    outcome: PrimitiveOutcome, interaction_id: str, start: float
) -> ExecutePrimitive.Result:
    """Result of a primitive that ran."""
    return ExecutePrimitive.Result(
        success=outcome.success,
        outcome=outcome.outcome,
        interaction_id=interaction_id,
        window_start=time_msg(start),
        window_end=time_msg(outcome.end),
        error_code=(
            ExecutePrimitive.Result.NONE
            if outcome.success
            else ExecutePrimitive.Result.EXECUTION_FAILED
        ),
        error_msg="" if outcome.success else outcome.message,
    )


def interaction_event(
    goal: Any,
    window: tuple[str, float],
    phase: int,
    outcome: PrimitiveOutcome | None,
    frame: str,
) -> InteractionEvent:
    """STARTED (``outcome`` None) or ENDED event of the window (interaction id, start time)."""
    interaction_id, start = window
    end = outcome.end if outcome is not None else start
    event = InteractionEvent(
        header=header(end, frame),
        interaction_id=interaction_id,
        phase=phase,
        primitive=label_text(goal.primitive).replace(" ", "_"),
        target_id=goal.target_id,
        task=goal.task,
        window_start=time_msg(start),
    )
    if goal.use_target_pose:
        event.target_pose = goal.target_pose.pose
    if outcome is not None:
        event.window_end = time_msg(outcome.end)
        event.success = outcome.success
        event.outcome = outcome.outcome
        event.message = outcome.message
    return event


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


def target_state_msg(state: FixtureJointState, stamp: float, frame: str) -> JointState:
    """The joint of the fixture a primitive acts on, named by the planner's target id."""
    return JointState(
        header=header(stamp, frame), name=[state.target_id], position=[state.position]
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


def robot_transforms(
    stamp: float,
    base_in_odom: npt.NDArray[np.float64],
    cameras_in_base: Mapping[str, npt.NDArray[np.float64]],
    frames: tuple[str, str],
) -> list[TransformStamped]:
    """``odom -> base`` and ``base -> <optical frame>`` for every camera.

    Args:
        stamp: simulation time (s).
        base_in_odom: 4x4 pose of the base.
        cameras_in_base: 4x4 pose of each optical frame (keyed by its frame id) in the base.
        frames: (odom frame, base frame).
    """
    odom, base = frames
    out = [matrix_to_transform(base_in_odom, odom, base, stamp)]
    out.extend(matrix_to_transform(p, base, f, stamp) for f, p in cameras_in_base.items())
    return out
