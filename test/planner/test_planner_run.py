"""The planning loop as a host drives it: hooks, stops, whole instructions, host adapters."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from planner_kitchen import (
    Kitchen,
    RecordedBackend,
    admit_contents,
    build_kitchen,
    locked_unlocked_layout,
    see,
    session_for,
)

from mimir_memory.errors import MemoryStoreError
from mimir_memory.task import GoalStatus, TaskMemory
from mimir_memory.world import WorldMemory
from mimir_planner.config import GateConfig, load_planner_config
from mimir_planner.gate import OperatorGate
from mimir_planner.hosting import RecordingPolicy, TrackedGate, wait_for_first_nodes
from mimir_planner.instructions import parse_instruction
from mimir_planner.memory_query import MemoryQueryError, query_memory
from mimir_planner.policies import VlmPlanner
from mimir_planner.primitives import ExecutableStep
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.runs import (
    ExecutionOutcome,
    ExecutorUnavailableError,
    Observation,
    RunHooks,
    RunStop,
    StepRecord,
)

Kit = tuple[WorldMemory, TaskMemory, Kitchen]


@pytest.fixture
def kitchen(tmp_path: Path) -> Iterator[Kit]:
    world, task, kit = build_kitchen(tmp_path, locked_unlocked_layout())
    yield world, task, kit
    world.close()
    task.close()


class Host(RunHooks):
    """Records what the loop tells it; cancels after ``cancel_after`` planner calls."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.cancel_after = cancel_after
        self.calls: list[int] = []
        self.records: list[StepRecord] = []
        self.view = Observation(np.zeros((4, 4, 3), np.uint8), stamp=1.0)

    def cancelled(self) -> bool:
        return self.cancel_after is not None and len(self.records) >= self.cancel_after

    def observation(self) -> Observation | None:
        return self.view

    def before_step(self, call: int) -> None:
        self.calls.append(call)

    def after_step(self, record: StepRecord) -> None:
        self.records.append(record)


