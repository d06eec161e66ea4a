"""The simulation graph's work in one process (``mimir sim --in-process``), piece by piece.

One run of Locked-and-Unlocked (ideal profile) is shared by the tests, in file order: after
the start memory holds the kitchen and the localiser has a fix; the planner's executor then
drives real primitives through the lockstep robot, the live memory pipeline and the analyzer,
and the bad cases (a target memory no longer holds, a primitive the robot does not have) fail
with their reasons, leaving memory as it was. Whole runs end to end are in
``test/e2e/test_eval.py``.
"""

from __future__ import annotations

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir.sim_inprocess import InProcessRun, memory_figures, physics_failure
from mimir.sim_job import (
    SimJobOptions,
    check_options,
    robot_model,
    run_sim_job,
    sim_params,
    with_robot_model,
)
from mimir.sim_report import SHOWN_KINDS, SimJobError
from mimir_planner.primitives import ExecutableStep
from mimir_sim.audit import GRADED_KINDS
from mimir_sim.errors import PhysicsUnstableError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


class Trace:
    """The job's trace, kept in memory."""

    def __init__(self) -> None:
        self.records: list[dict[str, object]] = []

    def record(self, kind: str, text: str, *, echo: bool = True, **data: object) -> None:
        self.records.append({"kind": kind, "text": text, **data})

    def kinds(self, kind: str) -> list[dict[str, object]]:
        return [r for r in self.records if r["kind"] == kind]


def params_for(run_dir: Path, tidybot_dir: Path, **extra: dict[str, object]) -> dict[str, object]:
    options = SimJobOptions(scenario="locked_unlocked", noise_profile="ideal",
                            tidybot_dir=str(tidybot_dir), extra_params=dict(extra))
    return with_robot_model(sim_params(options, run_dir), robot_model(str(tidybot_dir))[0])


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tidybot_dir: Path) -> Iterator[InProcessRun]:
    run_dir = tmp_path_factory.mktemp("inprocess")
    (run_dir / "memory").mkdir()
    started = InProcessRun(run_dir, params_for(run_dir, tidybot_dir), Trace())
    try:
        started.start()
        yield started
    finally:
        started.close()


def cabinet_near(run: InProcessRun, fixture: str) -> str:
    """The memory node of a cabinet nearest a simulated fixture (read here as the judge)."""
    truth = run.sim.entity_position(fixture)
    nodes = [n for n in run.pipeline.world.state.nodes.values() if n.label == "cabinet"]
    assert nodes, "memory holds no cabinet"
    return min(nodes, key=lambda n: float(sum((n.centroid - truth) ** 2))).node_id


def step(run: InProcessRun, primitive: str, target: str) -> ExecutableStep:
    return ExecutableStep(primitive, primitive, target, run.planner.embodiment)


def test_the_start_fills_memory_and_localises(run: InProcessRun) -> None:
    labels = {n.label for n in run.pipeline.world.state.nodes.values()}
    assert "cabinet" in labels
    assert run.robot.map_from_odom is not None
    searched = [r["text"] for r in run.trace.kinds("status")]
    assert any(str(t).startswith("tag search: ") for t in searched), searched
    # every frame is posed in the map through the localiser's map -> odom
    pose = run.pipeline.transforms.lookup("map", "pole_color_optical_frame", run.now)
    assert pose.shape == (4, 4)
    assert run.now > 3.0  # the settle and the memory wait ran in simulated time


def test_a_move_and_an_open_go_through_the_robot_memory_and_the_analyzer(
        run: InProcessRun) -> None:
    target = cabinet_near(run, "cab_2")
    executor = run.planner.executor
    moved = executor.execute(step(run, "move_to", target))
    assert moved.feedback.success, moved.detail
    opened = executor.execute(step(run, "open", target))
    assert opened.feedback.success, opened.detail
    assert "verified by the analyzer" in opened.detail
    assert run.sim.is_open("cab_2")  # the judge's reading of the simulator
    # the analyzer admitted what the open showed, and the judge graded it
    node = run.pipeline.world.state.nodes[target]
    assert node.properties["openable"].value is True
    grades = [json.loads(line) for line in Path(run.bridge.audit_file).read_text().splitlines()]
    assert any(g["subject"] == target and g["kind"] == "property_set" for g in grades)
    primitives = [r["primitive"] for r in run.trace.kinds("primitive")]
    assert primitives[-2:] == ["move_to", "open"]
    assert any(r.get("subject") == target for r in run.trace.kinds("memory"))
    # the interaction left keyframes before, during and after on the buffered cameras
    assert run.pipeline.keyframes.count() > 0
    assert Path(run.executor_config.trace_file).stat().st_size > 0


