"""A simulated kitchen and executor for the planner tests.

The executor plays the robot, perception and the interaction analyzer: it acts on a ground-truth
kitchen and writes memory through the production write paths only. What the cameras see goes in
as observations (``WorldMemory.ingest``, as the scene graph node stores them); what an
interaction revealed goes in as the analyzer's admitted verdicts, turned into node updates by
:func:`~mimir_planner.reasoning.writes.plan_writes` (locked and opened state, contents with
their nodes as the fixture's children, a picked thing in the hand, a placed one at its place)
and applied with ``WorldMemory.apply_update``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mimir_memory.keyframes import KeyframeStore
from mimir_memory.observations import ObjectObservation
from mimir_memory.task import Effect, EffectKind, Feedback, TaskMemory
from mimir_memory.updates import NodeUpdate
from mimir_memory.world import WorldMemory
from mimir_planner.config import PlannerConfig, load_planner_config
from mimir_planner.planner import PlannerSession
from mimir_planner.primitives import ExecutableStep
from mimir_planner.reasoning import (
    ContentClaim,
    ContentsUpdate,
    Decision,
    EmptyClaim,
    HarnessResult,
    OutcomeClaim,
    OutcomeUpdate,
    PropertyClaim,
    Verdict,
    load_reasoning_config,
)
from mimir_planner.reasoning.claims import ContentItem
from mimir_planner.reasoning.errors import BackendUnavailableError
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.reasoning.world_view import InMemoryWorld, memory_snapshot
from mimir_planner.reasoning.writes import Whereabouts, WriteContext, plan_writes
from mimir_planner.runs import ExecutionOutcome

FIXTURE_HALF_SIZE = 0.25  # m: half the side of a fixture's observed box
OBJECT_HALF_SIZE = 0.04  # m
_FIXTURE_WORDS = frozenset({"cabinet", "drawer", "fridge", "counter", "table", "shelf", "sink",
                            "microwave", "oven", "dishwasher"})


@dataclass
class Fixture:
    """Ground truth of one fixture."""

    label: str
    position: tuple[float, float, float]
    locked: bool = False
    contents: tuple[str, ...] = ()
    opens: bool = True
    is_open: bool = False


def observation(label: str, position: Sequence[float], half: float, stamp: float,
                camera: str = "pole") -> ObjectObservation:
    """What a camera reports of a thing of this label at ``position`` (map)."""
    centre = np.asarray(position, dtype=np.float64)
    return ObjectObservation(label=label, centroid=centre, bbox_min=centre - half,
                             bbox_max=centre + half, stamp=stamp, score=0.9, point_count=400,
                             camera=camera)


def world_view(world: WorldMemory) -> InMemoryWorld:
    """Memory as the analyzer reads it (a snapshot of every node)."""
    return memory_snapshot(world.state.nodes.values())


def _admit(claim: PropertyClaim | OutcomeClaim | ContentClaim | EmptyClaim) -> Verdict:
    return Verdict(claim, Decision.ADMIT, "seen by the test kitchen", ("gripper@1.000",),
                   "kitchen", interaction_id="kitchen")


def admit_outcome(world: WorldMemory, target: str, primitive: str, success: bool, *,
                  stamp: float, why: str | None = None, task: str = "test") -> None:
    """How an interaction ended, as the analyzer records it in the target's task history."""
    verdict, outcome = _outcome(target, primitive, success, why)
    analyzed(world, HarnessResult((verdict,), (), (), (outcome,)), primitive, stamp,
             name=f"{target}-{primitive}-outcome-{stamp}", task=task)


def _outcome(target: str, primitive: str, success: bool, why: str | None = None
             ) -> tuple[Verdict, OutcomeUpdate]:
    claim = OutcomeClaim(target, primitive, success, why,
                         "success" if success else "fixture_locked", 0.9)
    verdict = _admit(claim)
    return verdict, OutcomeUpdate.admitted(claim, verdict)


