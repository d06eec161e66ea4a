"""Clutter per object: the free space beside it for the gripper's fingers, from memory's 3D boxes.

A parallel-jaw gripper closing on an object from the front needs room for a finger on either
side. For a pick candidate, :func:`side_gap` measures the narrowest horizontal gap between the
candidate's remembered box and the boxes of the other objects that stand on the same level
(their heights overlap) within ``neighbour_radius_m``: fixtures, the candidate's holder, held
objects and objects memory no longer believes at their last place do not count. A candidate
with no such neighbour has unlimited room.

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

import numpy as np

from mimir_memory.graph import AT_LAST_PLACE, HAND_PARENT, SceneGraphState, SceneNode
from mimir_planner.config import ClutterConfig
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.recall import Candidate

LOG = logging.getLogger(__name__)

Chooser = Callable[[GoalSpec, Sequence[Candidate]], str | None]


def _box(node: SceneNode) -> tuple[np.ndarray, np.ndarray] | None:
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


def side_gap(target: SceneNode, state: SceneGraphState, config: ClutterConfig,
             is_fixture: Callable[[str], bool]) -> float | None:
    """The narrowest horizontal gap (m) between ``target``'s box and a neighbour's on its level;
    ``inf`` with no neighbour, None when ``target`` has no usable box. Overlapping boxes give
    a negative gap (how far they overlap)."""
    box = _box(target)
    if box is None:
        return None
    lower, upper = box
    centre = (lower + upper) / 2.0
    gap = math.inf
    for node in state.nodes.values():
        if not _counts_as_neighbour(node, target, is_fixture):
            continue
        other = _box(node)
        if other is None:
            continue
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
    return gap


def gaps_beside(state: SceneGraphState, candidates: Sequence[Candidate], config: ClutterConfig,
                is_fixture: Callable[[str], bool]) -> dict[str, float | None]:
    """:func:`side_gap` of each candidate that is a node in ``state``, by node id (None: no
    usable box). An item only listed in a fixture's contents, or a node memory no longer holds,
    has no entry: the space around it was never seen."""
    gaps: dict[str, float | None] = {}
    for cand in candidates:
        node = state.nodes.get(cand.node_id)
        if cand.content_item is None and node is not None:
            gaps[cand.node_id] = side_gap(node, state, config, is_fixture)
    return gaps


def clearance_chooser(state_of: Callable[[], SceneGraphState], config: ClutterConfig,
                      is_fixture: Callable[[str], bool]) -> Chooser:
    """A chooser for pick goals by the free space beside each candidate (see the module)."""

    def choose(spec: GoalSpec, candidates: Sequence[Candidate]) -> str | None:
        if spec.kind is not GoalKind.PICK or len(candidates) < 2:
            return None
        best_score = max(c.score for c in candidates)
        best = [c for c in candidates if c.score >= best_score]
        gaps = {node_id: gap for node_id, gap in
                gaps_beside(state_of(), best, config, is_fixture).items() if gap is not None}
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
