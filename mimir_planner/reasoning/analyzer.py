"""The interaction analyzer: evidence of one primitive in, verified memory updates out.

After each primitive it gathers the action window, builds the BEFORE/AFTER images and the
time x camera collage, picks the manipulation or inspection prompt by the primitive's name,
asks the backend, parses the answer strictly (retrying a bounded number of times), turns the
answer into typed claims and passes every claim through the propose-verify harness. Only the
harness's admitted updates leave the analyzer; a bad answer never writes anything.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

import numpy as np

from mimir_planner.reasoning.answer_schema import AnalyzerAnswer, parse_analyzer_answer
from mimir_planner.reasoning.claims import (
    Claim,
    ContentClaim,
    ContentsUpdate,
    EmptyClaim,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    PropertyUpdate,
    Verdict,
)
from mimir_planner.reasoning.collage import Collage, build_collage, fit_max_side, nearest_frame
from mimir_planner.reasoning.config import ReasoningConfig, VocabularyConfig
from mimir_planner.reasoning.errors import (
    AnswerRetriesExhaustedError,
    AnswerSchemaError,
    EvidenceError,
)
from mimir_planner.reasoning.evidence import (
    ActionWindow,
    CameraFrame,
    ClaimContext,
    Detection3D,
    DisplacementMeasurement,
    Evidence,
    PrimitiveRecord,
)
from mimir_planner.reasoning.harness import Harness, HarnessResult
from mimir_planner.reasoning.offline import OfflineInputs, fixture_infos
from mimir_planner.reasoning.percepts import (
    contact_summary,
    failure_category,
    hand_displacement,
    in_view,
    measure_depth_change,
    moved,
    pair_problem,
    primitive_intent,
    pull_tracking,
    release_point,
    settled_pair,
    shut_in_view,
)
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import (
    ChatMessage,
    ImagePart,
    TextPart,
    VlmBackend,
    VlmRequest,
    VlmResponse,
)
from mimir_planner.reasoning.world_view import NodeView, WorldView, is_opened, node_state
from mimir_planner.reasoning.writes import Whereabouts

LOG = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True)
class KeyframeRequest:
    """A frame the keyframe store should keep for this interaction.

    Attributes:
        role: ``interaction_before``, ``interaction_after`` or ``interaction_peak``.
        camera: camera name.
        stamp: frame stamp, s.
        rgb: full-resolution image.
        frame_ref: evidence reference of the frame.
        linked_node_ids: scene graph nodes the keyframe shows.
        action: primitive name.
        labels: short analyzer labels (admitted contents and properties).
        caption: one-line summary of the admitted outcome.
    """

    role: str
    camera: str
    stamp: float
    rgb: np.ndarray
    frame_ref: str
    linked_node_ids: tuple[str, ...]
    action: str
    labels: tuple[str, ...] = ()
    caption: str = ""


@dataclass(frozen=True)
class PreparedInteraction:
    """Everything built before the model is asked."""

    ctx: ClaimContext
    evidence: Evidence
    request: VlmRequest
    collage: Collage
    before: CameraFrame
    after: CameraFrame
    mode: str
    window: ActionWindow


class _FromHarness(Generic[_T]):
    """A read-only attribute of :class:`AnalysisResult` that its harness result answers."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, result: AnalysisResult, owner: type | None = None) -> _T:
        return cast(_T, getattr(result.harness, self._name))


@dataclass(frozen=True)
class AnalysisResult:
    """Outcome of analysing one interaction."""

    interaction_id: str
    mode: str
    response: VlmResponse
    answer: AnalyzerAnswer
    claims: tuple[Claim, ...]
    harness: HarnessResult
    keyframes: tuple[KeyframeRequest, ...]
    answer_attempts: int

    property_updates = _FromHarness[tuple[PropertyUpdate, ...]]()
    contents_updates = _FromHarness[tuple[ContentsUpdate, ...]]()
    outcome_updates = _FromHarness[tuple[OutcomeUpdate, ...]]()
    verdicts = _FromHarness[tuple[Verdict, ...]]()
    deferred = _FromHarness[tuple[Verdict, ...]]()
    rejected = _FromHarness[tuple[Verdict, ...]]()


