"""Judging instructions from simulator state and the primitive log, never from a planner's word.

An object counts as discovered during an instruction when its fixture was inspected while open,
or when it was clearly in view: a :class:`VisibilityLog` filled by whoever renders the cameras
(the sim bridge) records, per instruction, the largest number of pixels each object covered in
one frame's ground-truth segmentation, and objects at or above a pixel threshold count.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from mimir_sim.errors import PrimitiveError
from mimir_sim.recording import PrimitiveRecord
from mimir_sim.scenario import CriterionSpec, InstructionSpec
from mimir_sim.sim import KitchenSim


@dataclass(frozen=True)
class Verdict:
    """Whether an instruction succeeded, with one reason per criterion."""

    success: bool
    reasons: tuple[str, ...]


class VisibilityLog:
    """Objects seen in rendered frames, per instruction, from ground-truth segmentation.

    Thread-safe: frames may be recorded by the rendering thread while a judge reads.
    """

    def __init__(self) -> None:
        self._peak: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()

    def add_frame(
        self,
        instruction: int | None,
        segmentation: npt.NDArray[np.integer],
        entity_ids: Sequence[str],
        objects: Collection[str],
    ) -> None:
        """Records the pixel count of every object in one frame's segmentation.

        Args:
            instruction: index of the instruction being run; ``None`` records nothing
                (moves between instructions belong to none).
            segmentation: (H, W) entity index per pixel, negative where no entity.
            entity_ids: entity id of every index of ``segmentation``.
            objects: ids that count as objects (fixtures, walls and the robot do not).

        Raises:
            ValueError: the segmentation is not a 2D integer image or names an index that
                ``entity_ids`` lacks.
        """
        if instruction is None:
            return
        seg = np.asarray(segmentation)
        if seg.ndim != 2 or not np.issubdtype(seg.dtype, np.integer):
            raise ValueError(
                f"segmentation must be a 2D integer image, got {seg.shape} {seg.dtype}"
            )
        valid = seg[seg >= 0]
        if valid.size == 0:
            return
        counts = np.bincount(valid.ravel())
        if counts.size > len(entity_ids):
            raise ValueError(
                f"segmentation uses index {counts.size - 1} but only {len(entity_ids)} "
                "entity ids are given"
            )
        seen = {
            entity_ids[i]: int(n)
            for i, n in enumerate(counts.tolist())
            if n > 0 and entity_ids[i] in objects
        }
        if not seen:
            return
        with self._lock:
            peak = self._peak.setdefault(instruction, {})
            for oid, pixels in seen.items():
                peak[oid] = max(peak.get(oid, 0), pixels)

    def peak_pixels(self, instruction: int | None) -> dict[str, int]:
        """Largest pixel count of every object seen in one frame (all instructions for None)."""
        with self._lock:
            if instruction is not None:
                return dict(self._peak.get(instruction, {}))
            merged: dict[str, int] = {}
            for peak in self._peak.values():
                for oid, pixels in peak.items():
                    merged[oid] = max(merged.get(oid, 0), pixels)
            return merged

    def visible(self, instruction: int | None, min_pixels: int) -> dict[str, int]:
        """Objects that covered at least ``min_pixels`` in one frame, with their peak count.

        Raises:
            ValueError: ``min_pixels`` is below 1.
        """
        if min_pixels < 1:
            raise ValueError(f"min_pixels must be at least 1, got {min_pixels}")
        return {o: n for o, n in self.peak_pixels(instruction).items() if n >= min_pixels}


def _records(sim: KitchenSim, index: int | None) -> list[PrimitiveRecord]:
    return [r for r in sim.log if index is None or r.instruction == index]


def _open_tried(records: Iterable[PrimitiveRecord], fixture: str | None) -> bool:
    """Whether any of ``records`` is an ``open`` of ``fixture``."""
    return any(r.name == "open" and r.target == fixture for r in records)


def inspected_open(sim: KitchenSim, object_id: str, index: int | None = None) -> bool:
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


def object_discovered(
    sim: KitchenSim,
    object_id: str,
    index: int | None = None,
    visible: Mapping[str, int] | None = None,
) -> bool:
    """Inspected in its open fixture, or clearly in view (``visible``: id -> peak pixels).

    This is the physical discovery only; the ``object_discovered`` criterion also needs the
    answer to name the object.
    """
    return inspected_open(sim, object_id, index) or object_id in (visible or {})


def check_criterion(
    sim: KitchenSim,
    criterion: CriterionSpec,
    index: int | None = None,
    answer: Sequence[str] = (),
    visible: Mapping[str, int] | None = None,
) -> tuple[bool, str]:
    """Evaluate one criterion.

    Args:
        sim: the simulator.
        criterion: the criterion.
        index: instruction whose primitives count (None: all).
        answer: ids the agent named (selections, recalls).
        visible: objects clearly in view during the instruction (id -> peak pixel count in
            one frame), from a :class:`VisibilityLog`; they count as discovered.
    """
    ctype = criterion.type
    if ctype == "fixture_opened":
        assert criterion.fixture is not None
        ok = sim.max_opening.get(criterion.fixture, 0.0) > 0.0 and sim.is_open(criterion.fixture)
        return ok, f"{criterion.fixture} open: {ok}"
    if ctype == "object_discovered":
        # the robot found it (inspected its open fixture, or had it clearly in view) and the
        # answer names it (bound by remembered label and position)
        assert criterion.object is not None
        inspected = inspected_open(sim, criterion.object, index)
        pixels = (visible or {}).get(criterion.object)
        named = criterion.object in answer
        ok = (inspected or pixels is not None) and named
        how = ["named in the answer" if named else "not named in the answer"]
        if inspected:
            how.append("inspected while open")
        if pixels is not None:
            how.append(f"in view with {pixels} px")
        return ok, f"{criterion.object} discovered: {ok} ({', '.join(how)})"
    if ctype == "open_attempted":
        tried = _open_tried(_records(sim, index), criterion.fixture)
        return tried, f"open attempted on {criterion.fixture}: {tried}"
    if ctype == "reopen_attempted":
        # an open tried in this instruction on a fixture already tried in an earlier one
        here = _open_tried(_records(sim, index), criterion.fixture)
        before = _open_tried(
            (
                r
                for r in sim.log
                if index is None or (r.instruction is not None and r.instruction < index)
            ),
            criterion.fixture,
        )
        hit = here and before
        return hit, f"open of {criterion.fixture} tried again after an earlier instruction: {hit}"
    if ctype == "object_on_fixture":
        assert criterion.object is not None
        where = sim.object_fixture(criterion.object)
        return where == criterion.fixture, f"{criterion.object} is on/in {where}"
    if ctype == "object_removed_from":
        assert criterion.object is not None
        where = sim.object_fixture(criterion.object)
        return where != criterion.fixture, f"{criterion.object} is on/in {where}"
    if ctype == "destination_selected":
        # exactly one fixture: an answer that lists several has not selected one
        ok = set(answer) == {criterion.fixture}
        return ok, f"selected {list(answer)}, expected {criterion.fixture} alone"
    if ctype == "answer_objects":
        ok = set(criterion.answer) == set(answer)
        return ok, f"answered {sorted(answer)}, expected {sorted(criterion.answer)}"
    raise PrimitiveError(f"unknown criterion type {ctype!r}")


def judge_instruction(
    sim: KitchenSim,
    instruction: InstructionSpec,
    index: int | None = None,
    answer: Sequence[str] = (),
    visible: Mapping[str, int] | None = None,
) -> Verdict:
    """All success criteria hold and no failure criterion holds (see :func:`check_criterion`)."""
    reasons: list[str] = []
    success = True
    for crit in instruction.success:
        ok, why = check_criterion(sim, crit, index, answer, visible)
        success &= ok
        reasons.append(why)
    for crit in instruction.failure:
        hit, why = check_criterion(sim, crit, index, answer, visible)
        success &= not hit
        reasons.append(f"failure condition {why}")
    return Verdict(success, tuple(reasons))
