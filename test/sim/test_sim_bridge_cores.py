"""The ROS-free parts of the simulation bridge: sim thread, instruction desk, answer binding,
ground-truth segmentation and the bridge's settings."""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mimir.sim_job import localisation_line
from mimir_robot.requests import TargetSpec, UnknownTargetError
from mimir_sim.answer_binding import EntityResolver
from mimir_sim.audit import LocalisationAudit, MemoryAuditor, summarize
from mimir_sim.bridge_config import (
    BridgeStartupError,
    SimBridgeConfig,
    build_sim,
    label_map_for,
    resolve_vocabulary,
)
from mimir_sim.entity_labels import LabelMap
from mimir_sim.instruction_desk import (
    MISMATCH,
    NONE,
    UNKNOWN_INSTRUCTION,
    InstructionDesk,
    JudgeResult,
    NamedEntity,
)
from mimir_sim.scenario import load_scenario
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.sim import KitchenSim
from mimir_sim.sim_thread import SimThread, SimThreadStoppedError
from mimir_sim.truth_segmentation import PART_LABEL, TruthSegmenter

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


def _paced(sim: _FakeSim, real_time_factor: float) -> SimThread:
    """A sim thread whose simulator calls ``pace`` after each chunk, as the state listener does."""
    thread = _thread(sim, real_time_factor)

    def step_and_pace(seconds: float) -> None:
        _FakeSim.step_seconds(sim, seconds)
        thread.pace(sim.time)

    sim.step_seconds = step_and_pace  # type: ignore[method-assign]
    return thread


def test_pace_holds_simulation_time_to_the_real_time_factor() -> None:
    # pace itself never sleeps (its caller may hold the lock): the thread waits after the chunk
    thread = _thread(_FakeSim(), 2.0)
    start = time.monotonic()
    thread.pace(0.0)  # anchors
    thread.pace(0.2)  # 0.2 s of sim time at factor 2 is owed as 0.1 s of wall time
    assert time.monotonic() - start < 0.05
    sim = _FakeSim()
    paced = _paced(sim, 2.0)
    paced.start()
    try:
        time.sleep(0.2)
        t0, s0 = time.monotonic(), sim.time
        time.sleep(0.6)
        ran, wall = sim.time - s0, time.monotonic() - t0
    finally:
        paced.stop()
    assert 2.0 * wall - 0.3 <= ran <= 2.0 * wall + 0.15, (ran, wall)
    free = _FakeSim()
    unpaced = _paced(free, 0.0)
    unpaced.start()
    try:
        time.sleep(0.3)
    finally:
        unpaced.stop()
    assert free.time > 2.0  # ~1 ms per 0.05 s chunk: far faster than real time


def test_pacing_waits_outside_the_lock() -> None:
    """At real-time factor 1 the thread spends most of its time waiting, with the lock free."""
    sim = _FakeSim()
    thread = _paced(sim, 1.0)
    thread.start()
    try:
        deadline = time.monotonic() + 5.0
        while sim.steps < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sim.steps >= 3
        # each 0.05 s chunk takes ~1 ms to step and ~49 ms of pacing: the lock is free then
        waits = []
        for _ in range(20):
            start = time.monotonic()
            assert thread.lock.acquire(timeout=1.0)
            waits.append(time.monotonic() - start)
            try:
                held_at = sim.steps
                time.sleep(0.01)
                assert sim.steps == held_at  # nothing steps while another thread holds it
            finally:
                thread.lock.release()
            time.sleep(0.005)
        assert max(waits) < 0.03, waits
    finally:
        thread.stop()


# ------------------------------------------------------------------- desks on a simulator


@pytest.fixture(scope="module")
def sim(tidybot_dir):  # type: ignore[no-untyped-def]
    s = KitchenSim.from_scenario(load_scenario("locked_unlocked"), tidybot_dir)
    yield s
    s.shutdown()


def _at(sim: KitchenSim, entity: str) -> tuple[float, float, float]:
    x, y, z = (float(v) for v in sim.entity_position(entity))
    return x, y, z


