"""Task memory (mimir.md eq. 2-6): goal agenda, hand state, failed bindings, completion evidence.

T = (goals, agenda order, status, hand, failed bindings, completion evidence). The agenda puts
prerequisites before dependent goals and breaks ties by task order. After every update the
active goal is recomputed as the first pending goal (in agenda order) whose prerequisites are
all completed. A goal completes only when the feedback-supported effect establishes its
postcondition, a typed predicate checked against world memory plus the effect itself.
Every change is an event in the log, so task memory restarts with its state.
"""

from __future__ import annotations

import abc
import heapq
import logging
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, ClassVar

from mimir.labels import label_key
from mimir_memory.config import MemoryConfig
from mimir_memory.errors import (
    InvalidGoalError,
    InvalidValueError,
    MemoryStoreError,
    UnknownGoalError,
)
from mimir_memory.events import (
    TASK_KINDS,
    EventKind,
    EventLog,
    Evidence,
    MemoryEvent,
    Source,
    Verdict,
)
from mimir_memory.graph import HAND_PARENT, SceneGraphState
from mimir_memory.locking import synchronized
from mimir_memory.schema import Store, open_database

LOG = logging.getLogger(__name__)


class GoalStatus(StrEnum):
    """s_t(g)."""

    PENDING = "pending"
    COMPLETED = "completed"
    BLOCKED = "blocked"


class EffectKind(StrEnum):
    """Kinds of feedback-supported change (Delta_t)."""

    GRASP = "grasp"
    RELEASE = "release"
    PLACE = "place"
    STATE = "state"
    ARRIVE = "arrive"
    ANSWER = "answer"
    FIND = "find"


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidValueError(f"{what} must be a non-empty string, got {value!r}")
    return value.strip()


@dataclass(frozen=True)
class Effect:
    """One feedback-supported change.

    Attributes:
        kind: Kind of change.
        subject: Object (grasp, release, place, state, find), place (arrive) or question (answer).
        target: Parent for ``place``; property name for ``state``.
        value: Relation for ``place`` (``container``/``surface``); new value for ``state``;
            answer text for ``answer``.
    """

    kind: EffectKind
    subject: str
    target: str | None = None
    value: Any = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", EffectKind(self.kind))
        except ValueError as err:
            raise InvalidValueError(f"unknown effect kind {self.kind!r}") from err
        object.__setattr__(self, "subject", _name(self.subject, "effect subject"))
        if self.kind in (EffectKind.PLACE, EffectKind.STATE):
            _name(self.target, f"{self.kind.value} effect target")
        if self.kind is EffectKind.PLACE and self.value not in ("container", "surface", "room"):
            raise InvalidValueError("a place effect needs value 'container', 'surface' or 'room'")
        if self.kind is EffectKind.ANSWER and not isinstance(self.value, str):
            raise InvalidValueError("an answer effect needs the answer text as value")

    def subjects(self) -> frozenset[str]:
        """Entities whose state this effect changes."""
        if self.kind is EffectKind.PLACE and self.target is not None:
            return frozenset({self.subject, self.target})
        return frozenset({self.subject})

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "kind": self.kind.value,
            "subject": self.subject,
            "target": self.target,
            "value": self.value,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Effect:
        """Inverse of :meth:`to_dict`."""
        return cls(
            kind=EffectKind(data["kind"]),
            subject=data["subject"],
            target=data.get("target"),
            value=data.get("value"),
        )


@dataclass(frozen=True)
class Feedback:
    """y_t = (sigma_t, Delta_t): action outcome and supported effects."""

    success: bool
    effects: tuple[Effect, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.success, bool):
            raise InvalidValueError(f"success must be a boolean, got {self.success!r}")
        effects = tuple(self.effects)
        for effect in effects:
            if not isinstance(effect, Effect):
                raise InvalidValueError(f"effects must be Effect instances, got {effect!r}")
        object.__setattr__(self, "effects", effects)


