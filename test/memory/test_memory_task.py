"""Task memory: agenda order, postcondition-gated completion, persistence, bad input."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memory_helpers import obs

from mimir_memory.errors import (
    InvalidGoalError,
    InvalidValueError,
    UnknownGoalError,
)
from mimir_memory.events import Evidence, Verdict
from mimir_memory.graph import SceneGraphState
from mimir_memory.task import (
    PREDICATES,
    Effect,
    EffectKind,
    Feedback,
    GoalStatus,
    Holding,
    Inside,
    TaskMemory,
    parse_predicate,
)
from mimir_memory.world import WorldMemory


@pytest.fixture
def task(tmp_path: Path) -> Iterator[TaskMemory]:
    memory = TaskMemory.open(tmp_path / "task.db")
    yield memory
    memory.close()


def _kitchen(tmp_path: Path) -> WorldMemory:
    world = WorldMemory.open(tmp_path / "world.db")
    world.ingest([obs("mug", [0, 0, 0]), obs("cabinet", [2, 0, 0]), obs("table", [4, 0, 0])])
    return world


def test_agenda_puts_prerequisites_first_then_task_order(task: TaskMemory) -> None:
    task.add_goals(
        [
            ("place", "inside(mug_1, cabinet_1)", ["open", "pick"], "put the mug away"),
            ("pick", "holding(mug_1)", [], ""),
            ("open", "is_open(cabinet_1)", [], ""),
            ("report", "answered(where is the mug)", [], ""),
        ],
        stamp=0.0,
    )
    assert [g.goal_id for g in task.agenda()] == ["pick", "open", "place", "report"]
    assert task.active_goal().goal_id == "pick"  # type: ignore[union-attr]


def test_goal_completes_only_when_the_effect_establishes_the_postcondition(
    task: TaskMemory, tmp_path: Path
) -> None:
    world = _kitchen(tmp_path)
    task.add_goal("open", "is_open(cabinet_1)", stamp=0.0)
    task.add_goal("pick", Holding(("mug_1",)), stamp=0.0)
    task.add_goal("place", "inside(mug_1, cabinet_1)", prerequisites=["open", "pick"], stamp=0.0)
    # Navigation succeeds but establishes nothing about the goal.
    result = task.update(
        "navigate",
        Feedback(True, (Effect(EffectKind.ARRIVE, "cabinet_1"),)),
        world.state,
        stamp=1.0,
    )
    assert not result.completed and task.status("open") is GoalStatus.PENDING
    # A failed opening changes nothing.
    result = task.update("open", Feedback(False, ()), world.state, stamp=2.0)
    assert not result.completed and result.reason == "action failed"
    # The opening "succeeded" but the effect says the door is still shut.
    result = task.update(
        "open",
        Feedback(True, (Effect(EffectKind.STATE, "cabinet_1", "is_open", False),)),
        world.state,
        stamp=3.0,
    )
    assert not result.completed
    world.set_property("cabinet_1", "openable", True, confidence=0.9, stamp=4.0, is_opened=True)
    result = task.update(
        "open",
        Feedback(True, (Effect(EffectKind.STATE, "cabinet_1", "is_open", True),)),
        world.state,
        stamp=4.0,
        evidence=Evidence(keyframe_ids=("kf_after",)),
    )
    assert result.completed and result.next_goal == "pick"
    assert task.completion_evidence("open")["evidence"]["keyframe_ids"] == ["kf_after"]
    result = task.update(
        "pick", Feedback(True, (Effect(EffectKind.GRASP, "mug_1"),)), world.state, stamp=5.0
    )
    assert result.completed and task.hand == "mug_1" and result.next_goal == "place"
    result = task.update(
        "place",
        Feedback(True, (Effect(EffectKind.PLACE, "mug_1", "cabinet_1", "container"),)),
        world.state,
        stamp=6.0,
    )
    assert result.completed and task.hand is None and result.next_goal is None
    assert task.active_goal() is None
    world.close()


def test_a_failed_place_that_let_go_empties_the_hand_and_completes_nothing(
    task: TaskMemory, tmp_path: Path
) -> None:
    world = _kitchen(tmp_path)
    task.add_goal("pick", Holding(("mug_1",)), stamp=0.0)
    task.add_goal("place", "inside(mug_1, cabinet_1)", prerequisites=["pick"], stamp=0.0)
    task.update("pick", Feedback(True, (Effect(EffectKind.GRASP, "mug_1"),)), world.state,
                stamp=1.0)
    assert task.hand == "mug_1" and task.active_goal().goal_id == "place"  # type: ignore[union-attr]
    # the jaws opened, the mug fell: the place failed, the hand is empty all the same
    result = task.update("place", Feedback(False, (Effect(EffectKind.RELEASE, "mug_1"),)),
                         world.state, stamp=2.0)
    assert not result.completed and result.reason == "action failed"
    assert task.hand is None and task.status("place") is GoalStatus.PENDING
    assert [e.payload for e in result.events] == [{"holding": None}]
    # only what the hand holds is let go, and a failure carries no other effect
    task.update("pick", Feedback(True, (Effect(EffectKind.GRASP, "mug_1"),)), world.state,
                stamp=3.0)
    for effects in ((Effect(EffectKind.RELEASE, "cup_1"),),
                    (Effect(EffectKind.PLACE, "mug_1", "cabinet_1", "container"),),
                    (Effect(EffectKind.ARRIVE, "cabinet_1"),)):
        result = task.update("place", Feedback(False, effects), world.state, stamp=4.0)
        assert result.events == () and task.hand == "mug_1"
    # a release the harness rejected changes nothing either
    result = task.update("place", Feedback(False, (Effect(EffectKind.RELEASE, "mug_1"),)),
                         world.state, stamp=5.0, verdict=Verdict.REJECT)
    assert result.events == () and task.hand == "mug_1"
    world.close()


def test_blocked_prerequisite_keeps_dependent_goal_back(task: TaskMemory) -> None:
    task.add_goal("open", "is_open(cabinet_1)", stamp=0.0)
    task.add_goal("place", "inside(mug_1, cabinet_1)", prerequisites=["open"], stamp=0.0)
    task.add_goal("report", "answered(q1)", stamp=0.0)
    task.set_status("open", GoalStatus.BLOCKED, stamp=1.0, reason="cabinet locked")
    assert task.active_goal().goal_id == "report"  # type: ignore[union-attr]
    assert task.snapshot()["agenda"][0]["reason"] == "cabinet locked"
    task.set_status("open", "pending", stamp=2.0)
    assert task.active_goal().goal_id == "open"  # type: ignore[union-attr]
    with pytest.raises(InvalidGoalError):
        task.set_status("open", GoalStatus.COMPLETED, stamp=3.0)
    with pytest.raises(InvalidGoalError):
        task.set_status("open", "finished", stamp=3.0)
    with pytest.raises(UnknownGoalError):
        task.set_status("nope", GoalStatus.BLOCKED, stamp=3.0)


def test_task_memory_restarts_with_its_state(tmp_path: Path) -> None:
    world = _kitchen(tmp_path)
    path = tmp_path / "task.db"
    with TaskMemory.open(path) as task:
        task.add_goal("find", "found(banana)", stamp=0.0)
        task.add_goal("pick", "holding(mug_1)", stamp=0.0)
        task.record_binding_failure(
            "pick", "mug_1", source_id="cabinet_1", stamp=1.0, reason="mug not in cabinet"
        )
        task.update(
            "look", Feedback(True, (Effect(EffectKind.FIND, "banana"),)), world.state, stamp=2.0
        )
        task.update(
            "pick", Feedback(True, (Effect(EffectKind.GRASP, "mug_1"),)), world.state, stamp=3.0
        )
        task.update(
            "say",
            Feedback(True, (Effect(EffectKind.ANSWER, "q", value="yes"),)),
            world.state,
            stamp=4.0,
        )
        snapshot = task.snapshot()
    with TaskMemory.open(path) as again:
        assert again.snapshot() == snapshot
        assert again.is_binding_failed("mug_1", "cabinet_1")
        assert not again.is_binding_failed("mug_1", "drawer_2")
        assert again.hand == "mug_1"
        assert again.status("find") is GoalStatus.COMPLETED
    world.close()


def test_task_memory_can_share_the_world_log(tmp_path: Path) -> None:
    world = _kitchen(tmp_path)
    task = TaskMemory(world.log)
    task.add_goal("at", "at(robot, table_1)", stamp=0.0)
    result = task.update(
        "navigate",
        Feedback(True, (Effect(EffectKind.ARRIVE, "table_1"),)),
        world.state,
        stamp=1.0,
    )
    assert result.completed
    world.refresh()
    snapshot = world.graph_snapshot()
    world.close()
    with WorldMemory.open(tmp_path / "world.db") as again:
        assert again.graph_snapshot()["nodes"] == snapshot["nodes"]
        assert TaskMemory(again.log).status("at") is GoalStatus.COMPLETED


def test_inside_uses_world_parent_or_contents(tmp_path: Path) -> None:
    world = _kitchen(tmp_path)
    task = TaskMemory.open(tmp_path / "t.db")
    task.add_goal("g", Inside(("mug_1", "cabinet_1")), stamp=0.0)
    world.set_contents("cabinet_1", [{"name": "mug"}], is_empty=False, stamp=1.0)
    # Contents already list a mug, but the release effect must touch the goal's entities.
    result = task.update(
        "wave", Feedback(True, (Effect(EffectKind.RELEASE, "table_1"),)), world.state, stamp=2.0
    )
    assert not result.completed
    result = task.update(
        "drop", Feedback(True, (Effect(EffectKind.RELEASE, "mug_1"),)), world.state, stamp=3.0
    )
    assert result.completed
    task.close()
    world.close()


def test_bad_goals_and_feedback_are_refused(task: TaskMemory) -> None:
    task.add_goal("a", "holding(x)", stamp=0.0)
    count = task.log.count()
    with pytest.raises(InvalidGoalError):
        task.add_goal("a", "holding(y)", stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goal("b", "holding(y)", prerequisites=["zzz"], stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goals([("c", "holding(y)", ["d"], ""), ("d", "holding(z)", ["c"], "")], stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goal("e", "teleport(x)", stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goal("e", "holding(x, y)", stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goal("e", "at(mug, table)", stamp=0.0)
    with pytest.raises(InvalidGoalError):
        task.add_goals([("e", "holding(x)")], stamp=0.0)  # type: ignore[list-item]
    with pytest.raises(InvalidValueError):
        task.add_goal("", "holding(x)", stamp=0.0)
    assert task.log.count() == count
    with pytest.raises(InvalidValueError):
        Feedback("yes", ())  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        Effect("teleport", "x")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError):
        Effect(EffectKind.PLACE, "x", "y", "beside")
    with pytest.raises(InvalidValueError):
        task.update("pick", "ok", SceneGraphState(), stamp=1.0)  # type: ignore[arg-type]
    with pytest.raises(UnknownGoalError):
        task.record_binding_failure("nope", "x", stamp=1.0)
    with pytest.raises(UnknownGoalError):
        task.completion_evidence("a")


@given(
    st.sampled_from(sorted(PREDICATES)),
    st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789 ", min_size=1, max_size=8)
        .map(str.strip)
        .filter(bool),
        min_size=1,
        max_size=3,
    ),
)
def test_predicate_text_round_trip(name: str, args: list[str]) -> None:
    if name == "at":
        args = ["robot", *args[:1]]
    text = f"{name}({', '.join(args)})"
    try:
        predicate = parse_predicate(text)
    except InvalidGoalError:
        assert len(args) != PREDICATES[name].ARITY
        return
    assert str(predicate) == text
    assert parse_predicate(str(predicate)) == predicate


@given(st.text(max_size=30))
def test_predicate_parser_never_crashes(text: str) -> None:
    with contextlib.suppress(InvalidGoalError):
        parse_predicate(text)