class _Returns:
    """Records where the desk asks the robot to return to."""

    def __init__(self) -> None:
        self.poses: list[tuple[float, float, float]] = []
        self.instruction_then: list[int | None] = []
        self.sim: KitchenSim | None = None

    def __call__(self, pose: tuple[float, float, float]) -> None:
        self.poses.append(pose)
        if self.sim is not None:
            self.instruction_then.append(self.sim.instruction)


def _desk(sim: KitchenSim, discover_min_pixels: int = 150) -> tuple[InstructionDesk, _Returns]:
    returns = _Returns()
    returns.sim = sim
    desk = InstructionDesk(sim, EntityResolver(sim), discover_min_pixels, returns)
    return desk, returns


def test_instruction_desk_checks_index_and_text(sim: KitchenSim) -> None:
    desk, returns = _desk(sim)
    assert desk.begin(5, "", False).code == UNKNOWN_INSTRUCTION
    wrong = desk.begin(0, "Find the ketchup.", False)
    assert wrong.code == MISMATCH and "Find the ketchup." in wrong.message
    assert desk.begin(0, "  look into upper cabinets and find the BANANA. ", False).code == NONE
    assert sim.instruction == 0
    missing = desk.judge(9)
    assert missing.code == UNKNOWN_INSTRUCTION and missing.details_json == ""
    assert returns.poses == []  # neither a refusal nor a begin without reset moves the robot
    assert desk.begin(5, "", True).code == UNKNOWN_INSTRUCTION
    assert desk.begin(1, "Make tea.", True).code == MISMATCH
    assert returns.poses == []


def test_instruction_desk_returns_the_robot_to_the_start_on_reset(sim: KitchenSim) -> None:
    desk, returns = _desk(sim)
    sim.instruction = 0
    assert desk.begin(1, "Find the ketchup.", True).code == NONE
    start = sim.scene.scenario.instructions[1].start_at
    assert start == "cab_1"
    assert returns.poses == [start_pose_for(sim.scene.fixtures[start])]
    assert returns.instruction_then == [None]  # the return trip belongs to no instruction
    assert sim.instruction == 1
    # instruction 0 names no start of its own: the scenario's start applies
    assert sim.scene.scenario.instructions[0].start_at is None
    scenario_start = sim.scene.scenario.start_at
    assert scenario_start is not None
    assert desk.begin(0, "", True).code == NONE
    assert returns.poses[1] == start_pose_for(sim.scene.fixtures[scenario_start])
    assert desk.begin(1, "", False).code == NONE
    assert len(returns.poses) == 2 and sim.instruction == 1


def test_instruction_desk_judges_and_binds_named_entities(sim: KitchenSim) -> None:
    desk, _ = _desk(sim)
    banana = _at(sim, "banana_1")
    result = desk.judge(
        0,
        [NamedEntity("obj_7", "banana", banana), NamedEntity("", "spaceship", (9.0, 9.0, 9.0)),
         NamedEntity("", "cabinet"), NamedEntity("banana_1", "", None)],
    )
    assert isinstance(result, JudgeResult) and result.code == NONE
    details = json.loads(result.details_json)
    assert details["index"] == 0 and details["family"] == "finding"
    assert details["answer_bound"]["obj_7"] == "banana_1"
    assert details["answer_bound"]["spaceship"].startswith("unbound: ")
    assert details["answer_bound"]["cabinet"].startswith("unbound: ")  # three cabinets
    # a simulator id given as a name binds to nothing: only label and position bind
    assert details["answer_bound"]["banana_1"].startswith("unbound: ")
    assert [c["type"] for c in details["criteria"]] == ["object_discovered"]
    assert result.progress == (1.0 if result.success else 0.0)


