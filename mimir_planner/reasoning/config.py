"""Frozen configuration objects of the reasoning core and their YAML loader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from mimir import settings
from mimir_planner.reasoning.errors import ReasoningConfigError

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "config" / "reasoning.yaml"

BACKEND_KINDS = ("openai", "transformers", "offline")


@dataclass(frozen=True)
class VlmConfig:
    """Settings of the vision-language model backend."""

    backend: str = "offline"
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = ""
    api_key_env: str = ""
    model_path: str = ""
    device: str = "cpu"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 60.0
    max_attempts: int = 4
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 20.0
    json_mode: bool = True
    image_format: str = "jpeg"
    jpeg_quality: int = 90

    def __post_init__(self) -> None:
        if self.backend not in BACKEND_KINDS:
            raise ReasoningConfigError(f"vlm.backend must be one of {BACKEND_KINDS}")
        if self.image_format not in ("png", "jpeg"):
            raise ReasoningConfigError("vlm.image_format must be 'png' or 'jpeg'")
        _positive("vlm.timeout_s", self.timeout_s)
        _positive("vlm.max_tokens", self.max_tokens)
        _positive("vlm.max_attempts", self.max_attempts)
        _non_negative("vlm.backoff_initial_s", self.backoff_initial_s)
        _non_negative("vlm.backoff_max_s", self.backoff_max_s)
        _non_negative("vlm.temperature", self.temperature)
        if not 1 <= self.jpeg_quality <= 100:
            raise ReasoningConfigError("vlm.jpeg_quality must lie in [1, 100]")


@dataclass(frozen=True)
class AnalyzerConfig:
    """Settings of the interaction analyzer (evidence building and prompting)."""

    prompt_dir: str = "prompts"
    manipulation_prompt: str = "interaction_manipulation"
    inspection_prompt: str = "interaction_inspection"
    correction_prompt: str = "answer_correction"
    answer_attempts: int = 3
    primary_camera: str = ""
    peak_camera: str = "wrist"
    full_image_max_side: int = 1280
    collage_columns: int = 6
    collage_tile_width: int = 256
    collage_label_width: int = 96
    collage_header_height: int = 24
    window_margin_s: float = 1.0
    nearby_fixture_radius_m: float = 2.0

    def __post_init__(self) -> None:
        _positive("analyzer.answer_attempts", self.answer_attempts)
        _positive("analyzer.full_image_max_side", self.full_image_max_side)
        _positive("analyzer.collage_columns", self.collage_columns)
        _positive("analyzer.collage_tile_width", self.collage_tile_width)
        _non_negative("analyzer.collage_label_width", self.collage_label_width)
        _non_negative("analyzer.collage_header_height", self.collage_header_height)
        _non_negative("analyzer.window_margin_s", self.window_margin_s)
        _non_negative("analyzer.nearby_fixture_radius_m", self.nearby_fixture_radius_m)


@dataclass(frozen=True)
class VocabularyConfig:
    """Property vocabulary, fixture labels and word lists used to read answers."""

    seeded_properties: tuple[str, ...] = (
        "accessible",
        "pickable",
        "pushable",
        "fullness",
        "openable",
        "locked",
    )
    fullness_values: tuple[str, ...] = ("empty", "partially_full", "full", "unknown")
    fixture_labels: tuple[str, ...] = ("cabinet", "drawer", "fridge", "microwave", "oven")
    failure_keywords: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "fixture_locked": ("locked", "stuck", "no motion"),
            "missed_grasp": ("missed", "slip", "no contact", "failed grasp"),
        }
    )
    primitive_intents: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {
            "inspection": ("inspect", "peek"),
            "open": ("open",),
            "close": ("close",),
            "pick": ("pick", "grasp"),
            "place": ("place",),
            "push": ("push", "slide"),
        }
    )
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class PerceptConfig:
    """Thresholds of the generic percepts that verifiers and the offline reasoner use."""

    min_grip_effort_n: float = 5.0
    min_object_width_m: float = 0.004
    min_contact_samples: int = 2
    min_pull_force_n: float = 10.0
    open_displacement_m: float = 0.03
    open_displacement_rad: float = 0.15
    depth_pixel_change_m: float = 0.03
    depth_min_valid_pixels: int = 50
    depth_change_quantile: float = 0.75
    box_margin_m: float = 0.03

    def __post_init__(self) -> None:
        _positive("percepts.min_contact_samples", self.min_contact_samples)
        _positive("percepts.open_displacement_m", self.open_displacement_m)
        _positive("percepts.open_displacement_rad", self.open_displacement_rad)
        _positive("percepts.depth_pixel_change_m", self.depth_pixel_change_m)
        _positive("percepts.depth_min_valid_pixels", self.depth_min_valid_pixels)
        _non_negative("percepts.box_margin_m", self.box_margin_m)
        _non_negative("percepts.min_grip_effort_n", self.min_grip_effort_n)
        _non_negative("percepts.min_object_width_m", self.min_object_width_m)
        if not 0.0 < self.depth_change_quantile <= 1.0:
            raise ReasoningConfigError("percepts.depth_change_quantile must lie in (0, 1]")


@dataclass(frozen=True)
class VerifierConfig:
    """Settings of the propose-verify harness."""

    min_confidence: float = 0.5
    rebind_radius_m: float = 1.5
    max_rechecks: int = 5
    extractors: tuple[str, ...] = ("grasp_hold",)

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ReasoningConfigError("verifier.min_confidence must lie in [0, 1]")
        _non_negative("verifier.rebind_radius_m", self.rebind_radius_m)
        _positive("verifier.max_rechecks", self.max_rechecks)


@dataclass(frozen=True)
class ReasoningConfig:
    """Whole reasoning configuration; ``base_dir`` resolves relative paths such as prompts."""

    vlm: VlmConfig = field(default_factory=VlmConfig)
    analyzer: AnalyzerConfig = field(default_factory=AnalyzerConfig)
    vocabulary: VocabularyConfig = field(default_factory=VocabularyConfig)
    percepts: PerceptConfig = field(default_factory=PerceptConfig)
    verifier: VerifierConfig = field(default_factory=VerifierConfig)
    base_dir: Path = DEFAULT_CONFIG_PATH.parent

    @property
    def prompt_dir(self) -> Path:
        """Absolute folder of the prompt templates."""
        path = Path(self.analyzer.prompt_dir)
        return path if path.is_absolute() else self.base_dir / path


def _positive(name: str, value: float) -> None:
    settings.positive(name, value, ReasoningConfigError)


def _non_negative(name: str, value: float) -> None:
    settings.non_negative(name, value, ReasoningConfigError)


_T = TypeVar("_T")


def _build(cls: type[_T], section: str, raw: object) -> _T:
    return settings.section(cls, section, raw, ReasoningConfigError)


def load_reasoning_config(path: Path | str | None = None) -> ReasoningConfig:
    """Reads the reasoning YAML file (``config/reasoning.yaml`` by default).

    Raises:
        ReasoningConfigError: the file is missing, is not YAML, or holds an invalid value.
    """
    cfg_path = Path(path) if path is not None else DEFAULT_CONFIG_PATH
    raw = settings.read_mapping(cfg_path, "reasoning config", ReasoningConfigError)
    settings.refuse_unknown(raw, {"vlm", "analyzer", "vocabulary", "percepts", "verifier"},
                            str(cfg_path), ReasoningConfigError)
    return ReasoningConfig(
        vlm=_build(VlmConfig, "vlm", raw.get("vlm")),
        analyzer=_build(AnalyzerConfig, "analyzer", raw.get("analyzer")),
        vocabulary=_build(VocabularyConfig, "vocabulary", raw.get("vocabulary")),
        percepts=_build(PerceptConfig, "percepts", raw.get("percepts")),
        verifier=_build(VerifierConfig, "verifier", raw.get("verifier")),
        base_dir=cfg_path.resolve().parent,
    )
