"""Conversions between the memory cores and mimir_msgs.

Used by the scene graph node, the keyframe node and every node that reads memory through
services (analyzer, planner). Values of properties travel as JSON text (``value_json``).
"""

from __future__ import annotations

import array
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from geometry_msgs.msg import Point, Pose

from mimir.bounds import DEFAULT_BOUNDS, Bounds, BoundsError
from mimir.ros.images import ImageConversionError, image_to_numpy
from mimir.ros.time import from_seconds, to_seconds
from mimir.transforms import (
    InvalidTransformError,
    matrices_to_quaternions,
    matrix_to_quaternion,
    quaternion_to_matrix,
)
from mimir_memory.errors import InvalidValueError
from mimir_memory.events import Evidence, MemoryEvent, Verdict
from mimir_memory.events import Source as CoreSource
from mimir_memory.graph import PropertyValue
from mimir_memory.graph import SceneNode as CoreNode
from mimir_memory.keyframes import KeyframeRecord, Trigger
from mimir_memory.observations import InvalidObservationError
from mimir_memory.observations import ObjectObservation as CoreObservation
from mimir_memory.updates import (
    ContentEntry,
    EvidenceLink,
    NodeUpdate,
    PropertyWrite,
    TaskRecordEntry,
)
from mimir_memory.visibility import CameraView as CoreView
from mimir_msgs.msg import (
    CameraView,
    ContentItem,
    EvidenceRef,
    KeyframeLabel,
    KeyframeMetadata,
    ObjectObservation,
    ObjectObservationArray,
    Property,
    SceneGraph,
    SceneNode,
    TaskRecord,
)
from mimir_msgs.msg import MemoryEvent as MemoryEventMsg
from mimir_msgs.srv import UpdateNode


class MessageValueError(ValueError):
    """A message field whose content cannot be converted (bad JSON, non-finite number...)."""