class Failing:
    """An executor that raises ``error`` on its first step."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.steps: list[ExecutableStep] = []

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        self.steps.append(step)
        raise self.error


def test_hooks_see_every_call_and_hand_in_the_view(kitchen: Kit) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    session.submit("find the banana")
    host = Host()
    report = session.run(kit, hooks=host)
    assert report.stop is RunStop.NONE and report.reason == "" and report.error is None
    # the last call found no goal left: it was announced but led to no record
    assert host.calls == list(range(1, report.calls + 2))
    assert host.records == report.records
    assert session.observation is host.view


def test_cancel_stops_between_calls(kitchen: Kit) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    session.submit("find the banana")
    report = session.run(kit, hooks=Host(cancel_after=2))
    assert report.stop is RunStop.CANCELED and report.reason == "canceled by the client"
    assert report.calls == 2 and len(kit.executed) == 2
    assert task.status("g001_find") is GoalStatus.PENDING  # the host decides what follows
    report = session.run(kit, hooks=Host(cancel_after=0))
    assert report.stop is RunStop.CANCELED and report.calls == 0 and len(kit.executed) == 2


def test_a_denied_primitive_stops_the_run(kitchen: Kit) -> None:
    world, task, kit = kitchen
    gate = OperatorGate(GateConfig(enabled=True, timeout_s=0.01))
    session = session_for(world, task, gate=gate)
    session.submit("find the ketchup")
    report = session.run(kit)
    assert report.stop is RunStop.DENIED and report.calls == 1 and kit.executed == []
    assert report.reason.startswith("primitive not approved") and "timed_out" in report.reason
    assert report.error is None


@pytest.mark.parametrize(("error", "stop", "reason"), [
    (ExecutorUnavailableError("no action server"), RunStop.EXECUTOR_UNAVAILABLE,
     "executor unavailable: no action server"),
    (MemoryStoreError("disk gone"), RunStop.FAILED, "MemoryStoreError: disk gone"),
])
def test_executor_and_memory_errors_stop_the_run(kitchen: Kit, error: Exception,
                                                 stop: RunStop, reason: str) -> None:
    world, task, _ = kitchen
    session = session_for(world, task)
    session.submit("find the ketchup")
    executor = Failing(error)
    report = session.run(executor)
    assert report.stop is stop and report.reason == reason and report.error == reason
    assert report.calls == 0 and len(executor.steps) == 1


def test_a_model_failure_stops_the_run(kitchen: Kit) -> None:
    world, task, kit = kitchen
    cfg = load_planner_config()
    policy = VlmPlanner(RecordedBackend([]), PromptLibrary(cfg.prompt_dir))
    session = session_for(world, task, cfg, policy=policy)
    session.submit("find the ketchup")
    report = session.run(kit)
    assert report.stop is RunStop.MODEL_ERROR and report.reason.startswith("planner model")
    assert report.error == report.reason and kit.executed == []


def test_run_instruction_reports_goals_answers_and_progress(kitchen: Kit) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    done = session.run_instruction("find the banana", kit)
    assert done.stop is RunStop.NONE and done.reason == "" and done.progress == 1.0
    assert [(g.goal_id, g.status) for g in done.goals] == [("g001_find", GoalStatus.COMPLETED)]
    assert done.run is not None and done.calls == done.run.calls > 0
    assert [e.node_id for e in done.entities()] == [done.goals[0].entities[0].node_id]
    asked = session.run_instruction("where is the banana?", kit)
    assert asked.stop is RunStop.NONE and asked.calls == 1
    assert len(asked.answers()) == 1 and "banana" in asked.answers()[0]
    unusable = session.run_instruction("   ", kit)
    assert unusable.stop is RunStop.PARSE_FAILED and unusable.reason.startswith(
        "instruction not usable") and unusable.goals == () and unusable.run is None
    assert unusable.progress == 0.0


def test_run_instruction_closes_what_it_leaves_open(kitchen: Kit) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    # a goal of an earlier instruction that never ran is superseded
    session.submit("find the ketchup")
    text = "Pick up the ketchup from a cabinet and place it on the counter."
    short = session.run_instruction(text, kit, budget=1)
    assert short.superseded == ("g001_find",)
    assert task.status("g001_find") is GoalStatus.BLOCKED
    assert short.stop is RunStop.BUDGET_EXHAUSTED and short.calls == 1
    assert short.reason == "step budget of 1 planner calls exhausted"
    # every goal of the instruction, the deferred ones too, is blocked with the reason
    assert len(short.goals) >= 2 and short.progress == 0.0
    assert all(g.status is GoalStatus.BLOCKED for g in short.goals)
    assert not task.pending()
    # a run that ends normally with a blocked goal is BLOCKED, with the goal's reason
    free = session.run_instruction("sing me a song", kit)
    assert free.superseded == () and free.stop is RunStop.BLOCKED
    assert free.reason.startswith(f"{free.goals[0].goal_id}: ")


def test_settle_blocks_goals_still_waiting_on_an_exploration(kitchen: Kit) -> None:
    world, task, _ = kitchen
    session = session_for(world, task)
    result = session.submit("Pick up the ketchup from a cabinet and place it on the counter.")
    assert result.deferred > 0
    assert len(task.agenda()) == len(result.goal_ids) == 1
    assert session.settle("stopped", 5.0) == ["g001_find"]
    assert task.state.status_reason["g001_find"] == "stopped"
    # the goals that waited on the exploration now exist, blocked because it was
    goals = task.agenda()
    assert len(goals) == 1 + result.deferred and not task.pending()
    assert all(task.status(g.goal_id) is GoalStatus.BLOCKED for g in goals)
    assert "g001_find was blocked" in task.state.status_reason[goals[1].goal_id]


def test_wait_for_first_nodes(tmp_path: Path) -> None:
    writer = WorldMemory.open(tmp_path / "world.db")
    reader = WorldMemory.open(tmp_path / "world.db", readonly=True)
    assert not wait_for_first_nodes(reader, wait_s=0.2, settle_s=0.05, cancelled=lambda: False,
                                    poll_s=0.02)
    assert not wait_for_first_nodes(reader, wait_s=30.0, settle_s=0.05,
                                    cancelled=lambda: True)
    timer = threading.Timer(0.1, lambda: see(writer, "cabinet", (1.0, 0.0, 1.0), stamp=1.0))
    timer.start()
    try:
        assert wait_for_first_nodes(reader, wait_s=10.0, settle_s=0.1, cancelled=lambda: False,
                                    poll_s=0.02)
    finally:
        timer.join()
    assert wait_for_first_nodes(reader, wait_s=0.0, settle_s=0.0, cancelled=lambda: False)
    reader.close()
    writer.close()


def test_recording_policy_and_tracked_gate(kitchen: Kit) -> None:
    world, task, kit = kitchen
    session = session_for(world, task)
    recorder = RecordingPolicy(session.policy)
    session.policy = recorder
    session.submit("find the banana")
    session.step(kit)
    answer = recorder.answer()
    assert recorder.name == recorder.inner.name and recorder.context is not None
    assert answer is not None and answer.plan[0].action
    recorder.text = "not json"
    assert recorder.answer() is None
    recorder.reset()
    assert recorder.context is None and recorder.answer() is None

    seen: list[int] = []
    gate = TrackedGate(GateConfig(enabled=True, timeout_s=5.0),
                       lambda request: seen.append(request.request_id))
    first, second = gate.submit("open cabinet_1"), gate.submit("inspect cabinet_1")
    assert seen == [first.request_id, second.request_id]
    assert gate.known(first.request_id) and not gate.known(999)
    gate.approve(first.request_id)
    assert gate.deny_all("shutting down") == 1 and gate.pending() == []


def test_query_memory(kitchen: Kit) -> None:
    world, task, _ = kitchen
    config = load_planner_config()
    admit_contents(world, "cabinet_3", ["ketchup"], stamp=5.0)
    text = "find the ketchup"
    answer = query_memory(parse_instruction(text), text, world, config, task.failed_bindings)
    assert [c.node_id for c in answer.candidates][:1] == ["cabinet_3"]
    assert "cabinet_3" in answer.summary and answer.frames == ()
    assert answer.retrieval_error == ""
    free = "tidy up"
    assert query_memory(parse_instruction(free), free, world, config, ()).summary
    with pytest.raises(MemoryQueryError, match="fridge_9"):
        query_memory(parse_instruction(text), text, world, config, (), focus_ids=["fridge_9"])
