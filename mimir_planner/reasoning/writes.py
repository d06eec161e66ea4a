"""The analyzer's write planning: which memory updates the verifier's verdicts lead to.

:func:`plan_writes` turns a :class:`~mimir_planner.reasoning.harness.HarnessResult` into one
:class:`PlannedWrite` per verdict, each holding the :class:`~mimir_memory.updates.NodeUpdate`
to apply (or the reason nothing is written). Admitted and corrected claims are written in their
effective form; deferred and rejected ones as proposed, with their verdict, so that the event
log keeps them without changing the graph. The node that sends the updates and the memory core
that applies them share this one decision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mimir_memory.errors import InvalidValueError
from mimir_memory.events import Source
from mimir_memory.events import Verdict as MemoryVerdict
from mimir_memory.updates import (
    ContentEntry,
    EvidenceLink,
    NodeUpdate,
    PropertyWrite,
    TaskRecordEntry,
)
from mimir_planner.reasoning.claims import (
    Claim,
    ContentClaim,
    ContentsUpdate,
    Decision,
    EmptyClaim,
    GroundingClaim,
    OutcomeClaim,
    PropertyClaim,
    Verdict,
)
from mimir_planner.reasoning.harness import HarnessResult


@dataclass(frozen=True)
class WriteContext:
    """What every memory write of one analysis (or re-check) shares.

    Attributes:
        interaction_id: id of the interaction being analysed (evidence and event ids).
        primitive: primitive of the interaction.
        task: instruction the primitive served.
        stamp: end of the action window, s.
        keyframe_ids: keyframes saved for the interaction.
        frame_keyframes: evidence reference of a frame -> keyframe id it was saved as.
        detection_refs: references that name detections.
        known: whether a node id exists in memory (writes to unknown ids are not sent).
        event_prefix: prefix of the caller-chosen update ids (replay-safe).
    """

    interaction_id: str
    primitive: str
    task: str
    stamp: float
    keyframe_ids: tuple[str, ...]
    frame_keyframes: dict[str, str]
    detection_refs: frozenset[str]
    known: Callable[[str], bool]
    event_prefix: str


@dataclass
class PlannedWrite:
    """One node update and the verdicts it records (``update`` None: nothing is written)."""

    verdicts: list[Verdict]
    update: NodeUpdate | None
    subject: str
    note: str = ""


def _note(verdict: Verdict) -> str:
    return f"{verdict.decision} by {verdict.verifier or 'harness'}: {verdict.reason}"


def _reasoning(text: str, verdict: Verdict) -> str:
    return f"{text} | {_note(verdict)}" if text else _note(verdict)


def evidence_links(
    refs: Iterable[str], ctx: WriteContext, origin: str = ""
) -> tuple[EvidenceLink, ...]:
    """Evidence of a write: the interaction, its keyframes, detections and robot states.

    ``origin`` is the interaction a re-checked claim was made in. Frame references that were
    not saved as keyframes are left out (memory has nothing to point at).
    """
    out = [EvidenceLink("interaction", ctx.interaction_id)]
    if origin and origin != ctx.interaction_id:
        out.append(EvidenceLink("interaction", origin, "claim made here"))
    seen: set[tuple[str, str]] = set()
    for key in ctx.keyframe_ids:
        seen.add(("keyframe", key))
        out.append(EvidenceLink("keyframe", key))
    for ref in refs:
        if ref in ctx.detection_refs:
            item = ("detection", ref)
        elif ref.startswith(("gripper@", "hand:")):
            item = ("robot_state", ref)
        elif ref in ctx.frame_keyframes:
            item = ("keyframe", ctx.frame_keyframes[ref])
        else:
            continue
        if item not in seen:
            seen.add(item)
            out.append(EvidenceLink(*item))
    return tuple(out)


def _property_writes(claim: PropertyClaim, reasoning: str) -> tuple[PropertyWrite, ...]:
    confidence = float(min(max(claim.confidence, 0.0), 1.0))
    is_opened = (bool(claim.is_opened) if claim.name == "openable"
                 and claim.is_opened is not None else None)
    return (PropertyWrite(claim.name, claim.new_value, confidence, "interaction", reasoning,
                          is_opened),)


def _update(node_id: str, verdict: Verdict, links: tuple[EvidenceLink, ...], *,
            properties: tuple[PropertyWrite, ...] = (),
            contents: tuple[ContentEntry, ...] | None = None, contents_source_action: str = "",
            task_record: TaskRecordEntry | None = None) -> NodeUpdate:
    return NodeUpdate(node_id=node_id, source=Source.INTERACTION, evidence=links,
                      verdict=MemoryVerdict(str(verdict.decision)), verdict_reason=_note(verdict),
                      properties=properties, contents=contents,
                      contents_source_action=contents_source_action, task_record=task_record)


def _claim_update(claim: Claim, verdict: Verdict,
                  ctx: WriteContext) -> tuple[str, NodeUpdate | None]:
    """(subject id, update) recording one claim with the verdict's decision."""
    links = evidence_links(verdict.evidence_refs, ctx, verdict.interaction_id)
    if isinstance(claim, PropertyClaim) and claim.name == "is_opened":
        # memory keeps the open state on ``openable``; a fixture that opens is openable
        if not isinstance(claim.new_value, bool):
            return claim.object_id, None
        claim = dataclasses.replace(claim, name="openable", new_value=True,
                                    is_opened=claim.new_value)
    if isinstance(claim, PropertyClaim):
        return claim.object_id, _update(
            claim.object_id, verdict, links,
            properties=_property_writes(claim, _reasoning(claim.reasoning, verdict)))
    if isinstance(claim, ContentClaim | EmptyClaim):
        contents: tuple[ContentEntry, ...] = ()
        if isinstance(claim, ContentClaim):
            contents = (ContentEntry(claim.name, claim.description,
                                     reasoning=_reasoning(claim.reasoning, verdict)),)
        return claim.fixture_id, _update(claim.fixture_id, verdict, links, contents=contents,
                                         contents_source_action=ctx.primitive)
    if isinstance(claim, OutcomeClaim):
        record = TaskRecordEntry(
            task=ctx.task or claim.primitive,
            primitive=claim.primitive,
            success=bool(claim.success),
            failure_reason=claim.failure_reason or "",
            interaction_id=verdict.interaction_id or ctx.interaction_id,
            stamp=max(ctx.stamp, 0.0),
        )
        return claim.target_id, _update(claim.target_id, verdict, links, task_record=record)
    return claim.cited_id, None