def claims_from_answer(
    answer: AnalyzerAnswer, ctx: ClaimContext, vocab: VocabularyConfig
) -> list[Claim]:
    """Typed claims for every statement of a validated answer."""
    claims: list[Claim] = [
        OutcomeClaim(
            target_id=ctx.target_id,
            primitive=ctx.primitive,
            success=answer.task_success,
            failure_reason=answer.failure_reason,
            category="success"
            if answer.task_success
            else failure_category(answer.failure_reason, vocab),
            confidence=answer.confidence,
        )
    ]
    for u in answer.property_updates:
        claims.append(
            PropertyClaim(
                object_id=u.object_id,
                name=u.property,
                new_value=u.new_value,
                confidence=u.confidence,
                reasoning=u.reasoning,
                old_value=u.old_value,
                is_opened=u.is_opened,
            )
        )
    for p in answer.new_properties:
        claims.append(
            PropertyClaim(
                object_id=ctx.target_id,
                name="locked" if p.name in ("locked", "stuck") else p.name,
                new_value=p.value,
                confidence=answer.confidence,
                reasoning=p.reasoning,
            )
        )
    for c in answer.contents_updates:
        if c.is_empty:
            claims.append(EmptyClaim(fixture_id=c.fixture_id, reasoning=c.reasoning))
        for item in c.contents:
            claims.append(
                ContentClaim(
                    fixture_id=c.fixture_id,
                    name=item.name,
                    description=item.description,
                    reasoning=c.reasoning,
                )
            )
    return claims


