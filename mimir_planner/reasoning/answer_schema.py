"""Strict parsing of model answers: JSON extraction and the interaction analyzer schema.

The analyzer schema follows the paper's structured output: ``task_success``,
``failure_reason``, ``property_updates``, ``new_properties``, ``contents_updates`` and
``confidence``. Parsing is all-or-nothing: any deviation (a missing or extra field, a wrong
type, a value outside the vocabulary) raises :class:`AnswerSchemaError` naming the field, and
no partial answer is ever returned.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mimir_planner.reasoning.config import VocabularyConfig
from mimir_planner.reasoning.errors import AnswerSchemaError

JsonScalar = str | int | float | bool | None

MAX_ANSWER_CHARS = 200_000
MAX_TEXT_CHARS = 2_000
MAX_ITEMS = 64
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]{0,127}$")
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class PropertyUpdateAnswer:
    """One ``property_updates`` entry."""

    object_id: str
    property: str
    old_value: JsonScalar
    new_value: JsonScalar
    confidence: float
    reasoning: str
    is_opened: bool | None = None


@dataclass(frozen=True)
class NewPropertyAnswer:
    """One ``new_properties`` entry (an open-vocabulary property of the target)."""

    name: str
    value: JsonScalar
    reasoning: str


@dataclass(frozen=True)
class ContentAnswer:
    """One item of a fixture's contents."""

    name: str
    description: str


@dataclass(frozen=True)
class ContentsUpdateAnswer:
    """One ``contents_updates`` entry."""

    fixture_id: str
    contents: tuple[ContentAnswer, ...]
    is_empty: bool
    reasoning: str


@dataclass(frozen=True)
class AnalyzerAnswer:
    """A fully validated interaction analyzer answer."""

    task_success: bool
    failure_reason: str | None
    property_updates: tuple[PropertyUpdateAnswer, ...]
    new_properties: tuple[NewPropertyAnswer, ...]
    contents_updates: tuple[ContentsUpdateAnswer, ...]
    confidence: float


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise AnswerSchemaError(f"duplicate key '{key}'")
        result[key] = value
    return result


def _reject_constant(name: str) -> object:
    raise AnswerSchemaError(f"non-standard JSON constant {name}")


def _loads(text: str) -> object:
    return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)


def extract_json(text: object) -> dict[str, object]:
    """Finds the JSON object in a model answer.

    Accepts a bare object, an object inside a Markdown code fence, or an object surrounded by
    prose (the first complete object wins).

    Raises:
        AnswerSchemaError: no JSON object can be found, or the answer is too long.
    """
    if not isinstance(text, str):
        raise AnswerSchemaError("answer is not text")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerSchemaError(f"answer longer than {MAX_ANSWER_CHARS} characters")
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            value = _loads(candidate)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            return value
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise AnswerSchemaError("no JSON object found in the answer")


