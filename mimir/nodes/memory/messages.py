"""Conversions between the memory cores and mimir_msgs: the scene graph, memory events and
node updates, with the small field helpers the sibling converters share.

Used by the scene graph node and every node that reads or writes memory through services
(analyzer, planner). Values of properties travel as JSON text (``value_json``). Observations and
camera views: :mod:`.observation_messages`; keyframes: :mod:`.keyframe_messages`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from geometry_msgs.msg import Point

from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError
from mimir.ros.time import from_seconds, to_seconds
from mimir_memory.errors import InvalidValueError
from mimir_memory.events import Evidence, MemoryEvent, Verdict
from mimir_memory.events import Source as CoreSource
from mimir_memory.graph import PropertyValue
from mimir_memory.graph import SceneNode as CoreNode
from mimir_memory.updates import (
    ContentEntry,
    EvidenceLink,
    NodeUpdate,
    PropertyWrite,
    TaskRecordEntry,
)
from mimir_msgs.msg import (
    ContentItem,
    EvidenceRef,
    Property,
    SceneGraph,
    SceneNode,
    TaskRecord,
)
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import UpdateNode


class MessageValueError(ValueError):
    """A message field whose content cannot be converted (bad JSON, non-finite number...)."""


def stamp_or_zero(seconds: float | None) -> Any:
    """A stamp message of ``seconds``; zero when unknown, non-finite or negative."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0.0:
        return from_seconds(0.0)
    return from_seconds(seconds)


def point_msg(values: Iterable[float]) -> Point:
    """Three numbers as a Point message."""
    x, y, z = (float(v) for v in values)
    return Point(x=x, y=y, z=z)


def property_to_msg(name: str, prop: PropertyValue) -> Property:
    """One property with provenance as a message."""
    return Property(
        name=name,
        value_json=json.dumps(prop.value),
        confidence=float(prop.confidence),
        source=str(prop.source),
        reasoning=prop.reasoning or "",
        stamp=stamp_or_zero(prop.stamp),
        event_id=prop.event_id or "",
    )


def _property_entries(name: str, prop: PropertyValue) -> list[Property]:
    """One property's entries: ``is_opened``, which the core keeps on the ``openable``
    property, travels as its own entry with the same provenance."""
    entries = [property_to_msg(name, prop)]
    if name == "openable" and prop.is_opened is not None:
        opened = property_to_msg("is_opened", prop)
        opened.value_json = json.dumps(bool(prop.is_opened))
        entries.append(opened)
    return entries


class PropertyMessages:
    """The messages of property values, built once per value and reused by later graphs.

    Building Property messages is most of the cost of a graph message, and most values do not
    change between two calls: a node's prior properties stay while its position is refined.
    The core replaces a property's value object when the property changes and never alters it
    (``PropertyValue`` is frozen), so the messages of a value object stay right while it lives.
    Entries are kept by object identity, holding the object; an entry the last graph build did
    not use is dropped (a partial build only costs the next one some rebuilding). Callers
    serialise their use of one instance (the scene graph node builds under the memory lock).
    Messages handed out are shared: publish them, do not change them.
    """

    def __init__(self) -> None:
        self._current: dict[tuple[int, str], tuple[PropertyValue, list[Property]]] = {}
        self._previous: dict[tuple[int, str], tuple[PropertyValue, list[Property]]] = {}

    def entries(self, name: str, prop: PropertyValue) -> list[Property]:
        """The message entries of ``name`` holding ``prop``."""
        key = (id(prop), name)
        entry = self._current.get(key) or self._previous.get(key)
        if entry is None or entry[0] is not prop:
            entry = (prop, _property_entries(name, prop))
        self._current[key] = entry
        return entry[1]

    def next_build(self) -> None:
        """Start a new graph build: entries the last build did not use are dropped."""
        self._previous, self._current = self._current, {}


