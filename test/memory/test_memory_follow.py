"""World memory that follows a changing world: fading position estimates, placements that move
a node, negative evidence (misses) and merging duplicate nodes."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from memory_helpers import obs

from mimir_memory.config import (
    AssociationConfig,
    ConfigError,
    MemoryConfig,
    load_memory_config,
    memory_config_from_dict,
)
from mimir_memory.errors import (
    GraphConsistencyError,
    InvalidValueError,
    UnknownNodeError,
)
from mimir_memory.events import EventKind, MemoryEvent, Source, Verdict
from mimir_memory.graph import AT_LAST_PLACE
from mimir_memory.observations import ObjectObservation
from mimir_memory.world import WorldMemory

REPO = Path(__file__).resolve().parents[2]


def _config(**association: object) -> MemoryConfig:
    """The fixture's association radii with some fields changed."""
    return MemoryConfig(association=AssociationConfig(0.3, {"cabinet": 0.6},
                                                      **association))  # type: ignore[arg-type]


def _box(label: str, lo: list[float], hi: list[float], stamp: float) -> ObjectObservation:
    centre = (np.asarray(lo) + np.asarray(hi)) / 2.0
    return ObjectObservation(label=label, centroid=centre, bbox_min=np.asarray(lo),
                             bbox_max=np.asarray(hi), stamp=stamp)


# ------------------------------------------------------------------ 1. fading position estimate
def test_position_and_box_follow_an_object_that_moved(world: WorldMemory) -> None:
    for i in range(5):
        world.ingest([obs("mug", [0, 0, 0], stamp=1.0 + i)])
    assert world.node("mug_1").centroid == pytest.approx((0.0, 0.0, 0.0))
    for i in range(10):
        world.ingest([obs("mug", [0.1, 0, 0], stamp=10.0 + i)])
    node = world.node("mug_1")
    assert node.observation_count == 15 and node.position_samples == 15
    # every new observation weighs fade = 0.2: the old place fades geometrically, where a
    # running average would still sit at 10/15 of the way (0.0667)
    assert node.centroid[0] == pytest.approx(0.1 * (1 - 0.8**10))
    # the box slides while the views reach outside it (six views, until its upper end is
    # within the 0.03 m tolerance of theirs), then stops: same size, moved with the object
    assert node.bbox_min[0] == pytest.approx(0.05 - 0.1 * 0.8**6)
    assert node.bbox_max[0] == pytest.approx(0.15 - 0.1 * 0.8**6)
    assert node.bbox_min[1] == pytest.approx(-0.05) and node.bbox_max[2] == pytest.approx(0.05)
    assert node.bbox_min[0] <= node.centroid[0] <= node.bbox_max[0]


def test_first_observations_are_averaged_then_old_ones_fade(world: WorldMemory) -> None:
    xs = [0.0, 0.1, 0.2, 0.1, 0.0, 0.2]
    for i, x in enumerate(xs):
        world.ingest([obs("mug", [x, 0, 0], stamp=1.0 + i)])
    average = sum(xs[:5]) / 5  # weights 1, 1/2, ..., 1/5: a plain mean
    assert world.node("mug_1").centroid[0] == pytest.approx(average + (0.2 - average) * 0.2)


def test_fixture_box_stays_under_partial_views(world: WorldMemory) -> None:
    whole = ([0.2, 0.5, 1.0], [1.24, 1.34, 1.45])
    world.ingest([_box("cabinet", *whole, stamp=1.0)])
    for i in range(8):  # front faces and edges, all inside the box
        face = ([0.86, 0.78 + 0.01 * i, 1.0], [0.89, 1.33, 1.45])
        (event,) = world.ingest([_box("cabinet", *face, stamp=2.0 + i)])
        assert event.payload["node_id"] == "cabinet_1"
    node = world.node("cabinet_1")
    assert node.bbox_min == pytest.approx(tuple(whole[0]))
    assert node.bbox_max == pytest.approx(tuple(whole[1]))
    assert node.centroid[0] > 0.8  # the centroid follows the views that were made


def test_fade_of_one_keeps_only_the_latest_observation(tmp_path: Path) -> None:
    with WorldMemory.open(tmp_path / "w.db", config=_config(fade=1.0)) as world:
        world.ingest([obs("mug", [0, 0, 0], stamp=1.0)])
        world.ingest([obs("mug", [0.2, 0, 0], stamp=2.0)])
        assert world.node("mug_1").centroid[0] == pytest.approx(0.2)
        assert world.node("mug_1").bbox_min[0] == pytest.approx(0.15)


def test_a_fixture_estimate_does_not_follow_the_views_of_its_open_door(tmp_path: Path) -> None:
    config = _config(label_fade={"Cabinet": 0.02})
    with WorldMemory.open(tmp_path / "w.db", config=config) as world:
        closed = ([0.9, 0.3, 1.0], [1.25, 0.85, 1.45])
        for i in range(20):
            world.ingest([_box("cabinet", *closed, stamp=1.0 + i)])
            world.ingest([obs("mug", [0.0, 0.0, 0.0], stamp=1.0 + i)])
        # the door swings out: the segmented cabinet now reaches 0.5 m further into the room
        for i in range(10):
            world.ingest([_box("cabinet", [0.4, 0.3, 1.0], [1.25, 0.85, 1.45], stamp=30.0 + i)])
            world.ingest([obs("mug", [0.3, 0.0, 0.0], stamp=30.0 + i)])
        cabinet = world.node("cabinet_1")
        shift = 1.075 - cabinet.centroid[0]  # the closed box's centre lies at x = 1.075
        # the door's views are ten of thirty, averaged (1/n up to 1/fade = 50 views): a third of
        # the 0.25 m their centre moved, where the default fade would follow most of it
        assert shift == pytest.approx(0.25 / 3)
        assert world.node("mug_1").centroid[0] > 0.2  # a mug follows its views (fade 0.2)
    assert config.association.fade_of("CABINET") == pytest.approx(0.02)
    assert config.association.fade_of("mug") == pytest.approx(0.2)


