"""Judging instructions from simulator state and the primitive log, never from a planner's word."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mimir_sim.errors import PrimitiveError
from mimir_sim.scenario import CriterionSpec, InstructionSpec
from mimir_sim.sim import KitchenSim, PrimitiveRecord


@dataclass(frozen=True)
class Verdict:
    """Whether an instruction succeeded, with one reason per criterion."""

    success: bool
    reasons: tuple[str, ...]


def _records(sim: KitchenSim, index: int | None) -> list[PrimitiveRecord]:
    return [r for r in sim.log if index is None or r.instruction == index]


def object_discovered(sim: KitchenSim, object_id: str, index: int | None = None) -> bool:
    """An inspect of the object's fixture happened while that fixture was open."""
    home = sim.scene.objects[object_id].fixture
    for record in _records(sim, index):
        was_open = record.measurements.get("was_open", 0.0) > 0.5
        if (
            record.name == "inspect"
            and record.target == home
            and (was_open or not sim.scene.fixtures[home].is_openable)
        ):
            return True
    return False


def check_criterion(
    sim: KitchenSim,
    criterion: CriterionSpec,
    index: int | None = None,
    answer: Sequence[str] = (),
) -> tuple[bool, str]:
    """Evaluate one criterion; ``answer`` carries ids the agent named (selections, recalls)."""
    ctype = criterion.type
    if ctype == "fixture_opened":
        assert criterion.fixture is not None
        ok = sim.max_opening.get(criterion.fixture, 0.0) > 0.0 and sim.is_open(criterion.fixture)
        return ok, f"{criterion.fixture} open: {ok}"
    if ctype == "object_discovered":
        assert criterion.object is not None
        ok = object_discovered(sim, criterion.object, index)
        return ok, f"{criterion.object} discovered: {ok}"
    if ctype == "open_attempted":
        tried = any(
            r.name == "open" and r.target == criterion.fixture for r in _records(sim, index)
        )
        return tried, f"open attempted on {criterion.fixture}: {tried}"
    if ctype == "object_on_fixture":
        assert criterion.object is not None
        where = sim.object_fixture(criterion.object)
        return where == criterion.fixture, f"{criterion.object} is on/in {where}"
    if ctype == "object_removed_from":
        assert criterion.object is not None
        where = sim.object_fixture(criterion.object)
        return where != criterion.fixture, f"{criterion.object} is on/in {where}"
    if ctype == "destination_selected":
        ok = criterion.fixture in answer
        return ok, f"selected {list(answer)}, expected {criterion.fixture}"
    if ctype == "answer_objects":
        ok = set(criterion.answer) == set(answer)
        return ok, f"answered {sorted(answer)}, expected {sorted(criterion.answer)}"
    raise PrimitiveError(f"unknown criterion type {ctype!r}")


def judge_instruction(
    sim: KitchenSim,
    instruction: InstructionSpec,
    index: int | None = None,
    answer: Sequence[str] = (),
) -> Verdict:
    """All success criteria hold and no failure criterion holds."""
    reasons: list[str] = []
    success = True
    for crit in instruction.success:
        ok, why = check_criterion(sim, crit, index, answer)
        success &= ok
        reasons.append(why)
    for crit in instruction.failure:
        hit, why = check_criterion(sim, crit, index, answer)
        success &= not hit
        reasons.append(f"failure condition {why}")
    return Verdict(success, tuple(reasons))
