"""The read-only view of world memory that the analyzer and the verifiers need.

The memory core implements :class:`WorldView`; :class:`InMemoryWorld` is a small complete
implementation over :class:`NodeSnapshot` records, used by the simulation's offline runs,
benchmarks and tests.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mimir_memory.graph import SceneNode
from mimir_memory.observations import finite_vec3
from mimir_planner.reasoning.errors import EvidenceError


@dataclass(frozen=True)
class Box3D:
    """Axis-aligned 3D box in the ``map`` frame, metres."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        lower = finite_vec3(self.lower, "box lower corner", EvidenceError)
        upper = finite_vec3(self.upper, "box upper corner", EvidenceError)
        if np.any(upper < lower):
            raise EvidenceError("box upper corner lies below its lower corner")
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @property
    def center(self) -> np.ndarray:
        """Centre of the box."""
        return (self.lower + self.upper) / 2.0

    def contains(self, point: np.ndarray, margin: float = 0.0) -> bool:
        """Whether ``point`` lies inside the box grown by ``margin`` on every side."""
        return bool(self.contains_points(np.asarray(point, dtype=np.float64).reshape(3),
                                         margin)[0])

    def contains_points(self, points: np.ndarray, margin: float = 0.0) -> np.ndarray:
        """:meth:`contains` of each row of an ``(n, 3)`` array, as one boolean array."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        return np.all((pts >= self.lower - margin) & (pts <= self.upper + margin), axis=1)

    def corners(self) -> np.ndarray:
        """The eight corners, shape (8, 3)."""
        xs, ys, zs = zip(self.lower, self.upper, strict=True)
        return np.array([[x, y, z] for x in xs for y in ys for z in zs], dtype=np.float64)


class NodeView(Protocol):
    """What the reasoning core reads from one scene graph node."""

    @property
    def node_id(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def position(self) -> np.ndarray: ...

    @property
    def bbox(self) -> Box3D | None: ...

    @property
    def properties(self) -> Mapping[str, Mapping[str, object]]: ...

    @property
    def contents(self) -> Sequence[str]: ...

    @property
    def parent(self) -> str: ...


class WorldView(Protocol):
    """Read access to world memory (implemented by the memory core)."""

    def has_node(self, node_id: str) -> bool: ...

    def node(self, node_id: str) -> NodeView | None: ...

    def nodes_near(
        self, point: np.ndarray, radius: float, label: str | None = None
    ) -> Sequence[NodeView]: ...

    def nodes_with_label(self, label: str) -> Sequence[NodeView]: ...

    def children_of(self, parent: str) -> Sequence[NodeView]: ...


@dataclass(frozen=True)
class NodeSnapshot:
    """A plain copy of one node; satisfies :class:`NodeView`."""

    node_id: str
    label: str
    position: np.ndarray
    bbox: Box3D | None = None
    properties: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    contents: Sequence[str] = ()
    parent: str = ""
    """Id of the node's active parent (``"hand"`` while held), empty when it has none."""

    def __post_init__(self) -> None:
        if not self.node_id or not self.label:
            raise EvidenceError("a node needs a non-empty id and label")
        position = finite_vec3(self.position, f"{self.node_id} position", EvidenceError)
        object.__setattr__(self, "position", position)
        object.__setattr__(self, "contents", tuple(self.contents))


def node_state(node: NodeView) -> dict[str, object]:
    """JSON-ready summary of a node's prior state, as shown to the model."""
    return {
        "object_id": node.node_id,
        "label": node.label,
        "pos": [round(float(v), 3) for v in node.position],
        "properties": {k: dict(v) for k, v in node.properties.items()},
        "contents": list(node.contents),
    }


def is_opened(node: NodeView) -> bool:
    """Whether memory already records this fixture as standing open."""
    openable = node.properties.get("openable", {})
    return openable.get("is_opened") is True


def moved_before(node: NodeView) -> bool:
    """Whether memory records this fixture standing open or closed: it moved under a hand (or a
    look found it shut) before."""
    return node.properties.get("openable", {}).get("is_opened") is not None


class InMemoryWorld:
    """A :class:`WorldView` over a fixed set of node snapshots."""

    def __init__(self, nodes: Iterable[NodeSnapshot] = ()) -> None:
        self._nodes: dict[str, NodeSnapshot] = {}
        for node in nodes:
            self.put(node)

    def put(self, node: NodeSnapshot) -> None:
        """Adds or replaces a node."""
        self._nodes[node.node_id] = node

    def replace_all(self, other: InMemoryWorld) -> None:
        """Takes the nodes of ``other`` instead of its own (readers holding this view see the
        new state)."""
        self._nodes = dict(other._nodes)

    def has_node(self, node_id: str) -> bool:
        return node_id in self._nodes

    def node(self, node_id: str) -> NodeSnapshot | None:
        return self._nodes.get(node_id)

    def nodes_near(
        self, point: np.ndarray, radius: float, label: str | None = None
    ) -> list[NodeSnapshot]:
        center = finite_vec3(point, "query point", EvidenceError)
        if not (math.isfinite(radius) and radius >= 0):
            raise EvidenceError("query radius must be finite and non-negative")
        found = [
            (float(np.linalg.norm(n.position - center)), n.node_id, n)
            for n in self._nodes.values()
            if label is None or n.label == label
        ]
        return [n for d, _, n in sorted(found, key=lambda t: (t[0], t[1])) if d <= radius]

    def nodes_with_label(self, label: str) -> list[NodeSnapshot]:
        return sorted(
            (n for n in self._nodes.values() if n.label == label), key=lambda n: n.node_id
        )

    def children_of(self, parent: str) -> list[NodeSnapshot]:
        return sorted(
            (n for n in self._nodes.values() if parent and n.parent == parent),
            key=lambda n: n.node_id,
        )


def memory_snapshot(nodes: Iterable[SceneNode]) -> InMemoryWorld:
    """World memory's nodes as the analyzer reads them (a snapshot of each)."""
    return InMemoryWorld(
        NodeSnapshot(n.node_id, n.label, np.asarray(n.centroid),
                     Box3D(np.asarray(n.bbox_min), np.asarray(n.bbox_max)),
                     {k: v.to_dict() for k, v in n.properties.items()},
                     tuple(str(c.get("name", "")) for c in n.contents), parent=n.parent or "")
        for n in nodes)
