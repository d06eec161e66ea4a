"""The ``run_task`` action (mimir_msgs/RunTask): one instruction at a time, through the core loop.

:class:`RunTaskServer` accepts one goal at a time (a goal that arrives while a task runs is
rejected), waits for a first perception when world memory is empty, hands the instruction to
:meth:`~mimir_planner.planner.PlannerSession.run_instruction` and turns its report into the
result. What it plugs into the loop (:class:`TaskHooks`) is ROS-facing only: the client's cancel
request, the planner camera's view and one feedback message per planner call. A cancel also
denies every primitive waiting at the operator gate, so a waiting task ends at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node

from mimir.nodes.planner.planner_messages import (
    candidate_msgs,
    error_result,
    plan_step_msgs,
    retrieved_msgs,
    task_result,
)
from mimir.ros.diagnostics import NodeCounters
from mimir.ros.floatfix import coerce_floats, coerced
from mimir_msgs.action import RunTask
from mimir_msgs.msg import Candidate as CandidateMsg
from mimir_msgs.msg import PlanStep, RetrievedKeyframe
from mimir_planner.hosting import RecordingPolicy, TrackedGate, wait_for_first_nodes
from mimir_planner.memory_readers import MemoryUnavailableError
from mimir_planner.planner import PlannerSession
from mimir_planner.runs import Executor, Observation, RunHooks, StepRecord
from mimir_planner.trace import PlannerTrace


@dataclass(frozen=True)
class TaskSettings:
    """How run_task serves instructions (from the node's parameters).

    Attributes:
        step_budget: Planner calls per instruction when the goal gives none.
        memory_wait_s: Longest wait for a first perception of an empty memory (s).
        memory_settle_s: Memory counts as filled once no node has appeared for this long (s).
    """

    step_budget: int
    memory_wait_s: float
    memory_settle_s: float


Session = tuple[PlannerSession, RecordingPolicy, Executor]
"""The planning session, the policy recorder inside it and the executor it acts through."""


class TaskHooks(RunHooks):
    """What the server plugs into the core loop for one run_task goal."""

    def __init__(self, server: RunTaskServer, session: PlannerSession,
                 recorder: RecordingPolicy) -> None:
        self.server = server
        self.session = session
        self.recorder = recorder
        self.started: float | None = None
        self.seen: Observation | None = None
        """The view the session last planned on (its image carries the Set-of-Mark overlay)."""

    def cancelled(self) -> bool:
        return self.server.cancel_requested()

    def observation(self) -> Observation | None:
        self.seen = self.server.observe()
        return self.seen

    def before_step(self, call: int) -> None:
        self.recorder.reset()
        self.server.step = call
        self.started = self.server.now()

    def after_step(self, record: StepRecord) -> None:
        ctx = self.recorder.context
        plan, grounding, retrieved, status = call_messages(self.session, self.recorder, record)
        self.server.feedback(status, plan, grounding, retrieved)
        if ctx is not None and ctx.image is not None and ctx.marks and self.server.show:
            self.server.show(ctx.image, self.seen.stamp if self.seen is not None else 0.0)
        self.server.trace_step(step_trace(
            self.server.instruction, record, plan, grounding, retrieved,
            start=self.started, end=self.server.now(),
            retrieval_s=ctx.retrieval_s if ctx is not None else None))


def call_messages(session: PlannerSession, recorder: RecordingPolicy, record: StepRecord
                  ) -> tuple[list[PlanStep], list[CandidateMsg], list[RetrievedKeyframe], str]:
    """What one planner call planned, grounded and retrieved, as messages, and its status
    line (the outcome, the step and its detail)."""
    ctx = recorder.context
    plan = plan_step_msgs(recorder.answer(), session.registry.adapter.canonical)
    grounding = candidate_msgs(ctx.grounding if ctx is not None else None)
    retrieved = retrieved_msgs(ctx.retrieved, session.keyframes) if ctx is not None else []
    what = f" {record.step.describe()}" if record.step is not None else ""
    status = f"{record.outcome}{what}: {record.detail}".strip().rstrip(":")
    return plan, grounding, retrieved, status


def step_trace(instruction: str, record: StepRecord, plan: list[PlanStep],
               grounding: list[CandidateMsg], retrieved: list[RetrievedKeyframe], *,
               start: float | None, end: float, retrieval_s: float | None) -> dict[str, object]:
    """The planner trace's record of one planner call (``memory/planner_trace.jsonl``)."""
    return {
        "instruction": instruction, "call": record.call,
        "goal_id": record.goal_id, "outcome": record.outcome,
        "primitive": record.step.primitive if record.step is not None else "",
        "target": record.step.target if record.step is not None else "",
        "success": record.success, "detail": record.detail,
        "start": start, "end": end,
        "plan": [{"primitive": p.primitive, "target": p.target_id,
                  "reasoning": p.reasoning} for p in plan],
        "candidates": [{"node_id": c.node_id, "score": c.score,
                        "evidence": list(c.evidence)} for c in grounding],
        "retrieved": [{"frame_id": r.keyframe.keyframe_id, "reason": r.reason,
                       "pool": r.pool_source} for r in retrieved],
        "retrieval_s": retrieval_s,
    }


class RunTaskServer:
    """Serves ``run_task``.

    Args:
        node: Node that owns the action server and logs.
        settings: Budget and memory-wait settings.
        session: Returns the session triple, creating it on first use (raises
            :class:`~mimir_planner.memory_readers.MemoryUnavailableError` while world memory
            cannot be read).
        gate: The operator gate (denied at once on cancel).
        counters: Diagnostics counters.
        observe: The planner camera's current view.
        group: Callback group of the action server.
        trace: Where each planner call is recorded (the memory folder's planner trace).
        show: Given the image of each planner call with its Set-of-Mark overlay and its stamp
            (the node publishes it).
    """

    def __init__(self, node: Node, settings: TaskSettings, *, session: Callable[[], Session],
                 gate: TrackedGate, counters: NodeCounters,
                 observe: Callable[[], Observation | None], group: CallbackGroup,
                 trace: PlannerTrace | None = None,
                 show: Callable[[np.ndarray, float], None] | None = None) -> None:
        self._node = node
        self._trace = trace
        self.show = show
        self.settings = settings
        self._session = session
        self._gate = gate
        self._counters = counters
        self.observe = observe
        self.instruction = ""
        self.step = 0
        self._busy = False
        self._busy_lock = threading.Lock()
        self._handle: ServerGoalHandle | None = None
        self._cancel_flag = threading.Event()
        self._action = ActionServer(
            node, RunTask, "run_task", execute_callback=coerced(self._execute),
            goal_callback=self._on_goal, cancel_callback=self._on_cancel, callback_group=group)

    def _on_goal(self, goal: RunTask.Goal) -> GoalResponse:
        with self._busy_lock:
            if self._busy:
                self._node.get_logger().warning(
                    f"rejecting instruction {goal.instruction!r}: a task is running")
                self._counters.add("rejected_busy")
                return GoalResponse.REJECT
            self._busy = True
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle: ServerGoalHandle) -> CancelResponse:
        # flag first: the denial below wakes the task loop before the goal state changes
        self._cancel_flag.set()
        denied = self._gate.deny_all("the task was canceled")
        self._node.get_logger().info(f"cancel requested; {denied} waiting primitive(s) denied")
        return CancelResponse.ACCEPT

    def cancel_requested(self) -> bool:
        """Whether the running task's client asked to cancel it."""
        handle = self._handle
        return self._cancel_flag.is_set() or bool(
            handle is not None and handle.is_cancel_requested)

    @staticmethod
    def _wait_canceling(goal_handle: ServerGoalHandle, timeout_s: float = 2.0) -> bool:
        """Wait until the accepted cancel has moved the goal to CANCELING (bounded)."""
        deadline = time.monotonic() + timeout_s
        while not goal_handle.is_cancel_requested:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def now(self) -> float:
        """The node's clock (simulated time under use_sim_time), as memory stamps events."""
        return self._node.get_clock().now().nanoseconds * 1e-9

    def trace_step(self, record: dict[str, object]) -> None:
        """Append one planner call to the trace (counted when it cannot be written)."""
        if self._trace is not None and not self._trace.append(record):
            self._counters.add("trace_unwritten")

    def feedback(self, status: str, plan: list[PlanStep] | None = None,
                 grounding: list[CandidateMsg] | None = None,
                 retrieved: list[RetrievedKeyframe] | None = None) -> None:
        """Publish one feedback message for the current planner step (none without a task)."""
        handle = self._handle
        if handle is None:
            return
        handle.publish_feedback(coerce_floats(RunTask.Feedback(
            step=self.step, plan=plan or [], grounding=grounding or [],
            retrieved=retrieved or [], status=status)))

    def _execute(self, goal_handle: ServerGoalHandle) -> RunTask.Result:
        self._handle = goal_handle
        self._cancel_flag.clear()
        try:
            result = self._run(goal_handle)
        finally:
            self._handle = None
            self.instruction = ""
            with self._busy_lock:
                self._busy = False
        if result.error_code == RunTask.Result.CANCELED and self._wait_canceling(goal_handle):
            goal_handle.canceled()
        elif result.error_code == RunTask.Result.NONE:
            goal_handle.succeed()
        else:
            goal_handle.abort()
        self._node.get_logger().info(
            f"task done: progress {result.progress:.0%} in {result.steps} steps, error "
            f"{result.error_code} {result.error_msg}".rstrip())
        return result

    def _run(self, goal_handle: ServerGoalHandle) -> RunTask.Result:
        request = goal_handle.request
        budget = int(request.step_budget) or self.settings.step_budget
        self.step = 0
        try:
            session, recorder, executor = self._session()
        except MemoryUnavailableError as err:
            self._counters.add("memory_unavailable")
            return error_result(RunTask.Result.BLOCKED, str(err))
        session.world.refresh()
        log = self._node.get_logger()
        if not wait_for_first_nodes(session.world, wait_s=self.settings.memory_wait_s,
                                    settle_s=self.settings.memory_settle_s,
                                    cancelled=self.cancel_requested):
            log.warning(f"world memory still holds no scene graph node after "
                        f"{self.settings.memory_wait_s:g} s; planning on an empty memory")
        self.instruction = str(request.instruction)
        report = session.run_instruction(self.instruction, executor, budget=budget,
                                         hooks=TaskHooks(self, session, recorder))
        if report.superseded:
            log.warning(f"blocked goals left pending earlier: {list(report.superseded)}")
        if report.run is None:
            self._counters.add("parse_failed")
        return task_result(report)