def test_fade_and_misses_to_stale_are_configured_and_validated() -> None:
    shipped = load_memory_config(REPO / "config" / "memory.yaml").association
    assert shipped.fade == pytest.approx(0.2) and shipped.misses_to_stale == 3
    assert shipped.stale_after_s == pytest.approx(5.0) == AssociationConfig().stale_after_s
    assert AssociationConfig().fade == pytest.approx(0.2)
    assert memory_config_from_dict({"association": {"fade": 1}}).association.fade == 1.0
    for bad in ({"fade": 0}, {"fade": -0.1}, {"fade": 1.5}, {"fade": math.nan},
                {"fade": math.inf}, {"fade": True}, {"fade": "slow"},
                {"misses_to_stale": 0}, {"misses_to_stale": -2}, {"misses_to_stale": 2.5},
                {"misses_to_stale": True}, {"stale_after_s": -0.5},
                {"stale_after_s": math.nan}, {"stale_after_s": "soon"}):
        with pytest.raises(ConfigError):
            AssociationConfig(**bad)
    with pytest.raises(ConfigError):
        memory_config_from_dict({"association": {"fade": 2.0}})
    with pytest.raises(ConfigError):
        memory_config_from_dict({"association": {"misses_to_stale": 0}})
    assert shipped.fade_of("cabinet") == pytest.approx(0.02)
    for fades in ({"cabinet": 0}, {"cabinet": 1.5}, {"cabinet": "slow"}, {"cabinet": math.nan}):
        with pytest.raises(ConfigError, match="label_fade"):
            memory_config_from_dict({"association": {"label_fade": fades}})
    with pytest.raises(ConfigError, match="label_fade"):
        AssociationConfig(label_fade=[0.1])  # type: ignore[arg-type]


# ------------------------------------------------------------------ 2. moving with a holder
def test_placement_moves_the_node_and_restarts_its_estimate(world: WorldMemory) -> None:
    for i in range(5):
        world.ingest([obs("mug", [0, 0, 0.9], stamp=1.0 + i)])
    world.ingest([obs("cabinet", [2, 0, 1], half=0.3, stamp=6.0)])
    world.set_parent("mug_1", "hand", "hand", stamp=7.0)
    assert world.node("mug_1").centroid == pytest.approx((0.0, 0.0, 0.9))  # no position given
    placed = world.set_parent("mug_1", "cabinet_1", "container", stamp=8.0,
                              position=(2.0, 0.1, 1.0))
    assert placed.payload["centroid"] == [2.0, 0.1, 1.0]
    node = world.node("mug_1")
    assert node.centroid == (2.0, 0.1, 1.0) and node.position_samples == 1
    assert node.bbox_min == pytest.approx((1.95, 0.05, 0.95))
    assert node.bbox_max == pytest.approx((2.05, 0.15, 1.05))
    assert node.parent == "cabinet_1" and node.observation_count == 5
    assert world.why("mug_1", "position")[-1].event_id == placed.event_id
    assert [n.node_id for n in world.nodes_near([2, 0.1, 1], 0.05)] == ["mug_1"]
    # the first view at the new place counts as much as the placement: the old place no more
    (event,) = world.ingest([obs("mug", [2.04, 0.1, 1.0], stamp=9.0)])
    assert event.kind is EventKind.OBSERVATION_FUSED and event.payload["node_id"] == "mug_1"
    node = world.node("mug_1")
    assert node.centroid[0] == pytest.approx(2.02)
    assert node.bbox_min[0] == pytest.approx(1.97) and node.bbox_max[0] == pytest.approx(2.07)
    # a mug at the old place is another mug now
    (event,) = world.ingest([obs("mug", [0, 0, 0.9], stamp=10.0)])
    assert event.kind is EventKind.NODE_CREATED and event.payload["node_id"] == "mug_2"


def test_update_node_moves_the_node_with_its_parent(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0]), obs("table", [3, 0, 0.7], half=0.4)])
    events = world.update_node("mug_1", stamp=2.0, parent=("table_1", "surface"),
                               position=np.array([3.1, 0.0, 0.8]))
    assert [e.kind for e in events] == [EventKind.PARENT_CHANGED]
    assert events[0].payload["centroid"] == [3.1, 0.0, 0.8]
    assert world.node("mug_1").centroid == pytest.approx((3.1, 0.0, 0.8))
    assert world.node("mug_1").parent == "table_1"


def test_bad_placement_positions_are_refused_without_writing(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0]), obs("table", [3, 0, 0.7], half=0.4)])
    count, before = world.log.count(), world.graph_snapshot()
    for bad in ([math.nan, 0, 0.8], [3, math.inf, 0.8], [3, 0], [3, 0, 0.8, 1], "abc",
                [3, "x", 0.8], [1e6, 0, 0.8]):
        with pytest.raises(InvalidValueError):
            world.set_parent("mug_1", "table_1", "surface", stamp=2.0,
                             position=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidValueError):
            world.update_node("mug_1", stamp=2.0, parent=("table_1", "surface"),
                              position=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):  # a position says where it was put: needs a parent
        world.update_node("mug_1", stamp=2.0, position=(3.0, 0.0, 0.8))
    assert world.log.count() == count and world.graph_snapshot() == before


# ------------------------------------------------------------------ 3. negative evidence
def test_misses_make_a_node_stale_and_a_sighting_brings_it_back(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0], stamp=1.0)])
    # misses mark a node gone once no camera has seen it for stale_after_s (5 s)
    first = world.record_miss("mug_1", stamp=4.0, camera="head", reason="in view, unoccluded")
    assert [e.kind for e in first] == [EventKind.OBSERVATION_MISSED]
    assert first[0].payload == {"node_id": "mug_1", "camera": "head",
                                "reason": "in view, unoccluded"}
    assert len(world.record_miss("mug_1", stamp=5.0)) == 1
    assert world.node("mug_1").misses == 2 and AT_LAST_PLACE not in world.node("mug_1").properties
    third = world.record_miss("mug_1", stamp=6.0, camera="head")
    assert [e.kind for e in third] == [EventKind.OBSERVATION_MISSED, EventKind.PROPERTY_SET]
    stale = world.node("mug_1").properties[AT_LAST_PLACE]
    assert stale.value is False and stale.confidence == pytest.approx(0.9)
    assert "3 times" in stale.reasoning and stale.source == "perception"
    assert "mug_1" in world.state.nodes  # an event, never a deletion
    # a further miss is counted, the property is not written again
    assert [e.kind for e in world.record_miss("mug_1", stamp=7.0)] == [
        EventKind.OBSERVATION_MISSED]
    assert world.node("mug_1").misses == 4
    back = world.ingest([obs("mug", [0.02, 0, 0], stamp=8.0)])
    assert [e.kind for e in back] == [EventKind.OBSERVATION_FUSED, EventKind.PROPERTY_SET]
    node = world.node("mug_1")
    assert node.misses == 0 and node.properties[AT_LAST_PLACE].value is True
    assert [e.kind for e in world.ingest([obs("mug", [0.02, 0, 0], stamp=9.0)])] == [
        EventKind.OBSERVATION_FUSED]
    assert len(world.why("mug_1", "misses")) == 4
    assert [e.payload["value"] for e in world.why("mug_1", AT_LAST_PLACE)] == [False, True]
    assert '"missed"' not in world.render(100_000)


