"""Fail-closed grounding (mimir.md eq. 10) and the exploration policy.

G drops recalled candidates that cannot support a legal interaction for the goal, conflict with
an explicit source, or were contradicted by feedback; then it picks the best supported one (a
model may only choose among the admissible candidates), completes an omitted source from the
remembered parent, resolves the explicit target, and attaches the evidence. With no admissible
candidate it returns an :class:`Exploration` of the best unexplored fixture (not locked, not
already inspected without the object, unvisited first, nearest first) or :class:`Blocked`;
it never returns an action on an unsupported binding.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import cv2

from mimir_memory.errors import MemoryStoreError
from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.keyframes import KeyframeStore, Trigger
from mimir_memory.task import FailedBinding
from mimir_planner.errors import RecallError
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.primitives import PrimitiveRegistry, RobotContext
from mimir_planner.recall import Candidate, EvidenceItem, GoalRecall, RecallQuery, canon
from mimir_planner.retrieval import edge_density

LOG = logging.getLogger(__name__)

Chooser = Callable[[GoalSpec, Sequence[Candidate]], str | None]
"""A model's choice among admissible candidates (node id), or None to accept the best."""


@dataclass(frozen=True)
class GroundedGoal:
    """hat g_t = (g_t, v*, u*, d*, eta*)."""

    goal_id: str
    spec: GoalSpec
    candidate: Candidate
    source: str | None
    target: str | None
    evidence: tuple[EvidenceItem, ...]
    candidates: tuple[Candidate, ...]
    dropped: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Exploration:
    """No admissible candidate: look into ``fixture`` next."""

    goal_id: str
    spec: GoalSpec
    fixture: str
    reason: str
    order: tuple[str, ...]
    dropped: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Blocked:
    """bottom_grd with nothing left to explore: the goal cannot be grounded."""

    goal_id: str
    spec: GoalSpec
    reason: str
    dropped: tuple[tuple[str, str], ...] = ()


GroundingResult = GroundedGoal | Exploration | Blocked


def _prop(node: SceneNode, name: str) -> object:
    prop = node.properties.get(name)
    return None if prop is None else prop.value


def _distance(a: SceneNode | None, b: SceneNode) -> float:
    if a is None:
        return 0.0
    return math.dist(a.centroid, b.centroid)


