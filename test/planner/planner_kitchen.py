"""A simulated kitchen and executor for the planner tests.

The executor plays the robot and the interaction analyzer: it acts on a ground-truth kitchen and
writes what the analyzer would admit into world memory (locked state, opened state, contents,
object nodes seen inside, parents after pick and place), then returns the feedback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mimir_memory.keyframes import KeyframeStore
from mimir_memory.task import Effect, EffectKind, Feedback, TaskMemory
from mimir_memory.world import WorldMemory
from mimir_planner.config import PlannerConfig, load_planner_config
from mimir_planner.planner import PlannerSession
from mimir_planner.primitives import ExecutableStep
from mimir_planner.reasoning.errors import BackendUnavailableError
from mimir_planner.reasoning.vlm import VlmRequest, VlmResponse
from mimir_planner.runs import ExecutionOutcome


@dataclass
class Fixture:
    """Ground truth of one fixture."""

    label: str
    position: tuple[float, float, float]
    locked: bool = False
    contents: tuple[str, ...] = ()
    opens: bool = True
    is_open: bool = False


@dataclass
class Kitchen:
    """Ground truth plus the executor."""

    world: WorldMemory
    fixtures: dict[str, Fixture]
    executed: list[ExecutableStep] = field(default_factory=list)
    hand: str | None = None
    stamp: float = 100.0
    object_nodes: dict[tuple[str, str], str] = field(default_factory=dict)

    def _tick(self) -> float:
        self.stamp += 1.0
        return self.stamp

    def execute(self, step: ExecutableStep) -> ExecutionOutcome:
        """Act on the ground truth and write analyzer-style updates to world memory."""
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
                self.world.update_node(
                    target, stamp=stamp,
                    properties={"locked": {"value": True, "confidence": 0.85,
                                           "reasoning": "grip held, door did not move"}},
                    outcome={"task": step.primitive, "success": False,
                             "failure_reason": "locked"})
                return ExecutionOutcome(Feedback(False), "locked: door did not move", stamp)
            fixture.is_open = step.primitive == "open"
            self.world.update_node(
                target, stamp=stamp,
                properties={"openable": {"value": True, "confidence": 0.9,
                                         "is_opened": fixture.is_open}},
                outcome={"task": step.primitive, "success": True})
            effect = Effect(EffectKind.STATE, target, target="is_open", value=fixture.is_open)
            word = "opened" if fixture.is_open else "closed"
            return ExecutionOutcome(Feedback(True, (effect,)), word, stamp)
        if step.primitive == "inspect":
            assert fixture is not None
            if fixture.opens and not fixture.is_open:
                return ExecutionOutcome(Feedback(False), "closed: nothing visible", stamp)
            self.world.set_contents(target, [{"name": c} for c in fixture.contents],
                                    is_empty=not fixture.contents, stamp=stamp,
                                    source_action="inspect")
            for name in fixture.contents:
                if (target, name) in self.object_nodes:
                    continue
                x, y, z = fixture.position
                event = self.world.add_node(name, (x, y, z - 0.05), stamp=stamp)
                node_id = event.payload["node_id"]
                self.world.set_parent(node_id, target, "container", stamp=stamp)
                self.object_nodes[(target, name)] = node_id
            return ExecutionOutcome(Feedback(True), f"saw {list(fixture.contents)}", stamp)
        if step.primitive == "pick":
            if self.hand is not None:
                return ExecutionOutcome(Feedback(False), "hand full", stamp)
            self.hand = target
            self.world.set_parent(target, "hand", "hand", stamp=stamp)
            return ExecutionOutcome(Feedback(True, (Effect(EffectKind.GRASP, target),)),
                                    "grasped", stamp)
        if step.primitive == "place":
            held = self.hand
            assert held is not None
            relation = "container" if fixture is not None and fixture.opens else "surface"
            self.world.set_parent(held, target, relation, stamp=stamp)
            self.hand = None
            effect = Effect(EffectKind.PLACE, held, target=target, value=relation)
            return ExecutionOutcome(Feedback(True, (effect,)), "placed", stamp)
        return ExecutionOutcome(Feedback(False), f"unknown primitive {step.primitive}", stamp)


def build_kitchen(
    root: Path, layout: Sequence[tuple[str, Fixture]]
) -> tuple[WorldMemory, TaskMemory, Kitchen]:
    """World and task memory in ``root`` with the layout's fixtures declared as nodes.

    Each entry is (expected node id, fixture); the id must be what the label yields.
    """
    world = WorldMemory.open(root / "world.db")
    task = TaskMemory.open(root / "task.db")
    fixtures: dict[str, Fixture] = {}
    for expected, fx in layout:
        event = world.add_node(fx.label, fx.position, stamp=1.0)
        assert event.payload["node_id"] == expected, event.payload["node_id"]
        fixtures[expected] = fx
    return world, task, Kitchen(world, fixtures)


@contextmanager
def seeded_world(path: Path, nodes: Sequence[tuple[str, tuple[float, float, float]]],
                 parents: Sequence[tuple[str, str, str]] = ()) -> Iterator[WorldMemory]:
    """World memory at ``path``, closed on exit, with ``nodes`` (label, position) added at
    1.0 s and then ``parents`` (child id, parent id, relation) set at 2.0 s."""
    world = WorldMemory.open(path)
    for label, position in nodes:
        world.add_node(label, position, stamp=1.0)
    for child, parent, relation in parents:
        world.set_parent(child, parent, relation, stamp=2.0)
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
    return PlannerSession(world, task, cfg, keyframes=keyframes, **kwargs)  # type: ignore[arg-type]


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