def _contents_update(update: ContentsUpdate, ctx: WriteContext) -> NodeUpdate:
    effective = [v for v in update.verdicts if v.effective is not None]
    decision = (Decision.CORRECT if any(v.decision is Decision.CORRECT for v in effective)
                else Decision.ADMIT)
    reason = "; ".join(f"{v.verifier}: {v.reason}" for v in effective)
    per_item = [v for v in effective if isinstance(v.effective, ContentClaim)]
    items = []
    for index, item in enumerate(update.contents):
        note = _reasoning(update.reasoning, per_item[index]) if index < len(per_item) else (
            update.reasoning)
        items.append(ContentEntry(item.name, item.description, reasoning=note))
    origin = effective[0].interaction_id if effective else ""
    return NodeUpdate(
        node_id=update.fixture_id,
        source=Source.INTERACTION,
        evidence=evidence_links(update.evidence_refs, ctx, origin),
        verdict=MemoryVerdict(str(decision)),
        verdict_reason=f"{decision}: {reason}" if reason else str(decision),
        contents=tuple(items),
        contents_source_action=update.source_action,
    )


def plan_writes(result: HarnessResult, ctx: WriteContext, skip_deferred: bool = False
                ) -> list[PlannedWrite]:
    """One write per verdict (the admitted contents of a fixture share one write).

    Grounding verdicts and claims about ids that memory does not hold are not written (they
    are answered to the caller only); each written update gets the id
    ``<event_prefix>:<index of the plan>``.

    Args:
        result: the harness verdicts and admitted updates.
        ctx: shared write context.
        skip_deferred: leave out verdicts that are still deferred (re-checks).
    """
    contents = {u.fixture_id: u for u in result.contents_updates}
    written_contents: dict[str, PlannedWrite] = {}
    plans: list[PlannedWrite] = []
    for verdict in result.verdicts:
        if skip_deferred and verdict.decision is Decision.DEFER:
            continue
        claim = verdict.effective or verdict.claim
        if isinstance(verdict.claim, GroundingClaim):
            plans.append(PlannedWrite([verdict], None, verdict.claim.cited_id,
                                      "grounding verdicts are reported, not written"))
            continue
        effective = verdict.effective
        if isinstance(effective, ContentClaim | EmptyClaim) and effective.fixture_id in contents:
            fixture = effective.fixture_id
            if fixture in written_contents:
                written_contents[fixture].verdicts.append(verdict)
                continue
            plan = PlannedWrite([verdict], _contents_update(contents[fixture], ctx), fixture)
            if not ctx.known(fixture):
                plan.update, plan.note = None, f"'{fixture}' is not in memory"
            written_contents[fixture] = plan
            plans.append(plan)
            continue
        try:
            subject, update = _claim_update(claim, verdict, ctx)
        except InvalidValueError as err:
            plans.append(PlannedWrite([verdict], None, claim.subject_ids[0],
                                      f"no valid memory update: {err}"))
            continue
        if update is None and isinstance(claim, PropertyClaim):
            plans.append(PlannedWrite([verdict], None, subject,
                                      f"'{claim.name}' = {claim.new_value!r} has no memory form"))
            continue
        if update is not None and not ctx.known(subject):
            plans.append(PlannedWrite([verdict], None, subject, f"'{subject}' is not in memory"))
            continue
        plans.append(PlannedWrite([verdict], update, subject))
    for index, plan in enumerate(plans):
        if plan.update is not None:
            plan.update = dataclasses.replace(plan.update,
                                              update_id=f"{ctx.event_prefix}:{index}")
    return plans


_KIND_OF_CLAIM = {
    PropertyClaim: "property_set",
    ContentClaim: "contents_set",
    EmptyClaim: "contents_set",
    OutcomeClaim: "task_outcome_recorded",
    GroundingClaim: "grounding",
}


def event_kind(claim: Claim) -> str:
    """Memory event kind a claim would be logged as (``claim`` when it has none)."""
    return _KIND_OF_CLAIM.get(type(claim), "claim")


def unwritten_record(verdict: Verdict, note: str) -> dict[str, object]:
    """The log record of a verdict that was not written, with why (``not_written``)."""
    record = verdict.to_log()
    if note:
        record["not_written"] = note
    return record


def outcome_answer(result: HarnessResult) -> tuple[bool, str]:
    """(task success, failure reason) that an analysis answers its caller."""
    outcome = result.outcome_updates[0] if result.outcome_updates else None
    if outcome is not None:
        return bool(outcome.success), "" if outcome.success else (
            outcome.failure_reason or outcome.category)
    pending = next((v for v in result.verdicts if isinstance(v.claim, OutcomeClaim)), None)
    return False, ("outcome not verified: " + pending.reason if pending is not None
                   else "no outcome was claimed")

