"""Clutter per object: the free space beside it for the gripper's fingers, from memory's 3D boxes.

A parallel-jaw gripper closing on an object from the front needs room for a finger on either
side, and a clear way in. For a pick candidate, :func:`room_around` measures the narrowest
horizontal gap between the candidate's remembered box and the boxes of the other objects that
stand on the same level (their heights overlap) within ``neighbour_radius_m``: fixtures, the
candidate's holder, held objects and objects memory no longer believes at their last place do
not count, nor does a node whose box centre lies within ``same_spot_m`` of the candidate's: that
is the candidate itself, remembered a second time under a look-alike's label (a ketchup bottle
the segmenter now and then calls hot sauce), since two solid things cannot share a spot. A
candidate with no such neighbour has unlimited room. Given the direction the hand
comes from (the side the cameras saw the object from, where the robot stands), a neighbour in
front of the object and across the hand's way (the object's width and a finger's room either
side) blocks it wherever it stands in front within ``neighbour_radius_m``: the hand would have
to pass through it.

:func:`clearance_chooser` uses it among pick candidates that recall ties: when some candidate
lacks ``finger_gap_m`` on a side and another has clearly more room (``min_difference_m``), it
picks the roomiest; when all have room enough, or the gaps are too close to tell, it abstains and
the usual order stands. Boxes come from registered depth, so they carry the depth noise; the
margins in ``config/planner.yaml`` (``clutter``) leave room for it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mimir_memory.graph import AT_LAST_PLACE, HAND_PARENT, SceneGraphState, SceneNode
from mimir_planner.config import ClutterConfig
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.recall import Candidate

LOG = logging.getLogger(__name__)

Chooser = Callable[[GoalSpec, Sequence[Candidate]], str | None]

#: A box's (lower, upper) corners in the map (m).
Box = tuple[np.ndarray, np.ndarray]

#: node -> horizontal map position (x, y) the cameras saw it from, or None when unknown.
Viewpoint = Callable[[SceneNode], tuple[float, float] | None]


@dataclass(frozen=True)
class Room:
    """The free space around a pick candidate.

    Attributes:
        gap: The narrowest horizontal gap to a neighbour on its level (m; ``inf`` with none,
            negative where boxes overlap).
        blocker: The neighbour standing in the hand's way in front of it, or None (none, or the
            direction the hand comes from is not known).
    """

    gap: float
    blocker: str | None = None

    @property
    def usable(self) -> float:
        """The room the fingers have: none when something blocks the way in."""
        return min(self.gap, 0.0) if self.blocker is not None else self.gap

    def why_short(self, needed: float) -> str:
        """Why the candidate lacks ``needed`` metres of room."""
        if self.blocker is not None:
            return f"{self.blocker} stands in front of it, in the hand's way"
        return (f"only {self.gap:.3f} m beside it to a neighbour (the fingers need "
                f"{needed:.2f} m)")


def _box(node: SceneNode) -> Box | None:
    lower = np.asarray(node.bbox_min, dtype=np.float64)
    upper = np.asarray(node.bbox_max, dtype=np.float64)
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))) or np.any(upper < lower):
        return None
    return lower, upper


def _counts_as_neighbour(node: SceneNode, target: SceneNode,
                         is_fixture: Callable[[str], bool]) -> bool:
    if node.node_id in (target.node_id, target.parent) or is_fixture(node.label):
        return False
    if node.parent == HAND_PARENT:
        return False
    where = node.properties.get(AT_LAST_PLACE)
    return not (where is not None and where.value is False)


def _extent(box: Box, axis: np.ndarray) -> tuple[float, float]:
    """The interval a box's horizontal footprint covers along a horizontal unit ``axis``."""
    lo, hi = box
    corners = np.array([[x, y] for x in (lo[0], hi[0]) for y in (lo[1], hi[1])]) @ axis
    return float(corners.min()), float(corners.max())


def _in_the_way(box: Box, other: Box, approach: np.ndarray, margin: float) -> bool:
    """Whether ``other`` stands in front of ``box`` (its centre nearer the hand than the near
    face of ``box``) and across the hand's way (the width of ``box`` plus ``margin`` either
    side), seen along the horizontal unit vector ``approach``."""
    near, _ = _extent(box, approach)
    o_near, o_far = _extent(other, approach)
    if (o_near + o_far) / 2.0 >= near:
        return False
    across = np.array([-approach[1], approach[0]])
    left, right = _extent(box, across)
    o_left, o_right = _extent(other, across)
    return o_right > left - margin and o_left < right + margin


