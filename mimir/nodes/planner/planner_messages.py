"""Messages of the planner node: plans, candidates, keyframes, answers and task results.

Each function turns a core value into its ``mimir_msgs`` message; nothing here decides anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from geometry_msgs.msg import Point

from mimir.nodes.memory.keyframe_messages import keyframe_to_msg
from mimir_memory.errors import MemoryStoreError
from mimir_memory.keyframes import KeyframeStore
from mimir_msgs.action import RunTask
from mimir_msgs.msg import (
    AnswerEntity,
    KeyframeMetadata,
    PlanStep,
    RetrievedKeyframe,
)
from mimir_msgs.msg import Candidate as CandidateMsg
from mimir_msgs.msg import GoalStatus as GoalStatusMsg
from mimir_planner.answers import NamedEntity
from mimir_planner.grounding import Exploration, GroundedGoal, GroundingResult
from mimir_planner.plan_schema import PlanAnswer
from mimir_planner.recall import Candidate
from mimir_planner.retrieval import RetrievedFrame
from mimir_planner.runs import InstructionReport, RunStop

_POOL_SOURCES = {"node": "linked_node", "label": "label_match", "recent": "recent_interaction"}

RESULT_CODES: dict[RunStop, int] = {
    RunStop.NONE: RunTask.Result.NONE,
    RunStop.PARSE_FAILED: RunTask.Result.PARSE_FAILED,
    RunStop.BUDGET_EXHAUSTED: RunTask.Result.BUDGET_EXHAUSTED,
    RunStop.MODEL_ERROR: RunTask.Result.MODEL_ERROR,
    RunStop.CANCELED: RunTask.Result.CANCELED,
    RunStop.BLOCKED: RunTask.Result.BLOCKED,
    RunStop.DENIED: RunTask.Result.BLOCKED,
    RunStop.EXECUTOR_UNAVAILABLE: RunTask.Result.BLOCKED,
    RunStop.FAILED: RunTask.Result.BLOCKED,
}
"""RunTask error code of each way an instruction ends (the message says which for BLOCKED)."""


def answer_entity_msg(entity: NamedEntity) -> AnswerEntity:
    """The message of something an answer names."""
    msg = AnswerEntity(node_id=entity.node_id, label=entity.label)
    if entity.position is not None:
        msg.position = Point(x=float(entity.position[0]), y=float(entity.position[1]),
                             z=float(entity.position[2]))
        msg.has_position = True
    return msg


def plan_step_msgs(answer: PlanAnswer | None,
                   canonical: Callable[[str], str | None] | None = None) -> list[PlanStep]:
    """The plan of an answer as PlanStep messages (abstract primitive names when known)."""
    if answer is None:
        return []
    out = []
    for step in answer.plan:
        name = canonical(step.action) if canonical is not None else None
        out.append(PlanStep(
            primitive=name or str(step.action),
            target_id=step.target_object or "",
            pointing_description=step.pointing_description or "",
            grounded_by_keyframe=int(step.grounded_by_keyframe_idx or 0),
            reasoning=step.reasoning,
        ))
    return out


def recall_candidate_msgs(candidates: Sequence[Candidate]) -> list[CandidateMsg]:
    """Recall candidates as Candidate messages."""
    return [CandidateMsg(node_id=c.node_id, score=float(c.score),
                         evidence=[e.detail for e in c.evidence])
            for c in candidates]


def candidate_msgs(grounding: GroundingResult | None) -> list[CandidateMsg]:
    """Grounding candidates (or the exploration order) as Candidate messages."""
    if isinstance(grounding, GroundedGoal):
        return recall_candidate_msgs(grounding.candidates)
    if isinstance(grounding, Exploration):
        return [CandidateMsg(node_id=f, score=0.0,
                             evidence=[f"explore: {grounding.reason}" if f == grounding.fixture
                                       else "exploration order"])
                for f in grounding.order]
    return []


def retrieved_msgs(frames: Sequence[RetrievedFrame],
                   store: KeyframeStore | None) -> list[RetrievedKeyframe]:
    """Retrieved frames as messages; score falls with the rank (first = 1)."""
    out = []
    count = len(frames)
    for rank, frame in enumerate(frames):
        metadata: KeyframeMetadata | None = None
        if store is not None:
            try:
                metadata = keyframe_to_msg(store.get(frame.frame_id), store.root)
            except MemoryStoreError:
                metadata = None
        if metadata is None:
            entry = frame.entry
            metadata = KeyframeMetadata(keyframe_id=frame.frame_id, camera=entry.camera,
                                        action=entry.action or "",
                                        linked_nodes=list(entry.node_ids),
                                        caption=entry.caption)
        source = next((s for s in frame.entry.sources if s in _POOL_SOURCES), "")
        out.append(RetrievedKeyframe(keyframe=metadata, pool_source=_POOL_SOURCES.get(source, ""),
                                     reason=frame.reason, score=float(count - rank) / count))
    return out


def error_result(code: int, message: str) -> RunTask.Result:
    """A RunTask result for a task that never reached planning."""
    return RunTask.Result(error_code=code, error_msg=message, steps=0, progress=0.0)


def task_result(report: InstructionReport) -> RunTask.Result:
    """The RunTask result of an instruction: progress, steps, answers, goal statuses, error."""
    return RunTask.Result(
        progress=float(report.progress),
        steps=report.calls,
        answer="; ".join(report.answers()),
        answer_entities=[answer_entity_msg(e) for e in report.entities()],
        goals=[GoalStatusMsg(goal_id=g.goal_id, description=g.description,
                             status=g.status.value, reason=g.reason) for g in report.goals],
        error_code=RESULT_CODES[report.stop],
        error_msg=report.reason,
    )