def test_a_miss_limit_of_one_and_placement_reset_misses(tmp_path: Path) -> None:
    with WorldMemory.open(tmp_path / "w.db",
                          config=_config(misses_to_stale=1, stale_after_s=0.0)) as world:
        world.ingest([obs("mug", [0, 0, 0]), obs("table", [3, 0, 0.7], half=0.4)])
        events = world.record_miss("mug_1", stamp=2.0)
        assert [e.kind for e in events] == [EventKind.OBSERVATION_MISSED,
                                            EventKind.PROPERTY_SET]
        assert '"missed":1' in world.render(100_000)
        world.set_parent("mug_1", "table_1", "surface", stamp=3.0, position=(3, 0, 0.8))
        assert world.node("mug_1").misses == 0


def test_a_recent_sighting_outweighs_a_few_misses(tmp_path: Path) -> None:
    """The wrist camera looks into a cabinet from close by while the pole camera's far view of
    the same small thing flickers: its misses mark the node gone only once no camera has seen
    it for stale_after_s."""
    with WorldMemory.open(tmp_path / "w.db", config=_config(stale_after_s=5.0)) as world:
        world.ingest([obs("banana", [1.0, 0.0, 1.05], stamp=150.0)])
        for stamp in (151.0, 152.0, 153.0, 154.9):
            events = world.record_miss("banana_1", stamp=stamp, camera="pole")
            assert [e.kind for e in events] == [EventKind.OBSERVATION_MISSED]
        assert world.node("banana_1").misses == 4
        assert AT_LAST_PLACE not in world.node("banana_1").properties
        gone = world.record_miss("banana_1", stamp=155.0, camera="pole")
        assert [e.kind for e in gone] == [EventKind.OBSERVATION_MISSED, EventKind.PROPERTY_SET]
        assert "5 times in a row in the 5.0 s since it was last seen" in gone[1].payload[
            "reasoning"]
        # seen again: count and clock start over
        world.ingest([obs("banana", [1.0, 0.0, 1.05], stamp=156.0)])
        for stamp in (157.0, 158.0, 159.0):
            world.record_miss("banana_1", stamp=stamp, camera="pole")
        assert world.node("banana_1").properties[AT_LAST_PLACE].value is True
        # a miss stamped before the last sighting (a late frame) never marks it gone
        world.ingest([obs("banana", [1.0, 0.0, 1.05], stamp=170.0)])
        for stamp in (160.0, 161.0, 162.0, 163.0):
            assert len(world.record_miss("banana_1", stamp=stamp, camera="pole")) == 1
        assert world.node("banana_1").properties[AT_LAST_PLACE].value is True


def test_bad_misses_are_refused_without_writing(world: WorldMemory) -> None:
    world.ingest([obs("mug", [0, 0, 0])])
    count = world.log.count()
    with pytest.raises(UnknownNodeError):
        world.record_miss("mug_9", stamp=2.0)
    for stamp in (math.nan, math.inf, "now", True):
        with pytest.raises(InvalidValueError):
            world.record_miss("mug_1", stamp=stamp)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        world.record_miss("mug_1", stamp=2.0, camera=7)  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        world.record_miss("mug_1", stamp=2.0, camera="bad\ncamera")
    with pytest.raises(InvalidValueError):
        world.record_miss("mug_1", stamp=2.0, reason=None)  # type: ignore[arg-type]
    assert world.log.count() == count and world.node("mug_1").misses == 0


# ------------------------------------------------------------------ 4. merging duplicates
def _two_mugs(world: WorldMemory) -> None:
    """mug_1 seen twice at the origin, mug_2 once at x = 1, each with its own history."""
    world.ingest([obs("mug", [0, 0, 0], stamp=1.0)])
    world.ingest([obs("mug", [0, 0, 0], stamp=2.0)])
    world.ingest([obs("mug", [1, 0, 0], stamp=3.0), obs("spoon", [1, 0, 0.02], stamp=3.0)])
    world.set_property("mug_1", "color", "red", confidence=0.8, stamp=4.0)
    world.set_property("mug_1", "pickable", True, confidence=0.9, stamp=4.5)
    world.set_property("mug_2", "color", "blue", confidence=0.7, stamp=5.0)
    world.set_property("mug_2", "material", "ceramic", confidence=0.6, stamp=5.0)
    world.record_outcome("mug_1", "Pick", True, stamp=6.0)
    world.record_outcome("mug_2", "Look", True, stamp=5.5)
    world.link_keyframe("kf1", ["mug_1"], stamp=2.0)
    world.link_keyframe("kf2", ["mug_2"], stamp=3.0)
    world.set_parent("spoon_1", "mug_2", "container", stamp=3.5)


def test_merge_folds_the_duplicate_into_the_kept_node(world: WorldMemory) -> None:
    _two_mugs(world)
    colors = [e.event_id for e in world.why("mug_1", "color") + world.why("mug_2", "color")]
    merge = world.merge("mug_1", "mug_2", stamp=7.0, reason="one mug seen from two sides")
    assert merge.payload == {"kept_id": "mug_1", "merged_id": "mug_2",
                             "reason": "one mug seen from two sides"}
    assert sorted(world.state.nodes) == ["mug_1", "spoon_1"]
    assert world.state.aliases == {"mug_2": "mug_1"}
    assert world.graph_snapshot()["merged"] == {"mug_2": "mug_1"}
    node = world.node("mug_1")
    assert world.node("mug_2") is node and node.node_id == "mug_1"
    assert node.centroid[0] == pytest.approx(1 / 3)  # 2 observations at 0, 1 at 1
    assert node.observation_count == 3 and node.position_samples == 3
    assert node.first_seen == 1.0 and node.last_seen == 3.0
    assert node.properties["color"].value == "blue"  # newest wins
    assert node.properties["pickable"].value is True  # a seed never beats evidence
    assert node.properties["material"].value == "ceramic"  # missing on the kept node
    assert [t["task"] for t in node.task_history] == ["Look", "Pick"]
    assert node.keyframes == ["kf1", "kf2"] and world.state.keyframe_links["kf2"] == ["mug_1"]
    spoon = world.node("spoon_1")
    assert spoon.parent == "mug_1" and world.why("spoon_1", "parent")[-1] == merge
    assert [n.node_id for n in world.nodes_inside("mug_2")] == ["spoon_1"]
    assert world.nodes_near([1, 0, 0], 0.1, label="mug") == []
    # provenance: both nodes' events, oldest first, whichever id is asked
    assert [e.event_id for e in world.why("mug_1", "color")] == colors
    assert [e.event_id for e in world.why("mug_2", "color")] == colors
    assert [e.kind for e in world.why("mug_1", "created")] == [EventKind.NODE_CREATED] * 2
    assert world.why("mug_1", "merged") == [merge]
    assert world.why("mug_1", "position")[-1] == merge
    # later events naming the merged id apply to the kept node
    world.set_property("mug_2", "color", "green", confidence=0.9, stamp=8.0)
    assert world.node("mug_1").properties["color"].value == "green"
    world.ingest([obs("mug", [5, 5, 0], stamp=9.0)])
    assert sorted(world.state.nodes) == ["mug_1", "mug_3", "spoon_1"]  # mug_2 is not reused
    assert '"mug_2"' not in world.render(100_000, focus=["mug_2"])
    # a query by ids: a merged id names the kept node, once; a label narrows; unknown refused
    assert [n.node_id for n in world.state.select(["mug_2", "mug_1", "spoon_1"])] == [
        "mug_1", "spoon_1"]
    assert [n.node_id for n in world.state.select(label="mug")] == ["mug_1", "mug_3"]
    assert world.state.select(["spoon_1"], label="mug") == []
    with pytest.raises(UnknownNodeError, match="mug_9"):
        world.state.select(["mug_1", "mug_9"])


