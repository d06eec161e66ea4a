"""Prompt vocabulary files and their loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from perception_helpers import assert_unreadable_files_raise

from mimir_perception.errors import VocabularyError
from mimir_perception.vocabulary import (
    Vocabulary,
    load_named_vocabulary,
    load_vocabulary,
    parse_vocabulary,
)

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


@pytest.mark.parametrize("name", ["kitchen", "office"])
def test_shipped_vocabularies_load(name: str) -> None:
    vocab = load_named_vocabulary(name, CONFIG_DIR)
    assert vocab.name == name
    assert "drawer" in vocab.labels
    assert vocab.labels_of_kind("fixture")
    assert vocab.labels_of_kind("object")
    for entry in vocab.entries:
        assert 0.0 <= entry.score_threshold <= 1.0
        assert entry.association_radius > 0.0


def test_kitchen_has_the_expected_categories() -> None:
    vocab = load_vocabulary(CONFIG_DIR / "vocabularies" / "kitchen.yaml")
    for label in ("cabinet", "drawer", "counter", "shelf", "fridge", "table", "chair"):
        assert vocab.entry(label).kind == "fixture"
    for label in ("mug", "cup", "banana", "ketchup", "mustard", "bottle", "bowl", "scissors"):
        assert vocab.entry(label).kind == "object"
    assert vocab.entry("ketchup").prompt == "ketchup bottle"
    assert vocab.score_threshold("drawer") == pytest.approx(0.45)
    assert vocab.association_radius("mug") == pytest.approx(0.12)
    assert vocab.score_threshold("bowl") == pytest.approx(0.4)  # default


def test_defaults_and_inline_entries() -> None:
    vocab = parse_vocabulary(
        {
            "name": "t",
            "defaults": {"score_threshold": 0.6, "association_radius": 0.5},
            "fixtures": ["shelf"],
            "objects": [{"label": "cup", "score_threshold": 0.2}],
        }
    )
    assert vocab.entry("shelf").score_threshold == 0.6
    assert vocab.entry("cup").score_threshold == 0.2
    assert vocab.entry("cup").association_radius == 0.5
    assert vocab.prompts == ("shelf", "cup")
    assert "cup" in vocab
    assert "plate" not in vocab
    with pytest.raises(VocabularyError):
        vocab.entry("plate")
    inline = Vocabulary.from_labels(["a", "b"])
    assert inline.labels == ("a", "b")


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"objects": []},
        {"objects": "mug"},
        {"objects": [""]},
        {"objects": [42]},
        {"objects": ["mug", "mug"]},
        {"objects": [{"label": "mug", "score_threshold": 1.5}]},
        {"objects": [{"label": "mug", "score_threshold": "high"}]},
        {"objects": [{"label": "mug", "association_radius": 0}]},
        {"objects": [{"label": "mug", "association_radius": float("nan")}]},
        {"objects": [{"label": "mug", "colour": "red"}]},
        {"objects": ["mug"], "extra": 1},
        {"objects": ["mug"], "defaults": {"radius": 1}},
        {"objects": ["mug"], "defaults": []},
        {"objects": ["mug"], "name": ""},
        {"objects": [{"label": "mug", "prompt": 3}]},
    ],
)
def test_malformed_vocabularies_raise(data: object) -> None:
    with pytest.raises(VocabularyError):
        parse_vocabulary(data, "bad.yaml")


def test_file_errors(tmp_path: Path) -> None:
    assert_unreadable_files_raise(load_vocabulary, VocabularyError, tmp_path, "objects: [mug\n")
    with pytest.raises(VocabularyError):
        load_named_vocabulary("../etc/passwd", tmp_path)
    good = tmp_path / "vocabularies"
    good.mkdir()
    (good / "mini.yaml").write_text("objects: [mug]\n", encoding="utf-8")
    assert load_named_vocabulary("mini", tmp_path).name == "mini"