def test_entity_resolver_binds_by_label_and_position(sim: KitchenSim) -> None:
    resolver = EntityResolver(sim, tolerance=0.3)
    # each cabinet by its remembered position; the memory id is never taken as a simulator id
    for cab in ("cab_1", "cab_2", "cab_3"):
        assert resolver.resolve(TargetSpec("cabinet_7", "cabinet", _at(sim, cab))) == cab
    assert resolver.resolve(TargetSpec("cab_3", "cabinet", _at(sim, "cab_1"))) == "cab_1"
    # a position off by a little still binds; labels must be compatible
    x, y, z = _at(sim, "banana_1")
    assert resolver.resolve(TargetSpec("b", "banana", (x + 0.05, y, z))) == "banana_1"
    with pytest.raises(UnknownTargetError, match="no simulated"):
        resolver.resolve(TargetSpec("k", "ketchup", (x, y, z)))  # the ketchup is in cab_3
    # kinds narrow the candidates
    with pytest.raises(UnknownTargetError, match="fixture"):
        resolver.resolve(TargetSpec("b", "banana", (x, y, z)), kinds=("fixture",))
    # without a position only a unique compatible entity binds
    assert resolver.resolve(TargetSpec("", "ketchup bottle")) == "ketchup_1"
    assert resolver.resolve(TargetSpec("", "counter")) == "counter_1"
    with pytest.raises(UnknownTargetError, match="position is needed"):
        resolver.resolve(TargetSpec("cabinet_2", "cabinet"))
    with pytest.raises(UnknownTargetError, match="position is needed"):
        resolver.resolve(TargetSpec("cabinet_2", ""))
    with pytest.raises(ValueError, match="tolerance"):
        EntityResolver(sim, tolerance=0.0)


def test_entity_resolver_tolerance_and_label_map(sim: KitchenSim) -> None:
    x, y, _ = _at(sim, "cab_2")
    _, hi = sim.entity_box("cab_2")
    above = (x, y, float(hi[2]) + 0.4)  # 0.4 m above the cabinet's box
    with pytest.raises(UnknownTargetError, match=r"within 0\.30 m; nearest compatible is 0\.40"):
        EntityResolver(sim, tolerance=0.3).resolve(TargetSpec("c", "cabinet", above))
    assert EntityResolver(sim, tolerance=0.5).resolve(TargetSpec("c", "cabinet", above)) == "cab_2"
    # a vocabulary label binds through the label map (the counter's vocabulary label here)
    mapped = EntityResolver(sim, 0.5, LabelMap([("worktop", "counter")]))
    assert mapped.resolve(TargetSpec("w", "worktop", _at(sim, "counter_1"))) == "counter_1"
    with pytest.raises(UnknownTargetError):
        EntityResolver(sim, 0.5).resolve(TargetSpec("w", "worktop", _at(sim, "counter_1")))


def test_instruction_desk_records_visible_objects_from_frames(sim: KitchenSim) -> None:
    desk, _ = _desk(sim, discover_min_pixels=1)
    sim.begin_instruction(1)
    frame = sim.render("pole", 160, 120)
    desk.record_frame(frame)
    assert set(desk.visibility.peak_pixels(1)) <= set(sim.scene.objects)
    off, _ = _desk(sim, discover_min_pixels=0)
    off.record_frame(frame)
    assert off.visibility.peak_pixels(None) == {}


def test_truth_segmenter_maps_labels_and_groups_parts(sim: KitchenSim) -> None:
    label_map = LabelMap([("worktop", "counter")])  # the counter's label maps by prompt
    segmenter = TruthSegmenter(sim.scene.entities, label_map, min_pixels=20)
    frame = sim.render("base", 320, 240)
    result = segmenter.segment(frame, "base")
    assert result is not None and result.instances
    labels = {i.label for i in result.instances}
    # the one-word vocabulary names only the counter: every other entity is background, as
    # SAM3 prompted with that vocabulary would leave it
    assert labels == {"worktop"}
    full = TruthSegmenter(sim.scene.entities, LabelMap(), min_pixels=20).segment(frame, "base")
    assert full is not None
    owners = {e.label for e in sim.scene.entities.values() if e.kind in ("fixture", "object")}
    labels = {i.label for i in full.instances}
    assert labels and labels <= owners  # parts carry their fixture's label
    assert segmenter.segment(sim.render("base", 320, 240, segmentation=False), "base") is None


