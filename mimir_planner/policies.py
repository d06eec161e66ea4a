"""Planner policies Pi: the VLM planner and the offline planner, behind one interface.

A policy receives a :class:`PlanningContext` (goal, grounding, history, primitives, rendered
scene graph, current image with Set-of-Mark overlays, retrieved keyframes with their reasons)
and returns answer text in the messymem.md B.3 schema; the session parses it strictly and
executes only the first step. The offline planner answers from memory and grounding alone, so
the simulation runs without a model; it is named ``offline-planner`` in logs and answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from mimir_memory.graph import SceneGraphState, SceneNode
from mimir_memory.task import Goal
from mimir_planner.answers import answer_question
from mimir_planner.grounding import Blocked, Exploration, GroundedGoal, GroundingResult
from mimir_planner.instructions import GoalKind, GoalSpec
from mimir_planner.overlay import Mark
from mimir_planner.primitives import PrimitiveRegistry, RobotContext
from mimir_planner.prompted import PromptedVlm
from mimir_planner.reasoning.prompts import PromptLibrary
from mimir_planner.reasoning.vlm import ImagePart, TextPart, VlmBackend
from mimir_planner.recall import Candidate, GoalRecall
from mimir_planner.retrieval import RetrievedFrame

LOG = logging.getLogger(__name__)

OFFLINE_PLANNER_NAME = "offline-planner"


@dataclass(frozen=True)
class HistoryEntry:
    """One executed (or refused, or denied) step, as the planner reads it back.

    Attributes:
        goal_id: Goal the step served.
        primitive: Abstract primitive (``finish`` for a rejected or accepted empty plan).
        target: Target node id.
        success: Verified success (what memory may rely on).
        detail: Outcome text or refusal reason.
        code: The executor's outcome code (``OPENED``, ``MISSED_GRASP``...), when known.
        reported: What the executor itself reported before verification (None when the
            step never reached it).
        stamp: When the outcome was observed (s).
        executed: Whether the step reached the executor (False for refusals and denials).
    """

    goal_id: str | None
    primitive: str
    target: str
    success: bool
    detail: str = ""
    code: str = ""
    reported: bool | None = None
    stamp: float | None = None
    executed: bool = False

    @property
    def unverified(self) -> bool:
        """The executor reported success but the verified outcome is a failure."""
        return self.executed and self.reported is True and not self.success

    def line(self, number: int) -> str:
        """``3. open(cab_1) FAILED - locked``."""
        status = "SUCCESS" if self.success else (
            "UNVERIFIED" if self.unverified else "FAILED")
        tail = f" - {self.detail}" if self.detail else ""
        return f"{number}. [{self.goal_id or '-'}] {self.primitive}({self.target}) {status}{tail}"


@dataclass(frozen=True)
class PlanningContext:
    """Everything one planner call receives."""

    goal: Goal
    goal_text: str
    spec: GoalSpec | None
    grounding: GroundingResult | None
    history: tuple[HistoryEntry, ...]
    robot: RobotContext
    world: SceneGraphState
    scene_graph: str
    fixtures: str
    primitives: str
    retrieved: tuple[RetrievedFrame, ...] = ()
    retrieved_images: tuple[np.ndarray, ...] = ()
    retrieval_s: float | None = None
    """Wall time (s) the keyframe retrieval of this call took, images loaded; None when the
    planner reads no keyframes."""
    image: np.ndarray | None = None
    marks: tuple[Mark, ...] = ()
    warnings: tuple[str, ...] = ()
    believed_open: frozenset[str] = frozenset()
    """Fixtures believed open (memory, or a recent open the executor reported)."""
    inspected_now: frozenset[str] = frozenset()
    """Fixtures inspected successfully during the current instruction."""
    exhausted: frozenset[tuple[str, str]] = frozenset()
    """(primitive, target) pairs whose retry allowance is spent in this instruction."""
    seen_now: frozenset[str] = frozenset()
    """Nodes perception sighted during the current instruction (observed often enough)."""
    glimpsed_now: frozenset[str] = frozenset()
    """Nodes perception observed during the current instruction too few times to count."""
    approached_now: frozenset[str] = frozenset()
    """Nodes the robot moved to successfully during the current instruction."""


class PlannerPolicy(Protocol):
    """Pi: proposes a plan as answer text."""

    @property
    def name(self) -> str:
        """Name for logs."""
        ...

    def propose(self, ctx: PlanningContext) -> str:
        """Answer text in the B.3 schema.

        Raises:
            ReasoningError: (subclasses of) when the model cannot answer.
        """
        ...


def _step(number: int, action: str, target: str, reasoning: str) -> dict[str, Any]:
    return {"step": number, "action": action, "target_object": target, "reasoning": reasoning}


def _answer(plan: Sequence[dict[str, Any]], reasoning: Sequence[str],
            warnings: Sequence[str] = ()) -> str:
    steps = [{**s, "step": i + 1} for i, s in enumerate(plan)]
    return json.dumps({"plan": steps, "reasoning": list(reasoning), "warnings": list(warnings)})


class OfflinePlanner:
    """Plans from memory and grounding, without a model.

    Exploration: move to the fixture, open it unless it is believed open (memory, or an open
    the executor reported even when the analyzer could not verify it), inspect it. A failed
    open is tried again only while the session's retry allowance lasts; after that grounding
    has recorded the failed binding and points elsewhere. Grounded goals: a found object is
    confirmed by inspecting its holder once per instruction (``find_requires_inspection``), or
    by a sighting on a surface (an object only glimpsed is approached once first), then
    reported with an empty plan; answers come from memory; otherwise move to the place
    of interaction first, open a closed source or target, then act.
    """

    def __init__(self, registry: PrimitiveRegistry, recall: GoalRecall) -> None:
        self.registry = registry
        self.recall = recall

    @property
    def name(self) -> str:
        return OFFLINE_PLANNER_NAME

    def _is_open(self, node: SceneNode, ctx: PlanningContext | None = None) -> bool:
        if ctx is not None and node.node_id in ctx.believed_open:
            return True
        openable = node.properties.get("openable")
        return bool(openable is not None and openable.is_opened)

    def _opens(self, node: SceneNode) -> bool:
        openable = node.properties.get("openable")
        if openable is not None and openable.value is False:
            return False
        return (openable is not None and openable.value is True) or \
            self.registry.config.is_openable_label(node.label)

    def _look_inside(self, ctx: PlanningContext, fixture: str, why: str) -> list[dict[str, Any]]:
        node = ctx.world.nodes[fixture]
        plan: list[dict[str, Any]] = []
        if ctx.robot.last_moved_to != fixture:
            plan.append(_step(0, "move_to", fixture, f"go to {fixture}: {why}"))
        if self._opens(node) and not self._is_open(node, ctx):
            plan.append(_step(0, "open", fixture, f"open {fixture} to see inside"))
        plan.append(_step(0, "inspect", fixture, f"record what {fixture} holds"))
        return plan

    def _reach(self, ctx: PlanningContext, node_id: str, via: str | None) -> list[dict[str, Any]]:
        """Move to the node (or its source fixture) and open that fixture when closed."""
        world = ctx.world
        place = via if via is not None and via in world.nodes else node_id
        plan: list[dict[str, Any]] = []
        last = ctx.robot.last_moved_to
        if last not in (place, node_id):
            plan.append(_step(0, "move_to", place, f"reach {node_id} at {place}"))
        holder = world.nodes[place]
        if place != node_id and self._opens(holder) and not self._is_open(holder, ctx):
            plan.append(_step(0, "open", place, f"open {place} to reach {node_id}"))
        return plan

    def plan(self, ctx: PlanningContext) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        """(plan, reasoning, warnings) for the context."""
        grounding = ctx.grounding
        spec = ctx.spec
        if spec is None:
            return [], [], [f"{OFFLINE_PLANNER_NAME} cannot interpret a free-form instruction"]
        if grounding is None or isinstance(grounding, Blocked):
            why = grounding.reason if grounding is not None else "no grounding"
            return [], [], [why]
        if isinstance(grounding, Exploration):
            plan = self._look_inside(ctx, grounding.fixture, grounding.reason)
            return plan, [grounding.reason], []
        return self._grounded(ctx, grounding, spec)

    def _grounded(
        self, ctx: PlanningContext, grounded: GroundedGoal, spec: GoalSpec
    ) -> tuple[list[dict[str, Any]], list[str], list[str]]:
        cand = grounded.candidate
        evidence = "; ".join(e.detail for e in grounded.evidence)
        if spec.kind is GoalKind.FIND:
            holder = grounded.holder
            if self._closer_look(ctx, holder, cand):
                why = (f"{cand.node_id} was only glimpsed in this instruction; go to it and "
                       "look before reporting it found")
                return [_step(0, "move_to", cand.node_id, why)], [why], []
            if self._must_confirm(ctx, holder, cand):
                assert holder is not None
                why = (f"memory places '{spec.obj}' in {holder} ({evidence}); inspect it to "
                       "discover the object in this instruction")
                return self._look_inside(ctx, holder, why), [why], []
            where = (f"inside {cand.node_id}" if cand.content_item is not None
                     else f"{cand.node_id}" + (f" in {cand.parent}" if cand.parent else ""))
            seen = (f"; inspected {holder}" if holder in ctx.inspected_now else
                    "; seen during this instruction" if cand.node_id in ctx.seen_now else "")
            return [], [f"Found the {spec.obj}: {where} ({evidence}{seen})."], []
        if spec.kind is GoalKind.QUESTION:
            text = answer_question(spec, ctx.world, self.recall)
            if text is not None:
                return [], [text], []
            node = ctx.world.nodes[cand.node_id]
            if self.registry.is_fixture(node):
                return self._look_inside(ctx, cand.node_id, "memory lacks the answer"), [
                    f"look into {cand.node_id} to answer"], []
            return [], [], ["memory does not hold the answer"]
        if spec.kind in (GoalKind.OPEN, GoalKind.CLOSE):
            node = ctx.world.nodes[cand.node_id]
            done = self._is_open(node) if spec.kind is GoalKind.OPEN else (
                node.properties.get("openable") is not None and not self._is_open(node, ctx))
            if done:
                return [], ["Goal already achieved."], []
            plan = self._reach(ctx, cand.node_id, None)
            verb = spec.kind.value
            plan.append(_step(0, verb, cand.node_id, f"{verb} {cand.node_id}"))
            return plan, [evidence], []
        if spec.kind is GoalKind.GO_TO:
            if ctx.robot.last_moved_to == cand.node_id:
                return [], ["Goal already achieved."], []
            return [_step(0, "move_to", cand.node_id, evidence)], [evidence], []
        if spec.kind is GoalKind.PICK:
            if ctx.robot.holding == cand.node_id:
                return [], ["Goal already achieved."], []
            via = grounded.source if grounded.source in ctx.world.nodes else None
            plan = self._reach(ctx, cand.node_id, via)
            plan.append(_step(0, "pick", cand.node_id, f"pick {cand.node_id} ({evidence})"))
            return plan, [evidence], []
        target = grounded.target
        if target is None:
            return [], [], ["no placement target"]
        if ctx.robot.holding is None:
            # the hand let the thing go short of the place (it fell): pick it up again where
            # memory last saw it; the place follows once the hand holds it
            plan = self._reach(ctx, cand.node_id, None)
            plan.append(_step(0, "pick", cand.node_id,
                              f"pick {cand.node_id} again to place it ({evidence})"))
            return plan, [evidence], []
        plan = self._reach(ctx, target, None)
        tnode = ctx.world.nodes[target]
        if self._opens(tnode) and not self._is_open(tnode, ctx):
            plan.append(_step(0, "open", target, f"open {target} to place inside"))
        plan.append(_step(0, "place", target, f"place {ctx.robot.holding} on/in {target}"))
        return plan, [evidence], []

    def _accepts_sighting(self, ctx: PlanningContext, holder: str) -> bool:
        """Whether seeing an object held by ``holder`` is enough to call it found."""
        return (self.registry.config.loop.find_accepts_sighting
                or not self._opens(ctx.world.nodes[holder]))

    def _closer_look(self, ctx: PlanningContext, holder: str | None, cand: Candidate) -> bool:
        """Whether a find should first move to its candidate: perception only glimpsed it in
        this instruction, a sighting would complete the find, and the robot has not been to
        it yet (after one visit the holder's inspection decides)."""
        if not self._must_confirm(ctx, holder, cand):
            return False
        assert holder is not None
        node_id = cand.node_id
        return (cand.content_item is None and node_id in ctx.glimpsed_now
                and node_id not in ctx.approached_now and node_id != ctx.robot.last_moved_to
                and self._accepts_sighting(ctx, holder))

    def _must_confirm(self, ctx: PlanningContext, holder: str | None,
                      cand: Candidate | None = None) -> bool:
        """Whether a found object's holder still has to be inspected in this instruction."""
        if holder is None or holder not in ctx.world.nodes:
            return False
        loop = self.registry.config.loop
        if not loop.find_requires_inspection:
            return False
        if (cand is not None and cand.content_item is None and cand.node_id in ctx.seen_now
                and self._accepts_sighting(ctx, holder)):
            return False  # seen now; on a surface there is nothing more to look into
        return holder not in ctx.inspected_now and not holder_sealed(
            ctx.world.nodes[holder], ctx.believed_open)

    def propose(self, ctx: PlanningContext) -> str:
        plan, reasoning, warnings = self.plan(ctx)
        return _answer(plan, [f"{OFFLINE_PLANNER_NAME}: {r}" if i else r
                              for i, r in enumerate(reasoning)], warnings)


def holder_sealed(node: SceneNode, believed_open: frozenset[str]) -> bool:
    """A holder that cannot be looked into: remembered locked and not believed open."""
    locked = node.properties.get("locked")
    return bool(locked is not None and locked.value is True
                and node.node_id not in believed_open)


def grounding_text(grounding: GroundingResult | None) -> str:
    """Compact description of the grounding result for the prompt."""
    if grounding is None:
        return "none"
    if isinstance(grounding, GroundedGoal):
        return json.dumps({
            "grounded": grounding.candidate.node_id,
            "source": grounding.source,
            "holder": grounding.holder,
            "target": grounding.target,
            "candidates": [c.to_dict() for c in grounding.candidates],
            "dropped": [list(d) for d in grounding.dropped],
        })
    if isinstance(grounding, Exploration):
        return json.dumps({"explore": grounding.fixture, "order": list(grounding.order),
                           "reason": grounding.reason})
    return json.dumps({"blocked": grounding.reason})


class VlmPlanner(PromptedVlm):
    """Pi through a VLM backend and the ``planner`` prompt template."""

    def __init__(self, backend: VlmBackend, prompts: PromptLibrary, prompt: str = "planner",
                 robot_description: str = "a mobile manipulator") -> None:
        super().__init__(backend, prompts)
        self.prompt = prompt
        self.robot_description = robot_description

    def render(self, ctx: PlanningContext) -> str:
        """The prompt text for a context."""
        history = "\n".join(h.line(i + 1) for i, h in enumerate(ctx.history)) or "(none)"
        retrieved = "\n".join(
            f"{i + 1}. {f.entry.trigger} {f.entry.camera} {f.frame_id[:12]}: {f.reason}"
            for i, f in enumerate(ctx.retrieved)
        ) or "(none)"
        marks = ", ".join(m.node_id for m in ctx.marks) or "(no overlay)"
        return self.prompts.render(self.prompt, {
            "robot": self.robot_description,
            "goal": ctx.goal_text,
            "execution_history": history,
            "primitives": ctx.primitives,
            "fixtures": ctx.fixtures,
            "scene_graph": ctx.scene_graph,
            "grounding": grounding_text(ctx.grounding),
            "memory_frames": retrieved,
            "visible_marks": marks,
            "last_moved_to": ctx.robot.last_moved_to or "nothing yet",
            "holding": ctx.robot.holding or "nothing",
            "warnings": "\n".join(ctx.warnings) or "(none)",
        })

    def propose(self, ctx: PlanningContext) -> str:
        parts: list[TextPart | ImagePart] = [TextPart(self.render(ctx))]
        if ctx.image is not None:
            parts.append(TextPart("Current view (Set-of-Mark labels are scene graph ids):"))
            parts.append(ImagePart(ctx.image, name="current"))
        for i, (frame, image) in enumerate(zip(ctx.retrieved, ctx.retrieved_images,
                                               strict=False)):
            parts.append(TextPart(
                f"Memory frame {i + 1} ({frame.entry.trigger}, {frame.entry.camera}): "
                f"{frame.reason}"))
            parts.append(ImagePart(image, name=f"memory_{i + 1}"))
        return self.ask(parts, "planner")