def analyzed(world: WorldMemory, result: HarnessResult, primitive: str, stamp: float, *,
             name: str, release: Sequence[float] | None = None, task: str = "test",
             detections: dict[str, np.ndarray] | None = None) -> None:
    """Writes to memory what the analyzer writes for these verdicts of one ``primitive``:
    ``plan_writes`` over the memory as it reads it, each update applied as ``update_node``
    applies it. ``name`` makes the update ids of this analysis."""
    vocab = load_reasoning_config().vocabulary
    intent = {"inspect": "inspection"}.get(primitive, primitive)
    ctx = WriteContext(
        interaction_id=name, primitive=primitive, task=task, stamp=stamp, keyframe_ids=(),
        frame_keyframes={}, detection_refs=frozenset(), known=world.state.nodes.__contains__,
        event_prefix=f"analyzer:{name}")
    where = Whereabouts(world=world_view(world), intent=intent, detections=detections or {},
                        release_point=None if release is None else np.asarray(release),
                        fixture_labels=frozenset(vocab.fixture_labels), synonyms=vocab.synonyms)
    for plan in plan_writes(result, ctx, where=where):
        if plan.update is not None:
            world.apply_update(plan.update, stamp=stamp)


def admit_property(world: WorldMemory, node_id: str, name: str, value: object, *,
                   stamp: float, confidence: float = 0.9, is_opened: bool | None = None) -> None:
    """An interaction revealed ``name`` = ``value`` of a node, as the analyzer writes it."""
    claim = PropertyClaim(node_id, name, value, confidence, "seen by the test",
                          is_opened=is_opened)
    analyzed(world, HarnessResult((_admit(claim),), (), (), ()), "open", stamp,
             name=f"{node_id}-{name}-{stamp}")


def admit_contents(world: WorldMemory, fixture_id: str, names: Sequence[str], *,
                   stamp: float) -> None:
    """An inspection showed these things inside a fixture (nothing when empty), as the analyzer
    writes it; things memory holds a node for inside the fixture become its children."""
    claims = ([_admit(ContentClaim(fixture_id, n, "", "seen inside")) for n in names]
              or [_admit(EmptyClaim(fixture_id, "nothing inside"))])
    update = ContentsUpdate(fixture_id, tuple(ContentItem(n, "") for n in names), not names,
                            "seen inside", "inspect", tuple(claims), ())
    analyzed(world, HarnessResult(tuple(claims), (), (update,), ()), "inspect", stamp,
             name=f"{fixture_id}-contents-{stamp}")


def admit_placed(world: WorldMemory, node_id: str, holder: str, *, stamp: float) -> None:
    """The robot picked the node up and put it on or in ``holder`` where it lies, as the
    analyzer writes the two interactions (hand, then the holder)."""
    for primitive, target in (("pick", node_id), ("place", holder)):
        verdict, outcome = _outcome(target, primitive, True)
        analyzed(world, HarnessResult((verdict,), (), (), (outcome,)), primitive, stamp,
                 name=f"{node_id}-{primitive}-{stamp}", release=world.state.nodes[node_id].centroid)


def see(world: WorldMemory, label: str, position: Sequence[float], *, stamp: float,
        half: float = OBJECT_HALF_SIZE) -> str:
    """The cameras saw a thing of ``label`` at ``position``: the node it was stored as."""
    events = world.ingest([observation(label, position, half, stamp)])
    return str(events[0].payload["node_id"])


