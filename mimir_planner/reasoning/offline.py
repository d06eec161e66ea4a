"""The offline reasoner: analyzer answers derived from mechanical evidence, without a model.

It answers in exactly the analyzer's JSON schema, so the simulation and CI exercise the same
parsing, verification and writing path as a real model. It is named ``offline-reasoner`` in
the logs and in every response it returns.

It stands where a vision-language model would, so it reads the evidence its own way, with its
own simple rules and thresholds, and never with the verifiers' predicates: its claims are
checked by the harness like a model's, and it can be wrong. An open or close succeeded when the
hand travelled far while the jaws held the handle or the depth of the fixture's region changed
a lot; jaws held shut with neither means locked; jaws that never held means a missed grasp. A
pick succeeded when the jaws still hold something at the end. Contents come only from an
inspection of a fixture whose interior was in view (open, or open-top): the detections inside
its box, fixture parts left out, one name per thing (detections within a few centimetres whose
labels name the same thing, a cup also seen as a mug, take the label most of them carry).
Inspecting a closed fixture reports the interior as not
observed, never as empty; one memory held open that the look found shut is said to stand
closed again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mimir_planner.reasoning.config import VocabularyConfig
from mimir_planner.reasoning.errors import BackendConfigError
from mimir_planner.reasoning.evidence import (
    ClaimContext,
    Detection3D,
    Evidence,
    RobotStateSample,
)
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.reasoning.world_view import Box3D

LOG = logging.getLogger(__name__)

OFFLINE_NAME = "offline-reasoner"

#: the reasoner's own reading: held readings that make a hold, hand travel and depth change
#: that make a real opening (m); deliberately its own numbers, not the verifiers'
_HELD_READINGS = 3
_HAND_TRAVEL_M = 0.10
_DEPTH_CHANGE_M = 0.05
#: detections closer than this whose labels are synonyms are one thing (m)
_SAME_THING_M = 0.04


@dataclass(frozen=True)
class FixtureInfo:
    """A fixture near the target, as the offline reasoner needs it."""

    fixture_id: str
    label: str
    bbox: Box3D | None


@dataclass(frozen=True)
class OfflineInputs:
    """Structured evidence the analyzer attaches to a request for model-free backends."""

    ctx: ClaimContext
    evidence: Evidence
    fixtures: tuple[FixtureInfo, ...] = ()
    prior_state: Mapping[str, object] = field(default_factory=dict)


class OfflineReasoner:
    """A :class:`~mimir_planner.reasoning.vlm.VlmBackend` that reads mechanical evidence."""

    def __init__(self, vocabulary: VocabularyConfig) -> None:
        self._vocab = vocabulary

    @property
    def name(self) -> str:
        return OFFLINE_NAME

    def complete(self, request: VlmRequest) -> VlmResponse:
        inputs = request.structured
        if not isinstance(inputs, OfflineInputs):
            raise BackendConfigError(
                "the offline reasoner needs the analyzer's structured evidence in the request"
            )
        started = time.monotonic()
        answer = self.answer(inputs)
        text = json.dumps(answer, sort_keys=False)
        LOG.info(
            "%s answered for %s on %s", OFFLINE_NAME, inputs.ctx.primitive, inputs.ctx.target_id
        )
        return VlmResponse(
            text=text,
            backend=OFFLINE_NAME,
            model=OFFLINE_NAME,
            latency_s=time.monotonic() - started,
            prompt_tokens=0,
            completion_tokens=0,
            attempts=1,
            finish_reason="stop",
        )

    def answer(self, inputs: OfflineInputs) -> dict[str, object]:
        """The analyzer answer (schema of the interaction analyzer) for the evidence."""
        ctx, ev = inputs.ctx, inputs.evidence
        success = True if ctx.reported_success is None else ctx.reported_success
        failure: str | None = None if success else (
            f"{OFFLINE_NAME}: the executor reported {ctx.reported_message or 'a failure'}")
        updates: list[dict[str, object]] = []
        contents: list[dict[str, object]] = []
        if ctx.intent in ("open", "close"):
            success, failure, updates = self._fixture_action(inputs)
        elif ctx.intent == "pick":
            success = bool(ev.gripper) and ev.gripper[-1].contact
            failure = None if success else f"{OFFLINE_NAME}: missed grasp - the jaws hold nothing"
        elif ctx.intent == "inspection":
            success, failure, contents = self._inspection(inputs)
            if ctx.target_id in ev.found_shut:
                updates = [_openable(inputs, opened=False, confidence=0.8,
                                     seen="the door stands closed again")]
        return {
            "task_success": success,
            "failure_reason": failure,
            "property_updates": updates,
            "new_properties": [],
            "contents_updates": contents,
            "confidence": 0.8,
        }

    def _fixture_action(
        self, inputs: OfflineInputs
    ) -> tuple[bool, str | None, list[dict[str, object]]]:
        ctx, ev = inputs.ctx, inputs.evidence
        held = sum(s.contact for s in ev.gripper)
        travel = _held_hand_travel(ev.gripper)
        depth = ev.depth_changes.get(ctx.target_id)
        depth_m = depth.magnitude if depth is not None else None
        seen = (f"hand travelled {travel:.3f} m while holding; depth changed "
                + (f"{depth_m:.3f} m" if depth_m is not None else "(not seen)"))
        if travel >= _HAND_TRAVEL_M or (depth_m is not None and depth_m >= _DEPTH_CHANGE_M):
            return True, None, [_openable(inputs, opened=ctx.intent == "open", confidence=0.9,
                                          seen=seen)]
        if not ev.gripper:
            return False, f"{OFFLINE_NAME}: no gripper state was recorded", []
        if held < _HELD_READINGS:
            return False, f"{OFFLINE_NAME}: missed grasp - the jaws never held the handle", []
        return False, f"{OFFLINE_NAME}: locked - the jaws held the handle; {seen}", [{
            "object_id": ctx.target_id,
            "property": "locked",
            "old_value": _prior_value(inputs.prior_state, "locked"),
            "new_value": True,
            "confidence": 0.85,
            "reasoning": f"{OFFLINE_NAME}: held in {held} readings but {seen}",
        }]

    def _inspection(
        self, inputs: OfflineInputs
    ) -> tuple[bool, str | None, list[dict[str, object]]]:
        ctx, ev = inputs.ctx, inputs.evidence
        fixture = next((f for f in inputs.fixtures if f.fixture_id == ctx.target_id), None)
        if fixture is None or fixture.bbox is None:
            return False, f"{OFFLINE_NAME}: '{ctx.target_id}' has no volume to look into", []
        if fixture.fixture_id in ev.found_shut:
            return False, (f"{OFFLINE_NAME}: interior not observed - '{ctx.target_id}' is closed "
                           "again: no depth reached its back"), []
        if fixture.fixture_id not in ev.observed_interiors:
            return False, f"{OFFLINE_NAME}: interior not observed - '{ctx.target_id}' is closed", []
        if ctx.reported_success is False:
            return False, (f"{OFFLINE_NAME}: the look failed ({ctx.reported_message}); nothing "
                           "said about the inside"), []
        parts = self._vocab.never_contents
        lo, hi = fixture.bbox.lower, fixture.bbox.upper
        inside = [d for d in ev.detections
                  if d.label not in parts and bool(np.all((d.position >= lo) & (d.position <= hi)))]
        names = sorted(set(self._one_name_per_thing(inside)))
        return True, None, [{
            "fixture_id": fixture.fixture_id,
            "contents": [{"name": n, "description": f"seen inside {fixture.fixture_id}"}
                         for n in names],
            "is_empty": not names,
            "reasoning": f"{OFFLINE_NAME}: {len(inside)} detection(s) in the box",
        }]


    def _same_name(self, a: str, b: str) -> bool:
        """Whether two labels are one name or synonyms in the vocabulary (``mug``, ``cup``)."""
        return a == b or any({a, b} <= {key, *alternatives}
                             for key, alternatives in self._vocab.synonyms.items())

    def _one_name_per_thing(self, detections: Sequence[Detection3D]) -> list[str]:
        """A label per thing: detections within ``_SAME_THING_M`` of a group's first whose
        labels name the same thing (vocabulary synonyms) join it, and the group takes the
        label most of its detections carry (ties: the larger summed score, then the name)."""
        groups: list[list[Detection3D]] = []
        for det in detections:
            group = next((g for g in groups
                          if float(np.linalg.norm(g[0].position - det.position)) <= _SAME_THING_M
                          and self._same_name(g[0].label, det.label)), None)
            if group is None:
                groups.append([det])
            else:
                group.append(det)
        names = []
        for group in groups:
            tally: dict[str, tuple[int, float]] = {}
            for det in group:
                count, score = tally.get(det.label, (0, 0.0))
                tally[det.label] = (count + 1, score + det.score)
            names.append(max(tally, key=lambda label: (*tally[label], label)))
        return names


def _openable(inputs: OfflineInputs, *, opened: bool, confidence: float,
              seen: str) -> dict[str, object]:
    """The answer's update of the target: it opens, and stands open or closed now."""
    return {
        "object_id": inputs.ctx.target_id,
        "property": "openable",
        "old_value": _prior_value(inputs.prior_state, "openable"),
        "new_value": True,
        "confidence": confidence,
        "reasoning": f"{OFFLINE_NAME}: {seen}",
        "is_opened": opened,
    }


