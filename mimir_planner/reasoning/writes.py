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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mimir_memory.errors import InvalidValueError
from mimir_memory.events import Source
from mimir_memory.events import Verdict as MemoryVerdict
from mimir_memory.graph import HAND_PARENT
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
    ContentItem,
    ContentsUpdate,
    Decision,
    EmptyClaim,
    GroundingClaim,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    Verdict,
)
from mimir_planner.reasoning.harness import HarnessResult
from mimir_planner.reasoning.percepts import names_match
from mimir_planner.reasoning.world_view import NodeView, WorldView


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

    @classmethod
    def recheck(cls, batch: str, stamp: float, detection_refs: Iterable[str],
                known: Callable[[str], bool]) -> WriteContext:
        """The writes of a re-check on new detections alone: no interaction, no keyframes."""
        return cls(interaction_id=f"recheck-{batch}", primitive="", task="", stamp=stamp,
                   keyframe_ids=(), frame_keyframes={}, detection_refs=frozenset(detection_refs),
                   known=known, event_prefix=f"analyzer:recheck:{batch}")

    def rechecked(self, event_prefix: str) -> WriteContext:
        """The writes of claims of earlier interactions re-judged during this one."""
        return dataclasses.replace(self, primitive="", task="", event_prefix=event_prefix)


@dataclass(frozen=True)
class Whereabouts:
    """What one analysis knows about where things are, for the parents it writes.

    With it, :func:`plan_writes` builds the world tree from admitted interactions: the things an
    inspection found inside a fixture become its children (``container``), a picked thing goes
    to the hand, and what the hand held goes to the place it was put (``container`` for a
    fixture, ``surface`` for anything else) at the point where the jaws let go.

    Attributes:
        world: memory as the analyzer last read it (nodes, boxes, parents).
        intent: intent of the analysed primitive (``pick``, ``place``, ``inspection``...).
        detections: evidence reference of a detection -> where it was (map, m).
        release_point: the hand's position (map, m) at the last sample the jaws held
            something, or None.
        fixture_labels: labels of the things that hold others inside them.
        synonyms: content names that count as a node's label.
        margin_m: slack around a fixture's box within which a node counts as inside it.
    """

    world: WorldView
    intent: str
    detections: Mapping[str, np.ndarray] = field(default_factory=dict)
    release_point: np.ndarray | None = None
    fixture_labels: frozenset[str] = frozenset()
    synonyms: Mapping[str, Sequence[str]] = field(default_factory=dict)
    margin_m: float = 0.03


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


def _contents_update(update: ContentsUpdate, ctx: WriteContext,
                     item_nodes: Sequence[str] = ()) -> NodeUpdate:
    effective = [v for v in update.verdicts if v.effective is not None]
    decision = (Decision.CORRECT if any(v.decision is Decision.CORRECT for v in effective)
                else Decision.ADMIT)
    reason = "; ".join(f"{v.verifier}: {v.reason}" for v in effective)
    per_item = [v for v in effective if isinstance(v.effective, ContentClaim)]
    items = []
    for index, item in enumerate(update.contents):
        note = _reasoning(update.reasoning, per_item[index]) if index < len(per_item) else (
            update.reasoning)
        node_id = item_nodes[index] if index < len(item_nodes) else ""
        items.append(ContentEntry(item.name, item.description, node_id, note))
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


def plan_writes(result: HarnessResult, ctx: WriteContext, skip_deferred: bool = False,
                where: Whereabouts | None = None) -> list[PlannedWrite]:
    """One write per verdict (the admitted contents of a fixture share one write), then the
    parent changes the admitted claims imply when ``where`` is given.

    Grounding verdicts and claims about ids that memory does not hold are not written (they
    are answered to the caller only); each written update gets the id
    ``<event_prefix>:<index of the plan>``.

    Args:
        result: the harness verdicts and admitted updates.
        ctx: shared write context.
        skip_deferred: leave out verdicts that are still deferred (re-checks).
        where: what the analysis knows about where things are; None writes no parents.
    """
    contents = {u.fixture_id: u for u in result.contents_updates}
    item_nodes = ({f: _item_nodes(u, where) for f, u in contents.items()}
                  if where is not None else {})
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
            plan = PlannedWrite(
                [verdict], _contents_update(contents[fixture], ctx, item_nodes.get(fixture, ())),
                fixture)
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
    if where is not None:
        plans += _parent_plans(result, ctx, where, item_nodes)
    for index, plan in enumerate(plans):
        if plan.update is not None:
            plan.update = dataclasses.replace(plan.update,
                                              update_id=f"{ctx.event_prefix}:{index}")
    return plans


