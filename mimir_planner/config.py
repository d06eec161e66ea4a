"""Frozen configuration of the planning core and its YAML loader (``config/planner.yaml``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mimir import settings
from mimir_planner.errors import PlannerConfigError

DEFAULT_PLANNER_CONFIG = Path(__file__).resolve().parents[1] / "config" / "planner.yaml"

ABSTRACT_PRIMITIVES = ("move_to", "open", "close", "inspect", "pick", "place")
"""The embodiment-independent action space (mimir.md: A-bar)."""


@dataclass(frozen=True)
class RecallConfig(settings.Checked, section="recall", error=PlannerConfigError,
                   positive=("max_candidates",),
                   non_negative=("label_weight", "synonym_weight", "contents_weight",
                                 "embedding_weight", "source_weight",
                                 "embedding_min_similarity", "same_spot_m")):
    """Goal-conditioned recall (mimir.md eq. 9).

    Attributes:
        max_candidates: Bound K of the candidate list.
        use_embedder: Add text-embedding similarity evidence (needs the optional model).
        embedding_min_similarity: Cosine similarity below which embeddings give no evidence.
        label_weight: Score of an exact label match.
        synonym_weight: Score of a synonym-table match.
        contents_weight: Score of a fixture whose remembered contents list the object.
        embedding_weight: Factor applied to the cosine similarity.
        source_weight: Bonus when the remembered parent is the explicit source.
        same_spot_m: Two listed things of one name or of synonyms whose nodes lie this close
            are one thing the cameras named twice (a cup also detected as a mug); answers
            that list contents count it once, and a likeness reference is the reading the
            cameras gave more often.
    """

    max_candidates: int = 8
    use_embedder: bool = False
    embedding_min_similarity: float = 0.55
    label_weight: float = 1.0
    synonym_weight: float = 0.8
    contents_weight: float = 0.7
    embedding_weight: float = 0.6
    source_weight: float = 0.3
    same_spot_m: float = 0.05


@dataclass(frozen=True)
class RetrievalConfig(settings.Checked, section="retrieval", error=PlannerConfigError,
                      positive=("node_cap", "label_cap", "recent_cap", "shortlist_k", "final_k",
                                "catalog_max_labels", "stage_attempts")):
    """Keyframe retriever (messymem.md §3.4): pool caps and stage sizes."""

    node_cap: int = 12
    label_cap: int = 12
    recent_cap: int = 8
    shortlist_k: int = 6
    final_k: int = 3
    catalog_max_labels: int = 4
    stage_attempts: int = 2
    stage1_prompt: str = "retrieval_stage1"
    stage2_prompt: str = "retrieval_stage2"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.final_k > self.shortlist_k:
            raise PlannerConfigError("retrieval.final_k must not exceed retrieval.shortlist_k")


@dataclass(frozen=True)
class LoopConfig(settings.Checked, section="planner", error=PlannerConfigError,
                 positive=("step_budget", "answer_attempts", "scene_graph_chars",
                           "history_steps", "sighting_min_observations"),
                 non_negative=("max_retries", "holder_margin_m", "holder_max_distance_m",
                               "inventory_window_s")):
    """Closed-loop planning.

    Attributes:
        step_budget: Planner calls per instruction.
        answer_attempts: Attempts at a schema-valid planner answer per call.
        prompt: Name of the planner prompt template.
        prompt_dir: Folder of the prompt templates (relative to the YAML file).
        scene_graph_chars: Bound of the rendered scene graph.
        history_steps: Execution history entries shown to the planner.
        embodiment: Embodiment whose legal actions the adapter maps to.
        robot_description: One line describing the robot in prompts.
        max_retries: How often a primitive that failed on a target may be tried again on it
            within one instruction (messymem: a missed grasp is worth one more try). Once the
            allowance is spent the binding is recorded as failed in task memory.
        persistent_failures: Executor outcome codes (or words of the failure text) that
            reveal a lasting property, such as a locked fixture; they are never retried.
        retried_failures: Executor outcome codes that say the grasp was lost before the
            target could show how it behaves (the handle slipped out early, the fingers
            closed on nothing); such a step stays within the retry allowance even when the
            failure text names a lasting property (a reasoner may read a slip as a lock).
        robot_faults: Executor outcome codes that say the robot failed, not the target (the
            link to its servers was lost): such a step neither counts against the target's
            retry allowance nor records a failed binding; the step budget still bounds the
            instruction.
        find_requires_inspection: A ``find`` goal completes only after the fixture that holds
            the object was inspected during the current instruction (so the object is
            discovered, not just remembered); when false it completes from memory at once.
        find_accepts_sighting: A ``find`` goal also completes without inspecting the holder
            when perception observed the object's own node during the current instruction.
        sighting_min_observations: A node counts as seen during the instruction (a sighting
            that completes a find on a surface, or inside with ``find_accepts_sighting``) only
            once perception has observed it at least this many times since the instruction
            began. Fewer is a glimpse (one small detection across the room): the robot moves to
            the node to look, once, before it falls back to inspecting the holder.
        holder_margin_m: Margin around a fixture's box within which the base of an object
            without a remembered parent counts as held by that fixture (m).
        holder_max_distance_m: Failing that, the fixture whose top is not below the object's
            base and whose box comes nearest to it within this distance counts as its holder
            (m); a fixture whose box starts above the base never does.
        inventory_window_s: A sighting up to this long after a fixture's inventory was taken
            belongs to the look that took it (its frames are still being deprojected when the
            analyzer writes the inventory): an object the inventory leaves out is not kept
            alive by a stray label of that same look (s).
    """

    step_budget: int = 12
    answer_attempts: int = 2
    prompt: str = "planner"
    prompt_dir: str = "prompts"
    scene_graph_chars: int = 6000
    history_steps: int = 20
    embodiment: str = "sim_tidybot"
    robot_description: str = "a TidyBot++ mobile manipulator (holonomic base, arm, gripper)"
    max_retries: int = 1
    persistent_failures: tuple[str, ...] = ("NO_MOTION", "LOCKED")
    retried_failures: tuple[str, ...] = ("SLIPPED", "MISSED_GRASP")
    robot_faults: tuple[str, ...] = ("LINK_LOST",)
    find_requires_inspection: bool = True
    find_accepts_sighting: bool = False
    sighting_min_observations: int = 2
    holder_margin_m: float = 0.1
    holder_max_distance_m: float = 0.5
    inventory_window_s: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        persistent = _strings("planner.persistent_failures", self.persistent_failures)
        object.__setattr__(self, "persistent_failures", tuple(p.upper() for p in persistent))
        retried = _strings("planner.retried_failures", self.retried_failures)
        object.__setattr__(self, "retried_failures", tuple(r.upper() for r in retried))
        faults = _strings("planner.robot_faults", self.robot_faults)
        object.__setattr__(self, "robot_faults", tuple(f.upper() for f in faults))
        groups = {"persistent": self.persistent_failures, "retried": self.retried_failures,
                  "robot_faults": self.robot_faults}
        names = list(groups)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                both = set(groups[a]) & set(groups[b])
                if both:
                    raise PlannerConfigError(f"planner: {sorted(both)} cannot be both {a} "
                                             f"and {b}")


@dataclass(frozen=True)
class AttributeConfig(settings.Checked, section="attributes", error=PlannerConfigError,
                      within={"min_confidence": (0.0, 1.0)}):
    """Attribute words the offline planner can check against memory.

    Attributes:
        colors: Colour words (``green apple``).
        patterns: Pattern words (``striped mug``).
        aliases: Word -> other spellings of it (``grey: [gray]``); each alias counts as the word.
        min_confidence: A ``color``/``colour``/``pattern`` node property below this confidence
            counts as unknown.
    """

    colors: tuple[str, ...] = ("red", "green", "blue", "yellow", "orange", "purple", "pink",
                               "brown", "black", "white", "grey", "silver", "gold", "beige")
    patterns: tuple[str, ...] = ("striped", "checked", "dotted", "plain")
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: {
        "grey": ("gray",), "purple": ("violet",), "striped": ("stripy",),
        "checked": ("checkered", "chequered", "plaid"), "dotted": ("spotted",)})
    min_confidence: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        _strings("attributes.colors", self.colors)
        _strings("attributes.patterns", self.patterns)
        words = {w.lower() for w in (*self.colors, *self.patterns)}
        for word, others in self.aliases.items():
            _strings(f"attributes.aliases.{word}", others)
            if word.lower() not in words:
                raise PlannerConfigError(
                    f"attributes.aliases names {word!r}, which is no colour or pattern word")


@dataclass(frozen=True)
class GateConfig(settings.Checked, section="gate", error=PlannerConfigError,
                 positive=("timeout_s",)):
    """Operator gate: every primitive waits for approval when enabled."""

    enabled: bool = False
    timeout_s: float = 120.0


@dataclass(frozen=True)
class ClutterConfig(settings.Checked, section="clutter", error=PlannerConfigError,
                    positive=("finger_gap_m", "neighbour_radius_m"),
                    non_negative=("min_difference_m", "same_spot_m")):
    """Free space beside a pick candidate (:mod:`mimir_planner.clutter`), in metres.

    Attributes:
        finger_gap_m: room a gripper finger needs beside the object; a candidate with less on
            some side counts as cluttered.
        neighbour_radius_m: objects whose centres lie farther (horizontally) are not neighbours.
        min_difference_m: the roomiest candidate is chosen only when it has this much more room
            than the next; closer gaps are within the boxes' depth noise.
        same_spot_m: a node whose box centre lies this close to the candidate's is the same
            thing remembered under another label (a segmenter's look-alike confusion), not a
            neighbour: two solid things cannot share a spot (0: every node counts).
    """

    finger_gap_m: float = 0.03
    neighbour_radius_m: float = 0.35
    min_difference_m: float = 0.03
    same_spot_m: float = 0.03


@dataclass(frozen=True)
class PlannerConfig:
    """Everything the planning core reads from ``config/planner.yaml``.

    Attributes:
        fixture_labels: Labels of fixtures the robot can navigate to and open or inspect.
        synonyms: Label -> other names of the same thing (the always-available recall path).
        categories: Category -> its members (fruit, condiment, dry goods ...), the offline
            planner's knowledge of which things go together.
        brands: Label -> brand and product names things of that label are known by (a Froot
            Loops box is a cereal box); the offline planner's knowledge of what a brand is.
        attributes: Colour and pattern words the offline planner checks against memory.
        clutter: Free space a pick candidate needs beside it.
        primitive_descriptions: Abstract primitive -> one line shown to the planner.
        embodiments: Embodiment name -> abstract primitive -> legal action name.
        aliases: Other names a plan may use for an abstract primitive.
        base_dir: Folder the YAML file lives in (prompt folders are relative to it).
    """

    recall: RecallConfig = field(default_factory=RecallConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    loop: LoopConfig = field(default_factory=LoopConfig)
    gate: GateConfig = field(default_factory=GateConfig)
    attributes: AttributeConfig = field(default_factory=AttributeConfig)
    clutter: ClutterConfig = field(default_factory=ClutterConfig)
    fixture_labels: tuple[str, ...] = ("cabinet", "cab", "drawer", "fridge", "refrigerator",
                                       "microwave", "oven", "dishwasher", "shelf", "counter",
                                       "table", "box", "bin", "basket")
    openable_labels: tuple[str, ...] = ("cabinet", "cab", "drawer", "fridge", "refrigerator",
                                        "microwave", "oven", "dishwasher", "box")
    synonyms: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    categories: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    brands: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    primitive_descriptions: Mapping[str, str] = field(default_factory=dict)
    embodiments: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: {"sim_tidybot": {p: p for p in ABSTRACT_PRIMITIVES}}
    )
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    base_dir: Path = DEFAULT_PLANNER_CONFIG.parent

    def __post_init__(self) -> None:
        if self.loop.embodiment not in self.embodiments:
            raise PlannerConfigError(
                f"planner.embodiment {self.loop.embodiment!r} is not one of "
                f"{sorted(self.embodiments)}"
            )
        for name, table in self.embodiments.items():
            missing = sorted(set(ABSTRACT_PRIMITIVES) - set(table))
            unknown = sorted(set(table) - set(ABSTRACT_PRIMITIVES))
            if unknown:
                raise PlannerConfigError(f"embodiment {name!r} maps unknown primitives {unknown}")
            if missing:
                raise PlannerConfigError(f"embodiment {name!r} lacks primitives {missing}")
        for prim in self.aliases:
            if prim not in ABSTRACT_PRIMITIVES:
                raise PlannerConfigError(f"aliases name unknown primitive {prim!r}")

    @property
    def prompt_dir(self) -> Path:
        """Folder of the prompt templates."""
        return self.base_dir / self.loop.prompt_dir

    def is_fixture_label(self, label: str) -> bool:
        """Whether a label names a fixture (any word of it is a fixture word)."""
        return _matches(label, self.fixture_labels)

    def is_openable_label(self, label: str) -> bool:
        """Whether a label names a fixture that opens."""
        return _matches(label, self.openable_labels)


def _matches(label: str, words: tuple[str, ...]) -> bool:
    tokens = label.lower().replace("_", " ").split()
    return any(t in words or t.rstrip("s") in words for t in tokens)


_T = TypeVar("_T")


def _section(cls: type[_T], name: str, raw: object) -> _T:
    return settings.section(cls, name, raw, PlannerConfigError)


def _strings(name: str, value: object) -> tuple[str, ...]:
    return settings.strings(name, value, PlannerConfigError)


def _string_lists(name: str, value: object) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PlannerConfigError(f"{name} must be a mapping")
    return {str(k): _strings(f"{name}.{k}", v) for k, v in value.items()}


def _string_map(name: str, value: object) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()
    ):
        raise PlannerConfigError(f"{name} must map names to non-empty strings")
    return {str(k): str(v) for k, v in value.items()}


def load_planner_config(path: Path | str | None = None) -> PlannerConfig:
    """Read the planner YAML file (``config/planner.yaml`` by default).

    Raises:
        PlannerConfigError: The file is missing, is not YAML or holds an invalid value.
    """
    cfg_path = Path(path) if path is not None else DEFAULT_PLANNER_CONFIG
    raw = settings.read_mapping(cfg_path, "planner config", PlannerConfigError)
    sections = {"recall", "retrieval", "planner", "gate", "attributes", "clutter", "fixture_labels",
                "openable_labels", "synonyms", "categories", "brands", "primitives",
                "embodiments", "aliases"}
    settings.refuse_unknown(raw, sections, str(cfg_path), PlannerConfigError)
    extra: dict[str, Any] = {}
    if "fixture_labels" in raw:
        extra["fixture_labels"] = _strings("fixture_labels", raw["fixture_labels"])
    if "openable_labels" in raw:
        extra["openable_labels"] = _strings("openable_labels", raw["openable_labels"])
    if "embodiments" in raw:
        table = raw["embodiments"]
        if not isinstance(table, Mapping) or not table:
            raise PlannerConfigError("embodiments must be a non-empty mapping")
        extra["embodiments"] = {
            str(k): _string_map(f"embodiments.{k}", v) for k, v in table.items()
        }
    if "primitives" in raw:
        extra["primitive_descriptions"] = _string_map("primitives", raw["primitives"])
    return PlannerConfig(
        recall=_section(RecallConfig, "recall", raw.get("recall")),
        retrieval=_section(RetrievalConfig, "retrieval", raw.get("retrieval")),
        loop=_section(LoopConfig, "planner", raw.get("planner")),
        gate=_section(GateConfig, "gate", raw.get("gate")),
        attributes=_section(AttributeConfig, "attributes", raw.get("attributes")),
        clutter=_section(ClutterConfig, "clutter", raw.get("clutter")),
        synonyms=_string_lists("synonyms", raw.get("synonyms")),
        categories=_string_lists("categories", raw.get("categories")),
        brands=_string_lists("brands", raw.get("brands")),
        aliases=_string_lists("aliases", raw.get("aliases")),
        base_dir=cfg_path.resolve().parent,
        **extra,
    )