def test_merge_weighs_each_estimate_at_most_one_over_fade(world: WorldMemory) -> None:
    for i in range(10):
        world.ingest([obs("mug", [0, 0, 0], stamp=1.0 + i)])
    world.ingest([obs("mug", [1, 0, 0], stamp=20.0)])
    world.merge("mug_1", "mug_2", stamp=21.0, reason="same mug")
    assert world.node("mug_1").centroid[0] == pytest.approx(1 / 6)  # 5 : 1, not 10 : 1
    assert world.node("mug_1").position_samples == 11


def test_merge_moves_hypotheses_and_parent_to_the_kept_node(world: WorldMemory) -> None:
    world.add_node("kitchen", [0, 0, 0], stamp=0.5)
    world.ingest([obs("mug", [0, 0, 0])])
    world.ingest([obs("mug", [0.45, 0, 0], stamp=2.0)])  # a hypothesis of mug_1
    world.ingest([obs("mug", [3, 0, 0], stamp=3.0)])
    world.link_hypotheses(["mug_2", "mug_3"], stamp=4.0)
    world.set_parent("mug_2", "kitchen_1", "room", stamp=4.5)
    world.merge("mug_1", "mug_2", stamp=5.0, reason="same mug")
    assert world.node("mug_1").alternatives == {"mug_3"}
    assert world.node("mug_3").alternatives == {"mug_1"}
    assert world.node("mug_1").parent == "kitchen_1"
    assert [n.node_id for n in world.nodes_inside("kitchen_1")] == ["mug_1"]


def test_a_merge_and_events_naming_the_merged_id_in_one_batch(world: WorldMemory) -> None:
    _two_mugs(world)
    merge = MemoryEvent(kind=EventKind.NODES_MERGED, stamp=7.0, source=Source.OPERATOR,
                        payload={"kept_id": "mug_1", "merged_id": "mug_2", "reason": "dup"})
    later = MemoryEvent(kind=EventKind.PROPERTY_SET, stamp=7.5, source=Source.INTERACTION,
                        payload={"node_id": "mug_2", "name": "color", "value": "black",
                                 "confidence": 0.9})
    again = MemoryEvent(kind=EventKind.NODES_MERGED, stamp=7.6, source=Source.OPERATOR,
                        payload={"kept_id": "mug_1", "merged_id": "mug_2", "reason": "dup"})
    count = world.log.count()
    with pytest.raises(GraphConsistencyError):
        world.append([merge, later, again])
    assert world.log.count() == count
    assert len(world.append([merge, later])) == 2
    assert world.node("mug_1").properties["color"].value == "black"


def test_bad_merges_are_refused_without_writing(world: WorldMemory) -> None:
    _two_mugs(world)
    world.ingest([obs("bowl", [4, 0, 0], stamp=3.0), obs("mug", [6, 0, 0], stamp=3.0)])
    world.set_parent("mug_3", "mug_1", "container", stamp=3.5)
    count, before = world.log.count(), world.graph_snapshot()
    with pytest.raises(UnknownNodeError):
        world.merge("mug_1", "mug_9", stamp=7.0, reason="x")
    with pytest.raises(UnknownNodeError):
        world.merge("mug_9", "mug_1", stamp=7.0, reason="x")
    with pytest.raises(GraphConsistencyError):
        world.merge("mug_1", "mug_1", stamp=7.0, reason="x")
    with pytest.raises(GraphConsistencyError):
        world.merge("mug_1", "bowl_1", stamp=7.0, reason="x")
    with pytest.raises(GraphConsistencyError):  # one holds the other
        world.merge("mug_1", "mug_3", stamp=7.0, reason="x")
    with pytest.raises(InvalidValueError):
        world.merge("mug_1", "mug_2", stamp=math.nan, reason="x")
    with pytest.raises(InvalidValueError):
        world.merge("mug_1", "mug_2", stamp=7.0, reason=3)  # type: ignore[arg-type]
    assert world.log.count() == count and world.graph_snapshot() == before
    world.merge("mug_1", "mug_2", stamp=7.0, reason="same mug")
    count = world.log.count()
    with pytest.raises(GraphConsistencyError, match="already merged"):
        world.merge("mug_1", "mug_2", stamp=8.0, reason="again")
    with pytest.raises(GraphConsistencyError):  # mug_2 is mug_1 now
        world.merge("mug_2", "mug_1", stamp=8.0, reason="back")
    assert world.log.count() == count


def test_as_of_before_the_merge_shows_both_nodes(world: WorldMemory) -> None:
    _two_mugs(world)
    world.merge("mug_1", "mug_2", stamp=7.0, reason="same mug")
    past = world.as_of(6.5)
    assert sorted(past.nodes) == ["mug_1", "mug_2", "spoon_1"] and past.aliases == {}
    assert past.node("mug_2").centroid[0] == pytest.approx(1.0)
    assert past.node("mug_1").properties["color"].value == "red"
    assert past.node("spoon_1").parent == "mug_2"
    after = world.as_of(7.0)
    assert sorted(after.nodes) == ["mug_1", "spoon_1"]
    assert after.node("mug_2").node_id == "mug_1"


