"""What the simulation job reports, shared by the job and its ROS client."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


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
