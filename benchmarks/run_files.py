"""What the benchmark scripts read from a run of the simulation graph: JSON-lines files and the
processes of its nodes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; none when it is missing. A line that is not JSON (the
    one a running job is writing) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def node_pids(name: str) -> list[int]:
    """Pids of the running processes of graph node ``name`` (started with ``__node:=name``)."""
    found = subprocess.run(["pgrep", "-f", f"__node:={name} "], capture_output=True, text=True,
                           check=False)
    return [int(p) for p in found.stdout.split()]
