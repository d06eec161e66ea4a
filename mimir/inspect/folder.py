"""A memory folder opened for looking only: world, task and keyframe memory through the memory
core's readers, which never take the writer's lock, so a robot may be writing meanwhile.

Nothing here writes: the databases are opened ``mode=ro`` and the files are only read.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir_memory.display import display_state
from mimir_memory.errors import MemoryStoreError, SchemaVersionError, UnknownKeyframeError
from mimir_memory.events import WORLD_KINDS, EventKind, MemoryEvent, Verdict
from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.keyframes import KeyframeRecord, KeyframeStore, Trigger
from mimir_memory.schema import DatabaseHandle
from mimir_memory.task import TaskMemory
from mimir_memory.world import WorldMemory, field_event_ids
from mimir_planner.trace import TRACE_FILE, read_trace

#: Fields of a node whose history the node page lists besides its properties.
HISTORY_FIELDS = ("created", "position", "parent", "contents", "task_history", "hypotheses",
                  "misses", "merged")


class InspectError(Exception):
    """A folder the inspector cannot show; the message says what to give instead."""


@dataclass(frozen=True)
class NodeState:
    """What the map shows of one node: its box, label and state."""

    node: SceneNode
    state: str  # locked, open, inspected, stale, unknown


@dataclass(frozen=True)
class PathPoint:
    """A robot pose a keyframe recorded (map frame)."""

    stamp: float
    x: float
    y: float
    yaw: float


def memory_folder(path: Path) -> Path:
    """The memory folder of ``path``: the folder itself or a run folder's ``memory/``.

    Raises:
        InspectError: neither holds a world.db.
    """
    path = Path(path).expanduser()
    for candidate in (path, path / "memory"):
        if (candidate / "world.db").is_file():
            return candidate.resolve()
    raise InspectError(f"no world.db in {path} or {path / 'memory'}: give a run folder of "
                       "mimir sim or a memory folder (memory_dir of the nodes)")


def writer_open(db: Path) -> bool:
    """Whether a writer has ``db`` open (SQLite keeps a write-ahead log beside it then)."""
    return db.with_name(db.name + "-wal").exists()


def file_stamp(db: Path) -> tuple[int, int]:
    """Modification time and size of ``db`` (what changes when a writer checkpoints into it)."""
    try:
        info = db.stat()
    except FileNotFoundError:
        return (0, 0)
    return (info.st_mtime_ns, info.st_size)


class MemoryFolder:
    """Read-only view of one memory folder; safe to share between server threads.

    Raises (on construction):
        InspectError: no world database, one of a newer schema, or one that cannot be read.
    """

    def __init__(self, path: Path) -> None:
        self.root = memory_folder(path)
        self._lock = threading.RLock()
        self._stamps: dict[Path, tuple[int, int]] = {}
        self.world = self._open_world()
        self.keyframes: KeyframeStore | None = None
        try:
            self.keyframes = self._open_keyframes()
        except InspectError:
            self.world.close()
            raise

    # A database no writer has open is read as a snapshot, so that looking creates no file
    # beside it; once a writer opens it (its write-ahead log appears) or has written to it, it
    # is opened again: live while the writer works.
    def _open_world(self) -> WorldMemory:
        db = self.root / "world.db"
        self._stamps[db] = file_stamp(db)
        try:
            return WorldMemory.open(db, readonly=True, snapshot=not writer_open(db))
        except SchemaVersionError as err:
            raise InspectError(f"{db} cannot be shown: {err}") from err
        except MemoryStoreError as err:
            raise InspectError(f"cannot read {db}: {err}") from err

    def _open_keyframes(self) -> KeyframeStore | None:
        db = self.root / "keyframes" / KeyframeStore.DB_NAME
        if not db.is_file():
            return None
        self._stamps[db] = file_stamp(db)
        try:
            return KeyframeStore.open(db.parent, readonly=True, snapshot=not writer_open(db))
        except MemoryStoreError as err:
            raise InspectError(f"cannot read the keyframes of {self.root}: {err}") from err

    def close(self) -> None:
        self.world.close()
        if self.keyframes is not None:
            self.keyframes.close()

    # ------------------------------------------------------------------ time
    def refresh(self) -> int:
        """Fold what a writer appended since the last look; the world revision."""
        with self._lock:
            if self._stale(self.world.handle):
                self.world.close()
                self.world = self._open_world()
            kf = self.keyframes
            if kf is None or self._stale(kf.handle):
                fresh = self._open_keyframes()
                if kf is not None:
                    kf.close()
                self.keyframes = fresh
            self.world.refresh()
            return self.world.revision

    def _stale(self, handle: DatabaseHandle) -> bool:
        """Whether a snapshot no longer shows the file: a writer has it open now, or wrote to
        it (and closed it) since the snapshot was taken."""
        path = handle.path
        return handle.snapshot and (writer_open(path) or file_stamp(path) != self._stamps[path])

    def last_change(self) -> int:
        """Sequence number of the newest world event other than perception's fusion of a view
        (what a person watching would call a change; fusion moves positions many times a
        second)."""
        with self._lock:
            row = self.world.handle.db.execute(
                "SELECT MAX(seq) FROM events WHERE kind != ?",
                [EventKind.OBSERVATION_FUSED.value]).fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def time_range(self) -> tuple[float, float]:
        """First and last stamp of the world log (0, 0 when it is empty)."""
        with self._lock:
            row = self.world.handle.db.execute(
                "SELECT MIN(stamp), MAX(stamp) FROM events").fetchone()
        return (float(row[0]), float(row[1])) if row and row[0] is not None else (0.0, 0.0)

    def graph(self, at: float | None = None) -> SceneGraphState:
        """The scene graph now, or as it stood with the events stamped at or before ``at``."""
        with self._lock:
            self.refresh()
            return self.world.state if at is None else self.world.as_of(at)

    # ------------------------------------------------------------------ map and nodes
    def map_nodes(self, graph: SceneGraphState) -> list[NodeState]:
        """Every node with its state, holders (no parent) first, then by id."""
        nodes = sorted(graph.nodes.values(), key=lambda n: (n.parent is not None, n.node_id))
        return [NodeState(n, display_state(n)) for n in nodes]

    @staticmethod
    def node(graph: SceneGraphState, node_id: str) -> SceneNode | None:
        """The node of ``graph`` with this id (a merged id gives the node it went into)."""
        try:
            return graph.node(node_id)
        except MemoryStoreError:
            return None

    def why(self, node: SceneNode, field: str) -> list[MemoryEvent]:
        """The events behind ``field`` of ``node`` (oldest first), as
        :meth:`WorldMemory.why` gives them, for a node of any time's graph."""
        with self._lock:
            return self.world.log.get_many(field_event_ids(node, field) or [])

    def events(self, ids: list[str]) -> list[MemoryEvent]:
        with self._lock:
            return self.world.log.get_many(ids)

    def children(self, graph: SceneGraphState, node_id: str) -> list[SceneNode]:
        return sorted((graph.nodes[c] for c in graph.children.get(node_id, set())
                       if c in graph.nodes), key=lambda n: n.node_id)

    # ------------------------------------------------------------------ timeline
    def timeline(self, *, kind: str = "", verdict: str = "", node_id: str = "",
                 until: float | None = None, limit: int = 200,
                 skip_fusion: bool = True) -> list[MemoryEvent]:
        """World events, newest first, filtered; perception's fusion events are left out unless
        asked for (they are most of the log and say little one by one)."""
        where: list[str] = ["1=1"]
        params: list[Any] = []
        if kind:
            where.append("kind = ?")
            params.append(kind)
        elif skip_fusion:
            where.append("kind != ?")
            params.append(EventKind.OBSERVATION_FUSED.value)
        if verdict:
            where.append("verdict = ?")
            params.append(verdict)
        if node_id:
            where.append("instr(payload, ?) > 0")
            params.append(json.dumps(node_id))
        if until is not None:
            where.append("stamp <= ?")
            params.append(until)
        sql = (f"SELECT event_id FROM events WHERE {' AND '.join(where)} "
               "ORDER BY seq DESC LIMIT ?")
        with self._lock:
            ids = [row[0] for row in self.world.handle.db.execute(sql, [*params, limit])]
            return list(reversed(self.world.log.get_many(ids)))

    @staticmethod
    def event_kinds() -> list[str]:
        return sorted(k.value for k in WORLD_KINDS)

    @staticmethod
    def verdicts() -> list[str]:
        return [v.value for v in Verdict]

    # ------------------------------------------------------------------ keyframes
    def keyframe_list(self, *, node_id: str = "", trigger: str = "", camera: str = "",
                      start: float | None = None, end: float | None = None,
                      limit: int = 60) -> list[KeyframeRecord]:
        """Keyframes matching every filter, newest first (unknown trigger: none)."""
        if self.keyframes is None:
            return []
        if trigger and trigger not in {t.value for t in Trigger}:
            return []
        with self._lock:
            return self.keyframes.query(node_ids=[node_id] if node_id else None,
                                        trigger=trigger or None, camera=camera or None,
                                        start=start, end=end, limit=limit)

    def keyframe(self, frame_id: str) -> KeyframeRecord | None:
        if self.keyframes is None:
            return None
        try:
            with self._lock:
                return self.keyframes.get(frame_id)
        except UnknownKeyframeError:
            return None

    def keyframe_file(self, frame_id: str, thumbnail: bool = False) -> Path | None:
        """The image file of a keyframe, only when it lies in the store's image (or thumbnail)
        folder itself."""
        record = self.keyframe(frame_id)
        if record is None:
            return None
        assert self.keyframes is not None
        folder = (self.keyframes.thumb_dir if thumbnail else self.keyframes.image_dir).resolve()
        path = (record.thumb_path if thumbnail else record.image_path).resolve()
        # a damaged or hostile index row must not point the server at any other file
        if path.parent != folder or not path.is_file():
            return None
        return path

    def cameras(self) -> list[str]:
        if self.keyframes is None:
            return []
        with self._lock:
            rows = self.keyframes.handle.db.execute("SELECT DISTINCT camera FROM keyframes")
            return sorted(str(r[0]) for r in rows)

    def robot_path(self, until: float | None = None) -> list[PathPoint]:
        """The robot poses the keyframes recorded, oldest first (map frame)."""
        if self.keyframes is None:
            return []
        sql = "SELECT timestamp, robot_pose FROM keyframes WHERE robot_pose IS NOT NULL"
        params: list[Any] = []
        if until is not None:
            sql += " AND timestamp <= ?"
            params.append(until)
        with self._lock:
            rows = self.keyframes.handle.db.execute(sql + " ORDER BY timestamp", params)
            out = []
            for stamp, pose in rows:
                try:
                    x, y, yaw = (float(v) for v in json.loads(pose))
                except (ValueError, TypeError):
                    continue  # a pose the writer could not have stored; not drawn
                if all(math.isfinite(v) for v in (x, y, yaw)):
                    out.append(PathPoint(float(stamp), x, y, yaw))
            return out

    # ------------------------------------------------------------------ task and planner
    def task(self) -> dict[str, Any] | None:
        """The task memory's snapshot (agenda, hand, failed bindings); None without task.db."""
        path = self.root / "task.db"
        if not path.is_file():
            return None
        try:
            with TaskMemory.open(path, readonly=True, snapshot=not writer_open(path)) as task:
                return task.snapshot()
        except MemoryStoreError as err:
            raise InspectError(f"cannot read {path}: {err}") from err

    def planner_trace(self) -> list[dict[str, Any]]:
        """The planner's step records (oldest first); empty when the planner wrote none."""
        return read_trace(self.root / TRACE_FILE)

    def writes_between(self, start: float, end: float, limit: int = 50) -> list[MemoryEvent]:
        """Non-fusion world events stamped within a planner step."""
        sql = ("SELECT event_id FROM events WHERE stamp >= ? AND stamp <= ? AND kind != ? "
               "ORDER BY seq LIMIT ?")
        with self._lock:
            rows = self.world.handle.db.execute(
                sql, [start, end, EventKind.OBSERVATION_FUSED.value, limit])
            return self.world.log.get_many([r[0] for r in rows])

