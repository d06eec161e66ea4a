"""World memory: association, projection, queries, rendering and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from memory_helpers import obs

from mimir_memory.config import AssociationConfig, ConfigError, MemoryConfig
from mimir_memory.errors import (
    DuplicateEventError,
    GraphConsistencyError,
    InvalidEventError,
    InvalidValueError,
    ReadOnlyStoreError,
    UnknownNodeError,
)
from mimir_memory.events import EventKind, Evidence, MemoryEvent, Source, Verdict
from mimir_memory.observations import ObjectObservation
from mimir_memory.world import WorldMemory


def test_new_labels_create_nodes_with_per_label_ids(world: WorldMemory) -> None:
    events = world.ingest([obs("cabinet", [1, 0, 0]), obs("coffee mug", [0, 1, 0])])
    assert [e.kind for e in events] == [EventKind.NODE_CREATED] * 2
    assert sorted(world.state.nodes) == ["cabinet_1", "coffee_mug_1"]
    world.ingest([obs("coffee mug", [3, 3, 0], stamp=2.0)])
    assert world.node("coffee_mug_2").label == "coffee mug"
    node = world.node("cabinet_1")
    assert node.properties["openable"].value == "unknown"
    assert node.properties["fullness"].confidence == pytest.approx(0.3)


def test_same_label_nearby_fuses_with_running_average_and_following_box(
    world: WorldMemory,
) -> None:
    world.ingest([obs("cabinet", [1.0, 0, 0], stamp=1.0, detection_id="d1")])
    events = world.ingest([obs("cabinet", [1.4, 0, 0], stamp=2.0, detection_id="d2")])
    assert events[0].kind is EventKind.OBSERVATION_FUSED
    assert events[0].evidence.detection_ids == ("d2",)
    world.ingest([obs("cabinet", [1.1, 0, 0], stamp=3.0)])
    node = world.node("cabinet_1")
    assert node.observation_count == 3
    assert node.centroid[0] == pytest.approx((1.0 + 1.4 + 1.1) / 3)
    # each view leaves the box along x, so both ends move by the observation's weight
    # (1/2, then 1/3): [0.95, 1.05] -> [1.15, 1.25] -> [1.1167, 1.2167]; y and z stay
    assert node.bbox_min[0] == pytest.approx(1.15 - 0.1 / 3)
    assert node.bbox_max[0] == pytest.approx(1.25 - 0.1 / 3)
    assert node.bbox_min[1] == pytest.approx(-0.05) and node.bbox_max[2] == pytest.approx(0.05)
    assert node.first_seen == 1.0 and node.last_seen == 3.0


def test_radius_is_per_label(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [0, 0, 0]), obs("mug", [5, 0, 0])])
    world.ingest([obs("cabinet", [0.5, 0, 0]), obs("mug", [5.5, 0, 0])])
    assert len(world.nodes_by_label("cabinet")) == 1  # 0.5 < 0.6
    assert len(world.nodes_by_label("mug")) == 2  # 0.5 > default 0.3


def test_different_label_never_fuses_and_node_takes_one_observation_per_batch(
    world: WorldMemory,
) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    world.ingest([obs("bowl", [0, 0, 0]), obs("mug", [0.05, 0, 0]), obs("mug", [0.1, 0, 0])])
    assert sorted(world.state.nodes) == ["bowl_1", "mug_1", "mug_2"]
    assert world.node("mug_1").centroid[0] == pytest.approx(0.025)


def test_close_same_name_instances_become_hypotheses(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    world.ingest([obs("mug", [0.45, 0, 0])])  # beyond 0.3, within 2 x 0.3
    world.ingest([obs("mug", [3, 0, 0])])
    assert world.node("mug_2").alternatives == {"mug_1"}
    assert world.node("mug_1").alternatives == {"mug_2"}
    assert world.node("mug_3").alternatives == set()
    world.link_hypotheses(["mug_1", "mug_3"], stamp=5.0)
    assert world.node("mug_3").alternatives == {"mug_1"}


def test_nodes_that_leave_view_stay(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    for step in range(5):
        world.ingest([obs("bowl", [4, 0, 0], stamp=2.0 + step)])
    assert "mug_1" in world.state.nodes


def test_properties_overwrite_and_why_returns_admitted_history(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [1, 0, 0])])
    first = world.set_property(
        "cabinet_1",
        "openable",
        True,
        confidence=0.9,
        stamp=2.0,
        is_opened=True,
        reasoning="door swings",
        evidence=Evidence(keyframe_ids=("kf1",)),
    )
    world.set_property(
        "cabinet_1", "openable", False, confidence=0.7, stamp=2.5, verdict=Verdict.REJECT
    )
    second = world.set_property(
        "cabinet_1", "openable", False, confidence=0.8, stamp=3.0, reasoning="locked"
    )
    prop = world.node("cabinet_1").properties["openable"]
    assert prop.value is False and prop.reasoning == "locked" and prop.source == "interaction"
    why = world.why("cabinet_1", "openable")
    assert [e.event_id for e in why] == [first.event_id, second.event_id]
    assert why[0].evidence.keyframe_ids == ("kf1",)
    assert "kf1" in world.referenced_keyframes()
    world.set_property("cabinet_1", "material", "wood", confidence=0.6, stamp=4.0)
    assert world.node("cabinet_1").properties["material"].value == "wood"
    seeded = world.why("cabinet_1", "pickable")
    assert seeded[0].kind is EventKind.NODE_CREATED
    with pytest.raises(InvalidValueError):
        world.why("cabinet_1", "no_such_field")
    with pytest.raises(UnknownNodeError):
        world.why("cabinet_9", "openable")


def test_late_older_evidence_does_not_overwrite_newer(world: WorldMemory) -> None:
    world.ingest([obs("drawer", [0, 0, 0], stamp=1.0)])
    world.set_property("drawer_1", "locked", True, confidence=0.9, stamp=5.0)
    late = world.set_property("drawer_1", "locked", False, confidence=0.9, stamp=3.0)
    assert world.node("drawer_1").properties["locked"].value is True
    assert late.event_id in [e.event_id for e in world.why("drawer_1", "locked")]
    world.set_contents("drawer_1", [{"name": "scissors"}], is_empty=False, stamp=6.0)
    world.set_contents("drawer_1", [], is_empty=True, stamp=4.0)
    assert world.node("drawer_1").contents == [{"name": "scissors"}]
    world.set_contents("drawer_1", [], is_empty=True, stamp=7.0)
    assert world.node("drawer_1").contents_empty is True


def test_contents_parent_and_inside_queries(world: WorldMemory) -> None:
    world.add_node("kitchen", [0, 0, 0], stamp=0.5)
    world.ingest([obs("cabinet", [1, 0, 0]), obs("mug", [1, 0, 0.1]), obs("plate", [4, 0, 0])])
    world.set_parent("cabinet_1", "kitchen_1", "room", stamp=1.5)
    world.set_parent("mug_1", "cabinet_1", "container", stamp=2.0)
    world.set_contents(
        "cabinet_1",
        [{"name": "mug", "description": "white"}],
        is_empty=False,
        stamp=2.0,
        source_action="Inspect",
    )
    assert [n.node_id for n in world.nodes_inside("cabinet_1")] == ["mug_1"]
    assert [n.node_id for n in world.nodes_inside("kitchen_1", recursive=True)] == [
        "cabinet_1",
        "mug_1",
    ]
    assert world.nodes_inside("kitchen_1", relation="container") == []
    world.set_parent("mug_1", "hand", "hand", stamp=3.0)
    assert world.nodes_inside("cabinet_1") == []
    assert [n.node_id for n in world.nodes_inside("hand")] == ["mug_1"]
    node = world.node("cabinet_1")
    assert node.contents_source_action == "Inspect" and node.contents_empty is False
    with pytest.raises(GraphConsistencyError):
        world.set_parent("kitchen_1", "cabinet_1", "container", stamp=4.0)
    with pytest.raises(InvalidValueError):
        world.set_parent("plate_1", "cabinet_1", "hand", stamp=4.0)
    with pytest.raises(UnknownNodeError):
        world.nodes_inside("drawer_4")


def test_nodes_near_and_by_label(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0]), obs("mug", [2, 0, 0]), obs("cabinet", [0.5, 0, 0])])
    near = world.nodes_near([0.1, 0, 0], 0.6)
    assert [n.node_id for n in near] == ["mug_1", "cabinet_1"]
    assert [n.node_id for n in world.nodes_near([0, 0, 0], 5.0, label="mug")] == ["mug_1", "mug_2"]
    assert [n.node_id for n in world.nodes_by_label("MUG")] == ["mug_1", "mug_2"]
    with pytest.raises(InvalidValueError):
        world.nodes_near([math.nan, 0, 0], 1.0)
    with pytest.raises(InvalidValueError):
        world.nodes_near([0, 0, 0], -1.0)


def test_as_of_returns_the_past_graph(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [1, 0, 0], stamp=1.0)])
    world.set_property("cabinet_1", "openable", True, confidence=0.9, stamp=2.0)
    world.set_property("cabinet_1", "openable", False, confidence=0.9, stamp=3.0)
    world.ingest([obs("mug", [0, 0, 0], stamp=4.0)])
    past = world.as_of(2.5)
    assert sorted(past.nodes) == ["cabinet_1"]
    assert past.nodes["cabinet_1"].properties["openable"].value is True
    assert world.as_of(0.5).nodes == {}
    with pytest.raises(InvalidValueError):
        world.as_of(math.nan)


def test_render_is_bounded_stable_and_says_when_reduced(world: WorldMemory) -> None:
    for i in range(40):
        world.ingest([obs("mug", [i * 1.0, 0, 0], stamp=1.0 + i)])
    world.set_property("mug_7", "pickable", True, confidence=0.9, stamp=99.0, reasoning="lifted")
    full = world.render(100_000)
    assert "reduced" not in full and "omitted" not in full
    assert full == world.render(100_000)
    ids = [json.loads(line)["id"] for line in full.splitlines()[1:]]
    assert ids == sorted(ids) and len(ids) == 40
    small = world.render(1500)
    assert len(small) <= 1500
    assert "omitted" in small
    assert '"mug_7"' in small  # the interacted node is the most relevant
    assert world.render(1500, focus=["mug_30"]).count('"mug_30"') == 1
    mid = world.render(len(full) - 10)
    assert len(mid) <= len(full) - 10 and "reduced" in mid
    with pytest.raises(InvalidValueError):
        world.render(10)


def test_snapshot_survives_reopen_and_readers_follow(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    writer = WorldMemory.open(path)
    writer.ingest([obs("mug", [0, 0, 0]), obs("cabinet", [1, 0, 0])])
    reader = WorldMemory.open(path, readonly=True)
    assert reader.graph_snapshot() == writer.graph_snapshot()
    writer.set_property("mug_1", "pickable", True, confidence=1.0, stamp=3.0)
    assert reader.refresh() == 1
    assert reader.graph_snapshot() == writer.graph_snapshot()
    with pytest.raises(ReadOnlyStoreError):
        reader.set_property("mug_1", "pickable", False, confidence=1.0, stamp=4.0)
    snapshot = writer.graph_snapshot()
    writer.close()
    reader.close()
    with WorldMemory.open(path) as again:
        assert again.graph_snapshot() == snapshot
        assert again.revision == snapshot["revision"]


def _mug_property(name: str, value: object, **extra: Any) -> MemoryEvent:
    """An interaction's PROPERTY_SET on mug_1 at 2.0 s with confidence 0.9."""
    return MemoryEvent(
        kind=EventKind.PROPERTY_SET,
        stamp=2.0,
        source=Source.INTERACTION,
        payload={"node_id": "mug_1", "name": name, "value": value, "confidence": 0.9},
        **extra,
    )


