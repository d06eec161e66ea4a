"""Assembling the analyzer's inputs from buffered streams, without ROS.

The analyzer node buffers what the robot reports; these functions turn the buffered records of
one action window into the reasoning core's evidence records (robot states from gripper
readings, an even choice of frames) and pick the new detections that bear on deferred claims.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from mimir_planner.reasoning.evidence import Detection3D, Evidence, RobotStateSample
from mimir_planner.reasoning.harness import PendingQueue, label_of_id
from mimir_planner.reasoning.world_view import Box3D, WorldView, is_opened

T = TypeVar("T")
Pose2D = tuple[float, float, float]


@dataclass(frozen=True)
class GripperReading:
    """Gripper at one stamp: jaw opening (m), grip force (N) where the gripper reports one, and
    whether the jaws hold something where that was read from the position alone."""

    opening_m: float
    effort_n: float
    holding: bool | None = None


def contract_gripper_readings(
    readings: Sequence[tuple[float, float]],
    *,
    stroke_m: float,
    open_below: float,
    closed_empty: float,
    settle: float = 0.03,
) -> list[tuple[float, GripperReading]]:
    """Gripper readings of the robot contract (position 0 open .. 1 closed, no force).

    A gripper without a force sensor says it holds something by where its fingers stopped: the
    position has left the open end (``open_below``), stopped short of closing on nothing
    (``closed_empty``), and stays put (within ``settle`` of the previous reading, so the fingers
    passing through mid-travel while they close do not count). The opening in metres is
    ``(1 - position) * stroke_m``.
    """
    out: list[tuple[float, GripperReading]] = []
    previous: float | None = None
    for stamp, position in readings:
        still = previous is not None and abs(position - previous) <= settle
        holding = open_below < position < closed_empty and still
        out.append((stamp, GripperReading(max(0.0, (1.0 - position) * stroke_m), 0.0, holding)))
        previous = position
    return out


def spread(items: Sequence[T], count: int) -> list[T]:
    """At most ``count`` items evenly spaced over ``items``, first and last included."""
    if len(items) <= count:
        return list(items)
    picks = np.linspace(0, len(items) - 1, count).round().astype(int)
    return [items[int(i)] for i in dict.fromkeys(picks.tolist())]


def robot_states(
    readings: Iterable[tuple[float, GripperReading]],
    base_pose: Callable[[float], Pose2D | None],
    contact_effort_n: float,
    closed_opening_m: float,
    hand_position: Callable[[float], tuple[float, float, float] | None] = lambda _t: None,
) -> tuple[list[RobotStateSample], int]:
    """Robot-state samples of a window from its gripper readings.

    The jaws touch something when the reading says so (``holding``, from the position alone),
    else when the grip force reaches ``contact_effort_n`` while they are still at least
    ``closed_opening_m`` apart (closed further, they closed on nothing). A
    reading whose base pose is unknown takes the previous one, else the origin. The hand
    position (map) is attached where the arm reported one near the reading's stamp.

    Returns:
        (samples, how many readings had no base pose of their own or before them).
    """
    samples: list[RobotStateSample] = []
    pose: Pose2D | None = None
    missing = 0
    for stamp, reading in readings:
        pose = base_pose(stamp) or pose
        if pose is None:
            missing += 1
        contact = (reading.holding if reading.holding is not None else
                   reading.effort_n >= contact_effort_n and reading.opening_m >= closed_opening_m)
        samples.append(RobotStateSample(
            stamp=stamp,
            gripper_opening_m=reading.opening_m,
            gripper_effort_n=reading.effort_n,
            contact=contact,
            base_pose=pose or (0.0, 0.0, 0.0),
            hand_position=hand_position(stamp),
        ))
    return samples, missing


def pending_boxes(pending: PendingQueue, world: WorldView) -> dict[str, Box3D]:
    """Boxes of the nodes that deferred claims concern (nodes without a box left out)."""
    boxes: dict[str, Box3D] = {}
    for item in pending.items():
        for node_id in item.claim.subject_ids:
            node = world.node(node_id)
            if node is not None and node.bbox is not None:
                boxes[node_id] = node.bbox
    return boxes


def recheck_evidence(pending: PendingQueue, world: WorldView,
                     fresh: Sequence[Detection3D], margin_m: float) -> Evidence | None:
    """Evidence for re-judging deferred claims from new detections, or None.

    Only detections inside (within ``margin_m``) a node that a deferred claim concerns count;
    those nodes that memory records as standing open count as observed inside.
    """
    if not fresh or not len(pending):
        return None
    boxes = pending_boxes(pending, world)
    relevant = [d for d in fresh
                if any(box.contains(d.position, margin_m) for box in boxes.values())]
    if not relevant:
        return None
    opened = frozenset(i for i in boxes if (n := world.node(i)) and is_opened(n))
    return Evidence(detections=tuple(relevant), observed_interiors=opened,
                    refs=tuple(d.ref for d in relevant))


def fixture_joint_type(world: WorldView, node_id: str, prismatic: Iterable[str]) -> str:
    """``prismatic`` when the fixture's label is one of ``prismatic`` (lower case), else
    ``revolute``; the label comes from memory, else from the id without its number."""
    node = world.node(node_id)
    label = node.label if node is not None else label_of_id(node_id)
    return "prismatic" if label.strip().lower() in prismatic else "revolute"
