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
from mimir_planner.reasoning.harness import PendingQueue
from mimir_planner.reasoning.world_view import Box3D, WorldView, is_opened

T = TypeVar("T")
Pose2D = tuple[float, float, float]
Point = tuple[float, float, float]


@dataclass(frozen=True)
class GripperReading:
    """Gripper at one stamp: jaw opening (m) and whether the jaws hold something."""

    opening_m: float
    holding: bool


def contract_gripper_readings(
    readings: Sequence[tuple[float, float]],
    *,
    stroke_m: float,
    open_below: float,
    closed_empty: float,
    settle: float = 0.03,
    hold_band: float = 0.25,
) -> list[tuple[float, GripperReading]]:
    """Gripper readings of the robot contract (position 0 open .. 1 closed, no force).

    A gripper without a force sensor says it holds something by where its fingers stopped: a
    hold starts when the position has left the open end (``open_below``), stopped short of
    closing on nothing (``closed_empty``), and stays put (within ``settle`` of the previous
    reading of an earlier stamp, so the fingers passing through mid-travel while they close do
    not count; a reading repeated at one stamp is one sample, not a second look). Only fingers
    that were closing stop on something: jaws that pause on their way open (after a handle
    slipped out and the hand let go) hold nothing, while the hand may already be backing away.
    A window that begins with the fingers at rest in range (an object held from before) holds
    from its second reading. Once started, the hold lasts while the readings stay in that range
    and within ``hold_band`` of where the fingers stopped: a pull on a held handle flexes the
    fingers by several hundredths from one reading to the next without letting go, while
    opening the jaws drops the reading out of the band at once. The opening in metres is
    ``(1 - position) * stroke_m``.
    """
    out: list[tuple[float, GripperReading]] = []
    previous: tuple[float, float] | None = None  # (stamp, position) of an earlier stamp
    last: tuple[float, float] | None = None
    stopped_at: float | None = None  # the reading where the current hold started
    closing: bool | None = None  # the direction of the last move larger than settle
    for stamp, position in readings:
        if last is not None and stamp > last[0]:
            previous = last
        if previous is not None and abs(position - previous[1]) > settle:
            closing = position > previous[1]
        in_range = open_below < position < closed_empty
        if stopped_at is not None and not (in_range and abs(position - stopped_at) <= hold_band):
            stopped_at = None
        if stopped_at is None and in_range and previous is not None and closing is not False \
                and abs(position - previous[1]) <= settle:
            stopped_at = position
        out.append((stamp, GripperReading(max(0.0, (1.0 - position) * stroke_m),
                                          stopped_at is not None)))
        last = (stamp, position)
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
    hand_position: Callable[[float], Point | None] = lambda _t: None,
    hand_commanded: Callable[[float], Point | None] = lambda _t: None,
    *,
    hand_odom: Callable[[float], Point | None] = lambda _t: None,
    commanded_odom: Callable[[float], Point | None] = lambda _t: None,
) -> tuple[list[RobotStateSample], int]:
    """Robot-state samples of a window from its gripper readings.

    A reading whose base pose is unknown takes the previous one, else the origin. The achieved
    and commanded hand positions (map, and odom) are attached where the robot reported them
    near the reading's stamp.

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
        samples.append(RobotStateSample(
            stamp=stamp,
            gripper_opening_m=reading.opening_m,
            gripper_effort_n=0.0,
            contact=reading.holding,
            base_pose=pose or (0.0, 0.0, 0.0),
            hand_position=hand_position(stamp),
            hand_commanded=hand_commanded(stamp),
            hand_odom=hand_odom(stamp),
            commanded_odom=commanded_odom(stamp),
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
    points = np.stack([d.position for d in fresh])
    near = np.zeros(len(fresh), dtype=bool)
    for box in boxes.values():
        near |= box.contains_points(points, margin_m)
    relevant = [d for d, keep in zip(fresh, near.tolist(), strict=True) if keep]
    if not relevant:
        return None
    opened = frozenset(i for i in boxes if (n := world.node(i)) and is_opened(n))
    return Evidence(detections=tuple(relevant), observed_interiors=opened,
                    refs=tuple(d.ref for d in relevant))
