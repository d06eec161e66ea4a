"""Local transformers backend with a tiny randomly initialised Qwen2.5-VL saved to disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_qwen import build_tiny_qwen

from mimir_planner.reasoning import ChatMessage, ImagePart, TextPart, VlmRequest
from mimir_planner.reasoning.config import VlmConfig
from mimir_planner.reasoning.errors import BackendConfigError, ModelLoadError, ModelNotFoundError
from mimir_planner.reasoning.transformers_backend import TransformersVlmBackend


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("PIL")
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny_qwen"))


def _request(images: int = 2) -> VlmRequest:
    rng = np.random.default_rng(0)
    parts: list[TextPart | ImagePart] = [TextPart("Return JSON.")]
    parts += [ImagePart(rng.integers(0, 255, (40, 60, 3), dtype=np.uint8)) for _ in range(images)]
    return VlmRequest(messages=(ChatMessage("user", tuple(parts)),), max_tokens=6)


def test_generates_from_images_and_counts_tokens(tiny_model: Path) -> None:
    backend = TransformersVlmBackend(VlmConfig(backend="transformers", model_path=str(tiny_model)))
    assert not backend.loaded  # lazy
    resp = backend.complete(_request())
    assert backend.loaded
    assert resp.backend == "transformers"
    assert isinstance(resp.text, str)
    assert resp.completion_tokens is not None and 0 < resp.completion_tokens <= 6
    # two images of 40x60 give 2 * (grid 1x2x4 / 4) = 4 vision tokens among the prompt tokens
    assert resp.prompt_tokens is not None and resp.prompt_tokens > 4
    text_only = backend.complete(_request(images=0))
    assert text_only.prompt_tokens is not None and text_only.prompt_tokens < resp.prompt_tokens


def test_missing_model_folder_is_typed(tmp_path: Path) -> None:
    backend = TransformersVlmBackend(
        VlmConfig(backend="transformers", model_path=str(tmp_path / "absent"))
    )
    with pytest.raises(ModelNotFoundError):
        backend.complete(_request())
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError):
        TransformersVlmBackend(
            VlmConfig(backend="transformers", model_path=str(tmp_path / "empty"))
        ).load()
    with pytest.raises(BackendConfigError):
        TransformersVlmBackend(VlmConfig(backend="transformers", model_path=""))


def test_broken_model_folder_is_a_load_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"model_type": "qwen2_5_vl"}')
    backend = TransformersVlmBackend(VlmConfig(backend="transformers", model_path=str(tmp_path)))
    with pytest.raises(ModelLoadError):
        backend.load()
