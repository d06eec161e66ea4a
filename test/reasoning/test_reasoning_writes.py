"""The analyzer's write planning and window helpers, without ROS."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from write_plans import every_kind_of_verdict, is_opened_verdicts
from write_plans import write_context as _ctx

from mimir_memory.events import Source
from mimir_memory.events import Verdict as MemoryVerdict
from mimir_memory.updates import ContentEntry, EvidenceLink, PropertyWrite, TaskRecordEntry
from mimir_planner.reasoning import (
    ClaimContext,
    ContentClaim,
    Decision,
    Detection3D,
    Evidence,
    GroundingClaim,
    HarnessResult,
    OutcomeClaim,
    OutcomeUpdate,
    PendingQueue,
    PropertyClaim,
    Verdict,
)
from mimir_planner.reasoning.harness import PendingClaim
from mimir_planner.reasoning.jobs import AnalysisJobs
from mimir_planner.reasoning.window import (
    GripperReading,
    recheck_evidence,
    robot_states,
    spread,
)
from mimir_planner.reasoning.world_view import Box3D, InMemoryWorld, NodeSnapshot
from mimir_planner.reasoning.writes import (
    WriteContext,
    event_kind,
    evidence_links,
    outcome_answer,
    plan_writes,
    unwritten_record,
)


def test_evidence_links_name_what_memory_can_point_at() -> None:
    links = evidence_links(["frame:base@9.500", "frame:wrist@10.000", "det-7", "gripper@11.2",
                            "hand:1.000-2.000", "kf-a", "det-7"], _ctx(set()),
                           origin="ia-0")
    assert links == (
        EvidenceLink("interaction", "ia-1"), EvidenceLink("interaction", "ia-0", "claim made here"),
        EvidenceLink("keyframe", "kf-a"), EvidenceLink("keyframe", "kf-b"),
        EvidenceLink("detection", "det-7"), EvidenceLink("robot_state", "gripper@11.2"),
        EvidenceLink("robot_state", "hand:1.000-2.000"))
    assert evidence_links([], _ctx(set()), origin="ia-1") == links[:1] + links[2:4]


def test_is_opened_rides_on_openable_and_odd_values_are_not_written() -> None:
    first, second = plan_writes(is_opened_verdicts(), _ctx({"cabinet_1"}))
    assert first.update is not None and first.update.verdict is MemoryVerdict.DEFER
    assert first.update.properties == (PropertyWrite(
        "openable", True, 0.8, "interaction", "door ajar | defer by opened: no motion", True),)
    assert first.update.update_id == "analyzer:ia-1:0"
    assert second.update is None and "no memory form" in second.note


def test_every_verdict_is_planned() -> None:
    locked = PropertyClaim("cabinet_1", "locked", True, 1.7, "no motion")  # confidence clamped
    result = every_kind_of_verdict(locked, deferred_open=False, outcome_origin="ia-0")
    plans = plan_writes(result, _ctx({"cabinet_1"}))
    assert [p.subject for p in plans] == ["cabinet_1", "ghost_9", "ghost_9", "cabinet_1",
                                          "cabinet_1", "cabinet_1"]
    assert [len(p.verdicts) for p in plans] == [1, 1, 1, 2, 1, 1]
    lock, grounding, unknown, both, rejected, corrected = (p.update for p in plans)
    assert grounding is None and "not written" in plans[1].note
    assert unknown is None and "not in memory" in plans[2].note
    assert lock is not None and lock.source is Source.INTERACTION
    assert lock.properties[0].confidence == 1.0
    assert lock.verdict_reason == "admit by locked: contact, no motion"
    assert EvidenceLink("robot_state", "gripper@11.200") in lock.evidence
    assert both is not None and both.verdict is MemoryVerdict.ADMIT
    assert both.contents == (
        ContentEntry("mug", "red", reasoning="seen inside | admit by contains: 1 detection"),
        ContentEntry("bowl", "white", reasoning="seen inside | admit by contains: 1 detection"))
    assert both.contents_source_action == "open" and both.update_id == "analyzer:ia-1:3"
    assert both.verdict_reason == "admit: contains: 1 detection; contains: 1 detection"
    assert rejected is not None and rejected.verdict is MemoryVerdict.REJECT
    assert rejected.contents is not None and [c.name for c in rejected.contents] == ["apple"]
    assert corrected is not None and corrected.verdict is MemoryVerdict.CORRECT
    assert corrected.task_record == TaskRecordEntry("tidy up", "open", False, "locked", "ia-0",
                                                    12.5)
    assert EvidenceLink("interaction", "ia-0", "claim made here") in corrected.evidence
    only_final = plan_writes(result, _ctx({"cabinet_1"}), skip_deferred=True)
    assert len(only_final) == len(plans)
    deferred = HarnessResult((Verdict(locked, Decision.DEFER, "wait", (), "locked"),), (), (), ())
    assert plan_writes(deferred, _ctx({"cabinet_1"}), skip_deferred=True) == []
    # re-checks: claims of earlier interactions carry no primitive or task of their own
    again = _ctx({"cabinet_1"}).rechecked("analyzer:ia-1:recheck")
    assert (again.primitive, again.task, again.interaction_id) == ("", "", "ia-1")
    rewritten = plan_writes(result, again)[0].update
    assert rewritten is not None and rewritten.update_id == "analyzer:ia-1:recheck:0"
    alone = WriteContext.recheck("b7", 20.0, ["det-9"], {"cabinet_1"}.__contains__)
    assert (alone.interaction_id, alone.event_prefix, alone.keyframe_ids) == (
        "recheck-b7", "analyzer:recheck:b7", ())
    assert alone.detection_refs == frozenset({"det-9"}) and alone.known("cabinet_1")
    # a fixture memory does not hold gets no contents write
    assert plan_writes(result, _ctx(set()))[3].update is None


def test_outcome_answer_and_unwritten_records() -> None:
    claim = OutcomeClaim("cabinet_1", "open", False, "locked", "fixture_locked", 0.8)
    verdict = Verdict(claim, Decision.ADMIT, "evidence agrees", (), "outcome")
    update = OutcomeUpdate("cabinet_1", "open", False, "locked", "fixture_locked", verdict, ())
    assert outcome_answer(HarnessResult((verdict,), (), (), (update,))) == (False, "locked")
    ok = OutcomeUpdate("cabinet_1", "open", True, None, "success", verdict, ())
    assert outcome_answer(HarnessResult((verdict,), (), (), (ok,))) == (True, "")
    waiting = Verdict(claim, Decision.DEFER, "no depth", (), "outcome")
    assert outcome_answer(HarnessResult((waiting,), (), (), ())) == (
        False, "outcome not verified: no depth")
    assert outcome_answer(HarnessResult((), (), (), ())) == (False, "no outcome was claimed")
    assert event_kind(claim) == "task_outcome_recorded"
    assert event_kind(GroundingClaim("x_1", "ghost")) == "grounding"
    record = unwritten_record(waiting, "'x' is not in memory")
    assert record["not_written"] == "'x' is not in memory" and record["decision"] == "defer"
    assert "not_written" not in unwritten_record(waiting, "")


def test_robot_states_and_spread() -> None:
    readings = [(1.0, GripperReading(0.03, True)), (1.1, GripperReading(0.0, False)),
                (1.2, GripperReading(0.08, False))]
    poses = {1.1: (1.0, 2.0, 0.5)}
    hands = {1.0: (0.5, 0.0, 0.6)}
    commands = {1.0: (0.4, 0.0, 0.6), 1.2: (0.3, 0.0, 0.6)}
    samples, missing = robot_states(readings, poses.get, hands.get, commands.get)
    assert [s.contact for s in samples] == [True, False, False]
    assert [s.base_pose for s in samples] == [(0.0, 0.0, 0.0), (1.0, 2.0, 0.5), (1.0, 2.0, 0.5)]
    assert [s.hand_position for s in samples] == [(0.5, 0.0, 0.6), None, None]
    assert [s.hand_commanded for s in samples] == [(0.4, 0.0, 0.6), None, (0.3, 0.0, 0.6)]
    assert missing == 1
    assert spread(list(range(10)), 4) == [0, 3, 6, 9] and spread([1, 2], 5) == [1, 2]


def test_recheck_evidence_keeps_detections_inside_pending_fixtures() -> None:
    box = Box3D(np.array([1.8, -0.2, 0.3]), np.array([2.2, 0.2, 0.7]))
    world = InMemoryWorld([
        NodeSnapshot("cabinet_1", "cabinet", np.array([2.0, 0.0, 0.5]), box,
                     properties={"openable": {"value": True, "is_opened": True}})])
    pending = PendingQueue()
    inside = Detection3D("mug", np.array([2.0, 0.0, 0.5]), 0.9, 14.0, "base", "det-in")
    outside = Detection3D("mug", np.array([5.0, 0.0, 0.5]), 0.9, 14.0, "base", "det-out")
    assert recheck_evidence(pending, world, [inside], 0.05) is None  # nothing waits
    ctx = ClaimContext("ia-1", "open", "manipulation", "cabinet_1", "cabinet",
                       np.array([2.0, 0.0, 0.5]), 12.0)
    pending.add(PendingClaim(ContentClaim("cabinet_1", "mug", "red", "seen"), ctx, Evidence()))
    assert recheck_evidence(pending, world, [], 0.05) is None
    assert recheck_evidence(pending, world, [outside], 0.05) is None
    evidence = recheck_evidence(pending, world, [inside, outside], 0.05)
    assert evidence is not None and evidence.detections == (inside,)
    assert evidence.observed_interiors == frozenset({"cabinet_1"})
    assert evidence.refs == ("det-in",)


def test_each_interaction_is_analysed_once() -> None:
    jobs = AnalysisJobs(keep=2)
    job, owner = jobs.claim("ia-1")
    again, second_owner = jobs.claim("ia-1")
    assert owner and not second_owner and again is job
    waited: list[object] = []
    waiter = threading.Thread(target=lambda: waited.append(
        again.response if again.done.wait(5.0) else None))
    waiter.start()
    jobs.finish("ia-1", job, "answer", remember=True)
    waiter.join()
    assert waited == ["answer"]
    failed, _ = jobs.claim("ia-2")
    jobs.finish("ia-2", failed, "error", remember=False)
    assert jobs.claim("ia-2")[1]  # forgotten: the next request runs it again
    for key in ("ia-3", "ia-4"):
        job, _ = jobs.claim(key)
        jobs.finish(key, job, key, remember=True)
    assert jobs.claim("ia-1")[1]  # only the newest two finished answers are kept


@pytest.mark.parametrize("bad_confidence", [float("nan")])
def test_an_invalid_claim_is_reported_not_raised(bad_confidence: float) -> None:
    claim = PropertyClaim("cabinet_1", "locked", True, bad_confidence, "odd")
    result = HarnessResult((Verdict(claim, Decision.ADMIT, "ok", (), "locked"),), (), (), ())
    (plan,) = plan_writes(result, _ctx({"cabinet_1"}))
    assert plan.update is None and "no valid memory update" in plan.note