def test_truth_segmenter_reports_each_handle_as_its_own_part(sim: KitchenSim) -> None:
    segmenter = TruthSegmenter(sim.scene.entities, LabelMap(), min_pixels=20)
    sim.reset("cab_2")  # in front of the middle cabinet the pole camera sees two handles
    frame = sim.render("pole", 320, 240)
    assert frame.segmentation is not None
    parts = segmenter.segment_parts(frame, "pole")
    assert parts is not None
    parts.validate()
    assert parts.shape == (240, 320) and parts.camera == "pole"
    assert parts.stamp == pytest.approx(frame.stamp)
    assert parts.instances and {i.label for i in parts.instances} == {PART_LABEL}
    # one instance per handle in view, each exactly that handle's pixels
    handle_index = {
        eid: i for i, eid in enumerate(frame.entity_ids) if eid.endswith("_handle")
    }
    in_view = {
        eid for eid, i in handle_index.items() if int((frame.segmentation == i).sum()) >= 5
    }
    assert {"cab_1_handle", "cab_2_handle"} <= in_view, in_view
    assert len(parts.instances) == len(in_view)
    seg = frame.segmentation
    owners = set()
    for instance in parts.instances:
        values = set(np.unique(seg[parts.mask(instance.instance_id)]).tolist())
        assert len(values) == 1 and values <= set(handle_index.values())
        owners |= values
        assert instance.pixel_count == int((seg == next(iter(values))).sum())
    assert owners == {handle_index[eid] for eid in in_view}
    # the object segmentation keeps the handles inside their cabinets (no "handle" label)
    objects = segmenter.segment(frame, "pole")
    assert objects is not None and PART_LABEL not in {i.label for i in objects.instances}
    assert segmenter.segment_parts(sim.render("pole", 80, 60, segmentation=False), "pole") is None


# ---------------------------------------------------------------------------- bridge settings


def test_bridge_settings_turn_failures_into_startup_errors() -> None:
    assert resolve_vocabulary("") is None
    with pytest.raises(BridgeStartupError, match="no_such_vocabulary"):
        resolve_vocabulary("no_such_vocabulary")
    with pytest.raises(BridgeStartupError, match="no_such_scenario"):
        build_sim(SimBridgeConfig(scenario="no_such_scenario", authkey="secret"))
    with pytest.raises(ValueError, match="cameras"):
        SimBridgeConfig(cameras=("base", "base"), authkey="secret")
    with pytest.raises(ValueError, match="authkey"):
        SimBridgeConfig()  # the RPC servers' secret has no default
    with pytest.raises(ValueError, match="arm_port"):
        SimBridgeConfig(authkey="secret", arm_port=70000)
    assert SimBridgeConfig(authkey="secret", base_port=0, arm_port=0).base_port == 0
    kitchen = resolve_vocabulary("kitchen")
    assert kitchen is not None
    assert isinstance(label_map_for(kitchen), LabelMap)
    assert isinstance(label_map_for(None), LabelMap)