@dataclass
class EvalContext:
    """What a predicate is checked against: world memory plus task state plus the effect."""

    world: SceneGraphState
    hand: str | None
    robot_at: str | None
    answers: Mapping[str, str]
    relations: dict[str, tuple[str, str]] = field(default_factory=dict)
    states: dict[tuple[str, str], Any] = field(default_factory=dict)
    found: set[str] = field(default_factory=set)

    def parent_of(self, obj: str) -> tuple[str | None, str | None]:
        """(parent, relation) of an object, the effect taking precedence over the graph."""
        if obj in self.relations:
            return self.relations[obj]
        node = self.world.nodes.get(obj)
        if node is None:
            return None, None
        return node.parent, node.parent_relation


@dataclass(frozen=True)
class Predicate(abc.ABC):
    """A typed postcondition ``name(args...)``; subclasses define :meth:`holds`."""

    NAME: ClassVar[str] = ""
    ARITY: ClassVar[int] = 0
    args: tuple[str, ...]

    def __post_init__(self) -> None:
        args = tuple(self.args)
        if len(args) != self.ARITY:
            raise InvalidGoalError(f"{self.NAME} takes {self.ARITY} argument(s), got {len(args)}")
        object.__setattr__(self, "args", tuple(_name(a, f"{self.NAME} argument") for a in args))

    @abc.abstractmethod
    def holds(self, ctx: EvalContext) -> bool:
        """Whether the predicate is true in ``ctx``."""

    def subjects(self) -> frozenset[str]:
        """Entities the predicate is about (an effect must touch one of them)."""
        return frozenset(self.args)

    def __str__(self) -> str:
        return f"{self.NAME}({', '.join(self.args)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.NAME, "args": list(self.args)}


class Holding(Predicate):
    """``holding(x)``: the robot holds object x."""

    NAME = "holding"
    ARITY = 1

    def holds(self, ctx: EvalContext) -> bool:
        """True when the hand holds x (task memory hand or the graph's hand parent)."""
        obj = self.args[0]
        return ctx.hand == obj or ctx.parent_of(obj)[0] == HAND_PARENT


class Inside(Predicate):
    """``inside(x, y)``: object x is in container y."""

    NAME = "inside"
    ARITY = 2

    def holds(self, ctx: EvalContext) -> bool:
        """True when x's active parent is y as a container, or y's contents list x."""
        obj, container = self.args
        if ctx.parent_of(obj) == (container, "container"):
            return True
        if obj in ctx.relations:
            return False
        node = ctx.world.nodes.get(container)
        if node is None:
            return False
        obj_node = ctx.world.nodes.get(obj)
        names = {label_key(obj)}
        if obj_node is not None:
            names.add(label_key(obj_node.label))
        return any(label_key(str(item.get("name", ""))) in names for item in node.contents)


class On(Predicate):
    """``on(x, y)``: object x rests on surface y."""

    NAME = "on"
    ARITY = 2

    def holds(self, ctx: EvalContext) -> bool:
        """True when x's active parent is y as a surface."""
        return ctx.parent_of(self.args[0]) == (self.args[1], "surface")


class IsOpen(Predicate):
    """``is_open(y)``: fixture y is open."""

    NAME = "is_open"
    ARITY = 1

    def holds(self, ctx: EvalContext) -> bool:
        """True from a state effect, ``openable.is_opened`` or an ``is_open`` property."""
        obj = self.args[0]
        for key in ((obj, "is_open"), (obj, "is_opened")):
            if key in ctx.states:
                return ctx.states[key] is True
        node = ctx.world.nodes.get(obj)
        if node is None:
            return False
        openable = node.properties.get("openable")
        if openable is not None and openable.is_opened is not None:
            return openable.is_opened
        prop = node.properties.get("is_open")
        return prop is not None and prop.value is True


class Found(Predicate):
    """``found(x)``: x (node id or label) is in world memory."""

    NAME = "found"
    ARITY = 1

    def holds(self, ctx: EvalContext) -> bool:
        """True when x was found by the effect or a node has that id or label."""
        target = self.args[0]
        if target in ctx.found or target in ctx.world.nodes:
            return True
        key = label_key(target)
        return any(label_key(n.label) == key for n in ctx.world.nodes.values())


