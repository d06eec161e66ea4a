"""Closed-loop planning on real world/task memories: Locked-and-Unlocked, reuse, refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from planner_kitchen import (
    OBJECT_HALF_SIZE,
    Fixture,
    RecordedBackend,
    admit_contents,
    admit_property,
    build_kitchen,
    locked_unlocked_layout,
    observation,
    recorded_text,
    see,
    session_for,
)

from mimir_memory.task import Effect, EffectKind, Feedback, GoalStatus
from mimir_planner.config import GateConfig, load_planner_config
from mimir_planner.errors import InstructionError
from mimir_planner.gate import OperatorGate
from mimir_planner.policies import VlmPlanner
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.runs import ExecutionOutcome, Observation


def _arrive(session, place: str, stamp: float) -> None:
    session.task.update("move_to", Feedback(True, (Effect(EffectKind.ARRIVE, place),)),
                        session.world.state, stamp=stamp)


def _steps(report) -> list[tuple[str, str]]:
    return [(s.primitive, s.target) for s in report.executed()]


@pytest.fixture
def kitchen(kitchen_of):
    return kitchen_of(locked_unlocked_layout())


def _vlm_session(world, task, *answers: str):
    """A session planning with the VLM planner on recorded answers; and its backend."""
    cfg = load_planner_config()
    backend = RecordedBackend([recorded_text(name) for name in answers])
    return session_for(world, task, cfg,
                       policy=VlmPlanner(backend, PromptLibrary(cfg.prompt_dir))), backend


def _first_step(session, kit, instruction: str, outcome: str):
    """Submit ``instruction`` and take one step, which must end in ``outcome``; its record."""
    session.submit(instruction)
    record = session.step(kit)
    assert record is not None and record.outcome == outcome
    return record


@pytest.fixture
def session(kitchen):
    """A session with the repository config on the kitchen's memories."""
    world, task, _ = kitchen
    return session_for(world, task)


def test_locked_and_unlocked_sequence(kitchen, session) -> None:
    world, task, kit = kitchen
    session.submit("Look into upper cabinets and find the banana.")
    first = session.run(kit)
    assert _steps(first) == [
        ("move_to", "cabinet_1"), ("open", "cabinet_1"),
        ("move_to", "cabinet_2"), ("open", "cabinet_2"), ("inspect", "cabinet_2"),
    ]
    assert [r.success for r in first.records if r.step is not None][1] is False
    assert first.completed == ["g001_find"] and not first.blocked
    assert first.calls <= 12
    assert world.node("cabinet_1").properties["locked"].value is True

    # Returned to the first cabinet, then the second instruction (memory not reset).
    _arrive(session, "cabinet_1", 300.0)
    kit.executed.clear()
    second = session.run(kit) if session.submit("Find the ketchup.") else None
    assert second is not None
    assert _steps(second) == [("move_to", "cabinet_3"), ("open", "cabinet_3"),
                              ("inspect", "cabinet_3")]
    targets = {s.target for s in kit.executed}
    assert "cabinet_1" not in targets and "cabinet_2" not in targets
    assert second.completed == ["g002_find"]
    assert task.status("g002_find") is GoalStatus.COMPLETED
    evidence = task.completion_evidence("g002_find")
    assert evidence["effects"][0]["kind"] == "find"


def test_second_instruction_reuses_remembered_contents(kitchen, session) -> None:
    kit = kitchen[2]
    session.submit("Find the banana.")
    session.run(kit)
    kit.executed.clear()
    # A find is a discovery: memory sends the robot straight to the remembered (still open)
    # cabinet, which it inspects once in this instruction; nothing else is re-explored.
    session.submit("Find the banana.")
    again = session.run(kit)
    assert [(s.primitive, s.target) for s in kit.executed] == [("inspect", "cabinet_2")]
    assert again.calls == 2 and again.completed == ["g002_find"]
    kit.executed.clear()
    session.submit("Where is the banana?")
    answer = session.run(kit)
    assert kit.executed == []
    assert "cabinet_2" in answer.answers["g003_question"]


