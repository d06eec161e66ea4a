"""Where mimir finds its installed configuration files."""

from __future__ import annotations

import os
from pathlib import Path

_REPO_CONFIG = Path(__file__).resolve().parents[1] / "config"


class ConfigFileNotFoundError(FileNotFoundError):
    """A configuration file that is in none of the places mimir looks."""


def config_dir() -> Path:
    """The configuration folder: $MIMIR_CONFIG_DIR, the source tree, or the package share."""
    override = os.environ.get("MIMIR_CONFIG_DIR")
    if override:
        return Path(override)
    if _REPO_CONFIG.is_dir():
        return _REPO_CONFIG
    try:
        from ament_index_python.packages import (  # noqa: PLC0415 - only on installed packages
            PackageNotFoundError,
            get_package_share_directory,
        )
    except ImportError as err:
        raise ConfigFileNotFoundError("no mimir configuration folder found") from err
    try:
        return Path(get_package_share_directory("mimir")) / "config"
    except PackageNotFoundError as err:
        raise ConfigFileNotFoundError("no mimir configuration folder found") from err


def config_file(name: str, override: str = "") -> Path:
    """``override`` when given (expanded), else ``name`` inside :func:`config_dir`.

    Raises:
        ConfigFileNotFoundError: the file does not exist.
    """
    path = Path(override).expanduser() if override else config_dir() / name
    if not path.is_file():
        raise ConfigFileNotFoundError(f"configuration file not found: {path}")
    return path


def cache_dir() -> Path:
    """Where mimir keeps files it can rebuild (decimated meshes...): ``$MIMIR_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/mimir``, else ``~/.cache/mimir``. Not created here."""
    override = os.environ.get("MIMIR_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "mimir"


class DataFolderError(OSError):
    """A data folder that cannot be created or is not a folder."""


def data_dir(path: str) -> Path:
    """A data folder from a parameter (``~`` expanded), created when missing.

    Raises:
        DataFolderError: The folder cannot be created (a file in the way, no permission...).
    """
    folder = Path(path).expanduser()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataFolderError(
            f"cannot create the data folder {folder} ({err.strerror or err}); choose a "
            "memory_dir that can be written, or fix the path") from err
    return folder
