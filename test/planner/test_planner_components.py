"""Primitive registry and adapters, operator gate, Set-of-Mark overlay, configuration."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from planner_kitchen import (
    RecordedBackend,
    admit_contents,
    admit_property,
    build_kitchen,
    locked_unlocked_layout,
    recorded_text,
    session_for,
)

from mimir_memory.world import WorldMemory
from mimir_perception.camera import Intrinsics
from mimir_planner.config import GateConfig, PlannerConfig, load_planner_config
from mimir_planner.errors import ActionRefusedError, GateError, OverlayError, PlannerConfigError
from mimir_planner.gate import GateState, OperatorGate
from mimir_planner.overlay import draw_set_of_marks
from mimir_planner.policies import VlmPlanner
from mimir_planner.primitives import EmbodimentAdapter, PlanStep, PrimitiveRegistry, RobotContext
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.runs import Observation


@pytest.fixture
def world(seed_world: Callable[..., WorldMemory]) -> WorldMemory:
    return seed_world([("cabinet", (1.0, 0.0, 1.6)), ("counter", (1.0, 0.0, 0.9)),
                       ("mug", (1.0, 0.1, 1.55))], [("mug_1", "cabinet_1", "container")])


def _step(action: str, target: str | None) -> PlanStep:
    return PlanStep(1, action, target, "because")


def test_adapters_map_to_legal_actions(world: WorldMemory) -> None:
    config = load_planner_config()
    real = PrimitiveRegistry(config, "real_tidybot")
    sim = PrimitiveRegistry(config, "sim_tidybot")
    robot = RobotContext(last_moved_to="cabinet_1")
    assert real.validate(_step("open", "cabinet_1"), world.state, robot).action == "open_drawer"
    assert sim.validate(_step("OpenCabinet", "cabinet_1"), world.state, robot).action == "open"
    assert real.validate(_step("peek", "cabinet_1"), world.state, robot).action == "peek"
    assert sim.validate(_step("close", "cabinet_1"), world.state, robot).action == \
        "close_fixture"
    assert real.adapter.canonical("pick_up") == "pick"
    assert "- inspect:" in real.describe()
    with pytest.raises(PlannerConfigError):
        PrimitiveRegistry(config, "spot")
    with pytest.raises(PlannerConfigError):
        EmbodimentAdapter("half", {"move_to": "go"})


@pytest.mark.parametrize(
    ("action", "target", "robot", "reason"),
    [
        ("teleport", "cabinet_1", RobotContext("cabinet_1"), "not a registered primitive"),
        ("open", "cabinet_9", RobotContext("cabinet_1"), "not in the scene graph"),
        ("open", None, RobotContext("cabinet_1"), "needs a target_object"),
        ("open", "cabinet_1", RobotContext(), "needs a move_to first"),
        ("open", "cabinet_1", RobotContext("counter_1"), "only open what it last moved to"),
        ("open", "counter_1", RobotContext("counter_1"), "not a fixture that opens"),
        ("inspect", "mug_1", RobotContext("mug_1"), "inspect needs a fixture"),
        ("pick", "mug_1", RobotContext("cabinet_1", holding="apple_1"), "free hand"),
        ("pick", "cabinet_1", RobotContext("cabinet_1"), "cannot be picked"),
        ("pick", "mug_1", RobotContext("counter_1"), "only pick what it last moved to"),
        ("place", "counter_1", RobotContext("counter_1"), "needs a held object"),
        ("place", "mug_1", RobotContext("cabinet_1", holding="mug_1"), "onto itself"),
    ],
)
def test_preconditions_refuse_with_reason(
    world: WorldMemory, action: str, target: str | None, robot: RobotContext, reason: str
) -> None:
    registry = PrimitiveRegistry(load_planner_config())
    with pytest.raises(ActionRefusedError) as info:
        registry.validate(_step(action, target), world.state, robot)
    assert reason in info.value.reason


def test_preconditions_allow_legal_steps_and_memory_refusals(world: WorldMemory) -> None:
    registry = PrimitiveRegistry(load_planner_config())
    inside = RobotContext("cabinet_1")
    step = registry.validate(_step("pick", "mug_1"), world.state, inside, goal_id="g1",
                             keyframe_ids=["abc"], step_id=4)
    assert (step.primitive, step.target, step.goal_id, step.keyframe_ids, step.step_id) == (
        "pick", "mug_1", "g1", ("abc",), 4)
    assert registry.validate(_step("place", "counter_1"), world.state,
                             RobotContext("counter_1", holding="mug_1")).primitive == "place"
    admit_property(world, "cabinet_1", "locked", True, stamp=3.0)
    with pytest.raises(ActionRefusedError, match="remembered as locked: seen by the test"):
        registry.validate(_step("open", "cabinet_1"), world.state, inside)
    assert registry.validate(_step("close", "cabinet_1"), world.state, inside)
    admit_property(world, "mug_1", "pickable", False, stamp=3.0)
    with pytest.raises(ActionRefusedError, match="not pickable"):
        registry.validate(_step("pick", "mug_1"), world.state, inside)


def test_gate_disabled_enabled_and_timeout() -> None:
    off = OperatorGate(GateConfig(enabled=False))
    assert off.request("move_to(cabinet_1)").approved and off.pending() == []
    gate = OperatorGate(GateConfig(enabled=True, timeout_s=30.0))
    first = gate.submit("open(cabinet_1)")
    second = gate.submit("pick(mug_1)")
    assert [r.request_id for r in gate.pending()] == [first.request_id, second.request_id]
    approver = threading.Thread(target=gate.approve, args=(first.request_id, "looks safe"))
    approver.start()
    decision = gate.wait(first.request_id)
    approver.join()
    assert decision.approved and decision.reason == "looks safe"
    denied = gate.deny(second.request_id)
    assert denied.state is GateState.DENIED and not denied.approved
    assert gate.wait(second.request_id).state is GateState.DENIED
    with pytest.raises(GateError):
        gate.approve(second.request_id)
    with pytest.raises(GateError):
        gate.deny(999)
    with pytest.raises(GateError):
        gate.wait(999)
    with pytest.raises(GateError):
        gate.submit("  ")
    late = gate.request("place(counter_1)", timeout_s=0.0)
    assert late.state is GateState.TIMED_OUT and not late.approved
    assert gate.pending() == []


def _camera() -> tuple[Intrinsics, np.ndarray]:
    intr = Intrinsics(fx=200.0, fy=200.0, cx=160.0, cy=120.0, width=320, height=240)
    # Camera at (-1, 0, 1.2) looking along map +x (optical z), image x to map -y.
    cam_to_map = np.array([[0, 0, 1, -1.0], [-1, 0, 0, 0], [0, -1, 0, 1.2], [0, 0, 0, 1]],
                          dtype=np.float64)
    return intr, cam_to_map


def test_set_of_marks_projects_visible_nodes(world: WorldMemory) -> None:
    intr, pose = _camera()
    world.add_node("sponge", (-1.5, 0.0, 1.0), stamp=1.0)  # behind the camera
    image = np.zeros((240, 320, 3), dtype=np.uint8)
    nodes = list(world.state.nodes.values())
    out, marks = draw_set_of_marks(image, nodes, intr, pose)
    ids = [m.node_id for m in marks]
    assert "sponge_1" not in ids and set(ids) == {"cabinet_1", "counter_1", "mug_1"}
    counter = next(m for m in marks if m.node_id == "counter_1")
    assert (counter.u, counter.v, counter.depth) == pytest.approx((160.0, 150.0, 2.0))
    assert out.shape == image.shape and out.any() and not image.any()
    with pytest.raises(OverlayError):
        draw_set_of_marks(np.zeros((10, 10, 3), dtype=np.uint8), nodes, intr, pose)
    with pytest.raises(OverlayError):
        draw_set_of_marks(np.zeros((240, 320), dtype=np.uint8), nodes, intr, pose)
    with pytest.raises(OverlayError):
        draw_set_of_marks(image, nodes, intr, np.eye(3))
    assert draw_set_of_marks(image, [], intr, pose)[1] == ()


def test_vlm_request_carries_overlay_and_memory_frames(tmp_path: Path) -> None:
    from mimir_memory.keyframes import KeyframeStore, Trigger

    world, task, kit = build_kitchen(tmp_path, locked_unlocked_layout())
    kf = KeyframeStore.open(tmp_path / "kf")
    rng = np.random.default_rng(0)
    image = np.repeat(np.repeat(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), 8, 0), 8, 1)
    kf.save(image, timestamp=5.0, camera="wrist", trigger=Trigger.INTERACTION_PEAK,
            node_ids=["cabinet_3"], labels=[("ketchup", "analyzer")], action="inspect")
    admit_contents(world, "cabinet_3", ["ketchup"], stamp=5.0)
    cfg = load_planner_config()
    backend = RecordedBackend([recorded_text("plan_answer_question.json")])
    session = session_for(world, task, cfg, keyframes=kf,
                          policy=VlmPlanner(backend, PromptLibrary(cfg.prompt_dir)))
    intr, pose = _camera()
    session.observe(Observation(np.zeros((240, 320, 3), dtype=np.uint8), intr, pose, 6.0))
    session.submit("Where is the ketchup?")
    report = session.run(kit)
    assert report.completed == ["g001_question"]
    parts = backend.requests[0].messages[0].parts
    images = backend.requests[0].messages[0].images()
    assert len(images) == 2 and images[0].name == "current" and images[0].rgb.any()
    text = parts[0].text  # type: ignore[union-attr]
    assert "interaction_peak" in text and "cabinet_1" in text
    kf.close()
    world.close()
    task.close()


def test_config_loading_and_validation(tmp_path: Path) -> None:
    config = load_planner_config()
    assert config.loop.step_budget == 12 and not config.gate.enabled
    assert config.is_openable_label("upper cabinets") and not config.is_openable_label("counter")
    assert config.prompt_dir.name == "prompts"
    bad_files = {
        "missing.yaml": None,
        "list.yaml": "- 1\n",
        "broken.yaml": "recall: [\n",
        "unknown_section.yaml": "nonsense: 1\n",
        "unknown_key.yaml": "recall:\n  colour: red\n",
        "bad_type.yaml": "planner:\n  step_budget: twelve\n",
        "negative.yaml": "planner:\n  step_budget: 0\n",
        "float_int.yaml": "planner:\n  step_budget: 1.5\n",
        "bool.yaml": "gate:\n  enabled: 1\n",
        "final_k.yaml": "retrieval:\n  shortlist_k: 2\n  final_k: 3\n",
        "embodiment.yaml": "planner:\n  embodiment: spot\n",
        "partial.yaml": "embodiments:\n  sim: {move_to: move_to}\nplanner:\n  embodiment: sim\n",
        "alias.yaml": "aliases:\n  fly: [hover]\n",
        "synonyms.yaml": "synonyms:\n  mug: cup\n",
        "primitives.yaml": "primitives:\n  move_to: 3\n",
    }
    for name, text in bad_files.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(PlannerConfigError):
            load_planner_config(path)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_planner_config(empty).loop.step_budget == PlannerConfig().loop.step_budget
    ok = tmp_path / "ok.yaml"
    ok.write_text("gate:\n  enabled: true\n  timeout_s: 5\nplanner:\n  embodiment: sim_tidybot\n")
    assert load_planner_config(ok).gate.timeout_s == 5.0