def test_questions_answered_from_memory(kitchen) -> None:
    world, task, kit = kitchen
    admit_contents(world, "cabinet_2", ["banana", "apple"], stamp=5.0)
    admit_contents(world, "cabinet_3", ["ketchup", "mayonnaise"], stamp=5.0)
    admit_property(world, "cabinet_1", "locked", True, stamp=5.0)
    session = session_for(world, task)
    cases = {
        "What is inside cabinet_2?": "banana, apple",
        "What was stored with the mayonnaise?": "ketchup",
        "Which cabinet holds the ketchup?": "cabinet_3",
        "How many apples are in cabinet_2?": "1 apple",
        "Is cabinet_1 locked?": "Yes",
        "Where is the ketchup?": "inside cabinet_3",
    }
    for question, expected in cases.items():
        result = session.submit(question)
        report = session.run(kit)
        (goal_id,) = result.goal_ids
        assert expected in report.answers[goal_id], (question, report.answers)
    assert kit.executed == []


def test_question_without_memory_explores_then_answers(kitchen, session) -> None:
    kit = kitchen[2]
    session.submit("What is inside cabinet_3?")
    report = session.run(kit)
    assert _steps(report) == [("move_to", "cabinet_3"), ("open", "cabinet_3"),
                              ("inspect", "cabinet_3")]
    assert report.answers == {"g001_question": "cabinet_3: ketchup."}


def test_grounding_without_candidate_explores_never_acts_on_object(kitchen, session) -> None:
    _, task, kit = kitchen
    session.submit("Pick up the mustard and place it on the counter")
    goal = task.active_goal()
    assert goal is not None and goal.goal_id == "g001_find"
    ctx = session.context(goal)
    from mimir_planner.grounding import Exploration

    assert isinstance(ctx.grounding, Exploration)
    report = session.run(kit)
    # Every cabinet explored (the locked one fails), nothing picked, then blocked.
    assert all(s.primitive in ("move_to", "open", "inspect") for s in report.executed())
    assert task.status("g001_find") is GoalStatus.BLOCKED
    reason = task.state.status_reason["g001_find"]
    assert "nothing left to explore" in reason and "cabinet_1 (locked)" in reason
    # The deferred pick and place are recorded as blocked, never executed.
    assert [g.goal_id for g in task.agenda()][1:] == ["g002_pick", "g003_place"]
    assert task.status("g002_pick") is GoalStatus.BLOCKED


def test_grounding_blocks_when_nothing_to_explore(tmp_path: Path) -> None:
    world, task, kit = build_kitchen(tmp_path, [
        ("cabinet_1", Fixture("cabinet", (1.0, 0.0, 1.5), locked=True)),
    ])
    admit_property(world, "cabinet_1", "locked", True, stamp=2.0)
    session = session_for(world, task)
    session.submit("find the ketchup")
    report = session.run(kit)
    assert kit.executed == []
    assert report.records[0].outcome == "blocked"
    assert report.blocked == ["g001_find"]
    session.submit("open the fridge")  # no fridge in memory: goal waits on exploring it
    report = session.run(kit)
    assert kit.executed == [] and set(report.blocked) == {"g002_find", "g003_open"}
    world.close()
    task.close()


def test_pick_and_place_through_deferred_goal(kitchen, session) -> None:
    world, task, kit = kitchen
    session.submit("Pick up the ketchup from a cabinet and place it on the counter.")
    report = session.run(kit)
    assert ("pick", "ketchup_1") in _steps(report)
    assert _steps(report)[-1] == ("place", "counter_1")
    assert world.node("ketchup_1").parent == "counter_1"
    assert task.hand is None
    assert task.status("g003_place") is GoalStatus.COMPLETED


