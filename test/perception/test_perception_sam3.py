"""SAM3 backend with a tiny randomly initialised Sam3Model built from a shrunken config."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_sam3 import save_tiny_sam3

from mimir_perception.errors import ModelNotFoundError, SegmentationError
from mimir_perception.sam3 import Sam3Backend
from mimir_perception.sam3 import Sam3BackendConfig as BackendConfig
from mimir_perception.segmentation import SegmenterConfig
from mimir_perception.vocabulary import Vocabulary, VocabularyEntry


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_sam3(tmp_path_factory.mktemp("sam3_tiny"))


def vocab(threshold: float) -> Vocabulary:
    return Vocabulary(
        "t",
        (
            VocabularyEntry("mug", "object", "mug", threshold, 0.1),
            VocabularyEntry("cabinet", "fixture", "kitchen cabinet", threshold, 0.3),
            VocabularyEntry("banana", "object", "banana", threshold, 0.1),
        ),
    )


def test_loading_is_lazy_and_missing_path_is_typed(tmp_path: Path) -> None:
    backend = Sam3Backend(BackendConfig(model=str(tmp_path / "nowhere")))
    assert not backend.loaded
    with pytest.raises(ModelNotFoundError):
        backend.load()
    with pytest.raises(ModelNotFoundError):
        backend.segment(np.zeros((8, 8, 3), np.uint8), vocab(0.5))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError):
        Sam3Backend(BackendConfig(model=str(tmp_path / "empty"))).load()
    # A hub id is never fetched unless allowed.
    with pytest.raises(ModelNotFoundError):
        Sam3Backend(BackendConfig(model="facebook/sam3")).load()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"model": ""},
        {"model": "m", "device": "tpu"},
        {"model": "m", "dtype": "int8"},
        {"model": "m", "mask_threshold": 1.0},
        {"model": "m", "prompt_batch_size": 0},
        {"model": "m", "image_std": (0.5, 0.0, 0.5)},
    ],
)
def test_config_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(SegmentationError):
        BackendConfig(**kwargs)  # type: ignore[arg-type]


def test_tiny_model_segments_all_prompts(tiny_model_dir: Path) -> None:
    backend = Sam3Backend(
        BackendConfig(
            model=str(tiny_model_dir),
            prompt_batch_size=2,
            segmenter=SegmenterConfig(min_pixels=1, max_instances=50),
        )
    )
    rng = np.random.default_rng(1)
    image = rng.integers(0, 255, size=(48, 64, 3), dtype=np.uint8)
    # Threshold 0 keeps every query of every prompt: exercises batching, upsampling and
    # overlap resolution on whatever the random weights produce.
    res = backend.segment(image, vocab(0.0), stamp=3.0, camera="base")
    assert backend.loaded
    assert res.shape == (48, 64)
    assert res.stamp == 3.0 and res.camera == "base"
    res.validate()
    assert len(res) > 0
    assert {i.label for i in res.instances} <= {"mug", "cabinet", "banana"}
    scores = [i.score for i in res.instances]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    # Threshold 1 keeps nothing.
    none = backend.segment(image, vocab(1.0))
    assert len(none) == 0 and none.shape == (48, 64)


def test_results_do_not_depend_on_prompt_batching(tiny_model_dir: Path) -> None:
    image = np.random.default_rng(2).integers(0, 255, size=(40, 40, 3), dtype=np.uint8)
    seg = SegmenterConfig(min_pixels=1)
    one = Sam3Backend(BackendConfig(model=str(tiny_model_dir), prompt_batch_size=1, segmenter=seg))
    three = Sam3Backend(
        BackendConfig(model=str(tiny_model_dir), prompt_batch_size=3, segmenter=seg)
    )
    a = one.segment(image, vocab(0.3))
    b = three.segment(image, vocab(0.3))
    assert [(i.label, round(i.score, 4)) for i in a.instances] == [
        (i.label, round(i.score, 4)) for i in b.instances
    ]
    np.testing.assert_array_equal(a.instance_ids, b.instance_ids)


def test_bad_image_is_rejected_before_loading(tiny_model_dir: Path) -> None:
    backend = Sam3Backend(BackendConfig(model=str(tiny_model_dir)))
    with pytest.raises(SegmentationError):
        backend.segment(np.zeros((8, 8), np.uint8), vocab(0.5))
    with pytest.raises(SegmentationError):
        backend.segment(np.zeros((8, 8, 3), np.uint8), vocab(0.5), stamp=float("nan"))
    assert not backend.loaded
