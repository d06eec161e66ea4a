"""The propose-verify harness: every claim gets a verdict before anything reaches memory.

Verifiers are small predicates over generic percepts (gripper contact, measured fixture
motion, detections inside a fixture volume, node existence):

* ``opened`` / ``closed`` (``openable`` with ``is_opened``) needs measured fixture motion (the
  held hand's travel or the depth change in the fixture's region); without it the claim is
  deferred and re-checked when new evidence arrives. The one exception: a look into a fixture
  memory held open that found no depth at its back admits "closed" (its door was pushed to).
* ``locked`` needs the jaws closed on the handle, the hand held back from the commanded pull
  where the executor reported its command, and no motion in depth or of the hand.
* a missed grasp needs the absence of contact; an outcome that contradicts the evidence is
  corrected to the category the evidence supports. Where no mechanical predicate exists, an
  outcome is checked against the executor's own report and deferred when the cameras saw the
  target in too few frames.
* "fixture contains X" needs a detection of X inside the opened fixture's 3D box, and X must not
  be a fixture or the room's structure (a counter); "empty" needs none, where detections with
  those labels (the fixture's own parts, the slab on top of it) do not count.
* every cited id must exist; an unknown or misspelt id is rebound to the nearest node with
  the same label, or the claim is rejected.
* duplicates, and claims whose type a deterministic extractor owns, are rejected.

Every verdict kind can be switched off (``verifier.switched_off``) for ablations; its claims
then pass unchecked, with the reason saying so. Reasons name the signals and values that
decided them.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mimir_memory.graph import HAND_PARENT
from mimir_planner.reasoning.claims import (
    Claim,
    ContentClaim,
    ContentItem,
    ContentsUpdate,
    Decision,
    EmptyClaim,
    GroundingClaim,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    PropertyUpdate,
    Verdict,
)
from mimir_planner.reasoning.config import PerceptConfig, VerifierConfig, VocabularyConfig
from mimir_planner.reasoning.errors import ReasoningConfigError
from mimir_planner.reasoning.evidence import ClaimContext, Detection3D, Evidence
from mimir_planner.reasoning.percepts import (
    ContactSummary,
    contact_summary,
    contents_inside,
    detections_inside,
    label_matches,
    matching,
    moved,
    never_held,
    place_sightings,
)
from mimir_planner.reasoning.signals import signals_text
from mimir_planner.reasoning.world_view import Box3D, WorldView, moved_before

LOG = logging.getLogger(__name__)

_ID_SUFFIX = re.compile(r"[_\-]?\d+$")


@dataclass(frozen=True)
class _Check:
    decision: Decision
    reason: str
    refs: tuple[str, ...] = ()
    corrected: Claim | None = None


class EvidenceExtractor(Protocol):
    """A deterministic reader that owns a claim type and supplies those claims itself."""

    @property
    def name(self) -> str: ...

    def owns(self, claim: Claim) -> bool:
        """Whether model claims like this one are this extractor's to make."""
        ...

    def extract(self, ctx: ClaimContext, evidence: Evidence) -> list[Claim]:
        """Claims read directly from the evidence."""
        ...


class GraspHoldExtractor:
    """Owns ``pickable``: after a pick, jaws still closed on something mean it was lifted."""

    def __init__(self, percepts: PerceptConfig) -> None:
        self._percepts = percepts

    @property
    def name(self) -> str:
        return "grasp_hold"

    def owns(self, claim: Claim) -> bool:
        return (
            isinstance(claim, PropertyClaim)
            and claim.name == "pickable"
            and claim.source == "model"
        )

    def extract(self, ctx: ClaimContext, evidence: Evidence) -> list[Claim]:
        if ctx.intent != "pick":
            return []
        summary = contact_summary(evidence.gripper, self._percepts)
        if summary is None or not summary.held_at_end:
            return []
        return [
            PropertyClaim(
                object_id=ctx.target_id,
                name="pickable",
                new_value=True,
                confidence=0.95,
                reasoning=(
                    f"jaws stayed closed on an object {summary.end_opening_m:.3f} m wide "
                    "at the end of the pick"
                ),
                source=f"extractor:{self.name}",
            )
        ]


@dataclass
class PendingClaim:
    """A deferred claim waiting for evidence.

    ``reason`` is why it was last deferred; a re-check that defers it for the same reason (the
    new evidence did not bear on it) does not count against ``max_rechecks``.
    """

    claim: Claim
    ctx: ClaimContext
    evidence: Evidence
    rechecks: int = 0
    reason: str = ""


class PendingQueue:
    """Deferred claims, in arrival order."""

    def __init__(self) -> None:
        self._items: list[PendingClaim] = []

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> tuple[PendingClaim, ...]:
        """Snapshot of the queue."""
        return tuple(self._items)

    def add(self, item: PendingClaim) -> None:
        """Appends a deferred claim."""
        self._items.append(item)

    def take_all(self) -> list[PendingClaim]:
        """Removes and returns every pending claim."""
        items, self._items = self._items, []
        return items

    def keys(self) -> set[tuple[object, ...]]:
        """Duplicate keys of the pending claims."""
        return {p.claim.key() for p in self._items}


