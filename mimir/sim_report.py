"""What the simulation job reports, shared by the job and its ROS client."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol


class SimJobError(RuntimeError):
    """The simulation job could not start or a node died.

    ``hint`` says what the user can do about it; ``mimir sim`` prints it after the message.
    """

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class InstructionReport:
    """Outcome of one instruction.

    ``family`` and ``criteria`` are the judge's: the instruction's task family and each
    criterion with whether it held and why.
    """

    index: int
    instruction: str
    success: bool = False
    judged_progress: float = 0.0
    planner_progress: float = 0.0
    steps: int = 0
    answer: str = ""
    error: str = ""
    primitives: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    family: str = ""
    criteria: list[dict[str, Any]] = field(default_factory=list)



def judge_details(details_json: str) -> tuple[str, list[dict[str, Any]]]:
    """The task family and the criteria of a judge's ``details_json``.

    Raises:
        SimJobError: The details are not a JSON object with a string ``family`` and a list of
            criterion objects (the bridge answered something this job cannot read).
    """
    try:
        details = json.loads(details_json)
    except json.JSONDecodeError as err:
        raise SimJobError(f"the judge's details are not JSON: {err}") from err
    if not isinstance(details, dict):
        raise SimJobError(f"the judge's details are not an object: {details_json[:80]!r}")
    family = details.get("family", "")
    criteria = details.get("criteria", [])
    if not isinstance(family, str) or not isinstance(criteria, list) or not all(
            isinstance(c, dict) for c in criteria):
        raise SimJobError("the judge's details carry no readable family and criteria: "
                          f"{details_json[:120]!r}")
    return family, criteria


#: Memory event kinds the run's trace shows, one line each (perception fusion is too chatty).
SHOWN_KINDS = frozenset({"property_set", "contents_set", "task_outcome_recorded",
                         "parent_changed"})


def memory_record(msg: Any) -> tuple[str, dict[str, Any]] | None:
    """The trace line and data of a ``mimir_msgs/MemoryEvent`` (None for kinds not shown)."""
    if msg.kind not in SHOWN_KINDS:
        return None
    try:
        payload = json.loads(msg.payload_json or "{}")
    except json.JSONDecodeError:
        payload = {}
    detail = ""
    if msg.kind == "property_set":
        detail = f"{payload.get('name')} = {json.dumps(payload.get('value'))}"
    elif msg.kind == "contents_set":
        names = [c.get("name") for c in payload.get("contents", []) if isinstance(c, dict)]
        detail = "contents = " + (", ".join(map(str, names)) or "empty")
    elif msg.kind == "task_outcome_recorded":
        detail = (f"{payload.get('task')}: "
                  f"{'success' if payload.get('success') else 'failure'}"
                  + (f" ({payload['failure_reason']})" if payload.get("failure_reason")
                     else ""))
    elif msg.kind == "parent_changed":
        detail = f"parent = {payload.get('parent_id')}"
    reason = f" — {msg.verdict_reason}" if msg.verdict_reason else ""
    return (f"      memory [{msg.verdict}] {msg.subject_id}: {detail}{reason}",
            {"event_id": msg.event_id, "verdict": msg.verdict, "event_kind": msg.kind,
             "subject": msg.subject_id, "payload": payload, "reason": msg.verdict_reason,
             "interactions": [r.id for r in msg.evidence if r.kind == "interaction"]})


def primitive_record(msg: Any) -> tuple[str, str, dict[str, Any]]:
    """``primitive(target)``, the trace line and data of an ENDED ``InteractionEvent``."""
    outcome = "ok" if msg.success else "FAILED"
    text = f"{msg.primitive}({msg.target_id})"
    return (text, f"    -> {text}: {outcome} [{msg.outcome}] {msg.message}".rstrip(),
            {"interaction_id": msg.interaction_id, "primitive": msg.primitive,
             "target": msg.target_id, "success": msg.success, "outcome": msg.outcome})


def step_line(step: int, status: str, plan: list[tuple[str, str]], grounding: list[str],
              retrieved: int) -> str:
    """The trace line of one planner call: its status, plan, first candidates, keyframes."""
    shown = ", ".join(f"{primitive}({target})" for primitive, target in plan) or "(empty plan)"
    return (f"  step {step} [{status}]: plan {shown}"
            + (f"; candidates {', '.join(grounding[:3])}" if grounding else "")
            + (f"; {retrieved} keyframes retrieved" if retrieved else ""))


def result_line(progress: float, steps: int, *, answer: str, named: str, error: str, goals: str,
                judged: bool, details_json: str) -> str:
    """The trace line of a finished instruction: the planner's account, then the judge's."""
    return (f"  planner: progress {progress:.0%} in {steps} steps"
            + (f", answer: {answer}" if answer else "")
            + (f", names: {named}" if named else "")
            + (f", error: {error}" if error else "")
            + (f" ({goals})" if goals else "")
            + f"\n  judged from simulator state: {'DONE' if judged else 'NOT DONE'}"
            f" {details_json}")


class TraceSink(Protocol):
    """Where a job reports (the job's Trace)."""

    def record(self, kind: str, text: str, **data: Any) -> None:
        """Print and log one record."""


def close_report(report: InstructionReport, trace: TraceSink, *, judged: bool,
                 judged_progress: float, details_json: str, named: str, goals: str,
                 primitives: list[str], started: float) -> None:
    """Write the judge's verdict and the instruction's primitives and wall time (from the
    monotonic ``started``) into ``report``, whose planner fields are filled, and record the
    result line. ``named``: what the answer named; ``goals``: the goals with their status."""
    report.success = judged
    report.judged_progress = judged_progress
    report.family, report.criteria = judge_details(details_json)
    report.primitives = primitives
    report.wall_s = time.monotonic() - started
    trace.record(
        "result", result_line(
            report.planner_progress, report.steps, answer=report.answer, named=named,
            error=report.error, goals=goals, judged=judged, details_json=details_json),
        instruction=report.index, planner_progress=report.planner_progress, steps=report.steps,
        answer=report.answer, judged=judged, details=details_json)