def approach_to(target: SceneNode, viewpoint: tuple[float, float] | None
                ) -> tuple[float, float] | None:
    """The horizontal unit direction from ``viewpoint`` to ``target``'s box centre (the way the
    hand comes in), or None without a viewpoint, a usable box, or any horizontal distance."""
    box = _box(target)
    if viewpoint is None or box is None:
        return None
    centre = (box[0][:2] + box[1][:2]) / 2.0
    way = centre - np.asarray(viewpoint, dtype=np.float64)
    length = float(np.linalg.norm(way))
    if not math.isfinite(length) or length < 1e-6:
        return None
    return float(way[0] / length), float(way[1] / length)


def room_around(target: SceneNode, state: SceneGraphState, config: ClutterConfig,
                is_fixture: Callable[[str], bool],
                approach: tuple[float, float] | None = None) -> Room | None:
    """The room around ``target`` (see the module); None when it has no usable box.

    Args:
        approach: Horizontal unit direction the hand comes in along (map x, y); None judges
            the gaps beside it only.
    """
    box = _box(target)
    if box is None:
        return None
    lower, upper = box
    centre = (lower + upper) / 2.0
    way = None if approach is None else np.asarray(approach, dtype=np.float64)
    gap = math.inf
    blocker: str | None = None
    for node in state.nodes.values():
        if not _counts_as_neighbour(node, target, is_fixture):
            continue
        other = _box(node)
        if other is None:
            continue
        if float(np.linalg.norm((other[0] + other[1]) / 2.0 - centre)) < config.same_spot_m:
            continue  # the candidate itself under another label
        o_lower, o_upper = other
        if min(upper[2], o_upper[2]) - max(lower[2], o_lower[2]) <= 0.0:
            continue  # another level (a shelf above or below)
        o_centre = (o_lower + o_upper) / 2.0
        if float(np.linalg.norm((o_centre - centre)[:2])) > config.neighbour_radius_m:
            continue
        # per axis: the space between the boxes (negative where they overlap on that axis)
        apart = np.maximum(o_lower[:2] - upper[:2], lower[:2] - o_upper[:2])
        separation = (float(np.linalg.norm(np.maximum(apart, 0.0))) if np.any(apart > 0.0)
                      else float(apart.max()))
        gap = min(gap, separation)
        if blocker is None and way is not None and _in_the_way(
                box, other, way, config.finger_gap_m):
            blocker = node.node_id
    return Room(gap, blocker)


def rooms_around(state: SceneGraphState, candidates: Sequence[Candidate],
                 config: ClutterConfig, is_fixture: Callable[[str], bool],
                 viewpoint: Viewpoint | None = None) -> dict[str, Room | None]:
    """:func:`room_around` of each candidate that is a node in ``state``, by node id (None: no
    usable box), the hand coming from where ``viewpoint`` says the cameras saw it. An item
    only listed in a fixture's contents, or a node memory no longer holds, has no entry: the
    space around it was never seen."""
    rooms: dict[str, Room | None] = {}
    for cand in candidates:
        node = state.nodes.get(cand.node_id)
        if cand.content_item is None and node is not None:
            approach = approach_to(node, viewpoint(node)) if viewpoint is not None else None
            rooms[cand.node_id] = room_around(node, state, config, is_fixture, approach)
    return rooms


def clearance_chooser(state_of: Callable[[], SceneGraphState], config: ClutterConfig,
                      is_fixture: Callable[[str], bool],
                      viewpoint: Callable[[], Viewpoint | None] = lambda: None) -> Chooser:
    """A chooser for pick goals by the free space around each candidate (see the module);
    ``viewpoint`` gives the current viewpoint source (None while there is none)."""

    def choose(spec: GoalSpec, candidates: Sequence[Candidate]) -> str | None:
        if spec.kind is not GoalKind.PICK or len(candidates) < 2:
            return None
        best_score = max(c.score for c in candidates)
        best = [c for c in candidates if c.score >= best_score]
        gaps = {node_id: room.usable for node_id, room in
                rooms_around(state_of(), best, config, is_fixture, viewpoint()).items()
                if room is not None}
        if len(gaps) < 2 or min(gaps.values()) >= config.finger_gap_m:
            return None
        ranked = sorted(gaps, key=lambda nid: (-gaps[nid], nid))
        if gaps[ranked[0]] - gaps[ranked[1]] < config.min_difference_m:
            LOG.info("free space does not tell the candidates apart: %s",
                     {k: round(v, 3) for k, v in gaps.items()})
            return None
        LOG.info("free space picks %s (gaps beside each candidate, m: %s)", ranked[0],
                 {k: round(v, 3) for k, v in gaps.items()})
        return ranked[0]

    return choose
