"""The planner's trace: one JSON line per planner call, kept in the memory folder so that every
deployment (robot, replay or simulation) leaves a record of why the robot did what it did.

A record holds the instruction, the active goal, the candidates memory offered, the keyframes
retrieval chose with the reason for each, the plan, the primitive run and its outcome, and the
stamps the step began and ended at (the inspector lists the memory writes between them).

The file is bounded: past ``max_bytes`` it is renamed to ``planner_trace.jsonl.1`` (replacing
the older one) and a new file is begun, so a robot that runs for weeks keeps the newest steps.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

LOG = logging.getLogger(__name__)

#: File name of the trace inside a memory folder.
TRACE_FILE = "planner_trace.jsonl"


class PlannerTrace:
    """Appends step records to ``<memory_dir>/planner_trace.jsonl``.

    A record that cannot be written (disk full, folder gone) is logged and dropped: the trace
    must never stop the robot.

    Raises (on construction):
        ValueError: ``max_bytes`` is not positive.
    """

    def __init__(self, memory_dir: Path, max_bytes: int = 20_000_000) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
        self.path = Path(memory_dir) / TRACE_FILE
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def append(self, record: Mapping[str, Any]) -> bool:
        """Write one record; False (and a warning) when it could not be written."""
        line = json.dumps(_finite(dict(record)), sort_keys=True, default=str) + "\n"
        with self._lock:
            try:
                if self.path.is_file() and self.path.stat().st_size + len(line) > self.max_bytes:
                    self.path.replace(self.path.with_name(TRACE_FILE + ".1"))
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line)
            except OSError as err:
                LOG.warning("planner trace: cannot write %s: %s", self.path, err)
                return False
        return True


def read_trace(path: Path, limit: int = 2000) -> list[dict[str, Any]]:
    """The newest ``limit`` records of a trace file (oldest first); lines that are not JSON
    objects (a line being written, a damaged file) are skipped. A missing file is empty."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines()[-limit:]:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities as None (JSON has no spelling for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