def test_memory_auditor_grades_claims_against_the_simulator(sim: KitchenSim) -> None:
    auditor = MemoryAuditor(EntityResolver(sim, 0.6))
    cab_1, cab_2 = _at(sim, "cab_1"), _at(sim, "cab_2")

    def grade(kind: str, payload: dict, where, verdict: str = "admit", subject="cabinet_1"):
        return auditor.grade(kind, subject, verdict, payload, label="cabinet", position=where)

    locked = grade("property_set", {"name": "locked", "value": True}, cab_1)
    assert locked is not None and locked.truth is True and locked.fact == "cabinet_1 locked=true"
    assert grade("property_set", {"name": "locked", "value": True}, cab_2).truth is False
    assert grade("property_set", {"name": "openable", "value": True}, cab_2).truth is True
    assert grade("property_set", {"name": "openable", "value": True}, cab_1).truth is False
    assert grade("property_set", {"name": "material", "value": "oak"}, cab_1).truth is None
    fruit = grade("contents_set", {"contents": [{"name": "banana"}, {"name": "apple"}]}, cab_2)
    assert fruit is not None and fruit.truth is True
    invented = grade("contents_set", {"contents": [{"name": "mug"}]}, cab_2)
    assert invented is not None and invented.truth is False and "mug" in invented.why
    assert grade("contents_set", {"contents": [], "is_empty": True}, cab_2).truth is False
    closed = grade("task_outcome_recorded", {"primitive": "open", "success": True}, cab_1)
    assert closed is not None and closed.truth is False and "closed" in closed.why
    looked = grade("task_outcome_recorded", {"primitive": "inspect", "success": True}, cab_1)
    assert looked is not None and looked.truth is False  # nothing to see into a closed cabinet
    blind = grade("task_outcome_recorded", {"primitive": "inspect", "success": False}, cab_1)
    assert blind is not None and blind.truth is True
    lost = grade("property_set", {"name": "locked", "value": True}, (9.0, 9.0, 0.5))
    assert lost is not None and lost.truth is None and lost.why.startswith("not bound")
    assert auditor.grade("node_created", "cabinet_1", "admit", {}, label="cabinet",
                         position=cab_1) is None
    # a fact deferred, then admitted, counts once with its last verdict
    summary = summarize([
        {"fact": "a", "verdict": "defer", "truth": True},
        {"fact": "a", "verdict": "admit", "truth": True},
        {"fact": "b", "verdict": "admit", "truth": False},
        {"fact": "c", "verdict": "reject", "truth": True},
        {"fact": "d", "verdict": "admit", "truth": None},
    ])
    assert (summary.admitted, summary.wrong_admitted) == (2, 1)
    assert (summary.true_facts, summary.true_held, summary.ungraded) == (2, 1, 1)
    assert summary.wrong_admitted_rate == 0.5 and summary.true_held_rate == 0.5


def test_localisation_audit_counts_only_a_standing_base() -> None:
    audit = LocalisationAudit(still_speed=0.02)
    assert audit.summary() == {"samples": 0}
    assert not audit.add((1.0, 0.0, 0.0), (0.0, 0.0, 0.0), speed=0.3)  # moving: lag, not error
    assert audit.add((0.03, 0.04, 0.02), (0.0, 0.0, 0.0), speed=0.0, sim_time=4.0)
    assert audit.add((1.0, 1.0, math.pi - 0.01), (1.0, 1.0, -math.pi + 0.01), speed=0.01,
                     sim_time=5.5)
    assert audit.series() == [[4.0, 0.05, round(math.degrees(0.02), 3)],
                              [5.5, 0.0, round(math.degrees(0.02), 3)]]
    summary = audit.summary()
    assert summary["samples"] == 2
    assert summary["max_m"] == pytest.approx(0.05)
    assert summary["mean_m"] == pytest.approx(0.025)
    assert summary["max_yaw_deg"] == pytest.approx(math.degrees(0.02))  # across the wrap
    # localisation.json as both modes write it: the summary, the misses, every sample
    assert audit.record(unavailable=3) == {**summary, "unavailable": 3,
                                           "series": audit.series()}


def test_the_report_states_localisation_error(tmp_path: Path) -> None:
    assert "not measured" in localisation_line(tmp_path)
    (tmp_path / "localisation.json").write_text(json.dumps({"samples": 0, "unavailable": 3}))
    assert "no sample" in localisation_line(tmp_path)
    (tmp_path / "localisation.json").write_text(json.dumps(
        {"samples": 12, "mean_m": 0.011, "p95_m": 0.02, "max_m": 0.025, "mean_yaw_deg": 0.3,
         "max_yaw_deg": 0.9}))
    line = localisation_line(tmp_path)
    assert "12 samples" in line and "mean 1.1 cm" in line and "max 2.5 cm" in line
