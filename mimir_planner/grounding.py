"""Fail-closed grounding (mimir.md eq. 10) and the exploration policy.

G drops recalled candidates that cannot support a legal interaction for the goal, conflict with
an explicit source, or were contradicted by feedback; then it picks the best supported one (a
model may only choose among the admissible candidates), completes an omitted source from the
remembered parent, resolves the explicit target, and attaches the evidence. With no admissible
candidate it returns an :class:`Exploration` of the best unexplored fixture (not locked, not
already inspected without the object, unvisited first, nearest first) or :class:`Blocked`;
it never returns an action on an unsupported binding. Attribute words of the object (``the
green apple``) fail closed the same way: with the offline planner only an instance memory knows
to carry them is a candidate, and when memory holds instances but none is known to carry them
the goal blocks and says why instead of completing on the name.

Failed object-source bindings (task memory's F_t) take part in both: a candidate whose binding
was contradicted is dropped, and a fixture that was contradicted as the source of the goal's
object is not explored again for that object (other objects may still be sought there).
Grounded ``find`` goals also carry the *holder*, the fixture the object is believed to be in or
on, so a planner can confirm the object by inspecting it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from mimir_memory.graph import AT_LAST_PLACE, SceneGraphState, SceneNode
from mimir_memory.task import FailedBinding
from mimir_perception.appearance import Match
from mimir_planner.clutter import Viewpoint, rooms_around
from mimir_planner.errors import RecallError
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.primitives import PrimitiveRegistry, RobotContext
from mimir_planner.recall import (
    Candidate,
    EvidenceItem,
    EvidenceKind,
    GoalRecall,
    RecallQuery,
    canon,
)

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
    holder: str | None = None
    """Fixture the object is believed to be in or on (see :meth:`Grounder.holder_of`)."""


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

#: (reference node, candidate nodes) -> the matcher's answer (its ``best`` None to abstain).
Likeness = Callable[[SceneNode, Sequence[SceneNode]], Match]


def _prop(node: SceneNode, name: str) -> object:
    prop = node.properties.get(name)
    return None if prop is None else prop.value


def _box_gap(point: Sequence[float], node: SceneNode) -> float:
    """Distance from ``point`` to the node's box (0 inside it)."""
    return math.sqrt(sum(max(lo - c, 0.0, c - hi) ** 2
                         for lo, c, hi in zip(node.bbox_min, point, node.bbox_max, strict=True)))


def _footprint_gap(point: Sequence[float], node: SceneNode) -> float:
    """Horizontal distance from ``point`` to the node's box seen from above (0 over it)."""
    return math.hypot(*(max(lo - c, 0.0, c - hi) for lo, c, hi in zip(
        node.bbox_min[:2], point[:2], node.bbox_max[:2], strict=True)))


def _distance(a: SceneNode | None, b: SceneNode) -> float:
    if a is None:
        return 0.0
    return math.dist(a.centroid, b.centroid)


def _travel(robot: RobotContext, here: SceneNode | None, node: SceneNode) -> float:
    """How far the robot is from ``node``: on the floor from where it is when its position is
    known, else from the centroid of the node it last moved to (0 when neither is known)."""
    if robot.position is not None:
        return math.dist(robot.position, node.centroid[:2])
    return _distance(here, node)


def history_primitive(entry: dict[str, object]) -> str:
    """The primitive of a ``task_history`` record (older records only name it as the task)."""
    primitive = entry.get("primitive")
    if isinstance(primitive, str) and primitive:
        return primitive.lower()
    return str(entry.get("task", "")).strip().lower()


def open_failures_since_success(node: SceneNode) -> int:
    """Failed ``open`` records of a node since its last successful open."""
    count = 0
    for entry in node.task_history:
        if history_primitive(entry) != "open":
            continue
        count = 0 if entry.get("success") is True else count + 1
    return count


def inspected_in_history(node: SceneNode) -> bool:
    """Whether the node's task history holds a successful inspect."""
    return any(history_primitive(h) in ("inspect", "peek") and h.get("success") is True
               for h in node.task_history)