def _inside(node: NodeView, fixture: NodeView, margin: float) -> bool:
    box = fixture.bbox
    return box is not None and node.node_id != fixture.node_id and box.contains(
        node.position, margin)


def _item_node(item: ContentItem, fixture: NodeView, where: Whereabouts,
               taken: set[str], *, same_words: bool) -> str:
    """Id of the node an admitted content item is (same thing, inside the fixture, nearest to
    where it was detected), or "" when memory has no such node yet. ``same_words``: only a
    node whose label has the item's own words (else a synonym's will do)."""
    box = fixture.bbox
    if box is None:
        return ""
    seen = [where.detections[r] for r in item.evidence_refs if r in where.detections]
    anchor = np.mean(seen, axis=0) if seen else box.center
    reach = float(np.linalg.norm(box.upper - box.lower)) / 2.0 + where.margin_m
    found = [n for n in where.world.nodes_near(box.center, reach)
             if n.node_id not in taken
             and names_match(item.name, n.label, {} if same_words else where.synonyms)
             and _inside(n, fixture, where.margin_m)]
    if not found:
        return ""
    best = min(found, key=lambda n: (float(np.linalg.norm(n.position - anchor)), n.node_id))
    taken.add(best.node_id)
    return best.node_id


def _item_nodes(update: ContentsUpdate, where: Whereabouts | None) -> tuple[str, ...]:
    """Node id (or "") of each admitted content item of a fixture, in order: first every item
    that a node's label names in its own words, then the rest by synonyms, so a listed cup
    and mug go to the cup and the mug memory holds there and not crosswise."""
    fixture = where.world.node(update.fixture_id) if where is not None else None
    if where is None or fixture is None:
        return ()
    taken: set[str] = set()
    found = [_item_node(item, fixture, where, taken, same_words=True)
             for item in update.contents]
    return tuple(node or _item_node(item, fixture, where, taken, same_words=False)
                 for item, node in zip(update.contents, found, strict=True))


def _parent_update(node_id: str, parent: tuple[str, str], verdict: Verdict,
                   links: tuple[EvidenceLink, ...], reason: str, *,
                   position: tuple[float, float, float] | None = None) -> NodeUpdate:
    return NodeUpdate(node_id=node_id, source=Source.INTERACTION, evidence=links,
                      verdict=MemoryVerdict(str(verdict.decision)),
                      verdict_reason=f"{_note(verdict)}; {reason}", parent=parent,
                      parent_position=position)


def _outcome_parents(outcome: OutcomeUpdate, ctx: WriteContext,
                     where: Whereabouts) -> list[PlannedWrite]:
    """A successful pick puts its target in the hand; a successful place puts what the hand
    held at the place (where the jaws let go, when the arm reported it). A failed place whose
    outcome cites a sighting below where the jaws let go (the thing fell) takes what the hand
    held out of it, to where it was seen."""
    if where.intent == "place" and not outcome.success:
        return _fell_from_place(outcome, ctx, where)
    if not outcome.success or where.intent not in ("pick", "place"):
        return []
    verdict = outcome.verdict
    links = evidence_links(outcome.evidence_refs, ctx, verdict.interaction_id)
    if where.intent == "pick":
        held = where.world.node(outcome.target_id)
        if held is None or held.parent == HAND_PARENT:
            return []
        return [PlannedWrite([verdict], _parent_update(
            held.node_id, (HAND_PARENT, "hand"), verdict, links,
            f"picked up by {ctx.primitive}"), held.node_id)]
    target = where.world.node(outcome.target_id)
    if target is None:
        return []
    relation = "container" if target.label in where.fixture_labels else "surface"
    point = None
    if where.release_point is not None:
        x, y, z = (float(v) for v in where.release_point)
        point = (x, y, z)
    return [PlannedWrite([verdict], _parent_update(
        node.node_id, (target.node_id, relation), verdict, links,
        f"placed {'in' if relation == 'container' else 'on'} '{target.node_id}' by "
        f"{ctx.primitive}" + ("" if point is None else " where the jaws let go"),
        position=point), node.node_id)
        for node in where.world.children_of(HAND_PARENT) if node.node_id != target.node_id]