def test_a_place_that_fell_picks_the_thing_up_again_and_places_it(kitchen, session) -> None:
    """The executor reported the place done, the analyzer saw the bottle fall: the hand is
    empty (the failed place's release), memory has the bottle on the floor, and the planner
    picks it up from there before placing it again."""
    world, task, kit = kitchen
    kit.drops = 1
    session.submit("Pick up the ketchup from a cabinet and place it on the counter.")
    report = session.run(kit, budget=20)  # the find explores first; twelve calls end in it
    steps = _steps(report)
    first = steps.index(("place", "counter_1"))
    assert steps[first + 1:] == [("move_to", "ketchup_1"), ("pick", "ketchup_1"),
                                 ("move_to", "counter_1"), ("place", "counter_1")]
    assert world.node("ketchup_1").parent == "counter_1" and task.hand is None
    assert task.status("g003_place") is GoalStatus.COMPLETED


def test_open_close_and_go_to_goals(kitchen, session) -> None:
    world, task, kit = kitchen
    session.submit("wipe the counter")  # not a symbolic form: one free-form goal
    assert task.agenda()[0].description == "wipe the counter"
    session.submit("go to the counter")
    session.submit("open cabinet_2, then close it")
    report = session.run(kit)
    # The free-form goal was blocked: the offline planner does not interpret free text.
    assert task.status("g001_task") is GoalStatus.BLOCKED
    assert report.completed == ["g002_go_to", "g003_open", "g004_close"]
    assert world.node("cabinet_2").properties["openable"].is_opened is False
    assert ("close", "cabinet_2") in _steps(report)
    session.submit("go to cabinet_2")  # already there: completed from memory, no motion
    kit.executed.clear()
    again = session.run(kit)
    assert kit.executed == [] and again.completed == ["g005_go_to"]


def test_budget_exhaustion_blocks(kitchen, session) -> None:
    _, task, kit = kitchen
    session.submit("find the ketchup")
    report = session.run(kit, budget=2)
    assert report.budget_exhausted and report.calls == 2
    assert task.status("g001_find") is GoalStatus.BLOCKED


def test_recorded_vlm_plans_unknown_target_and_primitive_refused(kitchen) -> None:
    world, task, kit = kitchen
    session, backend = _vlm_session(world, task, "plan_unknown_target.json",
                                    "plan_unregistered_primitive.json")
    _first_step(session, kit, "Find the ketchup.", "refused")
    assert kit.executed == []
    refusals = [h.detail for h in session.history]
    assert "cabinet_9' is not in the scene graph" in refusals[0]
    assert "'teleport' is not a registered primitive" in refusals[1]
    assert task.status("g001_find") is GoalStatus.BLOCKED
    # The refusal reason was fed back to the model in the replanning request.
    prompt = backend.requests[1].messages[0].parts[0].text  # type: ignore[union-attr]
    assert "your last step was refused" in prompt


def test_recorded_vlm_plan_executes_aliases_and_refuses_locked(kitchen) -> None:
    world, task, kit = kitchen
    admit_property(world, "cabinet_1", "locked", True, stamp=2.0)
    session, _ = _vlm_session(world, task, "plan_reopen_locked.json",
                              "plan_move_cabinet_3.json")
    _arrive(session, "cabinet_1", 3.0)
    _first_step(session, kit, "Find the ketchup.", "executed")
    assert "remembered as locked" in session.history[0].detail
    assert [(s.primitive, s.action, s.target) for s in kit.executed] == [
        ("move_to", "move_to", "cabinet_3")]


def test_recorded_vlm_answers_malformed_and_unsupported_finish(kitchen) -> None:
    world, task, kit = kitchen
    session, backend = _vlm_session(world, task, "plan_malformed.json",
                                    "plan_claims_found.json")
    # One malformed answer, then an empty plan memory does not support: not completed.
    record = _first_step(session, kit, "Find the ketchup.", "rejected_finish")
    assert task.status("g001_find") is GoalStatus.PENDING
    assert "does not hold 'ketchup'" in record.detail
    backend.answers = [recorded_text("plan_malformed.json")] * 2
    record = session.step(kit)
    assert record is not None and record.outcome == "invalid_answer"
    assert task.status("g001_find") is GoalStatus.BLOCKED


