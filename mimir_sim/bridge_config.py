"""Settings of the simulation bridge and building its simulator from them.

:class:`SimBridgeConfig` lists the bridge's parameters (the ROS node declares one parameter per
field, with the description and read-only flag in the field's metadata); :func:`build_sim` loads
the scenario, the controller settings and the robot model and turns every way that can fail
into one :class:`BridgeStartupError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from mimir.paths import ConfigFileNotFoundError, config_dir
from mimir.settings import param
from mimir_perception.errors import VocabularyError
from mimir_perception.vocabulary import Vocabulary, load_named_vocabulary, load_vocabulary
from mimir_sim.config import SimConfig, default_sim_config_path, load_sim_config
from mimir_sim.entity_labels import LabelMap
from mimir_sim.errors import ModelDirError, ScenarioError, SceneBuildError, SimConfigError
from mimir_sim.noise import NoiseProfile, NoiseProfileError, load_noise_profile
from mimir_sim.rendering import CAMERAS
from mimir_sim.scenario import load_scenario
from mimir_sim.sim import KitchenSim


class BridgeStartupError(RuntimeError):
    """The bridge cannot start: bad parameters, scenario, robot model or simulation settings."""


@dataclass(frozen=True)
class SimBridgeConfig:
    """Parameters of the sim bridge (the simulation deployment file sets them)."""

    scenario: str = param(
        "locked_unlocked",
        "scenario name under config/scenarios or a scenario YAML path",
        read_only=True)
    seed: int = param(-1, "layout seed; -1 uses the scenario's own", read_only=True)
    tidybot_dir: str = param(
        "",
        "TidyBot++ model: tidybot.xml or a folder holding it; empty = mujoco-menagerie's "
        "stanford_tidybot ($MENAGERIE_ROOT for an offline copy)",
        read_only=True)
    sim_config: str = param(
        "",
        "controller settings YAML; empty = config/sim.yaml when present, else built-in defaults",
        read_only=True)
    cameras: tuple[str, ...] = param(
        ("base", "pole", "wrist"), "cameras to publish (base, pole, wrist)", read_only=True)
    image_width: int = param(320, "rendered image width (px)", read_only=True)
    image_height: int = param(240, "rendered image height (px)", read_only=True)
    camera_rate: float = param(
        2.0, "camera frames per second of simulation time (Hz)", read_only=True)
    state_rate: float = param(
        20.0, "/tf, /clock and joint_states per second of simulation time (Hz)", read_only=True)
    real_time_factor: float = param(
        1.0,
        "largest simulation speed relative to wall time; 0 = as fast as possible",
        read_only=True)
    step_chunk: float = param(0.05, "simulation time advanced per idle step (s)", read_only=True)
    noise_profile: str = param(
        "realistic",
        "sensor and actuation noise: a profile under config/noise (ideal, realistic) or a YAML "
        "path",
        read_only=True)
    noise_scale: float = param(
        1.0, "factor on every noise term of the profile (0 = noise-free)", read_only=True)
    target_tolerance: float = param(
        0.6,
        "judging: largest distance between an answered entity's remembered position and a "
        "simulated entity's box (m)",
        read_only=True)
    vocabulary: str = param(
        "kitchen",
        "vocabulary whose labels ground-truth labels map to (name or YAML path); empty keeps the "
        "simulator's labels",
        read_only=True)
    localisation_file: str = param(
        "",
        "judging: JSON file that receives the error of the robot's localised base pose against "
        "simulator truth (sampled while the base stands still); empty: no localisation audit",
        read_only=True)
    unstable_state_file: str = param(
        "",
        "where a physics blow-up is saved for a replay (mimir_sim.physics.load_unstable: the "
        "scene and the state before the step that blew up, .npz); empty: not saved",
        read_only=True)
    audit_file: str = param(
        "",
        "judging: JSON-lines file that receives a grade (true, false, ungradable) of every "
        "memory event with a verdict, against simulator truth; empty: no audit",
        read_only=True)
    segmentation: bool = param(True, "publish ground-truth segmentation", read_only=True)
    min_segment_pixels: int = param(
        20, "instances with fewer pixels are left out (px)", read_only=True)
    discover_min_pixels: int = param(
        150,
        "an object covering at least this many pixels of one rendered frame's ground-truth "
        "segmentation during an instruction counts as discovered when judging it (px at "
        "image_width x image_height); 0 counts only inspections",
        read_only=True)
    rpc_host: str = param(
        "127.0.0.1", "address the simulated robot's base and arm RPC servers listen on",
        read_only=True)
    base_port: int = param(50000, "TCP port of the base server (0 picks a free one)",
                           read_only=True)
    arm_port: int = param(50001, "TCP port of the arm server (0 picks a free one)",
                          read_only=True)
    authkey: str = param("", "shared secret of the RPC servers (required)", read_only=True)
    map_frame: str = param("map", "map frame", read_only=True)
    base_frame: str = param("base_link", "robot base frame", read_only=True)
    optical_frame_suffix: str = param(
        "_color_optical_frame", "camera optical frame = camera name + this suffix", read_only=True)
    diagnostics_period: float = param(
        1.0, "period of the /diagnostics report (wall s)", read_only=True)

    def __post_init__(self) -> None:
        unknown = [c for c in self.cameras if c not in CAMERAS]
        if unknown or len(set(self.cameras)) != len(self.cameras):
            raise ValueError(
                f"cameras must be distinct names from {CAMERAS}, got {list(self.cameras)}"
            )
        if not (0 < self.image_width <= 1280 and 0 < self.image_height <= 960):
            raise ValueError(
                f"image size must lie within 1x1..1280x960, got "
                f"{self.image_width}x{self.image_height}"
            )
        for name in (
            "camera_rate",
            "state_rate",
            "step_chunk",
            "target_tolerance",
            "diagnostics_period",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0.0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        for name in ("real_time_factor", "noise_scale"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a number >= 0, got {value}")
        if self.min_segment_pixels < 1:
            raise ValueError(f"min_segment_pixels must be >= 1, got {self.min_segment_pixels}")
        if self.discover_min_pixels < 0:
            raise ValueError(f"discover_min_pixels must be >= 0, got {self.discover_min_pixels}")
        if not self.authkey:
            raise ValueError("authkey is empty: set the RPC servers' shared secret")
        for name in ("base_port", "arm_port"):
            if not 0 <= getattr(self, name) < 65536:
                raise ValueError(f"{name} {getattr(self, name)} is not a TCP port")
        if not all((self.map_frame, self.base_frame, self.optical_frame_suffix)):
            raise ValueError("frame names must not be empty")


def resolve_vocabulary(value: str) -> Vocabulary | None:
    """The vocabulary ``value`` names (a name under config/ or a YAML path); ``None`` if empty."""
    if not value:
        return None
    try:
        if value.endswith((".yaml", ".yml")) or "/" in value:
            return load_vocabulary(Path(value).expanduser())
        return load_named_vocabulary(value, config_dir())
    except (VocabularyError, ConfigFileNotFoundError) as err:
        raise BridgeStartupError(f"cannot load vocabulary {value!r}: {err}") from err


def sim_settings(cfg: SimBridgeConfig) -> SimConfig:
    """Controller settings from the file the config names, with its seed."""
    path = Path(cfg.sim_config).expanduser() if cfg.sim_config else default_sim_config_path()
    try:
        base = load_sim_config(path) if cfg.sim_config or path.is_file() else SimConfig()
    except SimConfigError as err:
        raise BridgeStartupError(f"bad simulation settings {path}: {err}") from err
    seed = cfg.seed if cfg.seed >= 0 else base.seed
    return replace(base, seed=seed)


def build_sim(cfg: SimBridgeConfig) -> KitchenSim:
    """Load the scenario and build the simulator, with startup errors as one clear type.

    Raises:
        BridgeStartupError: unknown or malformed scenario, missing robot model, a scene MuJoCo
            rejects, or bad simulation settings.
    """
    try:
        scenario = load_scenario(cfg.scenario)
    except ScenarioError as err:
        raise BridgeStartupError(f"cannot load scenario {cfg.scenario!r}: {err}") from err
    tidybot = Path(cfg.tidybot_dir).expanduser() if cfg.tidybot_dir else None
    try:
        return KitchenSim.from_scenario(
            scenario, tidybot, cfg.seed if cfg.seed >= 0 else None, sim_settings(cfg)
        )
    except (ModelDirError, SceneBuildError) as err:
        raise BridgeStartupError(f"cannot build scenario {scenario.name!r}: {err}") from err


def noise_for(cfg: SimBridgeConfig) -> NoiseProfile:
    """The noise profile the config names, at its scale."""
    try:
        return load_noise_profile(cfg.noise_profile, cfg.noise_scale)
    except NoiseProfileError as err:
        raise BridgeStartupError(f"cannot load noise profile {cfg.noise_profile!r}: {err}") from err


def label_map_for(vocabulary: Vocabulary | None) -> LabelMap:
    """Map from simulator labels to the vocabulary's labels (identity without a vocabulary)."""
    if vocabulary is None:
        return LabelMap()
    return LabelMap((e.label, e.prompt) for e in vocabulary.entries)
