"""SAM3 text-prompted instance segmentation through transformers (``Sam3Model``).

The transformers image processor of SAM3 imports torchvision, which cannot be installed beside
the pinned torch, so this backend prepares pixels itself (resize, rescale, normalise exactly as
the processor's defaults do) and post-processes the raw outputs itself (presence-weighted
scores, bilinear mask upsampling, per-label thresholds, overlap resolution). Only the tokenizer
is loaded through transformers' auto classes.

The image is encoded once; all prompts of the vocabulary are then decoded against the shared
vision features in batches of ``prompt_batch_size``.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt
import torch
from transformers import AutoTokenizer, Sam3Model

from mimir_perception.errors import ModelInferenceError, ModelNotFoundError, SegmentationError
from mimir_perception.segmentation import (
    SegmentationBackend,
    SegmentationResult,
    SegmenterConfig,
    check_rgb,
    compose_instances,
)
from mimir_perception.vocabulary import Vocabulary

LOG = logging.getLogger(__name__)

_UPSAMPLE_CHUNK = 8


@dataclass(frozen=True)
class Sam3BackendConfig:
    """Settings of the SAM3 backend.

    Attributes:
        model: Local directory holding ``config.json``, weights and tokenizer files, or a hub id
            (``facebook/sam3``) resolved from the local hub cache only when ``allow_hub`` is True.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        dtype: ``"float32"``, ``"float16"`` or ``"bfloat16"`` for the weights and activations.
        mask_threshold: Probability above which a mask pixel belongs to the instance.
        prompt_batch_size: Prompts decoded together against one image encoding.
        text_max_length: Token length of the padded prompts (SAM3 uses 32).
        image_mean: Per-channel normalisation mean (RGB, after scaling to [0, 1]).
        image_std: Per-channel normalisation standard deviation.
        allow_hub: Let a non-path ``model`` be resolved by ``from_pretrained`` (hub cache).
        segmenter: Pixel minimum and instance cap applied after overlap resolution.
    """

    model: str
    device: str = "cpu"
    dtype: str = "float32"
    mask_threshold: float = 0.5
    prompt_batch_size: int = 8
    text_max_length: int = 32
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    allow_hub: bool = False
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise SegmentationError("model must be a non-empty path or hub id")
        if self.device != "cpu" and not self.device.startswith("cuda"):
            raise SegmentationError(f"device must be 'cpu' or 'cuda[:N]', got {self.device!r}")
        if self.dtype not in ("float32", "float16", "bfloat16"):
            raise SegmentationError(f"unsupported dtype {self.dtype!r}")
        if not 0.0 < self.mask_threshold < 1.0:
            raise SegmentationError("mask_threshold must lie in (0, 1)")
        if self.prompt_batch_size < 1 or self.text_max_length < 2:
            raise SegmentationError("prompt_batch_size must be >= 1 and text_max_length >= 2")
        if any(s <= 0 for s in self.image_std):
            raise SegmentationError("image_std must be positive")


@dataclass(frozen=True)
class _Candidates:
    masks: npt.NDArray[np.bool_]
    labels: list[str]
    scores: list[float]


class Sam3Backend(SegmentationBackend):
    """SAM3 segmentation backend; weights load lazily on :meth:`load` or the first call."""

    def __init__(self, config: Sam3BackendConfig) -> None:
        self._config = config
        self._model: Any = None
        self._tokenizer: Any = None
        self._image_size: tuple[int, int] = (0, 0)
        self._lock = threading.Lock()

    @property
    def config(self) -> Sam3BackendConfig:
        """The backend's settings."""
        return self._config

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._model is not None

    def _resolve_source(self) -> str:
        path = Path(self._config.model).expanduser()
        if path.exists():
            if not (path / "config.json").is_file():
                raise ModelNotFoundError(f"SAM3 model directory {path} has no config.json")
            return str(path)
        name = self._config.model
        if self._config.allow_hub and "/" in name and not name.startswith(("/", ".", "~")):
            return name
        raise ModelNotFoundError(f"SAM3 model path {self._config.model!r} does not exist")

    def load(self) -> None:
        """Load weights and tokenizer (idempotent).

        Raises:
            ModelNotFoundError: The model path does not exist or does not hold a SAM3 model.
        """
        with self._lock:
            if self._model is not None:
                return
            source = self._resolve_source()
            dtype = {
                "float32": torch.float32,
                "float16": torch.float16,
                "bfloat16": torch.bfloat16,
            }[self._config.dtype]
            local_only = not self._config.allow_hub
            try:
                model = Sam3Model.from_pretrained(source, dtype=dtype, local_files_only=local_only)
                tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
            except (OSError, ValueError, KeyError) as err:
                raise ModelNotFoundError(f"cannot load SAM3 from {source!r}: {err}") from err
            try:
                movable: Any = model
                model = movable.to(torch.device(self._config.device)).eval()
            except (RuntimeError, AssertionError) as err:
                raise ModelNotFoundError(
                    f"cannot move SAM3 to device {self._config.device!r}: {err}"
                ) from err
            size = model.config.vision_config.backbone_config.image_size
            if isinstance(size, (list, tuple)):
                self._image_size = (int(size[0]), int(size[1]))
            else:
                self._image_size = (int(size), int(size))
            self._tokenizer = tokenizer
            self._model = model
            LOG.info(
                "loaded SAM3 from %s on %s (input %s)",
                source,
                self._config.device,
                self._image_size,
            )

    def _pixel_values(self, image: npt.NDArray[np.uint8]) -> Any:
        height, width = self._image_size
        resized = cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
        mean = np.asarray(self._config.image_mean, np.float32)
        std = np.asarray(self._config.image_std, np.float32)
        arr = (resized.astype(np.float32) / np.float32(255.0) - mean) / std
        tensor = torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))[None]
        return tensor.to(device=self._config.device, dtype=self._model.dtype)

    def _candidates(self, image: npt.NDArray[np.uint8], vocabulary: Vocabulary) -> _Candidates:
        height, width = image.shape[:2]
        masks: list[npt.NDArray[np.bool_]] = []
        labels: list[str] = []
        scores: list[float] = []
        entries = vocabulary.entries
        with torch.inference_mode():
            vision = self._model.get_vision_features(pixel_values=self._pixel_values(image))
            step = self._config.prompt_batch_size
            for start in range(0, len(entries), step):
                chunk = entries[start : start + step]
                text = self._tokenizer(
                    [e.prompt for e in chunk],
                    padding="max_length",
                    max_length=self._config.text_max_length,
                    truncation=True,
                    return_tensors="pt",
                )
                n = len(chunk)
                shared = type(vision)(
                    fpn_hidden_states=tuple(
                        f.expand(n, -1, -1, -1) for f in vision.fpn_hidden_states
                    ),
                    fpn_position_encoding=tuple(
                        p.expand(n, -1, -1, -1) for p in vision.fpn_position_encoding
                    ),
                )
                out = self._model(
                    vision_embeds=shared,
                    input_ids=text["input_ids"].to(self._config.device),
                    attention_mask=text["attention_mask"].to(self._config.device),
                )
                query_scores = out.pred_logits.float().sigmoid()
                if out.presence_logits is not None:
                    query_scores = query_scores * out.presence_logits.float().sigmoid()
                for row, entry in enumerate(chunk):
                    keep = torch.nonzero(query_scores[row] > entry.score_threshold).flatten()
                    if keep.numel() == 0:
                        continue
                    # Upsample a few masks at a time: full-size float masks are large.
                    for first in range(0, int(keep.numel()), _UPSAMPLE_CHUNK):
                        chunk_q = keep[first : first + _UPSAMPLE_CHUNK]
                        probs = out.pred_masks[row, chunk_q].float().sigmoid()[None]
                        probs = torch.nn.functional.interpolate(
                            probs, size=(height, width), mode="bilinear", align_corners=False
                        )[0]
                        binary = (probs > self._config.mask_threshold).cpu().numpy()
                        for j, q in enumerate(chunk_q.tolist()):
                            masks.append(binary[j])
                            labels.append(entry.label)
                            scores.append(float(query_scores[row, q]))
        if not masks:
            return _Candidates(np.zeros((0, height, width), dtype=bool), [], [])
        return _Candidates(np.stack(masks), labels, scores)

    def segment(
        self,
        image: npt.NDArray[np.uint8],
        vocabulary: Vocabulary,
        stamp: float = 0.0,
        camera: str = "",
    ) -> SegmentationResult:
        """Segment every vocabulary category in ``image``.

        Raises:
            SegmentationError: Bad image.
            ModelNotFoundError: Weights cannot be loaded.
            ModelInferenceError: The model failed on this input.
        """
        check_rgb(image)
        if not math.isfinite(stamp):
            raise SegmentationError(f"stamp must be finite, got {stamp!r}")
        self.load()
        try:
            found = self._candidates(image, vocabulary)
        except RuntimeError as err:
            raise ModelInferenceError(f"SAM3 inference failed: {err}") from err
        height, width = image.shape[:2]
        if not found.labels:
            return SegmentationResult.empty(height, width, stamp, camera)
        return compose_instances(
            found.masks,
            found.labels,
            found.scores,
            min_pixels=self._config.segmenter.min_pixels,
            max_instances=self._config.segmenter.max_instances,
            stamp=stamp,
            camera=camera,
        )
