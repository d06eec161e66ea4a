"""Relative clauses, memory questions, destination choice and the entities answers name."""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_kitchen import (
    FIXTURE_HALF_SIZE,
    Fixture,
    Kitchen,
    admit_contents,
    admit_placed,
    admit_property,
    see,
    session_for,
)

from mimir_memory.task import GoalStatus, TaskMemory
from mimir_memory.world import WorldMemory
from mimir_planner.answers import (
    NamedEntity,
    answer_question,
    mentioned_entities,
    question_entities,
)
from mimir_planner.config import RecallConfig, load_planner_config
from mimir_planner.errors import PlannerConfigError
from mimir_planner.instructions import GoalKind, parse_instruction
from mimir_planner.recall import CategoryTable, GoalRecall, RecallQuery, SynonymTable

CONFIG = load_planner_config()


def _recall() -> GoalRecall:
    return GoalRecall(CONFIG.recall, SynonymTable(CONFIG.synonyms),
                      is_fixture=CONFIG.is_fixture_label,
                      categories=CategoryTable(CONFIG.categories))


@pytest.fixture
def kitchen(tmp_path: Path):
    """Four cabinets with remembered contents, one locked, and a counter with loose things."""
    world = WorldMemory.open(tmp_path / "world.db")
    cabinets = {
        "pantry": ((1.0, 2.4, 1.3), ["pasta box", "rice bag", "cereal box", "croissant"]),
        "condiments": ((1.0, 1.0, 1.3),
                       ["ketchup", "mustard", "mayonnaise jar", "hot sauce", "cup"]),
        "fruit": ((1.0, -0.4, 1.3), ["banana", "apple", "ketchup", "cereal box"]),
        "locked": ((1.0, -1.8, 1.3), []),
    }
    # written as the robot's pipeline writes them: what the cameras saw, then what
    # inspections and a failed open revealed
    ids = {}
    for stamp, (name, (pos, contents)) in enumerate(cabinets.items(), start=1):
        node = see(world, "cabinet", pos, stamp=float(stamp), half=FIXTURE_HALF_SIZE)
        ids[name] = node
        if contents:
            admit_contents(world, node, contents, stamp=10.0 + stamp)
    admit_property(world, ids["locked"], "locked", True, stamp=20.0)
    counter = see(world, "counter", (0.8, 0.0, 0.9), stamp=5.0, half=FIXTURE_HALF_SIZE)
    bread = see(world, "bread", (0.8, 0.1, 0.95), stamp=5.0)
    mug = see(world, "mug", (0.8, -0.2, 0.95), stamp=5.0)
    for thing in (bread, mug):  # the robot put them there
        admit_placed(world, thing, counter, stamp=6.0)
    ids.update(counter=counter, bread=bread, mug=mug)
    yield world, ids
    world.close()


@pytest.mark.parametrize(("text", "expected"), [
    ("Find the white mug that is stored in a cabinet, not the one on the counter.",
     ("find", "white mug", "cabinet", None, "counter", None)),
    ("Find the ketchup that is kept with the other condiments.",
     ("find", "ketchup", None, "condiments", None, None)),
    ("Find the sponge that is stored in a cabinet.",
     ("find", "sponge", "cabinet", None, None, None)),
    ("Where was the croissant that sat next to the pineapple?",
     ("question", "croissant", None, "pineapple", None, "where")),
    ("Which cabinets are locked?", ("question", "cabinets", None, None, None, "which_state")),
    ("Which cabinet held the pasta box?",
     ("question", "pasta box", "cabinet", None, None, "which")),
    ("What was stored together with the mayonnaise?",
     ("question", "mayonnaise", None, None, None, "what_with")),
    ("Choose the cabinet where the bread on the counter belongs.",
     ("question", "bread", "counter", None, None, "belongs")),
    ("Choose the cabinet where the mug on the counter should be put away.",
     ("question", "mug", "counter", None, None, "belongs")),
])
def test_relative_clauses_and_new_question_forms(text: str, expected: tuple) -> None:
    parsed = parse_instruction(text)
    assert parsed.symbolic, parsed.reason
    (goal,) = parsed.goals
    got = (goal.kind.value, goal.obj, goal.source, goal.near, goal.avoid, goal.question_kind)
    assert got == expected


