"""Scene graph projection: the current world state rebuilt from world events.

The node record follows messymem.md appendix A.3 (label, position, 3D box, first seen,
properties, contents, task history) plus mimir.md's single active parent and the alternative
hypotheses kept for same-name instances that may be different objects.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
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


@dataclass
class PropertyValue:
    """Current value of one node property with its provenance."""

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
    parents: dict[str, str | None] = field(default_factory=dict)
    retracted: set[str] = field(default_factory=set)


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

    # ------------------------------------------------------------------ queries
    def node(self, node_id: str) -> SceneNode:
        """The node with this id.

        Raises:
            UnknownNodeError: No such node.
        """
        if not isinstance(node_id, str):
            raise UnknownNodeError(f"node id must be a string, got {node_id!r}")
        try:
            return self.nodes[node_id]
        except KeyError as err:
            raise UnknownNodeError(f"unknown node {node_id!r}") from err

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
        known = isinstance(node_id, str) and (node_id in self.nodes or node_id in ctx.created)
        if not known or not isinstance(node_id, str):
            raise UnknownNodeError(f"unknown node {node_id!r}")
        return node_id

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
        if node_id in self.reserved_ids:
            raise GraphConsistencyError(
                f"node id {node_id!r} was taken by an event memory could not apply")
        bounds.ident(_require_str(data, "label"), "label")
        self._check_geometry(data)
        for alt in bounds.items(data.get("alternatives", []), "alternatives"):
            self._exists(alt, ctx)
        ctx.created.add(node_id)

    def _check_observation_fused(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        self._exists(data.get("node_id"), ctx)
        self._check_geometry(data)

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
                self._exists(parent, ctx)
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
        for node_id in bounds.items(node_ids, "node_ids"):
            self._exists(node_id, ctx)

    def _check_event_retracted(self, data: Mapping[str, Any], ctx: _BatchContext) -> None:
        bounds = self.bounds
        target = bounds.ident(_require_str(data, "event_id"), "retracted event_id")
        bounds.text(data.get("reason", ""), "reason")
        if target not in self.skipped or target in ctx.retracted:
            raise GraphConsistencyError(
                f"event {target!r} is not an event memory skipped; only those can be "
                "retracted")
        ctx.retracted.add(target)


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
        node = self.nodes[data["node_id"]]
        n = node.observation_count + 1
        c = _pt(data["centroid"])
        node.centroid = (
            node.centroid[0] + (c[0] - node.centroid[0]) / n,
            node.centroid[1] + (c[1] - node.centroid[1]) / n,
            node.centroid[2] + (c[2] - node.centroid[2]) / n,
        )
        lo = _pt(data["bbox_min"])
        hi = _pt(data["bbox_max"])
        node.bbox_min = (min(node.bbox_min[0], lo[0]), min(node.bbox_min[1], lo[1]),
                         min(node.bbox_min[2], lo[2]))
        node.bbox_max = (max(node.bbox_max[0], hi[0]), max(node.bbox_max[1], hi[1]),
                         max(node.bbox_max[2], hi[2]))
        node.observation_count = n
        node.last_seen = max(node.last_seen, event.stamp)
        self.index.insert(node.node_id, node.label, node.centroid)
        node.history.setdefault("position", []).append(event.event_id)

    def _apply_property(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[data["node_id"]]
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
        node = self.nodes[data["node_id"]]
        node.history.setdefault("contents", []).append(event.event_id)
        if node.contents_stamp is not None and event.stamp < node.contents_stamp:
            return
        node.contents_stamp = event.stamp
        node.contents = [dict(item) for item in data["contents"]]
        node.contents_empty = bool(data["is_empty"])
        node.contents_source_action = data.get("source_action")
        node.contents_reasoning = data.get("reasoning", "")

    def _apply_parent(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[data["node_id"]]
        if node.parent is not None:
            self.children.get(node.parent, set()).discard(node.node_id)
        node.parent = data.get("parent_id")
        node.parent_relation = data.get("relation")
        if node.parent is not None:
            self.children.setdefault(node.parent, set()).add(node.node_id)
        node.history.setdefault("parent", []).append(event.event_id)

    def _apply_outcome(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        node = self.nodes[data["node_id"]]
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
        ids = list(dict.fromkeys(data["node_ids"]))
        for node_id in ids:
            self.nodes[node_id].alternatives.update(i for i in ids if i != node_id)
            self.nodes[node_id].history.setdefault("hypotheses", []).append(event.event_id)

    def _apply_keyframe(self, event: MemoryEvent, data: Mapping[str, Any]) -> None:
        frame_id = data["frame_id"]
        for node_id in dict.fromkeys(data["node_ids"]):
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
        for alt in data.get("alternatives", []):
            node.alternatives.add(alt)
            self.nodes[alt].alternatives.add(node_id)


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
}
"""How each world event kind changes the graph."""
