"""Checks shared by the perception tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def assert_unreadable_files_raise(load: Callable[[Path], object], error: type[Exception],
                                  folder: Path, broken_text: str) -> None:
    """``load`` raises ``error`` for a file that is missing and for one that is not YAML."""
    with pytest.raises(error):
        load(folder / "missing.yaml")
    broken = folder / "broken.yaml"
    broken.write_text(broken_text, encoding="utf-8")
    with pytest.raises(error):
        load(broken)
