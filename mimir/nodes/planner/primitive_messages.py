"""Messages of one primitive: the ExecutePrimitive goal, the ENDED interaction event, codes.

:func:`primitive_goal` builds the ``execute_primitive`` goal for a validated step,
:func:`ended_event_from_result` rebuilds the ENDED ``interaction_events`` message from a goal and
its result when the event itself was missed, and :class:`InteractionEventBuffer` keeps the ENDED
events the planner node receives until the executor asks for them.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from typing import Any, Protocol

from diagnostic_msgs.msg import KeyValue
from geometry_msgs.msg import PoseStamped

from mimir.ros.time import from_seconds, to_seconds
from mimir_memory.graph import SceneGraphState
from mimir_msgs.action import ExecutePrimitive
from mimir_msgs.msg import InteractionEvent
from mimir_planner.outcomes import Verification, judge
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import ExecutionOutcome

_RESULT_NAMES = ("NONE", "UNKNOWN_PRIMITIVE", "UNKNOWN_TARGET", "PRECONDITION_FAILED",
                 "UNREACHABLE", "EXECUTION_FAILED", "DENIED_BY_OPERATOR", "CANCELED")
_ANALYSIS_NAMES = ("NONE", "UNKNOWN_TARGET", "NO_FRAMES", "MODEL_ERROR", "INVALID_ANSWER",
                   "MEMORY_WRITE_FAILED")


class OutcomeMaker(Protocol):
    """Builds a step's outcome: its success, what happened, the stamp it ended at (None when
    it never ran), the executor's code and its own word on success (None when it gave none)."""

    def __call__(self, success: bool, detail: str, stamp: float | None, *, code: str,
                 reported: bool | None) -> ExecutionOutcome:
        """The outcome."""


def settle_result(step: ExecutableStep, result: Any, make: OutcomeMaker, *,
                  analysed: Collection[str], verdict: Callable[[], Verification],
                  require_verification: bool) -> ExecutionOutcome:
    """The outcome of one step from its ``execute_primitive`` result: a refusal (no
    interaction was opened) fails with the refusal's code; a primitive the analyzer does not
    read keeps the executor's word; any other is judged against ``verdict()``, the analyzer's
    reading of the interaction. One rule for the planner node and the in-process run."""
    end = to_seconds(result.window_end)
    when = end if end > 0.0 else None
    if not result.interaction_id:
        code = result_code_name(int(result.error_code))
        return make(False, f"refused ({code}): {result.error_msg}", when, code=code,
                    reported=None)
    code = str(result.outcome or ("SUCCEEDED" if result.success else "FAILED"))
    said = bool(result.success)
    reported = code + (f": {result.error_msg}" if result.error_msg else "")
    if step.primitive not in analysed:
        return make(said, reported, when, code=code, reported=said)
    success, detail = judge(said, reported, verdict(), require_verification=require_verification)
    return make(success, detail, when, code=code, reported=said)


def result_code_name(code: int) -> str:
    """Name of an ExecutePrimitive result code (the number as text when unknown)."""
    return _RESULT_NAMES[code] if 0 <= code < len(_RESULT_NAMES) else str(code)


def analysis_code_name(code: int) -> str:
    """Name of an AnalyzeInteraction error code (the number as text when unknown)."""
    return _ANALYSIS_NAMES[code] if 0 <= code < len(_ANALYSIS_NAMES) else str(code)


class InteractionEventBuffer:
    """ENDED interaction events by interaction id (bounded, oldest dropped first)."""

    def __init__(self, capacity: int = 256) -> None:
        self._events: OrderedDict[str, InteractionEvent] = OrderedDict()
        self._capacity = capacity
        self._cond = threading.Condition()

    def add(self, msg: InteractionEvent) -> bool:
        """Keep an ENDED event; returns False for events that are not kept."""
        if msg.phase != InteractionEvent.PHASE_ENDED or not msg.interaction_id:
            return False
        with self._cond:
            self._events[msg.interaction_id] = msg
            self._events.move_to_end(msg.interaction_id)
            while len(self._events) > self._capacity:
                self._events.popitem(last=False)
            self._cond.notify_all()
        return True

    def wait(self, interaction_id: str, timeout_s: float) -> InteractionEvent | None:
        """The ENDED event of ``interaction_id``, waiting up to ``timeout_s``; None if absent."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while interaction_id not in self._events:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._cond.wait(remaining)
            return self._events[interaction_id]


def _param(key: str, value: object) -> KeyValue:
    return KeyValue(key=key, value=str(value))


def primitive_goal(
    step: ExecutableStep,
    world: SceneGraphState,
    *,
    holding: str | None,
    task: str,
    map_frame: str,
    stamp: float,
) -> ExecutePrimitive.Goal:
    """The ExecutePrimitive goal for a validated step.

    The goal names the abstract primitive (the executor maps it to its own controllers; the
    embodiment's legal action travels as the ``legal_action`` parameter), the target id, its
    remembered centroid in ``map_frame`` and its label. A place also names the destination
    (the step's target) and the held object.

    Raises:
        ValueError: The target is not in the scene graph (the step was validated against an
            older graph) or has a non-finite position.
    """
    node = world.nodes.get(step.target)
    if node is None:
        raise ValueError(f"target '{step.target}' is no longer in the scene graph")
    x, y, z = (float(v) for v in node.centroid)
    if not all(math.isfinite(v) for v in (x, y, z)):
        raise ValueError(f"target '{step.target}' has a non-finite position")
    goal = ExecutePrimitive.Goal(
        primitive=step.primitive,
        target_id=step.target,
        use_target_pose=True,
        pointing_description=step.pointing_description or "",
        task=task,
    )
    pose = PoseStamped()
    pose.header.frame_id = map_frame
    pose.header.stamp = from_seconds(max(0.0, stamp))
    pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = x, y, z
    pose.pose.orientation.w = 1.0
    goal.target_pose = pose
    params = [_param("label", node.label), _param("legal_action", step.action)]
    if step.embodiment:
        params.append(_param("embodiment", step.embodiment))
    if step.goal_id:
        params.append(_param("goal_id", step.goal_id))
    if step.primitive == "place":
        params += [
            _param("destination_id", step.target),
            _param("destination_label", node.label),
            _param("destination_x", repr(x)),
            _param("destination_y", repr(y)),
            _param("destination_z", repr(z)),
        ]
        held = world.nodes.get(holding or "")
        if held is not None:
            params += [_param("object_id", held.node_id), _param("object_label", held.label)]
    goal.parameters = params
    return goal


def ended_event_from_result(
    goal: ExecutePrimitive.Goal, result: ExecutePrimitive.Result, stamp: float
) -> InteractionEvent:
    """An ENDED interaction event rebuilt from a goal and its result (when the event was missed)."""
    event = InteractionEvent(
        interaction_id=result.interaction_id,
        phase=InteractionEvent.PHASE_ENDED,
        primitive=goal.primitive,
        target_id=goal.target_id,
        task=goal.task,
        window_start=result.window_start,
        window_end=result.window_end,
        success=bool(result.success),
        outcome=result.outcome,
        message=result.error_msg,
    )
    event.header.frame_id = goal.target_pose.header.frame_id
    event.header.stamp = result.window_end if to_seconds(result.window_end) > 0 else \
        from_seconds(max(0.0, stamp))
    if goal.use_target_pose:
        event.target_pose = goal.target_pose.pose
    return event
