"""Strict parsing of the planner answer (messymem.md B.3 schema).

``{"plan": [{"step", "action", "target_object", "pointing_description"?,
"grounded_by_keyframe_idx"?, "reasoning"}], "reasoning": [...], "warnings": [...]}``.
Parsing is all-or-nothing: a missing or extra field, a wrong type, steps out of order, or an id
that is not an id raises :class:`PlanAnswerError` naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mimir_planner.errors import PlanAnswerError
from mimir_planner.primitives import PlanStep
from mimir_planner.reasoning.answer_schema import extract_json
from mimir_planner.reasoning.errors import ReasoningError

MAX_STEPS = 32
MAX_TEXT = 2000
MAX_LIST = 32
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,127}$")
_ACTION = re.compile(r"^[A-Za-z][A-Za-z0-9_ \-]{0,63}$")


@dataclass(frozen=True)
class PlanAnswer:
    """A validated planner answer; only ``plan[0]`` is ever executed."""

    plan: tuple[PlanStep, ...]
    reasoning: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (round-trips through :func:`parse_plan_answer`)."""
        return {
            "plan": [s.to_dict() for s in self.plan],
            "reasoning": list(self.reasoning),
            "warnings": list(self.warnings),
        }


def _text(value: object, path: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise PlanAnswerError("expected a string", path)
    if len(value) > MAX_TEXT:
        raise PlanAnswerError("string too long", path)
    if nonempty and not value.strip():
        raise PlanAnswerError("expected a non-empty string", path)
    return value


def _texts(value: object, path: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise PlanAnswerError("expected a list of strings", path)
    if len(value) > MAX_LIST:
        raise PlanAnswerError(f"more than {MAX_LIST} entries", path)
    return tuple(_text(v, f"{path}[{i}]") for i, v in enumerate(value))


def _step(obj: object, path: str, number: int) -> PlanStep:
    if not isinstance(obj, dict):
        raise PlanAnswerError("expected an object", path)
    required = ("step", "action", "target_object", "reasoning")
    optional = ("pointing_description", "grounded_by_keyframe_idx")
    for key in required:
        if key not in obj:
            raise PlanAnswerError("missing field", f"{path}.{key}")
    extra = sorted(set(obj) - set(required) - set(optional))
    if extra:
        raise PlanAnswerError(f"field outside the schema: {extra[0]}", path)
    step = obj["step"]
    if isinstance(step, bool) or not isinstance(step, int) or step != number:
        raise PlanAnswerError(f"expected step number {number}", f"{path}.step")
    action = _text(obj["action"], f"{path}.action", nonempty=True)
    if not _ACTION.match(action):
        raise PlanAnswerError("expected a primitive name", f"{path}.action")
    target = obj["target_object"]
    if target is not None:
        target = _text(target, f"{path}.target_object")
        if not _ID.match(target):
            raise PlanAnswerError("expected a scene graph id or null", f"{path}.target_object")
    pointing = obj.get("pointing_description")
    if pointing is not None:
        pointing = _text(pointing, f"{path}.pointing_description", nonempty=True)
    kf = obj.get("grounded_by_keyframe_idx")
    if kf is not None and (isinstance(kf, bool) or not isinstance(kf, int) or kf < 1):
        raise PlanAnswerError("expected a 1-based integer", f"{path}.grounded_by_keyframe_idx")
    return PlanStep(
        step=step,
        action=action,
        target_object=target,
        reasoning=_text(obj["reasoning"], f"{path}.reasoning"),
        pointing_description=pointing,
        grounded_by_keyframe_idx=kf,
    )


def validate_plan_answer(obj: object) -> PlanAnswer:
    """Validate an already decoded answer object.

    Raises:
        PlanAnswerError: Any deviation from the schema.
    """
    if not isinstance(obj, dict):
        raise PlanAnswerError("expected an object")
    for key in ("plan", "reasoning", "warnings"):
        if key not in obj:
            raise PlanAnswerError("missing field", f"$.{key}")
    extra = sorted(set(obj) - {"plan", "reasoning", "warnings"})
    if extra:
        raise PlanAnswerError(f"field outside the schema: {extra[0]}")
    plan = obj["plan"]
    if not isinstance(plan, list):
        raise PlanAnswerError("expected a list", "$.plan")
    if len(plan) > MAX_STEPS:
        raise PlanAnswerError(f"more than {MAX_STEPS} steps", "$.plan")
    steps = tuple(_step(s, f"$.plan[{i}]", i + 1) for i, s in enumerate(plan))
    return PlanAnswer(
        plan=steps,
        reasoning=_texts(obj["reasoning"], "$.reasoning"),
        warnings=_texts(obj["warnings"], "$.warnings"),
    )


def parse_plan_answer(text: object) -> PlanAnswer:
    """Find and validate the planner's JSON answer.

    Raises:
        PlanAnswerError: No JSON object, or the object does not match the schema.
    """
    try:
        obj = extract_json(text)
    except ReasoningError as err:
        raise PlanAnswerError(str(err)) from err
    return validate_plan_answer(obj)