# ------------------------------------------------------------------ replay
def test_everything_survives_reopen_and_replays_the_same(tmp_path: Path) -> None:
    path = tmp_path / "world.db"
    with WorldMemory.open(path) as world:
        _two_mugs(world)
        for i in range(8):
            world.ingest([obs("mug", [0.1, 0, 0], stamp=10.0 + i)])
        world.record_miss("spoon_1", stamp=11.0)
        world.ingest([obs("cabinet", [2, 0, 1], half=0.3, stamp=12.0)])
        world.set_parent("spoon_1", "cabinet_1", "container", stamp=13.0,
                         position=(2.0, 0.1, 1.1))
        for stamp in (15.0, 16.0, 17.0):  # the last 5 s after the cabinet was seen
            world.record_miss("cabinet_1", stamp=stamp, camera="head")
        world.merge("mug_1", "mug_2", stamp=17.0, reason="same mug")
        world.set_property("mug_2", "color", "green", confidence=0.9, stamp=18.0)
        live = world.graph_snapshot()
        why = [e.event_id for e in world.why("mug_2", "color")]
        past = world.as_of(16.5).snapshot()
    assert live["merged"] == {"mug_2": "mug_1"}
    assert live["nodes"]["cabinet_1"]["misses"] == 3
    assert live["nodes"]["cabinet_1"]["properties"][AT_LAST_PLACE]["value"] is False
    assert live["nodes"]["spoon_1"]["pos"] == [2.0, 0.1, 1.1]
    with WorldMemory.open(path) as again:
        assert again.graph_snapshot() == live
        assert [e.event_id for e in again.why("mug_2", "color")] == why
        assert again.as_of(16.5).snapshot() == past
        assert "mug_2" in past["nodes"] and past["merged"] == {}
    with WorldMemory.open(path, readonly=True) as reader:
        assert reader.graph_snapshot() == live
        assert reader.skipped_events == []


# -- duplicates that converge are merged by ingest ---------------------------------------------
def _cabinet_views(world: WorldMemory, views: int) -> list[MemoryEvent]:
    """One cabinet seen whole, then a view of its open door out in front (a second node), then
    views of the cabinet with its door; returns every event of the last batches."""
    world.ingest([_box("cabinet", [0.0, 0.0, 0.0], [0.6, 0.6, 0.8], 1.0)])
    world.ingest([_box("cabinet", [0.25, 0.95, 0.1], [0.35, 1.15, 0.7], 2.0)])
    events: list[MemoryEvent] = []
    for index in range(views):
        events += world.ingest([_box("cabinet", [0.0, 0.0, 0.0], [0.6, 1.1, 0.8],
                                     3.0 + index)])
    return events


def test_nodes_that_turn_out_to_be_one_are_merged_with_both_histories(tmp_path: Path) -> None:
    world = WorldMemory.open(tmp_path / "world.db", config=_config())
    try:
        events = _cabinet_views(world, 15)
        merges = [e for e in events if e.kind is EventKind.NODES_MERGED]
        assert len(merges) == 1, [e.kind for e in events]
        merge = merges[0]
        # the node seen more often stays; the door's node becomes an alias of it
        assert merge.payload["kept_id"] == "cabinet_1"
        assert merge.payload["merged_id"] == "cabinet_2"
        assert merge.payload["reason"].startswith("converged: centroids")
        assert merge.source is Source.PERCEPTION
        assert sorted(world.state.nodes) == ["cabinet_1"]
        assert world.node("cabinet_2").node_id == "cabinet_1"
        created = world.why("cabinet_1", "created")
        assert [e.payload["node_id"] for e in created] == ["cabinet_1", "cabinet_2"]
        # later views fuse into the one node; nothing is merged again
        again = world.ingest([_box("cabinet", [0.0, 0.0, 0.0], [0.6, 1.1, 0.8], 20.0)])
        assert [e.kind for e in again] == [EventKind.OBSERVATION_FUSED]
    finally:
        world.close()


def test_neighbours_and_the_switch_keep_nodes_apart(tmp_path: Path) -> None:
    # two cabinets side by side: centroids within the radius, boxes that do not nest
    world = WorldMemory.open(tmp_path / "apart.db", config=_config())
    try:
        world.ingest([_box("cabinet", [0.0, 0.0, 0.0], [0.6, 0.55, 0.8], 1.0),
                      _box("cabinet", [0.0, 0.6, 0.0], [0.6, 1.15, 0.8], 1.0)])
        for stamp in range(2, 10):
            events = world.ingest([_box("cabinet", [0.0, 0.0, 0.0], [0.6, 0.55, 0.8], stamp),
                                   _box("cabinet", [0.0, 0.6, 0.0], [0.6, 1.15, 0.8], stamp)])
            assert EventKind.NODES_MERGED not in [e.kind for e in events]
        assert sorted(world.state.nodes) == ["cabinet_1", "cabinet_2"]
    finally:
        world.close()
    off = WorldMemory.open(tmp_path / "off.db", config=_config(merge_converged=False))
    try:
        events = _cabinet_views(off, 15)
        assert EventKind.NODES_MERGED not in [e.kind for e in events]
        assert sorted(off.state.nodes) == ["cabinet_1", "cabinet_2"]
    finally:
        off.close()


def test_an_opened_door_stays_part_of_its_cabinet(tmp_path: Path) -> None:
    """Three wall cabinets 0.6 m apart; the middle door opens and closes again. Views of the
    cabinet with its door out in the room, and of the door slab alone, join the middle cabinet:
    no cabinet_4, and its neighbours keep their places."""
    world = WorldMemory.open(tmp_path / "world.db", config=_config())

    def closed(y: float, stamp: float) -> ObjectObservation:
        return _box("cabinet", [0.9, y - 0.275, 1.0], [1.25, y + 0.275, 1.6], stamp)

    try:
        stamp = 1.0
        for _ in range(6):
            world.ingest([closed(0.6, stamp), closed(0.0, stamp), closed(-0.6, stamp)])
            stamp += 1.0
        for _ in range(15):
            world.ingest([_box("cabinet", [0.35, -0.275, 1.0], [1.25, 0.3, 1.6], stamp)])
            world.ingest([_box("cabinet", [0.35, 0.26, 1.0], [0.9, 0.3, 1.6], stamp + 0.5)])
            stamp += 1.0
        for _ in range(10):
            world.ingest([closed(0.6, stamp), closed(0.0, stamp), closed(-0.6, stamp)])
            stamp += 1.0
        nodes = world.state.nodes
        assert sorted(nodes) == ["cabinet_1", "cabinet_2", "cabinet_3"]
        assert [nodes[n].observation_count for n in sorted(nodes)] == [16, 46, 16]
        for node_id, y in (("cabinet_1", 0.6), ("cabinet_2", 0.0), ("cabinet_3", -0.6)):
            assert nodes[node_id].centroid[1] == pytest.approx(y, abs=0.05)
        # the closed views brought the middle estimate back against the wall
        assert nodes["cabinet_2"].centroid[0] == pytest.approx(1.07, abs=0.05)
    finally:
        world.close()


