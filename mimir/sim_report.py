"""What the simulation job reports, shared by the job and its ROS client."""

from __future__ import annotations

from dataclasses import dataclass, field


class SimJobError(RuntimeError):
    """The simulation job could not start or a node died.

    ``hint`` says what the user can do about it; ``mimir sim`` prints it after the message.
    """

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


@dataclass
class InstructionReport:
    """Outcome of one instruction."""

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

