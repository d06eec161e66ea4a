"""A reasoner fault profile: a backend wrapper that corrupts answers, to test the harness.

:class:`FaultyBackend` passes each request to the backend it wraps and, with probability
``rate`` per answer (seeded), rewrites the answer with one corruption chosen among those that
apply to it. Every corruption is logged and handed to ``sink``, so an evaluation can tell a
corrupted claim from an honest one. The corruptions come in two kinds:

* refutable, which the robot's evidence contradicts: a flipped ``locked`` or ``openable``, an
  invented content in an interior the cameras saw, a wrong object id, success claimed for a
  primitive that failed;
* not refutable, which no evidence at hand can confirm or deny: a plausible content in a
  fixture whose inside was not in view, success claimed where the cameras saw little of the
  target. The harness must hold these (defer), never admit them.

The wrapper reads the analyzer's structured inputs to see which corruptions apply; it never
reads simulator truth.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mimir_planner.reasoning.errors import BackendConfigError
from mimir_planner.reasoning.offline import OfflineInputs
from mimir_planner.reasoning.vlm import VlmBackend, VlmRequest, VlmResponse

LOG = logging.getLogger(__name__)

#: corruption kinds the evidence can refute, and those it cannot
REFUTABLE = ("flip_locked", "flip_openable", "invent_content", "wrong_id", "false_success")
UNREFUTABLE = ("occluded_content", "unseen_success")

#: things a kitchen plausibly holds, used for invented contents
PLAUSIBLE_ITEMS = ("apple", "mug", "bowl", "sponge", "banana", "ketchup", "soda can")

_ID_NUMBER = re.compile(r"_(\d+)$")


@dataclass(frozen=True)
class Corruption:
    """One corruption applied to one answer."""

    interaction_id: str
    primitive: str
    target_id: str
    kind: str
    refutable: bool
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """The record as plain JSON values."""
        return dataclasses.asdict(self)


class FaultyBackend:
    """Wraps a backend and corrupts a share of its answers (see the module docstring).

    Args:
        inner: the backend whose answers are corrupted.
        rate: probability that an answer is corrupted, in [0, 1].
        seed: seed of the choices.
        sink: called with every corruption (after it is logged).
        kinds: the corruption kinds to draw from; None for all of them.
    """

    def __init__(self, inner: VlmBackend, rate: float, seed: int = 0,
                 sink: Callable[[Corruption], None] | None = None,
                 kinds: Sequence[str] | None = None) -> None:
        if not 0.0 <= rate <= 1.0:
            raise BackendConfigError(f"the reasoner fault rate must lie in [0, 1], got {rate}")
        unknown = sorted(set(kinds or ()) - set(REFUTABLE + UNREFUTABLE))
        if unknown:
            raise BackendConfigError(f"unknown reasoner fault kinds {unknown}")
        self._kinds = tuple(kinds) if kinds is not None else REFUTABLE + UNREFUTABLE
        self._inner = inner
        self._rate = rate
        self._rng = random.Random(seed)
        self._sink = sink
        self.corruptions: list[Corruption] = []

    @property
    def name(self) -> str:
        return self._inner.name

    def complete(self, request: VlmRequest) -> VlmResponse:
        response = self._inner.complete(request)
        inputs = request.structured
        if not isinstance(inputs, OfflineInputs) or self._rng.random() >= self._rate:
            return response
        try:
            answer = json.loads(response.text)
        except json.JSONDecodeError:
            return response  # a malformed answer is already the schema parser's business
        if not isinstance(answer, dict):
            return response
        kinds = [k for k in applicable(answer, inputs) if k in self._kinds]
        if not kinds:
            return response
        kind = self._rng.choice(kinds)
        detail = _APPLY[kind](answer, inputs, self._rng)
        ctx = inputs.ctx
        record = Corruption(ctx.interaction_id, ctx.primitive, ctx.target_id, kind,
                            kind in REFUTABLE, detail)
        self.corruptions.append(record)
        LOG.warning("reasoner fault on %s (%s %s): %s - %s", ctx.interaction_id, ctx.primitive,
                    ctx.target_id, kind, detail)
        if self._sink is not None:
            self._sink(record)
        return dataclasses.replace(response, text=json.dumps(answer))


def applicable(answer: dict[str, Any], inputs: OfflineInputs) -> list[str]:
    """The corruption kinds that can be applied to this answer, in a fixed order."""
    ctx, ev = inputs.ctx, inputs.evidence
    props = [u for u in _list(answer, "property_updates") if isinstance(u, dict)]
    names = {u.get("property") for u in props}
    contents = [c for c in _list(answer, "contents_updates") if isinstance(c, dict)]
    kinds: list[str] = []
    if "locked" in names or (ctx.intent in ("open", "close") and answer.get("task_success")):
        kinds.append("flip_locked")
    if "openable" in names:
        kinds.append("flip_openable")
    if ctx.intent == "inspection" and ctx.target_id in ev.observed_interiors and any(
            c.get("fixture_id") == ctx.target_id for c in contents):
        kinds.append("invent_content")
    if props or contents:
        kinds.append("wrong_id")
    if answer.get("task_success") is False and ctx.reported_success is False:
        kinds.append("false_success")
    if any(f.fixture_id not in ev.observed_interiors and f.bbox is not None
           for f in inputs.fixtures):
        kinds.append("occluded_content")
    if (answer.get("task_success") is False and ev.visible_frames < 2
            and ctx.intent not in ("open", "close", "pick", "inspection")):
        kinds.append("unseen_success")  # an intent no mechanical predicate decides
    return kinds


def _list(answer: dict[str, Any], key: str) -> list[Any]:
    value = answer.get(key)
    if not isinstance(value, list):
        value = []
        answer[key] = value
    return value


def _flip_locked(answer: dict[str, Any], inputs: OfflineInputs, _rng: random.Random) -> str:
    for update in _list(answer, "property_updates"):
        if isinstance(update, dict) and update.get("property") == "locked":
            update["new_value"] = not bool(update.get("new_value"))
            update["reasoning"] = "the handle felt firm"
            return f"locked flipped to {update['new_value']}"
    _list(answer, "property_updates").append({
        "object_id": inputs.ctx.target_id, "property": "locked", "old_value": "unknown",
        "new_value": True, "confidence": 0.8, "reasoning": "the door resisted"})
    return "locked = true added to a successful open"


def _flip_openable(answer: dict[str, Any], _inputs: OfflineInputs, _rng: random.Random) -> str:
    for update in _list(answer, "property_updates"):
        if isinstance(update, dict) and update.get("property") == "openable":
            update["new_value"] = not bool(update.get("new_value"))
            update.pop("is_opened", None)
            return f"openable flipped to {update['new_value']}"
    return "no openable update"


def _invented(rng: random.Random, present: set[str]) -> str:
    choices = [n for n in PLAUSIBLE_ITEMS if n not in present] or list(PLAUSIBLE_ITEMS)
    return rng.choice(choices)


def _invent_content(answer: dict[str, Any], inputs: OfflineInputs, rng: random.Random) -> str:
    for update in _list(answer, "contents_updates"):
        if isinstance(update, dict) and update.get("fixture_id") == inputs.ctx.target_id:
            found = update.get("contents")
            items: list[Any] = found if isinstance(found, list) else []
            present = {str(i.get("name")) for i in items if isinstance(i, dict)}
            name = _invented(rng, present)
            update["contents"] = [*items, {"name": name, "description": "at the back"}]
            update["is_empty"] = False
            return f"'{name}' added to the seen interior of {inputs.ctx.target_id}"
    return "no contents update"


def _wrong_id(answer: dict[str, Any], inputs: OfflineInputs, _rng: random.Random) -> str:
    target = inputs.ctx.target_id
    match = _ID_NUMBER.search(target)
    wrong = (f"{target[:match.start()]}_{int(match.group(1)) + 40}" if match
             else f"{target}_40")
    for key, field in (("property_updates", "object_id"), ("contents_updates", "fixture_id")):
        for update in _list(answer, key):
            if isinstance(update, dict) and update.get(field) == target:
                update[field] = wrong
    return f"{target} cited as {wrong}"


def _false_success(answer: dict[str, Any], _inputs: OfflineInputs, _rng: random.Random) -> str:
    answer["task_success"] = True
    answer["failure_reason"] = None
    return "success claimed for a primitive the executor reported failed"


def _occluded_content(answer: dict[str, Any], inputs: OfflineInputs, rng: random.Random) -> str:
    hidden = [f for f in inputs.fixtures
              if f.fixture_id not in inputs.evidence.observed_interiors and f.bbox is not None]
    fixture = rng.choice(hidden)
    name = _invented(rng, set())
    _list(answer, "contents_updates").append({
        "fixture_id": fixture.fixture_id, "is_empty": False,
        "reasoning": "something shows through the gap",
        "contents": [{"name": name, "description": "partly hidden"}]})
    return f"'{name}' claimed inside {fixture.fixture_id}, whose inside was not in view"


def _unseen_success(answer: dict[str, Any], _inputs: OfflineInputs, _rng: random.Random) -> str:
    answer["task_success"] = True
    answer["failure_reason"] = None
    return "success claimed where the cameras saw little of the target"


_APPLY: dict[str, Callable[[dict[str, Any], OfflineInputs, random.Random], str]] = {
    "flip_locked": _flip_locked,
    "flip_openable": _flip_openable,
    "invent_content": _invent_content,
    "wrong_id": _wrong_id,
    "false_success": _false_success,
    "occluded_content": _occluded_content,
    "unseen_success": _unseen_success,
}