def node_to_msg(node: CoreNode, cache: PropertyMessages | None = None) -> SceneNode:
    """A core scene-graph node as a SceneNode message (property entries from ``cache`` when
    given)."""
    properties = []
    for name in sorted(node.properties):
        prop = node.properties[name]
        properties += (cache.entries(name, prop) if cache is not None
                       else _property_entries(name, prop))
    contents = [
        ContentItem(
            name=str(item.get("name", "")),
            description=str(item.get("description", "") or ""),
            node_id=str(item.get("node_id", "") or ""),
            reasoning=str(item.get("reasoning", "") or node.contents_reasoning or ""),
        )
        for item in node.contents
    ]
    history = [
        TaskRecord(
            task=str(rec.get("task", "") or ""),
            primitive=str(rec.get("primitive", "") or rec.get("task", "") or ""),
            success=bool(rec.get("success", False)),
            failure_reason=str(rec.get("failure_reason", "") or ""),
            interaction_id=str(rec.get("interaction_id", "") or ""),
            stamp=stamp_or_zero(rec.get("stamp")),
        )
        for rec in node.task_history
    ]
    return SceneNode(
        id=node.node_id,
        label=node.label,
        position=point_msg(node.centroid),
        bbox_min=point_msg(node.bbox_min),
        bbox_max=point_msg(node.bbox_max),
        parent_id=node.parent or "",
        parent_relation=node.parent_relation or "",
        properties=properties,
        contents=contents,
        contents_known=node.contents_empty is not None or bool(node.contents),
        contents_source_action=node.contents_source_action or "",
        task_history=history,
        hypotheses=sorted(node.alternatives),
        first_seen=stamp_or_zero(node.first_seen),
        last_seen=stamp_or_zero(node.last_seen),
        observation_count=int(node.observation_count),
    )


def graph_to_msg(nodes: Iterable[CoreNode], revision: int, frame_id: str,
                 stamp: float, cache: PropertyMessages | None = None) -> SceneGraph:
    """The whole graph, nodes sorted by id (property entries from ``cache`` when given)."""
    if cache is not None:
        cache.next_build()
    msg = SceneGraph(revision=int(revision), nodes=[
        node_to_msg(n, cache) for n in sorted(nodes, key=lambda n: n.node_id)])
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp_or_zero(stamp)
    return msg


def evidence_to_msgs(evidence: Evidence) -> list[EvidenceRef]:
    """The core's Evidence as references."""
    refs = [EvidenceRef(kind="keyframe", id=k) for k in evidence.keyframe_ids]
    refs += [EvidenceRef(kind="detection", id=d) for d in evidence.detection_ids]
    for ident in evidence.event_ids:
        kind, _, rest = ident.partition(":")
        if rest and kind in ("interaction", "robot_state"):
            refs.append(EvidenceRef(kind=kind, id=rest))
        else:
            refs.append(EvidenceRef(kind="event", id=ident))
    return refs


