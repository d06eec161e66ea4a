"""Strict answer parsing, including property-based fuzzing."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reasoning_scene import recorded

from mimir_planner.reasoning import extract_json, parse_analyzer_answer
from mimir_planner.reasoning.answer_schema import AnalyzerAnswer, answer_to_json
from mimir_planner.reasoning.config import VocabularyConfig
from mimir_planner.reasoning.errors import AnswerSchemaError

VOCAB = VocabularyConfig()


def _content(name: str) -> str:
    return recorded(name)["choices"][0]["message"]["content"]  # type: ignore[index]


def test_valid_answer_round_trips() -> None:
    answer = parse_analyzer_answer(_content("analyzer_opened_with_contents.json"), VOCAB)
    assert answer.task_success is True
    assert answer.property_updates[0].is_opened is True
    assert [c.name for c in answer.contents_updates[0].contents] == ["scissors", "gold watch"]
    again = parse_analyzer_answer(json.dumps(answer_to_json(answer)), VOCAB)
    assert again == answer


def test_fenced_and_prose_answers_are_extracted() -> None:
    answer = parse_analyzer_answer(_content("analyzer_fenced_prose.json"), VOCAB)
    assert answer.failure_reason is not None and "Missed" in answer.failure_reason
    assert extract_json('Sure! {"a": 1} and later {"b": 2}') == {"a": 1}


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda a: a.pop("confidence"), "$.confidence"),
        (lambda a: a.update(confidence=1.5), "$.confidence"),
        (lambda a: a.update(task_success="yes"), "$.task_success"),
        (lambda a: a.update(extra=1), "$"),
        (
            lambda a: a["property_updates"][0].update(property="teleport"),
            "$.property_updates[0].property",
        ),
        (
            lambda a: a["property_updates"][0].update(new_value="maybe"),
            "$.property_updates[0].new_value",
        ),
        (
            lambda a: a["property_updates"][0].update(object_id="drawer 3; drop table"),
            "$.property_updates[0].object_id",
        ),
        (
            lambda a: a["contents_updates"][0].update(is_empty=True),
            "$.contents_updates[0].is_empty",
        ),
        (
            lambda a: a["contents_updates"][0]["contents"][0].update(name=""),
            "$.contents_updates[0].contents[0].name",
        ),
        (
            lambda a: a["contents_updates"][0]["contents"][0].update(price=3),
            "$.contents_updates[0].contents[0]",
        ),
    ],
)
def test_schema_violations_name_the_field(mutate, path) -> None:
    answer = json.loads(_content("analyzer_opened_with_contents.json"))
    mutate(answer)
    with pytest.raises(AnswerSchemaError) as info:
        parse_analyzer_answer(json.dumps(answer), VOCAB)
    assert info.value.path == path


def test_is_opened_only_on_openable_and_fullness_vocabulary() -> None:
    answer = json.loads(_content("analyzer_locked_drawer.json"))
    answer["property_updates"][0]["is_opened"] = False
    with pytest.raises(AnswerSchemaError, match="is_opened"):
        parse_analyzer_answer(json.dumps(answer), VOCAB)
    answer = json.loads(_content("analyzer_inspection_contents.json"))
    answer["property_updates"][0]["new_value"] = "overflowing"
    with pytest.raises(AnswerSchemaError):
        parse_analyzer_answer(json.dumps(answer), VOCAB)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        _content("analyzer_malformed.json"),
        '{"task_success": NaN}',
        '{"a": 1, "a": 2}',
        "[1, 2, 3]",
        "x" * 300_000,
    ],
)
def test_unusable_text_is_a_typed_error(text: str) -> None:
    with pytest.raises(AnswerSchemaError):
        parse_analyzer_answer(text, VOCAB)


def test_non_text_answer_is_a_typed_error() -> None:
    with pytest.raises(AnswerSchemaError):
        parse_analyzer_answer(None, VOCAB)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_text_never_crashes(text: str) -> None:
    try:
        answer = parse_analyzer_answer(text, VOCAB)
    except AnswerSchemaError:
        return
    assert isinstance(answer.task_success, bool)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_fuzz_json_values_never_crash(value: object) -> None:
    with pytest.raises(AnswerSchemaError):
        parse_analyzer_answer(json.dumps(value), VOCAB)


@settings(max_examples=150, deadline=None)
# every top-level field of an answer: its JSON keys are the names of AnalyzerAnswer's fields
@given(st.sampled_from([f.name for f in dataclasses.fields(AnalyzerAnswer)]), _json)
def test_fuzz_field_replacement_is_valid_or_typed_error(field: str, value: object) -> None:
    answer = json.loads(_content("analyzer_opened_with_contents.json"))
    answer[field] = value
    try:
        parsed = parse_analyzer_answer(json.dumps(answer), VOCAB)
    except AnswerSchemaError as err:
        assert err.path.startswith("$")
        return
    assert answer_to_json(parsed)[field] == value