@pytest.mark.parametrize("text", [
    "Find the water bottle that is closest to the window.",
    "Find the Froot Loops box, the one my sister likes.",
    "Find the cup that smells like the coffee on the counter.",
    "Choose the cabinet where.",
])
def test_clauses_the_parser_cannot_check_go_to_the_model(text: str) -> None:
    parsed = parse_instruction(text)
    assert not parsed.symbolic and not parsed.goals


def test_categories_match_whole_words() -> None:
    table = CategoryTable({"fruit": ["apple", "pineapple"], "dry goods": ["pasta", "soup can"]})
    assert table.member("green apple", "fruit") and table.member("pasta box", "dry goods")
    assert table.member("tomato soup can", "dry goods")
    assert not table.member("applesauce", "fruit") and not table.member("soup", "dry goods")
    assert table.is_category("Fruits") and not table.is_category("banana")
    assert CategoryTable().of("apple") == frozenset()


def test_near_and_avoid_choose_among_same_named_things(kitchen) -> None:
    world, ids = kitchen
    recall = _recall()
    with_condiments = recall.recall(world.state, RecallQuery(obj="ketchup", near="condiments"))
    assert [c.node_id for c in with_condiments] == [ids["condiments"]]
    assert with_condiments[0].evidence[0].kind == "near"
    with_fruit = recall.recall(world.state, RecallQuery(obj="ketchup", near="fruit"))
    assert [c.node_id for c in with_fruit] == [ids["fruit"]]
    # nothing kept with pineapple: no candidate at all rather than a wrong one
    assert recall.recall(world.state, RecallQuery(obj="ketchup", near="pineapple")) == []
    # not the mug on the counter: the cup listed in a cabinet (a synonym) is what remains
    stored = recall.recall(world.state, RecallQuery(obj="mug", avoid="counter"))
    assert [(c.node_id, c.content_item) for c in stored] == [(ids["condiments"], "cup")]
    assert [c.node_id for c in recall.recall(world.state, RecallQuery(obj="mug"))] == [
        ids["mug"], ids["condiments"]]


def test_the_other_condiments_are_not_the_ketchup_itself(tmp_path: Path) -> None:
    """As the live pipeline writes it: each ketchup a node inside its cabinet and listed in
    the cabinet's contents. The ketchup among the fruit is not kept with other condiments
    because the listing names that ketchup."""
    world = WorldMemory.open(tmp_path / "world.db")
    fruit = see(world, "cabinet", (1.0, -0.4, 1.3), stamp=1.0, half=FIXTURE_HALF_SIZE)
    condiments = see(world, "cabinet", (1.0, 1.0, 1.3), stamp=2.0, half=FIXTURE_HALF_SIZE)
    among_fruit = see(world, "ketchup", (1.0, -0.4, 1.25), stamp=3.0)
    among_condiments = see(world, "ketchup", (1.0, 1.0, 1.25), stamp=3.0)
    admit_contents(world, fruit, ["ketchup", "banana", "apple"], stamp=10.0)
    admit_contents(world, condiments, ["ketchup", "mustard"], stamp=11.0)
    state = world.state
    assert state.nodes[among_fruit].parent == fruit
    assert {i.get("node_id") for i in state.nodes[fruit].contents} >= {among_fruit}
    recall = _recall()
    found = recall.recall(state, RecallQuery(obj="ketchup", near="condiments"))
    assert [c.node_id for c in found] == [among_condiments]
    assert recall.held_with(state, fruit, "condiments", among_fruit) == []
    assert recall.held_with(state, condiments, "condiments", among_condiments) == ["mustard"]
    # a listing that does not say which item is the node: one item of its name is
    pantry = see(world, "cabinet", (1.0, 2.4, 1.3), stamp=4.0, half=FIXTURE_HALF_SIZE)
    admit_contents(world, pantry, ["ketchup", "pasta box"], stamp=12.0)
    stray = see(world, "ketchup", (0.5, 2.4, 0.5), stamp=13.0)
    world.set_parent(stray, pantry, "container", stamp=14.0)
    state = world.state
    assert not any(i.get("node_id") for i in state.nodes[pantry].contents)
    assert recall.held_with(state, pantry, "condiments", stray) == []
    admit_contents(world, pantry, ["ketchup", "ketchup", "pasta box"], stamp=15.0)
    assert recall.held_with(world.state, pantry, "condiments", stray) == ["ketchup"]
    world.close()