def test_recorded_vlm_question_answer_and_prompt_contents(kitchen) -> None:
    world, task, kit = kitchen
    admit_contents(world, "cabinet_3", ["ketchup"], stamp=5.0)
    session, backend = _vlm_session(world, task, "plan_answer_question.json")
    session.submit("Where is the ketchup?")
    report = session.run(kit)
    assert report.answers["g001_question"] == "The ketchup is inside cabinet_3."
    prompt = backend.requests[0].messages[0].parts[0].text  # type: ignore[union-attr]
    for piece in ("Where is the ketchup", "cabinet_3", "- move_to:", '"grounded": "cabinet_3"'):
        assert piece in prompt


def test_free_form_instruction_goes_to_vlm(kitchen) -> None:
    world, task, kit = kitchen
    session, _ = _vlm_session(world, task, "plan_answer_question.json")
    result = session.submit("Tidy up whatever looks out of place")
    assert not result.instruction.symbolic
    report = session.run(kit)
    assert report.completed == ["g001_task"]


def test_operator_gate_denial_and_timeout_stop_execution(kitchen) -> None:
    world, task, kit = kitchen
    cfg = load_planner_config()
    gate = OperatorGate(GateConfig(enabled=True, timeout_s=0.01))
    session = session_for(world, task, cfg, gate=gate)
    record = _first_step(session, kit, "find the ketchup", "denied")
    assert "timed_out" in record.detail and kit.executed == []
    assert task.status("g001_find") is GoalStatus.PENDING


def test_bad_instructions_are_typed_errors(kitchen) -> None:
    world, task, _ = kitchen
    session = session_for(world, task)
    for bad in ("", "   ", 42, "x" * 600, "find \x00 the mug"):
        with pytest.raises(InstructionError):
            session.submit(bad)  # type: ignore[arg-type]
    assert task.agenda() == []


def test_clutter_aware_pick_takes_the_ketchup_with_room_beside_it(tmp_path: Path) -> None:
    world, task, kit = build_kitchen(tmp_path, [
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.4, 1.6), contents=("ketchup",))),
        ("cabinet_2", Fixture("cabinet", (1.1, -0.4, 1.6), contents=("ketchup",))),
    ])
    for cab in ("cabinet_1", "cabinet_2"):
        kit.fixtures[cab].is_open = True
        admit_property(world, cab, "openable", True, is_opened=True, stamp=2.0)
        see(world, "ketchup", (1.1, 0.4 if cab == "cabinet_1" else -0.4, 1.55), stamp=2.0)
        admit_contents(world, cab, ["ketchup"], stamp=2.0)
    # With nothing beside either bottle the first-ranked one is taken.
    plain_session = session_for(world, task)
    probe = plain_session.submit("Pick up the ketchup from a cabinet")
    assert task.agenda()[-1].postcondition.args == ("ketchup_1",)
    task.set_status(probe.goal_ids[0], GoalStatus.BLOCKED, stamp=5.0)
    # The cameras saw a jar tight against either side of the first bottle (1 cm to spare).
    see(world, "mustard", (1.1, 0.49, 1.55), stamp=3.0, half=0.04)
    see(world, "mayonnaise", (1.1, 0.31, 1.55), stamp=3.0, half=0.04)
    session = session_for(world, task)
    _arrive(session, "cabinet_1", 5.0)  # ends in front of the cluttered cabinet
    session.submit("Pick up the ketchup from a cabinet and place it on the counter.")
    report = session.run(kit)
    assert ("pick", "ketchup_2") in _steps(report)
    assert ("pick", "ketchup_1") not in _steps(report)
    assert world.node("ketchup_2").parent == "counter_1"
    world.close()
    task.close()


def test_new_session_continues_stored_goals(kitchen) -> None:
    world, task, kit = kitchen
    first = session_for(world, task)
    first.submit("find the ketchup")
    first.submit("where is the ketchup?")
    first.submit("open cabinet_2, then close it")
    first.step(kit)  # one step, then the process "restarts"
    restarted = session_for(world, task)
    report = restarted.run(kit, budget=30)
    assert set(report.completed) == {"g001_find", "g002_question", "g003_open", "g004_close"}
    assert "cabinet_3" in report.answers["g002_question"]


