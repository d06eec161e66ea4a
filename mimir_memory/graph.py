"""Scene graph projection: the current world state rebuilt from world events.

The node record follows messymem.md appendix A.3 (label, position, 3D box, first seen,
properties, contents, task history) plus mimir.md's single active parent and the alternative
hypotheses kept for same-name instances that may be different objects.

Three kinds of event keep the graph in step with a world where objects move:

* ``observation_fused`` updates a position estimate in which old evidence fades (see
  :meth:`SceneGraphState._apply_fused`), and ``parent_changed`` may carry the ``centroid`` an
  object was put down at, which restarts the estimate there.
* ``observation_missed`` (payload ``node_id``, ``camera``, ``reason``) records that perception
  expected to see a node and did not; the node counts these misses until it is seen again.
* ``nodes_merged`` (payload ``kept_id``, ``merged_id``, ``reason``) folds a duplicate into the
  node kept. The merged id then lives on as an alias: :meth:`SceneGraphState.node` and every
  later event that names it resolve to the kept node.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError
from mimir.labels import label_key
from mimir_memory.config import AssociationConfig
from mimir_memory.errors import (
    GraphConsistencyError,
    InvalidEventError,
    InvalidValueError,
    MemoryStoreError,
    UnknownNodeError,
)
from mimir_memory.events import WORLD_KINDS, EventKind, MemoryEvent

HAND_PARENT = "hand"
"""Reserved parent id meaning "held by the robot's gripper"."""

AT_LAST_PLACE = "at_last_place"
#: The property whose ``is_opened`` says a fixture stands open.
OPENABLE = "openable"
"""Property set to False when a node was missed too often where it was last seen (see
``WorldMemory.record_miss``) and back to True when perception sees it again."""

PARENT_RELATIONS = ("room", "surface", "container", "hand")
SEEDED_PROPERTIES: dict[str, float] = {
    "accessible": 0.5,
    "pickable": 0.5,
    "pushable": 0.5,
    "fullness": 0.3,
    "openable": 0.5,
}
"""Seeded property names and the confidence of their initial ``unknown`` value."""

Point = tuple[float, float, float]


def finite_point(value: object, name: str) -> Point:
    """Three finite floats from a sequence.

    Raises:
        InvalidValueError: Wrong length, wrong type, or NaN/inf.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidValueError(f"{name} must be three numbers, got {value!r}")
    items = list(value)
    if len(items) != 3:
        raise InvalidValueError(f"{name} must have three components, got {len(items)}")
    out: list[float] = []
    for item in items:
        if isinstance(item, bool):
            raise InvalidValueError(f"{name} components must be numbers, got {item!r}")
        try:
            number = float(item)
        except (TypeError, ValueError) as err:
            raise InvalidValueError(f"{name} components must be numbers, got {item!r}") from err
        if not math.isfinite(number):
            raise InvalidValueError(f"{name} must be finite, got {items!r}")
        out.append(number)
    return (out[0], out[1], out[2])


def node_id_prefix(label: str) -> str:
    """Id prefix of a label: ``"coffee mug"`` gives ``"coffee_mug"``."""
    return label_key(label)