def test_a_thing_named_twice_at_one_spot_is_listed_once(tmp_path: Path) -> None:
    """The cameras saw the green cup as a cup and, at the same spot, as a mug: the inspection
    listed both. Content answers name it once (the name seen more often); a mug 20 cm away is
    another thing."""
    world = WorldMemory.open(tmp_path / "world.db")
    cabinet = see(world, "cabinet", (1.0, -2.4, 1.3), stamp=1.0, half=FIXTURE_HALF_SIZE)
    spot = (1.0, -2.6, 1.25)
    cup = see(world, "cup", spot, stamp=2.0)
    see(world, "cup", spot, stamp=2.5)
    mug = see(world, "mug", (spot[0], spot[1] + 0.01, spot[2]), stamp=3.0)
    see(world, "mayonnaise", (1.0, -2.3, 1.25), stamp=3.0)
    admit_contents(world, cabinet, ["cup", "mug", "mayonnaise", "mustard"], stamp=10.0)
    state = world.state
    listed = {str(i.get("node_id")): str(i.get("name")) for i in state.nodes[cabinet].contents}
    assert listed.get(cup) == "cup" and listed.get(mug) == "mug"
    recall = _recall()
    (spec,) = parse_instruction("What was stored together with the mayonnaise?").goals
    text = answer_question(spec, state, recall)
    assert text == f"With the mayonnaise: in {cabinet}: cup, mustard."
    named = question_entities(spec, state, recall)
    assert sorted(e.label for e in named) == ["cup", "mustard"]
    assert cup in {e.node_id for e in named} and mug not in {e.node_id for e in named}
    (spec,) = parse_instruction(f"What is inside {cabinet}?").goals
    assert answer_question(spec, state, recall) == f"{cabinet}: cup, mayonnaise, mustard."
    # the planner's answer names the cup's node, though the answer says "cup", not its id
    task = TaskMemory.open(tmp_path / "task.db")
    session = session_for(world, task)
    result = session.run_instruction("What was stored together with the mayonnaise?",
                                     Kitchen(world, {}))
    (goal,) = result.goals
    assert goal.answer == f"With the mayonnaise: in {cabinet}: cup, mustard.", result
    assert [(e.node_id, e.label) for e in goal.entities] == [(cup, "cup"), ("", "mustard")]
    task.close()
    # 20 cm apart they are two things
    world.close()
    world = WorldMemory.open(tmp_path / "apart.db")
    cabinet = see(world, "cabinet", (1.0, -2.4, 1.3), stamp=1.0, half=FIXTURE_HALF_SIZE)
    see(world, "cup", spot, stamp=2.0)
    see(world, "mug", (spot[0], spot[1] + 0.2, spot[2]), stamp=3.0)
    see(world, "mayonnaise", (1.0, -2.3, 1.25), stamp=3.0)
    admit_contents(world, cabinet, ["cup", "mug", "mayonnaise"], stamp=10.0)
    (spec,) = parse_instruction("What was stored together with the mayonnaise?").goals
    assert answer_question(spec, world.state, recall) == (
        f"With the mayonnaise: in {cabinet}: cup, mug.")
    world.close()