@dataclass
class Kitchen:
    """Ground truth plus the executor."""

    world: WorldMemory
    fixtures: dict[str, Fixture]
    executed: list[ExecutableStep] = field(default_factory=list)
    hand: str | None = None
    stamp: float = 100.0
    object_nodes: dict[tuple[str, str], str] = field(default_factory=dict)
    writes: int = 0
    drops: int = 0  # places whose object falls off the destination (the first ``drops``)

    def _tick(self) -> float:
        self.stamp += 1.0
        return self.stamp

    def _analyzed(self, step: ExecutableStep, result: HarnessResult, stamp: float, *,
                  release: Sequence[float] | None = None) -> None:
        """Writes what the analyzer writes for these admitted verdicts."""
        self.writes += 1
        analyzed(self.world, result, step.primitive, stamp, name=f"kitchen-{self.writes}",
                 release=release)

    def _dropped(self, step: ExecutableStep, held: str, stamp: float) -> ExecutionOutcome:
        """The jaws opened over the destination and the thing fell to the floor in front of
        it: the executor reports the place done, the analyzer sees the fall (its failure cites
        the sighting on the floor) and takes the thing out of the hand to where it lies."""
        self.drops -= 1
        self.hand = None
        x, y, z = (float(v) for v in self.world.state.nodes[step.target].centroid)
        floor = np.array([x - 0.3, y, 0.05])
        seen = f"det:{held}@{stamp:.3f}:pole"
        claim = OutcomeClaim(step.target, "place", False, "it fell off", "other", 0.9)
        verdict = Verdict(claim, Decision.ADMIT, "seen on the floor", (seen,), "kitchen",
                          interaction_id="kitchen")
        self.writes += 1
        analyzed(self.world, HarnessResult((verdict,), (), (), (OutcomeUpdate.admitted(
            claim, verdict),)), "place", stamp, name=f"kitchen-{self.writes}",
            release=(x, y, z + 0.1), detections={seen: floor})
        return ExecutionOutcome(Feedback(False, (Effect(EffectKind.RELEASE, held),)),
                                "PLACED; the analyzer found it failed: it fell off", stamp,
                                code="PLACED", reported=True)

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        """Act on the ground truth and write what the robot's pipeline would to memory."""
        self.executed.append(step)
        stamp = self._tick()
        target = step.target
        fixture = self.fixtures.get(target)
        if step.primitive == "move_to":
            return ExecutionOutcome(Feedback(True, (Effect(EffectKind.ARRIVE, target),)),
                                    "arrived", stamp)
        if step.primitive in ("open", "close"):
            assert fixture is not None
            if fixture.locked:
                locked = _admit(PropertyClaim(target, "locked", True, 0.85,
                                              "grip held, door did not move"))
                verdict, outcome = _outcome(target, step.primitive, False, "locked")
                self._analyzed(step, HarnessResult((locked, verdict), (), (), (outcome,)),
                               stamp)
                return ExecutionOutcome(Feedback(False), "locked: door did not move", stamp)
            fixture.is_open = step.primitive == "open"
            opened = _admit(PropertyClaim(target, "openable", True, 0.9, "door moved",
                                          is_opened=fixture.is_open))
            verdict, outcome = _outcome(target, step.primitive, True)
            self._analyzed(step, HarnessResult((opened, verdict), (), (), (outcome,)), stamp)
            effect = Effect(EffectKind.STATE, target, target="is_open", value=fixture.is_open)
            word = "opened" if fixture.is_open else "closed"
            return ExecutionOutcome(Feedback(True, (effect,)), word, stamp)
        if step.primitive == "inspect":
            assert fixture is not None
            if fixture.opens and not fixture.is_open:
                return ExecutionOutcome(Feedback(False), "closed: nothing visible", stamp)
            # the cameras see what is inside (perception's write), then the analyzer admits it
            x, y, z = fixture.position
            self.world.ingest([observation(name, (x, y, z - 0.05), OBJECT_HALF_SIZE, stamp,
                                           camera="wrist")
                               for name in fixture.contents
                               if (target, name) not in self.object_nodes])
            claims = ([_admit(ContentClaim(target, name, "", "seen inside"))
                       for name in fixture.contents]
                      or [_admit(EmptyClaim(target, "nothing inside"))])
            contents = ContentsUpdate(target, tuple(ContentItem(n, "") for n in fixture.contents),
                                      not fixture.contents, "seen inside", "inspect",
                                      tuple(claims), ())
            self._analyzed(step, HarnessResult(tuple(claims), (), (contents,), ()), stamp)
            for name in fixture.contents:
                child = next((c for c in self.world.state.children.get(target, ())
                              if self.world.state.nodes[c].label == name), None)
                if child is not None:
                    self.object_nodes[(target, name)] = child
            return ExecutionOutcome(Feedback(True), f"saw {list(fixture.contents)}", stamp)
        if step.primitive == "pick":
            if self.hand is not None:
                return ExecutionOutcome(Feedback(False), "hand full", stamp)
            self.hand = target
            verdict, outcome = _outcome(target, "pick", True)
            self._analyzed(step, HarnessResult((verdict,), (), (), (outcome,)), stamp)
            return ExecutionOutcome(Feedback(True, (Effect(EffectKind.GRASP, target),)),
                                    "grasped", stamp)
        if step.primitive == "place":
            held = self.hand
            assert held is not None
            if self.drops:
                return self._dropped(step, held, stamp)
            relation = "container" if fixture is not None and fixture.opens else "surface"
            verdict, outcome = _outcome(target, "place", True)
            node = self.world.state.nodes[target]
            self._analyzed(step, HarnessResult((verdict,), (), (), (outcome,)), stamp,
                           release=node.centroid)
            self.hand = None
            effect = Effect(EffectKind.PLACE, held, target=target, value=relation)
            return ExecutionOutcome(Feedback(True, (effect,)), "placed", stamp)
        return ExecutionOutcome(Feedback(False), f"unknown primitive {step.primitive}", stamp)


