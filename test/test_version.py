"""Which code a run records: the checkout's commit, else the installed version."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mimir import version


def test_a_checkout_gives_its_commit() -> None:
    version.code_version.cache_clear()
    described = version.code_version()
    assert re.fullmatch(r"[0-9a-f]{7,}(-dirty)?|.*-g[0-9a-f]{7,}(-dirty)?", described), described


def test_outside_a_checkout_the_installed_version_is_named(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setattr(version, "_SOURCE_ROOT", tmp_path)  # no .git there
    version.code_version.cache_clear()
    try:
        assert re.fullmatch(r"mimir \S+|unknown", version.code_version())
    finally:
        version.code_version.cache_clear()


def test_a_git_that_fails_falls_back(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()  # looks like a checkout, but git cannot read it
    monkeypatch.setattr(version, "_SOURCE_ROOT", tmp_path)
    version.code_version.cache_clear()
    try:
        assert re.fullmatch(r"mimir \S+|unknown", version.code_version())
    finally:
        version.code_version.cache_clear()
