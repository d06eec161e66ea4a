"""The one schema module of the memory databases (world, keyframe and task databases).

The task database (owned by the planner node) has the same event table as the world database;
task memory may also share the world database when one process owns both.

Both databases are SQLite files opened through ``sqlite_utils.Database`` in WAL mode. A ``meta``
table records the database kind and its schema version; migrations are applied in order, each in
its own transaction, by the single writer. A database written by a newer schema version is
refused with :class:`SchemaVersionError` instead of being misread.

Durability: WAL mode with ``synchronous=FULL`` (the default, see ``config/memory.yaml``) syncs the
write-ahead log at every commit, so a write acknowledged to the caller survives a killed process
and also a power cut, which matters on a robot whose battery can be pulled. ``NORMAL`` would
already survive SIGKILL (the WAL is in the OS page cache) but may lose the last commits on a power
loss; it is allowed as a configurable trade for slow storage.

Writers: one per database, enforced with an advisory ``flock`` on ``<database>.lock``; the
holder writes its pid into that file so that a refused writer can say who holds it.
Readers open the file read-only (``mode=ro``) and never take the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, Self

import sqlite_utils

from mimir_memory.config import StorageConfig
from mimir_memory.errors import (
    ReadOnlyStoreError,
    SchemaVersionError,
    StorageError,
    WriterBusyError,
)

LOG = logging.getLogger(__name__)

SCHEMA_VERSION = 4
"""Current schema version of every database kind."""

DatabaseKind = Literal["world", "keyframes", "task"]
DATABASE_KINDS: tuple[DatabaseKind, ...] = ("world", "keyframes", "task")

Migration = Callable[[sqlite_utils.Database], None]


def _create_events(db: sqlite_utils.Database) -> None:
    db.execute(
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            event_id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL,
            stamp REAL NOT NULL,
            source TEXT NOT NULL,
            verdict TEXT NOT NULL,
            evidence TEXT NOT NULL,
            payload TEXT NOT NULL,
            digest TEXT NOT NULL
        )
        """
    )


def _world_v1(db: sqlite_utils.Database) -> None:
    _create_events(db)


def _world_v2(db: sqlite_utils.Database) -> None:
    db.execute("CREATE INDEX idx_events_stamp ON events (stamp)")
    db.execute("CREATE INDEX idx_events_kind ON events (kind)")


def _keyframes_v1(db: sqlite_utils.Database) -> None:
    _create_events(db)
    db.execute(
        """
        CREATE TABLE keyframes (
            frame_id TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,
            timestamp REAL NOT NULL,
            session TEXT NOT NULL,
            camera TEXT NOT NULL,
            trigger TEXT NOT NULL,
            action TEXT,
            parent_frame TEXT,
            robot_pose TEXT,
            tags TEXT NOT NULL,
            caption TEXT NOT NULL,
            image_file TEXT NOT NULL,
            thumb_file TEXT NOT NULL,
            width INTEGER NOT NULL,
            height INTEGER NOT NULL,
            dhash TEXT NOT NULL,
            bytes INTEGER NOT NULL
        )
        """
    )
    db.execute(
        """
        CREATE TABLE keyframe_nodes (
            frame_id TEXT NOT NULL REFERENCES keyframes(frame_id) ON DELETE CASCADE,
            node_id TEXT NOT NULL,
            PRIMARY KEY (frame_id, node_id)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE keyframe_labels (
            frame_id TEXT NOT NULL REFERENCES keyframes(frame_id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            label TEXT NOT NULL,
            source TEXT NOT NULL,
            stamp REAL NOT NULL,
            PRIMARY KEY (frame_id, position)
        )
        """
    )


def _keyframes_v2(db: sqlite_utils.Database) -> None:
    db.execute("CREATE INDEX idx_events_stamp ON events (stamp)")
    db.execute("CREATE INDEX idx_keyframes_timestamp ON keyframes (timestamp)")
    db.execute("CREATE INDEX idx_keyframe_nodes_node ON keyframe_nodes (node_id)")


def _keyframes_v3(db: sqlite_utils.Database) -> None:
    # where the camera stood and its intrinsics (JSON, NULL when the saver did not know them)
    db.execute("ALTER TABLE keyframes ADD COLUMN camera_view TEXT")


def _keyframes_v4(db: sqlite_utils.Database) -> None:
    # the segmentation of the frame, when the saver had it: an instance-id image (NULL: none)
    db.execute("ALTER TABLE keyframes ADD COLUMN mask_file TEXT")


def _unchanged(db: sqlite_utils.Database) -> None:
    """A version that changed another kind's tables only."""