def instances_from_msg(segmentation: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The instance-id image of a ``Segmentation`` as a keyframe of ``shape`` (height, width)
    keeps it.

    Raises:
        MessageValueError: The image does not decode, or is not mono16 of that size.
    """
    try:
        ids = image_to_numpy(segmentation.instance_ids)
    except ImageConversionError as err:
        raise MessageValueError(str(err)) from err
    if ids.dtype != np.uint16 or ids.shape != shape:
        raise MessageValueError(
            f"a {segmentation.instance_ids.encoding} image of {ids.shape[1::-1]}, not mono16 "
            f"of the frame's {shape[1]}x{shape[0]}")
    return ids


def _stamp_or_zero(seconds: float | None) -> Any:
    if seconds is None or not math.isfinite(seconds) or seconds < 0.0:
        return from_seconds(0.0)
    return from_seconds(seconds)


def _point(values: Iterable[float]) -> Point:
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
        stamp=_stamp_or_zero(prop.stamp),
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
            stamp=_stamp_or_zero(rec.get("stamp")),
        )
        for rec in node.task_history
    ]
    return SceneNode(
        id=node.node_id,
        label=node.label,
        position=_point(node.centroid),
        bbox_min=_point(node.bbox_min),
        bbox_max=_point(node.bbox_max),
        parent_id=node.parent or "",
        parent_relation=node.parent_relation or "",
        properties=properties,
        contents=contents,
        contents_known=node.contents_empty is not None or bool(node.contents),
        contents_source_action=node.contents_source_action or "",
        task_history=history,
        hypotheses=sorted(node.alternatives),
        first_seen=_stamp_or_zero(node.first_seen),
        last_seen=_stamp_or_zero(node.last_seen),
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
    msg.header.stamp = _stamp_or_zero(stamp)
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
    msg.header.stamp = _stamp_or_zero(event.stamp)
    return msg


def verdict_from_text(text: str) -> Verdict:
    """A verdict string ('' means admit)."""
    try:
        return Verdict(text or "admit")
    except ValueError as err:
        raise MessageValueError(f"unknown verdict {text!r}") from err


def observations_to_msgs(observations: Sequence[CoreObservation]) -> list[ObjectObservation]:
    """:func:`observation_to_msg` of each, their box rotations converted in one call."""
    boxed = [o.obb_center is not None and o.obb_extent is not None for o in observations]
    quats = iter(matrices_to_quaternions(
        [o.obb_rotation if o.obb_rotation is not None else np.eye(3)
         for o, box in zip(observations, boxed, strict=True) if box]))
    return [observation_to_msg(o, next(quats) if box else None)
            for o, box in zip(observations, boxed, strict=True)]


def observation_to_msg(obs: CoreObservation,
                       quaternion: npt.ArrayLike | None = None) -> ObjectObservation:
    """The one encoder of an observation (header frame and stamp are the observation's).

    The oriented box travels in ``oriented_box`` when it was computed (its rotation as a
    quaternion, identity when only centre and extent are known); otherwise the box stays all
    zero, which :func:`observation_from_msg` reads as "not computed". ``quaternion``, when
    given, is that rotation already converted (:func:`observations_to_msgs`).
    """
    msg = ObjectObservation(
        label=obs.label,
        detection_id=obs.detection_id,
        camera=obs.camera,
        centroid=_point(obs.centroid),
        bbox_min=_point(obs.bbox_min),
        bbox_max=_point(obs.bbox_max),
        score=float(obs.score),
        point_count=int(obs.point_count),
    )
    msg.header.frame_id = obs.frame_id
    msg.header.stamp = _stamp_or_zero(obs.stamp)
    if obs.obb_center is not None and obs.obb_extent is not None:
        rotation = obs.obb_rotation if obs.obb_rotation is not None else np.eye(3)
        box = msg.oriented_box
        box.center.position = _point(obs.obb_center)
        q = box.center.orientation
        if quaternion is None:
            quaternion = matrix_to_quaternion(rotation)
        q.x, q.y, q.z, q.w = (float(v) for v in np.asarray(quaternion).reshape(4))
        box.size.x, box.size.y, box.size.z = (float(v) for v in obs.obb_extent)
    return msg


def observation_from_msg(item: ObjectObservation,
                         array: ObjectObservationArray | None = None) -> CoreObservation:
    """The one decoder of an observation; header, camera and frame default to the array's.

    Raises:
        InvalidObservationError: the core refuses it (NaN, inverted box, a zero quaternion on
            an oriented box...).
    """
    c, lo, hi = item.centroid, item.bbox_min, item.bbox_max
    stamp = to_seconds(item.header.stamp)
    if not stamp and array is not None:
        stamp = to_seconds(array.header.stamp)
    box = item.oriented_box
    size = (box.size.x, box.size.y, box.size.z)
    obb: dict[str, Any] = {}
    if size != (0.0, 0.0, 0.0):
        q = box.center.orientation
        try:
            rotation = quaternion_to_matrix([q.x, q.y, q.z, q.w])
        except InvalidTransformError as err:
            raise InvalidObservationError(f"oriented box of {item.label!r}: {err}") from err
        p = box.center.position
        obb = {"obb_center": np.array([p.x, p.y, p.z]), "obb_extent": np.array(size),
               "obb_rotation": rotation}
    return CoreObservation(
        label=item.label,
        centroid=np.array([c.x, c.y, c.z]),
        bbox_min=np.array([lo.x, lo.y, lo.z]),
        bbox_max=np.array([hi.x, hi.y, hi.z]),
        stamp=stamp,
        score=float(item.score),
        point_count=int(item.point_count),
        camera=item.camera or (array.camera if array is not None else ""),
        detection_id=item.detection_id,
        frame_id=item.header.frame_id or (array.header.frame_id if array is not None else ""),
        **obb,
    )


class RefusedObservation(NamedTuple):
    """An observation of an array that did not decode: why (``invalid``, ``wrong_frame``), its
    label and the error's text."""

    reason: str
    label: str
    text: str


def observations_from_msg(msg: ObjectObservationArray, frame: str
                          ) -> tuple[list[CoreObservation], list[RefusedObservation]]:
    """An array's observations that decode and lie in ``frame``, and those that do not, with
    why: each stands or falls alone, so a bad one costs only itself."""
    taken: list[CoreObservation] = []
    refused: list[RefusedObservation] = []
    for item in msg.observations:
        try:
            obs = observation_from_msg(item, msg)
        except InvalidObservationError as err:
            refused.append(RefusedObservation("invalid", str(item.label), str(err)))
            continue
        if obs.frame_id != frame:
            refused.append(RefusedObservation("wrong_frame", obs.label,
                                              f"observation in frame {obs.frame_id!r}"))
            continue
        taken.append(obs)
    return taken, refused


def view_to_msg(view: CoreView | None) -> CameraView:
    """The one encoder of a camera view; None gives a view marked invalid (unknown)."""
    msg = CameraView()
    if view is None:
        return msg
    msg.valid = True
    pose = view.camera_to_map
    msg.pose.position = _point(pose[:3, 3])
    q = msg.pose.orientation
    q.x, q.y, q.z, q.w = (float(v) for v in matrix_to_quaternion(pose[:3, :3]))
    msg.fx, msg.fy, msg.cx, msg.cy = view.fx, view.fy, view.cx, view.cy
    msg.width, msg.height = view.width, view.height
    msg.max_range_m = float(view.max_range_m)
    msg.depth_rows, msg.depth_cols = view.grid_shape
    # an array.array of typecode "f" is taken as it is (no per-item check of 768 floats)
    msg.depth_min_m = array.array("f", np.ascontiguousarray(view.depth_min_m,
                                                            dtype=np.float32).tobytes())
    msg.labels_sought = list(view.labels_sought)
    return msg


def view_from_msg(msg: CameraView) -> CoreView | None:
    """The one decoder of a camera view: None when the message marks it unknown.

    Raises:
        MessageValueError: A pose, intrinsics, size or depth grid the core refuses (a zero or
            non-finite quaternion, zero focal length, a grid whose length is not rows x cols...).
    """
    if not msg.valid:
        return None
    p, q = msg.pose.position, msg.pose.orientation
    try:
        pose = np.eye(4)
        pose[:3, :3] = quaternion_to_matrix([q.x, q.y, q.z, q.w])
        pose[:3, 3] = (p.x, p.y, p.z)
        return CoreView.from_flat(
            camera_to_map=pose, fx=msg.fx, fy=msg.fy, cx=msg.cx, cy=msg.cy,
            width=int(msg.width), height=int(msg.height), max_range_m=float(msg.max_range_m),
            depth_rows=int(msg.depth_rows), depth_cols=int(msg.depth_cols),
            depth_min_m=np.asarray(msg.depth_min_m, dtype=np.float32),
            labels_sought=[str(label) for label in msg.labels_sought],
        )
    except (InvalidTransformError, InvalidValueError) as err:
        raise MessageValueError(f"camera view: {err}") from err


_PHASES = {
    Trigger.INTERACTION_PRE: "before",
    Trigger.INTERACTION_DURING: "during",
    Trigger.INTERACTION_POST: "after",
    Trigger.INTERACTION_PEAK: "peak",
}
_TRIGGER_OF_PHASE = {phase: trigger for trigger, phase in _PHASES.items()}


def trigger_to_msg(trigger: Trigger) -> tuple[str, str]:
    """A store trigger as the message's (trigger, phase) pair."""
    if trigger.interaction:
        return KeyframeMetadata.TRIGGER_INTERACTION, _PHASES[trigger]
    if trigger is Trigger.OPERATOR:
        return KeyframeMetadata.TRIGGER_OPERATOR, ""
    return KeyframeMetadata.TRIGGER_PERCEPTION, ""


def trigger_from_msg(trigger: str, phase: str) -> Trigger:
    """The store trigger for a message's (trigger, phase); perception frames are node updates.

    Raises:
        MessageValueError: an unknown trigger or interaction phase.
    """
    if trigger in ("", KeyframeMetadata.TRIGGER_INTERACTION):
        try:
            return _TRIGGER_OF_PHASE[phase or "peak"]
        except KeyError as err:
            raise MessageValueError(f"unknown interaction phase {phase!r}") from err
    if trigger == KeyframeMetadata.TRIGGER_PERCEPTION:
        return Trigger.NEW_NODE if phase == "new_node" else Trigger.NODE_UPDATE
    if trigger == KeyframeMetadata.TRIGGER_OPERATOR:
        return Trigger.OPERATOR
    raise MessageValueError(f"unsupported keyframe trigger {trigger[:64]!r}")


def triggers_for_query(trigger: str) -> list[Trigger] | None:
    """Store triggers that a query's trigger filter covers (None: any)."""
    if not trigger:
        return None
    if trigger == KeyframeMetadata.TRIGGER_INTERACTION:
        return [t for t in Trigger if t.interaction]
    if trigger == KeyframeMetadata.TRIGGER_PERCEPTION:
        return [t for t in Trigger if not t.kept]
    if trigger == KeyframeMetadata.TRIGGER_OPERATOR:
        return [Trigger.OPERATOR]
    raise MessageValueError(f"unsupported keyframe trigger {trigger[:64]!r}")


def keyframe_to_msg(record: KeyframeRecord, root: Path | None = None) -> KeyframeMetadata:
    """A stored keyframe's metadata as a message; paths relative to the store ``root``."""

    def rel(path: Path) -> str:
        if root is not None:
            try:
                return str(Path(path).relative_to(root))
            except ValueError:
                return str(path)
        return str(path)

    msg = KeyframeMetadata(
        keyframe_id=record.frame_id,
        session=record.session,
        camera=record.camera,
        trigger=trigger_to_msg(record.trigger)[0],
        action=record.action or "",
        phase=trigger_to_msg(record.trigger)[1],
        parent_keyframe_id=record.parent_frame or "",
        interaction_id=_tag_value(record.tags, "interaction"),
        linked_nodes=list(record.node_ids),
        tags=list(record.tags),
        labels=[KeyframeLabel(text=lab.label, source=lab.source) for lab in record.labels],
        caption=record.caption,
        width=int(record.width),
        height=int(record.height),
        image_path=rel(record.image_path),
        thumbnail_path=rel(record.thumb_path),
    )
    msg.header.stamp = _stamp_or_zero(record.timestamp)
    if record.robot_pose is not None:
        msg.has_robot_pose = True
        msg.robot_pose = _pose_from_list([float(v) for v in record.robot_pose])
    return msg


def _tag_value(tags: Any, key: str) -> str:
    for tag in tags or []:
        if isinstance(tag, str) and tag.startswith(key + ":"):
            return tag.split(":", 1)[1]
    return ""


def _pose_from_list(values: list[float]) -> Pose:
    """[x, y, yaw] or [x, y, z, qx, qy, qz, qw] as a Pose."""
    pose = Pose()
    if len(values) == 3:
        pose.position.x, pose.position.y = values[0], values[1]
        pose.orientation.z = math.sin(values[2] / 2.0)
        pose.orientation.w = math.cos(values[2] / 2.0)
    elif len(values) >= 7:
        pose.position.x, pose.position.y, pose.position.z = values[:3]
        (pose.orientation.x, pose.orientation.y, pose.orientation.z,
         pose.orientation.w) = values[3:7]
    return pose


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
            stamp=_stamp_or_zero(rec.stamp))
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
