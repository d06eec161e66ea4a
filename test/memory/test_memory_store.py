"""Schema, event log, durability and configuration of the memory databases."""

from __future__ import annotations

import errno
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import sqlite_utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_helpers import obs

from mimir_memory import schema
from mimir_memory.config import (
    AssociationConfig,
    MemoryConfig,
    load_memory_config,
    memory_config_from_dict,
)
from mimir_memory.errors import (
    ConfigError,
    InvalidEventError,
    MemoryStoreError,
    SchemaVersionError,
    StorageError,
    WriterBusyError,
)
from mimir_memory.events import EventKind, EventLog, Evidence, MemoryEvent, Source, Verdict
from mimir_memory.world import WorldMemory

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- schema
def test_new_database_has_meta_wal_and_current_version(tmp_path: Path) -> None:
    handle = schema.open_database(tmp_path / "w.db", "world")
    meta = dict(handle.db.execute("SELECT key, value FROM meta").fetchall())
    assert meta["kind"] == "world"
    assert int(meta["schema_version"]) == schema.SCHEMA_VERSION
    assert handle.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert handle.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    handle.close()


def test_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    schema.open_database(path, "world").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(SchemaVersionError, match="newer"):
        schema.open_database(path, "world")
    with pytest.raises(SchemaVersionError):
        schema.open_database(path, "world", readonly=True)
    with pytest.raises(SchemaVersionError):
        WorldMemory.open(path)


def test_wrong_kind_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    schema.open_database(path, "world").close()
    with pytest.raises(SchemaVersionError, match=r"kind|expected"):
        schema.open_database(path, "keyframes")


def test_old_database_is_migrated_in_order_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    db = sqlite_utils.Database(sqlite3.connect(path, isolation_level=None))
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    db.execute("INSERT INTO meta VALUES ('kind', 'world'), ('schema_version', '1')")
    schema.MIGRATIONS["world"][0][1](db)
    db.execute(
        "INSERT INTO events (event_id, kind, stamp, source, verdict, evidence, payload, digest)"
        " VALUES ('x', 'hand_changed', 1.0, 'interaction', 'admit', '{}', '{}', 'd')"
    )
    db.conn.close()
    with pytest.raises(SchemaVersionError, match="writer"):
        schema.open_database(path, "world", readonly=True)
    handle = schema.open_database(path, "world")
    assert schema.schema_version_of(handle) == schema.SCHEMA_VERSION
    indexes = {r[0] for r in handle.db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "idx_events_stamp" in indexes
    assert EventLog(handle).count() == 1
    handle.close()


def test_a_reader_opens_an_older_database_whose_tables_did_not_change(tmp_path: Path) -> None:
    """Schema 4 changed the keyframe tables only: a world database of schema 3 is read as it
    is (a memory folder written before need not be migrated to be looked at), a keyframe
    database of schema 3 is not."""
    for kind in ("world", "keyframes"):
        path = tmp_path / f"{kind}.db"
        schema.open_database(path, kind).close()
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    reader = schema.open_database(tmp_path / "world.db", "world", readonly=True)
    assert schema.schema_version_of(reader) == 3
    reader.close()
    with pytest.raises(SchemaVersionError, match="writer"):
        schema.open_database(tmp_path / "keyframes.db", "keyframes", readonly=True)


def test_single_writer_many_readers(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    writer = WorldMemory.open(path)
    with pytest.raises(WriterBusyError):
        WorldMemory.open(path)
    readers = [WorldMemory.open(path, readonly=True) for _ in range(2)]
    writer.close()
    again = WorldMemory.open(path)  # the lock is released on close
    again.close()
    for reader in readers:
        reader.close()


def test_unwritable_location_is_a_typed_error(tmp_path: Path) -> None:
    # chmod does not stop root, so use a folder path whose parent is a regular file.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StorageError):
        WorldMemory.open(blocker / "sub" / "world.db")
    with pytest.raises(StorageError):
        WorldMemory.open(tmp_path / "missing.db", readonly=True)
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        try:
            with pytest.raises(StorageError):
                WorldMemory.open(locked / "world.db")
        finally:
            locked.chmod(0o700)


# -------------------------------------------------------------------------- event log
def test_event_validation() -> None:
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind="no_such_kind", stamp=1.0, source=Source.OPERATOR)  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.HAND_CHANGED, stamp=1.0, source="robot")  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.HAND_CHANGED, stamp=math.nan, source=Source.OPERATOR)
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.HAND_CHANGED, stamp="1", source=Source.OPERATOR)  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError):
        MemoryEvent(
            kind=EventKind.HAND_CHANGED, stamp=1.0, source=Source.OPERATOR, payload={"x": math.inf}
        )
    with pytest.raises(InvalidEventError):
        MemoryEvent(
            kind=EventKind.HAND_CHANGED, stamp=1.0, source=Source.OPERATOR, payload={"x": object()}
        )
    with pytest.raises(InvalidEventError):
        Evidence(keyframe_ids="abc")  # type: ignore[arg-type]
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.HAND_CHANGED, stamp=1.0, source=Source.OPERATOR, event_id="")
    a = MemoryEvent(
        kind=EventKind.HAND_CHANGED, stamp=1, source=Source.OPERATOR, payload={"b": 1, "a": (1,)}
    )
    b = MemoryEvent(
        kind=EventKind.HAND_CHANGED,
        stamp=1.0,
        source=Source.OPERATOR,
        payload={"a": [1], "b": 1},
        event_id=a.event_id,
    )
    assert a.digest == b.digest and a == b