def build_kitchen(
    root: Path, layout: Sequence[tuple[str, Fixture]]
) -> tuple[WorldMemory, TaskMemory, Kitchen]:
    """World and task memory in ``root`` with the layout's fixtures as the cameras saw them.

    Each entry is (expected node id, fixture); the id must be what the label yields.
    """
    world = WorldMemory.open(root / "world.db")
    task = TaskMemory.open(root / "task.db")
    # one look at the whole kitchen: each fixture becomes its own node
    events = world.ingest([observation(fx.label, fx.position, FIXTURE_HALF_SIZE, 1.0)
                           for _, fx in layout])
    ids = [e.payload["node_id"] for e in events]
    assert ids == [expected for expected, _ in layout], ids
    return world, task, Kitchen(world, dict(layout))


@contextmanager
def seeded_world(path: Path, nodes: Sequence[tuple[str, tuple[float, float, float]]],
                 parents: Sequence[tuple[str, str, str]] = ()) -> Iterator[WorldMemory]:
    """World memory at ``path``, closed on exit: ``nodes`` (label, position) as one look of the
    cameras at 1.0 s, then ``parents`` (child id, parent id, relation) as the analyzer writes
    them at 2.0 s."""
    world = WorldMemory.open(path)
    if nodes:
        half = {n: FIXTURE_HALF_SIZE if n in _FIXTURE_WORDS else OBJECT_HALF_SIZE
                for n, _ in nodes}
        world.ingest([observation(label, position, half[label], 1.0)
                      for label, position in nodes])
    for index, (child, parent, relation) in enumerate(parents):
        world.apply_update(NodeUpdate(child, update_id=f"seed:{index}", parent=(parent, relation),
                                      verdict_reason="seeded"), stamp=2.0)
    try:
        yield world
    finally:
        world.close()


def locked_unlocked_layout() -> list[tuple[str, Fixture]]:
    """messymem C.1: cabinet_1 locked and empty, cabinet_2 fruit, cabinet_3 ketchup."""
    return [
        ("counter_1", Fixture("counter", (1.0, 0.0, 0.9), opens=False, contents=("sponge",))),
        ("cabinet_1", Fixture("cabinet", (1.1, 0.6, 1.6), locked=True)),
        ("cabinet_2", Fixture("cabinet", (1.1, 0.0, 1.6),
                              contents=("banana", "apple", "orange", "lemon"))),
        ("cabinet_3", Fixture("cabinet", (1.1, -0.6, 1.6), contents=("ketchup",))),
    ]


def session_for(
    world: WorldMemory,
    task: TaskMemory,
    config: PlannerConfig | None = None,
    keyframes: KeyframeStore | None = None,
    **kwargs: object,
) -> PlannerSession:
    """A session with the repository config (offline planner unless a policy is given)."""
    cfg = config or load_planner_config()
    return PlannerSession(world, task, cfg, keyframes=keyframes, **kwargs)


RECORDED = Path(__file__).resolve().parent / "recorded"


def recorded_text(name: str) -> str:
    """Assistant content of a recorded chat completion."""
    data = json.loads((RECORDED / name).read_text(encoding="utf-8"))
    return str(data["choices"][0]["message"]["content"])


class RecordedBackend:
    """A VLM backend replaying recorded answers in order (and keeping the requests)."""

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.requests: list[VlmRequest] = []

    @property
    def name(self) -> str:
        return "recorded"

    def complete(self, request: VlmRequest) -> VlmResponse:
        self.requests.append(request)
        if not self.answers:
            raise BackendUnavailableError("no recorded answer left")
        return VlmResponse(text=self.answers.pop(0), backend="recorded",
                           model="Qwen2.5-VL-7B-Instruct", latency_s=0.0)
