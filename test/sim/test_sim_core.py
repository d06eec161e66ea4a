"""Simulation core: scenarios, scene building, rendering, primitives acting through physics."""

from __future__ import annotations

import math
import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np
import pytest
import yaml

from mimir_sim.config import SimConfig
from mimir_sim.errors import (
    MalformedScenarioError,
    ModelDirError,
    PhysicsUnstableError,
    PrimitiveError,
    RenderError,
    UnknownEntityError,
    UnknownScenarioError,
    UnreachablePoseError,
)
from mimir_sim.judge import judge_instruction
from mimir_sim.physics import load_unstable, save_unstable
from mimir_sim.rendering import SceneRenderer, deproject
from mimir_sim.scenario import available_scenarios, default_scenarios_dir, load_scenario
from mimir_sim.scene import build_scene
from mimir_sim.sim import KitchenSim


@pytest.fixture(scope="module")
def scenario():  # type: ignore[no-untyped-def]
    return load_scenario("locked_unlocked")


@pytest.fixture(scope="module")
def scene(scenario, tidybot_dir):  # type: ignore[no-untyped-def]
    return build_scene(scenario, tidybot_dir)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    (tmp_path / "catalog.yaml").write_text(
        (default_scenarios_dir() / "catalog.yaml").read_text(encoding="utf-8"), encoding="utf-8"
    )
    return path


def _base_data() -> dict:
    return yaml.safe_load((default_scenarios_dir() / "locked_unlocked.yaml").read_text())


# ------------------------------------------------------------------------------------ scenarios


def test_locked_unlocked_scenario_content(scenario) -> None:  # type: ignore[no-untyped-def]
    assert "locked_unlocked" in available_scenarios()
    assert scenario.fixture("cab_1").locked
    assert not scenario.fixture("cab_2").locked
    homes = {o.id: o.fixture for o in scenario.objects}
    assert homes["banana_1"] == "cab_2" and homes["ketchup_1"] == "cab_3"
    assert not any(fixture == "cab_1" for fixture in homes.values())
    texts = [i.text for i in scenario.instructions]
    assert texts == ["Look into upper cabinets and find the banana.", "Find the ketchup."]


def test_unknown_scenario_is_a_clear_error() -> None:
    with pytest.raises(UnknownScenarioError, match="no_such_kitchen"):
        load_scenario("no_such_kitchen")


@pytest.mark.parametrize(
    ("mutate", "key"),
    [
        (lambda d: d["fixtures"][1].__setitem__("locked", "yes"), "fixtures[1].locked"),
        (lambda d: d["fixtures"][2].pop("width"), "fixtures[2].width"),
        (lambda d: d["objects"][0].__setitem__("in", "cab_99"), "objects[0].in"),
        (lambda d: d["objects"][1].__setitem__("category", "dragonfruit"), "objects[1].category"),
        (lambda d: d.__setitem__("colour", 3), "colour"),
        (
            lambda d: d["instructions"][0]["success"][0].__setitem__("object", "ghost"),
            "instructions[0].success[0].object",
        ),
        (lambda d: d["objects"][0].__setitem__("slot", [0.5, 2.0]), "objects[0].slot"),
    ],
)
def test_malformed_scenario_names_the_key(tmp_path: Path, mutate, key: str) -> None:  # type: ignore[no-untyped-def]
    data = _base_data()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(MalformedScenarioError) as info:
        load_scenario(path, scenarios_dir=tmp_path)
    assert info.value.key == key


def test_invalid_yaml_is_malformed(tmp_path: Path) -> None:
    path = _write(tmp_path, {})
    path.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(MalformedScenarioError):
        load_scenario(path, scenarios_dir=tmp_path)


# ------------------------------------------------------------------------------------ scene


def test_scene_entities_and_robot_reference(scene, tidybot_dir: Path) -> None:  # type: ignore[no-untyped-def]
    for entity in ("cab_1", "cab_1_door", "cab_1_handle", "cab_2", "banana_1", "counter_1"):
        assert entity in scene.entities
    assert str((tidybot_dir / "stanford_tidybot" / "tidybot.xml").resolve()) in scene.mjcf
    model = scene.model
    names = {model.camera(i).name for i in range(model.ncam)}
    assert names == {"base", "wrist", "pole"}
    assert model.actuator("joint_x").id >= 0 and model.actuator("fingers_actuator").id >= 0
    # locked door: range is only a rattle
    locked = model.jnt_range[model.joint("cab_1_hinge").id]
    free = model.jnt_range[model.joint("cab_2_hinge").id]
    assert locked[1] < 0.01 < free[1]


