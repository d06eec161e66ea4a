"""Memory representations: what a reader folds and shows (mimir_memory/representation.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from memory_helpers import obs, textured

from mimir.paths import config_file
from mimir_memory.errors import ConfigError
from mimir_memory.graph import HAND_PARENT, PropertyValue, SceneNode
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.representation import (
    CandidateFrame,
    MemoryView,
    Representation,
    episodic_frames,
    keyframe_source,
    load_representations,
    representations_from_dict,
)
from mimir_memory.world import WorldMemory

INSTALLED = load_representations(config_file("representations.yaml"))


def _node() -> SceneNode:
    node = SceneNode("cabinet_1", "cabinet", (0.0, 0.0, 0.0), (-1.0, -1.0, -1.0),
                     (1.0, 1.0, 1.0), 1.0, 1.0, 1, parent="room_1", parent_relation="room")
    node.properties = {n: PropertyValue(True, 0.9, "interaction")
                       for n in ("locked", "openable", "colour", "at_last_place")}
    node.contents, node.contents_empty = [{"name": "cup"}], False
    node.task_history, node.alternatives = [{"task": "open", "success": False}], {"cabinet_2"}
    return node


def test_the_installed_file_defines_the_baselines_and_the_whole_memory() -> None:
    assert set(INSTALLED) == {"scene_graph", "action_graph", "episodic", "episodic_fixtures"}
    assert INSTALLED["scene_graph"].complete
    whole = _node()
    INSTALLED["scene_graph"].narrow(whole)
    assert whole == _node()
    graph = INSTALLED["action_graph"]
    assert not graph.complete and not graph.episodic
    node = _node()
    graph.narrow(node)
    assert set(node.properties) == {"openable", "at_last_place"}
    assert node.contents == [{"name": "cup"}] and node.parent == "room_1"
    assert node.task_history == [] and node.alternatives == set()
    episodic = INSTALLED["episodic"]
    assert episodic.episodic and not episodic.fixtures
    assert (episodic.memory_length, episodic.recent_window) == (8, 8)
    node = _node()
    episodic.narrow(node)
    assert node.properties == {} and node.contents == [] and node.contents_empty is None
    assert node.parent is None and node.task_history == [] and node.alternatives == set()
    assert INSTALLED["episodic_fixtures"].fixtures


@pytest.mark.parametrize(("data", "words"), [
    ([1, 2], "must be a mapping"),
    ({"x": [1]}, "must be a mapping"),
    ({"x": {"colour": True}}, "unknown keys"),
    ({"x": {"memory_length": 0, "episodic": True}}, "memory_length"),
    ({"x": {"merge_s": -1.0, "episodic": True}}, "merge_s"),
    ({"x": {"contents": "yes"}}, "true or false"),
    ({"x": {"properties": ["*", "locked"]}}, "not both"),
    ({"x": {"properties": "locked"}}, "list of non-empty strings"),
    ({"x": {"fixtures": True}}, "episodic memory only"),
    ({"not-a-name": {}}, "plain identifier"),
    ({"scene_graph": {"outcomes": False}}, "cannot be narrowed"),
])
def test_bad_representations_are_refused_with_what_is_wrong(data: object, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        representations_from_dict(data)


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        load_representations(tmp_path / "none.yaml")


def test_episodic_frames_merge_groups_and_keep_the_newest() -> None:
    rep = Representation("e", properties=(), episodic=True, memory_length=2, recent_window=2,
                         merge_s=1.0)
    # groups: {a, b, c} (0.0-1.6 s), {d} (5 s), {e, f} (9, 9.5 s); given out of order
    frames = [CandidateFrame(i, t) for i, t in
              (("c", 1.6), ("a", 0.0), ("e", 9.0), ("b", 0.8), ("d", 5.0), ("f", 9.5))]
    # representatives b, d, e -> the newest two (d, e), then the two newest frames (e, f)
    assert episodic_frames(frames, rep) == ["d", "e", "f"]
    assert episodic_frames([], rep) == []
    wide = Representation("w", properties=(), episodic=True, memory_length=8, recent_window=1,
                          merge_s=10.0)
    assert episodic_frames(frames, wide) == ["c", "f"]  # one group of six: its middle, c


def _writer_with_facts(path: Path) -> tuple[WorldMemory, str, str]:
    world = WorldMemory.open(path)
    events = world.ingest([obs("cabinet", (1.0, 0.0, 0.5), half=0.3),
                           obs("banana", (3.0, 0.0, 0.9))])
    cabinet, banana = (str(e.payload["node_id"]) for e in events)
    world.update_node(cabinet, stamp=2.0, properties={
        "locked": {"value": True, "confidence": 0.9},
        "openable": {"value": True, "confidence": 0.9, "is_opened": False},
        "colour": {"value": "white", "confidence": 0.8}},
        contents={"contents": [{"name": "cup"}], "is_empty": False},
        outcome={"task": "open it", "success": False, "failure_reason": "locked"})
    world.update_node(banana, stamp=3.0, parent=(HAND_PARENT, "hand"))
    return world, cabinet, banana


def test_an_action_graph_reader_sees_relations_and_contents_but_no_lock(tmp_path: Path) -> None:
    writer, cabinet, banana = _writer_with_facts(tmp_path / "world.db")
    view = MemoryView(INSTALLED["action_graph"])
    reader = WorldMemory.open(tmp_path / "world.db", readonly=True, view=view)
    full = WorldMemory.open(tmp_path / "world.db", readonly=True)
    try:
        seen = reader.node(cabinet)
        assert set(seen.properties) <= {"openable", "at_last_place"}
        assert seen.properties["openable"].value is True
        assert [c["name"] for c in seen.contents] == ["cup"]
        assert seen.task_history == []
        assert reader.node(banana).parent == HAND_PARENT
        assert {"locked", "openable", "colour"} <= set(full.node(cabinet).properties)
        assert len(full.node(cabinet).task_history) == 1
        # later writes are narrowed the same way, and the revision still follows the log
        writer.update_node(banana, stamp=4.0, properties={"ripe": {"value": True,
                                                                    "confidence": 0.9}})
        reader.refresh()
        full.refresh()
        assert "ripe" not in reader.node(banana).properties
        assert reader.revision == full.revision
    finally:
        for memory in (reader, full, writer):
            memory.close()


def test_a_writer_cannot_narrow_what_it_sees(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="writer sees all"):
        WorldMemory.open(tmp_path / "world.db", view=MemoryView(INSTALLED["action_graph"]))


def test_an_episodic_view_needs_frames() -> None:
    with pytest.raises(ConfigError, match="keyframe store"):
        MemoryView(INSTALLED["episodic"])


def test_an_episodic_reader_sees_only_what_its_frames_show(tmp_path: Path) -> None:
    writer = WorldMemory.open(tmp_path / "world.db")
    events = writer.ingest([obs("cabinet", (1.0, 0.0, 0.5), half=0.3),
                            obs("banana", (3.0, 0.0, 0.9)), obs("mug", (3.0, 2.0, 0.9)),
                            obs("apple", (0.0, 3.0, 0.9))])
    cabinet, banana, mug, apple = (str(e.payload["node_id"]) for e in events)
    writer.update_node(banana, stamp=1.5, properties={"ripe": {"value": True,
                                                                "confidence": 0.9}})
    store = KeyframeStore.open(tmp_path / "keyframes")
    # the banana in an early frame, then twenty frames of the mug 3 s apart (twenty groups)
    store.save(textured(0), timestamp=1.0, camera="pole", trigger="new_node",
               node_ids=[banana])
    for k in range(20):
        store.save(textured(k + 1), timestamp=10.0 + 3.0 * k, camera="pole",
                   trigger="node_update", node_ids=[mug])
    held_in_hand = [apple]
    view = MemoryView(INSTALLED["episodic"], keyframe_source(store),
                      is_fixture=lambda label: label == "cabinet", pinned=lambda: held_in_hand)
    reader = WorldMemory.open(tmp_path / "world.db", readonly=True, view=view)
    try:
        assert set(reader.state.nodes) == {mug, apple}
        assert len(view.held) == 8  # eight representatives; the recent window lies among them
        assert reader.nodes_near(np.array([3.0, 0.0, 0.9]), 0.5) == []
        assert reader.node(mug).properties == {}
        # the banana is seen again: it is back, with nothing learned about it
        store.save(textured(40), timestamp=100.0, camera="pole", trigger="node_update",
                   node_ids=[banana])
        held_in_hand.clear()
        reader.refresh()
        assert set(reader.state.nodes) == {mug, banana}
        assert reader.node(banana).properties == {}
        fixtures = MemoryView(INSTALLED["episodic_fixtures"], keyframe_source(store),
                              is_fixture=lambda label: label == "cabinet")
        assert set(fixtures.project(writer.state).nodes) == {mug, banana, cabinet}
        # the writer's own graph is untouched by the projections
        assert set(writer.state.nodes) == {cabinet, banana, mug, apple}
        assert "ripe" in writer.node(banana).properties
    finally:
        reader.close()
        store.close()
        writer.close()