def test_real_full_disk_rolls_back_the_batch(tmp_path: Path) -> None:
    world = WorldMemory.open(tmp_path / "w.db")
    world.ingest([obs("mug", [0, 0, 0])])
    before_count = world.log.count()
    before = world.graph_snapshot()
    pages = world.handle.db.execute("PRAGMA page_count").fetchone()[0]
    world.handle.db.execute(f"PRAGMA max_page_count = {pages}")
    big = [{"name": f"item {i}", "description": "x" * 2000} for i in range(40)]
    with pytest.raises(StorageError) as info:
        world.set_contents("mug_1", big, is_empty=False, stamp=2.0)
    assert info.value.errno == errno.ENOSPC
    assert world.log.count() == before_count
    assert world.graph_snapshot() == before
    world.close()
    with WorldMemory.open(tmp_path / "w.db") as again:
        assert again.graph_snapshot() == before


def test_failing_writer_leaves_nothing_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = WorldMemory.open(tmp_path / "w.db")
    world.ingest([obs("mug", [0, 0, 0])])
    count = world.log.count()
    before = world.graph_snapshot()
    original = EventLog.insert
    calls = {"n": 0}

    def flaky(self: EventLog, db: sqlite_utils.Database, event: MemoryEvent) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            raise sqlite3.OperationalError("database or disk is full")
        return original(self, db, event)

    monkeypatch.setattr(EventLog, "insert", flaky)
    with pytest.raises(StorageError):
        world.ingest([obs("mug", [0.01, 0, 0]), obs("bowl", [2, 0, 0]), obs("cup", [4, 0, 0])])
    monkeypatch.undo()
    assert world.log.count() == count
    assert world.graph_snapshot() == before
    world.ingest([obs("bowl", [2, 0, 0])])
    assert "bowl_1" in world.state.nodes
    world.close()


CHILD = textwrap.dedent(
    """
    import sys
    from mimir_memory.world import WorldMemory
    import numpy as np
    from mimir_memory.observations import ObjectObservation
    world = WorldMemory.open(sys.argv[1])
    i = 0
    while True:
        c = np.array([float(i % 50), float(i // 50), 0.0])
        ev = world.ingest([ObjectObservation("box", c, c - 0.1, c + 0.1, float(i))])[0]
        print(ev.event_id, flush=True)
        prop = world.set_property(ev.payload["node_id"], "pickable", bool(i % 2),
                                  confidence=0.5, stamp=float(i))
        print(prop.event_id, flush=True)
        i += 1
    """
)


def test_sigkill_mid_burst_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    acked: list[str] = []
    for line in proc.stdout:
        acked.append(line.strip())
        if len(acked) >= 120:
            break
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    # Only complete lines were acknowledged; a line cut by the kill is ignored.
    acked.extend(line for line in rest.split("\n")[:-1] if line.strip())
    assert proc.returncode == -signal.SIGKILL
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    world = WorldMemory.open(path)
    stored = {e.event_id for e in world.log.iter_events()}
    assert set(acked) <= stored
    snapshot = world.graph_snapshot()
    world.close()
    with WorldMemory.open(path, readonly=True) as reader:
        assert reader.graph_snapshot() == snapshot
    assert len(snapshot["nodes"]) >= 60