def test_a_target_memory_no_longer_holds_is_not_sent(run: InProcessRun) -> None:
    revision = run.pipeline.world.revision
    out = run.planner.executor.execute(step(run, "inspect", "cabinet_999"))
    assert not out.feedback.success and out.detail.startswith("not sent: target 'cabinet_999'")
    assert run.pipeline.world.revision == revision  # nothing written


def test_a_primitive_the_robot_lacks_is_refused_without_moving(run: InProcessRun) -> None:
    before = run.sim.base_pose()
    target = cabinet_near(run, "cab_2")
    out = run.planner.executor.execute(step(run, "juggle", target))
    assert not out.feedback.success and out.detail.startswith("refused ("), out.detail
    assert run.sim.base_pose() == pytest.approx(before, abs=1e-6)


def test_figures_count_what_memory_holds(run: InProcessRun) -> None:
    figures = memory_figures(run)
    assert figures["scene graph nodes"] == len(run.pipeline.world.state.nodes)
    assert figures["interaction-derived properties"] >= 1
    assert figures["keyframes stored"] == run.pipeline.keyframes.count()
    assert figures["memory events seen"] == run.events > 0
    # the run reads in full only the kinds the trace shows; the judge's kinds must be among them
    assert set(GRADED_KINDS) <= SHOWN_KINDS


def test_the_localisation_audit_writes_what_the_bridge_writes(run: InProcessRun,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "localisation.json"
    run.localisation_audit_write(path)
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["samples"] == len(written["series"]) > 0
    assert written["unavailable"] >= 0
    stamp, error_m, yaw_deg = written["series"][-1]
    assert stamp <= run.now and 0.0 <= error_m < 0.1 and 0.0 <= yaw_deg < 5.0


def test_a_blow_up_is_a_job_error_with_the_state_saved(run: InProcessRun) -> None:
    world = run.sim.world
    state = world._state_before.copy()  # the shape the physics keeps before each step
    saved = physics_failure(run, PhysicsUnstableError("the physics became unstable at t = 9 s",
                                                      state=state, time=9.0))
    assert "became unstable" in str(saved) and "state saved for a replay" in str(saved)
    assert Path(run.bridge.unstable_state_file).is_file()
    unsaved = physics_failure(run, PhysicsUnstableError("unstable", state=None))
    assert "could not be saved" in str(unsaved)


def test_a_section_key_no_node_declares_is_refused(tmp_path: Path, tidybot_dir: Path) -> None:
    params = params_for(tmp_path, tidybot_dir, analyzer={"window_margn_s": 1.0})
    with pytest.raises(SimJobError, match="window_margn_s"):
        InProcessRun(tmp_path, params, Trace())


def test_an_unknown_memory_view_is_refused_with_the_known_ones(tmp_path: Path,
                                                               tidybot_dir: Path) -> None:
    (tmp_path / "memory").mkdir()
    params = params_for(tmp_path, tidybot_dir, planner={"representation": "hologram"})
    with pytest.raises(SimJobError, match=r"unknown representation 'hologram'.*'scene_graph'"):
        InProcessRun(tmp_path, params, Trace())


def test_a_bad_run_leaves_no_folder_behind(tmp_path: Path, tidybot_dir: Path) -> None:
    options = SimJobOptions(scenario="locked_unlocked", run_root=tmp_path, run_name="bad",
                            tidybot_dir=str(tidybot_dir), in_process=True, quiet=True,
                            extra_params={"planner": {"step_budgt": 3}})
    with pytest.raises(SimJobError, match="step_budgt"):
        run_sim_job(options)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(("change", "words"), [
    ({"hold_s": 5.0}, "--hold needs the node graph"),
    ({"vlm_backend": "openai"}, "offline reasoner only"),
])
def test_options_an_in_process_run_cannot_honour_are_refused(change: dict[str, object],
                                                             words: str) -> None:
    with pytest.raises(SimJobError, match=words):
        check_options(SimJobOptions(in_process=True, **change))  # type: ignore[arg-type]
