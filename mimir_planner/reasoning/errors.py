"""Exception classes of the reasoning core.

Every failure the reasoning layer can report is a subclass of :class:`ReasoningError`, so a
caller (a ROS node, the command line) can catch the whole family in one place while tests and
retry logic match the specific kind.
"""

from __future__ import annotations


class ReasoningError(Exception):
    """Base class of every error raised by ``mimir_planner.reasoning``."""


class ReasoningConfigError(ReasoningError):
    """The reasoning configuration file or a value in it is missing or invalid."""


class PromptError(ReasoningError):
    """Base class of prompt template failures."""


class UnknownPromptError(PromptError):
    """No template with the requested name exists in the prompt folder."""


class PromptPlaceholderError(PromptError):
    """A template was rendered with missing or unexpected placeholder values."""


class BackendError(ReasoningError):
    """Base class of model backend failures."""


class BackendConfigError(BackendError):
    """The backend cannot be used as configured (missing API key variable, bad URL)."""


class BackendRequestError(BackendError):
    """The server refused the request in a way that retrying cannot fix (HTTP 4xx)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class BackendUnavailableError(BackendError):
    """The server kept failing (HTTP 5xx, 429, dropped connections) until retries ran out."""


class BackendTimeoutError(BackendUnavailableError):
    """Every attempt ran past the configured timeout."""


class BackendResponseError(BackendError):
    """The server answered with a body that is not a chat completion."""


class ModelNotFoundError(BackendError):
    """A local model folder does not exist or lacks the files a model needs."""


class ModelLoadError(BackendError):
    """A local model folder exists but its model, tokenizer or image processor cannot be loaded."""


class AnswerSchemaError(ReasoningError):
    """A model answer is not JSON or does not match the expected schema.

    Attributes:
        path: JSON path of the offending field (``$`` for the whole answer), e.g.
            ``$.property_updates[0].confidence``.
    """

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.detail = message


class AnswerRetriesExhaustedError(AnswerSchemaError):
    """Every allowed attempt produced an invalid answer; nothing was written."""


class EvidenceError(ReasoningError):
    """The evidence given to the analyzer or a verifier is malformed (bad shapes, NaN, order)."""


class ClaimError(ReasoningError):
    """A claim is malformed or refers to a pending entry that does not exist."""
