"""Lint and type checks run as tests over the project's own code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        raise FileNotFoundError(f"{name} is not installed beside {sys.executable}")
    return found


def test_ruff_is_clean() -> None:
    proc = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_is_clean() -> None:
    proc = subprocess.run([_tool("mypy"), "--config-file", "mypy.ini", "--no-incremental"],
                          cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_import_contracts_hold() -> None:
    """The layers, ROS-free cores and acyclic contracts of ``.importlinter``."""
    proc = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_module_sits_in_a_layer() -> None:
    """A new top-level module of ``mimir`` must be placed in a layer of ``.importlinter``."""
    text = (REPO / ".importlinter").read_text()
    for path in sorted((REPO / "mimir").iterdir()):
        if path.name.startswith("_") or path.name == "__pycache__":
            continue
        if path.suffix == ".py" or (path / "__init__.py").exists():
            assert f"mimir.{path.stem}" in text, f"mimir/{path.name} is in no layer"
