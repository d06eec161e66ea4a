"""Builds the configured backend."""

from __future__ import annotations

import time
from collections.abc import Callable

from mimir_planner.reasoning.config import ReasoningConfig
from mimir_planner.reasoning.errors import BackendConfigError
from mimir_planner.reasoning.offline import OfflineReasoner
from mimir_planner.reasoning.openai_backend import OpenAICompatibleBackend
from mimir_planner.reasoning.transformers_backend import TransformersVlmBackend
from mimir_planner.reasoning.vlm import VlmBackend


def make_backend(
    config: ReasoningConfig, sleep: Callable[[float], None] = time.sleep
) -> VlmBackend:
    """The backend named by ``config.vlm.backend``; nothing is loaded or contacted yet."""
    kind = config.vlm.backend
    if kind == "openai":
        return OpenAICompatibleBackend(config.vlm, sleep=sleep)
    if kind == "transformers":
        return TransformersVlmBackend(config.vlm, sleep=sleep)
    if kind == "offline":
        return OfflineReasoner(config.vocabulary)
    raise BackendConfigError(f"unknown backend '{kind}'")
