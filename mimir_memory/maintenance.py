"""Checking and repairing a memory folder (``mimir memory check`` / ``mimir memory repair``).

A check opens every database of a folder read-only (it can run beside a live robot), runs
SQLite's integrity check, replays the logs and lists every stored event the projections keep
out because it does not apply (written before a bound existed, or by a broken writer). A repair
takes the writer lock of world memory and appends one ``event_retracted`` event per such
event: the log stays append-only and the history stays readable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mimir_memory.config import MemoryConfig
from mimir_memory.errors import MemoryStoreError, StorageError
from mimir_memory.task import TaskMemory
from mimir_memory.world import WorldMemory


@dataclass
class DatabaseReport:
    """What a check found in one database."""

    name: str
    path: Path
    present: bool
    integrity: str = ""
    events: int = 0
    skipped: list[str] = field(default_factory=list)
    """One line per stored event that does not apply."""
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the database is absent or sound and every event applies."""
        return not self.present or (self.integrity == "ok" and not self.skipped
                                    and not self.error)


def _integrity(path: Path) -> str:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute("PRAGMA integrity_check").fetchall()
    except sqlite3.Error as err:
        return f"cannot be read: {err}"
    return "; ".join(str(r[0]) for r in rows)


def _check_one(name: str, path: Path, replay: Callable[[Path], tuple[int, list[str]]]
               ) -> DatabaseReport:
    report = DatabaseReport(name, path, path.is_file())
    if not report.present:
        return report
    report.integrity = _integrity(path)
    try:
        report.events, report.skipped = replay(path)
    except MemoryStoreError as err:
        report.error = str(err)
    return report


def _replay_world(config: MemoryConfig) -> Callable[[Path], tuple[int, list[str]]]:
    def replay(path: Path) -> tuple[int, list[str]]:
        with WorldMemory.open(path, config=config, readonly=True) as world:
            lines = [f"seq {s.seq} {s.event_id} ({s.kind}): {s.reason}"
                     for s in world.skipped_events]
            return world.log.count(), lines
    return replay


def _replay_task(config: MemoryConfig) -> Callable[[Path], tuple[int, list[str]]]:
    def replay(path: Path) -> tuple[int, list[str]]:
        task = TaskMemory.open(path, config=config, readonly=True)
        try:
            lines = [f"seq {seq} {event_id}: {reason}" for seq, event_id, reason in task.skipped]
            return task.log.count(), lines
        finally:
            task.handle.close()
    return replay


def _replay_keyframes(path: Path) -> tuple[int, list[str]]:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            count = int(db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    except sqlite3.Error as err:
        raise StorageError(0, f"cannot read {path}: {err}") from err
    return count, []


def check_memory(folder: str | Path, config: MemoryConfig | None = None
                 ) -> list[DatabaseReport]:
    """Check every database of a memory folder without writing anything.

    Raises:
        StorageError: The folder does not exist.
    """
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise StorageError(2, f"memory folder {root} does not exist")
    config = config or MemoryConfig()
    return [
        _check_one("world", root / "world.db", _replay_world(config)),
        _check_one("task", root / "task.db", _replay_task(config)),
        _check_one("keyframes", root / "keyframes" / "keyframes.db", _replay_keyframes),
    ]


def repair_memory(folder: str | Path, *, stamp: float, config: MemoryConfig | None = None,
                  reason: str = "mimir memory repair") -> list[str]:
    """Retract every world event that does not apply; returns the retracted event ids.

    Raises:
        WriterBusyError: A scene graph node (or another tool) holds world memory.
        StorageError: The folder or database cannot be opened for writing.
    """
    path = Path(folder).expanduser() / "world.db"
    if not path.is_file():
        raise StorageError(2, f"no world memory at {path}")
    with WorldMemory.open(path, config=config or MemoryConfig()) as world:
        events = world.retract_skipped(stamp=stamp, reason=reason)
    return [str(e.payload["event_id"]) for e in events]


__all__ = ["DatabaseReport", "check_memory", "repair_memory"]