# --------------------------------------------------------- projection == rebuilt state
LABELS = ["mug", "cabinet", "coffee mug"]
OPS = st.one_of(
    st.tuples(
        st.just("ingest"),
        st.lists(
            st.tuples(
                st.sampled_from(LABELS),
                st.sampled_from([0.0, 0.1, 0.3, 1.0, 1.2]) | st.floats(-2, 2, allow_nan=False),
                st.sampled_from([0.0, 0.2, 1.5]),
            ),
            min_size=1,
            max_size=4,
        ),
    ),
    st.tuples(
        st.just("prop"),
        st.integers(0, 9),
        st.sampled_from(["openable", "pickable", "material"]),
        st.one_of(st.booleans(), st.text(max_size=5), st.floats(allow_nan=False, width=32)),
        st.sampled_from(list(Verdict)),
    ),
    st.tuples(st.just("parent"), st.integers(0, 9), st.integers(-1, 9)),
    st.tuples(st.just("parent"), st.integers(0, 9), st.integers(1, 3)),
    st.tuples(st.just("contents"), st.integers(0, 9), st.lists(st.text(min_size=1, max_size=4))),
    st.tuples(st.just("outcome"), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("link"), st.integers(0, 9), st.integers(0, 9)),
    st.tuples(st.just("replay"), st.integers(0, 30)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, max_size=20))
def test_live_state_equals_state_rebuilt_from_the_database(ops: list[tuple]) -> None:
    config = MemoryConfig(association=AssociationConfig(0.5))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.db"
        world = WorldMemory.open(path, config=config)
        stamp = 0.0
        for op in ops:
            stamp += 1.0
            ids = sorted(world.state.nodes)

            def pick(i: int, ids: list[str] = ids) -> str:
                return ids[i % len(ids)] if ids else f"ghost_{i}"

            try:
                if op[0] == "ingest":
                    world.ingest([obs(lab, [x, y, 0.0], stamp=stamp) for lab, x, y in op[1]])
                elif op[0] == "prop":
                    world.set_property(
                        pick(op[1]),
                        op[2],
                        op[3],
                        confidence=0.5,
                        stamp=stamp,
                        verdict=op[4],
                        evidence=Evidence(keyframe_ids=(f"kf{op[1]}",)),
                    )
                elif op[0] == "parent":
                    parent = None if op[2] < 0 else pick(op[1] + op[2])
                    world.set_parent(
                        pick(op[1]), parent, None if parent is None else "container", stamp=stamp
                    )
                elif op[0] == "contents":
                    items = [{"name": n} for n in op[2]]
                    world.set_contents(pick(op[1]), items, is_empty=not items, stamp=stamp)
                elif op[0] == "outcome":
                    world.record_outcome(pick(op[1]), "Open", op[2], stamp=stamp)
                elif op[0] == "link":
                    world.link_keyframe(f"kf{op[2]}", [pick(op[1])], stamp=stamp)
                else:
                    events = list(world.log.iter_events())
                    if events:
                        assert world.append([events[op[1] % len(events)]]) == []
            except MemoryStoreError:
                pass  # bad operations are refused with a typed error and change nothing
        live = world.graph_snapshot()
        protected = world.referenced_keyframes()
        past = world.as_of(math.inf).snapshot()
        world.close()
        with WorldMemory.open(path, config=config) as rebuilt:
            assert rebuilt.graph_snapshot() == live
            assert rebuilt.referenced_keyframes() == protected
        assert past["nodes"] == live["nodes"]


# ----------------------------------------------------------------------------- config
def test_shipped_config_loads() -> None:
    config = load_memory_config(REPO / "config" / "memory.yaml")
    assert config.association.radius("cabinet") == pytest.approx(0.6)
    assert config.association.radius("Unknown Thing") == config.association.default_radius_m
    assert config.storage.synchronous == "FULL"


def test_bad_config_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        memory_config_from_dict({"association": {"default_radius_m": -1}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"association": {"label_radius_m": {"mug": math.nan}}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"association": {"radius": 1}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"nonsense": {}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"storage": {"synchronous": "OFF"}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"keyframes": {"max_pixels": 0}})
    with pytest.raises(ConfigError):
        memory_config_from_dict([1, 2])
    bad = tmp_path / "bad.yaml"
    bad.write_text("association: [unclosed")
    with pytest.raises(ConfigError):
        load_memory_config(bad)
    with pytest.raises(ConfigError):
        load_memory_config(tmp_path / "absent.yaml")