@dataclass(frozen=True)
class HarnessResult:
    """Verdicts of one evaluation and the memory updates built from the admitted claims."""

    verdicts: tuple[Verdict, ...]
    property_updates: tuple[PropertyUpdate, ...]
    contents_updates: tuple[ContentsUpdate, ...]
    outcome_updates: tuple[OutcomeUpdate, ...]

    @property
    def deferred(self) -> tuple[Verdict, ...]:
        """Claims held for re-checking."""
        return tuple(v for v in self.verdicts if v.decision is Decision.DEFER)

    @property
    def rejected(self) -> tuple[Verdict, ...]:
        """Claims discarded, with reasons."""
        return tuple(v for v in self.verdicts if v.decision is Decision.REJECT)

    @property
    def admitted(self) -> tuple[Verdict, ...]:
        """Claims that take effect (admitted or corrected)."""
        return tuple(
            v
            for v in self.verdicts
            if v.effective is not None and not isinstance(v.claim, GroundingClaim)
        )


def _refs_of_contact(summary: ContactSummary) -> tuple[str, ...]:
    if summary.peak_stamp is None:
        return ()
    return (f"gripper@{summary.peak_stamp:.3f}",)


def label_of_id(node_id: str) -> str:
    """Label part of a node id (``drawer_3`` -> ``drawer``)."""
    return _ID_SUFFIX.sub("", node_id).lower()


