"""Conversions of the keyframe store: triggers and phases, stored keyframes' metadata, and the
instance image a keyframe keeps of a segmentation.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from geometry_msgs.msg import Pose

from mimir.nodes.memory.messages import MessageValueError, stamp_or_zero
from mimir.ros.images import ImageConversionError, image_to_numpy
from mimir_memory.keyframes import KeyframeRecord, Trigger
from mimir_msgs.msg import KeyframeLabel, KeyframeMetadata


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
    msg.header.stamp = stamp_or_zero(record.timestamp)
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
