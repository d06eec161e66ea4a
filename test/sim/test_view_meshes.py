"""Lighter robot meshes for the cameras: same physics, nearly the same images, a cache that
cannot hand back half a file, and clear errors for bad meshes."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import mujoco
import numpy as np
import pytest

from mimir_sim import view_meshes
from mimir_sim.config import SimConfig
from mimir_sim.errors import SceneBuildError
from mimir_sim.scenario import load_scenario
from mimir_sim.scene import build_scene, robot_xml_path
from mimir_sim.sim import KitchenSim
from mimir_sim.view_meshes import (
    DEFAULT_VIEW_FACES,
    VIEW_SUFFIX,
    cached_decimate,
    decimate,
    lighten_visual_meshes,
    mesh_dir_of,
)

SEED = 1003


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("MIMIR_CACHE_DIR", str(cache))
    return cache


@pytest.fixture(scope="module")
def scenes(tidybot_dir: Path) -> tuple[KitchenSim, KitchenSim]:
    scenario = load_scenario("locked_unlocked")
    # the setting reaches the scene through the simulator's configuration (config/sim.yaml)
    full = KitchenSim.from_scenario(scenario, tidybot_dir, SEED, SimConfig(view_mesh_faces=0))
    light = KitchenSim.from_scenario(scenario, tidybot_dir, SEED)
    yield full, light
    full.shutdown()
    light.shutdown()


def _mesh_name(model: mujoco.MjModel, geom: int) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_MESH, int(model.geom_dataid[geom]))


def test_physics_keeps_the_original_meshes_and_inertia(scenes) -> None:  # type: ignore[no-untyped-def]
    full, light = (s.scene.model for s in scenes)
    full_data, light_data = (s.data for s in scenes)
    light_data.qpos[:] = full_data.qpos
    mujoco.mj_forward(full, full_data)
    mujoco.mj_forward(light, light_data)
    assert full.ngeom == light.ngeom
    np.testing.assert_array_equal(full.body_mass, light.body_mass)
    np.testing.assert_array_equal(full.body_inertia, light.body_inertia)
    np.testing.assert_array_equal(full.body_ipos, light.body_ipos)
    swapped = 0
    for g in range(full.ngeom):
        if full.geom_type[g] != mujoco.mjtGeom.mjGEOM_MESH:
            continue
        if full.geom_contype[g] or full.geom_conaffinity[g]:
            # a geom that collides draws on the original mesh in both models
            assert _mesh_name(light, g) == _mesh_name(full, g)
            continue
        name = _mesh_name(light, g)
        if name.endswith(VIEW_SUFFIX):
            swapped += 1
            assert light.mesh_facenum[light.geom_dataid[g]] <= DEFAULT_VIEW_FACES
            assert full.mesh_facenum[full.geom_dataid[g]] > DEFAULT_VIEW_FACES
            # MuJoCo centres each mesh on its own centroid and the geom frame makes up for it:
            # the copy sits where the original does, up to the decimation's centroid shift
            assert np.linalg.norm(light_data.geom_xpos[g] - full_data.geom_xpos[g]) < 0.005
    assert swapped >= 8  # the arm links and the gripper base
    assert light.nmeshface > full.nmeshface  # copies are added; originals stay for collisions


def _arm_forward(sim: KitchenSim, pose: np.ndarray) -> None:
    model, data = sim.scene.model, sim.data
    for i, value in enumerate(pose, start=1):
        joint = model.joint(f"joint_{i}")
        data.qpos[model.jnt_qposadr[joint.id]] = value
    mujoco.mj_forward(model, data)


def test_images_move_only_on_the_robots_edges(scenes) -> None:  # type: ignore[no-untyped-def]
    full, light = scenes
    rng = np.random.default_rng(0)
    robot_seen = 0
    for _ in range(4):
        pose = rng.uniform(-1.2, 1.2, size=7)
        frames = []
        for sim in (full, light):
            _arm_forward(sim, pose)
            frames.append(sim.render("pole", 320, 240))
        a, b = frames
        assert a.entity_ids == b.entity_ids
        robot = a.entity_ids.index("robot")
        robot_seen += int((a.segmentation == robot).sum())
        changed = a.segmentation != b.segmentation
        assert changed.mean() < 0.005
        # every changed pixel is robot in one of the two images
        assert np.all((a.segmentation[changed] == robot) | (b.segmentation[changed] == robot))
        far = np.abs(a.depth - b.depth) > 0.005
        assert far.mean() < 0.005
        assert np.abs(a.color.astype(int) - b.color.astype(int)).mean() < 3.0
    assert robot_seen > 0.02 * 4 * 320 * 240  # the arm was in view, so the check had teeth


def test_cache_is_read_back_and_survives_damage(
        tmp_path: Path, tidybot_dir: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    source = mesh_dir_of(robot_xml_path(tidybot_dir)) / "gen3" / "shoulder_link.stl"
    cache = tmp_path / "meshes"
    first = cached_decimate(source, 500, cache)
    assert 0 < len(first.faces) <= 500 < first.source_faces
    (entry,) = cache.glob("*.npz")

    def refuse(_path: Path, _faces: int) -> None:
        raise AssertionError("decimated again although the cache holds the mesh")

    monkeypatch.setattr(view_meshes, "decimate", refuse)
    again = cached_decimate(source, 500, cache)
    np.testing.assert_array_equal(again.vertices, first.vertices)
    np.testing.assert_array_equal(again.faces, first.faces)
    monkeypatch.undo()

    # another face limit is another entry
    cached_decimate(source, 800, cache)
    assert len(list(cache.glob("*.npz"))) == 2

    entry.write_bytes(b"not an npz")
    with caplog.at_level(logging.WARNING, logger="mimir_sim.view_meshes"):
        redone = cached_decimate(source, 500, cache)
    assert "unreadable" in caplog.text
    np.testing.assert_array_equal(redone.faces, first.faces)


def test_unwritable_cache_costs_time_not_the_mesh(
        tmp_path: Path, tidybot_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = mesh_dir_of(robot_xml_path(tidybot_dir)) / "gen3" / "shoulder_link.stl"
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    with caplog.at_level(logging.WARNING, logger="mimir_sim.view_meshes"):
        light = cached_decimate(source, 500, blocked / "meshes")
    assert "not written" in caplog.text
    assert len(light.faces) <= 500


def test_bad_inputs_are_typed_errors(tmp_path: Path, tidybot_dir: Path) -> None:
    robot = robot_xml_path(tidybot_dir)
    spec = mujoco.MjSpec.from_file(str(robot))
    with pytest.raises(ValueError, match="max_faces"):
        lighten_visual_meshes(spec, mesh_dir_of(robot), 0)
    # a robot folder whose meshes are gone
    with pytest.raises(SceneBuildError, match="not found"):
        lighten_visual_meshes(spec, tmp_path, 1000)
    # a mesh file that holds no triangles
    junk = tmp_path / "junk.stl"
    junk.write_text("solid nothing\nendsolid nothing\n")
    with pytest.raises(SceneBuildError, match="no triangles"):
        decimate(junk, 100)
    bad_xml = tmp_path / "robot.xml"
    bad_xml.write_text("<mujoco><compiler meshdir='m'")
    with pytest.raises(SceneBuildError, match="cannot read the robot model"):
        mesh_dir_of(bad_xml)


def test_mesh_folder_follows_the_compiler(tmp_path: Path, tidybot_dir: Path) -> None:
    robot = robot_xml_path(tidybot_dir)
    assert (mesh_dir_of(robot) / "gen3" / "shoulder_link.stl").is_file()
    plain = tmp_path / "a.xml"
    plain.write_text("<mujoco/>")
    assert mesh_dir_of(plain) == tmp_path.resolve()
    assets = tmp_path / "b.xml"
    assets.write_text("<mujoco><compiler assetdir='things'/></mujoco>")
    assert mesh_dir_of(assets) == (tmp_path / "things").resolve()


def test_a_copied_robot_folder_works_without_a_cache(
        tmp_path: Path, tidybot_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a robot model in another place: mesh paths resolve from its own compiler settings
    copy = tmp_path / "tidybot"
    shutil.copytree(tidybot_dir, copy)
    monkeypatch.setenv("MIMIR_CACHE_DIR", str(tmp_path / "cache"))
    scene = build_scene(load_scenario("locked_unlocked"), copy, seed=SEED, view_mesh_faces=1500)
    names = {scene.model.mesh(i).name for i in range(scene.model.nmesh)}
    assert "shoulder_link" + VIEW_SUFFIX in names
    assert (tmp_path / "cache" / "view_meshes").is_dir()
