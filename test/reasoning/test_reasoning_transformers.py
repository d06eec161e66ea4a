"""Local transformers backend with a tiny randomly initialised Qwen2.5-VL saved to disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mimir_planner.reasoning import ChatMessage, ImagePart, TextPart, VlmRequest
from mimir_planner.reasoning.config import VlmConfig
from mimir_planner.reasoning.errors import BackendConfigError, ModelLoadError, ModelNotFoundError
from mimir_planner.reasoning.transformers_backend import TransformersVlmBackend

SPECIALS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% for c in m['content'] %}{% if c['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch")
    pytest.importorskip("PIL")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
    )
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    chars = [chr(c) for c in range(32, 127)] + ["\n"]
    vocab = {tok: i for i, tok in enumerate(SPECIALS + chars)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    core.add_special_tokens(SPECIALS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.chat_template = TEMPLATE
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 10000.0,
                "mrope_section": [2, 2, 4],
            },
            "bos_token_id": 0,
            "eos_token_id": vocab["<|im_end|>"],
            "pad_token_id": 0,
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [0],
            "window_size": 28,
        },
        image_token_id=vocab["<|image_pad|>"],
        video_token_id=vocab["<|video_pad|>"],
        vision_start_token_id=vocab["<|vision_start|>"],
        vision_end_token_id=vocab["<|vision_end|>"],
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_qwen")
    Qwen2_5_VLForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    Qwen2VLImageProcessorPil(min_pixels=28 * 28, max_pixels=56 * 56).save_pretrained(folder)
    return folder


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