class At(Predicate):
    """``at(robot, y)``: the robot is at place y."""

    NAME = "at"
    ARITY = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.args[0] != "robot":
            raise InvalidGoalError(f"at() takes 'robot' as first argument, got {self.args[0]!r}")

    def holds(self, ctx: EvalContext) -> bool:
        """True when the last arrival was at y."""
        return ctx.robot_at == self.args[1]

    def subjects(self) -> frozenset[str]:
        """The place only."""
        return frozenset({self.args[1]})


class Answered(Predicate):
    """``answered(q)``: question q has an answer."""

    NAME = "answered"
    ARITY = 1

    def holds(self, ctx: EvalContext) -> bool:
        """True when an answer is recorded for q."""
        return self.args[0] in ctx.answers


PREDICATES: dict[str, type[Predicate]] = {
    cls.NAME: cls for cls in (Holding, Inside, On, IsOpen, Found, At, Answered)
}
_PREDICATE_RE = re.compile(r"^\s*([a-z_]+)\s*\((.*)\)\s*$")


def make_predicate(name: str, args: Sequence[str]) -> Predicate:
    """Build a predicate from its name and arguments.

    Raises:
        InvalidGoalError: Unknown name or wrong arguments.
    """
    cls = PREDICATES.get(name)
    if cls is None:
        raise InvalidGoalError(f"unknown predicate {name!r}; known: {sorted(PREDICATES)}")
    if isinstance(args, str):
        raise InvalidGoalError("predicate arguments must be a sequence of strings")
    return cls(tuple(args))


def parse_predicate(text: str) -> Predicate:
    """Parse ``name(arg, ...)`` such as ``inside(mug_1, cabinet_3)``.

    Raises:
        InvalidGoalError: Malformed text, unknown predicate or wrong arity.
    """
    if not isinstance(text, str):
        raise InvalidGoalError(f"predicate must be a string, got {text!r}")
    match = _PREDICATE_RE.match(text)
    if match is None:
        raise InvalidGoalError(f"malformed predicate {text!r}; expected name(arg, ...)")
    inner = match.group(2).strip()
    args = [a.strip() for a in inner.split(",")] if inner else []
    if any(not a or "(" in a or ")" in a for a in args):
        raise InvalidGoalError(f"malformed predicate arguments in {text!r}")
    return make_predicate(match.group(1), args)


@dataclass(frozen=True)
class Goal:
    """A symbolic goal with its postcondition."""

    goal_id: str
    postcondition: Predicate
    description: str = ""
    prerequisites: tuple[str, ...] = ()
    order: int = 0


@dataclass(frozen=True)
class FailedBinding:
    """An object-source hypothesis contradicted by execution (F_t)."""

    goal_id: str
    object_id: str
    source_id: str | None
    reason: str
    stamp: float


@dataclass(frozen=True)
class UpdateResult:
    """Outcome of :meth:`TaskMemory.update`."""

    goal_id: str | None
    completed: bool
    reason: str
    events: tuple[MemoryEvent, ...]
    next_goal: str | None


