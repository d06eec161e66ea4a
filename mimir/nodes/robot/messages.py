"""Messages of the executor node: goals in, results, events and the robot contract's signals out.

Everything here converts; the decisions are in :mod:`mimir_robot`. Topic names, frames and units
are those of :mod:`mimir_robot.contract`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from geometry_msgs.msg import Pose, PoseStamped, TransformStamped
from nav_msgs.msg import Odometry
from scipy.spatial.transform import Rotation
from std_msgs.msg import Header

from mimir.ros.tf import matrix_to_transform
from mimir.ros.time import from_seconds
from mimir.transforms import planar_pose
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent
from mimir_robot.executor import Outcome
from mimir_robot.requests import PrimitiveRequest, RequestError, UnknownTargetError, build_request

#: Result codes of ``ExecutePrimitive`` by the executor's refusal and outcome codes.
_CODES = {
    "UNKNOWN_PRIMITIVE": ExecutePrimitive.Result.UNKNOWN_PRIMITIVE,
    "UNKNOWN_TARGET": ExecutePrimitive.Result.UNKNOWN_TARGET,
    "PRECONDITION_FAILED": ExecutePrimitive.Result.PRECONDITION_FAILED,
    "UNREACHABLE": ExecutePrimitive.Result.UNREACHABLE,
    "OUTSIDE_WORKSPACE": ExecutePrimitive.Result.UNREACHABLE,
    "CANCELED": ExecutePrimitive.Result.CANCELED,
    "DENIED_BY_OPERATOR": ExecutePrimitive.Result.DENIED_BY_OPERATOR,
}


def result_code(code: str) -> int:
    """The action result code of an executor code (EXECUTION_FAILED for every other failure)."""
    return int(_CODES.get(code, ExecutePrimitive.Result.EXECUTION_FAILED))


def header(stamp: float, frame: str) -> Header:
    return Header(stamp=from_seconds(max(0.0, stamp)), frame_id=frame)


def goal_to_request(goal: ExecutePrimitive.Goal, map_frame: str) -> PrimitiveRequest:
    """The request of an ExecutePrimitive goal; the target pose must be in the map frame.

    Raises:
        RequestError: malformed goal (its ``code`` names the result code).
    """
    params = {kv.key.strip(): kv.value for kv in goal.parameters}
    position: tuple[float, float, float] | None = None
    yaw: float | None = None
    if goal.use_target_pose:
        frame = goal.target_pose.header.frame_id
        if frame not in ("", map_frame):
            raise UnknownTargetError(f"target_pose must be in {map_frame!r}, got {frame!r}")
        p, q = goal.target_pose.pose.position, goal.target_pose.pose.orientation
        position = (float(p.x), float(p.y), float(p.z))
        quat = (float(q.x), float(q.y), float(q.z), float(q.w))
        if not all(math.isfinite(v) for v in quat) or np.linalg.norm(quat) < 1e-9:
            raise UnknownTargetError(f"target_pose orientation {quat} is not a rotation")
        yaw = float(Rotation.from_quat(quat).as_euler("xyz")[2])
    return build_request(goal.primitive, goal.target_id, position, yaw, params,
                         pointing=goal.pointing_description)


def refusal(err: RequestError | Exception, code: str | None = None) -> ExecutePrimitive.Result:
    """Result of a goal refused before the robot moved."""
    name = code or getattr(err, "code", "EXECUTION_FAILED")
    return ExecutePrimitive.Result(success=False, outcome="REFUSED",
                                   error_code=result_code(str(name)), error_msg=str(err))


def outcome_result(out: Outcome, interaction_id: str, start: float,
                   end: float) -> ExecutePrimitive.Result:
    """Result of a primitive the robot ran."""
    return ExecutePrimitive.Result(
        success=out.success, outcome=out.code, interaction_id=interaction_id,
        window_start=from_seconds(max(0.0, start)), window_end=from_seconds(max(0.0, end)),
        error_code=ExecutePrimitive.Result.NONE if out.success else result_code(out.code),
        error_msg="" if out.success else out.message)


def interaction_event(goal: ExecutePrimitive.Goal, interaction_id: str, start: float, *,
                      end: float | None = None, out: Outcome | None = None,
                      frame: str) -> InteractionEvent:
    """STARTED (``out`` None) or ENDED event of one primitive."""
    event = InteractionEvent(
        header=header(start if end is None else end, frame),
        interaction_id=interaction_id,
        phase=InteractionEvent.PHASE_STARTED if out is None else InteractionEvent.PHASE_ENDED,
        primitive=goal.primitive.strip().lower().replace(" ", "_").replace("-", "_"),
        target_id=goal.target_id,
        task=goal.task,
        window_start=from_seconds(max(0.0, start)),
    )
    if goal.use_target_pose:
        event.target_pose = goal.target_pose.pose
    if out is not None and end is not None:
        event.window_end = from_seconds(max(0.0, end))
        event.success = out.success
        event.outcome = out.code
        event.message = out.message
    return event


def _pose(position: Sequence[float], quat: Sequence[float]) -> Pose:
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in position[:3])
    (pose.orientation.x, pose.orientation.y, pose.orientation.z,
     pose.orientation.w) = (float(v) for v in quat[:4])
    return pose


def pose_stamped(stamp: float, frame: str, position: Sequence[float],
                 quat: Sequence[float]) -> PoseStamped:
    return PoseStamped(header=header(stamp, frame), pose=_pose(position, quat))


def base_quat(theta: float) -> tuple[float, float, float, float]:
    return (0.0, 0.0, math.sin(theta / 2.0), math.cos(theta / 2.0))


def odometry(stamp: float, frames: tuple[str, str], pose: tuple[float, float, float],
             velocity: tuple[float, float, float]) -> Odometry:
    """``nav_msgs/Odometry`` of the base: pose in odom, twist in base_link."""
    odom_frame, base_frame = frames
    x, y, th = pose
    msg = Odometry(header=header(stamp, odom_frame), child_frame_id=base_frame)
    msg.pose.pose = _pose((x, y, 0.0), base_quat(th))
    vx, vy, vth = velocity
    c, s = math.cos(th), math.sin(th)
    msg.twist.twist.linear.x = c * vx + s * vy
    msg.twist.twist.linear.y = -s * vx + c * vy
    msg.twist.twist.angular.z = vth
    return msg


def odom_transform(stamp: float, frames: tuple[str, str],
                   pose: tuple[float, float, float]) -> TransformStamped:
    """``odom -> base_link`` from base odometry."""
    return matrix_to_transform(planar_pose(*pose), frames[0], frames[1], max(0.0, stamp))
