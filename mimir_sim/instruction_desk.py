"""Scenario instructions on the simulation side: starting one and judging it from the simulator.

:class:`InstructionDesk` is what the bridge's ``sim/begin_instruction`` and
``sim/judge_instruction`` services call. Beginning an instruction checks its index and text,
optionally puts the robot back at the instruction's start (a move that belongs to no
instruction), applies the objects the scenario moves itself at that point (``moves``: a person
tidied up while the robot was away; kept in :attr:`InstructionDesk.moves` and reported by the
judge), and tags what follows with the index. Judging binds the entities the robot named to
simulated entities by label and remembered position (never the planner's words as ids; see
:mod:`mimir_sim.answer_binding`), records which objects were clearly visible in the
rendered frames, and evaluates every criterion with :mod:`mimir_sim.judge`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mimir.labels import label_text
from mimir_robot.requests import TargetSpec, UnknownTargetError
from mimir_sim.answer_binding import EntityResolver
from mimir_sim.judge import VisibilityLog, check_criterion, judge_instruction
from mimir_sim.rendering import Frame
from mimir_sim.scenario import InstructionSpec
from mimir_sim.scene_layout import start_pose_for
from mimir_sim.sim import KitchenSim

LOG = logging.getLogger(__name__)

# result codes; the ROS layer maps them onto the service responses' constants of the same name
NONE = "NONE"
UNKNOWN_INSTRUCTION = "UNKNOWN_INSTRUCTION"
MISMATCH = "MISMATCH"
MOVE_REFUSED = "MOVE_REFUSED"


@dataclass(frozen=True)
class NamedEntity:
    """An entity of the robot's answer: a memory node id and/or a label, maybe a position."""

    node_id: str = ""
    label: str = ""
    position: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class AppliedMove:
    """An object the scenario moved when instruction ``instruction`` began."""

    instruction: int
    object: str
    fixture: str
    slot: tuple[float, float]
    position: tuple[float, float, float]

    def describe(self) -> str:
        """One line for logs and messages."""
        return (
            f"moved {self.object} to {self.fixture} slot ({self.slot[0]:.2f}, "
            f"{self.slot[1]:.2f})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The move as JSON-ready values, for the judge's report."""
        return {
            "object": self.object,
            "fixture": self.fixture,
            "slot": list(self.slot),
            "position": list(self.position),
        }


@dataclass(frozen=True)
class BeginResult:
    """Outcome of beginning an instruction (``code`` is one of the module's codes)."""

    code: str = NONE
    message: str = ""


@dataclass(frozen=True)
class JudgeResult(BeginResult):
    """Verdict on an instruction: success, share of criteria satisfied and a JSON report."""

    success: bool = False
    progress: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def details_json(self) -> str:
        """The report as JSON (empty when the instruction does not exist)."""
        return json.dumps(self.details) if self.details else ""


class InstructionDesk:
    """Begins and judges the scenario's instructions on one simulator.

    Args:
        sim: the simulator (called from the simulation thread only, except the visibility log).
        resolver: binds answer entities to simulated entities.
        return_robot: puts the robot back at an instruction's start pose (x, y, yaw); whoever
            drives the robot decides how (the bridge moves the simulated base there).
        discover_min_pixels: an object covering this many pixels of one rendered frame's
            segmentation during an instruction counts as discovered; 0 counts inspections only.
    """

    def __init__(
        self,
        sim: KitchenSim,
        resolver: EntityResolver,
        discover_min_pixels: int,
        return_robot: Callable[[tuple[float, float, float]], None],
    ) -> None:
        self.sim = sim
        self.resolver = resolver
        self.return_robot = return_robot
        self.discover_min_pixels = discover_min_pixels
        self.visibility = VisibilityLog()
        self._objects = frozenset(sim.scene.objects)
        #: every move the scenario made, in the order they were applied (an instruction begun
        #: twice moves its objects twice)
        self.moves: list[AppliedMove] = []

    def instruction(self, index: int) -> InstructionSpec | None:
        """The scenario's instruction ``index``, or ``None``."""
        instructions = self.sim.scene.scenario.instructions
        return instructions[index] if 0 <= index < len(instructions) else None

    def _missing(self, index: int) -> str:
        count = len(self.sim.scene.scenario.instructions)
        return f"instruction {index} does not exist ({count} in all)"

    def record_frame(self, frame: Frame) -> None:
        """Count the objects a rendered frame shows for the running instruction.

        Raises:
            ValueError: the frame's segmentation does not fit its entity ids.
        """
        if frame.segmentation is None or self.discover_min_pixels <= 0:
            return
        self.visibility.add_frame(
            self.sim.instruction, frame.segmentation, frame.entity_ids, self._objects
        )

    def begin(self, index: int, text: str, reset_robot: bool) -> BeginResult:
        """Start instruction ``index``; ``text`` (if given) must match it, ignoring case.

        The robot returns to the start first (when ``reset_robot``), then the instruction's
        ``moves`` put objects where the scenario wants them (kept in :attr:`moves`; the
        judge's report lists them), then the instruction begins.

        A move that names the object the robot holds is refused (``MOVE_REFUSED``) before
        anything changes.
        """
        instruction = self.instruction(index)
        if instruction is None:
            return BeginResult(UNKNOWN_INSTRUCTION, self._missing(index))
        text = text.strip()
        if text and label_text(text) != label_text(instruction.text):
            return BeginResult(
                MISMATCH, f"instruction {index} is {instruction.text!r}, not {text!r}"
            )
        held = self.sim.holding
        if held is not None and any(move.object == held for move in instruction.moves):
            return BeginResult(
                MOVE_REFUSED,
                f"instruction {index} moves {held}, which the robot holds; place it first")
        if reset_robot:
            start = instruction.start_at or self.sim.scene.scenario.start_at
            if start is not None:
                # the return trip belongs to no instruction, so judging never counts it
                self.sim.instruction = None
                self.return_robot(start_pose_for(self.sim.scene.fixtures[start]))
        applied: list[AppliedMove] = []
        for move in instruction.moves:
            position = self.sim.relocate(move.object, move.fixture, move.slot)
            applied.append(AppliedMove(index, move.object, move.fixture, move.slot, position))
            LOG.info("instruction %d: %s", index, applied[-1].describe())
        self.moves.extend(applied)
        self.sim.begin_instruction(index)
        return BeginResult()

    def bind_answer(self, entities: Sequence[NamedEntity]) -> tuple[list[str], dict[str, str]]:
        """Simulator ids of the answer's entities, and how each name was bound (or why not)."""
        ids: list[str] = []
        bound: dict[str, str] = {}
        for entity in entities:
            name = entity.node_id or entity.label
            try:
                sim_id = self.resolver.resolve(
                    TargetSpec(entity.node_id, entity.label, entity.position)
                )
            except UnknownTargetError as err:
                bound[name] = f"unbound: {err}"
                continue
            bound[name] = sim_id
            ids.append(sim_id)
        return ids, bound

    def judge(self, index: int, entities: Sequence[NamedEntity] = ()) -> JudgeResult:
        """Judge instruction ``index`` from simulator state, the execution log and visibility.

        What the answer names reaches the judge only through binding: each remembered entity
        (label and position) binds to a simulated entity, so no caller can hand the judge a
        simulator id.
        """
        instruction = self.instruction(index)
        if instruction is None:
            return JudgeResult(UNKNOWN_INSTRUCTION, self._missing(index))
        names, bound = self.bind_answer(entities)
        visible = (
            self.visibility.visible(index, self.discover_min_pixels)
            if self.discover_min_pixels > 0
            else {}
        )
        verdict = judge_instruction(self.sim, instruction, index, names, visible)
        criteria: list[dict[str, Any]] = []
        holding = 0
        for group, crits in (("success", instruction.success), ("failure", instruction.failure)):
            for crit in crits:
                hit, reason = check_criterion(self.sim, crit, index, names, visible)
                satisfied = hit if group == "success" else not hit
                holding += int(satisfied)
                criteria.append(
                    {
                        "group": group,
                        "type": crit.type,
                        "fixture": crit.fixture,
                        "object": crit.object,
                        "answer": list(crit.answer),
                        "holds": hit,
                        "satisfied": satisfied,
                        "reason": reason,
                    }
                )
        total = len(criteria)
        progress = float(holding / total) if total else (1.0 if verdict.success else 0.0)
        details = {
            "index": index,
            "instruction": instruction.text,
            "family": instruction.family,
            "success": verdict.success,
            "sim_time": self.sim.time,
            "criteria": criteria,
            "answer_bound": bound,
            "visible_objects": visible,
            "scenario_moves": [m.as_dict() for m in self.moves if m.instruction == index],
        }
        return JudgeResult(NONE, "", verdict.success, progress, details)