class TaskState:
    """Projection of task events."""

    def __init__(self) -> None:
        self.goals: dict[str, Goal] = {}
        self.status: dict[str, GoalStatus] = {}
        self.status_reason: dict[str, str] = {}
        self.hand: str | None = None
        self.robot_at: str | None = None
        self.answers: dict[str, str] = {}
        self.failed: list[FailedBinding] = []
        self.evidence: dict[str, dict[str, Any]] = {}
        self.revision = 0

    def agenda(self) -> list[Goal]:
        """Goals in agenda order: prerequisites first, then task order."""
        indegree = dict.fromkeys(self.goals, 0)
        dependents: dict[str, list[str]] = {gid: [] for gid in self.goals}
        for goal in self.goals.values():
            for pre in goal.prerequisites:
                indegree[goal.goal_id] += 1
                dependents[pre].append(goal.goal_id)
        heap = [(g.order, g.goal_id) for g in self.goals.values() if indegree[g.goal_id] == 0]
        heapq.heapify(heap)
        out: list[Goal] = []
        while heap:
            _, gid = heapq.heappop(heap)
            out.append(self.goals[gid])
            for dep in dependents[gid]:
                indegree[dep] -= 1
                if indegree[dep] == 0:
                    heapq.heappush(heap, (self.goals[dep].order, dep))
        return out

    def active_goal(self) -> Goal | None:
        """First pending goal in agenda order whose prerequisites are all completed."""
        for goal in self.agenda():
            if self.status[goal.goal_id] is not GoalStatus.PENDING:
                continue
            if all(self.status[p] is GoalStatus.COMPLETED for p in goal.prerequisites):
                return goal
        return None

    def apply(self, event: MemoryEvent) -> None:
        """Fold one task event."""
        if event.seq is not None:
            self.revision = max(self.revision, event.seq)
        if event.kind not in TASK_KINDS or not event.verdict.effective:
            return
        data = event.payload
        if event.kind is EventKind.GOAL_ADDED:
            post = data["postcondition"]
            goal = Goal(
                goal_id=data["goal_id"],
                postcondition=make_predicate(post["name"], post["args"]),
                description=data.get("description", ""),
                prerequisites=tuple(data.get("prerequisites", ())),
                order=int(data["order"]),
            )
            self.goals[goal.goal_id] = goal
            self.status[goal.goal_id] = GoalStatus.PENDING
        elif event.kind is EventKind.GOAL_STATUS_CHANGED:
            gid = data["goal_id"]
            self.status[gid] = GoalStatus(data["status"])
            self.status_reason[gid] = data.get("reason", "")
            if self.status[gid] is GoalStatus.COMPLETED:
                self.evidence[gid] = {
                    "action": data.get("action"),
                    "effects": data.get("effects", []),
                    "event_id": event.event_id,
                    "evidence": event.evidence.to_dict(),
                    "stamp": event.stamp,
                }
            else:
                self.evidence.pop(gid, None)
        elif event.kind is EventKind.HAND_CHANGED:
            self.hand = data.get("holding")
        elif event.kind is EventKind.ROBOT_LOCATION_CHANGED:
            self.robot_at = data.get("place")
        elif event.kind is EventKind.QUESTION_ANSWERED:
            self.answers[data["question"]] = data["answer"]
        elif event.kind is EventKind.BINDING_FAILED:
            self.failed.append(
                FailedBinding(
                    goal_id=data["goal_id"],
                    object_id=data["object_id"],
                    source_id=data.get("source_id"),
                    reason=data.get("reason", ""),
                    stamp=event.stamp,
                )
            )

    def snapshot(self) -> dict[str, Any]:
        """JSON form of the task memory."""
        active = self.active_goal()
        return {
            "agenda": [
                {
                    "goal_id": g.goal_id,
                    "postcondition": str(g.postcondition),
                    "description": g.description,
                    "prerequisites": list(g.prerequisites),
                    "status": self.status[g.goal_id].value,
                    "reason": self.status_reason.get(g.goal_id, ""),
                }
                for g in self.agenda()
            ],
            "active_goal": active.goal_id if active else None,
            "hand": self.hand,
            "robot_at": self.robot_at,
            "answers": dict(sorted(self.answers.items())),
            "failed_bindings": [
                [f.goal_id, f.object_id, f.source_id, f.reason] for f in self.failed
            ],
            "evidence": {k: self.evidence[k] for k in sorted(self.evidence)},
        }


