"""Backend for any OpenAI-compatible chat completion endpoint (vLLM, Ollama, hosted APIs).

Uses only the standard library. Images travel as base64 data URLs in ``image_url`` parts.
Transient failures (HTTP 429 and 5xx, timeouts, dropped connections) are retried a bounded
number of times with exponential backoff, honouring ``Retry-After``; other HTTP errors fail at
once.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import math
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime

from mimir_planner.reasoning.config import VlmConfig
from mimir_planner.reasoning.errors import (
    BackendConfigError,
    BackendRequestError,
    BackendResponseError,
    BackendTimeoutError,
    BackendUnavailableError,
)
from mimir_planner.reasoning.vlm import (
    ChatMessage,
    TextPart,
    VlmRequest,
    VlmResponse,
    image_data_url,
)

LOG = logging.getLogger(__name__)


class _TransientError(Exception):
    """A failure worth retrying; carries the delay the server asked for, if any."""

    def __init__(self, message: str, retry_after: float | None = None, timeout: bool = False):
        super().__init__(message)
        self.retry_after = retry_after
        self.timeout = timeout


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        reference = now if now is not None else datetime.now(tz=UTC).timestamp()
        return max(0.0, when.timestamp() - reference)
    return max(0.0, seconds) if math.isfinite(seconds) else None


class OpenAICompatibleBackend:
    """Chat completions over HTTP.

    Args:
        config: backend settings (URL, model, key variable, limits).
        sleep: waiting function used between retries (tests pass a recorder).
    """

    def __init__(self, config: VlmConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        if not config.base_url.startswith(("http://", "https://")):
            raise BackendConfigError(f"base_url must be an http(s) URL, got '{config.base_url}'")
        if not config.model:
            raise BackendConfigError("the OpenAI-compatible backend needs a model name")
        self._cfg = config
        self._sleep = sleep
        self._url = config.base_url.rstrip("/") + "/chat/completions"

    @property
    def name(self) -> str:
        return "openai"

    def _api_key(self) -> str | None:
        if not self._cfg.api_key_env:
            return None
        key = os.environ.get(self._cfg.api_key_env)
        if not key:
            raise BackendConfigError(
                f"environment variable {self._cfg.api_key_env} holding the API key is not set"
            )
        return key

    def _message_json(self, message: ChatMessage) -> dict[str, object]:
        parts: list[dict[str, object]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "text": part.text})
            else:
                url = image_data_url(part.rgb, self._cfg.image_format, self._cfg.jpeg_quality)
                parts.append({"type": "image_url", "image_url": {"url": url}})
        if len(parts) == 1 and parts[0]["type"] == "text":
            return {"role": message.role, "content": parts[0]["text"]}
        return {"role": message.role, "content": parts}

    def build_body(self, request: VlmRequest) -> dict[str, object]:
        """The JSON body sent for a request."""
        body: dict[str, object] = {
            "model": self._cfg.model,
            "messages": [self._message_json(m) for m in request.messages],
            "temperature": (
                request.temperature if request.temperature is not None else self._cfg.temperature
            ),
            "max_tokens": request.max_tokens or self._cfg.max_tokens,
        }
        if request.json_mode and self._cfg.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def complete(self, request: VlmRequest) -> VlmResponse:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = json.dumps(self.build_body(request)).encode("utf-8")
        last: _TransientError | None = None
        for attempt in range(1, self._cfg.max_attempts + 1):
            started = time.monotonic()
            try:
                payload = self._post(data, headers)
            except _TransientError as err:
                last = err
                if attempt == self._cfg.max_attempts:
                    break
                delay = min(
                    self._cfg.backoff_max_s, self._cfg.backoff_initial_s * 2 ** (attempt - 1)
                )
                if err.retry_after is not None:
                    delay = min(self._cfg.backoff_max_s, max(delay, err.retry_after))
                LOG.warning(
                    "VLM request attempt %d/%d failed (%s); retrying in %.2f s",
                    attempt,
                    self._cfg.max_attempts,
                    err,
                    delay,
                )
                self._sleep(delay)
                continue
            latency = time.monotonic() - started
            return self._response(payload, latency, attempt)
        if last is None:
            raise BackendUnavailableError("no request attempt was made")
        message = f"VLM server at {self._url} failed {self._cfg.max_attempts} times: {last}"
        if last.timeout:
            raise BackendTimeoutError(message) from last
        raise BackendUnavailableError(message) from last

    def _post(self, data: bytes, headers: dict[str, str]) -> object:
        req = urllib.request.Request(self._url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self._cfg.timeout_s) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as err:
            status = err.code
            detail = _error_detail(err)
            if status == 429 or status >= 500:
                retry_after = parse_retry_after(err.headers.get("Retry-After"))
                raise _TransientError(f"HTTP {status}: {detail}", retry_after) from err
            raise BackendRequestError(f"HTTP {status}: {detail}", status) from err
        except TimeoutError as err:
            raise _TransientError(f"timed out after {self._cfg.timeout_s} s", timeout=True) from err
        except urllib.error.URLError as err:
            if isinstance(err.reason, TimeoutError | socket.timeout):
                raise _TransientError(
                    f"timed out after {self._cfg.timeout_s} s", timeout=True
                ) from err
            raise _TransientError(f"connection failed: {err.reason}") from err
        except (http.client.HTTPException, ConnectionError, OSError) as err:
            raise _TransientError(f"connection dropped: {err!r}") from err
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise BackendResponseError("server answered with a body that is not JSON") from err

    def _response(self, payload: object, latency: float, attempts: int) -> VlmResponse:
        try:
            if not isinstance(payload, dict):
                raise TypeError("body is not an object")
            choice = payload["choices"][0]
            content = choice["message"]["content"]
            if isinstance(content, list):
                content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            if not isinstance(content, str):
                raise TypeError("message content is not text")
            usage = payload.get("usage") or {}
            prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
            completion_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        except (KeyError, IndexError, TypeError) as err:
            raise BackendResponseError(f"not a chat completion: {err}") from err
        return VlmResponse(
            text=content,
            backend=self.name,
            model=str(payload.get("model") or self._cfg.model),
            latency_s=latency,
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            completion_tokens=completion_tokens if isinstance(completion_tokens, int) else None,
            attempts=attempts,
            finish_reason=choice.get("finish_reason") if isinstance(choice, dict) else None,
        )


def _error_detail(err: urllib.error.HTTPError) -> str:
    try:
        body = err.read(2000).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException):
        body = ""
    return body.strip() or str(err.reason)
