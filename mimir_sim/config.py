"""Controller and recording settings of the simulation, with a checked YAML loader.

``config/sim.yaml`` is a flat mapping whose keys are the fields of :class:`SimConfig`. Every key
is optional (a missing one keeps the default written here, so code that never reads the file
behaves the same). An unknown key, a value of the wrong type or a value outside its range raises
:class:`~mimir_sim.errors.SimConfigError` whose ``key`` names the offending entry.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from mimir_sim.errors import SimConfigError
from mimir_sim.rendering import CAMERAS
from mimir_sim.view_meshes import DEFAULT_VIEW_FACES


@dataclass(frozen=True)
class SimConfig:
    """Controller and recording parameters (SI units)."""

    base_speed: float = 0.5  # m/s of the base set-point
    base_turn_speed: float = 1.0  # rad/s
    base_pos_tol: float = 0.03
    base_yaw_tol: float = 0.05
    base_settle_s: float = 1.5
    arm_speed: float = 0.25  # m/s of the gripper along Cartesian paths
    ik_pos_tol: float = 0.01
    ik_rot_tol: float = 0.05
    grasp_noise: float = 0.0  # std-dev (m) of the grasp target offset, per axis
    grip_close_s: float = 0.8
    door_open_angle: float = 1.5  # rad the pull aims for (past square, clear of the cabinet)
    door_push_back_angle: float = 0.9  # rad a wide-open door is pushed back to before closing
    drawer_open_dist: float = 0.25  # m the pull aims for
    open_threshold_door: float = 0.5  # rad counted as open
    open_threshold_drawer: float = 0.12  # m counted as open
    close_threshold_door: float = 0.08  # rad at or below which a close counts as done
    close_threshold_drawer: float = 0.03  # m at or below which a close counts as done
    close_overdrive_door: float = 0.02  # rad the push aims past the closed stop
    close_overdrive_drawer: float = 0.01  # m the push aims past the closed stop
    handle_max_skew: float = 1.2  # rad the hand may turn off an open door's normal at the bar
    door_via_angle: float = 0.15  # rad above which the handle approach detours round the door
    door_via_clearance: float = 0.1  # m between the detour waypoint and the door edge
    pick_pitch: float = 0.45  # rad the hand points down for objects lower than pick_tilt_below
    pick_tilt_below: float = 0.03  # m of half height under which the pick approach tilts
    pick_grip_height: float = 0.006  # m the tilted grip aims above the object's centre
    pick_max_yaw: float = 0.35  # rad the pick approach may turn from the base heading
    pick_hinge_clearance: float = 0.3  # m the pick stance keeps from an open door's hinge line
    pick_base_distance: float = 0.68  # m from base centre to object the pick stands at; 0 off
    pick_pre_distance: float = 0.22  # m the pre-grasp pose stands back along the approach
    reach_radius: float = 1.1  # max base-to-handle distance for arm primitives (m)
    pick_assist: bool = True  # weld object to the gripper once both fingers touch it
    sample_rate_hz: float = 20.0
    frame_rate_hz: float = 0.0  # 0 disables frames in primitive windows
    frame_cameras: tuple[str, ...] = ("wrist",)
    frame_size: tuple[int, int] = (320, 240)
    inspect_frames: int = 5
    view_mesh_faces: int = DEFAULT_VIEW_FACES  # most faces a robot visual mesh keeps in images
    physics_sleep: bool = True  # MuJoCo puts objects at rest to sleep (woken by touch or writes)
    seed: int = 0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> SimConfig:
        """Override defaults from a mapping of field names (a subset is fine).

        Raises:
            SimConfigError: unknown key, wrong type or value out of range (``err.key`` names it).
        """
        return parse_sim_config(data)


# fields that must be strictly positive; every other number must be at least zero
_POSITIVE = frozenset(
    {
        "base_speed",
        "base_turn_speed",
        "base_pos_tol",
        "base_yaw_tol",
        "arm_speed",
        "ik_pos_tol",
        "ik_rot_tol",
        "grip_close_s",
        "door_open_angle",
        "drawer_open_dist",
        "open_threshold_door",
        "open_threshold_drawer",
        "close_threshold_door",
        "close_threshold_drawer",
        "reach_radius",
        "sample_rate_hz",
        "inspect_frames",
    }
)
_MAX_FRAME_SIZE = (1280, 960)  # the scene's offscreen buffer


def default_sim_config_path() -> Path:
    """``$MIMIR_SIM_CONFIG`` if set, else ``config/sim.yaml`` of this checkout."""
    override = os.environ.get("MIMIR_SIM_CONFIG")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[1] / "config" / "sim.yaml"


def _type_name(value: object) -> str:
    return type(value).__name__


def _number(value: object, key: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SimConfigError(key, f"expected a number, got {_type_name(value)} {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise SimConfigError(key, "expected a finite number")
    if positive and result <= 0.0:
        raise SimConfigError(key, f"expected a positive number, got {result}")
    if result < 0.0:
        raise SimConfigError(key, f"must not be negative, got {result}")
    return result


def _integer(value: object, key: str, positive: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimConfigError(key, f"expected an integer, got {_type_name(value)} {value!r}")
    if value < (1 if positive else 0):
        raise SimConfigError(key, f"expected an integer >= {1 if positive else 0}, got {value}")
    return value


def _cameras(value: object, key: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise SimConfigError(key, f"expected a list of camera names, got {_type_name(value)}")
    names: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise SimConfigError(f"{key}[{i}]", f"expected a camera name, got {_type_name(item)}")
        if item not in CAMERAS:
            raise SimConfigError(f"{key}[{i}]", f"{item!r} is not one of {', '.join(CAMERAS)}")
        names.append(item)
    return tuple(names)


def _frame_size(value: object, key: str) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise SimConfigError(key, f"expected [width, height], got {value!r}")
    width = _integer(value[0], f"{key}[0]", positive=True)
    height = _integer(value[1], f"{key}[1]", positive=True)
    if width > _MAX_FRAME_SIZE[0] or height > _MAX_FRAME_SIZE[1]:
        raise SimConfigError(
            key,
            f"{width}x{height} exceeds the offscreen buffer "
            f"{_MAX_FRAME_SIZE[0]}x{_MAX_FRAME_SIZE[1]}",
        )
    return (width, height)


def parse_sim_config(data: object) -> SimConfig:
    """Build a :class:`SimConfig` from decoded YAML (a mapping; ``None`` means all defaults).

    Raises:
        SimConfigError: the data is not a mapping, or a key is unknown, mistyped or out of range.
    """
    if data is None:
        return SimConfig()
    if not isinstance(data, Mapping):
        raise SimConfigError("<root>", f"expected a mapping, got {_type_name(data)}")
    defaults = SimConfig()
    known = {f.name for f in fields(SimConfig)}
    values: dict[str, Any] = {}
    for raw_key, value in data.items():
        name = str(raw_key)
        key = name
        if name not in known:
            raise SimConfigError(key, "unknown simulation setting")
        default = getattr(defaults, name)
        if name == "frame_cameras":
            values[name] = _cameras(value, key)
        elif name == "frame_size":
            values[name] = _frame_size(value, key)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise SimConfigError(key, f"expected true or false, got {_type_name(value)}")
            values[name] = value
        elif isinstance(default, int):
            values[name] = _integer(value, key, positive=name in _POSITIVE)
        else:
            values[name] = _number(value, key, positive=name in _POSITIVE)
    return replace(defaults, **values)


def load_sim_config(path: str | Path | None = None) -> SimConfig:
    """Read simulation settings from a YAML file (default :func:`default_sim_config_path`).

    Raises:
        SimConfigError: the file cannot be read, is not valid YAML, or holds a bad entry; the
            error's ``key`` is ``<file>`` for the first two and the setting's name otherwise.
    """
    file = Path(path) if path is not None else default_sim_config_path()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as err:
        raise SimConfigError("<file>", f"cannot read simulation settings {file}: {err}") from err
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise SimConfigError("<file>", f"{file.name} is not valid YAML: {err}") from err
    return parse_sim_config(data)
