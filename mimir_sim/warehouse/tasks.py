"""The ten MemTransfer task types, as stages an episode completes in order, and their progress.

A task is a sequence of stages. A stage holds groups of items and is done when the agent has
stood in front of what it asks for: ``any`` item of its one group, ``all`` its groups (one item
of each, in any order), the episode's ``origin`` cell, or the ``same`` item the agent reached at
an earlier stage. Reaching a later stage's item early
does not count; only the current stage moves on (an ordered search visits A before B).

==== ===================================== =========================================
type task                                  stages
==== ===================================== =========================================
1    single object search, O -> A          any(A)
2    category search, O -> C               any(C)
3    exhaustive object search              all(each A)
4    exhaustive category search            all(each item of C)
5    unordered search, O -> {A, B}         all(A, B)
6    ordered search, O -> A -> B           any(A), any(B)
7    search with return, O -> A -> O       any(A), origin
8    exhaustive search with return         all(each A), origin
9    O -> A_i -> B -> A_i                  any(A), any(B), same(stage 0)
10   O -> A -> B -> O                      any(A), any(B), origin
==== ===================================== =========================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mimir_sim.warehouse.layout import Cell, Layout, WarehouseError

MODES = ("any", "all", "origin", "same")
TASK_TYPES = {
    1: "single object search",
    2: "category object search",
    3: "exhaustive single object search",
    4: "exhaustive category search",
    5: "unordered search",
    6: "ordered search",
    7: "search with return",
    8: "exhaustive search with return",
    9: "origin-A-B-A",
    10: "origin-A-B-origin",
}
GROUPS = {"basic search": (1, 2), "multi-object search": (3, 4, 5, 6),
          "loop": (7, 8, 9, 10)}


@dataclass(frozen=True)
class Stage:
    """One stage: its mode, its groups of item ids (``any``: one group; ``all``: one item of
    each group) or the stage it repeats (``same``)."""

    mode: str
    groups: tuple[tuple[str, ...], ...] = ()
    same_as: int = -1

    @property
    def items(self) -> tuple[str, ...]:
        """Every item the stage names."""
        return tuple(i for group in self.groups for i in group)

    def to_dict(self) -> dict[str, object]:
        """The stage for JSON."""
        data: dict[str, object] = {"mode": self.mode}
        if self.groups:
            data["groups"] = [list(g) for g in self.groups]
        if self.mode == "same":
            data["same_as"] = self.same_as
        return data


@dataclass(frozen=True)
class Task:
    """A task: its type (1-10), the instruction the agent reads, and its stages."""

    type: int
    instruction: str
    stages: tuple[Stage, ...]

    def to_dict(self) -> dict[str, object]:
        """The task for JSON."""
        return {"type": self.type, "instruction": self.instruction,
                "stages": [s.to_dict() for s in self.stages]}

    @classmethod
    def from_dict(cls, data: object, layout: Layout) -> Task:
        """A task read back from JSON and checked against ``layout``.

        Raises:
            WarehouseError: a missing key, an unknown type, mode or item, or a ``same`` stage
            that repeats no earlier ``any`` stage.
        """
        if not isinstance(data, Mapping) or set(data) != {"type", "instruction", "stages"}:
            raise WarehouseError(f"a task has type, instruction and stages, got {data!r}")
        if data["type"] not in TASK_TYPES or not isinstance(data["instruction"], str):
            raise WarehouseError(f"unknown task type {data['type']!r} or no instruction")
        raw = data["stages"]
        if not isinstance(raw, list) or not raw:
            raise WarehouseError("a task has at least one stage")
        stages = tuple(_stage(s, layout) for s in raw)
        task = cls(int(data["type"]), data["instruction"], stages)
        task.check(layout)
        return task

    def check(self, layout: Layout) -> None:
        """Raise :class:`WarehouseError` when a stage cannot be done in ``layout``."""
        for n, stage in enumerate(self.stages):
            if stage.mode not in MODES:
                raise WarehouseError(f"stage {n}: unknown mode {stage.mode!r}")
            if stage.mode in ("any", "all") and not (
                    stage.groups and all(stage.groups)):
                raise WarehouseError(f"stage {n}: an {stage.mode} stage names groups of items")
            if stage.mode == "any" and len(stage.groups) != 1:
                raise WarehouseError(f"stage {n}: an any stage has one group")
            unknown = [i for i in stage.items if i not in layout.items_by_id]
            if unknown:
                raise WarehouseError(f"stage {n}: unknown items {unknown}")
            if stage.mode == "all" and len(stage.groups) > 8:
                raise WarehouseError(f"stage {n}: at most 8 groups in an all stage")
            if stage.mode == "same" and not (
                    0 <= stage.same_as < n and self.stages[stage.same_as].mode == "any"):
                raise WarehouseError(f"stage {n}: same must name an earlier any stage")


def _stage(raw: object, layout: Layout) -> Stage:
    if not isinstance(raw, Mapping) or raw.get("mode") not in MODES:
        raise WarehouseError(f"a stage has a mode in {MODES}, got {raw!r}")
    groups = raw.get("groups", [])
    if not isinstance(groups, list) or not all(
            isinstance(g, list) and all(isinstance(i, str) for i in g) for g in groups):
        raise WarehouseError(f"stage groups are lists of item ids, got {groups!r}")
    same_as = raw.get("same_as", -1)
    if not isinstance(same_as, int) or isinstance(same_as, bool):
        raise WarehouseError(f"same_as is a stage index, got {same_as!r}")
    return Stage(str(raw["mode"]), tuple(tuple(g) for g in groups), same_as)


@dataclass(frozen=True)
class Progress:
    """How far an episode is: the current stage, the groups of an ``all`` stage reached so far
    (a bit mask over the stage's groups), and the item each finished ``any`` stage took."""

    stage: int = 0
    mask: int = 0
    chosen: tuple[str, ...] = ()

    def done(self, task: Task) -> bool:
        """Whether every stage is done."""
        return self.stage >= len(task.stages)


def advance(task: Task, layout: Layout, progress: Progress, cell: Cell, origin: Cell
            ) -> Progress:
    """The progress after the agent arrives on ``cell`` (stages may finish one after another
    on one cell: the last item of a category and the way home can share a cell)."""
    at = {item.id for item in layout.items_at(cell)}
    while not progress.done(task):
        stage = task.stages[progress.stage]
        if stage.mode == "any":
            hits = sorted(at.intersection(stage.groups[0]))
            if not hits:
                return progress
            progress = Progress(progress.stage + 1, 0, (*progress.chosen, hits[0]))
        elif stage.mode == "all":
            mask = progress.mask
            for bit, group in enumerate(stage.groups):
                if at.intersection(group):
                    mask |= 1 << bit
            if mask != (1 << len(stage.groups)) - 1:
                return Progress(progress.stage, mask, progress.chosen)
            progress = Progress(progress.stage + 1, 0, (*progress.chosen, ""))
        elif stage.mode == "origin":
            if cell != origin:
                return progress
            progress = Progress(progress.stage + 1, 0, (*progress.chosen, ""))
        else:
            if progress.chosen[stage.same_as] not in at:
                return progress
            progress = Progress(progress.stage + 1, 0, (*progress.chosen, ""))
    return progress


def goal_cells(task: Task, layout: Layout, progress: Progress, origin: Cell) -> tuple[Cell, ...]:
    """The cells that would move the current stage on (none when the task is done)."""
    if progress.done(task):
        return ()
    stage = task.stages[progress.stage]
    if stage.mode == "origin":
        return (origin,)
    if stage.mode == "same":
        return (layout.items_by_id[progress.chosen[stage.same_as]].front,)
    items: Sequence[str] = stage.items
    if stage.mode == "all":
        items = [i for bit, group in enumerate(stage.groups) if not progress.mask & (1 << bit)
                 for i in group]
    return tuple(sorted({layout.items_by_id[i].front for i in items}))


def stage_items(task: Task) -> tuple[str, ...]:
    """Every item a task names, in stage order."""
    seen: dict[str, None] = {}
    for stage in task.stages:
        for item in stage.items:
            seen.setdefault(item, None)
    return tuple(seen)