@pytest.fixture
def mugs(tmp_path: Path):
    """A counter and a table with a mug on each (mug_1 on the counter)."""
    world, task, kit = build_kitchen(tmp_path, [
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False)),
        ("table_1", Fixture("table", (0.0, 1.0, 0.7), opens=False)),
    ])
    # the cameras saw one mug on each (the planner infers the holder from where it stands)
    world.ingest([observation("mug", (1.0, 0.1, 0.95), OBJECT_HALF_SIZE, 2.0),
                  observation("mug", (0.0, 1.0, 0.75), OBJECT_HALF_SIZE, 2.0)])
    yield world, task, kit
    world.close()
    task.close()


def _slippery(kit, misses: dict[str, int], code: str = "MISSED_GRASP",
              detail: str = "jaws closed on nothing"):
    """Executor whose picks of the named mugs fail (``code``) the given number of times."""
    real_execute = kit.execute

    def execute(step):
        if step.primitive == "pick" and misses.get(step.target, 0) > 0:
            misses[step.target] -= 1
            kit.executed.append(step)
            return ExecutionOutcome(Feedback(False), f"{code}: {detail}",
                                    kit._tick(), code=code, reported=False)
        return real_execute(step)

    return execute


def _pick_up_a_mug(mugs, misses: dict[str, int], code: str = "MISSED_GRASP",
                   detail: str = "jaws closed on nothing"):
    """Ask to pick up a mug while the named mugs' picks fail; the session and its report."""
    world, task, kit = mugs
    kit.execute = _slippery(kit, misses, code, detail)
    session = session_for(world, task)
    session.submit("pick up the mug")
    return session, session.run(kit)


def test_missed_grasp_is_retried_once(mugs) -> None:
    _, task, kit = mugs
    _, report = _pick_up_a_mug(mugs, {"mug_1": 1})
    assert [(s.primitive, s.target) for s in kit.executed].count(("pick", "mug_1")) == 2
    assert report.completed == ["g001_pick"] and task.hand == "mug_1"
    assert task.failed_bindings == []


def test_a_lost_robot_link_spends_no_retry_on_the_target(mugs) -> None:
    """LINK_LOST says the robot failed, not the mug: three lost links in a row use none of
    the mug's retry allowance and record no failed binding; the fourth try picks it."""
    _, task, kit = mugs
    _, report = _pick_up_a_mug(mugs, {"mug_1": 3}, "LINK_LOST",
                               "robot link lost: arm: get_state() unanswered after 5.00 s")
    assert [(s.primitive, s.target) for s in kit.executed].count(("pick", "mug_1")) == 4
    assert report.completed == ["g001_pick"] and task.hand == "mug_1"
    assert task.failed_bindings == []


def test_failed_pick_becomes_contradicted_binding(mugs) -> None:
    _, task, kit = mugs
    session, report = _pick_up_a_mug(mugs, {"mug_1": 5})
    # the mug was only seen on the counter (no parent written), so the binding names no source
    assert [(b.object_id, b.source_id) for b in task.failed_bindings] == [("mug_1", None)]
    reason = task.failed_bindings[0].reason
    assert "retry allowance of 1 is spent" in reason and "jaws closed on nothing" in reason
    # The goal was bound to mug_1 at submission; after one retry the contradicted binding
    # blocks it (fail closed) instead of grasping at it until the budget runs out.
    assert report.blocked == ["g001_pick"] and report.calls < 12
    assert [(s.primitive, s.target) for s in kit.executed].count(("pick", "mug_1")) == 2
    session.submit("pick up the mug")  # a new goal grounds to the remaining candidate
    again = session.run(kit)
    assert ("pick", "mug_2") in _steps(again) and again.completed == ["g002_pick"]


def test_the_robot_is_where_the_current_view_was_taken(session) -> None:
    assert session.robot().position is None  # nothing observed yet
    image = np.zeros((4, 4, 3), np.uint8)
    session.observe(Observation(image))  # a view without a pose says nothing of the robot
    assert session.robot().position is None
    pose = np.eye(4)
    pose[:3, 3] = (0.4, -0.6, 1.4)
    session.observe(Observation(image, camera_to_map=pose))
    assert session.robot().position == (0.4, -0.6)