class Grounder:
    """G(g, R, F, A_e, x, o) over the scene graph, plus Explore_e."""

    def __init__(self, recall: GoalRecall, registry: PrimitiveRegistry) -> None:
        self.recall = recall
        self.registry = registry
        self.likeness: Likeness | None = None
        """Judges which remembered node looks most like a reference (``looks like`` goals);
        None while no keyframes are there to look at."""
        self.seen_well: Callable[[SceneNode], bool] | None = None
        """Whether some keyframe shows a node well enough to measure its look; None while no
        keyframes are there to look at."""
        self.viewpoint: Viewpoint | None = None
        """Where the cameras saw a node from (the side the hand comes from); None while no
        keyframes are there to tell."""

    # ------------------------------------------------------------------ helpers
    def mention_of(self, spec: GoalSpec) -> str | None:
        """The object mention recall searches for."""
        return spec.obj if spec.obj is not None else spec.source

    def contents_known(self, node: SceneNode) -> bool:
        """Whether the fixture's contents were recorded (inspected)."""
        return bool(node.contents) or node.contents_empty is not None

    def lists(self, node: SceneNode, mention: str,
              world: SceneGraphState | None = None) -> bool:
        """Whether the fixture's remembered contents list the object (given ``world``: as
        known to carry the mention's attribute words, ``green`` of ``green apple``)."""
        return self._listed(node, mention, world) is not None

    def _listed(self, node: SceneNode, mention: str,
                world: SceneGraphState | None) -> str | None:
        for item in node.contents:
            name = str(item.get("name", ""))
            if world is not None and self.recall.describes(world, mention, node, name):
                return name
            if world is None and self.recall.same_thing(name, mention):
                return name
        return None

    def holds_wanted(self, world: SceneGraphState, node: SceneNode, spec: GoalSpec,
                     mention: str) -> bool:
        """Whether the fixture's remembered contents hold the object as the goal describes
        it: listed (known to carry its attribute words), kept with what ``spec.near`` names,
        and not in the place it excludes."""
        listed = self._listed(node, mention, world)
        if listed is None:
            return False
        if spec.avoid is not None and (spec.avoid == node.node_id
                                       or self.recall.matches(spec.avoid, node) is not None):
            return False
        if spec.near is None:
            return True
        return bool(self.recall.held_with(world, node.node_id, spec.near, listed))

    def names_object(self, object_id: str, mention: str, world: SceneGraphState) -> bool:
        """Whether a failed binding's object is the object ``mention`` describes."""
        if object_id == mention or self.recall.synonyms.same(object_id, mention):
            return True
        node = world.nodes.get(object_id)
        return node is not None and self.recall.synonyms.same(node.label, mention)

    def contradicted_sources(
        self, mention: str, world: SceneGraphState, failed: Iterable[FailedBinding]
    ) -> set[str]:
        """Sources contradicted for the object ``mention`` describes (F_t)."""
        return {
            f.source_id for f in failed
            if f.source_id is not None and self.names_object(f.object_id, mention, world)
        }

    def holder_of(self, world: SceneGraphState, cand: Candidate) -> str | None:
        """The fixture the candidate is believed to be in or on.

        In order: the fixture whose remembered contents list it; the nearest fixture among its
        remembered ancestors; for an object without a remembered parent, where its base (the
        centroid lowered to the bottom of its box: a thing rests on what is under it) lies,
        among fixtures whose box does not start above the base: the fixture whose box holds
        the base or passes it by at most ``holder_margin_m`` (the closest, then the smallest,
        so a drawer beats the counter around it), else the fixture whose top is not below the
        base (by more than the margin) and whose box comes nearest to it within
        ``holder_max_distance_m``, or over whose footprint the base stands (a counter seen
        from the side is remembered lower than it is). A cup on the counter under a wall
        cabinet is on the counter even where the counter's remembered box ends short of it.
        None for fixtures themselves and for objects no fixture holds.
        """
        if cand.content_item is not None:
            return cand.node_id
        node = world.nodes.get(cand.node_id)
        if node is None or self.registry.is_fixture(node):
            return None
        for ancestor in world.ancestors(node.node_id):
            anc = world.nodes.get(ancestor)
            if anc is not None and self.registry.is_fixture(anc):
                return ancestor
        if node.parent is not None:
            return None
        loop = self.registry.config.loop
        base = (node.centroid[0], node.centroid[1], min(node.centroid[2], node.bbox_min[2]))
        inside: list[tuple[float, float, str]] = []
        near: list[tuple[float, str]] = []
        for other in world.nodes.values():
            if other.node_id == node.node_id or not self.registry.is_fixture(other):
                continue
            if other.bbox_min[2] > base[2] + loop.holder_margin_m:
                continue  # a fixture above the thing (a wall cabinet over the counter) holds none
            gap = _box_gap(base, other)
            if gap <= loop.holder_margin_m:
                volume = math.prod(max(b - a, 0.0) for a, b in zip(
                    other.bbox_min, other.bbox_max, strict=True))
                inside.append((gap, volume, other.node_id))
            elif gap <= loop.holder_max_distance_m and (
                    base[2] <= other.bbox_max[2] + loop.holder_margin_m
                    or _footprint_gap(base, other) <= loop.holder_margin_m):
                # past where its box ends on its level, or over it where the remembered top is
                # lower than the real one (a counter seen only from the side)
                near.append((gap, other.node_id))
        if inside:
            return min(inside)[2]
        return min(near)[1] if near else None

    def _source_conflict(
        self, world: SceneGraphState, cand: Candidate, source: str
    ) -> str | None:
        if any(e.kind is EvidenceKind.PARENT for e in cand.evidence):
            return None
        if cand.content_item is not None:
            return f"listed in {cand.node_id}, not in the source '{source}'"
        if cand.parent is not None:
            return f"remembered in {cand.parent}, not in the source '{source}'"
        # seen by perception alone: the fixture its position puts it in or on must be the source
        holder = self.holder_of(world, cand)
        if holder is None:
            return f"seen where no fixture holds it, so not known to be in the source '{source}'"
        node = world.nodes.get(holder)
        if holder == source or (node is not None and self.recall.matches(source, node)
                                is not None):
            return None
        return f"seen in or on {holder}, not in the source '{source}'"

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
        if kind in (GoalKind.FIND, GoalKind.PICK, GoalKind.GO_TO) and cand.content_item is None \
                and _prop(node, AT_LAST_PLACE) is False:
            return "no longer where memory last saw it (missed by the cameras since)"
        if kind in (GoalKind.FIND, GoalKind.PICK) and cand.content_item is None:
            why = self._left_out_of_inventory(world, cand, node)
            if why is not None:
                return why
        if kind is GoalKind.PICK:
            if cand.content_item is not None:
                return "known only from contents; needs a look inside first"
            if self.registry.is_fixture(node):
                return "a fixture cannot be picked"
            if _prop(node, "pickable") is False:
                return "remembered not pickable"
        return None

    def _left_out_of_inventory(self, world: SceneGraphState, cand: Candidate,
                               node: SceneNode) -> str | None:
        """Why the object is not in the fixture believed to hold it: that fixture opens (its
        inspection sees the whole inside), its newest inventory (an inspection's admitted
        contents) was taken after the object was last seen (or by the look that saw it last:
        within ``loop.inventory_window_s`` before), and it lists nothing of its kind. None when
        no such inventory contradicts it."""
        holder = self.holder_of(world, cand)
        fixture = world.nodes.get(holder) if holder is not None else None
        window = self.registry.config.loop.inventory_window_s
        if fixture is None or fixture.contents_stamp is None \
                or fixture.contents_stamp + window <= node.last_seen \
                or not self.registry.config.is_openable_label(fixture.label):
            return None  # no inventory since, or a surface (a look over it lists no inventory)
        names = [str(item.get("name") or "") for item in fixture.contents]
        if any(self.recall.synonyms.same(name, node.label) for name in names if name):
            return None
        return (f"not in {holder}'s inventory of {fixture.contents_stamp:.1f} s, taken after "
                "it was last seen there")

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
        inspected: Collection[str] = (),
        inspected_now: Collection[str] = (),
        require_attributes: bool = True,
        moved_now: Collection[str] = (),
    ) -> GroundingResult:
        """Ground a goal, or say what to explore, or block it.

        Args:
            goal_id: The goal's id.
            spec: The goal (mentions bound to node ids where its postcondition names them).
            world: Current world memory.
            failed: Contradicted object-source bindings (F_t).
            robot: Where the robot last moved to and what it holds.
            visited: Fixtures the robot moved to during this session.
            chooser: A model's choice among several admissible candidates.
            inspected: Fixtures known to have been inspected (beyond recorded contents).
            inspected_now: Fixtures inspected during the current instruction; exploration
                does not look into them again.
            moved_now: What the robot moved to during the current instruction: a likeness
                reference no keyframe shows well enough is looked at from in front of its
                holder once, not again.
            require_attributes: Attribute words of the object (``green`` of ``green apple``)
                fail closed: only a remembered instance memory knows to carry them is a
                candidate, and when memory holds instances but none is known to carry them the
                goal blocks and says why (it is not explored for: an inspection records names,
                not appearance). False (a model that judges appearance plans): instances whose
                attributes are unknown stay candidates. Instances known to contradict them
                never are.
        """
        failed = list(failed)
        mention = self.mention_of(spec)
        if mention is None:
            return Blocked(goal_id, spec, "the goal names no object")
        if spec.kind is GoalKind.PLACE and robot.holding is not None:
            mention = robot.holding
        fixtures_only = spec.kind in (GoalKind.OPEN, GoalKind.CLOSE)
        source = spec.source if spec.kind in (GoalKind.FIND, GoalKind.PICK) else None
        # where/which questions take the object's description too, so an unknown "croissant
        # next to the pineapple" is explored for rather than answered with another croissant
        finding = spec.kind in (GoalKind.FIND, GoalKind.PICK) or (
            spec.kind is GoalKind.QUESTION and spec.question_kind in ("where", "which"))
        query = RecallQuery(obj=mention, source=source, fixtures_only=fixtures_only,
                            near=spec.near if finding else None,
                            avoid=spec.avoid if finding else None,
                            require_attributes=require_attributes)
        try:
            found = self.recall.recall_described(world, query, failed)
        except RecallError as err:
            return Blocked(goal_id, spec, str(err))
        recalled = found.candidates
        if query.require_attributes and not recalled and found.described and found.misses:
            unmet = self.recall.attributes.unmet(found.described, found.misses)
            closer = self._look_to_learn(world, found.unknown, moved_now, inspected_now)
            if closer is not None:
                node_id, holder = closer
                return Exploration(goal_id, spec, holder,
                                   f"{unmet}; look at {node_id} closer in {holder}",
                                   (holder,), found.misses)
            return Blocked(goal_id, spec, unmet, found.misses)
        admissible, dropped, content_hints = self._admissible(
            spec, recalled, world, failed, mention=mention, source=source)

        def explore_more(why: str) -> GroundingResult:
            found = self.explore(goal_id, spec, world, failed, robot, visited=visited,
                                 dropped=tuple(dropped), inspected=inspected,
                                 inspected_now=inspected_now)
            if isinstance(found, Exploration):
                return replace(found, reason=f"{why}; {found.reason}")
            return Blocked(goal_id, spec, f"{why}; {found.reason}", tuple(dropped))

        narrowed = self._as_described(goal_id, spec, world, admissible, dropped,
                                      require_attributes=require_attributes,
                                      explore_more=explore_more, moved_now=moved_now)
        if not isinstance(narrowed, list):
            return narrowed
        admissible = narrowed
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
                                dropped=tuple(dropped), inspected=inspected,
                                inspected_now=inspected_now)
        chosen = _choose(spec, admissible, chooser)
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
            holder=self.holder_of(world, chosen) if spec.kind is GoalKind.FIND else None,
        )

    def _look_to_learn(self, world: SceneGraphState, unknown: Sequence[str],
                       moved_now: Collection[str], inspected_now: Collection[str]
                       ) -> tuple[str, str] | None:
        """(node, holder) of the first node whose asked look memory does not know that a
        closer look may tell: its holder not yet looked into (a fixture that opens) or
        visited (a surface) during this instruction; None when every such look was had, or
        when the planner reads no keyframes (a look would add nothing it can read)."""
        if self.seen_well is None:
            return None
        for node_id in unknown:
            node = world.nodes.get(node_id)
            if node is None:
                continue
            holder = self.holder_of(world, Candidate(node_id, node.label, node.parent,
                                                     node.parent_relation, 0.0, ()))
            fixture = world.nodes.get(holder or "")
            if holder is None or fixture is None or _prop(fixture, "locked") is True:
                continue
            opens = self.registry.config.is_openable_label(fixture.label)
            if holder not in (inspected_now if opens else moved_now):
                return node_id, holder
        return None

    def _at(self, world: SceneGraphState, node_id: str, places: Collection[str]) -> bool:
        """Whether a remembered object stands at one of ``places`` now: its parent is one,
        or (for one without a remembered parent, as perception alone leaves an object on a
        counter) the fixture :meth:`holder_of` places it in is; not when memory holds that it
        left its last place."""
        node = world.nodes[node_id]
        if _prop(node, AT_LAST_PLACE) is False:
            return False
        if node.parent in places:
            return True
        cand = Candidate(node_id, node.label, node.parent, node.parent_relation, 0.0, ())
        return self.holder_of(world, cand) in places

    def _alike(self, goal_id: str, spec: GoalSpec, world: SceneGraphState,
               admissible: Sequence[Candidate], dropped: list[tuple[str, str]], *,
               require_attributes: bool, explore_more: Callable[[str], GroundingResult],
               moved_now: Collection[str] = ()) -> list[Candidate] | GroundingResult:
        """The admissible candidates of a ``looks like`` goal: the one that looks most like
        the reference (never the reference itself). A planner that judges appearance itself
        (``require_attributes`` False) gets every other candidate. Otherwise, a reference no
        keyframe shows well enough is looked at first, from in front of its holder (once an
        instruction); when no other candidate is remembered or the matcher abstains,
        ``explore_more`` says where to look next (or blocks); a reference memory does not hold,
        or holds several of equally well named (a label beats a synonym), blocks."""
        like = spec.like or ""
        refs = self.recall.resolve(world, like)
        if spec.like_at is not None:
            places = set(self.recall.resolve(world, spec.like_at))
            refs = [r for r in refs if self._at(world, r, places)]
            if not refs:
                # "the coffee tin on the counter" when the cameras call it "coffee": at the
                # named place, a name in part is enough
                refs = [r for r in self.recall.resolve(world, like, partial=True)
                        if self._at(world, r, places)]
        if len(refs) > 1:
            # the thing the reference names beats what only a synonym names: "the cup on the
            # counter" is the cup there, not the mug beside it
            scores = {r: (ev.score if (ev := self.recall.matches(like, world.nodes[r]))
                          is not None else 0.0) for r in refs}
            refs = [r for r in refs if scores[r] >= max(scores.values())]
        if len(refs) > 1:
            # a node the cameras named so only now and then where a node of a synonym stands
            # that they named more often is that other thing (a mug seen a few times as a cup)
            majority = [r for r in refs if self.recall.stronger_reading(world, r) is None]
            refs = majority or refs
        where = f"'{like}'" + (f" on or in the {spec.like_at}" if spec.like_at else "")
        if len(refs) != 1:
            why = ("is not in memory" if not refs else
                   f"is ambiguous: memory holds {', '.join(refs)}")
            return Blocked(goal_id, spec, f"the reference {where} {why}", tuple(dropped))
        reference = refs[0]
        others = [c for c in admissible if c.node_id != reference]
        for cand in others:
            if cand.content_item is not None:
                dropped.append((cand.node_id, f"'{cand.content_item}' is only listed; its "
                                "look was not recorded"))
        others = [c for c in others if c.content_item is None and c.node_id in world.nodes]
        if not require_attributes:
            return others
        if not others:
            return explore_more(f"no other '{spec.obj}' than the reference {reference} is "
                                "remembered")
        if self.likeness is None:
            return explore_more("likeness cannot be judged without keyframes")
        ref_node = world.nodes[reference]
        if self.seen_well is not None and not self.seen_well(ref_node):
            holder = self.holder_of(world, Candidate(reference, ref_node.label, ref_node.parent,
                                                     ref_node.parent_relation, 0.0, ()))
            if holder is not None and holder not in moved_now:
                return Exploration(
                    goal_id, spec, holder,
                    f"no keyframe shows the reference {reference} well enough to compare "
                    f"with; look at it from in front of {holder}", (holder,), tuple(dropped))
        answer = self.likeness(world.nodes[reference],
                               [world.nodes[c.node_id] for c in others])
        if answer.best is None:
            dropped.extend((c.node_id, f"not known to look like {reference}") for c in others)
            return explore_more(f"compared with {reference}: {answer.reason}")
        return [c for c in others if c.node_id == answer.best]

    def _as_described(self, goal_id: str, spec: GoalSpec, world: SceneGraphState,
                      admissible: list[Candidate], dropped: list[tuple[str, str]], *,
                      require_attributes: bool,
                      explore_more: Callable[[str], GroundingResult],
                      moved_now: Collection[str] = ()
                      ) -> list[Candidate] | GroundingResult:
        """The admissible candidates that also fit what the goal says of the object beyond
        its name: that it looks like a reference (:meth:`_alike`), that it has room to grasp
        (:meth:`_roomy`); or where to look next when none does."""
        if spec.like is not None and spec.kind is GoalKind.FIND:
            liked = self._alike(goal_id, spec, world, admissible, dropped,
                                require_attributes=require_attributes, explore_more=explore_more,
                                moved_now=moved_now)
            if not isinstance(liked, list):
                return liked
            admissible = liked
        if spec.clear and spec.kind in (GoalKind.FIND, GoalKind.PICK) and admissible:
            admissible = self._roomy(world, admissible, dropped)
            if not admissible:
                return explore_more(f"no remembered '{self.mention_of(spec)}' is known to have "
                                    "room beside it for the fingers "
                                    f"({self.registry.config.clutter.finger_gap_m:.2f} m)")
        return admissible

    def _roomy(self, world: SceneGraphState, admissible: Sequence[Candidate],
               dropped: list[tuple[str, str]]) -> list[Candidate]:
        """The candidates of a goal that asks for room to grasp: those whose remembered box has
        ``clutter.finger_gap_m`` or more to every neighbour on its level and nothing in front
        of it in the hand's way (:func:`mimir_planner.clutter.room_around`), roomiest first.
        The others go to ``dropped`` with why; an item only listed in a fixture's contents, or
        a node without a usable box, cannot be judged and is dropped too (fail closed)."""
        config = self.registry.config
        needed = config.clutter.finger_gap_m
        rooms = rooms_around(world, admissible, config.clutter, config.is_fixture_label,
                             self.viewpoint)
        roomy: list[tuple[float, int, Candidate]] = []
        for order, cand in enumerate(admissible):
            if cand.node_id not in rooms or cand.content_item is not None:
                dropped.append((cand.node_id, f"'{cand.content_item or cand.node_id}' is only "
                                "listed; the space around it was not seen"))
                continue
            room = rooms[cand.node_id]
            if room is None:
                dropped.append((cand.node_id, "no remembered box to judge the space around it"))
            elif room.usable < needed:
                dropped.append((cand.node_id, room.why_short(needed)))
            else:
                roomy.append((-room.usable, order, cand))
        roomy.sort(key=lambda item: (item[0], item[1]))
        return [cand for _, _, cand in roomy]

    def _admissible(
        self, spec: GoalSpec, recalled: Sequence[Candidate], world: SceneGraphState,
        failed: Sequence[FailedBinding], *, mention: str, source: str | None,
    ) -> tuple[list[Candidate], list[tuple[str, str]], list[Candidate]]:
        """Split recalled candidates into (admissible, dropped with why, content hints)."""
        dropped: list[tuple[str, str]] = []
        admissible: list[Candidate] = []
        content_hints: list[Candidate] = []
        contradicted = (self.contradicted_sources(mention, world, failed)
                        if spec.kind is GoalKind.FIND else set())
        for cand in recalled:
            why = self._illegal(spec, cand, world)
            if why is None and source is not None:
                why = self._source_conflict(world, cand, source)
            if why is None and contradicted:
                holder = self.holder_of(world, cand)
                if holder in contradicted:
                    why = f"believed in {holder}, contradicted as its source"
            if why is not None:
                dropped.append((cand.node_id, why))
                if cand.content_item is not None and spec.kind is GoalKind.PICK:
                    content_hints.append(cand)
                continue
            admissible.append(cand)
        return admissible, dropped, content_hints

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
        inspected: Collection[str] = (),
        inspected_now: Collection[str] = (),
    ) -> Exploration | Blocked:
        """Explore_e: the next fixture to look into for the goal's object, or Blocked.

        Skipped: fixtures remembered locked, inspected during this instruction, inspected
        without the object as the goal describes it (recorded contents, or an inspection known
        from history), contradicted as the object's source, failing to open twice since their
        last successful open, and surfaces already visited. The rest
        are ranked: a named source first, then fixtures that open, where the robot stands,
        unvisited before visited, nearest first (from where the robot is when its position is
        known: the robot may have been moved since its last move). When none is left, a fixture
        that opens and was looked into in an earlier instruction without the object is looked
        into again, nearest first (someone may have put the object there since); Blocked only
        after that.
        """
        mention = self.mention_of(spec) or ""
        here = world.nodes.get(robot.last_moved_to or "")
        contradicted = self.contradicted_sources(mention, world, failed)
        contradicted |= {f.object_id for f in failed
                         if canon(f.object_id) == canon(mention) and f.source_id is None}
        skipped: list[str] = []
        ranked: list[tuple[tuple[object, ...], str]] = []
        # fixtures that open, looked into in an earlier instruction without the object: things
        # move between instructions, so they are looked into again once nothing else is left
        looked_before: list[tuple[tuple[object, ...], str]] = []
        for node in world.nodes.values():
            if not self.registry.is_fixture(node):
                continue
            openable = _prop(node, "openable") is True or (
                _prop(node, "openable") is not False
                and self.registry.config.is_openable_label(node.label)
            )
            if _prop(node, "locked") is True:
                skipped.append(f"{node.node_id} (locked)")
                continue
            if node.node_id in inspected_now:
                skipped.append(f"{node.node_id} (inspected in this instruction)")
                continue
            looked = (self.contents_known(node) or node.node_id in inspected
                      or inspected_in_history(node))
            if looked and not self.holds_wanted(world, node, spec, mention):
                described = " as described" if spec.near or spec.avoid else ""
                skipped.append(f"{node.node_id} (inspected, no {mention}{described})")
                if openable and node.node_id not in contradicted \
                        and open_failures_since_success(node) < 2:
                    looked_before.append(((round(_travel(robot, here, node), 3), node.node_id),
                                          node.node_id))
                continue
            if node.node_id in contradicted:
                skipped.append(f"{node.node_id} (contradicted)")
                continue
            if open_failures_since_success(node) >= 2:
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
                round(_travel(robot, here, node), 3),
                node.node_id,
            )
            ranked.append((key, node.node_id))
        if not ranked and looked_before:
            looked_before.sort()
            order = tuple(nid for _, nid in looked_before)
            reason = (f"'{mention}' is nowhere else; look again into {order[0]}, which held "
                      "none when looked into before (things move)")
            return Exploration(goal_id, spec, order[0], reason, order, dropped)
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


def _choose(spec: GoalSpec, admissible: Sequence[Candidate], chooser: Chooser | None) -> Candidate:
    """The first admissible candidate, or the model's choice among several when it names one."""
    chosen = admissible[0]
    if chooser is None or len(admissible) < 2:
        return chosen
    pick = chooser(spec, tuple(admissible))
    match = [c for c in admissible if c.node_id == pick]
    if pick is not None and not match:
        LOG.warning("model chose %r outside the candidates; kept %s", pick, chosen.node_id)
    return match[0] if match else chosen