def _subject(event: MemoryEvent) -> str:
    payload = event.payload
    for key in ("node_id", "frame_id", "goal_id"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def event_to_msg(event: MemoryEvent, reason: str = "") -> MemoryEventMsg:
    """A logged memory event as a MemoryEvent message."""
    msg = MemoryEventMsg(
        event_id=event.event_id,
        sequence=int(event.seq or 0),
        kind=str(event.kind.value),
        source=str(event.source.value),
        subject_id=_subject(event),
        payload_json=json.dumps(dict(event.payload), sort_keys=True),
        evidence=evidence_to_msgs(event.evidence),
        verdict=str(event.verdict.value),
        verdict_reason=reason or str(event.payload.get("verdict_reason", "") or ""),
    )
    msg.header.stamp = stamp_or_zero(event.stamp)
    return msg


def verdict_from_text(text: str) -> Verdict:
    """A verdict string ('' means admit)."""
    try:
        return Verdict(text or "admit")
    except ValueError as err:
        raise MessageValueError(f"unknown verdict {text!r}") from err


def node_update_to_msg(update: NodeUpdate) -> UpdateNode.Request:
    """A planned node update as an ``update_node`` request.

    The open state on an ``openable`` write travels as its own ``is_opened`` property right
    after it, with the same confidence, source and reasoning.
    """
    properties: list[Property] = []
    for prop in update.properties:
        properties.append(Property(name=prop.name, value_json=json.dumps(prop.value),
                                   confidence=float(prop.confidence), source=prop.source,
                                   reasoning=prop.reasoning))
        if prop.is_opened is not None:
            properties.append(Property(name="is_opened", value_json=json.dumps(prop.is_opened),
                                       confidence=float(prop.confidence), source=prop.source,
                                       reasoning=prop.reasoning))
    request = UpdateNode.Request(
        node_id=update.node_id,
        event_id=update.update_id,
        source=str(update.source),
        properties=properties,
        evidence=[EvidenceRef(kind=e.kind, id=e.id, detail=e.detail) for e in update.evidence],
        verdict=str(update.verdict),
        verdict_reason=update.verdict_reason,
        contents_source_action=update.contents_source_action,
    )
    if update.contents is not None:
        request.set_contents = True
        request.contents = [ContentItem(name=c.name, description=c.description,
                                        node_id=c.node_id, reasoning=c.reasoning)
                            for c in update.contents]
    if update.parent is not None:
        request.set_parent = True
        request.parent_id, request.parent_relation = update.parent
    if update.parent_position is not None:
        request.set_position = True
        request.position = Point(x=update.parent_position[0], y=update.parent_position[1],
                                 z=update.parent_position[2])
    if update.task_record is not None:
        rec = update.task_record
        request.add_task_record = True
        request.task_record = TaskRecord(
            task=rec.task, primitive=rec.primitive, success=bool(rec.success),
            failure_reason=rec.failure_reason, interaction_id=rec.interaction_id,
            stamp=stamp_or_zero(rec.stamp))
    return request


def node_update_from_msg(request: UpdateNode.Request,
                         bounds: Bounds = DEFAULT_BOUNDS) -> NodeUpdate:
    """An ``update_node`` request as a planned node update.

    An empty source means ``operator`` and an empty verdict ``admit``, as the scene graph node
    reads them; an ``is_opened`` property folds into the ``openable`` write (its own confidence
    and reasoning are not kept). The properties' stamps and event ids are not read.

    Raises:
        MessageValueError: bad or oversized JSON, an unknown source, verdict or evidence kind,
            a repeated property, ``is_opened`` that is not a boolean or comes without
            ``openable``, or any value the update type refuses.
    """
    props = list(request.properties)
    if len(props) > bounds.max_items:
        raise MessageValueError(f"{len(props)} properties in one update (at most "
                                f"{bounds.max_items})")
    values: list[tuple[Property, Any]] = []
    is_opened: Any = None
    for prop in props:
        try:
            bounds.ident(prop.name, "property name")
            value = bounds.parse_json(prop.value_json, f"property {prop.name[:64]!r} value_json")
        except BoundsError as err:
            raise MessageValueError(str(err)) from err
        if prop.name == "is_opened":
            if not isinstance(value, bool) or is_opened is not None:
                raise MessageValueError("is_opened must be true or false, once")
            is_opened = value
            continue
        values.append((prop, value))
    if is_opened is not None and not any(p.name == "openable" for p, _ in values):
        raise MessageValueError("is_opened can only be set together with openable")
    try:
        source = CoreSource(request.source or "operator")
        writes = tuple(
            PropertyWrite(p.name, value, float(p.confidence), p.source, p.reasoning,
                          is_opened if p.name == "openable" else None)
            for p, value in values)
        rec = request.task_record
        return NodeUpdate(
            node_id=request.node_id,
            update_id=request.event_id,
            source=source,
            properties=writes,
            contents=tuple(ContentEntry(c.name, c.description, c.node_id, c.reasoning)
                           for c in request.contents) if request.set_contents else None,
            contents_source_action=request.contents_source_action,
            parent=(request.parent_id, request.parent_relation) if request.set_parent else None,
            parent_position=(request.position.x, request.position.y, request.position.z)
            if request.set_position else None,
            task_record=TaskRecordEntry(
                rec.task, rec.primitive, bool(rec.success), rec.failure_reason,
                rec.interaction_id, to_seconds(rec.stamp)) if request.add_task_record else None,
            evidence=tuple(EvidenceLink(r.kind, r.id, r.detail) for r in request.evidence),
            verdict=verdict_from_text(request.verdict),
            verdict_reason=request.verdict_reason,
        )
    except (InvalidValueError, ValueError) as err:
        raise MessageValueError(str(err)) from err
