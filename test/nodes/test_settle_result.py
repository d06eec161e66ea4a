"""settle_result: one step's outcome from its execute_primitive result, for the planner node and
the in-process run alike (refusals, unanalysed primitives, the analyzer's verdict)."""

from __future__ import annotations

from typing import Any

import pytest

from mimir.nodes.planner.primitive_messages import settle_result
from mimir.ros.time import from_seconds
from mimir_memory.task import Feedback
from mimir_msgs.action import ExecutePrimitive
from mimir_planner.outcomes import Verification
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import ExecutionOutcome

OPEN = ExecutableStep("open", "open", "cabinet_1", "sim_tidybot")
ANALYSED = ("open", "pick")


def _result(*, iid: str = "abc", success: bool = True, outcome: str = "OPENED",
            error_code: int = 0, error_msg: str = "", end: float = 12.5) -> Any:
    result = ExecutePrimitive.Result()
    result.interaction_id = iid
    result.success = success
    result.outcome = outcome
    result.error_code = error_code
    result.error_msg = error_msg
    result.window_end = from_seconds(end)
    return result


def _settle(result: Any, verdict: Verification | None = None, *, analysed: tuple[str, ...]
            = ANALYSED, require: bool = True) -> tuple[dict[str, Any], list[int]]:
    made: dict[str, Any] = {}
    asked: list[int] = []

    def make(success: bool, detail: str, stamp: float | None, *, code: str,
             reported: bool | None) -> ExecutionOutcome:
        made.update(success=success, detail=detail, stamp=stamp, code=code, reported=reported)
        return ExecutionOutcome(Feedback(success, ()), detail, stamp, None, code=code,
                                reported=reported)

    def ask() -> Verification:
        asked.append(1)
        assert verdict is not None, "the analyzer was asked where it should not be"
        return verdict

    out = settle_result(OPEN, result, make, analysed=analysed, verdict=ask,
                        require_verification=require)
    assert out.feedback.success == made["success"]
    return made, asked


def test_a_refusal_fails_with_its_code_and_no_stamp_or_verdict() -> None:
    made, asked = _settle(_result(iid="", success=False, outcome="", error_code=4,
                                  error_msg="out of reach", end=0.0))
    assert made == {"success": False, "detail": "refused (UNREACHABLE): out of reach",
                    "stamp": None, "code": "UNREACHABLE", "reported": None}
    assert not asked


def test_an_unknown_refusal_code_is_named_by_its_number() -> None:
    made, _ = _settle(_result(iid="", success=False, error_code=42, end=0.0))
    assert made["code"] == "42"


def test_a_primitive_the_analyzer_does_not_read_keeps_the_executors_word() -> None:
    made, asked = _settle(_result(success=False, outcome="", error_msg="stalled"),
                          analysed=("pick",))
    assert made == {"success": False, "detail": "FAILED: stalled", "stamp": 12.5,
                    "code": "FAILED", "reported": False}
    assert not asked


@pytest.mark.parametrize(("said", "verdict", "require", "success", "detail"), [
    (True, Verification(True, True), True, True, "OPENED; verified by the analyzer"),
    (True, Verification(True, False, "the door did not move"), True, False,
     "OPENED; the analyzer found it failed: the door did not move"),
    (True, Verification(False, reason="no frames"), True, False,
     "OPENED; not verified: no frames"),
    (True, Verification(False, reason="no frames"), False, True,
     "OPENED; not verified: no frames"),
    (False, Verification(True, False, "locked"), True, False, "OPENED; analyzer: locked"),
])
def test_an_analysed_primitive_is_judged_against_the_verdict(
        said: bool, verdict: Verification, require: bool, success: bool, detail: str) -> None:
    made, asked = _settle(_result(success=said), verdict, require=require)
    assert (made["success"], made["detail"], made["reported"]) == (success, detail, said)
    assert made["stamp"] == pytest.approx(12.5) and asked == [1]