class Grounder:
    """G(g, R, F, A_e, x, o) over the scene graph, plus Explore_e."""

    def __init__(self, recall: GoalRecall, registry: PrimitiveRegistry) -> None:
        self.recall = recall
        self.registry = registry

    # ------------------------------------------------------------------ helpers
    def mention_of(self, spec: GoalSpec) -> str | None:
        """The object mention recall searches for."""
        return spec.obj if spec.obj is not None else spec.source

    def contents_known(self, node: SceneNode) -> bool:
        """Whether the fixture's contents were recorded (inspected)."""
        return bool(node.contents) or node.contents_empty is not None

    def lists(self, node: SceneNode, mention: str) -> bool:
        """Whether the fixture's remembered contents list the object."""
        return any(
            self.recall.synonyms.same(str(item.get("name", "")), mention)
            for item in node.contents
        )

    def _source_conflict(
        self, world: SceneGraphState, cand: Candidate, source: str
    ) -> str | None:
        if any(e.kind == "parent" for e in cand.evidence):
            return None
        if cand.content_item is not None:
            return f"listed in {cand.node_id}, not in the source '{source}'"
        if cand.parent is None:
            return None
        return f"remembered in {cand.parent}, not in the source '{source}'"

    def _illegal(self, spec: GoalSpec, cand: Candidate, world: SceneGraphState) -> str | None:
        node = world.nodes[cand.node_id]
        kind = spec.kind
        if kind in (GoalKind.OPEN, GoalKind.CLOSE):
            if _prop(node, "openable") is False or not (
                _prop(node, "openable") is True or self.registry.config.is_openable_label(
                    node.label)
            ):
                return "cannot be opened or closed"
            if kind is GoalKind.OPEN and _prop(node, "locked") is True:
                return "remembered locked"
        if kind is GoalKind.PICK:
            if cand.content_item is not None:
                return "known only from contents; needs a look inside first"
            if self.registry.is_fixture(node):
                return "a fixture cannot be picked"
            if _prop(node, "pickable") is False:
                return "remembered not pickable"
        return None

    # ------------------------------------------------------------------ grounding
    def ground(
        self,
        goal_id: str,
        spec: GoalSpec,
        world: SceneGraphState,
        failed: Iterable[FailedBinding],
        robot: RobotContext,
        *,
        visited: Collection[str] = (),
        chooser: Chooser | None = None,
    ) -> GroundingResult:
        """Ground a goal, or say what to explore, or block it."""
        failed = list(failed)
        mention = self.mention_of(spec)
        if mention is None:
            return Blocked(goal_id, spec, "the goal names no object")
        if spec.kind is GoalKind.PLACE and robot.holding is not None:
            mention = robot.holding
        fixtures_only = spec.kind in (GoalKind.OPEN, GoalKind.CLOSE)
        source = spec.source if spec.kind in (GoalKind.FIND, GoalKind.PICK) else None
        query = RecallQuery(obj=mention, source=source, fixtures_only=fixtures_only)
        try:
            recalled = self.recall.recall(world, query, failed)
        except RecallError as err:
            return Blocked(goal_id, spec, str(err))
        dropped: list[tuple[str, str]] = []
        admissible: list[Candidate] = []
        content_hints: list[Candidate] = []
        for cand in recalled:
            why = self._illegal(spec, cand, world)
            if why is None and source is not None:
                why = self._source_conflict(world, cand, source)
            if why is not None:
                dropped.append((cand.node_id, why))
                if cand.content_item is not None and spec.kind is GoalKind.PICK:
                    content_hints.append(cand)
                continue
            admissible.append(cand)
        if not admissible:
            if mention in world.nodes:
                why = "; ".join(f"{n}: {r}" for n, r in dropped) or "contradicted by feedback"
                return Blocked(goal_id, spec, f"bound entity {mention} cannot be used ({why})",
                               tuple(dropped))
            if content_hints:
                hint = content_hints[0]
                return Exploration(
                    goal_id, spec, hint.node_id,
                    f"'{mention}' is remembered inside {hint.node_id}; look inside to reach it",
                    (hint.node_id,), tuple(dropped),
                )
            if spec.kind in (GoalKind.OPEN, GoalKind.CLOSE, GoalKind.GO_TO):
                return Blocked(goal_id, spec, f"no admissible '{mention}' in memory",
                               tuple(dropped))
            return self.explore(goal_id, spec, world, failed, robot, visited=visited,
                                dropped=tuple(dropped))
        chosen = admissible[0]
        if chooser is not None and len(admissible) > 1:
            pick = chooser(spec, tuple(admissible))
            match = [c for c in admissible if c.node_id == pick]
            if pick is not None and not match:
                LOG.warning("model chose %r outside the candidates; kept %s", pick,
                            chosen.node_id)
            elif match:
                chosen = match[0]
        source_id = chosen.parent
        if source is not None:
            resolved = [
                s for s in self.recall.resolve(world, source)
                if s in (chosen.parent, chosen.node_id)
            ]
            source_id = resolved[0] if resolved else chosen.parent
        target_id: str | None = None
        if spec.kind is GoalKind.PLACE:
            if spec.target is None:
                return Blocked(goal_id, spec, "placement without a target", tuple(dropped))
            targets = [t for t in self.recall.resolve(world, spec.target) if t != chosen.node_id]
            if not targets:
                return Blocked(goal_id, spec, f"target '{spec.target}' is not in memory",
                               tuple(dropped))
            target_id = targets[0]
        return GroundedGoal(
            goal_id=goal_id,
            spec=spec,
            candidate=chosen,
            source=source_id,
            target=target_id,
            evidence=chosen.evidence,
            candidates=tuple(admissible),
            dropped=tuple(dropped),
        )

    # ------------------------------------------------------------------ exploration
    def explore(
        self,
        goal_id: str,
        spec: GoalSpec,
        world: SceneGraphState,
        failed: Sequence[FailedBinding],
        robot: RobotContext,
        *,
        visited: Collection[str] = (),
        dropped: tuple[tuple[str, str], ...] = (),
    ) -> Exploration | Blocked:
        """Explore_e: the next fixture to look into for the goal's object, or Blocked."""
        mention = self.mention_of(spec) or ""
        here = world.nodes.get(robot.last_moved_to or "")
        contradicted = {f.source_id for f in failed if f.source_id is not None}
        contradicted |= {f.object_id for f in failed
                         if canon(f.object_id) == canon(mention) and f.source_id is None}
        skipped: list[str] = []
        ranked: list[tuple[tuple[object, ...], str]] = []
        for node in world.nodes.values():
            if not self.registry.is_fixture(node):
                continue
            openable = _prop(node, "openable") is True or (
                _prop(node, "openable") is not False
                and self.registry.config.is_openable_label(node.label)
            )
            failures = [h for h in node.task_history
                        if h.get("success") is False and "open" in str(h.get("task", "")).lower()]
            if _prop(node, "locked") is True:
                skipped.append(f"{node.node_id} (locked)")
                continue
            if self.contents_known(node) and not self.lists(node, mention):
                skipped.append(f"{node.node_id} (inspected, no {mention})")
                continue
            if node.node_id in contradicted:
                skipped.append(f"{node.node_id} (contradicted)")
                continue
            if len(failures) >= 2:
                skipped.append(f"{node.node_id} (failed to open twice)")
                continue
            if not openable and node.node_id in visited:
                skipped.append(f"{node.node_id} (visited surface)")
                continue
            source_miss = spec.source is not None and not self.recall.synonyms.same(
                canon(spec.source), canon(node.label)) and spec.source != node.node_id
            key = (
                source_miss,
                not openable,
                node.node_id != robot.last_moved_to,
                node.node_id in visited,
                round(_distance(here, node), 3),
                node.node_id,
            )
            ranked.append((key, node.node_id))
        if not ranked:
            reason = f"nothing left to explore for '{mention}'"
            if skipped:
                reason += "; skipped " + ", ".join(sorted(skipped))
            return Blocked(goal_id, spec, reason, dropped)
        ranked.sort()
        order = tuple(nid for _, nid in ranked)
        reason = f"'{mention}' is not in memory; explore {order[0]}"
        if skipped:
            reason += " (skipping " + ", ".join(sorted(skipped)) + ")"
        return Exploration(goal_id, spec, order[0], reason, order, dropped)


