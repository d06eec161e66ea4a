"""A place is checked against what the cameras saw of the placed thing after the jaws opened:
standing where it was set down, or fallen below it (percept, verdict and the write it implies).

A bottle set 3 mm inside a counter's edge fell to the floor while the executor reported PLACED
and memory, with no predicate for places, put it on the counter; these tests hold that case.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from reasoning_scene import config
from write_plans import write_context

from mimir_planner.reasoning import (
    ClaimContext,
    Decision,
    Detection3D,
    Evidence,
    Harness,
    HarnessResult,
    OutcomeClaim,
    OutcomeUpdate,
    RobotStateSample,
)
from mimir_planner.reasoning.percepts import place_sightings
from mimir_planner.reasoning.world_view import Box3D, InMemoryWorld, NodeSnapshot
from mimir_planner.reasoning.writes import Whereabouts, plan_writes

HAND = (1.0, 0.0, 0.88)  # map: where the jaws let go, over the counter
CFG = config()


def _world() -> InMemoryWorld:
    return InMemoryWorld([
        NodeSnapshot("counter_1", "counter", np.array([1.0, 0.0, 0.75]),
                     Box3D(np.array([0.75, -0.8, 0.7]), np.array([1.25, 0.8, 0.8]))),
        NodeSnapshot("ketchup_1", "ketchup", np.array(HAND), parent="hand"),
        NodeSnapshot("ketchup_2", "ketchup", np.array([0.2, 1.5, 0.3])),
    ])


def _samples(opened: bool = True, hand: tuple[float, float, float] | None = HAND
             ) -> tuple[RobotStateSample, ...]:
    """Jaws closed on a 5 cm bottle from t = 10 to 12 s; open from 12.1 s when ``opened``."""
    held = [RobotStateSample(10.0 + 0.1 * i, 0.052, 20.0, True, hand_position=hand)
            for i in range(21)]
    let_go = [RobotStateSample(12.1 + 0.1 * i, 0.085, 0.0, False, hand_position=hand)
              for i in range(10)] if opened else []
    return tuple(held + let_go)


def _seen(label: str, xyz: tuple[float, float, float], stamp: float) -> Detection3D:
    return Detection3D(label, np.array(xyz), 0.9, stamp, camera="pole")


STANDING = _seen("ketchup", (1.02, 0.01, 0.84), 12.8)
FALLEN = _seen("ketchup", (0.82, 0.1, 0.03), 13.5)
CTX = ClaimContext("ip1", "place", "place", "counter_1", "counter", np.array([1.0, 0.0, 0.75]),
                   14.0, reported_success=True, reported_message="placed",
                   reported_outcome="PLACED")
DONE = OutcomeClaim("counter_1", "place", True, None, "success", 0.9)


def _judge(detections: tuple[Detection3D, ...], claim: OutcomeClaim = DONE,
           samples: tuple[RobotStateSample, ...] | None = None) -> HarnessResult:
    harness = Harness(_world(), CFG.vocabulary, CFG.percepts, CFG.verifier)
    ev = Evidence(gripper=_samples() if samples is None else samples, detections=detections,
                  visible_frames=4, target_id="counter_1")
    return harness.evaluate([claim], CTX, ev)


def test_sightings_after_the_release_are_sorted_into_standing_and_fallen() -> None:
    early = _seen("ketchup", (0.9, 0.05, 0.4), 12.2)     # mid-fall, before the settle time
    other = _seen("mustard", (0.8, 0.0, 0.03), 13.0)     # not what the hand held
    far = _seen("ketchup", (0.2, 1.5, 0.3), 13.0)        # another bottle across the kitchen
    got = place_sightings(_samples(), (STANDING, FALLEN, early, other, far), ["ketchup"],
                          CFG.vocabulary.synonyms, CFG.percepts)
    assert got is not None
    assert got.stamp == 12.0 and tuple(got.release) == HAND
    assert got.resting == (STANDING,) and got.fallen == (FALLEN,)
    # nothing let go, or no hand position: no release to judge by
    assert place_sightings(_samples(opened=False), (STANDING,), ["ketchup"],
                           CFG.vocabulary.synonyms, CFG.percepts) is None
    assert place_sightings(_samples(hand=None), (STANDING,), ["ketchup"],
                           CFG.vocabulary.synonyms, CFG.percepts) is None
    assert place_sightings((), (STANDING,), ["ketchup"], CFG.vocabulary.synonyms,
                           CFG.percepts) is None


def test_a_place_seen_standing_is_admitted_and_one_seen_fallen_is_corrected() -> None:
    (standing,) = _judge((STANDING,)).verdicts
    assert standing.decision is Decision.ADMIT and "seen standing" in standing.reason
    assert standing.evidence_refs == (STANDING.ref,)
    # seen standing first, then on the floor: the newest sighting decides
    (fell,) = _judge((STANDING, FALLEN)).verdicts
    assert fell.decision is Decision.CORRECT and "fell off 'counter_1'" in fell.reason
    assert fell.corrected is not None and not fell.corrected.success
    assert fell.corrected.category == "other" and "0.85 m below" in fell.corrected.failure_reason


def test_unseen_or_unreleased_places_fall_back_to_the_report_and_the_views() -> None:
    for detections, samples in (((), None),                              # nothing seen
                                ((FALLEN,), _samples(opened=False)),     # jaws never opened
                                ((_seen("mustard", (0.8, 0.0, 0.03), 13.0),), None)):
        (verdict,) = _judge(detections, samples=samples).verdicts
        assert verdict.decision is Decision.ADMIT, verdict.reason
        assert "no mechanical predicate for intent 'place'" in verdict.reason
    # a place claimed failed is not turned into a success by a sighting
    failed = dataclasses.replace(DONE, success=False, failure_reason="dropped", category="other")
    (verdict,) = _judge((STANDING,), claim=failed).verdicts
    assert verdict.decision is Decision.ADMIT and verdict.effective is not None
    assert not verdict.effective.success


def _where(release: tuple[float, float, float] | None, detections: dict) -> Whereabouts:
    return Whereabouts(world=_world(), intent="place", detections=detections,
                       release_point=None if release is None else np.array(release),
                       fixture_labels=frozenset({"cabinet"}))


def _parents(plans: list) -> dict[str, tuple[tuple[str, str], object]]:
    return {p.update.node_id: (p.update.parent, p.update.parent_position)
            for p in plans if p.update is not None and p.update.parent is not None}


def test_a_fall_takes_the_thing_out_of_the_hand_to_where_it_was_seen() -> None:
    result = _judge((STANDING, FALLEN))
    known = {"counter_1", "ketchup_1", "ketchup_2"}
    ctx = dataclasses.replace(write_context(known), primitive="place")
    detections = {FALLEN.ref: FALLEN.position, STANDING.ref: STANDING.position}
    plans = plan_writes(result, ctx, where=_where(HAND, detections))
    assert _parents(plans) == {"ketchup_1": (("", ""), (0.82, 0.1, 0.03))}
    fell = next(p.update for p in plans if p.update is not None and p.update.parent)
    assert "seen 0.85 m below, out of the hand" in fell.verdict_reason
    # without the release point, or with the cited sighting above it, the hand is left as it is
    assert _parents(plan_writes(result, ctx, where=_where(None, detections))) == {}
    above = {FALLEN.ref: np.array([0.82, 0.1, 1.2])}
    assert _parents(plan_writes(result, ctx, where=_where(HAND, above))) == {}
    # a place seen standing puts the bottle on the counter where the jaws let go
    standing = _judge((STANDING,))
    assert isinstance(standing.outcome_updates[0], OutcomeUpdate)
    assert _parents(plan_writes(standing, ctx, where=_where(HAND, detections))) == {
        "ketchup_1": (("counter_1", "surface"), HAND)}