def test_layout_is_deterministic_per_seed(scenario, tidybot_dir: Path) -> None:  # type: ignore[no-untyped-def]
    a = build_scene(scenario, tidybot_dir, seed=5)
    b = build_scene(scenario, tidybot_dir, seed=5)
    c = build_scene(scenario, tidybot_dir, seed=6)
    assert a.objects == b.objects
    assert a.objects["banana_1"].pos != c.objects["banana_1"].pos
    # every instance of a category differs in appearance from its neighbours in another trial
    assert a.objects["apple_1"].color != c.objects["apple_1"].color


def test_missing_model_dir(scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelDirError):
        build_scene(scenario, tmp_path)


# ------------------------------------------------------------------------------------ rendering


@pytest.fixture(scope="module")
def sim(scene):  # type: ignore[no-untyped-def]
    s = KitchenSim(scene, SimConfig(seed=1))
    yield s
    s.shutdown()


def test_render_shapes_depth_and_segmentation(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_2")
    for cam in ("base", "wrist", "pole"):
        frame = sim.render(cam, 96, 72)
        assert frame.color is not None and frame.color.shape == (72, 96, 3)
        assert frame.color.dtype == np.uint8
        assert frame.depth is not None and frame.depth.shape == (72, 96)
        assert frame.depth.dtype == np.float32
        assert frame.segmentation is not None and frame.segmentation.shape == (72, 96)
        assert np.all(frame.depth > 0) and np.all(frame.depth <= frame.info.far + 1e-3)
    pole = sim.render("pole", 160, 120)
    visible = pole.visible_entities()
    assert {"cab_2_door", "cab_2_handle", "cab_1"} <= visible
    assert pole.depth is not None and float(pole.depth.max()) < 5.0  # closed room
    # the optical axis of the pose is MuJoCo's -z, and depth at the centre agrees with a ray
    cam = sim.model.camera("pole").id
    forward = -sim.data.cam_xmat[cam].reshape(3, 3)[:, 2]
    assert np.allclose(pole.pose[:3, 2], forward)
    geom = np.zeros(1, dtype=np.int32)
    hit = mujoco.mj_ray(sim.model, sim.data, pole.pose[:3, 3], forward, None, 1, -1, geom)
    centre = pole.info.cx, pole.info.cy
    point = deproject(pole, *centre)
    assert abs(float(np.linalg.norm(point - pole.pose[:3, 3])) - hit) < 0.03
    assert pole.info.k[0, 0] == pytest.approx(60 / np.tan(np.radians(30)), rel=1e-6)


def test_one_pass_gives_the_depth_and_ids_mujocos_renderer_gives_in_two(sim) -> None:  # type: ignore[no-untyped-def]
    """The renderer reads depth and segmentation from one pass; mujoco.Renderer, pass by
    pass, gives the same colour and ids, and depth within single-precision rounding."""
    sim.reset("cab_2")
    reference = mujoco.Renderer(sim.model, height=72, width=96)
    option = mujoco.MjvOption()
    option.geomgroup[:] = [1, 1, 1, 0, 0, 0]
    try:
        for cam in ("base", "wrist", "pole"):
            frame = sim.render(cam, 96, 72)
            reference.update_scene(sim.data, camera=cam, scene_option=option)
            color = reference.render()
            reference.enable_depth_rendering()
            depth = reference.render()
            reference.disable_depth_rendering()
            reference.enable_segmentation_rendering()
            ids = reference.render()
            reference.disable_segmentation_rendering()
            assert frame.color is not None and np.array_equal(frame.color, color)
            assert frame.depth is not None
            assert np.allclose(frame.depth, depth, rtol=1e-6, atol=0.0)
            # the entity of each pixel's geom, or -1 (background, or a geom of no entity)
            index = {e: i for i, e in enumerate(frame.entity_ids)}
            entity_of_geom = np.array([-1 if e is None else index[e]
                                       for e in sim.scene.geom_entity])
            geoms = (ids[:, :, 1] == int(mujoco.mjtObj.mjOBJ_GEOM)) & (ids[:, :, 0] >= 0)
            expected = np.where(geoms, entity_of_geom[np.where(geoms, ids[:, :, 0], 0)], -1)
            assert frame.segmentation is not None
            assert np.array_equal(frame.segmentation, expected)
            assert (frame.segmentation >= 0).any()
    finally:
        reference.close()
    # channels left out are not rendered
    only = sim.render("pole", 96, 72, color=False, segmentation=False)
    assert only.color is None and only.segmentation is None and only.depth is not None


def test_flat_pass_draws_without_multisampling_and_a_closed_renderer_refuses(sim) -> None:  # type: ignore[no-untyped-def]
    """Colour keeps the model's multisampling; the id and depth pass has a buffer without it
    (the comparison above shows it reads the same); the model is left as it was."""
    samples = sim.model.vis.quality.offsamples
    assert samples > 0
    renderer = SceneRenderer(sim.scene, 64, 48)
    try:
        assert renderer._context is not None and renderer._flat_context is not None
        assert renderer._context.offSamples == samples
        assert renderer._flat_context.offSamples == 0
        assert sim.model.vis.quality.offsamples == samples
        frame = renderer.render(sim.data, "pole")
        assert frame.segmentation is not None and (frame.segmentation >= 0).any()
    finally:
        renderer.close()
    renderer.close()  # closing twice is harmless
    with pytest.raises(RenderError, match="closed"):
        renderer.render(sim.data, "pole")


def test_render_bad_input(sim) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnknownEntityError):
        sim.render("ceiling", 32, 24)
    with pytest.raises(Exception, match="size"):
        sim.render("pole", 0, 24)