def test_a_door_seen_alone_in_the_swing_of_an_open_cabinet_moves_nothing(tmp_path: Path) -> None:
    """Three wall cabinets (0.55 m wide, 0.35 m deep, wall at x = 1.25). The right one opens
    past a right angle; a view that shows only the far end of its door, out in the room and
    leaning over the middle cabinet's side (as recorded in a simulated run), lies further than
    the association radius from every cabinet. While memory holds the cabinet open the view is
    a sighting of an open cabinet, not a fourth cabinet, and no box or centroid moves."""
    def closed(y: float, stamp: float) -> ObjectObservation:
        return _box("cabinet", [0.9, y - 0.275, 1.0], [1.25, y + 0.275, 1.45], stamp)

    door_end = ([0.36, -0.213, 1.2], [0.517, -0.14, 1.447])
    with WorldMemory.open(tmp_path / "shut.db", config=_config()) as world:
        world.ingest([closed(0.6, 1.0), closed(0.0, 1.0), closed(-0.6, 1.0)])
        # nobody opened anything: such a view starts a node of its own
        (event,) = world.ingest([_box("cabinet", *door_end, stamp=2.0)])
        assert event.kind is EventKind.NODE_CREATED
    with WorldMemory.open(tmp_path / "open.db", config=_config()) as world:
        world.ingest([closed(0.6, 1.0), closed(0.0, 1.0), closed(-0.6, 1.0)])
        world.set_property("cabinet_3", "openable", True, confidence=0.9, stamp=1.5,
                           is_opened=True)
        before = {n: (world.node(n).centroid, world.node(n).bbox_min, world.node(n).bbox_max)
                  for n in ("cabinet_1", "cabinet_2", "cabinet_3")}
        counts = {n: world.node(n).observation_count for n in before}
        (event,) = world.ingest([_box("cabinet", *door_end, stamp=2.0)])
        assert event.kind is EventKind.OBSERVATION_FUSED and event.payload["part"] is True
        holder = event.payload["node_id"]
        assert holder in ("cabinet_2", "cabinet_3")
        assert sorted(world.state.nodes) == ["cabinet_1", "cabinet_2", "cabinet_3"]
        after = {n: (world.node(n).centroid, world.node(n).bbox_min, world.node(n).bbox_max)
                 for n in before}
        assert after == before
        assert world.node(holder).observation_count == counts[holder] + 1
        assert world.node(holder).history["parts"] == [event.event_id]
        # a new cabinet beside the open one (further along the wall) is a node of its own
        (beside,) = world.ingest([closed(-1.25, 3.0)])
        assert beside.kind is EventKind.NODE_CREATED
        seen = (world.node(holder).observation_count, world.node(holder).centroid)
    # replaying the log gives the same graph
    with WorldMemory.open(tmp_path / "open.db", config=_config()) as replayed:
        assert (replayed.node(holder).observation_count, replayed.node(holder).centroid) == seen
    with WorldMemory.open(tmp_path / "off.db", config=_config(open_swing=False)) as world:
        world.ingest([closed(0.6, 1.0), closed(0.0, 1.0), closed(-0.6, 1.0)])
        world.set_property("cabinet_3", "openable", True, confidence=0.9, stamp=1.5,
                           is_opened=True)
        (event,) = world.ingest([_box("cabinet", *door_end, stamp=2.0)])
        assert event.kind is EventKind.NODE_CREATED
    with pytest.raises(ConfigError, match="open_swing"):
        memory_config_from_dict({"association": {"open_swing": "yes"}})


def test_a_sliver_of_a_door_being_opened_is_a_sighting_of_its_cabinet(tmp_path: Path) -> None:
    """While the robot opens a cabinet (before the open's analysis says it stands open), the
    wrist camera close to the swinging door sees a sliver of its lower edge out in the room (a
    Long Horizon run recorded a 5 mm box 0.5 m in front of the wall, which became an eleventh
    cabinet). It is a part of the operated cabinet; once the operation has timed out with no
    analysis, such a view starts a node again."""
    def closed(y: float, stamp: float) -> ObjectObservation:
        return _box("cabinet", [0.9, y - 0.275, 1.0], [1.25, y + 0.275, 1.45], stamp)

    sliver = ([0.4096, 1.0749, 1.003], [0.4144, 1.0801, 1.011])
    config = _config(operation_timeout_s=60.0)
    with WorldMemory.open(tmp_path / "op.db", config=config) as world:
        world.ingest([closed(1.75, 1.0), closed(1.05, 1.0), closed(0.35, 1.0)])
        world.operation_started("cabinet_2", 2.0, "open-1")
        (event,) = world.ingest([_box("cabinet", *sliver, stamp=3.0)])
        assert event.kind is EventKind.OBSERVATION_FUSED and event.payload["part"] is True
        assert event.payload["node_id"] == "cabinet_2"
        assert sorted(world.state.nodes) == ["cabinet_1", "cabinet_2", "cabinet_3"]
        # long after the operation began, with no analysis, the same view is a new node
        world.ingest([closed(1.05, 100.0)])
        (late,) = world.ingest([_box("cabinet", *sliver, stamp=101.0)])
        assert late.kind is EventKind.NODE_CREATED
    with WorldMemory.open(tmp_path / "off.db", config=_config(open_swing=False)) as world:
        world.ingest([closed(1.75, 1.0), closed(1.05, 1.0), closed(0.35, 1.0)])
        world.operation_started("cabinet_2", 2.0, "open-1")
        (event,) = world.ingest([_box("cabinet", *sliver, stamp=3.0)])
        assert event.kind is EventKind.NODE_CREATED
    with WorldMemory.open(tmp_path / "bad.db", config=config) as world, pytest.raises(
            UnknownNodeError):
        world.operation_started("cabinet_9", 2.0, "open-2")


