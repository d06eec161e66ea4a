"""Closed-loop planning session (mimir.md Algorithm 1, messymem.md §3.4).

Instructions arrive one at a time and become goals in task memory without resetting memory.
Each planner call: take the active goal, recall and ground it (or choose a fixture to explore,
or block it), retrieve keyframes, render the scene graph and the current image with
Set-of-Mark overlays, ask the policy for a plan, validate only the first step against memory
and the embodiment's preconditions (replanning once after a refusal, then blocking the goal),
wait for the operator gate, execute it through an :class:`Executor`, and update task memory
from the feedback. A goal completes only when task memory finds its postcondition established
(mimir.md eq. 6); an empty plan completes a goal only when memory supports it (a found object,
a literal answer, a state that already holds). World memory is written by whoever owns it (the
interaction analyzer in the robot stack, the executor in tests); the session only reads it.

A host drives the session through :meth:`PlannerSession.run` (the loop) or
:meth:`PlannerSession.run_instruction` (one instruction from its text to its report, what the
planner node does for every ``run_task`` goal). It plugs in an :class:`Executor` and, through
:class:`RunHooks`, only what it alone knows: whether to cancel, the current camera view, and what
to tell its client after each planner call. A run stops on a cancel, a spent budget, an operator
denial, or a model, executor or memory failure; :class:`RunStop` says which.

Robustness rules the session enforces for any policy (offline or model):

* Bounded retries. Within one instruction a primitive that keeps failing on the same target is
  tried at most ``1 + max_retries`` times (failures whose outcome code is persistent, such as
  a locked fixture, are never retried). When the allowance is spent the object-source binding
  is recorded as failed in task memory (F_t), so grounding explores elsewhere or blocks, and a
  further attempt of the same step is refused with the reason.
* Open-state belief. A fixture counts as open when the latest evidence says so: memory's
  ``openable.is_opened``, a recorded successful open, or an open the executor reported as
  done even though the analyzer could not verify it. Planners inspect such a fixture instead
  of opening it again (an already open door cannot be grasped by its handle again).
* Discovery. With ``find_requires_inspection`` a ``find`` goal completes only after the
  fixture believed to hold the object (its *holder*) was inspected during the current
  instruction; memory still decides where to look, so nothing else is re-explored. This is a
  deliberate reading of the papers: messymem's planner prompt counts "find" among the
  informational verbs a memory lookup satisfies, but its evaluation judges a find by the
  discovery in the instruction's execution log (appendix A.1: success from environment state
  and logs, never the planner's word), remembered contents may be stale, and perception may
  have glimpsed the object through an open door no inspection confirmed. So questions
  (where/which/what/how many/is) keep the informational rule and answer from memory, while a
  find confirms. Exceptions, where memory is all there is: a holder remembered locked and not
  believed open, and an object no fixture holds. ``find_requires_inspection: false`` restores
  the plain informational rule.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import cv2
import numpy as np

from mimir.labels import label_key
from mimir.paths import config_file
from mimir_memory.errors import MemoryStoreError
from mimir_memory.events import Evidence, Source
from mimir_memory.keyframes import KeyframeStore
from mimir_memory.task import (
    Answered,
    At,
    Effect,
    EffectKind,
    EvalContext,
    Feedback,
    Found,
    Goal,
    GoalStatus,
    Holding,
    Inside,
    IsOpen,
    On,
    Predicate,
    TaskMemory,
)
from mimir_memory.world import WorldMemory
from mimir_perception.appearance import load_appearance_config
from mimir_planner.answers import (
    NamedEntity,
    candidate_entity,
    mentioned_entities,
    question_entities,
)
from mimir_planner.clutter import clearance_chooser, rooms_around
from mimir_planner.config import PlannerConfig
from mimir_planner.errors import (
    ActionRefusedError,
    InstructionError,
    OverlayError,
    PlanAnswerError,
    PlannerError,
    RetrievalError,
)
from mimir_planner.gate import OperatorGate
from mimir_planner.grounding import (
    Blocked,
    Chooser,
    Exploration,
    GroundedGoal,
    Grounder,
    GroundingResult,
    history_primitive,
)
from mimir_planner.instructions import GoalKind, GoalSpec, parse_instruction
from mimir_planner.looks import FrameLook, NodeLooks
from mimir_planner.outcomes import fixture_opens
from mimir_planner.overlay import Mark, draw_set_of_marks
from mimir_planner.plan_schema import PlanAnswer, parse_plan_answer
from mimir_planner.policies import (
    OFFLINE_PLANNER_NAME,
    HistoryEntry,
    OfflinePlanner,
    PlannerPolicy,
    PlanningContext,
    holder_sealed,
)
from mimir_planner.primitives import ExecutableStep, PrimitiveRegistry, RobotContext
from mimir_planner.reasoning.errors import ReasoningError
from mimir_planner.recall import (
    AttributeTable,
    CategoryTable,
    EvidenceKind,
    GoalRecall,
    SynonymTable,
    TextEmbedder,
    canon,
)
from mimir_planner.retrieval import (
    KeyframeRetriever,
    OfflineRetrievalReasoner,
    RetrievalQuery,
    RetrievedFrame,
    task_terms,
)
from mimir_planner.runs import (
    CLOSED_CODES,
    ExecutionOutcome,
    Executor,
    ExecutorUnavailableError,
    GoalOutcome,
    InstructionReport,
    Observation,
    RunHooks,
    RunReport,
    RunStop,
    StepRecord,
    SubmitResult,
    failure_kind,
)

LOG = logging.getLogger(__name__)


@dataclass
class _Deferred:
    spec: GoalSpec
    explore_goal: str
    #: compile the goal even when the exploration blocked (it looked for a better binding, not
    #: for the only one)
    fallback: bool = False


@dataclass
class _GoalInfo:
    spec: GoalSpec | None
    text: str


class PlannerSession:
    """Task memory in use: instructions -> goals -> grounded, gated, executed first steps."""

    def __init__(
        self,
        world: WorldMemory,
        task: TaskMemory,
        config: PlannerConfig,
        *,
        keyframes: KeyframeStore | None = None,
        policy: PlannerPolicy | None = None,
        retriever: KeyframeRetriever | None = None,
        gate: OperatorGate | None = None,
        embedder: TextEmbedder | None = None,
        chooser: Chooser | None = None,
        embodiment: str = "",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.world = world
        self.task = task
        self.config = config
        self.registry = PrimitiveRegistry(config, embodiment)
        self.recall = GoalRecall(
            config.recall,
            SynonymTable(config.synonyms),
            is_fixture=config.is_fixture_label,
            embedder=embedder,
            categories=CategoryTable(config.categories),
            attributes=AttributeTable(config.attributes),
            brands=CategoryTable(config.brands),
        )
        self.grounder = Grounder(self.recall, self.registry)
        self.policy: PlannerPolicy = policy or OfflinePlanner(self.registry, self.recall)
        self.keyframes = keyframes
        self.retriever = retriever or (
            KeyframeRetriever(keyframes, config.retrieval) if keyframes is not None else None
        )
        if keyframes is not None:
            self._see_with(keyframes)
        self.gate = gate or OperatorGate(config.gate)
        self.chooser = chooser or clearance_chooser(lambda: self.world.state, config.clutter,
                                                    config.is_fixture_label,
                                                    lambda: self.grounder.viewpoint)
        counter = itertools.count(1)
        self._clock = clock or (lambda: float(next(counter)))
        self.history: list[HistoryEntry] = []
        self.visited: set[str] = set()
        self.observation: Observation | None = None
        self._goals: dict[str, _GoalInfo] = {}
        self._deferred: list[_Deferred] = []
        self._last_moved_to: str | None = None
        self._step_ids = itertools.count(1)
        self._instruction_start = 0
        self._instruction_stamp: float | None = None
        self._counts_at_submit: dict[str, int] = {}
        self.answer_entities: dict[str, tuple[NamedEntity, ...]] = {}
        """What the answer of each completed goal names (found objects, answers' entities)."""

    # ------------------------------------------------------------------ state
    @property
    def attributes_fail_closed(self) -> bool:
        """Whether grounding lets only instances known to carry an attribute word be the
        target: with the offline planner, which cannot judge appearance (a model-backed
        policy keeps instances of unknown colour or pattern as candidates and looks)."""
        return self.policy.name == OFFLINE_PLANNER_NAME

    def robot(self) -> RobotContext:
        """The precondition context: last move target, held object and, from the current
        observation's camera pose, where the robot is."""
        at = self.task.state.robot_at or self._last_moved_to
        pose = self.observation.camera_to_map if self.observation is not None else None
        position = (float(pose[0, 3]), float(pose[1, 3])) if pose is not None else None
        return RobotContext(last_moved_to=at, holding=self.task.hand, position=position)

    def observe(self, observation: Observation) -> None:
        """Set the current camera observation."""
        if not isinstance(observation, Observation):
            raise InstructionError("observe() needs an Observation")
        self.observation = observation

    def instruction_history(self) -> list[HistoryEntry]:
        """History entries of the current instruction (since the last :meth:`submit`)."""
        return self.history[self._instruction_start:]

    def inspected_now(self) -> frozenset[str]:
        """Fixtures inspected successfully (verified) during the current instruction."""
        return frozenset(h.target for h in self.instruction_history()
                         if h.executed and h.primitive == "inspect" and h.success)

    def moved_now(self) -> frozenset[str]:
        """What the robot moved to successfully during the current instruction."""
        return frozenset(h.target for h in self.instruction_history()
                         if h.executed and h.primitive == "move_to" and h.success)

    def _persistent(self, entry: HistoryEntry) -> bool:
        words = self.config.loop.persistent_failures
        kind = failure_kind(entry)
        if kind in words:
            return True
        if kind in self.config.loop.retried_failures:
            return False  # the executor's signals say the grasp failed, not the fixture
        text = entry.detail.lower()
        return any(re.search(rf"\b{re.escape(w.lower())}\b", text) for w in words)

    def failures_now(self) -> dict[tuple[str, str], list[HistoryEntry]]:
        """Failed executions per (primitive, target) in this instruction since its last success;
        a step that failed on a robot fault (``robot_faults``) says nothing of its target and is
        left out."""
        out: dict[tuple[str, str], list[HistoryEntry]] = {}
        faults = self.config.loop.robot_faults
        for entry in self.instruction_history():
            if not entry.executed or (not entry.success and failure_kind(entry) in faults):
                continue
            key = (entry.primitive, entry.target)
            if entry.success:
                out.pop(key, None)
            else:
                out.setdefault(key, []).append(entry)
        return out

    def exhausted(self) -> dict[tuple[str, str], str]:
        """(primitive, target) pairs not to try again in this instruction, with the reason."""
        limit = self.config.loop.max_retries
        out: dict[tuple[str, str], str] = {}
        for (primitive, target), entries in self.failures_now().items():
            kinds = ", ".join(dict.fromkeys(failure_kind(e) for e in entries))
            persistent = [e for e in entries if self._persistent(e)]
            if persistent:
                out[(primitive, target)] = (
                    f"{primitive}({target}) failed in a way that does not change on retrying "
                    f"({failure_kind(persistent[-1])})")
            elif len(entries) > limit:
                out[(primitive, target)] = (
                    f"{primitive}({target}) failed {len(entries)} time(s) in this instruction "
                    f"({kinds}); the retry allowance of {limit} is spent")
        return out

    def open_beliefs(self) -> dict[str, tuple[bool, str]]:
        """Latest open-state evidence per fixture: (open, where the evidence comes from).

        Evidence, ordered by stamp (the session's own steps after memory at equal stamps):
        memory's ``openable.is_opened`` (or an ``is_open`` property), successful open/close
        records in a node's task history, and this session's executed steps: an open or close
        the executor reported as done (verified or not), and an inspect that failed because
        the fixture was closed.
        """
        world = self.world.state
        latest: dict[str, tuple[tuple[float, int], bool, str]] = {}

        def note(node_id: str, stamp: float | None, order: int, is_open: bool,
                 why: str) -> None:
            key = (-math.inf if stamp is None else float(stamp), order)
            if node_id not in latest or key >= latest[node_id][0]:
                latest[node_id] = (key, is_open, why)

        for node in world.nodes.values():
            if not self.registry.is_fixture(node):
                continue
            openable = node.properties.get("openable")
            if openable is not None and openable.is_opened is not None:
                note(node.node_id, openable.stamp, 0, bool(openable.is_opened),
                     "memory (is_opened)")
            prop = node.properties.get("is_open")
            if prop is not None and isinstance(prop.value, bool):
                note(node.node_id, prop.stamp, 0, prop.value, "memory (is_open)")
            for record in node.task_history:
                primitive = history_primitive(record)
                stamp = record.get("stamp")
                if record.get("success") is True and primitive in ("open", "close"):
                    note(node.node_id, stamp if isinstance(stamp, int | float) else None, 0,
                         primitive == "open", f"recorded successful {primitive}")
        for order, entry in enumerate(self.history, start=1):
            if not entry.executed or entry.target not in world.nodes:
                continue
            done = entry.success or entry.reported is True
            if entry.primitive in ("open", "close") and done:
                why = (f"executor reported {entry.code or entry.primitive}, not verified"
                       if entry.unverified else f"verified {entry.primitive}")
                note(entry.target, entry.stamp, order, entry.primitive == "open", why)
            elif entry.primitive == "inspect" and not entry.success and (
                    failure_kind(entry) in CLOSED_CODES
                    or re.search(r"\bclosed\b", entry.detail.lower())):
                note(entry.target, entry.stamp, order, False, "inspect found it closed")
        return {node_id: (is_open, why) for node_id, (_, is_open, why) in latest.items()}

    def believed_open(self) -> frozenset[str]:
        """Fixtures believed open now (see :meth:`open_beliefs`)."""
        return frozenset(n for n, (is_open, _) in self.open_beliefs().items() if is_open)

    def goal_info(self, goal_id: str) -> tuple[GoalSpec | None, str]:
        """The spec and text behind a goal (None spec for free-form goals).

        Goals created by another session (before a restart) get their spec back from the
        postcondition, or for answered() goals from their description.
        """
        info = self._goals.get(goal_id)
        if info is None:
            goal = self.task.state.goals.get(goal_id)
            if goal is None:
                return None, ""
            info = _GoalInfo(spec_from_goal(goal), goal.description)
            self._goals[goal_id] = info
        return info.spec, info.text

    # ------------------------------------------------------------------ instructions
    def _new_id(self, kind: str) -> str:
        number = len(self.task.state.goals) + 1
        while True:
            goal_id = f"g{number:03d}_{kind}"
            if goal_id not in self.task.state.goals:
                return goal_id
            number += 1

    def _resolve(self, spec: GoalSpec, mention: str | None) -> str | None:
        """Node id for a mention of an action goal, chosen by grounding when several fit."""
        if mention is None:
            return None
        world = self.world.state
        if spec.kind is GoalKind.PICK:
            probe = self.grounder.ground("probe", spec, world, self.task.failed_bindings,
                                         self.robot(), chooser=self.chooser,
                                         require_attributes=self.attributes_fail_closed)
            return probe.candidate.node_id if isinstance(probe, GroundedGoal) else None
        ids = self.recall.resolve(world, mention)
        if spec.kind in (GoalKind.OPEN, GoalKind.CLOSE):
            ids = [i for i in ids if self.registry.is_fixture(world.nodes[i])]
        return ids[0] if ids else None

    def _roomier_first(self, spec: GoalSpec) -> GoalSpec | None:
        """For a plain pick (no room asked for, nothing said of the object but its name and
        source) whose object grounding would take has no room beside it for the fingers
        (:mod:`mimir_planner.clutter`): the find for one with room, to run first, when there
        is still somewhere to look; None otherwise (the pick takes what memory holds). The
        pick then chooses among all it knows, roomiest first, and takes the wedged one when
        the look found nothing better."""
        if spec.kind is not GoalKind.PICK or spec.clear or not spec.obj or \
                spec.like or spec.near or spec.avoid or self.task.hand is not None:
            return None
        world = self.world.state
        failed = self.task.failed_bindings
        probe = self.grounder.ground("probe", spec, world, failed, self.robot(),
                                     chooser=self.chooser,
                                     require_attributes=self.attributes_fail_closed)
        if not isinstance(probe, GroundedGoal) or probe.candidate.content_item is not None:
            return None
        config = self.registry.config
        room = rooms_around(world, [probe.candidate], config.clutter, config.is_fixture_label,
                            self.grounder.viewpoint).get(probe.candidate.node_id)
        if room is None or room.usable >= config.clutter.finger_gap_m:
            return None
        roomy = replace(spec, kind=GoalKind.FIND, clear=True, target=None, relation=None)
        look = self.grounder.ground("probe", roomy, world, failed, self.robot(),
                                    require_attributes=self.attributes_fail_closed)
        return roomy if isinstance(look, Exploration) else None

    def _compile(self, spec: GoalSpec, goal_id: str) -> Predicate | None:
        """Postcondition of a goal spec, or None when a mention is not in memory yet."""
        kind = spec.kind
        if kind is GoalKind.FIND:
            return Found((label_key(spec.obj or ""),))
        if kind in (GoalKind.QUESTION, GoalKind.CLOSE):
            if kind is GoalKind.CLOSE and self._resolve(spec, spec.obj) is None:
                return None
            return Answered((goal_id,))
        if kind is GoalKind.OPEN:
            node = self._resolve(spec, spec.obj)
            return IsOpen((node,)) if node else None
        if kind is GoalKind.GO_TO:
            node = self._resolve(spec, spec.obj)
            return At(("robot", node)) if node else None
        if kind is GoalKind.PICK:
            node = self._resolve(spec, spec.obj)
            return Holding((node,)) if node else None
        obj = self.task.hand if self.task.hand is not None else self._resolve(
            GoalSpec(GoalKind.PICK, spec.obj), spec.obj)
        targets = self.recall.resolve(self.world.state, spec.target or "")
        if obj is None or not targets:
            return None
        if spec.relation == "container":
            return Inside((obj, targets[0]))
        return On((obj, targets[0]))

    def _add(self, goal_id: str, post: Predicate, spec: GoalSpec | None, text: str,
             *, prereq: str | None, stamp: float) -> None:
        self.task.add_goal(goal_id, post, stamp=stamp, description=text,
                           prerequisites=(prereq,) if prereq else ())
        self._goals[goal_id] = _GoalInfo(spec, text)

    def submit(self, instruction: str, *, stamp: float | None = None) -> SubmitResult:
        """Turn an instruction into goals in task memory (memory is not reset).

        Symbolic forms become typed goals; a mention that is not in memory yet becomes a
        ``found`` exploration goal and the goals after it wait for it. Anything else becomes
        one free-form goal for the VLM planner, completed by its final answer.

        Raises:
            InstructionError: Not a usable instruction.
        """
        parsed = parse_instruction(instruction)
        when = self._clock() if stamp is None else stamp
        self._instruction_start = len(self.history)
        # Memory's own clock: anything observed after its newest observation now is "seen
        # during this instruction" (the session clock may run on another time base).
        self.world.refresh()
        self._instruction_stamp = max(
            (n.last_seen for n in self.world.state.nodes.values()), default=-math.inf)
        self._counts_at_submit = {n.node_id: n.observation_count
                                  for n in self.world.state.nodes.values()}
        ids: list[str] = []
        if not parsed.symbolic:
            goal_id = self._new_id("task")
            self._add(goal_id, Answered((goal_id,)), None, parsed.original, prereq=None,
                      stamp=when)
            return SubmitResult(parsed, (goal_id,), 0)
        prereq: str | None = None
        specs = list(parsed.goals)
        for index, spec in enumerate(specs):
            roomier = self._roomier_first(spec)
            if roomier is not None:
                text = f"find {spec.obj} with room to grasp (needed for: {spec.text})"
                self._explore_first(roomier, text, specs[index:], ids, prereq=prereq,
                                    stamp=when, fallback=True)
                return SubmitResult(parsed, tuple(ids), len(specs) - index)
            goal_id = self._new_id(spec.kind.value)
            post = self._compile(spec, goal_id)
            if post is None:
                text = f"find {spec.obj} (needed for: {spec.text})"
                look = GoalSpec(GoalKind.FIND, spec.obj, source=spec.source, text=text)
                self._explore_first(look, text, specs[index:], ids, prereq=prereq, stamp=when)
                return SubmitResult(parsed, tuple(ids), len(specs) - index)
            text = parsed.original if len(specs) == 1 else f"{spec.text} (from: {parsed.original})"
            self._add(goal_id, post, spec, text, prereq=prereq, stamp=when)
            ids.append(goal_id)
            prereq = goal_id
        return SubmitResult(parsed, tuple(ids), 0)

    def _explore_first(self, look: GoalSpec, text: str, waiting: Sequence[GoalSpec],
                       ids: list[str], *, prereq: str | None, stamp: float,
                       fallback: bool = False) -> None:
        """Add the find goal ``look`` (appended to ``ids``) and defer the ``waiting`` goals
        until it ends; with ``fallback`` they are compiled even when it blocks."""
        explore_id = self._new_id("find")
        self._add(explore_id, Found((label_key(look.obj or ""),)), look, text, prereq=prereq,
                  stamp=stamp)
        ids.append(explore_id)
        self._deferred.extend(_Deferred(s, explore_id, fallback=fallback) for s in waiting)

    def _flush_deferred(self, stamp: float) -> None:
        """Compile goals waiting on an exploration goal that has finished."""
        while self._deferred:
            head = self._deferred[0]
            status = self.task.state.status.get(head.explore_goal)
            if status is GoalStatus.PENDING:
                return
            self._deferred.pop(0)
            goal_id = self._new_id(head.spec.kind.value)
            compile_now = status is GoalStatus.COMPLETED or head.fallback
            post = self._compile(head.spec, goal_id) if compile_now else None
            if post is None:
                reason = (f"'{head.spec.obj}' still has no usable scene graph node"
                          if status is GoalStatus.COMPLETED
                          else f"exploration goal {head.explore_goal} was blocked")
                self._add(goal_id, Answered((goal_id,)), head.spec, head.spec.text, prereq=None,
                          stamp=stamp)
                self.task.set_status(goal_id, GoalStatus.BLOCKED, stamp=stamp, reason=reason)
                for rest in self._deferred:
                    rest.explore_goal, rest.fallback = goal_id, False
                continue
            # a look that found nothing better is no prerequisite of what it looked for
            prereq = head.explore_goal if status is GoalStatus.COMPLETED else None
            self._add(goal_id, post, head.spec, head.spec.text, prereq=prereq, stamp=stamp)
            for rest in self._deferred:  # the rest wait on this goal, not on the look
                rest.explore_goal, rest.fallback = goal_id, False

    # ------------------------------------------------------------------ one call
    def _fixtures(self) -> str:
        lines = []
        for node in sorted(self.world.state.nodes.values(), key=lambda n: n.node_id):
            if self.registry.is_fixture(node):
                lines.append(f"- {node.node_id} ({node.label})")
        return "\n".join(lines) or "(none)"

    def _retrieve(self, goal: Goal, spec: GoalSpec | None, grounding: GroundingResult | None,
                  text: str, *, summary: str, warnings: list[str]
                  ) -> tuple[tuple[RetrievedFrame, ...], tuple[np.ndarray, ...]]:
        if self.retriever is None:
            return (), ()
        nodes: list[str] = []
        if isinstance(grounding, GroundedGoal):
            nodes += [grounding.candidate.node_id]
            nodes += [n for n in (grounding.source, grounding.target) if n]
            nodes += [c.node_id for c in grounding.candidates[1:]]
        elif isinstance(grounding, Exploration):
            nodes += list(grounding.order[:3])
        mentions = [spec.obj, spec.source, spec.target] if spec is not None else [text]
        terms = task_terms(mentions)
        query = RetrievalQuery(text, tuple(dict.fromkeys(nodes)), terms)
        try:
            result = self.retriever.retrieve(query, summary)
        except (RetrievalError, MemoryStoreError) as err:
            warnings.append(f"keyframe retrieval failed: {err}")
            LOG.warning("keyframe retrieval failed for %s: %s", goal.goal_id, err)
            return (), ()
        images: list[np.ndarray] = []
        frames: list[RetrievedFrame] = []
        for frame in result.frames:
            if self.keyframes is None:
                break
            try:
                bgr = self.keyframes.load_image(frame.frame_id)
            except MemoryStoreError as err:
                warnings.append(f"memory frame {frame.frame_id[:12]} unreadable: {err}")
                continue
            rgb = cv2.cvtColor(bgr, cv2.COLOR_GRAY2RGB if bgr.ndim == 2 else cv2.COLOR_BGR2RGB)
            frames.append(frame)
            images.append(rgb)
        return tuple(frames), tuple(images)

    def _overlay(self, warnings: list[str]) -> tuple[np.ndarray | None, tuple[Mark, ...]]:
        obs = self.observation
        if obs is None:
            return None, ()
        if obs.intrinsics is None or obs.camera_to_map is None:
            return obs.rgb, ()
        nodes = list(self.world.state.nodes.values())
        try:
            return draw_set_of_marks(obs.rgb, nodes, obs.intrinsics, obs.camera_to_map)
        except OverlayError as err:
            warnings.append(f"no Set-of-Mark overlay: {err}")
            return obs.rgb, ()

    def context(self, goal: Goal, warnings: tuple[str, ...] = ()) -> PlanningContext:
        """Build the planning context of the active goal (also used by benchmarks)."""
        spec, text = self.goal_info(goal.goal_id)
        world = self.world.state
        notes = list(warnings)
        grounding: GroundingResult | None = None
        inspected = frozenset(h.target for h in self.history
                              if h.executed and h.primitive == "inspect" and h.success)
        if spec is not None:
            grounding = self.grounder.ground(
                goal.goal_id, bound_spec(goal, spec), world, self.task.failed_bindings,
                self.robot(), visited=self.visited, chooser=self.chooser, inspected=inspected,
                inspected_now=self.inspected_now(), moved_now=self.moved_now(),
                require_attributes=self.attributes_fail_closed)
        focus: list[str] = []
        if isinstance(grounding, GroundedGoal):
            focus = [grounding.candidate.node_id]
        scene_graph = self.world.render(self.config.loop.scene_graph_chars, focus=focus)
        started = time.perf_counter()
        frames, images = self._retrieve(goal, spec, grounding, text, summary=scene_graph,
                                        warnings=notes)
        retrieval_s = time.perf_counter() - started if self.retriever is not None else None
        image, marks = self._overlay(notes)
        history = tuple(self.history[-self.config.loop.history_steps:])
        beliefs = self.open_beliefs()
        believed_open = frozenset(n for n, (is_open, _) in beliefs.items() if is_open)
        exhausted = self.exhausted()
        for (primitive, target), why in sorted(exhausted.items()):
            notes.append(f"do not {primitive} {target} again in this instruction: {why}")
        for node_id, (is_open, why) in sorted(beliefs.items()):
            if is_open and "not verified" in why:
                notes.append(f"{node_id} is probably open ({why}); inspect it rather than "
                             "opening it again")
        glimpsed = self.glimpsed_now()
        if isinstance(grounding, GroundedGoal) and grounding.holder is not None and \
                self._needs_inspection(goal, grounding, believed_open):
            seen = grounding.candidate.node_id
            if seen in glimpsed:
                notes.append(f"{seen} was only glimpsed in this instruction; move to {seen} "
                             "and look before reporting it found")
            notes.append(f"'{grounding.spec.obj}' is believed in {grounding.holder}; inspect "
                         f"{grounding.holder} before reporting it found")
        return PlanningContext(
            goal=goal,
            goal_text=text,
            spec=spec,
            grounding=grounding,
            history=history,
            robot=self.robot(),
            world=world,
            scene_graph=scene_graph,
            fixtures=self._fixtures(),
            primitives=self.registry.describe(),
            retrieved=frames,
            retrieved_images=images,
            retrieval_s=retrieval_s,
            image=image,
            marks=marks,
            warnings=tuple(notes),
            believed_open=believed_open,
            inspected_now=self.inspected_now(),
            exhausted=frozenset(exhausted),
            seen_now=self.seen_now(),
            glimpsed_now=glimpsed,
            approached_now=self.approached_now(),
        )

    def _ask(self, ctx: PlanningContext) -> PlanAnswer:
        last: PlanAnswerError | None = None
        for attempt in range(self.config.loop.answer_attempts):
            text = self.policy.propose(ctx)
            try:
                return parse_plan_answer(text)
            except PlanAnswerError as err:
                LOG.warning("planner answer rejected (attempt %d): %s", attempt + 1, err)
                last = err
                ctx = replace(ctx, warnings=(*ctx.warnings, f"invalid answer: {err}"))
        raise last or PlanAnswerError("no planner answer attempts configured")

    def _block(self, goal: Goal, reason: str, stamp: float) -> None:
        self.task.set_status(goal.goal_id, GoalStatus.BLOCKED, stamp=stamp, reason=reason,
                             source=Source.INTERACTION)
        LOG.info("goal %s blocked: %s", goal.goal_id, reason)

    def _memory_effect(self, goal: Goal, spec: GoalSpec | None, answer: PlanAnswer,
                       grounding: GroundingResult | None) -> tuple[Effect, ...] | str:
        """Effects memory supports for an empty plan, or the reason it does not."""
        post = goal.postcondition
        world = self.world.state
        if isinstance(post, Answered):
            text = " ".join(r.strip() for r in answer.reasoning if r.strip())
            if spec is not None and spec.kind is GoalKind.CLOSE:
                target = self._resolve(spec, spec.obj)
                node = world.nodes.get(target or "")
                openable = node.properties.get("openable") if node is not None else None
                if openable is None or openable.is_opened is not False:
                    return f"memory does not show {target} closed"
                text = f"{target} is closed"
            if not text:
                return "an empty plan must carry the literal answer in its reasoning"
            return (Effect(EffectKind.ANSWER, goal.goal_id, value=text),)
        if isinstance(post, Found):
            if not isinstance(grounding, GroundedGoal):
                return f"memory does not hold '{post.args[0]}' yet"
            if self._needs_inspection(goal, grounding, self.believed_open()):
                return (f"'{post.args[0]}' is believed in {grounding.holder}, which was not "
                        "inspected in this instruction")
            return (Effect(EffectKind.FIND, post.args[0]),)
        ctx = EvalContext(world=world, hand=self.task.hand, robot_at=self.task.state.robot_at,
                          answers=self.task.state.answers)
        if not post.holds(ctx):
            return f"{post} does not hold in memory"
        if isinstance(post, IsOpen):
            return (Effect(EffectKind.STATE, post.args[0], target="is_open", value=True),)
        if isinstance(post, At):
            return (Effect(EffectKind.ARRIVE, post.args[1]),)
        if isinstance(post, Holding):
            return (Effect(EffectKind.GRASP, post.args[0]),)
        if isinstance(post, Inside | On):
            relation = "container" if isinstance(post, Inside) else "surface"
            return (Effect(EffectKind.PLACE, post.args[0], target=post.args[1],
                           value=relation),)
        return f"cannot confirm {post} from memory"

    def _observed_now(self) -> dict[str, int]:
        """Observations of each node made during the current instruction (nodes seen after
        the newest observation memory held when it was submitted)."""
        since = self._instruction_stamp
        if since is None:
            return {}
        before = self._counts_at_submit
        return {n.node_id: max(1, n.observation_count - before.get(n.node_id, 0))
                for n in self.world.state.nodes.values() if n.last_seen > since}

    def seen_now(self) -> frozenset[str]:
        """Nodes sighted during the current instruction: observed at least
        ``loop.sighting_min_observations`` times since it was submitted."""
        least = self.config.loop.sighting_min_observations
        return frozenset(n for n, count in self._observed_now().items() if count >= least)

    def glimpsed_now(self) -> frozenset[str]:
        """Nodes observed during the current instruction too few times to be a sighting."""
        least = self.config.loop.sighting_min_observations
        return frozenset(n for n, count in self._observed_now().items() if count < least)

    def approached_now(self) -> frozenset[str]:
        """Nodes the robot moved to successfully during the current instruction."""
        return frozenset(h.target for h in self.instruction_history()
                         if h.executed and h.primitive == "move_to" and h.success)

    def _needs_inspection(self, goal: Goal, grounding: GroundedGoal,
                          believed_open: frozenset[str]) -> bool:
        """Whether a grounded find goal still has to inspect its holder in this instruction."""
        holder = grounding.holder
        if not isinstance(goal.postcondition, Found) or holder is None:
            return False
        loop = self.config.loop
        if not loop.find_requires_inspection:
            return False
        cand = grounding.candidate
        node = self.world.state.nodes.get(holder)
        if node is None or holder_sealed(node, believed_open):
            return False
        if (cand.content_item is None and cand.node_id in self.seen_now()
                and (loop.find_accepts_sighting or not fixture_opens(node, self.config))):
            return False  # seen now; on a surface there is nothing more to look into
        return holder not in self.inspected_now()

    def _binding(self, goal: Goal, spec: GoalSpec | None,
                 step: ExecutableStep) -> tuple[str, str | None]:
        """The object-source binding a failed step contradicts (object, source)."""
        post = goal.postcondition
        obj: str
        if isinstance(post, Found | Holding | IsOpen | Inside | On):
            obj = post.args[0]
        elif isinstance(post, At):
            obj = post.args[1]
        elif spec is not None and spec.obj:
            resolved = self.recall.resolve(self.world.state, spec.obj)
            obj = resolved[0] if resolved else spec.obj
        else:
            obj = step.target
        if step.target != obj:
            return obj, step.target
        node = self.world.state.nodes.get(obj)
        return obj, node.parent if node is not None else None

    def _give_up(self, goal: Goal, spec: GoalSpec | None, step: ExecutableStep, *,
                 reason: str, stamp: float, evidence: Evidence) -> None:
        """Record the binding a step with a spent retry allowance contradicts (F_t)."""
        obj, source = self._binding(goal, spec, step)
        if self.task.is_binding_failed(obj, source):
            return
        self.task.record_binding_failure(goal.goal_id, obj, stamp=stamp, source_id=source,
                                         reason=reason, evidence=evidence)
        LOG.info("binding %s from %s recorded as failed: %s", obj, source or "-", reason)

    def step(self, executor: Executor, *, call: int = 1) -> StepRecord | None:
        """One planner call on the active goal; None when no goal is pending.

        Follows Algorithm 1: ground (block when nothing is left to explore), plan, map the
        first step to a legal action, replan once after a refusal, block after a second.

        Raises:
            ReasoningError: The model backend failed (nothing was executed).
        """
        stamp = self._clock()
        self._flush_deferred(stamp)
        goal = self.task.active_goal()
        if goal is None:
            return None
        self.world.refresh()
        spec, _ = self.goal_info(goal.goal_id)
        ctx = self.context(goal)
        if isinstance(ctx.grounding, Blocked):
            self._block(goal, ctx.grounding.reason, stamp)
            return StepRecord(call, goal.goal_id, "blocked", detail=ctx.grounding.reason)
        reason = "no executable step"
        for _attempt in range(2):
            try:
                answer = self._ask(ctx)
            except PlanAnswerError as err:
                self._block(goal, f"no valid planner answer: {err}", stamp)
                return StepRecord(call, goal.goal_id, "invalid_answer", detail=str(err))
            if not answer.plan:
                return self._finish(goal, spec, answer, ctx, call=call, stamp=stamp)
            first = answer.plan[0]
            try:
                step = self.registry.validate(
                    first, self.world.state, self.robot(), goal_id=goal.goal_id,
                    keyframe_ids=self._keyframes_of(answer, ctx), step_id=next(self._step_ids))
                spent = self.exhausted().get((step.primitive, step.target))
                if spent is not None:
                    raise ActionRefusedError(f"not trying again: {spent}")
            except ActionRefusedError as err:
                reason = err.reason
                LOG.info("step refused for %s: %s", goal.goal_id, reason)
                self.history.append(HistoryEntry(goal.goal_id, first.action,
                                                 str(first.target_object), False,
                                                 f"REFUSED: {reason}"))
                ctx = replace(ctx, warnings=(*ctx.warnings,
                                             f"your last step was refused: {reason}"))
                continue
            return self._execute(goal, step, executor, call)
        self._block(goal, f"step refused twice: {reason}", stamp)
        return StepRecord(call, goal.goal_id, "refused", detail=reason)

    def _keyframes_of(self, answer: PlanAnswer, ctx: PlanningContext) -> tuple[str, ...]:
        idx = answer.plan[0].grounded_by_keyframe_idx
        if idx is not None and 1 <= idx <= len(ctx.retrieved):
            return (ctx.retrieved[idx - 1].frame_id,)
        return ()

    def _finish(self, goal: Goal, spec: GoalSpec | None, answer: PlanAnswer,
                ctx: PlanningContext, *, call: int, stamp: float) -> StepRecord:
        effects = self._memory_effect(goal, spec, answer, ctx.grounding)
        if isinstance(effects, str):
            if spec is None or answer.warnings:
                reason = "; ".join([*answer.warnings, effects]) if answer.warnings else effects
                if not isinstance(ctx.grounding, Exploration):
                    self._block(goal, reason, stamp)
                    return StepRecord(call, goal.goal_id, "blocked", detail=reason)
            self.history.append(HistoryEntry(goal.goal_id, "finish", goal.goal_id, False,
                                             f"REJECTED: {effects}"))
            return StepRecord(call, goal.goal_id, "rejected_finish", detail=effects)
        result = self.task.update("report", Feedback(True, effects), self.world.state,
                                  stamp=stamp)
        detail = " ".join(answer.reasoning) or result.reason
        if not result.completed:
            self.history.append(HistoryEntry(goal.goal_id, "finish", goal.goal_id, False,
                                             result.reason))
            return StepRecord(call, goal.goal_id, "rejected_finish", detail=result.reason)
        self.history.append(HistoryEntry(goal.goal_id, "finish", goal.goal_id, True, detail))
        self.answer_entities[goal.goal_id] = self._named(goal, spec, detail, ctx.grounding)
        self._learn_brand(spec, ctx.grounding)
        return StepRecord(call, goal.goal_id, "completed", detail=detail)

    def _learn_brand(self, spec: GoalSpec | None, grounding: GroundingResult | None) -> None:
        """After a find that took a thing for a branded one by its described look ("the Corn
        Flakes box, the yellow one"), the brand names that thing for the rest of the session:
        "which cabinet held the Corn Flakes box" needs no description again."""
        if spec is None or spec.kind is not GoalKind.FIND or spec.obj is None \
                or not isinstance(grounding, GroundedGoal):
            return
        cand = grounding.candidate
        if cand.content_item is not None or not any(
                e.kind is EvidenceKind.BRAND for e in cand.evidence):
            return
        described = self.recall.attributes.split(spec.obj)
        self.recall.learn_name(described.base if described is not None else spec.obj,
                               cand.node_id)

    def _named(self, goal: Goal, spec: GoalSpec | None, text: str,
               grounding: GroundingResult | None) -> tuple[NamedEntity, ...]:
        """What a completed goal's answer names.

        A find names the object it grounded. A recognised question names what memory's
        answer to it names, as far as the literal answer mentions it (by id, or by name for a
        listed item, whose node when memory holds one); a free-form answer names the nodes
        whose ids it mentions.
        """
        world = self.world.state
        post = goal.postcondition
        if isinstance(post, Found):
            if isinstance(grounding, GroundedGoal):
                return (candidate_entity(world, grounding.candidate),)
            return ()
        if not isinstance(post, Answered):
            return ()
        if spec is None or spec.kind is not GoalKind.QUESTION:
            return tuple(mentioned_entities(text, world))
        said = " " + canon(re.sub(r"[^\w\s]", " ", text)) + " "
        # a listed item (what is in X, what was stored with X) is said by its name, also when
        # memory holds a node for it; any other node only by its id (a where answer naming
        # cabinet_2 does not name every cabinet)
        listing = spec.question_kind in ("what", "what_with")
        return tuple(
            e for e in question_entities(spec, world, self.recall)
            if (e.node_id and e.node_id in text)
            or ((listing or not e.node_id) and f" {canon(e.label)} " in said)
        )

    def _execute(self, goal: Goal, step: ExecutableStep, executor: Executor,
                 call: int) -> StepRecord:
        decision = self.gate.request(step.describe())
        if not decision.approved:
            reason = f"operator gate: {decision.state.value} {decision.reason}".strip()
            self.history.append(HistoryEntry(goal.goal_id, step.primitive, step.target, False,
                                             f"DENIED: {reason}"))
            return StepRecord(call, goal.goal_id, "denied", step=step, success=False,
                              detail=reason)
        outcome = executor.execute(step)
        if not isinstance(outcome, ExecutionOutcome):
            raise ActionRefusedError("the executor returned no ExecutionOutcome")
        stamp = outcome.stamp if outcome.stamp is not None else self._clock()
        reported = outcome.reported if outcome.reported is not None else \
            outcome.feedback.success
        if outcome.observation is not None:
            self.observation = outcome.observation
        self.world.refresh()
        success = outcome.feedback.success
        if success and step.primitive == "move_to":
            self._last_moved_to = step.target
            self.visited.add(step.target)
        evidence = Evidence(keyframe_ids=step.keyframe_ids)
        result = self.task.update(step.action, outcome.feedback, self.world.state, stamp=stamp,
                                  evidence=evidence)
        spec, _ = self.goal_info(goal.goal_id)
        entry = HistoryEntry(goal.goal_id, step.primitive, step.target, success,
                             outcome.detail, code=outcome.code, reported=reported, stamp=stamp,
                             executed=True)
        status = "SUCCESS" if success else ("UNVERIFIED" if entry.unverified else "FAILED")
        LOG.info("%s %s: %s", step.describe(), status, outcome.detail or result.reason)
        self.history.append(entry)
        if not success:
            spent = self.exhausted().get((step.primitive, step.target))
            if spent is not None:
                self._give_up(goal, spec, step, reason=f"{spent}: {outcome.detail}".rstrip(": "),
                              stamp=stamp, evidence=evidence)
        if result.completed:
            return StepRecord(call, goal.goal_id, "executed", step=step, success=success,
                              detail=f"{outcome.detail} -> completed {goal.goal_id}".strip())
        if success and spec is not None and spec.kind is GoalKind.CLOSE and \
                step.primitive == "close":
            closed = self._memory_effect(goal, spec, PlanAnswer((), (), ()), None)
            if not isinstance(closed, str):
                self.task.update("report", Feedback(True, closed), self.world.state, stamp=stamp)
        return StepRecord(call, goal.goal_id, "executed", step=step, success=success,
                          detail=outcome.detail)

    # ------------------------------------------------------------------ run
    def run(self, executor: Executor, *, budget: int | None = None,
            hooks: RunHooks | None = None) -> RunReport:
        """Plan and act until no goal is pending or the run has to stop.

        The run stops (``report.stop`` says why, ``report.reason`` how) when the host's
        ``hooks`` ask to cancel, when the planner-call budget is spent (the active goal is then
        blocked: "step budget exhausted"), when the operator gate denies a primitive, or when
        the model, the executor or memory fails (nothing more is executed; ``report.error``
        carries the reason).
        """
        limit = budget if budget is not None else self.config.loop.step_budget
        host = hooks or RunHooks()
        report = RunReport()
        before = dict(self.task.state.status)
        while self._turn(executor, host, report, limit):
            pass
        for gid, status in self.task.state.status.items():
            if before.get(gid) == status:
                continue
            if status is GoalStatus.COMPLETED:
                report.completed.append(gid)
                if gid in self.task.state.answers:
                    report.answers[gid] = self.task.state.answers[gid]
                if gid in self.answer_entities:
                    report.answer_entities[gid] = self.answer_entities[gid]
            elif status is GoalStatus.BLOCKED:
                report.blocked.append(gid)
        return report

    def _turn(self, executor: Executor, hooks: RunHooks, report: RunReport,
              limit: int) -> bool:
        """One turn of :meth:`run`; False once the run ends."""
        if hooks.cancelled():
            report.stopped(RunStop.CANCELED, "canceled by the client")
            return False
        if report.calls >= limit:
            self._exhaust(report, limit)
            return False
        observation = hooks.observation()
        if observation is not None:
            self.observe(observation)
        call = report.calls + 1
        hooks.before_step(call)
        record = self._call(executor, report, call)
        if record is None:
            return False
        report.calls = call
        report.records.append(record)
        hooks.after_step(record)
        if hooks.cancelled():
            report.stopped(RunStop.CANCELED, "canceled by the client")
        elif record.outcome == "denied":
            report.stopped(RunStop.DENIED, f"primitive not approved: {record.detail}")
        return report.stop is RunStop.NONE

    def _call(self, executor: Executor, report: RunReport, call: int) -> StepRecord | None:
        """One planner call; None when no goal is left or an error stops the run."""
        try:
            return self.step(executor, call=call)
        except ReasoningError as err:
            report.stopped(RunStop.MODEL_ERROR, f"planner model failed: {err}", error=True)
            LOG.error("%s", report.reason)
        except ExecutorUnavailableError as err:
            report.stopped(RunStop.EXECUTOR_UNAVAILABLE, f"executor unavailable: {err}",
                           error=True)
        except (PlannerError, MemoryStoreError) as err:
            report.stopped(RunStop.FAILED, f"{type(err).__name__}: {err}", error=True)
        return None

    def _exhaust(self, report: RunReport, limit: int) -> None:
        """Block the active goal once the planner-call budget is spent."""
        self._flush_deferred(self._clock())
        goal = self.task.active_goal()
        if goal is None:
            return
        reason = f"step budget of {limit} planner calls exhausted"
        report.budget_exhausted = True
        report.stopped(RunStop.BUDGET_EXHAUSTED, reason)
        self._block(goal, reason, self._clock())

    def settle(self, reason: str, stamp: float) -> list[str]:
        """Block every pending goal, including those still waiting on an exploration goal.

        Returns:
            Ids of the goals blocked.
        """
        blocked: list[str] = []
        for _ in range(len(self._deferred) + 2):
            for goal in self.task.pending():
                self.task.set_status(goal.goal_id, GoalStatus.BLOCKED, stamp=stamp,
                                     reason=reason)
                blocked.append(goal.goal_id)
            self._flush_deferred(stamp)
            if not self._deferred and not self.task.pending():
                break
        return blocked

    def use_keyframes(self, store: KeyframeStore, retriever: KeyframeRetriever) -> None:
        """Plan with a keyframe store (and its retriever) that was not available before."""
        self.keyframes = store
        self.retriever = retriever
        self._see_with(store)

    def _see_with(self, store: KeyframeStore) -> None:
        """Let attribute words be checked against what the nodes' keyframes show."""
        looks = NodeLooks(store, load_appearance_config(config_file("appearance.yaml")),
                          sightings=self.world.sightings)
        self.recall.attributes.appearance = looks.words
        self.grounder.likeness = looks.likeness
        self.grounder.seen_well = lambda node: bool(looks.look(node).appearances)
        self.grounder.viewpoint = looks.viewpoint
        if self.retriever is not None and isinstance(self.retriever.reasoner,
                                                     OfflineRetrievalReasoner):
            min_confidence = self.config.attributes.min_confidence

            def viewer(frame_id: str, node_id: str) -> FrameLook | str:
                node = self.world.state.nodes.get(node_id)
                if node is None:
                    return f"{node_id} is not in memory"
                return looks.in_frame(frame_id, node, min_confidence)

            self.retriever.reasoner.viewer = viewer

    def run_instruction(self, instruction: str, executor: Executor, *,
                        budget: int | None = None,
                        hooks: RunHooks | None = None) -> InstructionReport:
        """Serve one instruction from its text to the end of its run.

        Goals an earlier instruction left pending are blocked first ("superseded"), the text
        becomes goals (:meth:`submit`), :meth:`run` plans and acts, and when the run stopped
        early every goal of the instruction still pending is blocked with the stop's reason,
        so nothing carries over into the next instruction.
        """
        stamp = self._clock()
        superseded = tuple(self.settle("superseded: left pending by an earlier run", stamp))
        before = set(self.task.state.goals)
        try:
            self.submit(instruction, stamp=stamp)
        except InstructionError as err:
            return InstructionReport(RunStop.PARSE_FAILED, f"instruction not usable: {err}",
                                     superseded=superseded)
        report = self.run(executor, budget=budget, hooks=hooks)
        if report.reason:
            self.settle(report.reason, self._clock())
        goals = tuple(self._goal_outcome(g) for g in self.task.agenda()
                      if g.goal_id not in before)
        stop, reason = report.stop, report.reason
        blocked = [f"{g.goal_id}: {g.reason}" for g in goals if g.status is GoalStatus.BLOCKED]
        if stop is RunStop.NONE and blocked:
            stop, reason = RunStop.BLOCKED, "; ".join(blocked)
        return InstructionReport(stop, reason, report.calls, goals, superseded, report)

    def _goal_outcome(self, goal: Goal) -> GoalOutcome:
        state = self.task.state
        status = state.status[goal.goal_id]
        outcome = GoalOutcome(goal.goal_id, goal.description, status,
                              state.status_reason.get(goal.goal_id, ""))
        if status is not GoalStatus.COMPLETED:
            return outcome
        return replace(outcome, answer=state.answers.get(goal.goal_id),
                       entities=self.answer_entities.get(goal.goal_id, ()))


def spec_from_goal(goal: Goal) -> GoalSpec | None:
    """The goal spec a stored goal stands for (None for free-form goals)."""
    post = goal.postcondition
    text = goal.description
    if isinstance(post, Found):
        return GoalSpec(GoalKind.FIND, post.args[0].replace("_", " "), text=text)
    if isinstance(post, IsOpen):
        return GoalSpec(GoalKind.OPEN, post.args[0], text=text)
    if isinstance(post, At):
        return GoalSpec(GoalKind.GO_TO, post.args[1], text=text)
    if isinstance(post, Holding):
        return GoalSpec(GoalKind.PICK, post.args[0], text=text)
    if isinstance(post, Inside | On):
        relation = "container" if isinstance(post, Inside) else "surface"
        return GoalSpec(GoalKind.PLACE, post.args[0], target=post.args[1], relation=relation,
                        text=text)
    fragment = text.split(" (from: ", 1)[0]
    try:
        parsed = parse_instruction(fragment)
    except InstructionError:
        return None
    kinds = [g for g in parsed.goals if g.kind in (GoalKind.QUESTION, GoalKind.CLOSE)]
    return kinds[0] if parsed.symbolic and len(kinds) == 1 else None


def bound_spec(goal: Goal, spec: GoalSpec) -> GoalSpec:
    """The spec with mentions replaced by the node ids its postcondition is bound to.

    Grounding then works on the bound entity, so a step cannot serve the goal with a
    different object than the one its postcondition names.
    """
    post = goal.postcondition
    if isinstance(post, Holding | IsOpen):
        return replace(spec, obj=post.args[0])
    if isinstance(post, At):
        return replace(spec, obj=post.args[1])
    if isinstance(post, Inside | On):
        return replace(spec, obj=post.args[0], target=post.args[1])
    return spec