# ------------------------------------------------------------------------------------ physics


def test_move_to_and_unreachable_poses(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_1")
    result = sim.move_to("cab_3")
    assert result.reached and result.position_error < 0.03
    assert sim.log[-1].name == "move_to" and sim.log[-1].samples
    with pytest.raises(UnreachablePoseError, match="outside the room"):
        sim.move_to((9.0, 0.0, 0.0))
    with pytest.raises(UnreachablePoseError, match="counter_1"):
        sim.move_to((0.7, 0.0, 0.0))
    with pytest.raises(UnreachablePoseError):
        sim.move_to((float("nan"), 0.0, 0.0))
    with pytest.raises(UnknownEntityError):
        sim.move_to("cab_42")


def test_locked_door_resists_and_unlocked_door_opens(sim, scenario) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_1")
    sim.begin_instruction(0)
    locked = sim.open("cab_1")
    assert not locked.success
    assert locked.measurements["fingers_on_handle"] == 2.0
    assert abs(locked.measurements["opening_after"]) < 0.01
    assert max(locked.measurements["peak_pull_force"], locked.measurements["peak_handle_force"]) > 5
    assert "did not move" in locked.outcome
    assert len(locked.samples) > 10  # the window recorded before/during/after
    assert sim.move_to("cab_2").reached
    opened = sim.open("cab_2")
    assert opened.success, opened.outcome
    assert sim.fixture_opening("cab_2") > 0.5
    # an open door has nothing left to pull: success at once, no motion, no grasp
    start, angle = sim.time, sim.fixture_opening("cab_2")
    again = sim.open("cab_2")
    assert again.success and again.outcome == "already open"
    assert sim.time - start < 0.1 and sim.fixture_opening("cab_2") == pytest.approx(angle)
    inspect = sim.inspect("cab_2")
    assert inspect.frames and "banana_1" in inspect.outcome
    assert judge_instruction(sim, scenario.instructions[0], 0, ["banana_1"]).success
    # second instruction: re-attempting the locked cabinet is a failure
    sim.begin_instruction(1)
    assert sim.move_to("cab_1").reached
    sim.open("cab_1")
    verdict = judge_instruction(sim, scenario.instructions[1], 1)
    assert not verdict.success


def test_pick_leaves_cabinet_and_place_on_counter(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_3")
    closed = sim.pick("ketchup_1")
    assert not closed.success and "closed" in closed.outcome
    assert sim.open("cab_3").success
    picked = sim.pick("ketchup_1")
    assert picked.success, picked.outcome
    assert sim.object_fixture("ketchup_1") != "cab_3"
    with pytest.raises(PrimitiveError):
        sim.pick("apple_1")
    placed = sim.place("ketchup_1", "counter_1", (0.8, 0.3))
    assert placed.success, placed.outcome
    assert sim.object_fixture("ketchup_1") == "counter_1"
    with pytest.raises(PrimitiveError):
        sim.place("ketchup_1", "counter_1")


def _asleep(sim: KitchenSim, body: str) -> bool:
    return int(sim.data.body_awake[sim.model.body(body).id]) == int(mujoco.mjtSleepState.mjS_ASLEEP)


def test_objects_at_rest_sleep_and_wake_when_touched_or_moved(  # type: ignore[no-untyped-def]
    scenario, tidybot_dir: Path
) -> None:
    """MuJoCo's sleeping (``physics_sleep``): resting objects leave the solver, the robot never
    sleeps, and a pick, a weld or a written position wakes what it concerns."""
    # scenes of their own: the setting is written into the scene's model
    sim = KitchenSim(build_scene(scenario, tidybot_dir), SimConfig(seed=1))
    try:
        sim.reset("cab_3")
        sim.step_seconds(1.0)
        assert _asleep(sim, "ketchup_1") and _asleep(sim, "apple_1")
        assert not _asleep(sim, "base_link")
        assert sim.data.nv_awake < sim.model.nv
        # a written position wakes the object, and it falls back onto its shelf as it would awake
        joint = sim.model.body("apple_1").jntadr[0]
        adr = sim.model.jnt_qposadr[joint]
        rest = sim.data.qpos[adr + 2]
        sim.data.qpos[adr + 2] += 0.02
        sim.step(1)
        assert not _asleep(sim, "apple_1")
        sim.step_seconds(0.5)
        assert abs(sim.data.qpos[adr + 2] - rest) < 0.005
        # the gripper touching a sleeping object wakes it: the pick works as when awake
        assert sim.open("cab_3").success
        assert _asleep(sim, "ketchup_1")
        picked = sim.pick("ketchup_1")
        assert picked.success, picked.outcome
        assert sim.object_fixture("ketchup_1") != "cab_3"
        assert not _asleep(sim, "ketchup_1")
    finally:
        sim.shutdown()
    awake = KitchenSim(build_scene(scenario, tidybot_dir), SimConfig(seed=1, physics_sleep=False))
    try:
        awake.reset("cab_3")
        awake.step_seconds(1.0)
        assert awake.data.nv_awake == awake.model.nv
        assert not _asleep(awake, "ketchup_1")
    finally:
        awake.shutdown()


def test_large_grasp_noise_misses_the_handle(scene) -> None:  # type: ignore[no-untyped-def]
    noisy = KitchenSim(scene, SimConfig(grasp_noise=0.2, seed=3))
    try:
        noisy.reset("cab_2")
        record = noisy.open("cab_2")
        assert not record.success
        assert noisy.fixture_opening("cab_2") < 0.3
        assert record.measurements["grasp_offset"] > 0.05
    finally:
        noisy.shutdown()


# ------------------------------------------------------------------------ close, tilted pick


def test_open_then_close_unlocked_cabinet(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_2")
    opened = sim.open("cab_2")
    assert opened.success, opened.outcome
    assert sim.fixture_opening("cab_2") > 1.2  # swung clear of the cabinet front
    closed = sim.close_fixture("cab_2")
    assert closed.success, closed.outcome
    assert closed.measurements["fingers_on_handle"] == 2.0
    assert closed.measurements["opening_before"] > 1.2
    assert sim.fixture_opening("cab_2") < sim.config.close_threshold_door
    assert not sim.is_open("cab_2")
    # a counter has nothing to close; unknown fixtures are typed errors
    with pytest.raises(PrimitiveError):
        sim.close_fixture("counter_1")
    with pytest.raises(UnknownEntityError):
        sim.close_fixture("cab_99")


def test_pick_banana_with_tilted_approach(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_2")
    assert sim.open("cab_2").success
    picked = sim.pick("banana_1")
    assert picked.success, picked.outcome
    assert picked.measurements["approach_pitch"] == pytest.approx(sim.config.pick_pitch)
    assert sim.object_fixture("banana_1") != "cab_2"
    assert sim.holding == "banana_1"
    placed = sim.place("banana_1", "counter_1", (0.7, 0.3))
    assert placed.success, placed.outcome


def test_level_approach_for_tall_objects(sim) -> None:  # type: ignore[no-untyped-def]
    sim.reset("cab_3")
    assert sim.open("cab_3").success
    picked = sim.pick("ketchup_1")
    assert picked.success, picked.outcome
    assert picked.measurements["approach_pitch"] == 0.0


def test_physics_that_blows_up_stops_the_simulation_loudly(  # type: ignore[no-untyped-def]
        scene, tmp_path: Path) -> None:
    sim = KitchenSim(scene, SimConfig(seed=1))
    try:
        sim.step_seconds(0.1)
        before = sim.time
        dof = int(sim.model.joint("joint_th").dofadr[0])
        sim.data.qvel[dof] = float("nan")  # what a blown-up contact leaves behind
        with pytest.raises(PhysicsUnstableError,
                           match=rf"t = {before:.3f} s.*freedom {dof}") as raised:
            sim.step(1)
        assert sim.time < before  # MuJoCo had reset the world under it: the error says so
    finally:
        sim.shutdown()
    # the blow-up is saved with the state before the bad step, and replays the same way
    saved = save_unstable(raised.value, scene.model, tmp_path / "blowup.npz")
    model, data = load_unstable(saved)
    assert data.time == pytest.approx(before) and math.isnan(data.qvel[dof])
    mujoco.mj_step(model, data)
    assert data.warning[mujoco.mjtWarning.mjWARN_BADQVEL].number == 1
    with pytest.raises(ValueError, match="no state"):
        save_unstable(PhysicsUnstableError("no state"), scene.model, tmp_path / "none.npz")
    np.savez(tmp_path / "other.npz", state=np.zeros(3))
    with pytest.raises(ValueError, match="not a saved physics blow-up"):
        load_unstable(tmp_path / "other.npz")