def test_a_wrist_view_fuses_into_a_cabinet_but_does_not_start_one(tmp_path: Path) -> None:
    """A Long Horizon run ended with an eleventh cabinet, started by a wrist view between two
    upper cabinets that matched neither. With the wrist listed in ``no_start_cameras`` for
    cabinets, such a view is held back with its reason; a wrist view that matches a cabinet
    still fuses, other cameras still start cabinets, and the wrist still starts other labels."""
    def seen(camera: str, lo: list[float], hi: list[float], stamp: float,
             label: str = "cabinet") -> ObjectObservation:
        centre = (np.asarray(lo) + np.asarray(hi)) / 2.0
        return ObjectObservation(label=label, centroid=centre, bbox_min=np.asarray(lo),
                                 bbox_max=np.asarray(hi), stamp=stamp, camera=camera)

    upper = ([0.9, -0.3, 1.4], [1.25, 0.3, 1.9])
    apart = ([0.9, 1.4, 0.2], [1.25, 1.9, 0.7])  # 2 m off, matches nothing
    config = _config(no_start_cameras={"Cabinet": ["wrist"]})
    with WorldMemory.open(tmp_path / "w.db", config=config) as world:
        world.ingest([seen("pole", *upper, stamp=1.0)])
        held: list[tuple[ObjectObservation, str]] = []
        events = world.ingest([seen("wrist", *apart, stamp=2.0),
                               seen("wrist", [0.9, -0.2, 1.5], [0.95, 0.2, 1.8], stamp=2.0),
                               seen("wrist", [0.2, 1.5, 0.8], [0.3, 1.6, 0.9], 2.0, "mug")],
                              held_back=held)
        assert [(e.kind, e.payload["node_id"]) for e in events] == [
            (EventKind.OBSERVATION_FUSED, "cabinet_1"), (EventKind.NODE_CREATED, "mug_1")]
        ((obs_held, reason),) = held
        assert obs_held.camera == "wrist" and "may not start a cabinet node" in reason
        assert sorted(world.state.nodes) == ["cabinet_1", "mug_1"]
        # a batch of held-back views alone writes nothing and fails nothing
        assert world.ingest([seen("wrist", *apart, stamp=3.0)]) == []
        (made,) = world.ingest([seen("base", *apart, stamp=4.0)])
        assert made.kind is EventKind.NODE_CREATED and made.payload["node_id"] == "cabinet_2"
        assert world.config.association.no_start_cameras == {"cabinet": ("wrist",)}
    with WorldMemory.open(tmp_path / "off.db", config=_config()) as world:
        (event,) = world.ingest([seen("wrist", *apart, stamp=1.0)])
        assert event.kind is EventKind.NODE_CREATED
    for bad in ("wrist", {"cabinet": "wrist"}, {"cabinet": [""]}, {"cabinet": [3]}):
        with pytest.raises(ConfigError, match="no_start_cameras"):
            memory_config_from_dict({"association": {"no_start_cameras": bad}})


def test_an_operated_or_open_fixture_keeps_its_centroid_while_its_box_widens(
        tmp_path: Path) -> None:
    """Views recorded while the robot opens a wall cabinet (front at x = 0.9, wall at 1.25)
    show the door out in the room, then the interior: averaged in, they walked the estimate
    0.19 m off the front in a simulated run, and the inspection aimed there ran the hand into
    the door. From the open's start until memory holds its analysed outcome, and while memory
    holds the cabinet open, such views widen its box outward and leave its centroid."""
    config = _config(label_fade={"cabinet": 0.02})
    front = ([0.9, -0.3, 1.0], [0.95, 0.3, 1.45])
    door_out = ([0.4, -0.3, 1.0], [0.95, 0.3, 1.45])
    interior = ([0.9, -0.3, 1.0], [1.25, 0.3, 1.45])
    with WorldMemory.open(tmp_path / "w.db", config=config) as world:
        for i in range(10):
            world.ingest([_box("cabinet", *front, stamp=1.0 + i)])
        placed = world.node("cabinet_1").centroid
        lo_x, hi_x = world.node("cabinet_1").bbox_min[0], world.node("cabinet_1").bbox_max[0]
        world.operation_started("cabinet_1", 20.0, "open-1")
        events = []
        for i in range(20):
            events += world.ingest([_box("cabinet", *door_out, stamp=20.5 + i)])
            events += world.ingest([_box("cabinet", *interior, stamp=20.7 + i)])
        assert all(e.payload.get("anchored") is True for e in events)
        cabinet = world.node("cabinet_1")
        assert cabinet.centroid == placed
        # the box reached out both ways, toward the door and toward the wall
        assert cabinet.bbox_min[0] < lo_x - 0.1 and cabinet.bbox_max[0] > hi_x + 0.1
        assert cabinet.observation_count == 50
        # the open is analysed: memory now holds the cabinet open, which keeps anchoring it
        world.update_node("cabinet_1", stamp=41.0, outcome={
            "task": "find the mug", "success": True, "primitive": "open",
            "interaction_id": "open-1"}, properties={"openable": {
                "value": True, "confidence": 0.9, "is_opened": True}})
        (held,) = world.ingest([_box("cabinet", *door_out, stamp=42.0)])
        assert held.payload["anchored"] is True and world.node("cabinet_1").centroid == placed
        # closed again: views move it like any other
        world.set_property("cabinet_1", "openable", True, confidence=0.9, stamp=43.0,
                           is_opened=False)
        (free,) = world.ingest([_box("cabinet", *door_out, stamp=44.0)])
        assert "anchored" not in free.payload
        assert world.node("cabinet_1").centroid[0] < placed[0]
        seen = world.node("cabinet_1").centroid, world.node("cabinet_1").bbox_min
    # the decision lives in the events: a replay gives the same fixture
    with WorldMemory.open(tmp_path / "w.db", config=config) as replayed:
        assert (replayed.node("cabinet_1").centroid, replayed.node("cabinet_1").bbox_min) == seen


def test_an_operation_stops_anchoring_at_its_outcome_or_its_timeout(tmp_path: Path) -> None:
    front = ([0.9, -0.3, 1.0], [0.95, 0.3, 1.45])
    door_out = ([0.4, -0.3, 1.0], [0.95, 0.3, 1.45])
    with WorldMemory.open(tmp_path / "w.db", config=_config(operation_timeout_s=30.0)) as world:
        world.ingest([_box("cabinet", *front, stamp=1.0)])
        # a locked cabinet: the open is analysed, nothing says it stands open
        world.operation_started("cabinet_1", 2.0, "open-1")
        (during,) = world.ingest([_box("cabinet", *door_out, stamp=3.0)])
        world.update_node("cabinet_1", stamp=4.0, outcome={
            "task": "t", "success": False, "primitive": "open", "interaction_id": "open-1"})
        (after,) = world.ingest([_box("cabinet", *door_out, stamp=5.0)])
        assert during.payload.get("anchored") is True and "anchored" not in after.payload
        # an operation whose outcome never comes anchors for operation_timeout_s
        world.operation_started("cabinet_1", 10.0, "open-2")
        (early,) = world.ingest([_box("cabinet", *door_out, stamp=39.0)])
        (late,) = world.ingest([_box("cabinet", *door_out, stamp=41.0)])
        assert early.payload.get("anchored") is True and "anchored" not in late.payload
        # ended by its caller (a replay without the analyzer): released at once
        world.operation_started("cabinet_1", 50.0, "open-3")
        assert world.operation_ended("open-3") and not world.operation_ended("open-3")
        assert not world.operation_ended("never-started")
        (released,) = world.ingest([_box("cabinet", *door_out, stamp=51.0)])
        assert "anchored" not in released.payload
    with WorldMemory.open(tmp_path / "off.db", config=_config(anchor_open=False)) as world:
        world.ingest([_box("cabinet", *front, stamp=1.0)])
        world.operation_started("cabinet_1", 2.0, "open-1")
        (event,) = world.ingest([_box("cabinet", *door_out, stamp=3.0)])
        assert "anchored" not in event.payload