class Harness:
    """Applies verifiers to claims and keeps the pending (deferred) queue.

    Args:
        world: read access to memory.
        vocabulary: fixture labels, synonyms.
        percepts: evidence thresholds.
        config: harness settings.
        extractors: deterministic extractors; None builds those named in ``config``.
    """

    def __init__(
        self,
        world: WorldView,
        vocabulary: VocabularyConfig,
        percepts: PerceptConfig,
        config: VerifierConfig,
        extractors: Sequence[EvidenceExtractor] | None = None,
    ) -> None:
        self._world = world
        self._vocab = vocabulary
        self._percepts = percepts
        self._cfg = config
        if extractors is None:
            registry = {"grasp_hold": GraspHoldExtractor}
            unknown = [n for n in config.extractors if n not in registry]
            if unknown:
                raise ReasoningConfigError(f"unknown extractors {unknown}")
            extractors = [registry[n](percepts) for n in config.extractors]
        self._extractors = list(extractors)
        self.pending = PendingQueue()

    # ----------------------------------------------------------------- public API

    def evaluate(
        self, claims: Iterable[Claim], ctx: ClaimContext, evidence: Evidence
    ) -> HarnessResult:
        """Judges a batch of claims from one interaction and builds the admitted updates."""
        seen = self.pending.keys()
        judged: list[tuple[Verdict, ClaimContext]] = []
        for claim in claims:
            for verdict in self._judge(claim, ctx, evidence, seen):
                judged.append((verdict, ctx))
        for extractor in self._extractors:
            for claim in extractor.extract(ctx, evidence):
                for verdict in self._judge(claim, ctx, evidence, seen, extractor=extractor.name):
                    judged.append((verdict, ctx))
        for verdict, _ in judged:
            if verdict.decision is Decision.DEFER:
                self.pending.add(PendingClaim(verdict.claim, ctx, evidence, 0, verdict.reason))
            LOG.info(
                "verdict %s on %s (%s): %s",
                verdict.decision,
                type(verdict.claim).__name__,
                verdict.verifier,
                verdict.reason,
            )
        return self._result(judged)

    def recheck(self, new_evidence: Evidence) -> HarnessResult:
        """Re-judges every pending claim with the evidence that has arrived since.

        Claims still unsupported stay pending; after ``max_rechecks`` re-checks whose evidence
        bore on them (the reason for deferring changed) they are rejected.
        """
        judged: list[tuple[Verdict, ClaimContext]] = []
        for item in self.pending.take_all():
            # another action's gripper and motion say nothing about this claim's fixture
            concerned = {*item.claim.subject_ids, item.ctx.target_id}
            evidence = item.evidence.merged(new_evidence.about(concerned))
            verdicts = self._judge(item.claim, item.ctx, evidence, set())
            for judged_verdict in verdicts:
                verdict = judged_verdict
                if verdict.decision is Decision.DEFER and verdict.claim == item.claim:
                    rechecks = item.rechecks + (verdict.reason != item.reason)
                    if rechecks >= self._cfg.max_rechecks:
                        verdict = dataclasses.replace(
                            judged_verdict,
                            decision=Decision.REJECT,
                            reason=f"still unsupported after {rechecks} re-checks: "
                            + verdict.reason,
                        )
                    else:
                        self.pending.add(PendingClaim(item.claim, item.ctx, evidence, rechecks,
                                                      verdict.reason))
                judged.append((verdict, item.ctx))
        return self._result(judged)

    # --------------------------------------------------------------- judgement

    def _judge(
        self,
        claim: Claim,
        ctx: ClaimContext,
        evidence: Evidence,
        seen: set[tuple[object, ...]],
        extractor: str | None = None,
    ) -> list[Verdict]:
        iid = ctx.interaction_id
        off = set(self._cfg.switched_off)
        if claim.key() in seen and "dedup" not in off:
            return [
                Verdict(
                    claim, Decision.REJECT, "duplicate claim", verifier="dedup", interaction_id=iid
                )
            ]
        if extractor is None and "ownership" not in off:
            for ex in self._extractors:
                if ex.owns(claim):
                    return [
                        Verdict(
                            claim,
                            Decision.REJECT,
                            f"claim type owned by the deterministic extractor '{ex.name}'",
                            verifier="ownership",
                            interaction_id=iid,
                        )
                    ]
        verdicts: list[Verdict] = []
        grounded = claim
        for cited in () if "grounding" in off else claim.subject_ids:
            resolved, verdict = self._ground(cited, ctx)
            if verdict is not None:
                verdicts.append(verdict)
            if resolved is None:
                verdicts.append(
                    Verdict(
                        claim,
                        Decision.REJECT,
                        f"unknown id '{cited}'",
                        verifier="grounding",
                        interaction_id=iid,
                    )
                )
                return verdicts
            if resolved != cited:
                grounded = _rebind(grounded, cited, resolved)
        if grounded is not claim and grounded.key() in seen and "dedup" not in off:
            verdicts.append(
                Verdict(
                    claim,
                    Decision.REJECT,
                    "duplicate claim after rebinding",
                    verifier="dedup",
                    interaction_id=iid,
                )
            )
            return verdicts
        seen.add(grounded.key())
        if extractor is not None:
            check = _Check(
                Decision.ADMIT, f"read directly from evidence by '{extractor}'", evidence.refs
            )
            name = extractor
        else:
            check, name = self._verify(grounded, ctx, evidence)
            if name in off and check.decision is not Decision.ADMIT:
                check = _Check(Decision.ADMIT, f"verifier '{name}' switched off (it would "
                               f"have said {check.decision}: {check.reason})")
        if grounded is not claim and check.decision in (Decision.ADMIT, Decision.CORRECT):
            final = check.corrected or grounded
            check = _Check(Decision.CORRECT, "id rebound; " + check.reason, check.refs, final)
        elif grounded is not claim and check.decision is Decision.DEFER:
            claim = grounded
        verdicts.append(
            Verdict(
                claim,
                check.decision,
                check.reason,
                check.refs,
                name,
                check.corrected,
                iid,
            )
        )
        return verdicts

    def _ground(self, cited: str, ctx: ClaimContext) -> tuple[str | None, Verdict | None]:
        if self._world.has_node(cited):
            return cited, None
        label = label_of_id(cited)
        candidates = (
            self._world.nodes_near(ctx.target_position, self._cfg.rebind_radius_m, label=label)
            if label
            else []
        )
        claim = GroundingClaim(cited_id=cited, role=label or "unknown")
        if not candidates:
            return None, Verdict(
                claim,
                Decision.REJECT,
                f"no node '{cited}' and no '{label}' within {self._cfg.rebind_radius_m} m",
                verifier="grounding",
                interaction_id=ctx.interaction_id,
            )
        best = candidates[0].node_id
        return best, Verdict(
            claim,
            Decision.CORRECT,
            f"no node '{cited}'; rebound to nearest '{label}' node '{best}'",
            verifier="grounding",
            corrected=GroundingClaim(cited_id=best, role=label),
            interaction_id=ctx.interaction_id,
        )

    def _verify(self, claim: Claim, ctx: ClaimContext, ev: Evidence) -> tuple[_Check, str]:
        if isinstance(claim, PropertyClaim):
            return self._verify_property(claim, ctx, ev)
        if isinstance(claim, ContentClaim):
            return self._verify_content(claim, ctx, ev), "contains"
        if isinstance(claim, EmptyClaim):
            return self._verify_empty(claim, ctx, ev), "empty"
        if isinstance(claim, OutcomeClaim):
            return self._verify_outcome(claim, ctx, ev), "outcome"
        return _Check(Decision.ADMIT, "id exists in memory"), "grounding"

    def _verify_property(
        self, claim: PropertyClaim, ctx: ClaimContext, ev: Evidence
    ) -> tuple[_Check, str]:
        if claim.object_id != ctx.target_id:
            return _Check(
                Decision.REJECT,
                f"property updates apply only to the action's target '{ctx.target_id}'",
            ), "target"
        state_change = (claim.name == "openable" and claim.is_opened is not None) or (
            claim.name == "locked" and claim.new_value is False
        )
        locked = (claim.name == "locked" and claim.new_value is True) or (
            claim.name == "openable" and claim.new_value is False
        )
        if state_change and claim.is_opened is False and ctx.intent == "inspection" \
                and claim.object_id in ev.found_shut:
            return _Check(Decision.ADMIT, f"no depth reached the back of '{claim.object_id}' "
                          "in the look: it stands closed", ev.refs), "opened"
        if state_change and ctx.intent == "open" and (
                unheld := self._open_without_grip(claim.object_id, ev)) is not None:
            return unheld, "opened"
        if state_change:
            check = self._check_motion(claim.object_id, ev)
            held = self._held_against_unlocked(claim, ctx, ev, check)
            return (held, "locked") if held is not None else (check, "opened")
        if locked:
            check = self._check_locked(claim.object_id, ev)
            return (self._moved_against_locked(claim, ctx, ev, check)
                    or self._gave_way_against_locked(ctx, check) or check), "locked"
        if claim.name == "pickable" and claim.new_value is True:
            summary = contact_summary(ev.gripper, self._percepts)
            if summary is None:
                return _Check(Decision.DEFER, "no gripper samples to confirm a lift"), "lifted"
            if summary.held_at_end:
                return _Check(
                    Decision.ADMIT,
                    "jaws hold an object after the action",
                    _refs_of_contact(summary),
                ), "lifted"
            return _Check(Decision.REJECT, "jaws hold nothing after the action"), "lifted"
        if claim.confidence >= self._cfg.min_confidence:
            return _Check(
                Decision.ADMIT,
                f"no mechanical predicate for '{claim.name}'; confidence "
                f"{claim.confidence:.2f} meets {self._cfg.min_confidence:.2f}",
            ), "confidence"
        return _Check(
            Decision.REJECT,
            f"confidence {claim.confidence:.2f} below {self._cfg.min_confidence:.2f}",
        ), "confidence"

    def _held_against_unlocked(self, claim: PropertyClaim, ctx: ClaimContext, ev: Evidence,
                               check: _Check) -> _Check | None:
        """Said to be unlocked, but the pull held the handle and nothing gave way: where the
        lock check itself admits a lock, the claim corrected to locked; else None."""
        if claim.name != "locked" or check.decision is not Decision.DEFER \
                or ctx.intent not in ("open", "close"):
            return None
        if moved(ev.displacements.get(claim.object_id), self._percepts) is not False \
                and not self._depth_against_the_hand(claim.object_id, ev):
            return None
        lock = self._check_locked(claim.object_id, ev)
        if lock.decision is not Decision.ADMIT:
            return None
        return _Check(Decision.CORRECT, lock.reason, lock.refs, dataclasses.replace(
            claim, new_value=True, reasoning=f"the fixture held in the {ctx.intent}"))

    def _moved_against_locked(self, claim: PropertyClaim, ctx: ClaimContext, ev: Evidence,
                              check: _Check) -> _Check | None:
        """Said to be locked (or not openable), but the open or close moved the fixture: the
        claim corrected to what the action showed (it gives way, and stands open after an open,
        closed after a close); else None."""
        if check.decision is not Decision.REJECT or ctx.intent not in ("open", "close") \
                or not moved(ev.displacements.get(claim.object_id), self._percepts):
            return None
        return _Check(Decision.CORRECT, check.reason, check.refs, PropertyClaim(
            claim.object_id, "openable", True, claim.confidence,
            f"the fixture moved in the {ctx.intent}", claim.old_value,
            is_opened=ctx.intent == "open", source=claim.source))

    def _gave_way_against_locked(self, ctx: ClaimContext, check: _Check) -> _Check | None:
        """Said to be locked, but the executor's own outcome of the open or close says the pull
        went past where a held part stops it: refused; else None."""
        if check.decision is Decision.REJECT or ctx.intent not in ("open", "close") \
                or ctx.reported_outcome not in self._cfg.gave_way_outcomes:
            return None
        return _Check(Decision.REJECT, f"the executor reported {ctx.reported_outcome} "
                      f"({ctx.reported_message or 'no message'}): the part gave way, so it is "
                      "not locked", check.refs)

    def _depth_against_the_hand(self, fixture_id: str, ev: Evidence) -> bool:
        """Whether the fixture's motion is a depth change the held hand contradicts: the jaws
        held the part, the hand was held back from its pull by at least ``held_back_m`` and its
        own travel stayed below ``open_hand_travel_m``. A part that gives way moves with the
        hand, so such a change is likelier the arm in front of the fixture than the fixture."""
        measure = ev.displacements.get(fixture_id)
        pull = ev.pull
        return (measure is not None and measure.source == "depth" and pull is not None
                and pull.held_back_m >= self._percepts.held_back_m
                and pull.achieved_m < self._percepts.open_hand_travel_m)

    def _held_back_against_depth(self, fixture_id: str, ev: Evidence) -> _Check | None:
        """A depth change the held hand contradicts, said of an open: held for more."""
        measure = ev.displacements.get(fixture_id)
        if measure is None or not self._depth_against_the_hand(fixture_id, ev):
            return None
        return _Check(Decision.DEFER, "depth changed but the hand was held back from its pull, "
                      "so the change may be the arm, not the door; "
                      + signals_text(fixture_id, ev, self._percepts), measure.refs)

    def _open_without_grip(self, fixture_id: str, ev: Evidence) -> _Check | None:
        """A depth change in an open whose jaws never held anything: the arm moving in front
        of the fixture, not its door (an open pulls the handle it grips), so held for more;
        None where the jaws held something, no gripper was recorded or the hand measured it."""
        measure = ev.displacements.get(fixture_id)
        summary = contact_summary(ev.gripper, self._percepts)
        if measure is None or measure.source != "depth" or summary is None or summary.contact:
            return None
        return _Check(Decision.DEFER, f"depth changed {measure.magnitude:.3f} m but the jaws "
                      "never held the handle, so the change is the arm, not the door; "
                      + signals_text(fixture_id, ev, self._percepts), measure.refs)

    def _check_motion(self, fixture_id: str, ev: Evidence) -> _Check:
        measure = ev.displacements.get(fixture_id)
        state = moved(measure, self._percepts)
        if measure is None or state is None:
            return _Check(Decision.DEFER, f"no measured motion of '{fixture_id}' yet")
        if state and (conflict := self._held_back_against_depth(fixture_id, ev)) is not None:
            return conflict
        if not state:
            return _Check(
                Decision.DEFER,
                f"measured motion {measure.magnitude:.3f} {measure.unit} ({measure.source}) "
                "is below the threshold",
                measure.refs,
            )
        return _Check(
            Decision.ADMIT,
            f"fixture moved {measure.magnitude:.3f} {measure.unit} ({measure.source}); "
            + signals_text(fixture_id, ev, self._percepts),
            measure.refs,
        )

    def _check_locked(self, fixture_id: str, ev: Evidence) -> _Check:
        """Whether the evidence shows a lock; a fixture memory saw open or close before is not
        called locked on a held pull (deferred): a lock that came later is far rarer than a
        door jammed by something in its way, and a lock written in error hides the fixture from
        every later search."""
        check = self._held_pull(fixture_id, ev)
        node = self._world.node(fixture_id)
        if check.decision is Decision.ADMIT and node is not None and moved_before(node):
            return _Check(Decision.DEFER, f"'{fixture_id}' opened before, so a held pull is "
                          "not called a lock (something may block it): " + check.reason,
                          check.refs)
        return check

    def _held_pull(self, fixture_id: str, ev: Evidence) -> _Check:
        """Whether the jaws held the handle, the pull was strong and held back, and nothing
        moved: the mechanical signs of a lock."""
        summary = contact_summary(ev.gripper, self._percepts)
        if summary is None:
            return _Check(Decision.DEFER, "no gripper samples to confirm contact")
        if not summary.contact:
            return _Check(
                Decision.REJECT,
                "the gripper never engaged the handle: a missed grasp, not a locked fixture",
            )
        if not summary.pull_ok:
            return _Check(
                Decision.REJECT,
                f"pull force {summary.max_pull_force_n:.1f} N is too weak to call it locked",
                _refs_of_contact(summary),
            )
        measure = ev.displacements.get(fixture_id)
        state = moved(measure, self._percepts)
        signals = signals_text(fixture_id, ev, self._percepts)
        if measure is None or state is None:
            return _Check(Decision.DEFER, f"contact seen but no measured motion of "
                          f"'{fixture_id}'; {signals}")
        refs = _refs_of_contact(summary) + measure.refs
        pull = ev.pull
        if state and pull is not None and self._depth_against_the_hand(fixture_id, ev):
            # the hand decides: it held the part and the part did not let it through
            return _Check(
                Decision.ADMIT,
                f"locked: the depth change of {measure.magnitude:.3f} m is the arm, not the "
                f"part: the hand held it and was held back {pull.held_back_m:.3f} m of "
                f"{pull.commanded_m:.3f} m commanded; " + signals,
                refs + pull.refs,
            )
        if state:
            return _Check(
                Decision.REJECT,
                f"fixture moved {measure.magnitude:.3f} {measure.unit}: not locked; {signals}",
                refs,
            )
        if pull is not None and pull.held_back_m < self._percepts.held_back_m:
            return _Check(
                Decision.DEFER,
                f"the hand was not held back ({pull.held_back_m:.3f} m short of the command): "
                f"the pull was not attempted in full; {signals}",
                refs + pull.refs,
            )
        return _Check(Decision.ADMIT, "locked: " + signals,
                      refs + (pull.refs if pull is not None else ()))

    def _observed_volume(self, fixture_id: str, ev: Evidence) -> Box3D | _Check:
        """The fixture's 3D box when its interior was observed open, else the check that stops
        a claim about its contents."""
        node = self._world.node(fixture_id)
        if node is None:
            return _Check(Decision.REJECT, f"unknown fixture '{fixture_id}'")
        if node.label not in self._vocab.fixture_labels:
            return _Check(Decision.REJECT, f"'{fixture_id}' ({node.label}) is not a fixture")
        if node.bbox is None:
            return _Check(Decision.REJECT, f"'{fixture_id}' has no 3D volume to check against")
        if fixture_id not in ev.observed_interiors:
            return _Check(Decision.DEFER, f"the interior of '{fixture_id}' was not observed open")
        return node.bbox

    def _looked(self, fixture_id: str, ctx: ClaimContext, ev: Evidence) -> _Check | None:
        """None when the cameras looked well enough to call something absent, else the check
        that holds the claim: the look failed, or the fixture was hardly in view."""
        if fixture_id != ctx.target_id:
            return None  # seen in passing: detections decide, nothing is called absent here
        if ctx.intent == "inspection" and ctx.reported_success is False:
            return _Check(Decision.DEFER, f"the look at '{fixture_id}' failed "
                          f"({ctx.reported_message or 'no reason given'}): absence is not shown")
        if ctx.intent == "inspection" and (
                ctx.reported_outcome in self._cfg.partial_look_outcomes):
            return _Check(Decision.DEFER, f"the look at '{fixture_id}' was partial "
                          f"({ctx.reported_message or ctx.reported_outcome}): absence is not "
                          "shown")
        need = self._percepts.min_visible_frames
        if ev.visible_frames < need:
            return _Check(Decision.DEFER, f"'{fixture_id}' was in view in {ev.visible_frames} "
                          f"frame(s) (need {need}): absence is not shown")
        return None

    def _standing(self, hits: Sequence[Detection3D],
                  inside: Sequence[Detection3D]) -> list[Detection3D]:
        """The hits that hold their spot: of the contents' detections within
        ``content_spot_m`` of one, at least ``content_spot_share`` carry its name (fixture
        labels do not vote). One distance matrix for all hits."""
        if not hits:
            return []
        cfg, parts = self._percepts, self._vocab.never_contents
        voters = [d for d in inside if d.label not in parts]
        where = np.stack([d.position for d in voters])
        near = np.linalg.norm(np.stack([d.position for d in hits])[:, None, :] - where[None],
                              axis=2) <= cfg.content_spot_m
        said = label_matches(hits[0].label, voters, self._vocab.synonyms)
        same = np.array([said[d.label] for d in voters])
        votes = (near & same[None]).sum(axis=1)
        return [d for d, v, n in zip(hits, votes, near.sum(axis=1), strict=True)
                if v >= cfg.content_spot_share * n]

    def _verify_content(self, claim: ContentClaim, ctx: ClaimContext, ev: Evidence) -> _Check:
        if never_held(claim.name, self._vocab):
            return _Check(Decision.REJECT, f"'{claim.name}' is a fixture or part of the room, "
                          f"not something '{claim.fixture_id}' holds")
        box = self._observed_volume(claim.fixture_id, ev)
        if isinstance(box, _Check):
            return box
        inside = detections_inside(ev.detections, box, self._percepts,
                                   ev.detection_positions)
        hits = matching(claim.name, inside, self._vocab.synonyms)
        standing = self._standing(hits, inside)
        # more than content_spot_share of the name's detections must hold their spot:
        # re-checks add detections from other views, and now and then a stray label lands
        # apart from its object's other detections, where nothing outvotes it
        need = max(self._percepts.content_min_detections,
                   math.floor(self._percepts.content_spot_share * len(hits)) + 1)
        if hits and len(standing) < need:
            return _Check(
                Decision.DEFER,
                f"{len(standing)} of {len(hits)} detection(s) of '{claim.name}' inside "
                f"'{claim.fixture_id}' hold their spot (need {need}; the rest are outvoted by "
                "other labels where they lie: a look-alike confusion)",
                tuple(d.ref for d in hits),
            )
        hits = standing
        if not hits:
            held = self._looked(claim.fixture_id, ctx, ev)
            if held is not None:
                return held
            return _Check(
                Decision.REJECT,
                f"no detection of '{claim.name}' inside '{claim.fixture_id}'",
                tuple(d.ref for d in inside),
            )
        return _Check(
            Decision.ADMIT,
            f"{len(hits)} detection(s) of '{hits[0].label}' inside '{claim.fixture_id}'",
            tuple(d.ref for d in hits),
        )

    def _verify_empty(self, claim: EmptyClaim, ctx: ClaimContext, ev: Evidence) -> _Check:
        box = self._observed_volume(claim.fixture_id, ev)
        if isinstance(box, _Check):
            return box
        inside = contents_inside(ev.detections, box, self._percepts, self._vocab,
                                 ev.detection_positions)
        if inside:
            labels = sorted({d.label for d in inside})
            return _Check(
                Decision.REJECT,
                f"detections inside '{claim.fixture_id}' contradict empty: {labels}",
                tuple(d.ref for d in inside),
            )
        if claim.fixture_id != ctx.target_id:
            return _Check(Decision.DEFER, f"'{claim.fixture_id}' was not the fixture looked at")
        held = self._looked(claim.fixture_id, ctx, ev)
        if held is not None:
            return held
        return _Check(Decision.ADMIT, f"interior observed in {ev.visible_frames} frame(s) with "
                      "no detection inside", ev.refs)

    def _verify_outcome(self, claim: OutcomeClaim, ctx: ClaimContext, ev: Evidence) -> _Check:
        if ctx.intent in ("open", "close"):
            return self._outcome_of_fixture_action(claim, ev, ctx)
        if ctx.intent == "inspection" and self._is_fixture(ctx.target_id):
            return self._outcome_of_inspection(claim, ctx, ev)
        if ctx.intent == "pick":
            summary = contact_summary(ev.gripper, self._percepts)
            if summary is None:
                return _Check(Decision.DEFER, "no gripper samples to judge the pick")
            refs = _refs_of_contact(summary)
            if claim.success and not summary.held_at_end:
                return _Check(
                    Decision.CORRECT,
                    "jaws hold nothing after the pick",
                    refs,
                    dataclasses.replace(
                        claim,
                        success=False,
                        category="missed_grasp",
                        failure_reason="missed grasp: the jaws hold nothing after the pick",
                    ),
                )
            return _Check(Decision.ADMIT, "consistent with the gripper state", refs)
        if ctx.intent == "place":
            return self._outcome_of_place(claim, ctx, ev)
        return self._outcome_by_report(claim, ctx, ev)

    def _outcome_of_place(self, claim: OutcomeClaim, ctx: ClaimContext, ev: Evidence) -> _Check:
        """A place claimed done is judged by where the cameras last saw what the hand held
        after the jaws opened: standing near where they let go, or fallen below it. Unseen
        (or claimed failed), the executor's report and the views of the destination decide,
        as for an intent without a predicate."""
        held = self._world.children_of(HAND_PARENT)
        sightings = place_sightings(ev.gripper, ev.detections, [n.label for n in held],
                                    self._vocab.synonyms, self._percepts)
        if not claim.success or sightings is None or not (sightings.resting
                                                          or sightings.fallen):
            return self._outcome_by_report(claim, ctx, ev)
        newest = max((*sightings.resting, *sightings.fallen), key=lambda d: d.stamp)
        drop = float(sightings.release[2] - newest.position[2])
        if any(d is newest for d in sightings.resting):
            return _Check(Decision.ADMIT,
                          f"'{newest.label}' seen standing {drop:.2f} m below where the jaws "
                          f"let go ({len(sightings.resting)} detection(s))",
                          tuple(d.ref for d in sightings.resting))
        why = (f"'{newest.label}' seen {drop:.2f} m below where the jaws let go: it fell off "
               f"'{ctx.target_id}'")
        return _Check(Decision.CORRECT, why, (newest.ref,), dataclasses.replace(
            claim, success=False, category="other", failure_reason=why))

    def _is_fixture(self, node_id: str) -> bool:
        node = self._world.node(node_id)
        return node is not None and node.label in self._vocab.fixture_labels

    def _outcome_of_inspection(self, claim: OutcomeClaim, ctx: ClaimContext,
                               ev: Evidence) -> _Check:
        """Looking into a fixture succeeds only where its inside was in view."""
        if ctx.target_id in ev.observed_interiors:
            return self._outcome_by_report(claim, ctx, ev)
        why = (f"interior not observed: '{ctx.target_id}' stands closed (no depth reached its "
               "back)" if ctx.target_id in ev.found_shut else
               f"interior not observed: '{ctx.target_id}' was closed (or not known open)")
        if not claim.success:
            return _Check(Decision.ADMIT, why)
        return _Check(Decision.CORRECT, why, (), dataclasses.replace(
            claim, success=False, category="other", failure_reason=why))

    def _outcome_by_report(self, claim: OutcomeClaim, ctx: ClaimContext, ev: Evidence) -> _Check:
        """An outcome no mechanical predicate decides: the executor's report, then the views."""
        if claim.success and ctx.reported_success is False:
            why = f"the executor reported a failure: {ctx.reported_message or 'no reason'}"
            return _Check(
                Decision.CORRECT,
                why,
                (),
                dataclasses.replace(claim, success=False, category="other", failure_reason=why),
            )
        need = self._percepts.min_visible_frames
        if claim.success and ev.visible_frames < need:
            return _Check(
                Decision.DEFER,
                f"the cameras saw '{ctx.target_id}' in {ev.visible_frames} frame(s) "
                f"(need {need}) to confirm the {ctx.intent}",
            )
        return _Check(
            Decision.ADMIT,
            f"no mechanical predicate for intent '{ctx.intent}'; nothing the executor "
            f"reported contradicts it and the target was in view in {ev.visible_frames} frame(s)",
            ev.refs,
        )

    def _outcome_of_fixture_action(self, claim: OutcomeClaim, ev: Evidence,
                                   ctx: ClaimContext) -> _Check:
        intent = ctx.intent
        measure = ev.displacements.get(claim.target_id)
        state = moved(measure, self._percepts)
        if state and intent == "open" and \
                self._open_without_grip(claim.target_id, ev) is not None:
            state = False  # the arm passed in front: judged as a grasp that held nothing
        summary = contact_summary(ev.gripper, self._percepts)
        refs = (measure.refs if measure is not None else ()) + (
            _refs_of_contact(summary) if summary is not None else ()
        )
        signals = signals_text(claim.target_id, ev, self._percepts)
        if state is True and (conflict := self._held_back_against_depth(
                claim.target_id, ev)) is not None:
            return conflict
        if state is True and ctx.reported_success is False:
            # motion says the part gave way; the executor says its pull ended before the path
            # was mostly done (the fingers slipped, or the part stuck part way): the part may
            # stand ajar or open, and only a look settles which
            report = f"{ctx.reported_outcome or 'a failure'} " \
                f"({ctx.reported_message or 'no message'})"
            return _Check(Decision.DEFER, f"the fixture moved, but the executor reported "
                          f"{report}: whether the {intent} took effect is not settled by motion "
                          f"alone; {signals}", refs)
        if state is True:
            if claim.success:
                return _Check(Decision.ADMIT, f"the fixture moved as intended; {signals}", refs)
            return _Check(
                Decision.CORRECT,
                f"the fixture moved, so the action succeeded; {signals}",
                refs,
                dataclasses.replace(claim, success=True, category="success", failure_reason=None),
            )
        if summary is None:
            return _Check(Decision.DEFER, "no gripper samples to judge the attempt")
        if not summary.contact:
            found = "missed_grasp"
            why = "missed grasp: the gripper never engaged the handle"
        elif state is None:
            return _Check(Decision.DEFER, "contact seen but no measured motion yet")
        else:
            found = "fixture_locked"
            why = "locked or stuck: the gripper held the handle and the fixture did not move"
        if claim.success and state is None:
            return _Check(Decision.DEFER, "no measured motion to confirm success")
        if not claim.success and claim.category == found:
            return _Check(Decision.ADMIT, f"{why}; {signals}", refs)
        return _Check(
            Decision.CORRECT,
            f"evidence says {found}, the claim said "
            f"{'success' if claim.success else claim.category}; {signals}",
            refs,
            dataclasses.replace(claim, success=False, category=found, failure_reason=why),
        )

    # ------------------------------------------------------------------ updates

    def _result(self, judged: list[tuple[Verdict, ClaimContext]]) -> HarnessResult:
        props: list[PropertyUpdate] = []
        outcomes: list[OutcomeUpdate] = []
        contents: dict[str, list[tuple[Verdict, ClaimContext]]] = {}
        for verdict, ctx in judged:
            effective = verdict.effective
            if isinstance(verdict.claim, ContentClaim | EmptyClaim) or isinstance(
                effective, ContentClaim | EmptyClaim
            ):
                fixture = (
                    effective.fixture_id
                    if isinstance(effective, ContentClaim | EmptyClaim)
                    else verdict.claim.subject_ids[0]
                )
                contents.setdefault(fixture, []).append((verdict, ctx))
            elif isinstance(effective, PropertyClaim):
                props.append(PropertyUpdate.admitted(effective, verdict))
            elif isinstance(effective, OutcomeClaim):
                outcomes.append(OutcomeUpdate.admitted(effective, verdict))
        updates = [u for f, group in contents.items() if (u := _contents_update(f, group))]
        return HarnessResult(
            verdicts=tuple(v for v, _ in judged),
            property_updates=tuple(props),
            contents_updates=tuple(updates),
            outcome_updates=tuple(outcomes),
        )


