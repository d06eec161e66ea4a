"""Write-planning inputs shared by the reasoning tests and the analyzer node tests."""

from __future__ import annotations

from mimir_planner.reasoning import (
    ContentClaim,
    ContentsUpdate,
    Decision,
    GroundingClaim,
    HarnessResult,
    OutcomeClaim,
    PropertyClaim,
    Verdict,
)
from mimir_planner.reasoning.claims import ContentItem
from mimir_planner.reasoning.writes import WriteContext


def write_context(known: set[str]) -> WriteContext:
    """Interaction ia-1 (task "tidy up", two keyframes, detection det-7); ``known`` ids exist."""
    return WriteContext(
        interaction_id="ia-1", primitive="open", task="tidy up", stamp=12.5,
        keyframe_ids=("kf-a", "kf-b"), frame_keyframes={"frame:base@9.500": "kf-a"},
        detection_refs=frozenset({"det-7"}), known=known.__contains__,
        event_prefix="analyzer:ia-1")


def is_opened_verdicts() -> HarnessResult:
    """A deferred ``is_opened=True`` claim and a rejected one whose value has no memory form."""
    opened = PropertyClaim("cabinet_1", "is_opened", True, 0.8, "door ajar")
    odd = PropertyClaim("cabinet_1", "is_opened", "half", 0.8, "door ajar")
    return HarnessResult((Verdict(opened, Decision.DEFER, "no motion", (), "opened"),
                          Verdict(odd, Decision.REJECT, "not a state", (), "opened")),
                         (), (), ())


def every_kind_of_verdict(locked: PropertyClaim, *, deferred_open: bool,
                          outcome_origin: str) -> HarnessResult:
    """One verdict of each kind on cabinet_1 (and ghost_9), in this order.

    ``locked`` admitted; with ``deferred_open`` an ``openable`` claim deferred; ghost_9's
    grounding and property rejected; mug and bowl admitted and apple rejected as contents (one
    contents update); the outcome claim of ``outcome_origin`` corrected to fixture_locked.
    """
    verdicts = [Verdict(locked, Decision.ADMIT, "contact, no motion", ("gripper@11.200",),
                        "locked", interaction_id="ia-1")]
    if deferred_open:
        opened = PropertyClaim("cabinet_1", "openable", True, 0.9, "door moved", is_opened=True)
        verdicts.append(Verdict(opened, Decision.DEFER, "no measured motion", (), "opened",
                                interaction_id="ia-1"))
    ghost = PropertyClaim("ghost_9", "locked", True, 0.9, "made up")
    mug = ContentClaim("cabinet_1", "mug", "red", "seen inside")
    bowl = ContentClaim("cabinet_1", "bowl", "white", "seen inside")
    apple = ContentClaim("cabinet_1", "apple", "green", "imagined")
    outcome = OutcomeClaim("cabinet_1", "open", True, None, "success", 0.8)
    fixed = OutcomeClaim("cabinet_1", "open", False, "locked", "fixture_locked", 0.8)
    contained = [
        Verdict(mug, Decision.ADMIT, "1 detection", ("det-7",), "contains",
                interaction_id="ia-1"),
        Verdict(bowl, Decision.ADMIT, "1 detection", (), "contains", interaction_id="ia-1"),
        Verdict(apple, Decision.REJECT, "no detection of 'apple'", (), "contains",
                interaction_id="ia-1"),
    ]
    verdicts += [
        Verdict(GroundingClaim("ghost_9", "ghost"), Decision.REJECT, "no node", (),
                "grounding", interaction_id="ia-1"),
        Verdict(ghost, Decision.REJECT, "unknown id 'ghost_9'", (), "grounding",
                interaction_id="ia-1"),
        *contained,
        Verdict(outcome, Decision.CORRECT, "evidence says fixture_locked", (), "outcome",
                corrected=fixed, interaction_id=outcome_origin),
    ]
    contents = ContentsUpdate("cabinet_1", (ContentItem("mug", "red", ("det-7",)),
                                            ContentItem("bowl", "white")),
                              False, "seen inside", "open", tuple(contained), ("det-7",))
    return HarnessResult(tuple(verdicts), (), (contents,), ())
