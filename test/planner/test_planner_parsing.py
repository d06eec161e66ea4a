"""Instruction parsing and strict planner-answer parsing (with hypothesis fuzzing)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mimir_planner.errors import InstructionError, PlanAnswerError
from mimir_planner.instructions import GoalKind, parse_instruction
from mimir_planner.plan_schema import parse_plan_answer, validate_plan_answer


def _kinds(text: str) -> list[tuple[str, str | None, str | None, str | None]]:
    parsed = parse_instruction(text)
    assert parsed.symbolic, parsed.reason
    return [(g.kind.value, g.obj, g.source, g.target) for g in parsed.goals]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Find the ketchup.", [("find", "ketchup", None, None)]),
        ("please locate my red mug", [("find", "red mug", None, None)]),
        ("Look into upper cabinets and find the banana.",
         [("find", "banana", "cabinets", None)]),
        ("search for the scissors in the drawer", [("find", "scissors", "drawer", None)]),
        ("Open the fridge", [("open", "fridge", None, None)]),
        ("shut drawer_2", [("close", "drawer_2", None, None)]),
        ("Go to the counter", [("go_to", "counter", None, None)]),
        ("navigate to cabinet_3", [("go_to", "cabinet_3", None, None)]),
        ("Pick up the ketchup from a cabinet and place it on the counter.",
         [("pick", "ketchup", "cabinet", None), ("place", "ketchup", None, "counter")]),
        ("pick the mug", [("pick", "mug", None, None)]),
        ("put the bowl into the sink",
         [("pick", "bowl", None, None), ("place", "bowl", None, "sink")]),
        ("bring me the apple", [("pick", "apple", None, None)]),
        ("bring the mug from the shelf to the table",
         [("pick", "mug", "shelf", None), ("place", "mug", None, "table")]),
        ("open cabinet_2, then close it",
         [("open", "cabinet_2", None, None), ("close", "cabinet_2", None, None)]),
        # a description after the name: its words go in front of it, pattern nouns as the
        # adjectives the attribute table knows
        ("Find the Froot Loops box, the red one with the blue check pattern.",
         [("find", "red blue checked froot loops box", None, None)]),
        ("Find the reusable water bottle, the blue one with dark stripes.",
         [("find", "blue dark striped reusable water bottle", None, None)]),
        ("find the mug, the white one", [("find", "white mug", None, None)]),
        # the description may repeat the name's noun, and a part's colour is the thing's
        ("Find the tomato soup can, the red can with the white label.",
         [("find", "red white tomato soup can", None, None)]),
    ],
)
def test_instruction_forms(text: str, expected: list[tuple[str, ...]]) -> None:
    assert _kinds(text) == expected


def test_place_relation_and_questions() -> None:
    place = parse_instruction("put the bowl into the sink").goals[1]
    assert place.relation == "container"
    assert parse_instruction("place it on the table").symbolic is False  # nothing held
    cases = {
        "Where is the ketchup?": ("where", "ketchup", None),
        "How many apples are in cabinet_2?": ("how_many", "apples", "cabinet_2"),
        "What is inside the fridge?": ("what", None, "fridge"),
        "What was stored with the mayonnaise?": ("what_with", "mayonnaise", None),
        "Which cabinet holds the banana?": ("which", "banana", "cabinet"),
        "Is drawer_1 locked?": ("yes_no", "drawer_1", None),
    }
    for text, (kind, obj, source) in cases.items():
        (goal,) = parse_instruction(text).goals
        assert goal.kind is GoalKind.QUESTION
        assert (goal.question_kind, goal.obj, goal.source) == (kind, obj, source), text


@pytest.mark.parametrize(("text", "obj", "like", "like_at"), [
    ("Find the cup that looks like the cup on the counter.", "cup", "cup", "counter"),
    ("Find the coffee tin that looks like the one on the counter.", "coffee tin", "coffee tin",
     "counter"),
    ("find the mug that looks just like the red mug", "mug", "red mug", None),
    ("locate the bowl that look like the ones in the sink", "bowl", "bowl", "sink"),
])
def test_looks_like_names_a_reference(text: str, obj: str, like: str,
                                      like_at: str | None) -> None:
    (goal,) = parse_instruction(text).goals
    assert goal.kind is GoalKind.FIND
    assert (goal.obj, goal.like, goal.like_at) == (obj, like, like_at)


@pytest.mark.parametrize(("text", "obj", "source"), [
    ("Find the water bottle that has clear space around it for grasping.", "water bottle", None),
    ("find the mug that has enough room around it", "mug", None),
    ("locate the bowl which is not cluttered", "bowl", None),
    ("look into the cabinets and find the cup that has free space around it to grasp",
     "cup", "cabinets"),
])
def test_room_to_grasp_is_asked_of_the_object(text: str, obj: str, source: str | None) -> None:
    (goal,) = parse_instruction(text).goals
    assert goal.kind is GoalKind.FIND
    assert (goal.obj, goal.source, goal.clear) == (obj, source, True)
    assert parse_instruction("find the water bottle").goals[0].clear is False


@pytest.mark.parametrize("text", ["dance a little jig", "what is the meaning of life",
                                  "find the mug and then juggle", "close it",
                                  "asdf qwer zxcv", "123 456", "find the box, the one",
                                  "find the box, the red one with", "find , the red one",
                                  "find the mug that looks like",
                                  "find the mug that looks like the one",
                                  "find the box, the red cat",
                                  "find the mug that has clear space around the sink"])
def test_garbage_goes_to_the_vlm_path(text: str) -> None:
    parsed = parse_instruction(text)
    assert not parsed.symbolic and parsed.goals == () and parsed.reason
    assert parsed.original == text


@pytest.mark.parametrize("bad", [None, 3, b"find the mug", "", "  ?! ", "x" * 501,
                                 "find the\x07 mug"])
def test_unusable_instructions_raise(bad: object) -> None:
    with pytest.raises(InstructionError):
        parse_instruction(bad)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_instruction_parser_never_crashes(text: str) -> None:
    try:
        parsed = parse_instruction(text)
    except InstructionError:
        return
    assert parsed.symbolic == bool(parsed.goals)
    for goal in parsed.goals:
        assert goal.obj is None or goal.obj.strip() == goal.obj


VALID = {
    "plan": [
        {"step": 1, "action": "move_to", "target_object": "cabinet_3", "reasoning": "go"},
        {"step": 2, "action": "open", "target_object": "cabinet_3",
         "pointing_description": "the left handle", "grounded_by_keyframe_idx": 2,
         "reasoning": "open it"},
    ],
    "reasoning": ["cabinet_3 is unexplored"],
    "warnings": [],
}


def test_valid_answer_and_round_trip() -> None:
    answer = parse_plan_answer("Sure:\n```json\n" + json.dumps(VALID) + "\n```")
    assert answer.plan[1].grounded_by_keyframe_idx == 2
    assert answer.plan[1].pointing_description == "the left handle"
    assert parse_plan_answer(json.dumps(answer.to_dict())) == answer
    empty = parse_plan_answer('{"plan": [], "reasoning": ["Goal already achieved."], '
                              '"warnings": []}')
    assert empty.plan == ()


def _mutated(**change: object) -> dict[str, object]:
    data = json.loads(json.dumps(VALID))
    data["plan"][0].update(change)
    return data


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        ({"plan": []}, "$.reasoning"),
        ({**VALID, "extra": 1}, "$"),
        ({**VALID, "plan": {}}, "$.plan"),
        ({**VALID, "warnings": "none"}, "$.warnings"),
        (_mutated(step=2), "$.plan[0].step"),
        (_mutated(step=True), "$.plan[0].step"),
        (_mutated(action=""), "$.plan[0].action"),
        (_mutated(action="rm -rf /;"), "$.plan[0].action"),
        (_mutated(target_object="../etc/passwd"), "$.plan[0].target_object"),
        (_mutated(target_object=7), "$.plan[0].target_object"),
        (_mutated(grounded_by_keyframe_idx=0), "$.plan[0].grounded_by_keyframe_idx"),
        (_mutated(pointing_description=""), "$.plan[0].pointing_description"),
        (_mutated(colour="red"), "$.plan[0]"),
    ],
)
def test_schema_violations_name_the_field(obj: dict[str, object], path: str) -> None:
    with pytest.raises(PlanAnswerError) as info:
        validate_plan_answer(obj)
    assert info.value.path == path


@pytest.mark.parametrize("text", ["", "no json here", "[1, 2]", '{"plan": [}',
                                  '{"plan": [], "plan": [], "reasoning": [], "warnings": []}',
                                  '{"plan": NaN, "reasoning": [], "warnings": []}', None, 12])
def test_malformed_answers(text: object) -> None:
    with pytest.raises(PlanAnswerError):
        parse_plan_answer(text)


_step = st.fixed_dictionaries(
    {
        "action": st.sampled_from(["move_to", "open", "inspect", "pick", "place", "close"]),
        "target_object": st.one_of(st.none(), st.from_regex(r"[a-z]{1,8}_[0-9]{1,2}",
                                                            fullmatch=True)),
        "reasoning": st.text(max_size=40),
    },
    optional={
        "pointing_description": st.text(min_size=1, max_size=20).filter(str.strip),
        "grounded_by_keyframe_idx": st.integers(min_value=1, max_value=9),
    },
)


@given(st.lists(_step, max_size=6), st.lists(st.text(max_size=30), max_size=3))
@settings(max_examples=150, deadline=None)
def test_generated_valid_answers_parse(steps: list[dict[str, object]],
                                       reasoning: list[str]) -> None:
    plan = [{"step": i + 1, **s} for i, s in enumerate(steps)]
    answer = parse_plan_answer(json.dumps({"plan": plan, "reasoning": reasoning,
                                           "warnings": []}))
    assert len(answer.plan) == len(steps)
    assert parse_plan_answer(json.dumps(answer.to_dict())) == answer


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["plan", "reasoning", "warnings", "step", "action", "target_object",
                         "x"]), inner, max_size=4),
    max_leaves=20,
)


@given(st.one_of(st.text(max_size=300), _json.map(json.dumps)))
@settings(max_examples=300, deadline=None)
def test_fuzzed_answers_parse_or_raise_typed_error(text: str) -> None:
    try:
        answer = parse_plan_answer(text)
    except PlanAnswerError:
        return
    assert all(step.step == i + 1 for i, step in enumerate(answer.plan))