def _held_hand_travel(samples: Sequence[RobotStateSample]) -> float:
    """Largest distance of the hand from where it was when the jaws first held (m), in odom
    from the held samples that carry it when at least half do (localisation corrects map, not
    the hand), else in map."""
    # only while the hand was commanded: once the commands stop, a hand held back by a locked
    # door springs away as the jaws loosen, before their reading shows them open
    held = [s for s in samples if s.contact and s.hand_position is not None
            and s.hand_commanded is not None]
    if len(held) < 2:
        return 0.0
    in_odom = [np.asarray(s.hand_odom) for s in held if s.hand_odom is not None]
    if len(in_odom) >= 2 and 2 * len(in_odom) >= len(held):
        points = in_odom
    else:
        points = [np.asarray(s.hand_position) for s in held]
    return float(max(np.linalg.norm(p - points[0]) for p in points))


def _prior_value(prior: Mapping[str, object], prop: str) -> object:
    props = prior.get("properties")
    if isinstance(props, Mapping):
        entry = props.get(prop)
        if isinstance(entry, Mapping):
            value = entry.get("value", "unknown")
            if value is None or isinstance(value, str | bool | int | float):
                return value
    return "unknown"


def fixture_infos(nodes: Sequence[object]) -> tuple[FixtureInfo, ...]:
    """FixtureInfo records from node views (anything with node_id, label, bbox)."""
    infos: list[FixtureInfo] = []
    for node in nodes:
        node_id = getattr(node, "node_id", None)
        label = getattr(node, "label", None)
        bbox = getattr(node, "bbox", None)
        if isinstance(node_id, str) and isinstance(label, str):
            infos.append(FixtureInfo(node_id, label, bbox if isinstance(bbox, Box3D) else None))
    return tuple(infos)