@pytest.mark.parametrize("bad", [-0.01, float("nan"), "near"])
def test_a_bad_same_spot_distance_is_refused(bad: object) -> None:
    with pytest.raises(PlannerConfigError, match="same_spot_m"):
        RecallConfig(same_spot_m=bad)  # type: ignore[arg-type]


def test_memory_questions_and_what_they_name(kitchen) -> None:
    world, ids = kitchen
    recall = _recall()
    state = world.state

    def ask(text: str) -> tuple[str | None, list[NamedEntity]]:
        (spec,) = parse_instruction(text).goals
        assert spec.kind is GoalKind.QUESTION
        return answer_question(spec, state, recall), question_entities(spec, state, recall)

    text, named = ask("Which cabinets are locked?")
    assert text == f"{ids['locked']} is locked."
    assert [e.node_id for e in named] == [ids["locked"]]

    text, named = ask("What was stored together with the mayonnaise?")
    assert text is not None and "ketchup" in text and "mayonnaise" not in text.split(":", 2)[2]
    assert sorted(e.label for e in named) == ["cup", "hot sauce", "ketchup", "mustard"]
    assert all(e.node_id == "" and e.position == (1.0, 1.0, 1.3) for e in named)

    text, named = ask("Choose the cabinet where the bread on the counter belongs.")
    assert text is not None and text.startswith(ids["pantry"])
    assert [e.node_id for e in named] == [ids["pantry"]]
    # a mug goes with the cup (drinkware) in the condiments cabinet, never the locked one
    _, named = ask("Choose the cabinet where the mug on the counter should be put away.")
    assert [e.node_id for e in named] == [ids["condiments"]]

    text, named = ask("Which cabinet held the pasta box?")
    assert text == f"{ids['pantry']} holds the pasta box."
    assert [e.node_id for e in named] == [ids["pantry"]]


def test_unknown_answers_stay_unknown(kitchen) -> None:
    world, _ = kitchen
    recall = _recall()
    for text in ("Which drawers are open?", "Choose the shelf where the bread belongs.",
                 "What was stored together with the teapot?"):
        (spec,) = parse_instruction(text).goals
        assert answer_question(spec, world.state, recall) is None, text
        assert question_entities(spec, world.state, recall) == [], text
    (spec,) = parse_instruction("Which cabinets are open?").goals
    assert answer_question(spec, world.state, recall) == \
        "No remembered cabinets is known to be open."


def test_mentioned_entities_match_whole_ids(kitchen) -> None:
    world, ids = kitchen
    text = f"{ids['pantry']} and {ids['locked']}; not {ids['pantry']}0 or x{ids['fruit']}"
    assert [e.node_id for e in mentioned_entities(text, world.state)] == [
        ids["pantry"], ids["locked"]]


def test_names_that_nest_match_in_part(kitchen) -> None:
    world, ids = kitchen
    recall = _recall()
    # "pasta" is part of the listed "pasta box"; "white mug" holds the label "mug"
    (cand,) = recall.recall(world.state, RecallQuery(obj="pasta"))
    assert (cand.node_id, cand.content_item) == (ids["pantry"], "pasta box")
    assert "in part" in cand.evidence[0].detail
    assert ids["mug"] in [c.node_id for c in recall.recall(world.state,
                                                           RecallQuery(obj="white mug"))]
    # an unrelated word still matches nothing
    assert recall.recall(world.state, RecallQuery(obj="teapot")) == []


