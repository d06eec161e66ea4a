"""The ground layer's folder rules: configuration, data and cache folders."""

from __future__ import annotations

from pathlib import Path

import pytest

from mimir.paths import (
    ConfigFileNotFoundError,
    DataFolderError,
    cache_dir,
    config_dir,
    config_file,
    data_dir,
)


def test_config_folder_follows_the_override(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MIMIR_CONFIG_DIR", raising=False)
    assert (config_dir() / "sim.yaml").is_file()
    monkeypatch.setenv("MIMIR_CONFIG_DIR", str(tmp_path))
    assert config_dir() == tmp_path
    (tmp_path / "a.yaml").write_text("{}\n", encoding="utf-8")
    assert config_file("a.yaml") == tmp_path / "a.yaml"
    with pytest.raises(ConfigFileNotFoundError, match=r"missing\.yaml"):
        config_file("missing.yaml")
    with pytest.raises(ConfigFileNotFoundError):
        config_file("a.yaml", override=str(tmp_path / "nowhere.yaml"))


def test_cache_folder_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIMIR_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "mimir"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "mimir"
    monkeypatch.setenv("MIMIR_CACHE_DIR", str(tmp_path / "own"))
    assert cache_dir() == tmp_path / "own"
    assert not (tmp_path / "own").exists()  # looked up, not created


def test_data_folder_is_created_or_refused(tmp_path: Path) -> None:
    made = data_dir(str(tmp_path / "a" / "b"))
    assert made.is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(DataFolderError):
        data_dir(str(blocker / "sub"))