def _fell_from_place(outcome: OutcomeUpdate, ctx: WriteContext,
                     where: Whereabouts) -> list[PlannedWrite]:
    if where.release_point is None:
        return []
    release_z = float(where.release_point[2])
    seen = [where.detections[ref] for ref in outcome.evidence_refs
            if ref in where.detections and float(where.detections[ref][2]) < release_z]
    if not seen:
        return []
    x, y, z = (float(v) for v in seen[-1])
    verdict = outcome.verdict
    links = evidence_links(outcome.evidence_refs, ctx, verdict.interaction_id)
    return [PlannedWrite([verdict], _parent_update(
        node.node_id, ("", ""), verdict, links,
        f"let go over '{outcome.target_id}' by {ctx.primitive} and seen {release_z - z:.2f} m "
        "below, out of the hand", position=(x, y, z)), node.node_id)
        for node in where.world.children_of(HAND_PARENT)]


def _gone_from(update: ContentsUpdate, verdict: Verdict, links: tuple[EvidenceLink, ...],
               where: Whereabouts, listed: set[str]) -> list[PlannedWrite]:
    """An inspection looked at the whole inside of a fixture that holds things inside it
    (``fixture_labels``: cabinets, drawers...): a thing memory kept inside it
    that the admitted inventory neither names nor matches by label is no longer there (someone
    took it out), so it is detached from the fixture. Its node stays, where it was last seen;
    only the belief that the fixture holds it goes."""
    fixture = where.world.node(update.fixture_id)
    if fixture is None or fixture.label not in where.fixture_labels:
        return []  # a look over a surface is no inventory of it
    names = [item.name for item in update.contents]
    plans = []
    for child in where.world.children_of(update.fixture_id):
        if child.node_id in listed or any(names_match(name, child.label, where.synonyms)
                                          for name in names):
            continue
        plans.append(PlannedWrite([verdict], _parent_update(
            child.node_id, ("", ""), verdict, links,
            f"'{child.label}' not among what the inspection of '{update.fixture_id}' saw "
            "inside"), child.node_id))
    return plans


def _parent_plans(result: HarnessResult, ctx: WriteContext, where: Whereabouts,
                  item_nodes: Mapping[str, Sequence[str]]) -> list[PlannedWrite]:
    """The parent changes the admitted contents and outcomes imply (none already in memory)."""
    plans: list[PlannedWrite] = []
    for update in result.contents_updates:
        effective = [v for v in update.verdicts if v.effective is not None]
        if not effective or not ctx.known(update.fixture_id):
            continue
        verdict = effective[0]
        links = evidence_links(update.evidence_refs, ctx, verdict.interaction_id)
        for item, node_id in zip(update.contents, item_nodes.get(update.fixture_id, ()),
                                 strict=False):
            node = where.world.node(node_id) if node_id else None
            if node is None or node.parent == update.fixture_id:
                continue
            plans.append(PlannedWrite([verdict], _parent_update(
                node_id, (update.fixture_id, "container"), verdict, links,
                f"'{item.name}' seen inside '{update.fixture_id}'"), node_id))
        if where.intent == "inspection":
            plans += _gone_from(update, verdict, links, where,
                                set(item_nodes.get(update.fixture_id, ())))
    for outcome in result.outcome_updates:
        plans += _outcome_parents(outcome, ctx, where)
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

