"""A :class:`~mimir_planner.reasoning.world_view.WorldView` over the latest ``SceneGraph`` message.

The analyzer node keeps one :class:`SceneGraphWorld` and feeds it every graph it receives (the
latched ``scene_graph`` topic, or a ``get_scene_graph`` answer). The reasoning core reads it
through the ``WorldView`` protocol; a graph swap is atomic, so a reader never sees half of two
revisions. Conversions are plain functions so that they are tested without a ROS graph.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from mimir.bounds import DEFAULT_BOUNDS, BoundsError
from mimir_msgs.msg import SceneGraph, SceneNode
from mimir_planner.reasoning.errors import EvidenceError
from mimir_planner.reasoning.world_view import Box3D, InMemoryWorld, NodeSnapshot

LOG = logging.getLogger(__name__)


class SceneGraphMessageError(ValueError):
    """A scene-graph node message that cannot be read (empty id, non-finite position)."""


@dataclass(frozen=True)
class ConversionReport:
    """What was dropped while converting one graph message.

    Attributes:
        skipped_nodes: ids (or positions in the list) of nodes that could not be read.
        skipped_properties: ``node_id.property`` names whose value was not JSON.
        boxes_dropped: ids of nodes whose box was degenerate or not finite (kept without box).
    """

    skipped_nodes: tuple[str, ...] = ()
    skipped_properties: tuple[str, ...] = ()
    boxes_dropped: tuple[str, ...] = ()


def _point(p: object) -> np.ndarray:
    return np.array([getattr(p, "x", math.nan), getattr(p, "y", math.nan),
                     getattr(p, "z", math.nan)], dtype=np.float64)


def node_box(msg: SceneNode) -> Box3D | None:
    """The node's axis-aligned box, or None when it is missing, degenerate or not finite."""
    lower, upper = _point(msg.bbox_min), _point(msg.bbox_max)
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        return None
    if np.any(upper < lower) or np.all(upper - lower <= 0.0):
        return None
    return Box3D(lower, upper)


def node_properties(msg: SceneNode) -> tuple[dict[str, dict[str, object]], list[str]]:
    """Properties as the reasoning core reads them, plus the names that could not be parsed.

    ``is_opened``, which travels as its own entry, is folded back into ``openable`` (the core's
    ``is_opened`` check reads ``properties["openable"]["is_opened"]``).
    """
    props: dict[str, dict[str, object]] = {}
    bad: list[str] = []
    opened: object = None
    for prop in msg.properties:
        try:
            value = DEFAULT_BOUNDS.parse_json(prop.value_json, f"property {prop.name[:64]!r}")
        except BoundsError:
            bad.append(prop.name)
            continue
        if prop.name == "is_opened":
            opened = value
            continue
        props[prop.name] = {
            "value": value,
            "confidence": round(float(prop.confidence), 4),
            "source": prop.source,
            "reasoning": prop.reasoning,
        }
    if isinstance(opened, bool) and "openable" in props:
        props["openable"]["is_opened"] = opened
    return props, bad


def snapshot_from_msg(msg: SceneNode) -> tuple[NodeSnapshot, list[str], bool]:
    """One node message as a snapshot; returns (snapshot, unparsed properties, box dropped).

    Raises:
        SceneGraphMessageError: an empty id or label, or a non-finite position.
    """
    position = _point(msg.position)
    if not msg.id or not msg.label:
        raise SceneGraphMessageError("a scene-graph node needs an id and a label")
    if not np.all(np.isfinite(position)):
        raise SceneGraphMessageError(f"node {msg.id!r} has a non-finite position")
    box = node_box(msg)
    props, bad = node_properties(msg)
    try:
        snapshot = NodeSnapshot(
            node_id=msg.id,
            label=msg.label,
            position=position,
            bbox=box,
            properties=props,
            contents=tuple(c.name for c in msg.contents if c.name),
            parent=msg.parent_id,
        )
    except EvidenceError as err:
        raise SceneGraphMessageError(f"node {msg.id!r}: {err}") from err
    return snapshot, bad, box is None


def snapshots_from_graph(
    nodes: Iterable[SceneNode],
) -> tuple[list[NodeSnapshot], ConversionReport]:
    """Every readable node of a graph, and a report of what was skipped."""
    snapshots: list[NodeSnapshot] = []
    skipped: list[str] = []
    bad_props: list[str] = []
    no_box: list[str] = []
    for index, msg in enumerate(nodes):
        try:
            snapshot, bad, dropped = snapshot_from_msg(msg)
        except SceneGraphMessageError as err:
            LOG.warning("skipping scene-graph node: %s", err)
            skipped.append(msg.id or f"#{index}")
            continue
        snapshots.append(snapshot)
        bad_props.extend(f"{msg.id}.{name}" for name in bad)
        if dropped:
            no_box.append(msg.id)
    return snapshots, ConversionReport(tuple(skipped), tuple(bad_props), tuple(no_box))


class SceneGraphWorld:
    """Thread-safe :class:`WorldView` holding the newest graph revision it was given."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._world = InMemoryWorld()
        self._ids: tuple[str, ...] = ()
        self._revision = -1
        self._frame_id = ""

    @property
    def revision(self) -> int:
        """Revision of the graph held (-1 before the first one)."""
        with self._lock:
            return self._revision

    @property
    def frame_id(self) -> str:
        """Fixed frame of the graph held."""
        with self._lock:
            return self._frame_id

    def update(self, msg: SceneGraph, force: bool = False) -> ConversionReport | None:
        """Replaces the held graph when ``msg`` is at least as new (or ``force``).

        Returns:
            The conversion report, or None when the message was older and ignored.
        """
        snapshots, report = snapshots_from_graph(msg.nodes)
        world = InMemoryWorld(snapshots)
        with self._lock:
            if not force and int(msg.revision) < self._revision:
                return None
            self._world = world
            self._ids = tuple(sorted(n.node_id for n in snapshots))
            self._revision = int(msg.revision)
            self._frame_id = msg.header.frame_id
        return report

    def _current(self) -> InMemoryWorld:
        with self._lock:
            return self._world

    def has_node(self, node_id: str) -> bool:
        return self._current().has_node(node_id)

    def node(self, node_id: str) -> NodeSnapshot | None:
        return self._current().node(node_id)

    def nodes_near(
        self, point: np.ndarray, radius: float, label: str | None = None
    ) -> list[NodeSnapshot]:
        return self._current().nodes_near(point, radius, label)

    def nodes_with_label(self, label: str) -> list[NodeSnapshot]:
        return self._current().nodes_with_label(label)

    def children_of(self, parent: str) -> list[NodeSnapshot]:
        return self._current().children_of(parent)

    def node_ids(self) -> list[str]:
        """Ids of every node held, sorted."""
        with self._lock:
            return list(self._ids)


def property_value(node: NodeSnapshot, name: str) -> object:
    """Value of one property of a snapshot (None when absent)."""
    entry: Mapping[str, object] | None = node.properties.get(name)
    return None if entry is None else entry.get("value")
