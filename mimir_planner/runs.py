"""What a planning run takes and gives: the host's executor and hooks, the step records, the
run and instruction reports, and why a run stopped.

:class:`mimir_planner.planner.PlannerSession` runs the loop these describe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

import numpy as np
import numpy.typing as npt

from mimir_memory.task import Feedback, GoalStatus
from mimir_perception.camera import Intrinsics
from mimir_planner.answers import NamedEntity
from mimir_planner.errors import PlannerError
from mimir_planner.instructions import ParsedInstruction
from mimir_planner.policies import HistoryEntry
from mimir_planner.primitives import ExecutableStep


@dataclass(frozen=True)
class Observation:
    """The current camera image with its calibration (for Set-of-Mark overlays).

    Attributes:
        rgb: (H, W, 3) uint8 RGB image.
        intrinsics: Its pinhole intrinsics.
        camera_to_map: 4x4 pose of the optical frame in the map at the image stamp.
        stamp: Image stamp (s).
    """

    rgb: npt.NDArray[np.uint8]
    intrinsics: Intrinsics | None = None
    camera_to_map: npt.NDArray[np.float64] | None = None
    stamp: float = 0.0


@dataclass(frozen=True)
class ExecutionOutcome:
    """What executing a step returned: y_t plus an optional new observation.

    Attributes:
        feedback: Verified success and supported effects (what memory may rely on).
        detail: Outcome text for the history.
        stamp: When the outcome was observed (s).
        observation: A new camera observation, if any.
        code: The executor's outcome code (``OPENED``, ``MISSED_GRASP``, ``NO_MOTION``...),
            empty when unknown.
        reported: The executor's own success report before verification (None when unknown).
            ``reported`` True with a failed ``feedback`` means the step was done as far as
            the executor knows but the analyzer could not confirm it.
    """

    feedback: Feedback
    detail: str = ""
    stamp: float | None = None
    observation: Observation | None = None
    code: str = ""
    reported: bool | None = None


_CODE = re.compile(r"\s*([A-Z][A-Z0-9_]{2,})\b")
CLOSED_CODES = frozenset({"FIXTURE_CLOSED", "CLOSED"})


def failure_kind(entry: HistoryEntry) -> str:
    """How an executed step failed: ``UNVERIFIED``, the outcome code, or ``FAILED``."""
    if entry.unverified:
        return "UNVERIFIED"
    if entry.code:
        return entry.code.strip().upper()
    match = _CODE.match(entry.detail)
    return match.group(1) if match else "FAILED"


class Executor(Protocol):
    """Runs one legal action (the node plugs in the ExecutePrimitive action client)."""

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        """Execute ``step`` and report its outcome and supported effects.

        Raises:
            ExecutorUnavailableError: The robot cannot be reached; nothing was executed.
        """
        ...


class ExecutorUnavailableError(PlannerError):
    """The executor cannot reach the robot (no action server, no answer); nothing was executed.

    The run cannot go on without a robot, so :meth:`PlannerSession.run` stops on it.
    """


class RunStop(StrEnum):
    """Why a run (or an instruction) ended.

    ``NONE``: no goal is pending any more. ``CANCELED``: the host asked to stop.
    ``BUDGET_EXHAUSTED``: the planner-call budget ran out with a goal still active.
    ``MODEL_ERROR``: the planner model failed. ``EXECUTOR_UNAVAILABLE``: the robot could not
    be reached. ``DENIED``: the operator gate refused a primitive (or timed out).
    ``FAILED``: another planner or memory error. Only instructions end with ``PARSE_FAILED``
    (the text is not usable) or ``BLOCKED`` (the run ended normally but some goal of the
    instruction could not be achieved).
    """

    NONE = "none"
    CANCELED = "canceled"
    BUDGET_EXHAUSTED = "budget_exhausted"
    MODEL_ERROR = "model_error"
    EXECUTOR_UNAVAILABLE = "executor_unavailable"
    DENIED = "denied"
    FAILED = "failed"
    PARSE_FAILED = "parse_failed"
    BLOCKED = "blocked"


@dataclass(frozen=True)
class SubmitResult:
    """Goals created for an instruction."""

    instruction: ParsedInstruction
    goal_ids: tuple[str, ...]
    deferred: int


@dataclass(frozen=True)
class StepRecord:
    """What one planner call led to.

    Attributes:
        call: 1-based planner call number within the run.
        goal_id: Active goal.
        outcome: ``executed``, ``completed``, ``refused``, ``blocked``, ``denied``,
            ``rejected_finish`` (an empty plan memory does not support) or ``invalid_answer``.
        step: The executed (or denied) step.
        success: Execution success for executed steps.
        detail: Reason or answer.
    """

    call: int
    goal_id: str
    outcome: str
    step: ExecutableStep | None = None
    success: bool | None = None
    detail: str = ""


@dataclass
class RunReport:
    """Outcome of :meth:`PlannerSession.run`.

    Attributes:
        stop: Why the run ended (``RunStop.NONE`` when no goal was left pending).
        reason: Text of the stop (empty for ``RunStop.NONE``).
        error: The reason again when an error stopped the run (model, executor, memory).
    """

    calls: int = 0
    records: list[StepRecord] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    answer_entities: dict[str, tuple[NamedEntity, ...]] = field(default_factory=dict)
    budget_exhausted: bool = False
    error: str | None = None
    stop: RunStop = RunStop.NONE
    reason: str = ""

    def executed(self) -> list[ExecutableStep]:
        """Executed steps in order."""
        return [r.step for r in self.records if r.outcome == "executed" and r.step is not None]

    def stopped(self, stop: RunStop, reason: str, *, error: bool = False) -> None:
        """Record why the run ends."""
        self.stop, self.reason = stop, reason
        if error:
            self.error = reason


class RunHooks:
    """What a host plugs into :meth:`PlannerSession.run`; this base does nothing.

    The planner node subclasses it to check its action's cancel request, hand in the latest
    camera view and publish one feedback message per planner call.
    """

    def cancelled(self) -> bool:
        """Whether the run should stop (checked before and after every planner call)."""
        return False

    def observation(self) -> Observation | None:
        """The current camera view for the next planner call, or None to keep the last one."""
        return None

    def before_step(self, call: int) -> None:
        """Called with the 1-based number of the planner call about to run.

        The last call of a run that ends because no goal is left finds nothing to do: it is
        announced here but yields no record.
        """

    def after_step(self, record: StepRecord) -> None:
        """Called with what a planner call led to."""


@dataclass(frozen=True)
class GoalOutcome:
    """Where one goal of an instruction ended.

    Attributes:
        goal_id: The goal.
        description: Its text.
        status: Its status after the run.
        reason: Why it is blocked (or the status reason task memory keeps).
        answer: The literal answer of a completed goal, if it has one.
        entities: What the answer of a completed goal names.
    """

    goal_id: str
    description: str
    status: GoalStatus
    reason: str = ""
    answer: str | None = None
    entities: tuple[NamedEntity, ...] = ()


@dataclass(frozen=True)
class InstructionReport:
    """Outcome of :meth:`PlannerSession.run_instruction`.

    Attributes:
        stop: Why the instruction ended; ``RunStop.BLOCKED`` when the run ended normally but
            a goal of it is blocked, ``RunStop.NONE`` when every goal of it completed.
        reason: Text of the stop (the blocked goals' reasons for ``BLOCKED``).
        calls: Planner calls used.
        goals: The instruction's goals in agenda order.
        superseded: Goals of earlier instructions that were still pending and were blocked.
        run: The loop's own report (None when the instruction was not usable).
    """

    stop: RunStop
    reason: str = ""
    calls: int = 0
    goals: tuple[GoalOutcome, ...] = ()
    superseded: tuple[str, ...] = ()
    run: RunReport | None = None

    def completed(self) -> list[GoalOutcome]:
        """The goals that completed."""
        return [g for g in self.goals if g.status is GoalStatus.COMPLETED]

    @property
    def progress(self) -> float:
        """Share of the instruction's goals completed (0 without goals)."""
        return len(self.completed()) / len(self.goals) if self.goals else 0.0

    def answers(self) -> list[str]:
        """Literal answers of the completed goals."""
        return [g.answer for g in self.completed() if g.answer is not None]

    def entities(self) -> list[NamedEntity]:
        """What the completed goals' answers name."""
        return [e for g in self.completed() for e in g.entities]


