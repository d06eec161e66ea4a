"""The one way mimir compares labels (``"Coffee-Mug"``, ``"coffee_mug"``, ``"coffee mug"``).

A label is split into lower-case words at spaces, underscores and dashes. Two forms are built
from the words: the text form joins them with spaces (for reading and matching), the key form
with underscores (node id prefixes, index keys). Matching that also forgives simple plurals
(``mimir_planner.recall.canon``) starts from the same words.
"""

from __future__ import annotations

import re

_SEPARATORS = re.compile(r"[\s_\-]+")


def label_words(label: str) -> tuple[str, ...]:
    """Lower-case words of a label (spaces, underscores and dashes separate)."""
    return tuple(w for w in _SEPARATORS.split(label.strip().lower()) if w)


def label_text(label: str) -> str:
    """The text form: words joined by single spaces (``"coffee mug"``)."""
    return " ".join(label_words(label))


def label_key(label: str) -> str:
    """The key form: words joined by underscores (``"coffee_mug"``), as node ids start."""
    return "_".join(label_words(label))


__all__ = ["label_key", "label_text", "label_words"]
