"""Configuration of the memory core, read from ``config/memory.yaml``.

Defaults below match the shipped YAML so the core also works without the file (tests, tools).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mimir import settings
from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError, bounds_from_dict
from mimir.labels import label_key
from mimir_memory.errors import ConfigError

SYNCHRONOUS_LEVELS = ("FULL", "NORMAL", "EXTRA")
IMAGE_FORMATS = ("jpg", "png")


@dataclass(frozen=True)
class AssociationConfig(settings.Checked, section="association", error=ConfigError,
                        positive=("default_radius_m", "hypothesis_factor", "fade",
                                  "operation_timeout_s"),
                        non_negative=("box_tolerance_m", "stale_after_s"),
                        positive_int=("misses_to_stale",),
                        within={"box_overlap": (0.0, 1.0)}):
    """Association radii of the scene graph.

    Attributes:
        default_radius_m: Radius for labels without their own entry (m).
        label_radius_m: Per-label radius (m), keyed by normalised label.
        hypothesis_factor: New nodes within ``factor * radius`` of a same-label node become
            alternative hypotheses of it.
        box_overlap: An observation also matches a same-label node within the hypothesis
            reach when this share of one box lies inside the other (per axis, multiplied);
            0 disables. Large fixtures need it: a front face, an edge, an open door and the
            interior of one cabinet have centroids far apart but boxes inside one another.
        box_tolerance_m: Slack added around boxes for that test, and for the test that
            tells whether an observation lies inside a node's box when it is fused (m).
        fade: Least weight of a new observation in a node's position estimate, in (0, 1].
            The n-th observation since the estimate started weighs ``max(1/n, fade)``: the
            first ``1/fade`` observations are averaged, after that old evidence fades
            geometrically, so the estimate follows an object that moved. 1 keeps only the
            latest observation.
        label_fade: Per-label ``fade``, keyed by normalised label. Built-in fixtures do not
            move, while views of them do change (an opened door, a look inside): a small fade
            keeps their estimate on the evidence of many views instead of following the last.
        misses_to_stale: Misses in a row (perception expected to see a node and did not)
            after which memory records that the node is no longer at its last place.
        stale_after_s: Least time (s) between the node's last sighting, by any camera, and the
            miss that marks it gone: a recent sighting outweighs a few misses. While the wrist
            camera looks into a cabinet from close by, the pole camera's far view of the same
            small thing flickers (half hidden behind the cabinet's front, behind the arm); its
            misses alone must not make memory forget what the wrist just saw.
        merge_converged: After a batch is fused, a fused node and another node of its label
            whose centroids lie within the association radius and whose boxes nest (the
            ``box_overlap`` test) are one object seen as two: the one with fewer observations is
            merged into the other by a ``nodes_merged`` event. False keeps both (ablations).
        open_swing: An observation that matches no node, whose box lies (``box_overlap``
            share) in the swing of a same-label fixture memory holds open (or that an open or
            close is moving, see ``anchor_open``), is that fixture's
            door or drawer seen apart from it: it counts as a sighting of the fixture and does
            not move it (it would otherwise become a second node where the door stands). The
            swing is the fixture's box stretched along its shallower horizontal axis by its
            wider horizontal extent, and along the wider one by half of it, where a door or
            drawer of that width can stand; a neighbour beside the fixture lies mostly
            outside. False leaves such views alone.
        anchor_open: A fixture memory holds open, or one the robot is opening or closing
            (``WorldMemory.operation_started``, until memory holds the operation's analysed
            outcome), keeps its centroid: its views then show the
            door standing out into the room and the interior behind, not the closed front
            that located it, and averaging them walks the estimate off the fixture (an
            inspection aimed there runs the hand into the door). Such views still widen the
            node's box outward, so the interior they show counts as inside. False lets them
            move the fixture like any view.
        operation_timeout_s: An operation whose outcome never reaches memory stops anchoring
            its fixture this long (s, by observation stamps) after it started.
        no_start_cameras: Per label (normalised), the cameras whose views may fuse into a
            node of that label but may not start one. A camera that works centimetres from a
            large fixture (the wrist at a cabinet front) sees a corner or a door edge of it
            from an angle; such a view, when it matches no node, is a piece of a fixture
            already mapped, not a new one. Its observation is held back (see
            ``WorldMemory.ingest``). Empty: every camera may start every label.
    """

    default_radius_m: float = 0.30
    label_radius_m: dict[str, float] = field(default_factory=dict)
    hypothesis_factor: float = 2.0
    box_overlap: float = 0.6
    box_tolerance_m: float = 0.03
    fade: float = 0.2
    label_fade: dict[str, float] = field(default_factory=dict)
    misses_to_stale: int = 3
    stale_after_s: float = 5.0
    merge_converged: bool = True
    open_swing: bool = True
    anchor_open: bool = True
    operation_timeout_s: float = 300.0
    no_start_cameras: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.no_start_cameras, dict):
            raise ConfigError("association.no_start_cameras must be a mapping of label to "
                              "camera names")
        cameras: dict[str, tuple[str, ...]] = {}
        for k, v in self.no_start_cameras.items():
            if isinstance(v, str) or not isinstance(v, (list, tuple)) or not all(
                    isinstance(c, str) and c.strip() for c in v):
                raise ConfigError(f"association.no_start_cameras.{k} must be a list of camera "
                                  f"names, got {v!r}")
            cameras[label_key(str(k))] = tuple(c.strip() for c in v)
        object.__setattr__(self, "no_start_cameras", cameras)
        if not isinstance(self.label_radius_m, dict):
            raise ConfigError("association.label_radius_m must be a mapping")
        cleaned = {
            label_key(str(k)): settings.positive(f"association.label_radius_m.{k}", v,
                                                 ConfigError)
            for k, v in self.label_radius_m.items()
        }
        object.__setattr__(self, "label_radius_m", cleaned)
        if not isinstance(self.label_fade, dict):
            raise ConfigError("association.label_fade must be a mapping")
        fades = {
            label_key(str(k)): settings.within(f"association.label_fade.{k}", v, 1e-6, 1.0,
                                               ConfigError)
            for k, v in self.label_fade.items()
        }
        object.__setattr__(self, "label_fade", {k: float(v) for k, v in fades.items()})
        if self.hypothesis_factor < 1.0:
            raise ConfigError("association.hypothesis_factor must be >= 1")
        if self.fade > 1.0:
            raise ConfigError(f"association.fade must be at most 1, got {self.fade!r}")

    def radius(self, label: str) -> float:
        """Association radius of ``label`` (m)."""
        return self.label_radius_m.get(label_key(label), self.default_radius_m)

    def may_start(self, label: str, camera: str) -> bool:
        """Whether a view from ``camera`` may start a node of ``label``."""
        return camera not in self.no_start_cameras.get(label_key(label), ())

    def fade_of(self, label: str) -> float:
        """Least weight of a new observation of ``label`` in its position estimate."""
        return self.label_fade.get(label_key(label), self.fade)


@dataclass(frozen=True)
class StorageConfig(settings.Checked, section="storage", error=ConfigError,
                    positive_int=("busy_timeout_ms",)):
    """SQLite settings shared by the world and keyframe databases."""

    synchronous: str = "FULL"
    busy_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.synchronous, str) or self.synchronous.upper() not in (
            SYNCHRONOUS_LEVELS
        ):
            raise ConfigError(f"storage.synchronous must be one of {SYNCHRONOUS_LEVELS}")
        object.__setattr__(self, "synchronous", self.synchronous.upper())


@dataclass(frozen=True)
class KeyframeConfig(settings.Checked, section="keyframes", error=ConfigError,
                     positive_int=("max_pixels", "thumbnail_width", "dedup_recent_count"),
                     non_negative=("blank_std_threshold", "blur_threshold", "dedup_window_s"),
                     within={"jpeg_quality": (1, 100), "thumbnail_quality": (1, 100),
                             "dedup_hamming_threshold": (0, 64)},
                     choices={"image_format": IMAGE_FORMATS}):
    """Keyframe store settings (filters, image encoding, limits)."""

    max_pixels: int = 3840 * 2160
    thumbnail_width: int = 160
    image_format: str = "jpg"
    jpeg_quality: int = 92
    thumbnail_quality: int = 80
    blank_std_threshold: float = 3.0
    blur_threshold: float = 25.0
    dedup_hamming_threshold: int = 5
    dedup_window_s: float = 60.0
    dedup_recent_count: int = 64


@dataclass(frozen=True)
class RenderConfig(settings.Checked, section="render", error=ConfigError,
                   positive_int=("max_chars",)):
    """Bounds of the planner-prompt rendering."""

    max_chars: int = 6000


@dataclass(frozen=True)
class MemoryConfig:
    """All memory-core settings."""

    association: AssociationConfig = field(default_factory=AssociationConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    keyframes: KeyframeConfig = field(default_factory=KeyframeConfig)
    render: RenderConfig = field(default_factory=RenderConfig)
    bounds: Bounds = DEFAULT_BOUNDS


def memory_config_from_dict(data: object) -> MemoryConfig:
    """Build a :class:`MemoryConfig` from parsed YAML (unknown keys are an error)."""
    if data is None:
        return MemoryConfig()
    if not isinstance(data, dict):
        raise ConfigError("memory configuration must be a mapping")
    settings.refuse_unknown(data, {"association", "storage", "keyframes", "render", "bounds"},
                            "the memory configuration", ConfigError)
    try:
        bounds = bounds_from_dict(data.get("bounds"))
    except BoundsError as err:
        raise ConfigError(str(err)) from err
    return MemoryConfig(
        association=settings.section(AssociationConfig, "association", data.get("association"),
                                     ConfigError),
        storage=settings.section(StorageConfig, "storage", data.get("storage"), ConfigError),
        keyframes=settings.section(KeyframeConfig, "keyframes", data.get("keyframes"),
                                   ConfigError),
        render=settings.section(RenderConfig, "render", data.get("render"), ConfigError),
        bounds=bounds,
    )


def load_memory_config(path: str | Path) -> MemoryConfig:
    """Read a memory configuration YAML file.

    Raises:
        ConfigError: The file cannot be read, is not YAML, or holds bad values.
    """
    return memory_config_from_dict(settings.read_mapping(path, "memory configuration",
                                                         ConfigError))
