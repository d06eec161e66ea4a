"""The reasoner fault profile against the harness: refutable lies never reach memory, the
others are held back."""

from __future__ import annotations

import dataclasses
import json

import pytest
from reasoning_scene import config, make_window, make_world, primitive, scissors

from mimir_planner.reasoning import Decision, InteractionAnalyzer, PropertyClaim, make_backend
from mimir_planner.reasoning.errors import BackendConfigError
from mimir_planner.reasoning.faults import REFUTABLE, UNREFUTABLE, Corruption, FaultyBackend
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.reasoning.world_view import InMemoryWorld


def _world(opened: bool = False) -> InMemoryWorld:
    world = make_world()
    if opened:
        drawer = world.node("drawer_3")
        assert drawer is not None
        world.put(dataclasses.replace(
            drawer, properties={"openable": {"value": True, "is_opened": True}}))
    return world


def _run(kind: str, window, record, world: InMemoryWorld, detections=()):
    cfg = config(backend="offline")
    seen: list[Corruption] = []
    backend = FaultyBackend(make_backend(cfg), 1.0, seed=3, sink=seen.append, kinds=(kind,))
    result = InteractionAnalyzer(backend, world, cfg).analyze(window, record, list(detections))
    return result, seen


def _effective(result):
    return [v for v in result.verdicts if v.decision in (Decision.ADMIT, Decision.CORRECT)]


def test_refutable_corruptions_are_rejected_or_corrected() -> None:
    locked = make_window(contact=True, opened_m=None, hand=True)
    opened = make_window(contact=True, opened_m=0.2, hand=True)
    failed_open = dataclasses.replace(primitive(), reported_success=False)

    # a successful open said to be locked: corrected by the measured motion to what the open
    # showed (the drawer opens and stands open), so memory does not lose the opening
    result, seen = _run("flip_locked", opened, failed_open, _world())
    assert [c.kind for c in seen] == ["flip_locked"] and seen[0].refutable
    lock = [v for v in result.verdicts if getattr(v.claim, "name", None) == "locked"]
    assert lock and lock[0].decision is Decision.CORRECT and "moved" in lock[0].reason
    fixed = lock[0].corrected
    assert isinstance(fixed, PropertyClaim)
    assert (fixed.name, fixed.new_value, fixed.is_opened) == ("openable", True, True)
    assert ("drawer_3", "openable", True) in {
        (u.object_id, u.property, u.value) for u in result.property_updates}

    # a locked drawer said to be unlocked: never admitted; the held pull corrects it to locked
    result, _ = _run("flip_locked", locked, failed_open, _world())
    written = [v.corrected or v.claim for v in _effective(result)]
    assert not any(getattr(c, "name", None) == "locked" and getattr(c, "new_value", None) is False
                   for c in written)
    (unlock,) = [v for v in result.verdicts if getattr(v.claim, "name", None) == "locked"]
    assert unlock.decision is Decision.CORRECT and unlock.verifier == "locked"
    assert isinstance(unlock.corrected, PropertyClaim) and unlock.corrected.new_value is True
    assert ("drawer_3", "locked", True) in {
        (u.object_id, u.property, u.value) for u in result.property_updates}
    # the same claim after a pull that was not held back (2 cm commanded): still deferred
    timid = dataclasses.replace(locked, robot_states=tuple(
        dataclasses.replace(s, hand_commanded=s.hand_position) for s in locked.robot_states))
    result, _ = _run("flip_locked", timid, failed_open, _world())
    (unlock,) = [v for v in result.verdicts if getattr(v.claim, "name", None) == "locked"]
    assert unlock.decision is Decision.DEFER

    # the drawer cited by a wrong id: rebound to the drawer at the action (corrected)
    result, seen = _run("wrong_id", opened, failed_open, _world())
    assert "cited as drawer_43" in seen[0].detail
    grounding = [v for v in result.verdicts if v.verifier == "grounding"]
    assert grounding and grounding[0].decision is Decision.CORRECT

    # success claimed for the locked drawer: corrected to the locked failure
    result, seen = _run("false_success", locked, failed_open, _world())
    (outcome,) = [v for v in result.verdicts if v.verifier == "outcome"]
    assert outcome.decision is Decision.CORRECT
    assert outcome.corrected is not None and outcome.corrected.category == "fixture_locked"

    # an item invented in an interior the cameras saw: rejected
    inspect = dataclasses.replace(primitive("Inspect"), reported_success=True)
    looked_in = make_window(contact=False, opened_m=None, looks_in=True)
    result, seen = _run("invent_content", looked_in, inspect, _world(opened=True), [scissors()])
    invented = seen[0].detail.split("'")[1]
    claims = [v for v in result.verdicts if getattr(v.claim, "name", None) == invented]
    assert claims and all(v.decision is Decision.REJECT for v in claims)
    assert [i.name for u in result.contents_updates for i in u.contents] == ["scissors"]


