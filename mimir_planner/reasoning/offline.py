"""The offline reasoner: analyzer answers derived from mechanical evidence, without a model.

It answers in exactly the analyzer's JSON schema, so the simulation and CI exercise the same
parsing, verification and writing path as a real model. It is named ``offline-reasoner`` in
the logs and in every response it returns.

It reads the evidence with the same percepts as the harness, so the two agree: an open or close
is a success when the fixture measurably moved; a held handle that did not move means locked; a
held handle whose motion was not measured is reported as unconfirmed (never as a missed grasp,
which needs the absence of contact). Contents come only from an inspection of the target
fixture: detections are its only eyes, and their absence proves emptiness only where the robot
deliberately looked inside. Detections carrying a fixture label (the fixture's own door and
walls) are never contents.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mimir_planner.reasoning.config import PerceptConfig, VocabularyConfig
from mimir_planner.reasoning.errors import BackendConfigError
from mimir_planner.reasoning.evidence import ClaimContext, Evidence
from mimir_planner.reasoning.percepts import contact_summary, contents_inside, moved
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.reasoning.world_view import Box3D

LOG = logging.getLogger(__name__)

OFFLINE_NAME = "offline-reasoner"


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

    def __init__(self, vocabulary: VocabularyConfig, percepts: PerceptConfig) -> None:
        self._vocab = vocabulary
        self._percepts = percepts

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
        summary = contact_summary(ev.gripper, self._percepts)
        measure = ev.displacements.get(ctx.target_id)
        motion = moved(measure, self._percepts)
        success = True
        failure: str | None = None
        updates: list[dict[str, object]] = []
        prior_open = _prior_value(inputs.prior_state, "openable")
        if ctx.intent in ("open", "close"):
            if motion and measure is not None:
                updates.append(
                    {
                        "object_id": ctx.target_id,
                        "property": "openable",
                        "old_value": prior_open,
                        "new_value": True,
                        "confidence": 0.9,
                        "reasoning": f"{OFFLINE_NAME}: fixture moved {measure.magnitude:.3f} "
                        f"{measure.unit} ({measure.source})",
                        "is_opened": ctx.intent == "open",
                    }
                )
            elif summary is not None and summary.contact and motion is False:
                success = False
                failure = f"{OFFLINE_NAME}: locked - the jaws held the handle, no motion"
                updates.append(
                    {
                        "object_id": ctx.target_id,
                        "property": "locked",
                        "old_value": _prior_value(inputs.prior_state, "locked"),
                        "new_value": True,
                        "confidence": 0.85,
                        "reasoning": f"{OFFLINE_NAME}: grip held but the fixture stayed put",
                    }
                )
            elif summary is not None and summary.contact:
                success = False
                failure = (
                    f"{OFFLINE_NAME}: the jaws engaged the handle in {summary.engaged_samples} "
                    "samples, but the fixture's travel was not measured"
                )
            elif summary is None:
                success = False
                failure = f"{OFFLINE_NAME}: no gripper state was recorded"
            else:
                success = False
                failure = f"{OFFLINE_NAME}: missed grasp - the jaws never engaged the handle"
        elif ctx.intent == "pick":
            success = summary is not None and summary.held_at_end
            if not success:
                failure = f"{OFFLINE_NAME}: missed grasp - the jaws hold nothing"
        contents: list[dict[str, object]] = []
        for fixture in inputs.fixtures:
            if ctx.intent != "inspection" or fixture.fixture_id != ctx.target_id:
                continue
            if fixture.bbox is None or fixture.fixture_id not in ev.observed_interiors:
                continue
            inside = contents_inside(ev.detections, fixture.bbox, self._percepts, self._vocab)
            names = sorted({d.label for d in inside})
            contents.append(
                {
                    "fixture_id": fixture.fixture_id,
                    "contents": [
                        {"name": n, "description": f"detected inside {fixture.fixture_id}"}
                        for n in names
                    ],
                    "is_empty": not names,
                    "reasoning": f"{OFFLINE_NAME}: {len(inside)} detection(s) inside the box",
                }
            )
        return {
            "task_success": success,
            "failure_reason": failure,
            "property_updates": updates,
            "new_properties": [],
            "contents_updates": contents,
            "confidence": 0.8,
        }


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
