"""The planner side's way of asking a VLM: render a prompt template, send one user message.

:class:`PromptedVlm` is the common ground of the planner policy and the retrieval reasoner that
talk to a model: both hold a backend and the prompt library, go by the backend's name, and send
their text and images as one user message with a purpose tag for the logs.
"""

from __future__ import annotations

from collections.abc import Sequence

from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import ChatMessage, ImagePart, TextPart, VlmBackend, VlmRequest


class PromptedVlm:
    """A VLM backend with the prompt templates it is asked through."""

    def __init__(self, backend: VlmBackend, prompts: PromptLibrary) -> None:
        self.backend = backend
        self.prompts = prompts

    @property
    def name(self) -> str:
        """The backend's name."""
        return self.backend.name

    def ask(self, parts: Sequence[TextPart | ImagePart], purpose: str) -> str:
        """Send ``parts`` as one user message and return the answer's text."""
        request = VlmRequest(messages=(ChatMessage("user", tuple(parts)),), purpose=purpose)
        return self.backend.complete(request).text
