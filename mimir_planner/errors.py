"""Exception classes of the planning core (retrieval, grounding, primitives, closed loop).

Every failure is a subclass of :class:`PlannerError`, so a node can turn the whole family into an
error code in one place, while tests match the precise cause.
"""

from __future__ import annotations


class PlannerError(Exception):
    """Base class of every error raised by the ``mimir_planner`` core modules."""


class PlannerConfigError(PlannerError):
    """The planner configuration file or one of its values is missing or invalid."""


class InstructionError(PlannerError):
    """An instruction is not text, is empty or too long, or cannot be turned into goals."""


class EmbedderUnavailableError(PlannerError):
    """The optional text-embedding model cannot be imported or loaded."""


class RecallError(PlannerError):
    """A recall query is malformed (empty object description, bad bound)."""


class RetrievalError(PlannerError):
    """Keyframe retrieval failed: bad query, unreadable keyframe index or thumbnails."""


class PlanAnswerError(PlannerError):
    """A planner or retriever answer is not JSON or does not match its schema.

    Attributes:
        path: JSON path of the offending field (``$`` for the whole answer).
        detail: The message without the path.
    """

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.detail = message


class ActionRefusedError(PlannerError):
    """A step names an unregistered primitive or unknown target, or breaks a precondition.

    Attributes:
        reason: Why the step was refused, in words the planner can read back.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GateError(PlannerError):
    """Operator gate misuse: unknown request id, or a decision on a closed request."""


class OverlayError(PlannerError):
    """Set-of-Mark overlay input is malformed (image shape, intrinsics, pose)."""
