"""The ROS-free parts of the simulation bridge: sim thread, execution and instruction desks,
ground-truth segmentation and the bridge's settings."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import json
import threading
import time
from typing import Any

import pytest

from mimir_sim.bridge_config import (
    BridgeStartupError,
    SimBridgeConfig,
    build_sim,
    label_map_for,
    resolve_vocabulary,
)
from mimir_sim.embodiment import PrimitiveRequest, SimEmbodiment, TargetSpec
from mimir_sim.entity_labels import LabelMap
from mimir_sim.execution import FEEDBACK_PERIOD, ExecutionDesk, describe_run
from mimir_sim.instruction_desk import (
    MISMATCH,
    NONE,
    UNKNOWN_INSTRUCTION,
    InstructionDesk,
    JudgeResult,
    NamedEntity,
)
from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim
from mimir_sim.sim_thread import SimThread, SimThreadStoppedError
from mimir_sim.truth_segmentation import TruthSegmenter

# ------------------------------------------------------------------------------- sim thread


class _FakeSim:
    """Counts idle steps and records the thread that stepped it."""

    def __init__(self) -> None:
        self.time = 0.0
        self.steps = 0
        self.threads: set[str] = set()
        self.shut_down = False

    def step_seconds(self, seconds: float) -> None:
        self.time += seconds
        self.steps += 1
        self.threads.add(threading.current_thread().name)
        time.sleep(0.001)

    def shutdown(self) -> None:
        self.shut_down = True


def _thread(sim: _FakeSim, real_time_factor: float = 0.0, **kwargs: Any) -> SimThread:
    """A sim thread stepping 0.05 s (free-running unless ``real_time_factor`` > 0)."""
    args: dict[str, Any] = {"setup": lambda: None, "on_failure": lambda _err: True}
    args.update(kwargs)
    return SimThread(sim, 0.05, real_time_factor, **args)  # type: ignore[arg-type]


def test_sim_thread_steps_when_idle_and_runs_jobs_in_its_own_thread() -> None:
    sim = _FakeSim()
    setup_threads: list[str] = []
    thread = _thread(sim, setup=lambda: setup_threads.append(threading.current_thread().name))
    thread.start()
    try:
        assert thread.submit(lambda: threading.current_thread().name) == "sim_bridge"
        deadline = time.monotonic() + 5.0
        while sim.steps < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sim.steps >= 3
        assert sim.threads == {"sim_bridge"}
        assert setup_threads == ["sim_bridge"]
    finally:
        thread.stop()
    assert sim.shut_down
    assert thread.stopping


def test_sim_thread_hands_job_errors_back_and_refuses_after_stop() -> None:
    sim = _FakeSim()
    failed: list[Exception] = []
    thread = _thread(sim, on_job_failed=failed.append)
    thread.start()

    def boom() -> None:
        raise ValueError("bad job")

    with pytest.raises(ValueError, match="bad job"):
        thread.submit(boom)
    assert len(failed) == 1
    assert thread.submit(lambda: 7) == 7  # the thread survives a failed job
    thread.stop()
    with pytest.raises(SimThreadStoppedError):
        thread.submit(lambda: 1)


def test_sim_thread_reports_a_failed_loop_and_stops() -> None:
    sim = _FakeSim()
    seen: list[Exception] = []

    def setup() -> None:
        raise RuntimeError("setup failed")

    def on_failure(err: Exception) -> bool:
        seen.append(err)
        return False  # an expected end: not re-raised

    thread = _thread(sim, setup=setup, on_failure=on_failure)
    thread.start()
    with pytest.raises(SimThreadStoppedError):
        thread.submit(lambda: 1)
    assert [str(e) for e in seen] == ["setup failed"]
    assert sim.shut_down


def test_pace_holds_simulation_time_to_the_real_time_factor() -> None:
    thread = _thread(_FakeSim(), 2.0)
    start = time.monotonic()
    thread.pace(0.0)  # anchors
    thread.pace(0.2)  # 0.2 s of sim time at factor 2 is 0.1 s of wall time
    assert time.monotonic() - start >= 0.09
    free = _thread(_FakeSim(), 0.0)
    start = time.monotonic()
    free.pace(0.0)
    free.pace(100.0)
    assert time.monotonic() - start < 0.05


# ------------------------------------------------------------------- desks on a simulator


@pytest.fixture(scope="module")
def sim(tidybot_dir):  # type: ignore[no-untyped-def]
    s = KitchenSim.from_scenario(load_scenario("locked_unlocked"), tidybot_dir)
    yield s
    s.shutdown()


def test_execution_desk_tracks_the_running_primitive(sim: KitchenSim) -> None:
    embodiment = SimEmbodiment(sim)
    desk = ExecutionDesk(sim, embodiment)
    position = tuple(float(v) for v in sim.entity_position("cab_1"))
    request = PrimitiveRequest("inspect", TargetSpec("cabinet_1", "cabinet", position))
    prepared = embodiment.prepare(request)
    token = object()
    assert not desk.is_running(token)
    assert desk.target_state(None) is None
    active = desk.begin(token, request, prepared)
    assert desk.is_running(token) and not desk.is_running(object())
    assert active.interaction_id == f"sim_inspect_0001_{round(sim.time * 1000)}"
    state = desk.target_state(active)
    assert state is not None and state.target_id == "cabinet_1" and state.sim_fixture == "cab_1"
    assert desk.feedback_due(sim.time) is active
    assert desk.feedback_due(sim.time + FEEDBACK_PERIOD / 2) is None
    assert desk.feedback_due(sim.time + FEEDBACK_PERIOD) is active
    assert desk.phase("inspect") == "arm"  # standing still, touching nothing
    desk.finish()
    assert desk.active is None and desk.feedback_due(sim.time + 10.0) is None
    again = desk.begin(token, request, prepared)
    assert again.interaction_id.startswith("sim_inspect_0002_")
    desk.finish()


def test_instruction_desk_checks_index_and_text(sim: KitchenSim) -> None:
    desk = InstructionDesk(sim, SimEmbodiment(sim), discover_min_pixels=150)
    assert desk.begin(5, "", False).code == UNKNOWN_INSTRUCTION
    wrong = desk.begin(0, "Find the ketchup.", False)
    assert wrong.code == MISMATCH and "Find the ketchup." in wrong.message
    assert desk.begin(0, "  look into upper cabinets and find the BANANA. ", False).code == NONE
    assert sim.instruction == 0
    missing = desk.judge(9, [])
    assert missing.code == UNKNOWN_INSTRUCTION and missing.details_json == ""


def test_instruction_desk_judges_and_binds_named_entities(sim: KitchenSim) -> None:
    desk = InstructionDesk(sim, SimEmbodiment(sim), discover_min_pixels=150)
    banana = tuple(float(v) for v in sim.entity_position("banana_1"))
    result = desk.judge(
        0,
        ["banana"],
        [NamedEntity("obj_7", "banana", banana), NamedEntity("", "spaceship", (9.0, 9.0, 9.0))],
    )
    assert isinstance(result, JudgeResult) and result.code == NONE
    details = json.loads(result.details_json)
    assert details["index"] == 0 and details["family"] == "finding"
    assert details["answer_bound"]["obj_7"] == "banana_1"
    assert details["answer_bound"]["spaceship"].startswith("unbound: ")
    assert [c["type"] for c in details["criteria"]] == ["object_discovered"]
    assert result.progress == (1.0 if result.success else 0.0)


def test_instruction_desk_records_visible_objects_from_frames(sim: KitchenSim) -> None:
    desk = InstructionDesk(sim, SimEmbodiment(sim), discover_min_pixels=1)
    sim.begin_instruction(1)
    frame = sim.render("pole", 160, 120)
    desk.record_frame(frame)
    assert set(desk.visibility.peak_pixels(1)) <= set(sim.scene.objects)
    off = InstructionDesk(sim, SimEmbodiment(sim), discover_min_pixels=0)
    off.record_frame(frame)
    assert off.visibility.peak_pixels(None) == {}


def test_truth_segmenter_maps_labels_and_groups_parts(sim: KitchenSim) -> None:
    label_map = LabelMap([("worktop", "counter")])  # the counter's label maps by prompt
    segmenter = TruthSegmenter(sim.scene.entities, label_map, min_pixels=20)
    frame = sim.render("base", 320, 240)
    result = segmenter.segment(frame, "base")
    assert result is not None and result.instances
    labels = {i.label for i in result.instances}
    assert "worktop" in labels and "counter" not in labels
    owners = {
        label_map.map(e.label)
        for e in sim.scene.entities.values()
        if e.kind in ("fixture", "object")
    }
    assert labels <= owners  # parts carry their fixture's label; walls and robot are background
    assert segmenter.segment(sim.render("base", 320, 240, segmentation=False), "base") is None


def test_describe_run_names_request_binding_and_outcome(sim: KitchenSim) -> None:
    embodiment = SimEmbodiment(sim)
    position = tuple(float(v) for v in sim.entity_position("cab_1"))
    request = PrimitiveRequest("inspect", TargetSpec("cabinet_1", "cabinet", position))
    prepared = embodiment.prepare(request)
    outcome = embodiment.run(prepared)
    line = describe_run(request, prepared, outcome)
    assert line.startswith("inspect(") and "-> cab_1" in line and outcome.outcome in line


# ---------------------------------------------------------------------------- bridge settings


def test_bridge_settings_turn_failures_into_startup_errors() -> None:
    assert resolve_vocabulary("") is None
    with pytest.raises(BridgeStartupError, match="no_such_vocabulary"):
        resolve_vocabulary("no_such_vocabulary")
    with pytest.raises(BridgeStartupError, match="no_such_scenario"):
        build_sim(SimBridgeConfig(scenario="no_such_scenario"))
    with pytest.raises(ValueError, match="cameras"):
        SimBridgeConfig(cameras=("base", "base"))
    kitchen = resolve_vocabulary("kitchen")
    assert kitchen is not None
    assert isinstance(label_map_for(kitchen), LabelMap)
    assert isinstance(label_map_for(None), LabelMap)