@dataclass(frozen=True)
class PropertyValue:
    """Current value of one node property with its provenance (frozen: a change of the
    property is a new value object)."""

    value: Any
    confidence: float
    source: str
    reasoning: str = ""
    stamp: float | None = None
    is_opened: bool | None = None
    event_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (A.3 property record)."""
        data: dict[str, Any] = {
            "value": self.value,
            "confidence": self.confidence,
            "source": self.source,
            "reasoning": self.reasoning,
            "stamp": self.stamp,
        }
        if self.is_opened is not None:
            data["is_opened"] = self.is_opened
        return data


@dataclass
class SceneNode:
    """One entity (hypothesis) of the scene graph."""

    node_id: str
    label: str
    centroid: Point
    bbox_min: Point
    bbox_max: Point
    first_seen: float
    last_seen: float
    observation_count: int
    first_seen_frame: str | None = None
    properties: dict[str, PropertyValue] = field(default_factory=dict)
    contents: list[dict[str, Any]] = field(default_factory=list)
    contents_empty: bool | None = None
    contents_source_action: str | None = None
    contents_reasoning: str = ""
    contents_stamp: float | None = None
    task_history: list[dict[str, Any]] = field(default_factory=list)
    parent: str | None = None
    parent_relation: str | None = None
    alternatives: set[str] = field(default_factory=set)
    keyframes: list[str] = field(default_factory=list)
    history: dict[str, list[str]] = field(default_factory=dict)
    """Event ids that shaped each field (property name, ``contents``, ``parent``...)."""
    position_samples: int = 0
    """Observations in the current position estimate; a placement restarts it at 1."""
    misses: int = 0
    """Misses recorded since the node was last seen (or put down somewhere new)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON record of the node (messymem A.3 fields plus parent and hypotheses)."""
        return {
            "label": self.label,
            "pos": list(self.centroid),
            "bbox_3d": [*self.bbox_min, *self.bbox_max],
            "first_seen": self.first_seen,
            "first_seen_frame": self.first_seen_frame,
            "last_seen": self.last_seen,
            "observations": self.observation_count,
            "properties": {k: self.properties[k].to_dict() for k in sorted(self.properties)},
            "contents": copy.deepcopy(self.contents),
            "contents_empty": self.contents_empty,
            "contents_source_action": self.contents_source_action,
            "contents_reasoning": self.contents_reasoning,
            "contents_stamp": self.contents_stamp,
            "task_history": copy.deepcopy(self.task_history),
            "parent": self.parent,
            "parent_relation": self.parent_relation,
            "hypotheses": sorted(self.alternatives),
            "keyframes": list(self.keyframes),
            "position_samples": self.position_samples,
            "misses": self.misses,
        }


class GridIndex:
    """Uniform-grid spatial hash of node centroids, one grid per label.

    The cell size of a label is the widest radius association asks about (the association
    radius times the hypothesis factor), so both of its queries look at 27 cells whatever the
    size of the graph.
    """

    def __init__(self, association: AssociationConfig) -> None:
        self.association = association
        self._cells: dict[str, dict[tuple[int, int, int], set[str]]] = {}
        self._where: dict[str, tuple[str, tuple[int, int, int]]] = {}
        self._cell_size: dict[str, float] = {}

    def _size(self, key: str) -> float:
        if key not in self._cell_size:
            self._cell_size[key] = (
                self.association.radius(key) * self.association.hypothesis_factor
            )
        return self._cell_size[key]

    def _cell(self, key: str, point: Point) -> tuple[int, int, int]:
        size = self._size(key)
        return (
            math.floor(point[0] / size),
            math.floor(point[1] / size),
            math.floor(point[2] / size),
        )

    def insert(self, node_id: str, label: str, point: Point) -> None:
        """Add or move a node."""
        key = label_key(label)
        cell = self._cell(key, point)
        old = self._where.get(node_id)
        if old is not None:
            if old == (key, cell):
                return
            old_members = self._cells[old[0]].get(old[1])
            if old_members is not None:
                old_members.discard(node_id)
        self._cells.setdefault(key, {}).setdefault(cell, set()).add(node_id)
        self._where[node_id] = (key, cell)

    def remove(self, node_id: str) -> None:
        """Forget a node (a no-op for an id the index does not hold)."""
        old = self._where.pop(node_id, None)
        if old is not None:
            members = self._cells[old[0]].get(old[1])
            if members is not None:
                members.discard(node_id)

    def candidates(self, label: str, point: Point, radius: float) -> Iterator[str]:
        """Node ids of ``label`` whose cell may hold points within ``radius`` of ``point``."""
        key = label_key(label)
        grid = self._cells.get(key)
        if not grid:
            return
        size = self._size(key)
        reach = max(1, math.ceil(radius / size))
        if (2 * reach + 1) ** 3 > 4 * len(grid):
            for cell_members in grid.values():
                yield from cell_members
            return
        cx, cy, cz = self._cell(key, point)
        for dx in range(-reach, reach + 1):
            for dy in range(-reach, reach + 1):
                for dz in range(-reach, reach + 1):
                    members = grid.get((cx + dx, cy + dy, cz + dz))
                    if members:
                        yield from members

    def labels(self) -> list[str]:
        """Normalised labels present in the index."""
        return [k for k, grid in self._cells.items() if any(grid.values())]


def _pt(value: Any) -> Point:
    """Point from stored (already validated) JSON."""
    return (float(value[0]), float(value[1]), float(value[2]))


def _lerp(a: Point, b: Point, t: float) -> Point:
    """The point ``t`` of the way from ``a`` to ``b``."""
    return (a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t)


def _dist(a: Point, b: Point) -> float:
    # math.dist scales internally, so even a far query point cannot overflow
    return math.dist(a, b)


def _require_str(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidValueError(f"{key} must be a non-empty string, got {value!r}")
    return value


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidValueError(f"confidence must be a number, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidValueError(f"confidence must lie in [0, 1], got {value!r}")
    return float(value)


@dataclass
class _BatchContext:
    created: set[str] = field(default_factory=set)
    labels: dict[str, str] = field(default_factory=dict)
    """Labels of the nodes created earlier in the batch."""
    parents: dict[str, str | None] = field(default_factory=dict)
    retracted: set[str] = field(default_factory=set)
    merged: dict[str, str] = field(default_factory=dict)
    """Nodes merged earlier in the batch -> the node they were merged into."""


@dataclass(frozen=True)
class SkippedEvent:
    """A stored event the projection could not apply (it was kept out of the graph).

    Attributes:
        seq: Position in the log.
        event_id: Id of the event.
        kind: Its kind.
        reason: Why it does not apply (the validation error).
    """

    seq: int
    event_id: str
    kind: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"seq": self.seq, "event_id": self.event_id, "kind": self.kind,
                "reason": self.reason}


class SceneGraphState:
    """The scene graph as a projection of world events.

    ``apply`` is the only mutator; ``check`` validates an event (or a batch) before it is
    written so that a stored event always applies.
    """

    def __init__(self, association: AssociationConfig | None = None,
                 bounds: Bounds = DEFAULT_BOUNDS) -> None:
        self.association = association or AssociationConfig()
        self.bounds = bounds
        self.nodes: dict[str, SceneNode] = {}
        self.children: dict[str, set[str]] = {}
        self.index = GridIndex(self.association)
        self.label_counters: dict[str, int] = {}
        self.keyframe_links: dict[str, list[str]] = {}
        self.evidence_keyframes: set[str] = set()
        """Keyframes cited as evidence by an admitted world event (protected from retention)."""
        self.revision = 0
        self.skipped: dict[str, SkippedEvent] = {}
        """Stored events the projection kept out because they do not apply, not yet retracted."""
        self.retracted: dict[str, str] = {}
        """Skipped events later retracted by an ``event_retracted`` event (id -> reason)."""
        self.reserved_ids: set[str] = set()
        """Node ids named by skipped ``node_created`` events: never handed out again."""
        self.aliases: dict[str, str] = {}
        """Ids of merged nodes -> the live node each was merged into (always one hop)."""

    # ------------------------------------------------------------------ queries
    def node(self, node_id: str) -> SceneNode:
        """The node with this id; the id of a merged node gives the node it was merged into.

        The node returned then carries the kept id in ``node_id``, not the one asked for.

        Raises:
            UnknownNodeError: No such node.
        """
        if not isinstance(node_id, str):
            raise UnknownNodeError(f"node id must be a string, got {node_id!r}")
        try:
            return self.nodes[self.resolve(node_id)]
        except KeyError as err:
            raise UnknownNodeError(f"unknown node {node_id!r}") from err

    def resolve(self, node_id: str) -> str:
        """The live id behind ``node_id``: the kept node for a merged id, else the id itself."""
        return self.aliases.get(node_id, node_id)

    def select(self, node_ids: Sequence[str] = (), label: str = "") -> list[SceneNode]:
        """The nodes named (merged ids name the node they were merged into; each node once,
        in the order asked), or every node when none is named; only those of ``label`` when
        one is given.

        Raises:
            UnknownNodeError: A named id is no node, merged or not.
        """
        wanted = list(dict.fromkeys(self.resolve(i) for i in node_ids))
        unknown = [i for i in wanted if i not in self.nodes]
        if unknown:
            raise UnknownNodeError(
                f"unknown node ids: {', '.join(i[:64] for i in unknown[:20])}")
        nodes = [self.nodes[i] for i in wanted] if wanted else list(self.nodes.values())
        return [n for n in nodes if n.label == label] if label else nodes

    def next_node_id(self, label: str, reserved: Mapping[str, int] | None = None) -> str:
        """The id the next node of ``label`` would get (``<label>_<n>``)."""
        prefix = node_id_prefix(label)
        count = (reserved or {}).get(prefix, self.label_counters.get(prefix, 0))
        while f"{prefix}_{count + 1}" in self.reserved_ids:
            count += 1
        return f"{prefix}_{count + 1}"

    def within(self, label: str, point: Point, radius: float) -> list[tuple[float, str]]:
        """(distance, id) of ``label`` nodes within ``radius`` of ``point``, nearest first."""
        found = []
        for node_id in self.index.candidates(label, point, radius):
            distance = _dist(self.nodes[node_id].centroid, point)
            if distance <= radius:
                found.append((distance, node_id))
        found.sort()
        return found

    def ancestors(
        self, node_id: str, overrides: Mapping[str, str | None] | None = None
    ) -> list[str]:
        """Parent chain of a node, nearest first."""
        chain: list[str] = []
        current: str | None = node_id
        seen = {node_id}
        while current is not None:
            if overrides is not None and current in overrides:
                parent = overrides[current]
            else:
                node = self.nodes.get(current)
                parent = node.parent if node is not None else None
            if parent is None or parent == HAND_PARENT or parent in seen:
                if parent == HAND_PARENT:
                    chain.append(parent)
                break
            chain.append(parent)
            seen.add(parent)
            current = parent
        return chain

    def snapshot(self) -> dict[str, Any]:
        """JSON form of the whole graph (stable key order)."""
        return {
            "revision": self.revision,
            "nodes": {nid: self.nodes[nid].to_dict() for nid in sorted(self.nodes)},
            "merged": {nid: self.aliases[nid] for nid in sorted(self.aliases)},
        }

    # --------------------------------------------------------------- validation
    def check(self, events: Iterable[MemoryEvent]) -> None:
        """Validate a batch of events against the state and each other.

        Raises:
            InvalidEventError: A kind that is not a world event.
            InvalidValueError: A malformed or non-finite payload.
            UnknownNodeError: A reference to a node that does not exist.
            GraphConsistencyError: A duplicate node id or a parent cycle.
        """
        ctx = _BatchContext()
        for event in events:
            try:
                self._check_one(event, ctx)
            except BoundsError as err:
                raise InvalidValueError(f"{event.kind.value}: {err}") from err

    def _exists(self, node_id: object, ctx: _BatchContext) -> str:
        """The live id ``node_id`` names (a merged id gives the node kept).

        Raises:
            UnknownNodeError: The id names no node, live, created or merged in the batch.
        """
        if isinstance(node_id, str):
            live = self._resolve_in(node_id, ctx)
            if live in self.nodes or live in ctx.created:
                return live
        raise UnknownNodeError(f"unknown node {node_id!r}")

    def _resolve_in(self, node_id: str, ctx: _BatchContext) -> str:
        """Like :meth:`resolve`, counting the merges made earlier in the batch."""
        current = node_id
        seen = {current}
        while True:
            target = ctx.merged.get(current, self.aliases.get(current))
            if target is None or target in seen:
                return current
            seen.add(target)
            current = target

    def _label_of(self, node_id: str, ctx: _BatchContext) -> str:
        node = self.nodes.get(node_id)
        return node.label if node is not None else ctx.labels[node_id]

    def _check_one(self, event: MemoryEvent, ctx: _BatchContext) -> None:
        if event.kind not in WORLD_KINDS:
            raise InvalidEventError(f"{event.kind.value} is not a world memory event")
        data = event.payload
        if isinstance(data.get("node_id"), str):
            self.bounds.ident(data["node_id"], "node_id")
        if "verdict_reason" in data:
            self.bounds.text(data["verdict_reason"], "verdict_reason")
        _CHECKS[event.kind](self, data, ctx)

    def _check_node_created(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        node_id = _require_str(data, "node_id")
        if node_id in self.nodes or node_id in ctx.created or node_id == HAND_PARENT:
            raise GraphConsistencyError(f"node {node_id!r} already exists")
        if node_id in self.aliases or node_id in ctx.merged:
            raise GraphConsistencyError(
                f"node id {node_id!r} belonged to a node merged into another; it is not reused")
        if node_id in self.reserved_ids:
            raise GraphConsistencyError(
                f"node id {node_id!r} was taken by an event memory could not apply")
        bounds.ident(_require_str(data, "label"), "label")
        self._check_geometry(data)
        for alt in bounds.items(data.get("alternatives", []), "alternatives"):
            self._exists(alt, ctx)
        ctx.created.add(node_id)
        ctx.labels[node_id] = data["label"]

    def _check_observation_fused(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        self._exists(data.get("node_id"), ctx)
        self._check_geometry(data)
        for flag in ("part", "anchored"):
            if not isinstance(data.get(flag, False), bool):
                raise InvalidValueError(f"{flag} must be a boolean")

    def _check_property_set(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        self._exists(data.get("node_id"), ctx)
        bounds.ident(_require_str(data, "name"), "property name")
        if "value" not in data:
            raise InvalidValueError("property_set needs a value")
        bounds.json_value(data["value"], f"value of {data['name']!r}")
        _confidence(data.get("confidence"))
        if not isinstance(data.get("reasoning", ""), str):
            raise InvalidValueError("reasoning must be a string")
        bounds.text(data.get("reasoning", ""), "reasoning")
        opened = data.get("is_opened")
        if opened is not None and not isinstance(opened, bool):
            raise InvalidValueError("is_opened must be a boolean or null")

    def _check_contents_set(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        self._exists(data.get("node_id"), ctx)
        contents = data.get("contents")
        if not isinstance(contents, list):
            raise InvalidValueError("contents must be a list")
        for item in bounds.items(contents, "contents"):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise InvalidValueError(f"content item needs a name: {item!r}")
            bounds.ident(item["name"], "content item name")
            bounds.json_value(item, "content item")
            if item.get("description") is not None:
                bounds.text(item["description"], "content item description")
            if item.get("node_id"):
                bounds.ident(item["node_id"], "content item node_id")
        if not isinstance(data.get("is_empty"), bool):
            raise InvalidValueError("is_empty must be a boolean")
        if data.get("is_empty") and contents:
            raise InvalidValueError("contents marked empty must list no items")
        bounds.text(data.get("reasoning") or "", "contents reasoning")
        if data.get("source_action") is not None:
            bounds.ident(data["source_action"], "source_action")

    def _check_parent_changed(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        node_id = self._exists(data.get("node_id"), ctx)
        parent = data.get("parent_id")
        relation = data.get("relation")
        if data.get("centroid") is not None:
            centre = self.bounds.point(data["centroid"], "placement centroid")
            node = self.nodes.get(node_id)
            if node is not None:  # the box moves with it and must stay in the workspace
                lo, hi = _centred_box(node, centre)
                self.bounds.point(lo, "placed bbox_min")
                self.bounds.point(hi, "placed bbox_max")
        if parent is None:
            if relation is not None:
                raise InvalidValueError("a cleared parent takes no relation")
        else:
            if relation not in PARENT_RELATIONS:
                raise InvalidValueError(
                    f"relation must be one of {PARENT_RELATIONS}, got {relation!r}"
                )
            if (parent == HAND_PARENT) != (relation == "hand"):
                raise InvalidValueError("the hand parent goes with the 'hand' relation only")
            if parent != HAND_PARENT:
                parent = self._exists(parent, ctx)
                if parent == node_id or node_id in self.ancestors(parent, ctx.parents):
                    raise GraphConsistencyError(
                        f"making {parent!r} the parent of {node_id!r} creates a cycle"
                    )
        ctx.parents[node_id] = parent

    def _check_task_outcome_recorded(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        self._exists(data.get("node_id"), ctx)
        bounds.text(_require_str(data, "task"), "task")
        if not isinstance(data.get("success"), bool):
            raise InvalidValueError("success must be a boolean")
        if data.get("failure_reason") is not None:
            bounds.text(data["failure_reason"], "failure_reason")
        for key in ("primitive", "interaction_id"):
            if data.get(key) is not None:
                bounds.ident(data[key], key)

    def _check_keyframe_linked(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        bounds.ident(_require_str(data, "frame_id"), "frame_id")
        node_ids = data.get("node_ids")
        if not isinstance(node_ids, list) or not node_ids:
            raise InvalidValueError("node_ids must be a non-empty list")
        for node_id in bounds.items(node_ids, "node_ids"):
            self._exists(node_id, ctx)

    def _check_hypotheses_linked(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        node_ids = data.get("node_ids")
        if not isinstance(node_ids, list) or len(set(map(str, node_ids))) < 2:
            raise InvalidValueError("hypotheses_linked needs at least two node ids")
        live = {self._exists(node_id, ctx) for node_id in bounds.items(node_ids, "node_ids")}
        if len(live) < 2:
            raise InvalidValueError(
                f"hypotheses_linked needs at least two nodes; {node_ids!r} were merged into one")

    def _check_event_retracted(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        target = bounds.ident(_require_str(data, "event_id"), "retracted event_id")
        bounds.text(data.get("reason", ""), "reason")
        if target not in self.skipped or target in ctx.retracted:
            raise GraphConsistencyError(
                f"event {target!r} is not an event memory skipped; only those can be "
                "retracted")
        ctx.retracted.add(target)

    def _check_observation_missed(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        self._exists(data.get("node_id"), ctx)
        self.bounds.ident(data.get("camera", ""), "camera", allow_empty=True)
        self.bounds.text(data.get("reason", ""), "reason")

    def _check_nodes_merged(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        kept_named = bounds.ident(_require_str(data, "kept_id"), "kept_id")
        merged_id = bounds.ident(_require_str(data, "merged_id"), "merged_id")
        bounds.text(data.get("reason", ""), "reason")
        if merged_id in self.aliases or merged_id in ctx.merged:
            raise GraphConsistencyError(
                f"node {merged_id!r} was already merged into "
                f"{self._resolve_in(merged_id, ctx)!r}")
        merged = self._exists(merged_id, ctx)
        kept = self._exists(kept_named, ctx)
        if kept == merged:
            raise GraphConsistencyError(f"cannot merge node {merged_id!r} into itself")
        kept_label, merged_label = self._label_of(kept, ctx), self._label_of(merged, ctx)
        if label_key(kept_label) != label_key(merged_label):
            raise GraphConsistencyError(
                f"cannot merge {merged_id!r} ({merged_label!r}) into {kept!r} ({kept_label!r}): "
                "only nodes of one label are duplicates")
        if (kept in self.ancestors(merged, ctx.parents)
                or merged in self.ancestors(kept, ctx.parents)):
            raise GraphConsistencyError(
                f"cannot merge {merged_id!r} into {kept!r}: one holds the other")
        # what the projection will do to parents, for the checks of later events of the batch
        children = {c for c in self.children.get(merged, ()) if c not in ctx.parents}
        children.update(c for c, p in ctx.parents.items() if p == merged)
        for child in children:
            ctx.parents[child] = kept
        if self._parent_in(kept, ctx) is None:
            ctx.parents[kept] = self._parent_in(merged, ctx)
        ctx.merged[merged] = kept

    def _parent_in(self, node_id: str, ctx: _BatchContext) -> str | None:
        """Parent of a node, counting the parent changes made earlier in the batch."""
        if node_id in ctx.parents:
            return ctx.parents[node_id]
        node = self.nodes.get(node_id)
        return node.parent if node is not None else None

    def _check_geometry(self, data: Mapping[str, Any]) -> None:
        # finite, inside the workspace, box ordered and holding its centroid (BoundsError,
        # which check() reports as InvalidValueError)
        self.bounds.box(data.get("centroid"), data.get("bbox_min"), data.get("bbox_max"),
                        "observation")

    # --------------------------------------------------------------- projection
    def apply_stored(self, event: MemoryEvent) -> bool:
        """Fold an event read back from the log, keeping out one that does not apply.

        The log may hold events written before a bound existed, or by a broken writer. Such
        an event is validated against the current state like a new one; when it fails (or its
        application fails) it is recorded in :attr:`skipped` and the graph stays as it was.
        ``mimir memory check`` lists these; ``mimir memory repair`` retracts them.

        Returns:
            True when the event was applied (or had nothing to apply), False when skipped.
        """
        if event.kind in WORLD_KINDS and event.verdict.effective:
            try:
                self.check([event])
            except (MemoryStoreError, ValueError, TypeError, KeyError, ArithmeticError) as err:
                self._skip(event, str(err))
                return False
        try:
            self.apply(event)
        except (ValueError, TypeError, KeyError, IndexError, ArithmeticError) as err:
            self._skip(event, f"{type(err).__name__}: {err}")
            return False
        return True

    def _skip(self, event: MemoryEvent, reason: str) -> None:
        if event.seq is not None:
            self.revision = max(self.revision, event.seq)
        self.skipped[event.event_id] = SkippedEvent(event.seq or 0, event.event_id,
                                                    event.kind.value, reason)
        if event.kind is EventKind.NODE_CREATED:
            node_id = event.payload.get("node_id")
            if isinstance(node_id, str) and node_id not in self.nodes:
                self.reserved_ids.add(node_id)

    def apply(self, event: MemoryEvent) -> None:
        """Fold one stored event into the state (non-world kinds only advance the revision)."""
        if event.seq is not None:
            self.revision = max(self.revision, event.seq)
        if event.kind not in WORLD_KINDS or not event.verdict.effective:
            return
        self.evidence_keyframes.update(event.evidence.keyframe_ids)
        _APPLY[event.kind](self, event, event.payload)

    def _apply_retracted(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        skipped = self.skipped.pop(data["event_id"])
        self.retracted[skipped.event_id] = str(data.get("reason", ""))

    def _apply_fused(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        """Fold an observation into the node's position estimate.

        The centroid is an exponential moving average: the n-th observation since the
        estimate started weighs ``w = max(1/n, fade)`` (the node label's fade,
        ``AssociationConfig.fade_of``), so the first observations are averaged and, once there
        are more than ``1/fade``, older ones fade geometrically and the estimate follows an
        object that moved.

        The box follows per axis, with the same weight. On an axis where the observed box
        lies inside the node's (widened by ``box_tolerance_m``) the node's extent stays: a
        view of part of the object (a fixture's front face, its open interior) says nothing
        against the parts it does not show, so partial views never erode a fixture's box. On
        an axis where the observed box reaches outside the node's, both ends move the share
        ``w`` toward the observed ones; repeated views of a moved object keep reaching
        outside until the box has followed them (to within the tolerance). A plain union
        would only grow, and a decayed union stops shrinking as soon as the new place lies
        inside it, so either would leave a moved object's box stretched over both places.
        Moving ends with the weight of the centroid keeps the centroid inside the box.

        The node counts as seen: its misses restart from zero. A view of a part that stands
        out of the node (``part``: an open door seen apart from its cabinet) counts as a
        sighting only and moves nothing. An ``anchored`` view (of a fixture held open or being
        operated) keeps the centroid and moves only box ends it reaches beyond, outward.
        """
        node = self.nodes[self.resolve(data["node_id"])]
        if data.get("part"):
            node.observation_count += 1
            node.misses = 0
            node.last_seen = max(node.last_seen, event.stamp)
            node.history.setdefault("parts", []).append(event.event_id)
            return
        anchored = bool(data.get("anchored"))
        n = node.position_samples + 1
        weight = max(1.0 / n, self.association.fade_of(node.label))
        if not anchored:
            node.centroid = _lerp(node.centroid, _pt(data["centroid"]), weight)
        lo = _pt(data["bbox_min"])
        hi = _pt(data["bbox_max"])
        tol = self.association.box_tolerance_m
        new_min = list(node.bbox_min)
        new_max = list(node.bbox_max)
        for axis in range(3):
            below = lo[axis] < node.bbox_min[axis] - tol
            above = hi[axis] > node.bbox_max[axis] + tol
            if anchored:  # only outward: the box keeps the centroid that stays
                if below:
                    new_min[axis] += (lo[axis] - new_min[axis]) * weight
                if above:
                    new_max[axis] += (hi[axis] - new_max[axis]) * weight
            elif below or above:
                new_min[axis] += (lo[axis] - new_min[axis]) * weight
                new_max[axis] += (hi[axis] - new_max[axis]) * weight
        node.bbox_min = (new_min[0], new_min[1], new_min[2])
        node.bbox_max = (new_max[0], new_max[1], new_max[2])
        if not anchored:
            node.position_samples = n
        node.observation_count += 1
        node.misses = 0
        node.last_seen = max(node.last_seen, event.stamp)
        self.index.insert(node.node_id, node.label, node.centroid)
        node.history.setdefault("position", []).append(event.event_id)

    def _apply_missed(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[self.resolve(data["node_id"])]
        node.misses += 1
        node.history.setdefault("misses", []).append(event.event_id)

    def _apply_property(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[self.resolve(data["node_id"])]
        name = data["name"]
        node.history.setdefault(name, []).append(event.event_id)
        current = node.properties.get(name)
        if current is not None and current.stamp is not None and event.stamp < current.stamp:
            return  # older evidence arriving late: kept in the log, does not overwrite
        node.properties[name] = PropertyValue(
            value=data["value"],
            confidence=float(data["confidence"]),
            source=event.source.value,
            reasoning=data.get("reasoning", ""),
            stamp=event.stamp,
            is_opened=data.get("is_opened"),
            event_id=event.event_id,
        )

    def _apply_contents(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[self.resolve(data["node_id"])]
        node.history.setdefault("contents", []).append(event.event_id)
        if node.contents_stamp is not None and event.stamp < node.contents_stamp:
            return
        node.contents_stamp = event.stamp
        node.contents = [dict(item) for item in data["contents"]]
        node.contents_empty = bool(data["is_empty"])
        node.contents_source_action = data.get("source_action")
        node.contents_reasoning = data.get("reasoning", "")

    def _apply_parent(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        """Attach a node to its new parent; with a ``centroid``, also move it there.

        A placement puts the centroid at the given point, slides the box (same size) to
        centre on it and restarts the position estimate from it as its one sample, so the
        observations made at the old place no longer pull the node back. The misses counted
        at the old place are dropped too.
        """
        node = self.nodes[self.resolve(data["node_id"])]
        if node.parent is not None:
            self.children.get(node.parent, set()).discard(node.node_id)
        parent = data.get("parent_id")
        node.parent = parent if parent in (None, HAND_PARENT) else self.resolve(parent)
        node.parent_relation = data.get("relation")
        if node.parent is not None:
            self.children.setdefault(node.parent, set()).add(node.node_id)
        node.history.setdefault("parent", []).append(event.event_id)
        if data.get("centroid") is not None:
            centre = _pt(data["centroid"])
            node.bbox_min, node.bbox_max = _centred_box(node, centre)
            node.centroid = centre
            node.position_samples = 1
            node.misses = 0
            self.index.insert(node.node_id, node.label, centre)
            node.history.setdefault("position", []).append(event.event_id)

    def _apply_outcome(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[self.resolve(data["node_id"])]
        node.task_history.append({
            "task": data["task"],
            "success": data["success"],
            "failure_reason": data.get("failure_reason"),
            "stamp": event.stamp,
            "primitive": data.get("primitive"),
            "interaction_id": data.get("interaction_id"),
        })
        node.history.setdefault("task_history", []).append(event.event_id)

    def _apply_hypotheses(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        ids = list(dict.fromkeys(self.resolve(i) for i in data["node_ids"]))
        for node_id in ids:
            self.nodes[node_id].alternatives.update(i for i in ids if i != node_id)
            self.nodes[node_id].history.setdefault("hypotheses", []).append(event.event_id)

    def _apply_keyframe(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        frame_id = data["frame_id"]
        for node_id in dict.fromkeys(self.resolve(i) for i in data["node_ids"]):
            target = self.nodes[node_id]
            if frame_id not in target.keyframes:
                target.keyframes.append(frame_id)
            if target.first_seen_frame is None:
                target.first_seen_frame = frame_id
            links = self.keyframe_links.setdefault(frame_id, [])
            if node_id not in links:
                links.append(node_id)

    def _apply_created(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node_id = data["node_id"]
        label = data["label"]
        centroid = _pt(data["centroid"])
        node = SceneNode(
            node_id=node_id,
            label=label,
            centroid=centroid,
            bbox_min=_pt(data["bbox_min"]),
            bbox_max=_pt(data["bbox_max"]),
            first_seen=event.stamp,
            last_seen=event.stamp,
            observation_count=1 if data.get("observed", True) else 0,
            first_seen_frame=data.get("first_seen_frame"),
        )
        node.position_samples = node.observation_count
        for name, confidence in SEEDED_PROPERTIES.items():
            node.properties[name] = PropertyValue(
                value="unknown",
                confidence=confidence,
                source="perception",
                stamp=event.stamp,
                event_id=event.event_id,
            )
        node.history["created"] = [event.event_id]
        self.nodes[node_id] = node
        self.index.insert(node_id, label, centroid)
        prefix, _, number = node_id.rpartition("_")
        if number.isdigit() and prefix == node_id_prefix(label):
            self.label_counters[prefix] = max(self.label_counters.get(prefix, 0), int(number))
        for alt in dict.fromkeys(self.resolve(a) for a in data.get("alternatives", [])):
            node.alternatives.add(alt)
            self.nodes[alt].alternatives.add(node_id)

    def _apply_merged(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        """Fold the duplicate ``merged_id`` into ``kept_id`` and retire its id as an alias.

        The kept node takes the duplicate's evidence: its position estimate is the mean of
        both, weighted by the observations in each estimate, each counted at most ``1/fade``
        (beyond that an estimate weighs a new observation as an average of ``1/fade`` would,
        so it holds no more evidence), and so is its box; observation counts add up; first
        and last seen span both; keyframes are the union and task histories interleave by
        stamp. Contents, and each property, come from whichever node set them last (a value
        seeded at creation never replaces one that was observed or told). The duplicate's
        children move to the kept node, which also takes the duplicate's parent when it has
        none. Hypothesis links to the duplicate move to the kept node, and the two are no
        longer alternatives of each other. Each field's history lists both nodes' events,
        ``merged`` lists the merge itself, which also joins ``position``.

        The duplicate leaves the live graph (nodes, spatial index, children) but its id stays
        in :attr:`aliases`, so lookups and later events that name it reach the kept node.
        """
        kept = self.nodes[self.resolve(data["kept_id"])]
        gone = self.nodes.pop(data["merged_id"])
        self.index.remove(gone.node_id)
        self._merge_position(kept, gone)
        self._merge_records(kept, gone)
        self._merge_links(kept, gone, event)
        for name, ids in gone.history.items():
            target = kept.history.setdefault(name, [])
            target.extend(i for i in ids if i not in target)
        kept.history.setdefault("merged", []).append(event.event_id)
        kept.history.setdefault("position", []).append(event.event_id)
        for alias, target_id in self.aliases.items():
            if target_id == gone.node_id:
                self.aliases[alias] = kept.node_id
        self.aliases[gone.node_id] = kept.node_id

    def _merge_position(self, kept: SceneNode, gone: SceneNode) -> None:
        """Position, box, counts and first/last seen of a merge (see :meth:`_apply_merged`)."""
        cap = 1.0 / self.association.fade_of(kept.label)
        mine = min(float(kept.position_samples), cap)
        theirs = min(float(gone.position_samples), cap)
        if theirs > 0.0:
            share = theirs / (mine + theirs)
            kept.centroid = _lerp(kept.centroid, gone.centroid, share)
            kept.bbox_min = _lerp(kept.bbox_min, gone.bbox_min, share)
            kept.bbox_max = _lerp(kept.bbox_max, gone.bbox_max, share)
        kept.position_samples += gone.position_samples
        kept.observation_count += gone.observation_count
        if gone.last_seen > kept.last_seen:
            kept.misses = gone.misses
        kept.last_seen = max(kept.last_seen, gone.last_seen)
        if gone.first_seen_frame is not None and (
                kept.first_seen_frame is None or gone.first_seen < kept.first_seen):
            kept.first_seen_frame = gone.first_seen_frame
        kept.first_seen = min(kept.first_seen, gone.first_seen)
        self.index.insert(kept.node_id, kept.label, kept.centroid)

    def _merge_records(self, kept: SceneNode, gone: SceneNode) -> None:
        """Keyframes, task history, contents and properties of a merge."""
        kept_id, gone_id = kept.node_id, gone.node_id
        for frame_id in gone.keyframes:
            if frame_id not in kept.keyframes:
                kept.keyframes.append(frame_id)
            links = self.keyframe_links.get(frame_id)
            if links is not None:
                links[:] = dict.fromkeys(kept_id if i == gone_id else i for i in links)
        kept.task_history = sorted([*kept.task_history, *gone.task_history],
                                   key=lambda record: float(record["stamp"]))
        if gone.contents_stamp is not None and (
                kept.contents_stamp is None or gone.contents_stamp > kept.contents_stamp):
            kept.contents = gone.contents
            kept.contents_empty = gone.contents_empty
            kept.contents_source_action = gone.contents_source_action
            kept.contents_reasoning = gone.contents_reasoning
            kept.contents_stamp = gone.contents_stamp
        seeds = {*kept.history.get("created", ()), *gone.history.get("created", ())}
        for name, prop in gone.properties.items():
            current = kept.properties.get(name)
            if current is None or _property_rank(prop, seeds) > _property_rank(current, seeds):
                kept.properties[name] = prop

    def _merge_links(self, kept: SceneNode, gone: SceneNode, event: MemoryEvent) -> None:
        """Children, parent and hypothesis links of a merge."""
        kept_id, gone_id = kept.node_id, gone.node_id
        for child_id in self.children.pop(gone_id, set()):
            child = self.nodes[child_id]
            child.parent = kept_id
            child.history.setdefault("parent", []).append(event.event_id)
            self.children.setdefault(kept_id, set()).add(child_id)
        if gone.parent is not None:
            self.children.get(gone.parent, set()).discard(gone_id)
            if kept.parent is None:
                kept.parent = gone.parent
                kept.parent_relation = gone.parent_relation
                self.children.setdefault(kept.parent, set()).add(kept_id)

        for alt_id in gone.alternatives:
            alt = self.nodes.get(alt_id)
            if alt is not None:
                alt.alternatives.discard(gone_id)
                if alt_id != kept_id:
                    alt.alternatives.add(kept_id)
                    kept.alternatives.add(alt_id)
        kept.alternatives.discard(gone_id)
        kept.alternatives.discard(kept_id)


def _centred_box(node: SceneNode, centre: Point) -> tuple[Point, Point]:
    """The node's box slid (same size) to centre on ``centre``."""
    half = [(node.bbox_max[a] - node.bbox_min[a]) / 2.0 for a in range(3)]
    return ((centre[0] - half[0], centre[1] - half[1], centre[2] - half[2]),
            (centre[0] + half[0], centre[1] + half[1], centre[2] + half[2]))


def _property_rank(prop: PropertyValue, seeds: set[str]) -> tuple[bool, float]:
    """Order of property values when two nodes merge: evidence over seeds, then newest.

    Args:
        prop: A property value.
        seeds: Ids of the ``node_created`` events behind both nodes (the seeded values).
    """
    stamp = prop.stamp if prop.stamp is not None else -math.inf
    return (prop.event_id not in seeds, stamp)


_CHECKS: dict[EventKind, Callable[[SceneGraphState, Mapping[str, Any], _BatchContext], None]] = {
    EventKind.NODE_CREATED: SceneGraphState._check_node_created,
    EventKind.OBSERVATION_FUSED: SceneGraphState._check_observation_fused,
    EventKind.PROPERTY_SET: SceneGraphState._check_property_set,
    EventKind.CONTENTS_SET: SceneGraphState._check_contents_set,
    EventKind.PARENT_CHANGED: SceneGraphState._check_parent_changed,
    EventKind.TASK_OUTCOME_RECORDED: SceneGraphState._check_task_outcome_recorded,
    EventKind.KEYFRAME_LINKED: SceneGraphState._check_keyframe_linked,
    EventKind.HYPOTHESES_LINKED: SceneGraphState._check_hypotheses_linked,
    EventKind.EVENT_RETRACTED: SceneGraphState._check_event_retracted,
    EventKind.OBSERVATION_MISSED: SceneGraphState._check_observation_missed,
    EventKind.NODES_MERGED: SceneGraphState._check_nodes_merged,
}
"""The validation of each world event kind."""


_APPLY: dict[EventKind, Callable[[SceneGraphState, MemoryEvent, Mapping[str, Any]], None]] = {
    EventKind.NODE_CREATED: SceneGraphState._apply_created,
    EventKind.OBSERVATION_FUSED: SceneGraphState._apply_fused,
    EventKind.PROPERTY_SET: SceneGraphState._apply_property,
    EventKind.CONTENTS_SET: SceneGraphState._apply_contents,
    EventKind.PARENT_CHANGED: SceneGraphState._apply_parent,
    EventKind.TASK_OUTCOME_RECORDED: SceneGraphState._apply_outcome,
    EventKind.KEYFRAME_LINKED: SceneGraphState._apply_keyframe,
    EventKind.HYPOTHESES_LINKED: SceneGraphState._apply_hypotheses,
    EventKind.EVENT_RETRACTED: SceneGraphState._apply_retracted,
    EventKind.OBSERVATION_MISSED: SceneGraphState._apply_missed,
    EventKind.NODES_MERGED: SceneGraphState._apply_merged,
}
"""How each world event kind changes the graph."""