def test_bad_operations_and_anchored_flags_are_refused(world: WorldMemory) -> None:
    world.ingest([_box("cabinet", [0.9, -0.3, 1.0], [1.25, 0.3, 1.45], 1.0)])
    with pytest.raises(UnknownNodeError):
        world.operation_started("cabinet_9", 2.0, "open-1")
    for stamp in (math.nan, math.inf, "2", True):
        with pytest.raises(InvalidValueError, match="finite number"):
            world.operation_started("cabinet_1", stamp, "open-1")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="interaction id"):
        world.operation_started("cabinet_1", 2.0, "")
    (event,) = world.ingest([_box("cabinet", [0.4, -0.3, 1.0], [1.25, 0.3, 1.45], 3.0)])
    assert "anchored" not in event.payload  # nothing was tracked
    bad = MemoryEvent(kind=EventKind.OBSERVATION_FUSED, stamp=4.0, source=Source.PERCEPTION,
                      payload={"node_id": "cabinet_1", "centroid": [1.0, 0.0, 1.2],
                               "bbox_min": [0.9, -0.3, 1.0], "bbox_max": [1.25, 0.3, 1.45],
                               "anchored": 1})
    with pytest.raises(InvalidValueError, match="anchored must be a boolean"):
        world.append([bad])
    assert world.node("cabinet_1").observation_count == 2
    with pytest.raises(ConfigError, match="operation_timeout_s"):
        memory_config_from_dict({"association": {"operation_timeout_s": 0}})


def test_a_part_flag_that_is_not_a_boolean_is_refused(world: WorldMemory) -> None:
    world.ingest([_box("cabinet", [0.9, -0.3, 1.0], [1.25, 0.3, 1.45], 1.0)])
    bad = MemoryEvent(kind=EventKind.OBSERVATION_FUSED, stamp=2.0, source=Source.PERCEPTION,
                      payload={"node_id": "cabinet_1", "centroid": [1.0, 0.0, 1.2],
                               "bbox_min": [0.9, -0.3, 1.0], "bbox_max": [1.25, 0.3, 1.45],
                               "part": "yes"})
    with pytest.raises(InvalidValueError, match="part must be a boolean"):
        world.append([bad])
    assert world.node("cabinet_1").observation_count == 1


def test_an_admitted_find_inside_a_fixture_brings_a_stale_node_back(world: WorldMemory) -> None:
    """A look into a cabinet sees the banana; before memory knows it is inside, a camera that
    cannot see into the cabinet misses it three times and memory marks it stale. The
    inspection's admitted parent change says where it is: the node is back at its place."""
    world.ingest([_box("cabinet", [0.9, -0.3, 1.0], [1.25, 0.3, 1.45], 1.0),
                  obs("banana", [1.0, 0.0, 1.05], stamp=1.0)])
    for stamp in (2.0, 4.0, 6.0):
        world.record_miss("banana_1", stamp=stamp, camera="pole")
    assert world.node("banana_1").properties[AT_LAST_PLACE].value is False
    deferred = world.update_node("banana_1", stamp=7.0, parent=("cabinet_1", "container"),
                                 verdict=Verdict.DEFER)
    assert [e.kind for e in deferred] == [EventKind.PARENT_CHANGED]
    assert world.node("banana_1").properties[AT_LAST_PLACE].value is False
    found = world.update_node("banana_1", stamp=8.0, parent=("cabinet_1", "container"))
    assert [e.kind for e in found] == [EventKind.PARENT_CHANGED, EventKind.PROPERTY_SET]
    back = world.node("banana_1").properties[AT_LAST_PLACE]
    assert back.value is True and "found in cabinet_1" in back.reasoning
    # a node that was never stale gets no such property, and taking it away says nothing
    world.ingest([obs("mug", [0.0, 1.0, 0.9], stamp=9.0)])
    assert [e.kind for e in world.update_node("mug_1", stamp=10.0, parent=("cabinet_1",
                                                                         "container"))] \
        == [EventKind.PARENT_CHANGED]


# ------------------------------------------------------------------ sightings
def test_sightings_give_each_observation_with_its_camera_stamp_and_own_box(
        world: WorldMemory) -> None:
    """Each perception observation that created or was fused into a node, newest first, with
    its own box (not the fused one); a duplicate merged in brings its sightings along."""
    world.ingest([replace(obs("mug", [0, 0, 0], stamp=1.0), camera="pole")])
    world.ingest([replace(obs("mug", [0.1, 0, 0], stamp=2.0), camera="wrist")])
    seen = world.sightings("mug_1")
    assert [(s.camera, s.stamp) for s in seen] == [("wrist", 2.0), ("pole", 1.0)]
    assert seen[0].bbox_min == pytest.approx((0.05, -0.05, -0.05))
    assert seen[0].bbox_max == pytest.approx((0.15, 0.05, 0.05))
    assert world.node("mug_1").bbox_max[0] != pytest.approx(0.15)  # the fused box lags
    assert [s.stamp for s in world.sightings("mug_1", newest=1)] == [2.0]

    # a duplicate seen elsewhere, merged into the mug: its sighting is the mug's now
    world.ingest([replace(obs("mug", [2.0, 0, 0], stamp=3.0), camera="base")])
    world.merge("mug_1", "mug_2", stamp=4.0, reason="one mug")
    assert [s.camera for s in world.sightings("mug_1")] == ["base", "wrist", "pole"]

    # what perception did not see has no sighting: a node an operator declared
    world.add_node("table", [1.0, 1.0, 0.4], stamp=5.0)
    assert world.sightings("table_1") == []
    with pytest.raises(UnknownNodeError):
        world.sightings("cup_9")
    for bad in (0, -3, 1.5, True):
        with pytest.raises(InvalidValueError):
            world.sightings("mug_1", newest=bad)  # type: ignore[arg-type]