def _contents_update(
    fixture_id: str, group: list[tuple[Verdict, ClaimContext]]
) -> ContentsUpdate | None:
    items: list[ContentItem] = []
    empty: EmptyClaim | None = None
    reasons: list[str] = []
    refs: list[str] = []
    for verdict, _ in group:
        effective = verdict.effective
        if isinstance(effective, ContentClaim):
            items.append(ContentItem(effective.name, effective.description, verdict.evidence_refs))
            reasons.append(effective.reasoning)
        elif isinstance(effective, EmptyClaim):
            empty = effective
            reasons.append(effective.reasoning)
        else:
            continue
        refs.extend(verdict.evidence_refs)
    if not items and empty is None:
        return None
    return ContentsUpdate(
        fixture_id=fixture_id,
        contents=tuple(items),
        is_empty=not items,
        reasoning=next((r for r in reasons if r), ""),
        source_action=group[0][1].primitive,
        verdicts=tuple(v for v, _ in group),
        evidence_refs=tuple(dict.fromkeys(refs)),
    )


def _rebind(claim: Claim, old: str, new: str) -> Claim:
    if isinstance(claim, PropertyClaim) and claim.object_id == old:
        return dataclasses.replace(claim, object_id=new)
    if isinstance(claim, ContentClaim | EmptyClaim) and claim.fixture_id == old:
        return dataclasses.replace(claim, fixture_id=new)
    if isinstance(claim, OutcomeClaim) and claim.target_id == old:
        return dataclasses.replace(claim, target_id=new)
    if isinstance(claim, GroundingClaim) and claim.cited_id == old:
        return dataclasses.replace(claim, cited_id=new)
    return claim