class TaskMemory(Store):
    """Task memory over an event log (its own database or one shared with world memory)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.handle = log.handle
        self.lock = threading.RLock()
        self.state = TaskState()
        self.skipped: list[tuple[int, str, str]] = []
        """(seq, event id, reason) of stored events that do not apply (kept out of the state)."""
        for event in log.iter_events(kinds=TASK_KINDS):
            try:
                self.state.apply(event)
            except (MemoryStoreError, KeyError, TypeError, ValueError, ArithmeticError) as err:
                # an event from an older or broken writer must not stop the planner starting
                reason = f"{type(err).__name__}: {err}"
                self.skipped.append((event.seq or 0, event.event_id, reason))
                LOG.warning("task memory: event %s (seq %s) does not apply: %s",
                            event.event_id, event.seq, err)

    @classmethod
    def open(
        cls, path: str | Path, *, config: MemoryConfig | None = None, readonly: bool = False,
        snapshot: bool = False,
    ) -> TaskMemory:
        """Open (or create) a task database and replay it."""
        config = config or MemoryConfig()
        handle = open_database(path, "task", readonly=readonly, storage=config.storage,
                               snapshot=snapshot)
        try:
            return cls(EventLog(handle))
        except BaseException:
            handle.close()
            raise

    # ------------------------------------------------------------------ queries
    @synchronized
    def agenda(self) -> list[Goal]:
        """Goals in agenda order."""
        return self.state.agenda()

    @synchronized
    def active_goal(self) -> Goal | None:
        """g_t: the next goal to work on, or None."""
        return self.state.active_goal()

    @synchronized
    def status(self, goal_id: str) -> GoalStatus:
        """s_t(goal_id)."""
        if goal_id not in self.state.status:
            raise UnknownGoalError(f"unknown goal {goal_id!r}")
        return self.state.status[goal_id]

    @synchronized
    def pending(self) -> list[Goal]:
        """P_t in agenda order."""
        return [g for g in self.agenda() if self.state.status[g.goal_id] is GoalStatus.PENDING]

    @property
    def hand(self) -> str | None:
        """h_t: the held object id, or None."""
        return self.state.hand

    @property
    def failed_bindings(self) -> list[FailedBinding]:
        """F_t."""
        return list(self.state.failed)

    @synchronized
    def is_binding_failed(self, object_id: str, source_id: str | None = None) -> bool:
        """Whether an object (optionally from a given source) was already contradicted."""
        return any(
            f.object_id == object_id and (source_id is None or f.source_id == source_id)
            for f in self.state.failed
        )

    @synchronized
    def completion_evidence(self, goal_id: str) -> dict[str, Any]:
        """C_t entry of a completed goal."""
        if goal_id not in self.state.evidence:
            raise UnknownGoalError(f"goal {goal_id!r} has no completion evidence")
        return dict(self.state.evidence[goal_id])

    @synchronized
    def snapshot(self) -> dict[str, Any]:
        """JSON form (agenda, active goal, hand, failed bindings, evidence)."""
        return self.state.snapshot()

    # ------------------------------------------------------------------- writes
    def _append(self, events: Sequence[MemoryEvent]) -> list[MemoryEvent]:
        stored = self.log.append(events)
        for event in stored:
            self.state.apply(event)
        return stored

    @synchronized
    def add_goals(
        self,
        goals: Iterable[tuple[str, Predicate | str, Sequence[str], str]],
        *,
        stamp: float,
        source: Source = Source.OPERATOR,
    ) -> list[MemoryEvent]:
        """Add goals in task order: ``(goal_id, postcondition, prerequisites, description)``.

        Prerequisites may name goals of the same batch or earlier goals.

        Raises:
            InvalidGoalError: Duplicate id, unknown prerequisite, cycle, bad postcondition.
        """
        batch = list(goals)
        new_ids: dict[str, Goal] = {}
        order = len(self.state.goals)
        for item in batch:
            if not isinstance(item, tuple) or len(item) != 4:
                raise InvalidGoalError(
                    "each goal is (goal_id, postcondition, prerequisites, description)"
                )
            goal_id, post, prereqs, description = item
            goal_id = _name(goal_id, "goal_id")
            if goal_id in self.state.goals or goal_id in new_ids:
                raise InvalidGoalError(f"goal {goal_id!r} already exists")
            predicate = parse_predicate(post) if isinstance(post, str) else post
            if not isinstance(predicate, Predicate) or type(predicate) is Predicate:
                raise InvalidGoalError(f"postcondition of {goal_id!r} must be a predicate")
            if isinstance(prereqs, str):
                raise InvalidGoalError("prerequisites must be a sequence of goal ids")
            if not isinstance(description, str):
                raise InvalidGoalError("description must be a string")
            new_ids[goal_id] = Goal(goal_id, predicate, description, tuple(prereqs), order)
            order += 1
        for goal in new_ids.values():
            for pre in goal.prerequisites:
                if pre not in self.state.goals and pre not in new_ids:
                    raise InvalidGoalError(f"goal {goal.goal_id!r} needs unknown goal {pre!r}")
                if pre == goal.goal_id:
                    raise InvalidGoalError(f"goal {goal.goal_id!r} cannot require itself")
        trial = TaskState()
        trial.goals = {**self.state.goals, **new_ids}
        if len(trial.agenda()) != len(trial.goals):
            raise InvalidGoalError("the prerequisites form a cycle")
        events = [
            MemoryEvent(
                kind=EventKind.GOAL_ADDED,
                stamp=stamp,
                source=source,
                payload={
                    "goal_id": g.goal_id,
                    "postcondition": g.postcondition.to_dict(),
                    "prerequisites": list(g.prerequisites),
                    "description": g.description,
                    "order": g.order,
                },
            )
            for g in new_ids.values()
        ]
        return self._append(events)

    def add_goal(
        self,
        goal_id: str,
        postcondition: Predicate | str,
        *,
        stamp: float,
        prerequisites: Sequence[str] = (),
        description: str = "",
        source: Source = Source.OPERATOR,
    ) -> MemoryEvent:
        """Add one goal (see :meth:`add_goals`)."""
        return self.add_goals(
            [(goal_id, postcondition, prerequisites, description)], stamp=stamp, source=source
        )[0]

    @synchronized
    def set_status(
        self,
        goal_id: str,
        status: GoalStatus | str,
        *,
        stamp: float,
        reason: str = "",
        source: Source = Source.OPERATOR,
        evidence: Evidence | None = None,
    ) -> MemoryEvent:
        """Block, unblock (``pending``) a goal; completing goes through :meth:`update`.

        Raises:
            UnknownGoalError: No such goal.
            InvalidGoalError: ``completed`` requested directly.
        """
        self.status(goal_id)
        try:
            new = GoalStatus(status)
        except ValueError as err:
            raise InvalidGoalError(f"unknown goal status {status!r}") from err
        if new is GoalStatus.COMPLETED:
            raise InvalidGoalError("a goal completes only through a supported effect (update)")
        event = MemoryEvent(
            kind=EventKind.GOAL_STATUS_CHANGED,
            stamp=stamp,
            source=source,
            payload={"goal_id": goal_id, "status": new.value, "reason": reason},
            evidence=evidence or Evidence(),
        )
        return self._append([event])[0]

    @synchronized
    def record_binding_failure(
        self,
        goal_id: str,
        object_id: str,
        *,
        stamp: float,
        source_id: str | None = None,
        reason: str = "",
        evidence: Evidence | None = None,
    ) -> MemoryEvent:
        """Add a contradicted object-source binding to F_t."""
        self.status(goal_id)
        event = MemoryEvent(
            kind=EventKind.BINDING_FAILED,
            stamp=stamp,
            source=Source.INTERACTION,
            payload={
                "goal_id": goal_id,
                "object_id": _name(object_id, "object_id"),
                "source_id": source_id,
                "reason": reason,
            },
            evidence=evidence or Evidence(),
        )
        return self._append([event])[0]

    @synchronized
    def update(
        self,
        action: str,
        feedback: Feedback,
        world: SceneGraphState,
        *,
        stamp: float,
        evidence: Evidence | None = None,
        verdict: Verdict = Verdict.ADMIT,
    ) -> UpdateResult:
        """U_T(T, g_t, a_t, y_t): apply supported effects and complete g_t if Post holds.

        Failed actions change nothing but the hand: a failed action whose feedback carries a
        release (a place whose jaws opened while the thing did not end where it was meant to)
        empties it, and completes no goal. Successful actions update hand, location and
        answers; the active goal completes only when an effect touches its postcondition's
        entities and the postcondition holds in world memory overlaid with the effects (eq. 6).
        """
        _name(action, "action")
        if not isinstance(feedback, Feedback):
            raise InvalidValueError("feedback must be a Feedback")
        if not isinstance(world, SceneGraphState):
            raise InvalidValueError("world must be a SceneGraphState")
        goal = self.active_goal()
        ev = evidence or Evidence()
        if not feedback.success or not verdict.effective:
            released = [e.subject for e in feedback.effects
                        if e.kind is EffectKind.RELEASE and e.subject == self.state.hand]
            stored: list[MemoryEvent] = []
            if released and verdict.effective:
                stored = self._append([self._event(EventKind.HAND_CHANGED, {"holding": None},
                                                   stamp, ev)])
            return UpdateResult(
                goal.goal_id if goal else None, False, "action failed", tuple(stored),
                self._next_id()
            )
        answers = dict(self.state.answers)
        ctx = EvalContext(world=world, hand=self.state.hand, robot_at=self.state.robot_at,
                          answers=answers)
        for effect in feedback.effects:
            _fold_effect(ctx, answers, effect)
        events = [
            self._event(EventKind.QUESTION_ANSWERED,
                        {"question": effect.subject, "answer": str(effect.value)}, stamp, ev)
            for effect in feedback.effects if effect.kind is EffectKind.ANSWER
        ]
        if ctx.hand != self.state.hand:
            events.append(self._event(EventKind.HAND_CHANGED, {"holding": ctx.hand}, stamp, ev))
        if ctx.robot_at != self.state.robot_at:
            events.append(
                self._event(EventKind.ROBOT_LOCATION_CHANGED, {"place": ctx.robot_at}, stamp, ev)
            )
        completed = False
        reason = "no active goal"
        if goal is not None:
            touched = frozenset().union(*(e.subjects() for e in feedback.effects))
            if not touched & goal.postcondition.subjects():
                reason = f"no supported effect on {goal.postcondition}"
            elif not goal.postcondition.holds(ctx):
                reason = f"postcondition {goal.postcondition} not established"
            else:
                completed = True
                reason = f"postcondition {goal.postcondition} established"
                events.append(
                    self._event(
                        EventKind.GOAL_STATUS_CHANGED,
                        {
                            "goal_id": goal.goal_id,
                            "status": GoalStatus.COMPLETED.value,
                            "reason": reason,
                            "action": action,
                            "effects": [e.to_dict() for e in feedback.effects],
                        },
                        stamp,
                        ev,
                    )
                )
        stored = self._append(events)
        return UpdateResult(
            goal.goal_id if goal else None, completed, reason, tuple(stored), self._next_id()
        )

    def _next_id(self) -> str | None:
        nxt = self.active_goal()
        return nxt.goal_id if nxt else None

    @staticmethod
    def _event(
        kind: EventKind, payload: Mapping[str, Any], stamp: float, evidence: Evidence
    ) -> MemoryEvent:
        return MemoryEvent(
            kind=kind,
            stamp=stamp,
            source=Source.INTERACTION,
            payload=payload,
            evidence=evidence,
        )


def _fold_effect(ctx: EvalContext, answers: dict[str, str], effect: Effect) -> None:
    """Overlay one supported effect of a successful action on the evaluation context.

    ``answers`` is the caller's copy of the answers that ``ctx`` reads.
    """
    kind = effect.kind
    if kind is EffectKind.GRASP:
        ctx.hand = effect.subject
    elif kind in (EffectKind.RELEASE, EffectKind.PLACE):
        if kind is EffectKind.PLACE:
            ctx.relations[effect.subject] = (str(effect.target), str(effect.value))
        ctx.hand = None if ctx.hand == effect.subject else ctx.hand
    elif kind is EffectKind.STATE:
        ctx.states[(effect.subject, str(effect.target))] = effect.value
    elif kind is EffectKind.ARRIVE:
        ctx.robot_at = effect.subject
    elif kind is EffectKind.ANSWER:
        answers[effect.subject] = str(effect.value)
    elif kind is EffectKind.FIND:
        ctx.found.add(effect.subject)
