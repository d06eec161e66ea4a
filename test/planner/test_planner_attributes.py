"""Attribute words fail closed: a colour or pattern is never satisfied by a label match alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_kitchen import Fixture, session_for

from mimir_memory.task import GoalStatus
from mimir_memory.world import WorldMemory
from mimir_planner.answers import answer_question
from mimir_planner.config import AttributeConfig, load_planner_config
from mimir_planner.errors import PlannerConfigError
from mimir_planner.grounding import Blocked, GroundedGoal, Grounder
from mimir_planner.instructions import parse_instruction
from mimir_planner.primitives import PrimitiveRegistry, RobotContext
from mimir_planner.recall import (
    AttributeTable,
    CategoryTable,
    GoalRecall,
    RecallQuery,
    SynonymTable,
)
from mimir_planner.runs import RunStop

CONFIG = load_planner_config()


def _layout() -> list[tuple[str, Fixture]]:
    return [
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False, contents=("apple",))),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("apple",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("apple",))),
    ]


@pytest.fixture
def kitchen(kitchen_of):
    return kitchen_of(_layout())


def _apple(world: WorldMemory, kit, holder: str, color: str | None = None, *,
           confidence: float = 0.9, prop: str = "color") -> str:
    """Remember an apple in ``holder`` (listed and as a node), with a colour if given."""
    x, y, z = kit.fixtures[holder].position
    node = world.add_node("apple", (x, y, z - 0.05), stamp=3.0).payload["node_id"]
    world.set_parent(node, holder, "container" if kit.fixtures[holder].opens else "surface",
                     stamp=4.0)
    world.set_contents(holder, [{"name": "apple", "node_id": node}], is_empty=False, stamp=4.0,
                       source_action="inspect")
    kit.object_nodes[(holder, "apple")] = node
    if color is not None:
        world.set_property(node, prop, color, confidence=confidence, stamp=5.0)
    return node


def _reason(task, goal_id: str) -> str:
    return task.state.status_reason.get(goal_id, "")


def _recall() -> GoalRecall:
    return GoalRecall(CONFIG.recall, SynonymTable(CONFIG.synonyms),
                      is_fixture=CONFIG.is_fixture_label,
                      categories=CategoryTable(CONFIG.categories),
                      attributes=AttributeTable(CONFIG.attributes))


def test_green_apple_with_only_red_apples_remembered_does_not_complete(kitchen) -> None:
    world, task, kit = kitchen
    red_1 = _apple(world, kit, "cabinet_1", "red")
    red_2 = _apple(world, kit, "cabinet_2", "red")
    session = session_for(world, task)
    session.submit("Find the green apple.")
    report = session.run(kit)
    assert report.completed == [] and report.blocked == ["g001_find"]
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert kit.executed == []
    reason = _reason(task, "g001_find")
    assert "no remembered apple is known to be green" in reason
    assert f"{red_1}: remembered red" in reason and f"{red_2}: remembered red" in reason
    assert "colour needs a vision-language model or appearance evidence" in reason


@pytest.mark.parametrize(("color", "confidence"), [(None, 0.9), ("green", 0.3)])
def test_green_apple_of_unknown_colour_does_not_complete(kitchen, color, confidence) -> None:
    world, task, kit = kitchen
    # no colour at all, or a colour below attributes.min_confidence (unknown)
    _apple(world, kit, "cabinet_1", color, confidence=confidence)
    _apple(world, kit, "cabinet_2")
    session = session_for(world, task)
    result = session.run_instruction("Find the green apple.", kit)
    assert result.stop is RunStop.BLOCKED and result.completed() == []
    assert task.status("g001_find") is GoalStatus.BLOCKED and kit.executed == []
    assert "no remembered apple is known to be green" in result.reason
    assert "colour not known" in result.reason


def test_green_apple_grounds_to_the_green_one(kitchen) -> None:
    world, task, kit = kitchen
    red = _apple(world, kit, "cabinet_1", "red")
    green = _apple(world, kit, "cabinet_2", "Green", prop="colour")
    session = session_for(world, task)
    session.submit("Find the green apple.")
    report = session.run(kit)
    assert report.completed == ["g001_find"] and not report.blocked
    assert [(s.primitive, s.target) for s in kit.executed] == [
        ("move_to", "cabinet_2"), ("open", "cabinet_2"), ("inspect", "cabinet_2")]
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [green]
    assert red not in {s.target for s in kit.executed}


def test_find_without_an_attribute_completes_as_before(kitchen) -> None:
    world, task, kit = kitchen
    red = _apple(world, kit, "cabinet_1", "red")
    _apple(world, kit, "cabinet_2")
    session = session_for(world, task)
    session.submit("Find the apple.")
    report = session.run(kit)
    assert report.completed == ["g001_find"]
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [red]


def test_an_object_memory_lacks_is_explored_for_then_blocks_on_its_colour(kitchen) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    session.submit("Find the green apple.")
    report = session.run(kit)
    # no apple remembered: an inspection finds apples, but none known to be green
    assert [(s.primitive, s.target) for s in kit.executed] == [
        ("move_to", "cabinet_1"), ("open", "cabinet_1"), ("inspect", "cabinet_1")]
    assert report.completed == [] and report.blocked == ["g001_find"]
    assert "no remembered apple is known to be green" in _reason(task, "g001_find")


def test_location_phrases_combine_with_colour(kitchen) -> None:
    world, task, kit = kitchen
    _apple(world, kit, "counter_1", "green")
    _apple(world, kit, "cabinet_1", "red")
    stored = _apple(world, kit, "cabinet_2", "green")
    session = session_for(world, task)
    session.submit("Find the green apple, not the one on the counter.")
    report = session.run(kit)
    assert report.completed == ["g001_find"]
    assert [e.node_id for e in report.answer_entities["g001_find"]] == [stored]


def test_a_planner_that_judges_appearance_keeps_unknown_colours(kitchen) -> None:
    world, _, kit = kitchen
    red = _apple(world, kit, "cabinet_1", "red")
    unknown = _apple(world, kit, "cabinet_2")
    grounder = Grounder(_recall(), PrimitiveRegistry(CONFIG))
    (spec,) = parse_instruction("Find the green apple.").goals
    robot = RobotContext()
    lenient = grounder.ground("g1", spec, world.state, [], robot, require_attributes=False)
    assert isinstance(lenient, GroundedGoal) and lenient.candidate.node_id == unknown
    assert red not in [c.node_id for c in lenient.candidates]
    strict = grounder.ground("g1", spec, world.state, [], robot)
    assert isinstance(strict, Blocked)
    assert {n for n, _ in strict.dropped} == {red, unknown}


def test_recall_checks_attributes_against_memory(tmp_path: Path) -> None:
    world = WorldMemory.open(tmp_path / "world.db")
    try:
        cabinet = world.add_node("cabinet", (1.0, 0.0, 1.3), stamp=1.0).payload["node_id"]
        plain = world.add_node("mug", (0.5, 0.0, 0.9), stamp=1.0).payload["node_id"]
        labelled = world.add_node("striped mug", (0.6, 0.0, 0.9), stamp=1.0).payload["node_id"]
        orange = world.add_node("orange", (0.7, 0.0, 0.9), stamp=1.0).payload["node_id"]
        world.set_property(plain, "pattern", "plain", confidence=0.8, stamp=2.0)
        world.set_contents(cabinet, [{"name": "checkered mug"}, {"name": "mug"}],
                           is_empty=False, stamp=2.0)
        state = world.state
        recall = _recall()

        def found(obj: str, require: bool = True) -> list[tuple[str, str | None]]:
            query = RecallQuery(obj=obj, require_attributes=require)
            return [(c.node_id, c.content_item) for c in recall.recall(state, query)]

        # the label or the listed name may carry the word; a contradicting property never does
        assert found("striped mug") == [(labelled, None)]
        assert found("checked mugs") == [(cabinet, "checkered mug")]
        assert found("plain mug") == [(plain, None)]
        # not required: the unknown ones follow the known ones, contradictions stay out
        assert found("plain mug", require=False) == [(plain, None), (cabinet, "mug")]
        described = recall.recall_described(state, RecallQuery(obj="blue mug",
                                                                require_attributes=True))
        assert described.candidates == [] and described.described is not None
        assert described.described.base == "mug" and described.described.words() == ("blue",)
        assert {n for n, _ in described.misses} == {
            plain, labelled, f"{cabinet} (checkered mug)", f"{cabinet} (mug)"}
        # a last word is the name ("orange" is the fruit); unknown words are no attributes
        assert found("orange") == [(orange, None)]
        assert recall.attributes.split("shiny mug") is None
        assert recall.attributes.split("orange") is None
        assert plain in [n for n, _ in found("shiny mug")]
        # a recall without an attribute table knows no attribute words (the old behaviour)
        bare = GoalRecall(CONFIG.recall, SynonymTable(CONFIG.synonyms))
        assert plain in [c.node_id for c in bare.recall(state, RecallQuery(obj="blue mug"))]
    finally:
        world.close()


def test_questions_answer_only_about_instances_known_to_carry_the_attribute(kitchen) -> None:
    world, _, kit = kitchen
    _apple(world, kit, "cabinet_1", "red")
    _apple(world, kit, "cabinet_2", "green")
    recall = _recall()
    (spec,) = parse_instruction("Where is the green apple?").goals
    text = answer_question(spec, world.state, recall)
    assert text is not None and "cabinet_2" in text and "cabinet_1" not in text
    (spec,) = parse_instruction("How many green apples are there?").goals
    text = answer_question(spec, world.state, recall)
    assert text is not None and text.startswith("1 green apples remembered: apple_2")


def test_attribute_config_is_checked(tmp_path: Path) -> None:
    assert "green" in CONFIG.attributes.colors and "striped" in CONFIG.attributes.patterns
    assert 0.0 <= CONFIG.attributes.min_confidence <= 1.0
    with pytest.raises(PlannerConfigError, match="no colour or pattern word"):
        AttributeConfig(aliases={"shiny": ("glossy",)})
    bad = tmp_path / "bad.yaml"
    bad.write_text("attributes:\n  min_confidence: 1.5\n")
    with pytest.raises(PlannerConfigError, match="min_confidence"):
        load_planner_config(bad)
    bad.write_text("attributes:\n  colours: [red]\n")
    with pytest.raises(PlannerConfigError, match="unknown keys"):
        load_planner_config(bad)


@pytest.mark.parametrize(("remembered", "verdict", "words"), [
    ("red and white", "carries", "known red and white (color=red and white"),
    ("red", "unknown", "white not known (remembered red: color=red"),
    ("white and blue", "unknown", "red not known (remembered blue and white: color=white and blue"),
    ("blue", "contradicts", "remembered blue, not red and white"),
    (None, "unknown", "colour not known"),
])
def test_two_colours_asked_and_part_of_them_remembered(tmp_path: Path, remembered: str | None,
                                                       verdict: str, words: str) -> None:
    world = WorldMemory.open(tmp_path / "world.db")
    try:
        can = world.add_node("can", (0.5, 0.0, 0.9), stamp=1.0).payload["node_id"]
        if remembered is not None:
            world.set_property(can, "color", remembered, confidence=0.9, stamp=2.0)
        recall = _recall()
        described = recall.attributes.split("red white can")
        assert described is not None and described.words("color") == ("red", "white")
        found = recall.recall_described(world.state, RecallQuery(obj="can"))
        (cand,) = found.candidates
        got, why = recall.attributes.verdict(described, world.state, cand)
        assert got == verdict and words in why
        assert "colour and colour" not in why
        # a part remembered is not a contradiction: it stays a candidate when not required
        loose = recall.recall(world.state, RecallQuery(obj="red white can"))
        assert [c.node_id for c in loose] == ([] if verdict == "contradicts" else [can])
    finally:
        world.close()


def _thing(world: WorldMemory, kit, holder: str, label: str, **props: str) -> str:
    """A thing of ``label`` remembered in ``holder``, with the given properties known."""
    x, y, z = kit.fixtures[holder].position
    node = world.add_node(label, (x, y, z - 0.05), stamp=3.0).payload["node_id"]
    world.set_parent(node, holder, "container", stamp=4.0)
    for name, value in props.items():
        world.set_property(node, name, value, confidence=0.9, stamp=5.0)
    return str(node)


def test_a_brand_names_its_kind_and_the_described_look_picks_which(kitchen_of) -> None:
    """The Froot Loops box is a cereal box by the brand table; of the two remembered, the one
    whose remembered look is the described one. Without a described look, or with a look
    memory does not know, no cereal box is taken for the branded one."""
    world, task, kit = kitchen_of([
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), contents=("cereal box",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("cereal box",))),
    ])
    yellow = _thing(world, kit, "cabinet_1", "cereal box", color="yellow", pattern="plain")
    checked = _thing(world, kit, "cabinet_2", "cereal box", color="red blue",
                     pattern="checked")
    session = session_for(world, task)
    grounder = session.grounder
    (spec,) = parse_instruction(
        "Find the Froot Loops box, the red one with the blue check pattern.").goals
    grounded = grounder.ground("g1", spec, world.state, [], RobotContext())
    assert isinstance(grounded, GroundedGoal) and grounded.candidate.node_id == checked
    assert any(e.kind == "brand" for e in grounded.candidate.evidence)
    (spec,) = parse_instruction("Find the Corn Flakes box, the yellow one.").goals
    grounded = grounder.ground("g1", spec, world.state, [], RobotContext())
    assert isinstance(grounded, GroundedGoal) and grounded.candidate.node_id == yellow

    # the brand alone: either box could be it
    assert session.recall.recall(world.state, RecallQuery(obj="trix box")) == []
    recalled = session.recall.recall_described(world.state, RecallQuery(obj="trix box"))
    assert {n for n, _ in recalled.misses} == {yellow, checked}
    assert all("not known to be the 'trix box'" in why for _, why in recalled.misses)
    # a look memory does not hold: the purple box is not among those remembered
    result = session.run_instruction(
        "Find the Trix box, the purple one with the yellow check pattern.", kit)
    assert task.status("g001_find") is GoalStatus.BLOCKED, result.reason
    # a brand names no place, and not a thing the answers list by name
    assert session.recall.resolve(world.state, "froot loops box") == []
    assert checked in session.recall.resolve(world.state, "froot loops box", partial=True)

    # once a find took the checked box for the Froot Loops box, the brand alone names it
    result = session.run_instruction(
        "Find the Froot Loops box, the red one with the blue check pattern.", kit)
    assert task.status("g002_find") is GoalStatus.COMPLETED, result.reason
    assert session.recall.resolve(world.state, "froot loops box") == [checked]
    session.run_instruction("Which cabinet held the Froot Loops box?", kit)
    assert task.status("g003_question") is GoalStatus.COMPLETED
    assert task.state.answers["g003_question"].startswith("cabinet_2"), task.state.answers
    assert session.recall.recall(world.state, RecallQuery(obj="corn flakes box")) == []


def test_a_malformed_brand_table_is_refused(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "config" / "planner.yaml").read_text()
    bad = tmp_path / "planner.yaml"
    bad.write_text(text.replace("  ketchup: [heinz]", "  ketchup: heinz"), encoding="utf-8")
    with pytest.raises(PlannerConfigError, match="brands"):
        load_planner_config(bad)