class _Reader:
    """Typed accessors that raise with the JSON path of the offending field."""

    def __init__(self, obj: object, path: str) -> None:
        if not isinstance(obj, dict):
            raise AnswerSchemaError("expected an object", path)
        self.obj: dict[str, object] = obj
        self.path = path

    def fields(self, required: Sequence[str], optional: Sequence[str] = ()) -> None:
        for key in required:
            if key not in self.obj:
                raise AnswerSchemaError("missing field", f"{self.path}.{key}")
        extra = sorted(set(self.obj) - set(required) - set(optional))
        if extra:
            raise AnswerSchemaError(f"field outside the schema: {extra[0]}", self.path)

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def boolean(self, key: str) -> bool:
        value = self.obj[key]
        if not isinstance(value, bool):
            raise AnswerSchemaError("expected true or false", self.at(key))
        return value

    def text(self, key: str, *, nullable: bool = False, nonempty: bool = False) -> str | None:
        value = self.obj[key]
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise AnswerSchemaError("expected a string", self.at(key))
        if len(value) > MAX_TEXT_CHARS:
            raise AnswerSchemaError("string too long", self.at(key))
        if nonempty and not value.strip():
            raise AnswerSchemaError("expected a non-empty string", self.at(key))
        return value

    def string(self, key: str, *, nonempty: bool = False) -> str:
        value = self.text(key, nonempty=nonempty)
        if value is None:
            raise AnswerSchemaError("expected a string", self.at(key))
        return value

    def ident(self, key: str) -> str:
        value = self.string(key)
        if not _ID.match(value):
            raise AnswerSchemaError("expected a node id such as drawer_3", self.at(key))
        return value

    def probability(self, key: str) -> float:
        value = self.obj[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise AnswerSchemaError("expected a number", self.at(key))
        if not (math.isfinite(value) and 0.0 <= value <= 1.0):
            raise AnswerSchemaError("expected a number in [0, 1]", self.at(key))
        return float(value)

    def scalar(self, key: str) -> JsonScalar:
        value = self.obj[key]
        if value is None or isinstance(value, str | bool | int):
            if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
                raise AnswerSchemaError("string too long", self.at(key))
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise AnswerSchemaError("expected a string, number, boolean or null", self.at(key))

    def array(self, key: str) -> list[object]:
        value = self.obj[key]
        if not isinstance(value, list):
            raise AnswerSchemaError("expected an array", self.at(key))
        if len(value) > MAX_ITEMS:
            raise AnswerSchemaError(f"more than {MAX_ITEMS} entries", self.at(key))
        return value


def _property_value(prop: str, value: JsonScalar, vocab: VocabularyConfig, path: str) -> JsonScalar:
    if prop == "fullness":
        if value not in vocab.fullness_values:
            raise AnswerSchemaError(f"expected one of {list(vocab.fullness_values)}", path)
    elif not isinstance(value, bool):
        raise AnswerSchemaError("expected true or false", path)
    return value


def _property_update(obj: object, path: str, vocab: VocabularyConfig) -> PropertyUpdateAnswer:
    r = _Reader(obj, path)
    r.fields(
        ["object_id", "property", "old_value", "new_value", "confidence", "reasoning"],
        ["is_opened"],
    )
    prop = r.string("property")
    if prop not in vocab.seeded_properties:
        raise AnswerSchemaError(
            f"unknown property; use one of {list(vocab.seeded_properties)}", r.at("property")
        )
    is_opened: bool | None = None
    if "is_opened" in r.obj:
        if prop != "openable":
            raise AnswerSchemaError("is_opened is only allowed on openable", r.at("is_opened"))
        is_opened = r.boolean("is_opened")
    return PropertyUpdateAnswer(
        object_id=r.ident("object_id"),
        property=prop,
        old_value=r.scalar("old_value"),
        new_value=_property_value(prop, r.scalar("new_value"), vocab, r.at("new_value")),
        confidence=r.probability("confidence"),
        reasoning=r.string("reasoning"),
        is_opened=is_opened,
    )


def _new_property(obj: object, path: str) -> NewPropertyAnswer:
    r = _Reader(obj, path)
    r.fields(["name", "value", "reasoning"])
    name = r.string("name")
    if not _NAME.match(name):
        raise AnswerSchemaError("expected a snake_case property name", r.at("name"))
    return NewPropertyAnswer(name=name, value=r.scalar("value"), reasoning=r.string("reasoning"))


def _contents_update(obj: object, path: str) -> ContentsUpdateAnswer:
    r = _Reader(obj, path)
    r.fields(["fixture_id", "contents", "is_empty", "reasoning"])
    items: list[ContentAnswer] = []
    for i, raw in enumerate(r.array("contents")):
        item = _Reader(raw, f"{r.at('contents')}[{i}]")
        item.fields(["name", "description"])
        items.append(
            ContentAnswer(
                name=item.string("name", nonempty=True),
                description=item.string("description"),
            )
        )
    is_empty = r.boolean("is_empty")
    if is_empty and items:
        raise AnswerSchemaError("is_empty is true but contents are listed", r.at("is_empty"))
    return ContentsUpdateAnswer(
        fixture_id=r.ident("fixture_id"),
        contents=tuple(items),
        is_empty=is_empty,
        reasoning=r.string("reasoning"),
    )


def parse_analyzer_answer(text: object, vocab: VocabularyConfig) -> AnalyzerAnswer:
    """Extracts and validates an interaction analyzer answer.

    Raises:
        AnswerSchemaError: with ``path`` naming the first bad field.
    """
    return validate_analyzer_answer(extract_json(text), vocab)


def validate_analyzer_answer(obj: Mapping[str, object], vocab: VocabularyConfig) -> AnalyzerAnswer:
    """Validates an already decoded answer object (see :func:`parse_analyzer_answer`)."""
    r = _Reader(dict(obj) if isinstance(obj, Mapping) else obj, "$")
    r.fields(
        [
            "task_success",
            "failure_reason",
            "property_updates",
            "new_properties",
            "contents_updates",
            "confidence",
        ]
    )
    return AnalyzerAnswer(
        task_success=r.boolean("task_success"),
        failure_reason=r.text("failure_reason", nullable=True),
        property_updates=tuple(
            _property_update(v, f"$.property_updates[{i}]", vocab)
            for i, v in enumerate(r.array("property_updates"))
        ),
        new_properties=tuple(
            _new_property(v, f"$.new_properties[{i}]")
            for i, v in enumerate(r.array("new_properties"))
        ),
        contents_updates=tuple(
            _contents_update(v, f"$.contents_updates[{i}]")
            for i, v in enumerate(r.array("contents_updates"))
        ),
        confidence=r.probability("confidence"),
    )


def answer_to_json(answer: AnalyzerAnswer) -> dict[str, object]:
    """The answer back as a JSON-ready dictionary in the schema's shape."""
    updates: list[dict[str, object]] = []
    for u in answer.property_updates:
        entry: dict[str, object] = {
            "object_id": u.object_id,
            "property": u.property,
            "old_value": u.old_value,
            "new_value": u.new_value,
            "confidence": u.confidence,
            "reasoning": u.reasoning,
        }
        if u.is_opened is not None:
            entry["is_opened"] = u.is_opened
        updates.append(entry)
    return {
        "task_success": answer.task_success,
        "failure_reason": answer.failure_reason,
        "property_updates": updates,
        "new_properties": [
            {"name": p.name, "value": p.value, "reasoning": p.reasoning}
            for p in answer.new_properties
        ],
        "contents_updates": [
            {
                "fixture_id": c.fixture_id,
                "contents": [{"name": i.name, "description": i.description} for i in c.contents],
                "is_empty": c.is_empty,
                "reasoning": c.reasoning,
            }
            for c in answer.contents_updates
        ],
        "confidence": answer.confidence,
    }
