"""Which code made a result: the source checkout's commit, or the installed package's version.

An evaluation may be resumed over several sittings while the code moves on; every run records
:func:`code_version` in its ``results.json`` so a report can say which trials ran on what.
"""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

_SOURCE_ROOT = Path(__file__).resolve().parents[1]
#: Seconds ``git describe`` may take before the installed version is used instead.
GIT_TIMEOUT_S = 10.0


@cache
def code_version() -> str:
    """``git describe --always --dirty`` of the source tree this package runs from (a commit,
    ``-dirty`` when files differ from it), else ``mimir <version>`` of the installed
    distribution, else ``unknown``."""
    if (_SOURCE_ROOT / ".git").exists():
        try:
            done = subprocess.run(
                ["git", "-C", str(_SOURCE_ROOT), "describe", "--always", "--dirty",
                 "--abbrev=7"], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                check=True)
            described = done.stdout.strip()
            if described:
                return described
        except (OSError, subprocess.SubprocessError):
            pass  # no git, or not a checkout git can read: the installed version says enough
    try:
        return f"mimir {version('mimir')}"
    except PackageNotFoundError:
        return "unknown"