MIGRATIONS: dict[DatabaseKind, tuple[tuple[int, Migration], ...]] = {
    "world": ((1, _world_v1), (2, _world_v2), (3, _unchanged), (4, _unchanged)),
    "keyframes": ((1, _keyframes_v1), (2, _keyframes_v2), (3, _keyframes_v3),
                  (4, _keyframes_v4)),
    "task": ((1, _world_v1), (2, _world_v2), (3, _unchanged), (4, _unchanged)),
}
"""Ordered migrations per database kind: (version reached, function)."""


def _reads_as_current(kind: DatabaseKind, version: int) -> bool:
    """Whether a reader may use a database of ``version`` as if it were current: every later
    migration of its kind changed other kinds' tables only."""
    return all(migration is _unchanged for target, migration in MIGRATIONS[kind]
               if target > version)


def storage_error(action: str, err: BaseException, remedy: str = "") -> StorageError:
    """Wrap an OS or SQLite failure into a :class:`StorageError` keeping its errno if any.

    ``remedy``, when given, is appended to the message after a semicolon: what the reader can
    do about the failure.
    """
    code = getattr(err, "errno", None)
    if code is None and isinstance(err, sqlite3.OperationalError):
        text = str(err).lower()
        if "disk is full" in text or "disk i/o" in text:
            code = errno.ENOSPC if "full" in text else errno.EIO
        elif "readonly" in text or "read-only" in text:
            code = errno.EROFS
    message = f"{action}: {err}" + (f"; {remedy}" if remedy else "")
    return StorageError(code or errno.EIO, message)


@dataclass
class DatabaseHandle:
    """An opened memory database.

    Attributes:
        db: The ``sqlite_utils`` database (autocommit connection; use :meth:`transaction`).
        path: File path of the database.
        kind: ``world`` or ``keyframes``.
        readonly: True for reader handles.
        snapshot: True for a reader of the file as it stood when opened (SQLite ``immutable``).
    """

    db: sqlite_utils.Database
    path: Path
    kind: DatabaseKind
    readonly: bool
    _lock_fd: int | None = field(default=None, repr=False)
    snapshot: bool = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite_utils.Database]:
        """Run a block in one ``BEGIN IMMEDIATE`` transaction; roll back on any exception.

        Raises:
            ReadOnlyStoreError: The handle is read-only.
            StorageError: SQLite reported an I/O, full-disk or read-only failure.
        """
        if self.readonly:
            raise ReadOnlyStoreError(f"{self.path} is opened read-only")
        conn = self.db.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as err:
            raise storage_error(f"cannot start a transaction on {self.path}", err) from err
        try:
            yield self.db
        except BaseException:
            # SQLite may already have rolled back by itself (e.g. SQLITE_FULL).
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as err:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise storage_error(f"cannot commit to {self.path}", err) from err

    def close(self) -> None:
        """Close the connection and release the writer lock."""
        self.db.conn.close()
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None


def _read_meta(db: sqlite_utils.Database) -> dict[str, str]:
    if "meta" not in db.table_names():
        return {}
    return {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta").fetchall()}


def _check_meta(meta: dict[str, str], kind: DatabaseKind, path: Path) -> int:
    if not meta:
        return 0
    found_kind = meta.get("kind")
    if found_kind != kind:
        raise SchemaVersionError(
            f"{path} is a {found_kind!r} database, expected a {kind!r} one; "
            "check memory_dir, or move this file away"
        )
    try:
        version = int(meta.get("schema_version", ""))
    except ValueError as err:
        raise SchemaVersionError(
            f"{path} has a malformed schema_version in its meta table; the file is damaged or "
            "not a mimir database, move it away or use another memory_dir"
        ) from err
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{path} was written by schema version {version}, newer than this mimir reads "
            f"(up to {SCHEMA_VERSION}); upgrade mimir or use another memory_dir"
        )
    return version


