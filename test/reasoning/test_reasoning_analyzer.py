"""Interaction analyzer end to end with recorded model answers served over HTTP."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reasoning_scene import make_window, make_world, ok, primitive, scissors
from recorded_server import serve

from mimir_planner.reasoning import (
    Decision,
    Evidence,
    InteractionAnalyzer,
    OpenAICompatibleBackend,
    PropertyClaim,
)
from mimir_planner.reasoning.config import load_reasoning_config
from mimir_planner.reasoning.errors import AnswerRetriesExhaustedError, EvidenceError
from mimir_planner.reasoning.evidence import DisplacementMeasurement
from mimir_planner.reasoning.world_view import InMemoryWorld


def _analyzer(server_cfg, world=None) -> InteractionAnalyzer:
    cfg = dataclasses.replace(load_reasoning_config(), vlm=server_cfg)
    backend = OpenAICompatibleBackend(cfg.vlm, sleep=lambda _s: None)
    return InteractionAnalyzer(backend, world or make_world(), cfg)


def _props(result) -> set[tuple[str, str, object]]:
    return {(u.object_id, u.property, u.value) for u in result.property_updates}


def test_locked_drawer_and_missed_grasp_get_different_correct_updates() -> None:
    # Same model answer ("locked") for two attempts that differ only in gripper contact.
    with serve([ok("analyzer_locked_drawer.json"), ok("analyzer_locked_drawer.json")]) as srv:
        analyzer = _analyzer(srv.vlm_config())
        locked = analyzer.analyze(make_window(contact=True, opened_m=None), primitive())
        missed = analyzer.analyze(make_window(contact=False, opened_m=None), primitive())
    assert ("drawer_3", "locked", True) in _props(locked)
    assert [(o.success, o.category) for o in locked.outcome_updates] == [(False, "fixture_locked")]
    assert all(u.property != "locked" for u in missed.property_updates)
    assert [(o.success, o.category) for o in missed.outcome_updates] == [(False, "missed_grasp")]
    outcome_verdict = missed.outcome_updates[0].verdict
    assert outcome_verdict.decision is Decision.CORRECT
    locked_verdicts = [
        v
        for v in missed.verdicts
        if isinstance(v.claim, PropertyClaim) and v.claim.name == "locked"
    ]
    assert locked_verdicts[0].decision is Decision.REJECT
    assert "missed grasp" in locked_verdicts[0].reason
    # evidence references are carried for the event log
    assert locked.property_updates[0].evidence_refs
    assert locked.response.backend == "openai"
    assert locked.response.prompt_tokens == 2900


def test_a_held_pull_on_a_fixture_that_opened_before_is_not_written_locked() -> None:
    # the drawer opened and was shut again earlier; now the pull is held back as by a lock
    with serve([ok("analyzer_locked_drawer.json")]) as srv:
        result = _analyzer(srv.vlm_config(), _opened_world(standing_open=False)).analyze(
            make_window(contact=True, opened_m=None, hand=True), primitive())
    assert all(u.property != "locked" for u in result.property_updates)
    (held,) = [v for v in result.verdicts
               if isinstance(v.claim, PropertyClaim) and v.claim.name == "locked"]
    assert held.decision is Decision.DEFER and "opened before" in held.reason
    # the attempt itself still failed as a held pull
    assert [(o.success, o.category) for o in result.outcome_updates] == [
        (False, "fixture_locked")]


def test_missed_grasp_answer_is_admitted_on_no_contact() -> None:
    with serve([ok("analyzer_missed_grasp.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=False, opened_m=None), primitive()
        )
    assert result.property_updates == ()
    assert result.outcome_updates[0].verdict.decision is Decision.ADMIT
    assert result.outcome_updates[0].category == "missed_grasp"


def test_hallucinated_content_is_rejected() -> None:
    with serve([ok("analyzer_opened_with_contents.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=True, opened_m=0.2), primitive(), [scissors()]
        )
    assert ("drawer_3", "openable", True) in _props(result)
    (update,) = result.contents_updates
    assert [i.name for i in update.contents] == ["scissors"]
    assert update.contents[0].evidence_refs == ("det:scissors:1",)
    rejected = [v for v in result.rejected if "gold watch" in v.reason]
    assert rejected and rejected[0].decision is Decision.REJECT


def test_premature_opened_is_deferred_then_admitted() -> None:
    with serve([ok("analyzer_opened_with_contents.json")]) as srv:
        analyzer = _analyzer(srv.vlm_config())
        window = make_window(contact=True, opened_m=0.2, depth=False)
        result = analyzer.analyze(window, primitive(), [scissors()])
    opened = [v for v in result.deferred if isinstance(v.claim, PropertyClaim)]
    assert opened and opened[0].claim.name == "openable"
    assert all(u.property != "openable" for u in result.property_updates)
    assert result.contents_updates == ()  # interior not observed open yet
    assert len(analyzer.harness.pending) >= 2
    # nothing new arrives: still deferred
    again = analyzer.harness.recheck(Evidence())
    assert again.property_updates == ()
    # the drawer's slide joint now reports 0.2 m of travel
    measure = DisplacementMeasurement("drawer_3", 0.2, "m", "joint", ("joint:drawer_3@104",))
    arrived = analyzer.harness.recheck(
        Evidence(displacements={"drawer_3": measure}, observed_interiors=frozenset({"drawer_3"}))
    )
    assert ("drawer_3", "openable", True) in {
        (u.object_id, u.property, u.value) for u in arrived.property_updates
    }
    assert arrived.property_updates[0].evidence_refs == ("joint:drawer_3@104",)
    assert [i.name for i in arrived.contents_updates[0].contents] == ["scissors"]


def test_deferred_claims_expire_after_max_rechecks() -> None:
    with serve([ok("analyzer_opened_with_contents.json")]) as srv:
        analyzer = _analyzer(srv.vlm_config())
        analyzer.analyze(make_window(contact=True, opened_m=0.2, depth=False), primitive())
    pending = len(analyzer.harness.pending)
    # evidence that does not bear on the claims (nothing new about the drawer) costs nothing
    for _ in range(10):
        assert analyzer.harness.recheck(Evidence()).rejected == ()
    assert len(analyzer.harness.pending) == pending > 0
    # new measurements that still do not support the open count, and expire it
    rejected = []
    for i in range(10):
        still = DisplacementMeasurement("drawer_3", 0.001 * (i + 1), "m", "depth")
        rejected += analyzer.harness.recheck(
            Evidence(displacements={"drawer_3": still})).rejected
    assert any("re-checks" in v.reason for v in rejected)
    assert all(getattr(p.claim, "name", None) != "openable"
               for p in analyzer.harness.pending.items())


def test_instructions_in_image_change_nothing_beyond_schema() -> None:
    with serve([ok("analyzer_injection_other_id.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=False, opened_m=None), primitive()
        )
    assert result.property_updates == ()
    assert result.contents_updates == ()
    reasons = " ".join(v.reason for v in result.rejected)
    assert "only to the action's target" in reasons
    assert "not observed open" in " ".join(v.reason for v in result.deferred) or reasons


def test_extra_fields_are_a_schema_error_and_write_nothing() -> None:
    steps = [ok("analyzer_injection_extra_fields.json")] * 3
    with serve(steps) as srv:
        analyzer = _analyzer(srv.vlm_config())
        with pytest.raises(AnswerRetriesExhaustedError) as info:
            analyzer.analyze(make_window(contact=False, opened_m=None), primitive())
        assert len(srv.requests) == 3
    assert info.value.path.startswith("$")
    assert len(analyzer.harness.pending) == 0


def test_malformed_then_valid_answer_is_retried_with_correction() -> None:
    with serve([ok("analyzer_malformed.json"), ok("analyzer_fenced_prose.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=False, opened_m=None), primitive()
        )
        second = srv.requests[1]["messages"]
    assert result.answer_attempts == 2
    assert result.outcome_updates[0].category == "missed_grasp"
    assert second[-1]["role"] == "user" and "could not be used" in second[-1]["content"]
    assert second[-2]["role"] == "assistant"


def test_wrong_schema_every_time_raises_with_path() -> None:
    with serve([ok("analyzer_wrong_schema.json")] * 3) as srv:
        analyzer = _analyzer(srv.vlm_config())
        window = make_window(contact=False, opened_m=None)
        with pytest.raises(AnswerRetriesExhaustedError) as info:
            analyzer.analyze(window, primitive())
        assert len(srv.requests) == 3
    assert info.value.path == "$.task_success"


def test_misspelt_id_is_rebound_to_nearest_same_label_node() -> None:
    with serve([ok("analyzer_misspelt_id.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=True, opened_m=None), primitive()
        )
    assert ("drawer_3", "locked", True) in _props(result)
    grounding = [v for v in result.verdicts if v.verifier == "grounding"]
    assert grounding and grounding[0].decision is Decision.CORRECT


def _opened_world(standing_open: bool = True) -> InMemoryWorld:
    """The test world with drawer_3 opened before: standing open, or shut again since."""
    world = make_world()
    drawer = world.node("drawer_3")
    assert drawer is not None
    world.put(dataclasses.replace(
        drawer, properties={"openable": {"value": True, "is_opened": standing_open}}))
    return world


def test_inspection_uses_inspection_prompt_and_matches_plurals() -> None:
    cup = scissors()
    cup2 = type(cup)("cup", np.array([1.1, -0.1, 0.45]), 0.8, 103.0, "wrist", "det:cup:1")
    # no depth: a flat depth at the drawer's front would show it shut (see test_shut_doors)
    with serve([ok("analyzer_inspection_contents.json")]) as srv:
        result = _analyzer(srv.vlm_config(), _opened_world()).analyze(
            make_window(contact=False, opened_m=None, depth=False), primitive("Inspect"),
            [cup, cup2]
        )
        prompt = srv.requests[0]["messages"][0]["content"][0]["text"]
    assert result.mode == "inspection"
    assert "INSPECTION" in prompt
    names = [i.name for i in result.contents_updates[0].contents]
    assert names == ["Scissors", "cups"]
    assert ("drawer_3", "fullness", "partially_full") in _props(result)
    peak = next(k for k in result.keyframes if k.role == "interaction_peak")
    assert "Scissors" in peak.labels


def test_inspecting_a_closed_fixture_writes_no_contents_and_no_emptiness() -> None:
    # the model answers with contents and fullness for a drawer memory does not hold open:
    # nothing about its inside can be confirmed, so nothing about it is written
    with serve([ok("analyzer_inspection_contents.json")]) as srv:
        result = _analyzer(srv.vlm_config()).analyze(
            make_window(contact=False, opened_m=None), primitive("Inspect"), [scissors()]
        )
    assert result.contents_updates == ()
    about_inside = [v for v in result.verdicts if v.claim.subject_ids == ("drawer_3",)
                    and type(v.claim).__name__ in ("ContentClaim", "EmptyClaim")]
    assert about_inside and all(v.decision is Decision.DEFER for v in about_inside)
    assert all("not observed open" in v.reason for v in about_inside)


def test_request_carries_three_images_and_json_mode() -> None:
    with serve([ok("analyzer_missed_grasp.json")]) as srv:
        _analyzer(srv.vlm_config()).analyze(make_window(contact=False, opened_m=None), primitive())
        body = srv.requests[0]
    parts = body["messages"][0]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 3
    assert all(p["image_url"]["url"].startswith("data:image/jpeg;base64,") for p in images)
    assert body["response_format"] == {"type": "json_object"}
    assert "drawer_4" in parts[0]["text"]  # nearby fixtures with exact ids


def test_unknown_target_and_empty_window_are_typed_errors() -> None:
    with serve([]) as srv:
        analyzer = _analyzer(srv.vlm_config())
        with pytest.raises(EvidenceError):
            analyzer.analyze(make_window(contact=False, opened_m=None), primitive(target="sofa_9"))
        far = make_window(contact=False, opened_m=None, start=500.0, end=503.0)
        with pytest.raises(EvidenceError):
            analyzer.analyze(far, primitive())
        assert srv.requests == []
