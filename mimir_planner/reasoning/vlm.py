"""The one interface every vision-language model backend implements.

A request is a list of chat messages whose content parts are text or RGB images (numpy
arrays); the answer is text plus bookkeeping (latency, token counts, attempts). A request may
also carry ``structured``: the typed evidence the prompt was rendered from, opaque to this
interface. A backend that reasons without a model (the offline reasoner) reads it; model
backends ignore it.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import cv2
import numpy as np

from mimir_planner.reasoning.errors import BackendConfigError, EvidenceError


@dataclass(frozen=True)
class TextPart:
    """A text content part."""

    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image content part: (H, W, 3) uint8 RGB."""

    rgb: np.ndarray
    name: str = ""

    def __post_init__(self) -> None:
        arr = self.rgb
        if not isinstance(arr, np.ndarray) or arr.ndim != 3 or arr.shape[2] != 3:
            raise EvidenceError("an image part must be an (H, W, 3) array")
        if arr.dtype != np.uint8 or min(arr.shape[:2]) < 1:
            raise EvidenceError("an image part must be a non-empty uint8 array")


ContentPart = TextPart | ImagePart


@dataclass(frozen=True)
class ChatMessage:
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    parts: tuple[ContentPart, ...]

    @staticmethod
    def text(role: Literal["system", "user", "assistant"], text: str) -> ChatMessage:
        """A message holding a single text part."""
        return ChatMessage(role=role, parts=(TextPart(text),))

    def images(self) -> list[ImagePart]:
        """Image parts of this message, in order."""
        return [p for p in self.parts if isinstance(p, ImagePart)]


@dataclass(frozen=True)
class VlmRequest:
    """A chat completion request.

    Attributes:
        messages: the conversation.
        json_mode: ask for a JSON object where the backend supports it.
        temperature: sampling temperature; None uses the backend's configured value.
        max_tokens: answer length limit; None uses the backend's configured value.
        purpose: short tag for logs (``interaction_analyzer``).
        structured: the typed evidence the prompt was rendered from (its type belongs to the
            caller and the backend that reads it; the interface does not know it).
    """

    messages: tuple[ChatMessage, ...]
    json_mode: bool = True
    temperature: float | None = None
    max_tokens: int | None = None
    purpose: str = ""
    structured: object = field(default=None, compare=False)


@dataclass(frozen=True)
class VlmResponse:
    """A backend's answer with the figures needed for logs and benchmarks.

    Attributes:
        text: the answer text.
        backend: backend name (``openai``, ``transformers``, ``offline-reasoner``).
        model: model name or path that answered.
        latency_s: time spent in the backend for the successful attempt, s.
        prompt_tokens: input tokens, when the backend reports them.
        completion_tokens: output tokens, when the backend reports them.
        attempts: attempts made, including the successful one.
        finish_reason: why generation stopped, when known.
    """

    text: str
    backend: str
    model: str
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    finish_reason: str | None = None


class VlmBackend(Protocol):
    """A vision-language model behind one method."""

    @property
    def name(self) -> str:
        """Backend name used in logs and in every response."""
        ...

    def complete(self, request: VlmRequest) -> VlmResponse:
        """Answers a request.

        Raises:
            BackendError: (a subclass of) when no valid answer could be obtained.
        """
        ...


def encode_image(rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> bytes:
    """Encodes an RGB array as PNG or JPEG bytes."""
    bgr = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)
    if fmt == "png":
        ok, buf = cv2.imencode(".png", bgr)
    elif fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    else:
        raise BackendConfigError(f"unsupported image format '{fmt}'")
    if not ok:
        raise EvidenceError("image encoding failed")
    return bytes(buf.tobytes())


def image_data_url(rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> str:
    """A ``data:`` URL holding the encoded image, as OpenAI-style ``image_url`` parts take."""
    mime = "image/png" if fmt == "png" else "image/jpeg"
    payload = base64.b64encode(encode_image(rgb, fmt, quality)).decode("ascii")
    return f"data:{mime};base64,{payload}"


def request_images(messages: Sequence[ChatMessage]) -> list[np.ndarray]:
    """All images of a conversation, in order."""
    return [p.rgb for m in messages for p in m.images()]
