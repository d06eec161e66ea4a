"""Step verdicts and step effects (mimir_planner.outcomes), without ROS."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from planner_kitchen import admit_property

from mimir_memory.task import Effect, EffectKind
from mimir_memory.world import WorldMemory
from mimir_planner.config import load_planner_config
from mimir_planner.outcomes import (
    Verification,
    fixture_opens,
    judge,
    place_relation,
    step_effects,
    step_outcome,
)
from mimir_planner.primitives import ExecutableStep
from mimir_planner.runs import Observation

PRIMITIVES = ("move_to", "open", "close", "pick", "place", "inspect")


@pytest.fixture
def world(seed_world: Callable[..., WorldMemory]) -> WorldMemory:
    """cabinet_1 (opens by label), counter_1 (does not), mug_1 on the counter."""
    return seed_world([("cabinet", (1.1, 0.0, 1.6)), ("counter", (1.0, 0.5, 0.9)),
                       ("mug", (1.0, 0.5, 0.95))], [("mug_1", "counter_1", "surface")])


def _step(primitive: str, target: str = "cabinet_1") -> ExecutableStep:
    return ExecutableStep(primitive, primitive, target, "sim_tidybot", goal_id="g001")


def _by_label(node: object) -> bool:
    return getattr(node, "label", "") == "cabinet"


def _effects(effects: tuple) -> list[tuple[str, str, str | None, object]]:
    return [(e.kind.value, e.subject, e.target, e.value) for e in effects]


def test_effects_of_every_primitive(world: WorldMemory) -> None:
    state = world.state
    assert _effects(step_effects(_step("move_to"), state, None, _by_label)) == [
        (EffectKind.ARRIVE.value, "cabinet_1", None, None)]
    opened = step_effects(_step("open"), state, None, _by_label)
    assert _effects(opened) == [(EffectKind.STATE.value, "cabinet_1", "is_open", True)]
    closed = step_effects(_step("close"), state, None, _by_label)
    assert _effects(closed) == [(EffectKind.STATE.value, "cabinet_1", "is_open", False)]
    assert _effects(step_effects(_step("pick", "mug_1"), state, None, _by_label)) == [
        (EffectKind.GRASP.value, "mug_1", None, None)]
    placed = step_effects(_step("place"), state, "mug_1", _by_label)
    assert _effects(placed) == [(EffectKind.PLACE.value, "mug_1", "cabinet_1", "container")]
    # nothing task memory tracks: an inspection, a place with an empty hand, anything else
    assert step_effects(_step("inspect"), state, None, _by_label) == ()
    assert step_effects(_step("place"), state, None, _by_label) == ()
    assert step_effects(_step("wave"), state, None, _by_label) == ()


def test_place_relation_prefers_memory_then_the_destination_kind(world: WorldMemory) -> None:
    state = world.state
    # memory already has the mug on the counter: its relation stands
    assert place_relation(state, "mug_1", "counter_1", _by_label) == "surface"
    assert place_relation(state, "mug_1", "counter_1", lambda _n: True) == "surface"
    # otherwise a destination that opens holds it, anything else carries it
    assert place_relation(state, "mug_1", "cabinet_1", _by_label) == "container"
    assert place_relation(state, "mug_1", "cabinet_1", lambda _n: False) == "surface"
    assert place_relation(state, "mug_1", "fridge_9", lambda _n: True) == "surface"
    assert place_relation(state, "cup_9", "cabinet_1", _by_label) == "container"


def test_fixture_opens_from_memory_before_the_label(world: WorldMemory) -> None:
    config = load_planner_config()
    assert fixture_opens(world.node("cabinet_1"), config)
    assert not fixture_opens(world.node("counter_1"), config)
    admit_property(world, "cabinet_1", "openable", False, stamp=3.0)
    assert not fixture_opens(world.node("cabinet_1"), config)
    admit_property(world, "counter_1", "openable", True, stamp=3.0)
    assert fixture_opens(world.node("counter_1"), config)


def test_judge_combines_the_executor_report_with_the_analyzer() -> None:
    verified_ok = Verification(True, True)
    verified_failed = Verification(True, False, "door did not move")
    unverified = Verification(False, reason="the interaction analyzer is not available")
    assert judge(True, "OPENED", verified_ok, require_verification=True) == (
        True, "OPENED; verified by the analyzer")
    assert judge(True, "OPENED", verified_failed, require_verification=True) == (
        False, "OPENED; the analyzer found it failed: door did not move")
    assert judge(False, "NO_MOTION: stuck", verified_failed, require_verification=True) == (
        False, "NO_MOTION: stuck; analyzer: door did not move")
    assert judge(False, "NO_MOTION", Verification(True, False), require_verification=True) == (
        False, "NO_MOTION; analyzer: failure confirmed")
    # a success the executor reported but nobody could judge
    success, detail = judge(True, "OPENED", unverified, require_verification=True)
    assert not success and detail == (
        "OPENED; not verified: the interaction analyzer is not available")
    assert judge(True, "OPENED", unverified, require_verification=False)[0]
    assert not judge(False, "FAILED", unverified, require_verification=False)[0]
    # the analyzer's success never turns the executor's failure into one
    assert not judge(False, "MISSED_GRASP", verified_ok, require_verification=True)[0]


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_failed_steps_carry_no_effects(world: WorldMemory, primitive: str) -> None:
    out = step_outcome(_step(primitive), False, "failed", 4.0, world=world.state,
                       holding="mug_1", opens=_by_label, code="EXECUTION_FAILED",
                       reported=False)
    assert not out.feedback.success and out.feedback.effects == ()
    assert out.code == "EXECUTION_FAILED" and out.reported is False and out.stamp == 4.0


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_a_place_reported_done_that_failed_still_let_go(world: WorldMemory,
                                                         primitive: str) -> None:
    """The executor opened the jaws (PLACED) and the analyzer saw the thing fall: the place
    failed, and its one effect is the release; no other reported-done failure has any."""
    out = step_outcome(_step(primitive), False, "PLACED; the analyzer found it failed", 4.0,
                       world=world.state, holding="mug_1", opens=_by_label, code="PLACED",
                       reported=True)
    assert not out.feedback.success
    if primitive == "place":
        assert out.feedback.effects == (Effect(EffectKind.RELEASE, "mug_1"),)
    else:
        assert out.feedback.effects == ()
    # with nothing in the hand there is nothing to let go
    empty = step_outcome(_step(primitive), False, "failed", 4.0, world=world.state,
                         holding=None, opens=_by_label, reported=True)
    assert empty.feedback.effects == ()


@pytest.mark.parametrize("primitive", PRIMITIVES)
def test_successful_steps_carry_their_effects(world: WorldMemory, primitive: str) -> None:
    view = Observation(np.zeros((4, 4, 3), np.uint8), stamp=5.0)
    step = _step(primitive, "mug_1" if primitive == "pick" else "cabinet_1")
    out = step_outcome(step, True, "done", None, world=world.state, holding="mug_1",
                       opens=_by_label, observation=view)
    assert out.feedback.success and out.observation is view and out.stamp is None
    assert out.feedback.effects == step_effects(step, world.state, "mug_1", _by_label)
    assert bool(out.feedback.effects) == (primitive != "inspect")
    # no word from the executor counts as a failure report
    assert out.reported is False and out.code == ""
