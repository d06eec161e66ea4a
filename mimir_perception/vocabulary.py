"""Prompt vocabularies: which categories the segmenter looks for, and per-label settings.

A vocabulary file (``config/vocabularies/<name>.yaml``) looks like::

    name: kitchen
    defaults:
      score_threshold: 0.4       # minimum segmentation score in [0, 1]
      association_radius: 0.3    # m, same-label merge radius in world memory
    fixtures:
      - cabinet
      - {label: drawer, score_threshold: 0.5, association_radius: 0.15}
    objects:
      - mug
      - {label: ketchup, prompt: ketchup bottle}

Entries are either a bare label or a mapping with ``label`` and optional ``prompt`` (the text
sent to the model, defaults to the label), ``score_threshold`` and ``association_radius``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mimir import settings
from mimir_perception.errors import VocabularyError

EntryKind = Literal["fixture", "object"]

DEFAULT_SCORE_THRESHOLD = 0.4
DEFAULT_ASSOCIATION_RADIUS = 0.3
_ENTRY_KEYS = {"label", "prompt", "score_threshold", "association_radius"}
_TOP_KEYS = {"name", "defaults", "fixtures", "objects"}


@dataclass(frozen=True)
class VocabularyEntry:
    """One category of a prompt vocabulary.

    Attributes:
        label: Label written into observations and world memory (e.g. ``"drawer"``).
        kind: ``"fixture"`` (containers, surfaces) or ``"object"`` (movable items).
        prompt: Text prompt given to the segmentation model.
        score_threshold: Minimum instance score kept for this label, in [0, 1].
        association_radius: Same-label association radius for world memory (m).
    """

    label: str
    kind: EntryKind
    prompt: str
    score_threshold: float
    association_radius: float

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise VocabularyError(f"label must be a non-empty string, got {self.label!r}")
        if self.kind not in ("fixture", "object"):
            raise VocabularyError(f"kind must be 'fixture' or 'object', got {self.kind!r}")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise VocabularyError(f"prompt of {self.label!r} must be a non-empty string")
        if not 0.0 <= self.score_threshold <= 1.0:
            raise VocabularyError(
                f"score_threshold of {self.label!r} must lie in [0, 1], got {self.score_threshold}"
            )
        if not (math.isfinite(self.association_radius) and self.association_radius > 0.0):
            raise VocabularyError(
                f"association_radius of {self.label!r} must be > 0 m, got {self.association_radius}"
            )


@dataclass(frozen=True)
class Vocabulary:
    """An ordered set of categories with unique labels."""

    name: str
    entries: tuple[VocabularyEntry, ...]

    def __post_init__(self) -> None:
        if not self.entries:
            raise VocabularyError(f"vocabulary {self.name!r} has no entries")
        seen: set[str] = set()
        for entry in self.entries:
            if entry.label in seen:
                raise VocabularyError(f"vocabulary {self.name!r} repeats label {entry.label!r}")
            seen.add(entry.label)

    @classmethod
    def from_labels(
        cls,
        labels: Iterable[str],
        name: str = "inline",
        score_threshold: float = DEFAULT_SCORE_THRESHOLD,
        association_radius: float = DEFAULT_ASSOCIATION_RADIUS,
    ) -> Vocabulary:
        """A vocabulary of object entries whose prompts are their labels."""
        return cls(
            name,
            tuple(
                VocabularyEntry(label, "object", label, score_threshold, association_radius)
                for label in labels
            ),
        )

    @property
    def labels(self) -> tuple[str, ...]:
        """All labels in file order."""
        return tuple(e.label for e in self.entries)

    @property
    def prompts(self) -> tuple[str, ...]:
        """All prompts in file order (aligned with :attr:`labels`)."""
        return tuple(e.prompt for e in self.entries)

    def entry(self, label: str) -> VocabularyEntry:
        """The entry of ``label``; raises :class:`VocabularyError` for an unknown label."""
        for e in self.entries:
            if e.label == label:
                return e
        raise VocabularyError(f"label {label!r} is not in vocabulary {self.name!r}")

    def __contains__(self, label: object) -> bool:
        return any(e.label == label for e in self.entries)

    def score_threshold(self, label: str) -> float:
        """Minimum score kept for ``label``."""
        return self.entry(label).score_threshold

    def association_radius(self, label: str) -> float:
        """World-memory association radius of ``label`` (m)."""
        return self.entry(label).association_radius

    def labels_of_kind(self, kind: EntryKind) -> tuple[str, ...]:
        """Labels of fixtures or of objects."""
        return tuple(e.label for e in self.entries if e.kind == kind)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise VocabularyError(f"{where} must be a number, got {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise VocabularyError(f"{where} must be finite, got {value!r}")
    return result


def _parse_entry(
    raw: Any, kind: EntryKind, defaults: Mapping[str, float], where: str
) -> VocabularyEntry:
    if isinstance(raw, str):
        raw = {"label": raw}
    if not isinstance(raw, Mapping):
        raise VocabularyError(f"{where}: entry must be a label or a mapping, got {raw!r}")
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise VocabularyError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    label = raw.get("label")
    if not isinstance(label, str) or not label.strip():
        raise VocabularyError(f"{where}: 'label' must be a non-empty string, got {label!r}")
    label = label.strip()
    prompt = raw.get("prompt", label)
    if not isinstance(prompt, str):
        raise VocabularyError(f"{where}: 'prompt' must be a string, got {prompt!r}")
    threshold = _number(
        raw.get("score_threshold", defaults["score_threshold"]), f"{where}.score_threshold"
    )
    radius = _number(
        raw.get("association_radius", defaults["association_radius"]),
        f"{where}.association_radius",
    )
    return VocabularyEntry(label, kind, prompt.strip(), threshold, radius)


def parse_vocabulary(data: Any, source: str = "<data>") -> Vocabulary:
    """Build a :class:`Vocabulary` from already-parsed YAML data."""
    if not isinstance(data, Mapping):
        raise VocabularyError(f"{source}: top level must be a mapping")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise VocabularyError(f"{source}: unknown keys {sorted(map(str, unknown))}")
    name = data.get("name", Path(source).stem)
    if not isinstance(name, str) or not name.strip():
        raise VocabularyError(f"{source}: 'name' must be a non-empty string")
    raw_defaults = data.get("defaults")
    if raw_defaults is None:
        raw_defaults = {}
    if not isinstance(raw_defaults, Mapping):
        raise VocabularyError(f"{source}: 'defaults' must be a mapping")
    bad = set(raw_defaults) - {"score_threshold", "association_radius"}
    if bad:
        raise VocabularyError(f"{source}: unknown defaults {sorted(map(str, bad))}")
    defaults = {
        "score_threshold": _number(
            raw_defaults.get("score_threshold", DEFAULT_SCORE_THRESHOLD),
            f"{source}: defaults.score_threshold",
        ),
        "association_radius": _number(
            raw_defaults.get("association_radius", DEFAULT_ASSOCIATION_RADIUS),
            f"{source}: defaults.association_radius",
        ),
    }
    entries: list[VocabularyEntry] = []
    for key, kind in (("fixtures", "fixture"), ("objects", "object")):
        items = data.get(key)
        if items is None:
            items = []
        if not isinstance(items, list):
            raise VocabularyError(f"{source}: '{key}' must be a list")
        for i, raw in enumerate(items):
            entries.append(_parse_entry(raw, kind, defaults, f"{source}: {key}[{i}]"))  # type: ignore[arg-type]
    try:
        return Vocabulary(name.strip(), tuple(entries))
    except VocabularyError as err:
        raise VocabularyError(f"{source}: {err}") from err


def load_vocabulary(path: str | Path) -> Vocabulary:
    """Load a vocabulary YAML file.

    Raises:
        VocabularyError: The file is missing, unreadable, not YAML or malformed.
    """
    file = Path(path)
    data = settings.read_mapping(file, "vocabulary file", VocabularyError)
    return parse_vocabulary(data, str(file))


def load_named_vocabulary(name: str, config_dir: str | Path) -> Vocabulary:
    """Load ``<config_dir>/vocabularies/<name>.yaml``; ``name`` must be a plain file stem."""
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise VocabularyError(f"vocabulary name must be a plain identifier, got {name!r}")
    return load_vocabulary(Path(config_dir) / "vocabularies" / f"{name}.yaml")