class InteractionAnalyzer:
    """Analyses primitives and returns verified memory updates.

    Args:
        backend: the model (or the offline reasoner).
        world: read access to memory.
        config: reasoning configuration.
        prompts: prompt library; defaults to ``config.prompt_dir``.
        harness: verifier harness; defaults to one built from ``config``. Keep one harness per
            robot so that deferred claims survive between interactions.
    """

    def __init__(
        self,
        backend: VlmBackend,
        world: WorldView,
        config: ReasoningConfig,
        prompts: PromptLibrary | None = None,
        harness: Harness | None = None,
    ) -> None:
        self._backend = backend
        self._world = world
        self._cfg = config
        self._prompts = prompts or PromptLibrary(config.prompt_dir)
        self.harness = harness or Harness(
            world, config.vocabulary, config.percepts, config.verifier
        )

    # ------------------------------------------------------------------ evidence

    def _target(self, primitive: PrimitiveRecord) -> NodeView:
        node = self._world.node(primitive.target_id)
        if node is None:
            raise EvidenceError(f"target '{primitive.target_id}' is not in memory")
        return node

    def _nearby_fixtures(self, target: NodeView) -> list[NodeView]:
        near = self._world.nodes_near(target.position, self._cfg.analyzer.nearby_fixture_radius_m)
        fixtures = [n for n in near if n.label in self._cfg.vocabulary.fixture_labels]
        if target.label in self._cfg.vocabulary.fixture_labels and all(
            n.node_id != target.node_id for n in fixtures
        ):
            fixtures.insert(0, target)
        return fixtures

    def _window_frames(self, window: ActionWindow, primitive: PrimitiveRecord) -> ActionWindow:
        margin = self._cfg.analyzer.window_margin_s
        lo, hi = primitive.start_stamp - margin, primitive.end_stamp + margin
        frames = tuple(f for f in window.frames if lo <= f.stamp <= hi)
        if not frames:
            raise EvidenceError(
                f"no frame of the window lies within [{lo:.3f}, {hi:.3f}] s of the primitive"
            )
        return ActionWindow(
            frames=frames,
            robot_states=tuple(s for s in window.robot_states if lo <= s.stamp <= hi),
        )

    def build_evidence(
        self,
        window: ActionWindow,
        primitive: PrimitiveRecord,
        fixtures: Sequence[NodeView],
        detections: Sequence[Detection3D] = (),
        intent: str = "other",
        *,
        target: NodeView | None = None,
    ) -> Evidence:
        """Mechanical evidence of a window from the robot's signals.

        The target's motion is measured twice: the depth change in its image region (per
        camera, the earliest frame taken from where the camera ends against the last) and,
        for an open or close, how far the hand travelled while the jaws held the handle, with
        how far it was commanded to go. A
        fixture's interior counts as observed only where the cameras could see into it: it
        was opened now, memory holds it open, or its label is open-top. Inspecting a closed
        fixture observes no interior.
        """
        percepts = self._cfg.percepts
        depth: dict[str, DisplacementMeasurement] = {}
        # only the action's target can have moved; another fixture's image region changes
        # when the target's door or the arm passes in front of it
        boxed = [(n.node_id, n.bbox) for n in fixtures
                 if n.bbox is not None and n.node_id == primitive.target_id]
        problems: list[str] = []
        for camera in window.cameras():
            frames = window.frames_of(camera)
            pair = settled_pair(frames, percepts)
            if pair is None:
                problems.append(f"{camera}: {pair_problem(frames, percepts)}")
                continue
            for node_id, box in boxed:
                measure = measure_depth_change(pair[0], pair[1], node_id, box, percepts)
                if isinstance(measure, str):
                    problems.append(f"{camera}: {measure}")
                    continue
                best = depth.get(node_id)
                if best is None or measure.magnitude > best.magnitude:
                    depth[node_id] = measure
        unmeasured = {node_id: "; ".join(problems) for node_id, _ in boxed
                      if node_id not in depth}
        displacements = dict(depth)
        pull = None
        if intent in ("open", "close"):
            pull = pull_tracking(window.robot_states, percepts)
            held = hand_displacement(primitive.target_id, window.robot_states, percepts)
            known = displacements.get(primitive.target_id)
            if held is not None and (known is None or held.magnitude > known.magnitude):
                displacements[primitive.target_id] = held
        margin = self._cfg.analyzer.window_margin_s
        seen = tuple(
            d
            for d in detections
            if primitive.start_stamp <= d.stamp <= primitive.end_stamp + margin
        )
        open_top = set(self._cfg.vocabulary.open_top_labels)
        looking = [f for f in window.frames if f.stamp >= primitive.start_stamp]
        interiors: set[str] = set()
        shut: set[str] = set()
        for node in fixtures:
            opened_now = intent == "open" and moved(displacements.get(node.node_id), percepts)
            if opened_now or node.label in open_top:
                interiors.add(node.node_id)
            elif is_opened(node):
                looked_at = intent == "inspection" and node.node_id == primitive.target_id
                if looked_at and node.bbox is not None \
                        and shut_in_view(looking, node.bbox, percepts):
                    shut.add(node.node_id)
                else:
                    interiors.add(node.node_id)
        if target is None:
            target = next((n for n in fixtures if n.node_id == primitive.target_id), None)
        visible = 0
        if target is not None and target.bbox is not None:
            visible = sum(in_view(f, target.bbox, percepts) for f in looking)
        refs = tuple(f.ref for f in looking)
        return Evidence(
            gripper=window.robot_states,
            displacements=displacements,
            depth_changes=depth,
            depth_unmeasured=unmeasured,
            pull=pull,
            detections=seen,
            observed_interiors=frozenset(interiors),
            found_shut=frozenset(shut),
            visible_frames=visible,
            refs=refs[-6:],
            target_id=primitive.target_id,
        )

    def _gripper_text(self, evidence: Evidence, start: float) -> str:
        summary = contact_summary(evidence.gripper, self._cfg.percepts)
        if summary is None:
            return "no gripper state was recorded."
        peak = (
            f"strongest at +{summary.peak_stamp - start:.1f} s"
            if summary.peak_stamp is not None
            else "never engaged"
        )
        return (
            f"{len(evidence.gripper)} samples; jaws engaged an object in "
            f"{summary.engaged_samples} of them ({peak}); jaw opening at the end "
            f"{summary.end_opening_m:.3f} m."
        )

    def prepare(
        self,
        window: ActionWindow,
        primitive: PrimitiveRecord,
        detections: Sequence[Detection3D] = (),
        interaction_id: str | None = None,
    ) -> PreparedInteraction:
        """Builds evidence, images and the request; nothing is sent yet."""
        target = self._target(primitive)
        window = self._window_frames(window, primitive)
        cfg = self._cfg.analyzer
        intent = primitive_intent(primitive.name, self._cfg.vocabulary)
        mode = "inspection" if intent == "inspection" else "manipulation"
        fixtures = self._nearby_fixtures(target)
        evidence = self.build_evidence(window, primitive, fixtures, detections, intent,
                                       target=target)
        ctx = ClaimContext(
            interaction_id=interaction_id or uuid.uuid4().hex[:12],
            primitive=primitive.name,
            intent=intent,
            target_id=target.node_id,
            target_label=target.label,
            target_position=np.asarray(target.position, dtype=np.float64),
            stamp=primitive.end_stamp,
            reported_success=primitive.reported_success,
            reported_message=primitive.reported_message,
            reported_outcome=primitive.reported_outcome,
        )
        cameras = window.cameras()
        primary = cfg.primary_camera if cfg.primary_camera in cameras else cameras[0]
        primary_frames = window.frames_of(primary)
        before, after = primary_frames[0], primary_frames[-1]
        collage = build_collage(
            window,
            start=primitive.start_stamp,
            end=primitive.end_stamp,
            columns=cfg.collage_columns,
            tile_width=cfg.collage_tile_width,
            label_width=cfg.collage_label_width,
            header_height=cfg.collage_header_height,
        )
        prompt_name = cfg.inspection_prompt if mode == "inspection" else cfg.manipulation_prompt
        fixtures_json = [
            {"id": n.node_id, "label": n.label, "prior_contents": list(n.contents)}
            for n in fixtures
        ]
        text = self._prompts.render(
            prompt_name,
            {
                "belief_state": json.dumps(node_state(target), default=str),
                "action_name": primitive.name,
                "target_id": target.node_id,
                "target_position": [round(float(v), 3) for v in target.position],
                "task": primitive.task or "(none given)",
                "robot_state_summary": self._gripper_text(evidence, primitive.start_stamp),
                "nearby_fixtures": json.dumps(fixtures_json),
                "camera_rows": ", ".join(f"row {i + 1}: {c}" for i, c in enumerate(cameras)),
                "column_times": ", ".join(
                    f"{t - primitive.start_stamp:+.1f} s" for t in collage.times
                ),
                "property_vocabulary": ", ".join(self._cfg.vocabulary.seeded_properties),
                "fullness_values": ", ".join(self._cfg.vocabulary.fullness_values),
            },
        )
        message = ChatMessage(
            role="user",
            parts=(
                TextPart(text),
                ImagePart(fit_max_side(before.rgb, cfg.full_image_max_side), "before"),
                ImagePart(fit_max_side(after.rgb, cfg.full_image_max_side), "after"),
                ImagePart(collage.image, "collage"),
            ),
        )
        request = VlmRequest(
            messages=(message,),
            json_mode=True,
            purpose="interaction_analyzer",
            structured=OfflineInputs(
                ctx=ctx,
                evidence=evidence,
                fixtures=fixture_infos(fixtures),
                prior_state=node_state(target),
            ),
        )
        return PreparedInteraction(ctx, evidence, request, collage, before, after, mode, window)

    # ------------------------------------------------------------------ analysis

    def ask(self, prepared: PreparedInteraction) -> tuple[VlmResponse, AnalyzerAnswer, int]:
        """Asks the backend until the answer parses, at most ``answer_attempts`` times.

        Raises:
            AnswerRetriesExhaustedError: every answer was invalid (nothing is written).
            BackendError: the backend itself failed.
        """
        request = prepared.request
        attempts = self._cfg.analyzer.answer_attempts
        last: AnswerSchemaError | None = None
        for attempt in range(1, attempts + 1):
            response = self._backend.complete(request)
            try:
                answer = parse_analyzer_answer(response.text, self._cfg.vocabulary)
            except AnswerSchemaError as err:
                last = err
                LOG.warning(
                    "%s answer %d/%d for %s rejected: %s",
                    response.backend,
                    attempt,
                    attempts,
                    prepared.ctx.interaction_id,
                    err,
                )
                correction = self._prompts.render(
                    self._cfg.analyzer.correction_prompt, {"error": str(err)}
                )
                request = VlmRequest(
                    messages=(
                        *prepared.request.messages,
                        ChatMessage.text("assistant", response.text[:4000]),
                        ChatMessage.text("user", correction),
                    ),
                    json_mode=request.json_mode,
                    purpose=request.purpose,
                    structured=request.structured,
                )
                continue
            LOG.info(
                "%s answered %s in %.2f s (attempt %d)",
                response.backend,
                prepared.ctx.interaction_id,
                response.latency_s,
                attempt,
            )
            return response, answer, attempt
        path = last.path if last is not None else "$"
        raise AnswerRetriesExhaustedError(
            f"no valid answer after {attempts} attempts; last error: "
            f"{last.detail if last else 'none'}",
            path,
        ) from last

    def analyze(
        self,
        window: ActionWindow,
        primitive: PrimitiveRecord,
        detections: Sequence[Detection3D] = (),
        interaction_id: str | None = None,
    ) -> AnalysisResult:
        """Full analysis of one primitive; see the module docstring."""
        prepared = self.prepare(window, primitive, detections, interaction_id)
        response, answer, attempts = self.ask(prepared)
        return self.verify(prepared, response, answer, attempts)

    def verify(
        self,
        prepared: PreparedInteraction,
        response: VlmResponse,
        answer: AnalyzerAnswer,
        attempts: int = 1,
    ) -> AnalysisResult:
        """Turns a validated answer into claims, judges them and picks keyframes."""
        claims = claims_from_answer(answer, prepared.ctx, self._cfg.vocabulary)
        result = self.harness.evaluate(claims, prepared.ctx, prepared.evidence)
        keyframes = self._keyframes(prepared, result)
        return AnalysisResult(
            interaction_id=prepared.ctx.interaction_id,
            mode=prepared.mode,
            response=response,
            answer=answer,
            claims=tuple(claims),
            harness=result,
            keyframes=keyframes,
            answer_attempts=attempts,
        )

    def whereabouts(self, prepared: PreparedInteraction,
                    detections: Sequence[Detection3D] = ()) -> Whereabouts:
        """What this interaction showed about where things are, for the parents it writes:
        where each detection was and where the jaws let go."""
        vocab = self._cfg.vocabulary
        return Whereabouts(
            world=self._world,
            intent=prepared.ctx.intent,
            detections={d.ref: d.position for d in (*detections, *prepared.evidence.detections)},
            release_point=release_point(prepared.evidence.gripper, self._cfg.percepts),
            fixture_labels=frozenset(vocab.fixture_labels),
            synonyms=vocab.synonyms,
            margin_m=self._cfg.percepts.box_margin_m,
        )

    def _keyframes(
        self, prepared: PreparedInteraction, result: HarnessResult
    ) -> tuple[KeyframeRequest, ...]:
        ctx = prepared.ctx
        labels: list[str] = []
        linked = [ctx.target_id]
        for update in result.contents_updates:
            labels.extend(item.name for item in update.contents)
            if update.fixture_id not in linked:
                linked.append(update.fixture_id)
        labels.extend(f"{u.property}={u.value}" for u in result.property_updates)
        outcome = result.outcome_updates[0] if result.outcome_updates else None
        if outcome is None:
            state = "outcome pending"
        else:
            state = "success" if outcome.success else outcome.category
        caption = f"{ctx.primitive} on {ctx.target_id}: {state}"
        peak_stamp: float | None = None
        summary = contact_summary(prepared.evidence.gripper, self._cfg.percepts)
        if summary is not None:
            peak_stamp = summary.peak_stamp
        if peak_stamp is None:
            peak_stamp = (prepared.before.stamp + prepared.after.stamp) / 2.0
        cameras = prepared.collage.cameras
        peak_camera = (
            self._cfg.analyzer.peak_camera
            if self._cfg.analyzer.peak_camera in cameras
            else prepared.before.camera
        )
        peak = nearest_frame(prepared.window.frames_of(peak_camera), peak_stamp)
        nodes = tuple(linked)
        return (
            KeyframeRequest(
                "interaction_before",
                prepared.before.camera,
                prepared.before.stamp,
                prepared.before.rgb,
                prepared.before.ref,
                nodes,
                ctx.primitive,
            ),
            KeyframeRequest(
                "interaction_after",
                prepared.after.camera,
                prepared.after.stamp,
                prepared.after.rgb,
                prepared.after.ref,
                nodes,
                ctx.primitive,
            ),
            KeyframeRequest(
                "interaction_peak",
                peak.camera,
                peak.stamp,
                peak.rgb,
                peak.ref,
                nodes,
                ctx.primitive,
                tuple(dict.fromkeys(labels)),
                caption,
            ),
        )
