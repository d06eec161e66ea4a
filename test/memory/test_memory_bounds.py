"""First aid in the memory core: no input can brick world memory.

Each case here is one a hostile or broken peer produced against the running nodes; the core
refuses it with a typed error and writes nothing, and a log that already holds such an event
still opens, skips it, and can be repaired by appending compensating events.
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from memory_helpers import obs

from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError, bounds_from_dict, bounds_table
from mimir_memory.config import ConfigError, memory_config_from_dict
from mimir_memory.errors import (
    FAILURE_CLASSES,
    DuplicateEventError,
    GraphConsistencyError,
    InvalidEventError,
    InvalidValueError,
    MemoryStoreError,
    UnknownNodeError,
    failure_class,
)
from mimir_memory.events import EventKind, MemoryEvent, Source, Verdict, canonical_json
from mimir_memory.observations import ObjectObservation
from mimir_memory.world import WorldMemory


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# ------------------------------------------------------------------------------ the table
def test_bounds_refuse_what_a_robot_cannot_see() -> None:
    b = DEFAULT_BOUNDS
    assert b.point([1.0, -2.0, 0.5], "p") == (1.0, -2.0, 0.5)
    for bad in ([1e155, 0, 0], [0, -1e308, 0], [math.nan, 0, 0], [0, math.inf, 0], [1, 2],
                "abc", [True, 0, 0]):
        with pytest.raises(BoundsError):
            b.point(bad, "p")
    b.box([0, 0, 0], [-0.1, -0.1, -0.1], [0.1, 0.1, 0.1])
    with pytest.raises(BoundsError, match="outside its box"):
        b.box([5, 0, 0], [-0.1, -0.1, -0.1], [0.1, 0.1, 0.1])
    with pytest.raises(BoundsError, match="longer than"):
        b.box([0, 0, 0], [-40, -1, -1], [40, 1, 1])
    with pytest.raises(BoundsError, match="ahead of the receiving clock"):
        b.stamp(2.0**31 - 1, now=100.0)
    assert b.stamp(104.0, now=100.0) == 104.0
    assert b.stamp(2.0**31 - 1, now=None) == 2.0**31 - 1  # no clock yet: nothing to compare
    with pytest.raises(BoundsError):
        b.stamp(-1.0, now=None)
    with pytest.raises(BoundsError):
        b.ident("", "label")
    with pytest.raises(BoundsError, match="control"):
        b.ident("bowl\x00", "label")
    with pytest.raises(BoundsError, match="characters long"):
        b.ident("x" * (b.max_id_chars + 1), "label")


def test_json_is_parsed_within_bounds_never_by_recursion() -> None:
    b = DEFAULT_BOUNDS
    assert b.parse_json('{"a": [1, 2.5, "x"]}', "v") == {"a": [1, 2.5, "x"]}
    assert b.parse_json('"[[[["', "v") == "[[[["  # brackets inside a string do not nest
    for text in (_nested(100_000), _nested(b.max_json_depth + 1), "NaN", "[Infinity]",
                 "{half", " " * (b.max_json_chars + 1)):
        with pytest.raises(BoundsError):
            b.parse_json(text, "v")
    deep: list[object] = []
    cursor = deep
    for _ in range(100_000):  # a Python value nested past the recursion limit
        inner: list[object] = []
        cursor.append(inner)
        cursor = inner
    with pytest.raises(BoundsError, match="nested deeper"):
        b.json_value(deep, "v")


def test_bounds_come_from_the_memory_settings_and_are_validated() -> None:
    config = memory_config_from_dict({"bounds": {"workspace_m": 50.0}})
    assert config.bounds.workspace_m == 50.0
    assert config.bounds.max_json_depth == DEFAULT_BOUNDS.max_json_depth
    for bad in ({"workspace_m": -1.0}, {"nope": 1}, {"max_items": 1.5}, {"max_future_s": "x"}):
        with pytest.raises(ConfigError):
            memory_config_from_dict({"bounds": bad})
    with pytest.raises(BoundsError):
        bounds_from_dict({"workspace_m": math.nan})
    names = [row[0] for row in bounds_table()]
    assert names[0] == "workspace_m" and all(row[2] for row in bounds_table())


def test_every_memory_error_has_a_failure_class() -> None:
    from mimir_memory import errors

    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, MemoryStoreError)
               and c is not MemoryStoreError]
    for cls in classes:
        assert any(base in FAILURE_CLASSES for base in cls.__mro__), cls
    assert failure_class(GraphConsistencyError("cycle")) == "INVALID_REQUEST"
    assert failure_class(UnknownNodeError("x")) == "UNKNOWN_NODE"
    assert failure_class(DuplicateEventError("x")) == "DUPLICATE_EVENT"
    assert failure_class(ValueError("x")) == "INVALID_REQUEST"
    assert failure_class(OSError("x")) == "STORAGE_ERROR"


# --------------------------------------------------------------------- world memory refuses
@pytest.fixture
def world(tmp_path: Path) -> WorldMemory:
    memory = WorldMemory.open(tmp_path / "world.db")
    yield memory
    memory.close()


def _box_obs(label: str, centroid: list[float], lo: list[float], hi: list[float],
             stamp: float = 1.0) -> ObjectObservation:
    return ObjectObservation(label=label, centroid=np.array(centroid), bbox_min=np.array(lo),
                             bbox_max=np.array(hi), stamp=stamp)


def test_far_huge_and_inconsistent_observations_are_refused(world: WorldMemory) -> None:
    world.ingest([obs("bowl", [1.0, 0.0, 0.8])])
    count = world.log.count()
    bad = [
        obs("bowl", [1e155, 0.0, 0.0]),
        obs("bowl", [1e300, 0.0, 0.0]),
        _box_obs("bowl", [1.0, 0.0, 0.8], [-1e308, -1e308, -1e308], [1e308, 1e308, 1e308]),
        _box_obs("bowl", [9.0, 0.0, 0.8], [0.9, -0.1, 0.7], [1.1, 0.1, 0.9]),
        obs("b\x07wl", [1.0, 0.0, 0.8]),
    ]
    for item in bad:
        with pytest.raises(InvalidValueError):
            world.ingest([item])
        with pytest.raises(InvalidValueError):
            world.ingest([obs("cup", [2.0, 0.0, 0.8]), item])  # nothing of the batch is kept
    with pytest.raises(InvalidValueError, match="ahead of the receiving clock"):
        world.ingest([obs("bowl", [1.0, 0.0, 0.8], stamp=2.0**31 - 1)], now=100.0)
    assert world.log.count() == count
    # the ordinary bowl after all that still fuses
    (event,) = world.ingest([obs("bowl", [1.02, 0.0, 0.8], stamp=2.0)])
    assert event.kind is EventKind.OBSERVATION_FUSED
    # far query points cannot overflow the distance code
    assert world.nodes_near([1e200, 0.0, 0.0], 1.0) == []


def test_updates_are_refused_with_their_true_class(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [0.0, 0.0, 1.0]), obs("drawer", [1.0, 0.0, 0.5])])
    count = world.log.count()
    # a parent cycle is a bad request, not a storage failure
    world.set_parent("drawer_1", "cabinet_1", "container", stamp=2.0)
    with pytest.raises(GraphConsistencyError) as cycle:
        world.set_parent("cabinet_1", "drawer_1", "container", stamp=3.0)
    assert failure_class(cycle.value) == "INVALID_REQUEST"
    count += 1
    # a value nested 100,000 deep, an empty content name, a reject about a ghost node
    deep: list[object] = []
    cursor = deep
    for _ in range(100_000):
        nxt: list[object] = []
        cursor.append(nxt)
        cursor = nxt
    with pytest.raises(InvalidEventError):
        world.set_property("cabinet_1", "notes", deep, confidence=0.5, stamp=3.0)
    with pytest.raises(InvalidValueError, match="content item name"):
        world.set_contents("cabinet_1", [{"name": ""}], is_empty=False, stamp=3.0)
    with pytest.raises(InvalidValueError):
        world.set_contents("cabinet_1", [{"name": "x" * 10_000}], is_empty=False, stamp=3.0)
    with pytest.raises(UnknownNodeError):
        world.update_node("ghost_1", stamp=3.0, verdict=Verdict.REJECT,
                          properties={"locked": {"value": True, "confidence": 0.9}})
    with pytest.raises(InvalidValueError):
        world.set_property("cabinet_1", "reason", "y" * 100_000, confidence=0.5, stamp=3.0)
    assert world.log.count() == count


def test_the_same_update_id_with_another_payload_is_a_duplicate(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [0.0, 0.0, 1.0])])
    first = world.update_node("cabinet_1", stamp=2.0, event_id="analysis-1",
                              properties={"locked": {"value": True, "confidence": 0.9}})
    assert len(first) == 1
    # the same update again (at a later stamp, as a retried service call has) changes nothing
    assert world.update_node("cabinet_1", stamp=5.0, event_id="analysis-1",
                             properties={"locked": {"value": True, "confidence": 0.9}}) == []
    with pytest.raises(DuplicateEventError):
        world.update_node("cabinet_1", stamp=5.0, event_id="analysis-1",
                          properties={"locked": {"value": False, "confidence": 0.9}})
    with pytest.raises(DuplicateEventError):
        world.update_node("cabinet_1", stamp=5.0, event_id="analysis-1",
                          properties={"locked": {"value": True, "confidence": 0.9},
                                      "openable": {"value": False, "confidence": 0.9}})
    assert world.node("cabinet_1").properties["locked"].value is True


def test_event_payloads_are_bounded_before_serialising() -> None:
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.PROPERTY_SET, stamp=1.0, source=Source.OPERATOR,
                    payload={"v": json.loads(_nested(200))})
    with pytest.raises(InvalidEventError):
        MemoryEvent(kind=EventKind.PROPERTY_SET, stamp=1.0, source=Source.OPERATOR,
                    payload={"v": "z" * (2 << 20)})


# ------------------------------------------------------------------- a log already poisoned
def _poison(path: Path, payload: dict[str, object], kind: str = "node_created",
            event_id: str = "poison-1", stamp: float = 3.0) -> None:
    """Append an event straight into the log, as an older or broken writer could have."""
    event = {"event_id": event_id, "kind": kind, "stamp": stamp, "source": "perception",
             "verdict": "admit",
             "evidence": {"keyframe_ids": [], "detection_ids": [], "event_ids": []},
             "payload": payload}
    digest = __import__("hashlib").sha256(canonical_json(event).encode()).hexdigest()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO events (event_id, kind, stamp, source, verdict, evidence, "
                   "payload, digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   [event_id, kind, stamp, "perception", "admit",
                    canonical_json(event["evidence"]), canonical_json(payload), digest])


def test_a_poisoned_log_opens_skips_and_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    with WorldMemory.open(path) as world:
        world.ingest([obs("bowl", [1.0, 0.0, 0.8])])
    far = [1e155, 0.0, 0.0]
    _poison(path, {"node_id": "bowl_2", "label": "bowl", "centroid": far, "bbox_min": far,
                   "bbox_max": far, "alternatives": []})
    _poison(path, {"node_id": "bowl_2", "name": "locked", "value": True, "confidence": 0.9,
                   "reasoning": ""}, kind="property_set", event_id="poison-2")
    _poison(path, {"node_id": "bowl_1", "centroid": [1.0, 0.0, 0.8],
                   "bbox_min": [-1e308] * 3, "bbox_max": [1e308] * 3},
            kind="observation_fused", event_id="poison-3")
    for _ in range(2):  # every restart on the same folder
        with WorldMemory.open(path) as world:
            assert [s.event_id for s in world.skipped_events] == [
                "poison-1", "poison-2", "poison-3"]
            assert "bowl_2" not in world.state.nodes
            assert world.node("bowl_1").bbox_max[0] < 2.0
            (event,) = world.ingest([obs("bowl", [1e1, 0.0, 0.8], stamp=4.0)])  # the next bowl
            assert event.payload["node_id"] == "bowl_3"  # the poisoned id is not handed out again
            assert set(world.state.nodes) == {"bowl_1", "bowl_3"}
            (event,) = world.ingest([obs("bowl", [1.01, 0.0, 0.8], stamp=4.0)])
            assert event.payload["node_id"] == "bowl_1"
            with pytest.raises(GraphConsistencyError):  # only skipped events can be retracted
                world.append([MemoryEvent(kind=EventKind.EVENT_RETRACTED, stamp=5.0,
                                          source=Source.OPERATOR,
                                          payload={"event_id": event.event_id})])
    with WorldMemory.open(path) as world:
        before = world.log.count()
        retractions = world.retract_skipped(stamp=10.0, reason="test repair")
        assert len(retractions) == 3 and world.skipped_events == []
        assert world.log.count() == before + 3  # the log only grew
    with WorldMemory.open(path) as world:
        assert world.skipped_events == []
        assert set(world.state.retracted) == {"poison-1", "poison-2", "poison-3"}
        assert world.log.get("poison-1") is not None  # history is kept
        assert world.retract_skipped(stamp=11.0) == []


def test_a_config_with_tighter_bounds_applies_them(tmp_path: Path) -> None:
    from mimir_memory.config import MemoryConfig

    config = MemoryConfig(bounds=Bounds(workspace_m=10.0))
    with WorldMemory.open(tmp_path / "w.db", config=config) as world:
        world.ingest([obs("mug", [9.0, 0.0, 0.0])])
        with pytest.raises(InvalidValueError, match="workspace"):
            world.ingest([obs("mug", [11.0, 0.0, 0.0])])


def test_check_lists_and_repair_retracts_what_does_not_apply(tmp_path: Path) -> None:
    from mimir_memory.errors import StorageError, WriterBusyError
    from mimir_memory.maintenance import check_memory, repair_memory

    with pytest.raises(StorageError):
        check_memory(tmp_path / "missing")
    path = tmp_path / "world.db"
    with WorldMemory.open(path) as world:
        world.ingest([obs("bowl", [1.0, 0.0, 0.8])])
    assert all(r.ok for r in check_memory(tmp_path))
    far = [1e155, 0.0, 0.0]
    _poison(path, {"node_id": "bowl_2", "label": "bowl", "centroid": far, "bbox_min": far,
                   "bbox_max": far, "alternatives": []})
    reports = {r.name: r for r in check_memory(tmp_path)}
    world_report = reports["world"]
    assert not world_report.ok and world_report.integrity == "ok"
    assert len(world_report.skipped) == 1 and "poison-1" in world_report.skipped[0]
    assert "workspace" in world_report.skipped[0]
    assert reports["task"].ok and not reports["task"].present
    with WorldMemory.open(path), pytest.raises(WriterBusyError):  # a live writer blocks repair
        repair_memory(tmp_path, stamp=9.0)
    assert repair_memory(tmp_path, stamp=9.0) == ["poison-1"]
    assert all(r.ok for r in check_memory(tmp_path))
    assert repair_memory(tmp_path, stamp=10.0) == []


def test_memory_commands_check_and_repair(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    from mimir.cli import main

    path = tmp_path / "world.db"
    with WorldMemory.open(path) as world:
        world.ingest([obs("bowl", [1.0, 0.0, 0.8])])
    assert main(["memory", "check", str(tmp_path)]) == 0
    assert "world: ok" in capsys.readouterr().out
    far = [1e155, 0.0, 0.0]
    _poison(path, {"node_id": "bowl_2", "label": "bowl", "centroid": far, "bbox_min": far,
                   "bbox_max": far, "alternatives": []})
    assert main(["memory", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "does not apply: seq 2 poison-1" in out and "mimir memory repair" in out
    with WorldMemory.open(path):
        assert main(["memory", "repair", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mimir: error:") and "stop the scene graph node" in err
    assert "\n" not in err
    assert main(["memory", "repair", str(tmp_path)]) == 0
    assert "retracted poison-1" in capsys.readouterr().out
    assert main(["memory", "check", str(tmp_path)]) == 0
    assert main(["memory", "check", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_one_label_form_for_keys_and_text() -> None:
    from mimir.labels import label_key, label_text, label_words

    for raw in ("Coffee Mug", "coffee_mug", "  coffee-mug ", "COFFEE__MUG"):
        assert label_words(raw) == ("coffee", "mug")
        assert label_key(raw) == "coffee_mug"
        assert label_text(raw) == "coffee mug"
    assert label_key("") == "" and label_words(" _- ") == ()


def test_ingest_can_leave_out_what_breaks_a_bound(world: WorldMemory) -> None:
    refused: list[tuple[ObjectObservation, str]] = []
    events = world.ingest([obs("bowl", [1e155, 0.0, 0.0]), obs("cup", [2.0, 0.0, 0.8]),
                           obs("bowl", [1.0, 0.0, 0.8], stamp=2.0**31 - 1)],
                          now=100.0, refused=refused)
    assert [e.payload["node_id"] for e in events] == ["cup_1"]
    assert [o.label for o, _ in refused] == ["bowl", "bowl"]
    assert "workspace" in refused[0][1] and "ahead of the receiving clock" in refused[1][1]
    assert world.ingest([obs("bowl", [1e155, 0.0, 0.0])], refused=refused) == []
    assert set(world.state.nodes) == {"cup_1"}