def clutter_chooser(store: KeyframeStore) -> Chooser:
    """A model-free chooser for pick goals from keyframe evidence (Clutter-Aware Pick).

    Among the pick candidates tied for the best recall score, it prefers the one whose holder
    (remembered parent) has the least cluttered newest interior keyframe, measured as the edge
    density of that frame's thumbnail (the whole thumbnail, not the object's region). It
    abstains (None) for other goals, for a single candidate, or when fewer than two holders
    have an interior keyframe to compare.
    """
    triggers = (Trigger.INTERACTION_PEAK, Trigger.INTERACTION_POST)

    def choose(spec: GoalSpec, candidates: Sequence[Candidate]) -> str | None:
        if spec.kind is not GoalKind.PICK or len(candidates) < 2:
            return None
        best = max(c.score for c in candidates)
        densities: dict[str, float] = {}
        for cand in candidates:
            if cand.score < best or cand.content_item is not None:
                continue
            holder = cand.parent or cand.node_id
            try:
                frames = store.query(node_ids=[holder], trigger=triggers, limit=1)
                if not frames:
                    continue
                thumb = store.load_image(frames[0].frame_id, thumbnail=True)
            except MemoryStoreError as err:
                LOG.warning("no interior keyframe of %s to compare: %s", holder, err)
                continue
            code = cv2.COLOR_GRAY2RGB if thumb.ndim == 2 else cv2.COLOR_BGR2RGB
            densities[cand.node_id] = edge_density(cv2.cvtColor(thumb, code))
        if len(densities) < 2:
            return None
        choice = min(densities, key=lambda nid: (densities[nid], nid))
        LOG.info("clutter cue picks %s (edge densities %s)", choice,
                 {k: round(v, 3) for k, v in densities.items()})
        return choice

    return choose