def _lock_holder(fd: int) -> int | None:
    """The pid the current holder wrote into the lock file, or None when it cannot be read."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _take_writer_lock(path: Path) -> int:
    lock_path = path.with_name(path.name + ".lock")
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise storage_error(
            f"cannot create the writer lock {lock_path}", err,
            remedy=f"make {lock_path.parent} writable or choose another memory_dir",
        ) from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError as err:
        holder = _lock_holder(fd)
        os.close(fd)
        pid = f" (pid {holder})" if holder is not None else ""
        raise WriterBusyError(
            f"{path} is held by another writer{pid}; stop that process or choose another "
            "memory_dir"
        ) from err
    # Record who holds the lock so that a refused writer can name it. Best effort: the lock
    # itself is the flock, not the file's content.
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def _migrate(handle: DatabaseHandle, version: int) -> None:
    for target, migration in MIGRATIONS[handle.kind]:
        if target <= version:
            continue
        with handle.transaction() as db:
            if target == 1:
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
                db.execute("INSERT INTO meta (key, value) VALUES ('kind', ?)", [handle.kind])
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('created', ?)", [repr(time.time())]
                )
            migration(db)
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                [str(target)],
            )
        LOG.info("migrated %s database %s to schema version %d", handle.kind, handle.path, target)


def open_database(
    path: str | Path,
    kind: DatabaseKind,
    *,
    readonly: bool = False,
    storage: StorageConfig | None = None,
    snapshot: bool = False,
) -> DatabaseHandle:
    """Open (and for a writer create and migrate) a memory database.

    Args:
        path: Database file. Its folder is created for a writer.
        kind: ``world`` or ``keyframes``.
        readonly: Open as a reader (``mode=ro``); the file must exist and be up to date.
        snapshot: With ``readonly``, read the file as it stands without SQLite's shared-memory
            index (``immutable``): nothing is created beside the database, and nothing a writer
            appends later is seen. Only for a database no writer has open (no ``-wal`` file);
            a plain reader creates the ``-wal`` and ``-shm`` files a live reader needs.
        storage: SQLite settings; defaults to :class:`StorageConfig`.

    Raises:
        SchemaVersionError: The file is of another kind, a newer version, or (for a reader) an
            older version that the writer has not migrated yet.
        WriterBusyError: Another writer holds the lock.
        StorageError: The file or folder cannot be created, opened or written.
    """
    if kind not in DATABASE_KINDS:
        raise SchemaVersionError(f"unknown database kind {kind!r}")
    storage = storage or StorageConfig()
    path = Path(path)
    if snapshot and not readonly:
        raise ValueError("snapshot needs readonly")
    if readonly:
        return _open_reader(path, kind, storage, snapshot)
    return _open_writer(path, kind, storage)


def _open_reader(path: Path, kind: DatabaseKind, storage: StorageConfig,
                 snapshot: bool = False) -> DatabaseHandle:
    if not path.is_file():
        raise StorageError(
            errno.ENOENT,
            f"no database at {path}; start the node that owns it first, or check memory_dir",
        )
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    if snapshot:
        uri += "&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as err:
        raise storage_error(f"cannot open {path} read-only", err,
                            remedy="check that memory_dir is readable") from err
    try:
        conn.execute(f"PRAGMA busy_timeout = {storage.busy_timeout_ms}")
        db = sqlite_utils.Database(conn)
        version = _check_meta(_read_meta(db), kind, path)
        if not _reads_as_current(kind, version):
            raise SchemaVersionError(
                f"{path} has schema version {version}, older than this mimir's "
                f"{SCHEMA_VERSION}; start its writer (the node that owns it) once to migrate it"
            )
    except BaseException as err:
        conn.close()
        if isinstance(err, sqlite3.Error):
            raise storage_error(f"cannot open {path} read-only", err,
                                remedy="check that memory_dir is readable") from err
        raise
    return DatabaseHandle(db=db, path=path, kind=kind, readonly=True, snapshot=snapshot)


def _open_writer(path: Path, kind: DatabaseKind, storage: StorageConfig) -> DatabaseHandle:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise storage_error(
            f"cannot create the folder of {path}", err,
            remedy="choose a memory_dir that this user can create and write",
        ) from err
    lock_fd = _take_writer_lock(path)
    conn: sqlite3.Connection | None = None
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {storage.busy_timeout_ms}")
        db = sqlite_utils.Database(conn)
        version = _check_meta(_read_meta(db), kind, path)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {storage.synchronous}")
        db.execute("PRAGMA foreign_keys = ON")
        handle = DatabaseHandle(db=db, path=path, kind=kind, readonly=False, _lock_fd=lock_fd)
        _migrate(handle, version)
    except BaseException as err:
        if conn is not None:
            conn.close()
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)
        if isinstance(err, sqlite3.Error):
            raise storage_error(
                f"cannot open {path} for writing", err,
                remedy="check that memory_dir is writable and has free space",
            ) from err
        raise
    return handle


def schema_version_of(handle: DatabaseHandle) -> int:
    """Schema version recorded in the ``meta`` table of an opened database."""
    return int(_read_meta(handle.db).get("schema_version", "0"))


class Store:
    """Base of the memory stores: one database handle, closed once, usable in ``with``."""

    handle: DatabaseHandle

    def close(self) -> None:
        """Close the database (and release the writer lock a writer holds)."""
        self.handle.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
