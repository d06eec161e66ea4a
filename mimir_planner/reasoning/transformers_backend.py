"""Local vision-language model backend over ``transformers`` (Qwen2.5-VL / Qwen3-VL family).

The model, tokenizer and image processor are loaded from a local folder on first use. The
prompt is rendered with the tokenizer's chat template; each image placeholder token the
template emits is expanded to the number of vision tokens the image processor reports for
that image (the Qwen-VL convention: ``grid_t * grid_h * grid_w / merge_size**2``). Loading
the parts separately keeps the backend usable where the combined processor class is not
(it needs the optional video processing stack).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir_planner.reasoning.config import VlmConfig
from mimir_planner.reasoning.errors import (
    BackendConfigError,
    BackendUnavailableError,
    ModelLoadError,
    ModelNotFoundError,
)
from mimir_planner.reasoning.vlm import ImagePart, TextPart, VlmRequest, VlmResponse

LOG = logging.getLogger(__name__)


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    image_processor: Any
    image_token: str
    merge_size: int
    chat_template: str


class TransformersVlmBackend:
    """Runs a local image-text-to-text model.

    Args:
        config: backend settings; ``model_path`` names the local model folder.
        sleep: waiting function used between retries.
    """

    def __init__(self, config: VlmConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        if not config.model_path:
            raise BackendConfigError("the transformers backend needs vlm.model_path")
        self._cfg = config
        self._path = Path(config.model_path)
        self._sleep = sleep
        self._loaded: _Loaded | None = None

    @property
    def name(self) -> str:
        return "transformers"

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded already."""
        return self._loaded is not None

    def load(self) -> None:
        """Loads model, tokenizer and image processor (done by the first request otherwise).

        Raises:
            ModelNotFoundError: the folder or its ``config.json`` does not exist.
            ModelLoadError: the files exist but cannot be loaded.
        """
        if self._loaded is not None:
            return
        if not self._path.is_dir():
            raise ModelNotFoundError(f"model folder {self._path} does not exist")
        if not (self._path / "config.json").is_file():
            raise ModelNotFoundError(f"model folder {self._path} has no config.json")
        # transformers and torch take seconds to import; only this backend needs them
        import torch  # noqa: PLC0415
        from transformers import (  # noqa: PLC0415
            AutoImageProcessor,
            AutoModelForImageTextToText,
            AutoTokenizer,
        )

        started = time.monotonic()
        try:
            tokenizer = AutoTokenizer.from_pretrained(self._path, local_files_only=True)
            image_processor = AutoImageProcessor.from_pretrained(self._path, local_files_only=True)
            dtype = torch.float32 if self._cfg.device == "cpu" else "auto"
            model: Any = AutoModelForImageTextToText.from_pretrained(
                self._path, local_files_only=True, dtype=dtype
            )
            model.to(self._cfg.device)
            model.eval()
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as err:
            raise ModelLoadError(f"cannot load the model in {self._path}: {err}") from err
        template = tokenizer.chat_template or self._template_file()
        if not template:
            raise ModelLoadError(f"no chat template found in {self._path}")
        token_id = getattr(model.config, "image_token_id", None)
        if token_id is None:
            raise ModelLoadError("the model config names no image token id")
        image_token = tokenizer.convert_ids_to_tokens(int(token_id))
        self._loaded = _Loaded(
            model=model,
            tokenizer=tokenizer,
            image_processor=image_processor,
            image_token=str(image_token),
            merge_size=int(getattr(image_processor, "merge_size", 2) or 2),
            chat_template=template,
        )
        LOG.info("loaded %s in %.1f s", self._path, time.monotonic() - started)

    def _template_file(self) -> str | None:
        jinja = self._path / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        js = self._path / "chat_template.json"
        if js.is_file():
            try:
                value = json.loads(js.read_text(encoding="utf-8")).get("chat_template")
            except (ValueError, AttributeError) as err:
                raise ModelLoadError(f"{js} is not a valid chat template file") from err
            return value if isinstance(value, str) else None
        return None

    def _prompt(self, loaded: _Loaded, request: VlmRequest) -> tuple[str, list[Any]]:
        messages: list[dict[str, object]] = []
        images: list[Any] = []
        for message in request.messages:
            content: list[dict[str, object]] = []
            for part in message.parts:
                if isinstance(part, TextPart):
                    content.append({"type": "text", "text": part.text})
                elif isinstance(part, ImagePart):
                    content.append({"type": "image"})
                    images.append(part.rgb)
            messages.append({"role": message.role, "content": content})
        text = loaded.tokenizer.apply_chat_template(
            messages,
            chat_template=loaded.chat_template,
            add_generation_prompt=True,
            tokenize=False,
        )
        if not isinstance(text, str):
            raise BackendConfigError("the chat template did not render to text")
        return text, images

    def complete(self, request: VlmRequest) -> VlmResponse:
        self.load()
        loaded = self._loaded
        if loaded is None:
            raise ModelLoadError("model is not loaded")
        text, images = self._prompt(loaded, request)
        last: Exception | None = None
        for attempt in range(1, self._cfg.max_attempts + 1):
            started = time.monotonic()
            try:
                answer, n_in, n_out, finish = self._generate(loaded, request, text, images)
            except RuntimeError as err:
                last = err
                LOG.warning("local generation attempt %d failed: %s", attempt, err)
                if attempt < self._cfg.max_attempts:
                    self._sleep(
                        min(
                            self._cfg.backoff_max_s,
                            self._cfg.backoff_initial_s * 2 ** (attempt - 1),
                        )
                    )
                continue
            return VlmResponse(
                text=answer,
                backend=self.name,
                model=str(self._path),
                latency_s=time.monotonic() - started,
                prompt_tokens=n_in,
                completion_tokens=n_out,
                attempts=attempt,
                finish_reason=finish,
            )
        raise BackendUnavailableError(
            f"local generation failed {self._cfg.max_attempts} times: {last}"
        ) from last

    def _generate(
        self, loaded: _Loaded, request: VlmRequest, text: str, images: list[Any]
    ) -> tuple[str, int, int, str]:
        import torch  # noqa: PLC0415
        from transformers import MaxTimeCriteria, StoppingCriteriaList  # noqa: PLC0415

        inputs: dict[str, Any] = {}
        if images:
            features = loaded.image_processor(images=images, return_tensors="pt")
            grid = features["image_grid_thw"]
            pieces = text.split(loaded.image_token)
            if len(pieces) - 1 != len(images):
                raise BackendConfigError(
                    f"the chat template placed {len(pieces) - 1} image tokens "
                    f"for {len(images)} images"
                )
            merge = loaded.merge_size**2
            expanded = [pieces[0]]
            for i, piece in enumerate(pieces[1:]):
                expanded.append(loaded.image_token * (int(grid[i].prod()) // merge))
                expanded.append(piece)
            text = "".join(expanded)
            inputs["pixel_values"] = features["pixel_values"].to(self._cfg.device)
            inputs["image_grid_thw"] = grid.to(self._cfg.device)
        encoded = loaded.tokenizer([text], return_tensors="pt")
        input_ids = encoded["input_ids"].to(self._cfg.device)
        temperature = (
            request.temperature if request.temperature is not None else self._cfg.temperature
        )
        sampling: dict[str, Any] = {"do_sample": temperature > 0}
        if temperature > 0:
            sampling["temperature"] = temperature
        started = time.monotonic()
        with torch.inference_mode():
            output = loaded.model.generate(
                input_ids=input_ids,
                attention_mask=encoded["attention_mask"].to(self._cfg.device),
                max_new_tokens=request.max_tokens or self._cfg.max_tokens,
                stopping_criteria=StoppingCriteriaList([MaxTimeCriteria(self._cfg.timeout_s)]),
                **inputs,
                **sampling,
            )
        new_tokens = output[0, input_ids.shape[1] :]
        answer = loaded.tokenizer.decode(new_tokens, skip_special_tokens=True)
        timed_out = time.monotonic() - started >= self._cfg.timeout_s
        finish = "timeout" if timed_out else "stop"
        return str(answer), int(input_ids.shape[1]), int(new_tokens.shape[0]), finish
