"""Simulation settings file: defaults, overrides and typed errors that name the key."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

# mimir_sim.config imports mujoco (through the renderer's camera list); pick the headless GL
# backend before the first import, as every sim test file does
os.environ.setdefault("MUJOCO_GL", "egl")

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mimir_sim.config import (
    SimConfig,
    default_sim_config_path,
    load_sim_config,
    parse_sim_config,
)
from mimir_sim.errors import SimConfigError, SimError
from mimir_sim.view_meshes import DEFAULT_VIEW_FACES


def test_shipped_file_holds_every_setting_at_its_default() -> None:
    path = default_sim_config_path()
    assert path.name == "sim.yaml" and path.is_file()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert set(data) == {f.name for f in dataclasses.fields(SimConfig)}
    assert load_sim_config(path) == SimConfig()
    assert load_sim_config() == SimConfig()


def test_overrides_and_coercions(tmp_path: Path) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text(
        "grasp_noise: 0.05\nbase_speed: 1\nframe_cameras: [wrist, pole]\nframe_size: [64, 48]\n"
        "pick_assist: false\nseed: 7\nframe_rate_hz: 5\n",
        encoding="utf-8",
    )
    cfg = load_sim_config(path)
    assert cfg.grasp_noise == 0.05
    assert cfg.base_speed == 1.0 and isinstance(cfg.base_speed, float)
    assert cfg.frame_cameras == ("wrist", "pole")
    assert cfg.frame_size == (64, 48)
    assert cfg.pick_assist is False and cfg.seed == 7 and cfg.frame_rate_hz == 5.0
    # untouched keys keep their defaults
    assert cfg.door_open_angle == SimConfig().door_open_angle
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing set\n", encoding="utf-8")
    assert load_sim_config(empty) == SimConfig()
    assert SimConfig.from_mapping({"reach_radius": 0.9}).reach_radius == 0.9


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("grasp_nosie: 0.1\n", "grasp_nosie", "unknown"),
        ("base_speed: fast\n", "base_speed", "number"),
        ("base_speed: true\n", "base_speed", "number"),
        ("base_speed: 0\n", "base_speed", "positive"),
        ("grasp_noise: -0.1\n", "grasp_noise", "negative"),
        ("grasp_noise: .nan\n", "grasp_noise", "finite"),
        ("pick_assist: 1\n", "pick_assist", "true or false"),
        ("seed: 1.5\n", "seed", "integer"),
        ("seed: -1\n", "seed", "integer"),
        ("inspect_frames: 0\n", "inspect_frames", "integer"),
        ("frame_cameras: wrist\n", "frame_cameras", "list"),
        ("frame_cameras: [wrist, ceiling]\n", "frame_cameras[1]", "not one of"),
        ("frame_cameras: [3]\n", "frame_cameras[0]", "camera name"),
        ("frame_size: [64]\n", "frame_size", "width, height"),
        ("frame_size: [64, 4.5]\n", "frame_size[1]", "integer"),
        ("frame_size: [4000, 48]\n", "frame_size", "offscreen"),
        ("- base_speed\n", "<root>", "mapping"),
        ("base_speed: [unclosed\n", "<file>", "YAML"),
    ],
)
def test_bad_files_name_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = tmp_path / "sim.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SimConfigError) as info:
        load_sim_config(path)
    assert info.value.key == key
    assert fragment in str(info.value)
    assert isinstance(info.value, SimError)


def test_missing_file_and_bad_mapping(tmp_path: Path) -> None:
    with pytest.raises(SimConfigError, match="cannot read"):
        load_sim_config(tmp_path / "absent.yaml")
    with pytest.raises(SimConfigError) as info:
        SimConfig.from_mapping({"colour": 1})
    assert info.value.key == "colour"
    with pytest.raises(SimConfigError):
        parse_sim_config(["base_speed", 1])
    assert parse_sim_config(None) == SimConfig()


_FLOAT_FIELDS = sorted(
    f.name for f in dataclasses.fields(SimConfig) if isinstance(getattr(SimConfig(), f.name), float)
)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(_FLOAT_FIELDS),
    value=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
    sign=st.sampled_from([1.0, -1.0]),
)
def test_any_number_field_accepts_positive_and_refuses_negative(
    name: str, value: float, sign: float
) -> None:
    if sign > 0:
        assert getattr(parse_sim_config({name: value}), name) == value
    else:
        with pytest.raises(SimConfigError) as info:
            parse_sim_config({name: -value})
        assert info.value.key == name


def test_physics_sleep_is_a_checked_boolean_setting() -> None:
    assert parse_sim_config({"physics_sleep": False}).physics_sleep is False
    assert SimConfig().physics_sleep is True
    for bad in (1, "yes", None):
        with pytest.raises(SimConfigError) as err:
            parse_sim_config({"physics_sleep": bad})
        assert err.value.key == "physics_sleep"


def test_the_face_limit_is_a_checked_simulation_setting() -> None:
    assert parse_sim_config({"view_mesh_faces": 0}).view_mesh_faces == 0
    assert parse_sim_config({"view_mesh_faces": 500}).view_mesh_faces == 500
    assert SimConfig().view_mesh_faces == DEFAULT_VIEW_FACES
    for bad in (-1, 1.5, "2000", True, None):
        with pytest.raises(SimConfigError) as err:
            parse_sim_config({"view_mesh_faces": bad})
        assert err.value.key == "view_mesh_faces"
