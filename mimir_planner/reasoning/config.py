"""Frozen configuration objects of the reasoning core and their YAML loader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from mimir import settings
from mimir_planner.reasoning.errors import ReasoningConfigError

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "config" / "reasoning.yaml"

BACKEND_KINDS = ("openai", "transformers", "offline")


@dataclass(frozen=True)
class VlmConfig(settings.Checked, section="vlm", error=ReasoningConfigError,
                positive=("timeout_s", "max_tokens", "max_attempts"),
                non_negative=("backoff_initial_s", "backoff_max_s", "temperature"),
                within={"jpeg_quality": (1, 100)},
                choices={"backend": BACKEND_KINDS, "image_format": ("png", "jpeg")}):
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


@dataclass(frozen=True)
class AnalyzerConfig(settings.Checked, section="analyzer", error=ReasoningConfigError,
                     positive=("answer_attempts", "full_image_max_side", "collage_columns",
                               "collage_tile_width"),
                     non_negative=("collage_label_width", "collage_header_height",
                                   "window_margin_s", "nearby_fixture_radius_m")):
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


@dataclass(frozen=True)
class VocabularyConfig:
    """Property vocabulary, fixture and structure labels and word lists used to read answers
    (``structure_labels``: the room's fixed parts, which hold nothing inside them and are
    never held)."""

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
    open_top_labels: tuple[str, ...] = ("bin", "basket")
    structure_labels: tuple[str, ...] = ("counter", "shelf", "table", "sink", "wall", "floor")
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

    @property
    def never_contents(self) -> frozenset[str]:
        """Labels nothing holds: fixtures (their doors, shelves and walls are detected with
        their labels) and the room's structure (a counter slab over a lower unit, the wall
        behind a shelf)."""
        return frozenset(self.fixture_labels) | frozenset(self.structure_labels)


@dataclass(frozen=True)
class PerceptConfig(settings.Checked, section="percepts", error=ReasoningConfigError,
                    positive=("min_contact_samples", "open_displacement_m", "open_hand_travel_m",
                              "held_back_m", "depth_pixel_change_m", "depth_min_valid_pixels",
                              "min_visible_frames", "depth_change_quantile",
                              "content_min_detections", "content_spot_m", "interior_back_m",
                              "interior_back_min_pixels", "interior_stride_px",
                              "place_rest_m", "place_fall_m", "place_fall_reach_m"),
                    non_negative=("box_margin_m", "min_grip_effort_n", "min_object_width_m",
                                  "registration_max_m", "registration_max_rad",
                                  "interior_inset_m", "place_settle_s"),
                    within={"depth_change_quantile": (0.0, 1.0),
                            "content_spot_share": (0.0, 1.0)}):
    """Thresholds of the generic percepts that verifiers and the offline reasoner use."""

    min_grip_effort_n: float = 5.0
    min_object_width_m: float = 0.004
    min_contact_samples: int = 2
    min_pull_force_n: float = 10.0
    open_displacement_m: float = 0.03
    open_hand_travel_m: float = 0.12
    held_back_m: float = 0.03
    depth_pixel_change_m: float = 0.03
    depth_min_valid_pixels: int = 50
    depth_change_quantile: float = 0.75
    registration_max_m: float = 0.05
    registration_max_rad: float = 0.05
    min_visible_frames: int = 2
    box_margin_m: float = 0.03
    content_min_detections: int = 1
    content_spot_m: float = 0.04
    content_spot_share: float = 0.5
    interior_inset_m: float = 0.05
    interior_back_m: float = 0.15
    interior_back_min_pixels: int = 10
    interior_stride_px: int = 1
    place_settle_s: float = 0.3
    place_rest_m: float = 0.12
    place_fall_m: float = 0.2
    place_fall_reach_m: float = 0.8


#: every verdict kind of the harness, each of which can be switched off (its claims then pass
#: unchecked): ids must exist, no claim twice, extractor-owned types, properties only of the
#: target, motion for open/close, contact without motion for locked, a hold for a lift,
#: confidence where no predicate exists, detections for contents and emptiness, outcomes
VERIFIERS = ("grounding", "dedup", "ownership", "target", "opened", "locked", "lifted",
             "confidence", "contains", "empty", "outcome")


@dataclass(frozen=True)
class VerifierConfig(settings.Checked, section="verifier", error=ReasoningConfigError,
                     positive=("max_rechecks",), non_negative=("rebind_radius_m",),
                     within={"min_confidence": (0.0, 1.0)}):
    """Settings of the propose-verify harness (``partial_look_outcomes``: executor outcome
    codes of a look that reached only some of its views; it shows what it saw, never that
    something is absent; ``gave_way_outcomes``: executor outcome codes of an open or close
    whose pull went on past the point where a held part stops it, so the part moved and is not
    locked)."""

    min_confidence: float = 0.5
    rebind_radius_m: float = 1.5
    max_rechecks: int = 5
    extractors: tuple[str, ...] = ("grasp_hold",)
    switched_off: tuple[str, ...] = ()
    partial_look_outcomes: tuple[str, ...] = ("INSPECTED_PARTLY",)
    gave_way_outcomes: tuple[str, ...] = ("PARTIAL_OPEN", "OPENED", "CLOSED")

    def __post_init__(self) -> None:
        super().__post_init__()
        unknown = sorted(set(self.switched_off) - set(VERIFIERS))
        if unknown:
            raise ReasoningConfigError(
                f"verifier.switched_off names unknown verifiers {unknown}; known: {VERIFIERS}")


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


def with_model(config: ReasoningConfig, *, backend: str = "", base_url: str = "",
               model: str = "") -> ReasoningConfig:
    """``config`` with the model choices an operator gave (launch arguments, node parameters).

    An empty value keeps the file's. The result is validated as the file's values are.

    Raises:
        ReasoningConfigError: an unknown backend.
    """
    if not (backend or base_url or model):
        return config
    vlm = config.vlm
    return replace(config, vlm=replace(vlm, backend=backend or vlm.backend,
                                       base_url=base_url or vlm.base_url,
                                       model=model or vlm.model))


def with_verifiers_off(config: ReasoningConfig, kinds: str) -> ReasoningConfig:
    """``config`` with the verdict kinds named in ``kinds`` switched off (ablations).

    ``kinds`` is a comma-separated list of :data:`VERIFIERS`, or ``all``; an empty one keeps the
    file's choice.

    Raises:
        ReasoningConfigError: a kind that is no verifier.
    """
    off = [k.strip() for k in kinds.split(",") if k.strip()]
    if not off:
        return config
    switched = VERIFIERS if off == ["all"] else tuple(off)
    return replace(config, verifier=replace(config.verifier, switched_off=switched))