def test_unrefutable_corruptions_are_held_not_admitted() -> None:
    window = make_window(contact=False, opened_m=None)
    inspect = dataclasses.replace(primitive("Inspect"), reported_success=True)
    result, seen = _run("occluded_content", window, inspect, _world(opened=True), [scissors()])
    assert seen and not seen[0].refutable
    hidden = [v for v in result.verdicts if type(v.claim).__name__ == "ContentClaim"
              and v.claim.fixture_id != "drawer_3"]
    assert hidden and all(v.decision is Decision.DEFER for v in hidden)

    # a push the model judged failed, with no depth to see the target: success claimed
    # instead cannot be checked (no mechanical predicate, no view, no report from the executor)
    blind = make_window(contact=False, opened_m=None, depth=False)
    push = dataclasses.replace(primitive("PushDrawer"), reported_success=None)
    cfg = config(backend="offline")
    seen: list[Corruption] = []
    faulty = FaultyBackend(_FailedAnswer(), 1.0, seed=3, sink=seen.append,
                           kinds=("unseen_success",))
    result = InteractionAnalyzer(faulty, _world(), cfg).analyze(blind, push)
    assert [c.kind for c in seen] == ["unseen_success"]
    (outcome,) = [v for v in result.verdicts if v.verifier == "outcome"]
    assert outcome.decision is Decision.DEFER and "0 frame(s)" in outcome.reason

    # the same lie about a look into a closed drawer is refuted: its inside was not in view
    inspect_closed = make_window(contact=False, opened_m=None)
    result, _ = _run("false_success", inspect_closed,
                     dataclasses.replace(primitive("Inspect"), reported_success=False), _world())
    (outcome,) = [v for v in result.verdicts if v.verifier == "outcome"]
    assert outcome.decision is Decision.CORRECT and "interior not observed" in outcome.reason


class _FailedAnswer:
    """A model that judged the action failed (recorded answer shape)."""

    name = "recorded"

    def complete(self, request: VlmRequest) -> VlmResponse:
        text = json.dumps({"task_success": False, "failure_reason": "it did not move",
                           "property_updates": [], "new_properties": [],
                           "contents_updates": [], "confidence": 0.6})
        return VlmResponse(text, "recorded", "recorded", 0.01)


def test_rate_zero_changes_nothing_and_bad_settings_are_refused() -> None:
    cfg = config(backend="offline")
    clean = FaultyBackend(make_backend(cfg), 0.0, seed=1)
    result = InteractionAnalyzer(clean, make_world(), cfg).analyze(
        make_window(contact=True, opened_m=0.2, hand=True), primitive())
    assert clean.corruptions == [] and result.rejected == ()
    assert set(REFUTABLE).isdisjoint(UNREFUTABLE)
    with pytest.raises(BackendConfigError):
        FaultyBackend(make_backend(cfg), 1.5)
    with pytest.raises(BackendConfigError):
        FaultyBackend(make_backend(cfg), 0.5, kinds=("gaslight",))