def test_replayed_event_is_idempotent_and_conflicting_id_rejected(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    event = _mug_property("pickable", True, event_id="analyzer-42")
    assert len(world.append([event])) == 1
    before = world.graph_snapshot()
    assert world.append([event]) == []
    assert world.graph_snapshot() == before
    clash = _mug_property("pickable", False, event_id="analyzer-42")
    new_ok = _mug_property("fullness", "full")
    count = world.log.count()
    with pytest.raises(DuplicateEventError):
        world.append([new_ok, clash])
    assert world.log.count() == count  # the whole batch was rolled back
    assert world.graph_snapshot() == before


def test_bad_input_is_rejected_without_writing(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    count = world.log.count()
    before = world.graph_snapshot()
    with pytest.raises(UnknownNodeError):
        world.set_property("drawer_9", "openable", True, confidence=0.5, stamp=1.0)
    with pytest.raises(InvalidValueError):
        world.set_property("mug_1", "pickable", True, confidence=1.5, stamp=1.0)
    with pytest.raises(InvalidEventError):
        world.set_property("mug_1", "pickable", math.nan, confidence=0.5, stamp=1.0)
    with pytest.raises(InvalidEventError):
        world.set_property("mug_1", "pickable", True, confidence=0.5, stamp=math.inf)
    with pytest.raises(InvalidValueError):
        world.add_node("table", [0, math.nan, 0], stamp=1.0)
    with pytest.raises(InvalidValueError):
        world.add_node("table", [0, 0], stamp=1.0)
    with pytest.raises(InvalidValueError):
        world.add_node("", [0, 0, 0], stamp=1.0)
    with pytest.raises(InvalidValueError):
        world.ingest(["not an observation"])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError):
        world.ingest([obs("mug", [0, 0, 0], frame_id="odom")])
    with pytest.raises(InvalidValueError):
        world.set_contents("mug_1", "spoon", is_empty=False, stamp=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        world.record_outcome("mug_1", "Pick", "yes", stamp=1.0)  # type: ignore[arg-type]
    with pytest.raises(UnknownNodeError):
        world.node(42)  # type: ignore[arg-type]
    with pytest.raises(UnknownNodeError):
        world.update_node("mug_1", stamp=1.0, parent=("cabinet_7", "container"))
    with pytest.raises(InvalidValueError):
        world.update_node("mug_1", stamp=1.0, properties={"pickable": {"confidence": 0.3}})
    assert world.log.count() == count
    assert world.graph_snapshot() == before


def test_update_node_writes_an_analyzer_result_atomically(world: WorldMemory) -> None:
    world.ingest([obs("cabinet", [0, 0, 0]), obs("banana", [0, 0, 0.1])])
    events = world.update_node(
        "cabinet_1",
        stamp=5.0,
        properties={"openable": {"value": True, "confidence": 0.9, "is_opened": True}},
        contents={"contents": [{"name": "banana"}], "is_empty": False, "source_action": "Open"},
        outcome={"task": "OpenCabinet", "success": True},
        evidence=Evidence(keyframe_ids=("k1", "k2")),
    )
    assert len(events) == 3
    node = world.node("cabinet_1")
    assert node.properties["openable"].is_opened is True
    assert node.task_history[0]["task"] == "OpenCabinet"
    assert [n.node_id for n in world.nodes_near(np.zeros(3), 0.5, label="banana")] == ["banana_1"]


def test_deferred_claims_are_logged_without_effect(world: WorldMemory) -> None:
    world.ingest([obs("drawer", [0, 0, 0])])
    event = world.set_property(
        "drawer_1", "locked", True, confidence=0.4, stamp=2.0, verdict=Verdict.DEFER
    )
    assert world.log.get(event.event_id) is not None
    assert "locked" not in world.node("drawer_1").properties
    # A refused claim is kept for audit only about a node memory holds: one about a node
    # that does not exist is refused and nothing is written.
    count = world.log.count()
    with pytest.raises(UnknownNodeError):
        world.set_property(
            "drawer_99", "locked", True, confidence=0.4, stamp=2.0, verdict=Verdict.REJECT
        )
    assert world.log.count() == count


def test_spatial_index_looks_at_a_bounded_neighbourhood(tmp_path: Path) -> None:
    with WorldMemory.open(tmp_path / "big.db") as world:
        rng = np.random.default_rng(3)
        for start in range(0, 2000, 200):
            batch = [
                obs("mug", rng.uniform([0, 0, 0], [100, 100, 2]), stamp=float(start + i))
                for i in range(200)
            ]
            world.ingest(batch)
        assert len(world.state.nodes) > 1500
        candidates = list(world.state.index.candidates("mug", (50.0, 50.0, 1.0), 0.3))
        assert len(candidates) < 20  # 27 cells of 0.3 m, not the whole graph


def test_threads_share_one_writer_safely(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "w.db"
    world = WorldMemory.open(path)

    def worker(offset: int) -> int:
        for i in range(25):
            world.ingest([obs("box", [offset * 100.0 + i, 0, 0], stamp=float(i))])
            world.render(2000)
        return offset

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = sorted(f.result() for f in [pool.submit(worker, k) for k in range(4)])
    assert done == [0, 1, 2, 3]
    assert len(world.state.nodes) == 100
    snapshot = world.graph_snapshot()
    world.close()
    with WorldMemory.open(path, readonly=True) as reader:
        assert reader.graph_snapshot() == snapshot


def _box(label: str, lo: list[float], hi: list[float], centroid: list[float],
         stamp: float = 1.0) -> ObjectObservation:
    return ObjectObservation(label=label, centroid=np.asarray(centroid),
                             bbox_min=np.asarray(lo), bbox_max=np.asarray(hi), stamp=stamp)


def test_nested_boxes_fuse_a_fixture_seen_in_parts(world: WorldMemory) -> None:
    # the front face of a closed cabinet (0.55 m wide, face at x = 0.88)
    world.ingest([_box("cabinet", [0.86, 0.78, 1.0], [0.89, 1.33, 1.45], [0.88, 1.05, 1.2])])
    # open: the door and the interior make a box that holds the face, centroid 0.7 m away
    opened = _box("cabinet", [0.2, 0.5, 1.0], [1.24, 1.34, 1.45], [0.45, 0.6, 1.2], 2.0)
    assert math.dist(opened.centroid, world.node("cabinet_1").centroid) > 0.6
    (event,) = world.ingest([opened])
    assert event.kind is EventKind.OBSERVATION_FUSED and event.payload["node_id"] == "cabinet_1"
    # a sliver at the edge lies inside the node's box: same cabinet
    (event,) = world.ingest([_box("cabinet", [0.9, 1.32, 1.0], [0.95, 1.33, 1.4],
                                  [0.92, 1.325, 1.2], 3.0)])
    assert event.payload["node_id"] == "cabinet_1"
    # the neighbour 0.7 m along the wall shares no volume: a new node (a hypothesis of it)
    (event,) = world.ingest([_box("cabinet", [0.86, 1.48, 1.0], [0.89, 2.03, 1.45],
                                  [0.88, 1.75, 1.2], 4.0)])
    assert event.kind is EventKind.NODE_CREATED and event.payload["node_id"] == "cabinet_2"


def test_box_overlap_can_be_switched_off_and_is_validated(tmp_path: Path) -> None:
    config = MemoryConfig(association=AssociationConfig(0.3, {"cabinet": 0.6}, box_overlap=0.0))
    memory = WorldMemory.open(tmp_path / "world.db", config=config)
    try:
        memory.ingest([_box("cabinet", [0.86, 0.78, 1.0], [0.89, 1.33, 1.45], [0.88, 1.05, 1.2])])
        (event,) = memory.ingest([_box("cabinet", [0.2, 0.5, 1.0], [1.24, 1.34, 1.45],
                                       [0.45, 0.6, 1.2], 2.0)])
        assert event.kind is EventKind.NODE_CREATED
    finally:
        memory.close()
    for bad in ({"box_overlap": 1.5}, {"box_overlap": -0.1}, {"box_tolerance_m": math.nan},
                {"box_overlap": True}, {"box_tolerance_m": "wide"}):
        with pytest.raises(ConfigError):
            AssociationConfig(**bad)  # type: ignore[arg-type]