def test_exploration_skips_what_cannot_hold_the_object_as_described(kitchen) -> None:
    from mimir_planner.grounding import Blocked, Exploration, Grounder
    from mimir_planner.primitives import PrimitiveRegistry, RobotContext

    world, ids = kitchen
    unknown = see(world, "cabinet", (1.0, 3.8, 1.3), stamp=30.0, half=FIXTURE_HALF_SIZE)
    grounder = Grounder(_recall(), PrimitiveRegistry(CONFIG))
    (spec,) = parse_instruction("Find the ketchup that is kept with the pineapple.").goals
    robot = RobotContext(last_moved_to=ids["condiments"])
    result = grounder.ground("g1", spec, world.state, [], robot)
    # both remembered ketchups sit elsewhere: look where nothing is known yet
    assert isinstance(result, Exploration) and result.fixture == unknown
    assert f"{ids['condiments']} (inspected, no ketchup as described)" in result.reason
    # a fixture inspected in this instruction is not looked into again
    again = grounder.ground("g1", spec, world.state, [], robot, inspected_now={unknown})
    assert isinstance(again, Exploration) and again.order == (ids["counter"],)
    assert f"{unknown} (inspected in this instruction)" in again.reason
    # nowhere new is left: what was looked into in earlier instructions is looked into again
    again = grounder.ground("g1", spec, world.state, [], robot,
                            inspected_now={unknown, ids["counter"]}, visited={ids["counter"]})
    assert isinstance(again, Exploration) and ids["condiments"] in again.order
    assert "look again into" in again.reason
    last = grounder.ground("g1", spec, world.state, [], robot,
                           inspected_now={unknown, ids["counter"], *again.order},
                           visited={ids["counter"]})
    assert isinstance(last, Blocked) and "nothing left to explore" in last.reason


def test_where_question_explores_for_an_object_memory_does_not_hold_as_described(
        kitchen) -> None:
    from mimir_planner.grounding import Exploration, GroundedGoal, Grounder
    from mimir_planner.primitives import PrimitiveRegistry, RobotContext

    world, ids = kitchen
    unknown = see(world, "cabinet", (1.0, 3.8, 1.3), stamp=30.0, half=FIXTURE_HALF_SIZE)
    grounder = Grounder(_recall(), PrimitiveRegistry(CONFIG))
    robot = RobotContext(last_moved_to=ids["pantry"])
    (spec,) = parse_instruction("Where was the croissant that sat next to the pineapple?").goals
    result = grounder.ground("g1", spec, world.state, [], robot)
    assert isinstance(result, Exploration) and result.fixture == unknown
    admit_contents(world, unknown, ["croissant", "pineapple"], stamp=40.0)
    grounded = grounder.ground("g1", spec, world.state, [], robot)
    assert isinstance(grounded, GroundedGoal) and grounded.candidate.node_id == unknown
    text = answer_question(spec, world.state, _recall())
    assert text is not None and unknown in text and ids["pantry"] not in text


def test_a_thing_seen_on_the_counter_is_not_the_one_stored_in_a_cabinet(kitchen_of) -> None:
    """Perception alone saw a sponge on the counter (no parent): its position puts it on the
    counter, so "the sponge that is stored in a cabinet" is another one, looked for in the
    cabinets; a sponge seen where no fixture is near is not known to be in one either."""
    from mimir_planner.grounding import Exploration, Grounder
    from mimir_planner.primitives import PrimitiveRegistry, RobotContext

    world, task, kit = kitchen_of([
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.45), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.0, 1.2, 1.3), contents=("sponge",))),
    ])
    on_counter = see(world, "sponge", (1.0, 0.1, 0.74), stamp=2.0)
    far_away = see(world, "sponge", (4.0, 4.0, 0.2), stamp=2.0)
    (spec,) = parse_instruction("Find the sponge that is stored in a cabinet.").goals
    grounder = Grounder(_recall(), PrimitiveRegistry(CONFIG))
    first = grounder.ground("g1", spec, world.state, [], RobotContext())
    assert isinstance(first, Exploration) and first.fixture == "cabinet_1", first
    assert (on_counter, "seen in or on counter_1, not in the source 'cabinet'") in first.dropped
    assert any(nid == far_away and "no fixture holds it" in why for nid, why in first.dropped)

    session = session_for(world, task)
    result = session.run_instruction("Find the sponge that is stored in a cabinet.", kit)
    assert task.status("g001_find") is GoalStatus.COMPLETED, result.reason
    (found,) = session.answer_entities["g001_find"]
    assert found.node_id not in (on_counter, far_away)
    assert world.state.nodes[found.node_id].parent == "cabinet_1"
