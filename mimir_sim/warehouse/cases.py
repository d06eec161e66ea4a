"""MemTransfer cases: a task, four demonstrations, a test episode, and its copy with a passage
closed.

Every trajectory is a shortest route on the true map (:func:`planning.shortest`), verified by
replay. Per case (the rules of :class:`CaseRules`):

- ``original``: from the case's start;
- ``opposite``: the same cell, facing the other way;
- ``nearby``: 2-4 cells along the start's aisle in a straight line, the same heading, sharing at
  least half of the original route's edges;
- ``distant``: at least 6 cells away in another aisle, turned 90 degrees, sharing at most half
  of the original route's edges;
- ``test``: a start on none of the four demonstrations' cells from which no item the task names
  is in view, with a route 0.75-1.35 times as long as the original;
- ``blocked``: the test start on a copy of the map where a passage the test route and at least
  one demonstration cross is closed (every floor cell across the aisle there), with another,
  longer way left open; its route is the shortest one on that map.

:func:`violations` checks a case (one read from a file, too) against the rules and names each
rule it breaks; the generator keeps drawing until a case breaks none and, when it gives up, says
which rules the drawn cases broke.
"""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mimir_sim.warehouse.layout import STEPS, Cell, Layout, Pose, WarehouseError
from mimir_sim.warehouse.planning import NoRouteError, Replay, edges, replay, shortest
from mimir_sim.warehouse.tasks import TASK_TYPES, Stage, Task

DEMOS = ("original", "opposite", "nearby", "distant")
FORMAT = "mimir.memtransfer.cases/1"


class CaseRuleError(WarehouseError):
    """A drawn case that breaks a rule; ``rule`` names it."""

    def __init__(self, rule: str, detail: str = "") -> None:
        super().__init__(f"{rule}: {detail}" if detail else rule)
        self.rule = rule


@dataclass(frozen=True)
class CaseRules:
    """The rules a case keeps (see the module text)."""

    cases_per_type: int = 10
    max_steps: int = 200
    min_original_steps: int = 10
    nearby_shift: tuple[int, int] = (2, 4)
    nearby_shared_min: float = 0.5
    distant_min_cells: int = 6
    distant_shared_max: float = 0.5
    test_length_ratio: tuple[float, float] = (0.75, 1.35)
    max_cross_section: int = 3
    attempts: int = 300
    candidates: int = 40


@dataclass(frozen=True)
class Trajectory:
    """A start pose and the actions from it."""

    start: Pose
    actions: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """The trajectory for JSON."""
        return {"start": self.start.to_list(), "actions": list(self.actions)}

    @classmethod
    def from_dict(cls, data: object) -> Trajectory:
        """A trajectory read back from JSON.

        Raises:
            WarehouseError: not a start pose and a list of action names.
        """
        if not isinstance(data, Mapping) or set(data) != {"start", "actions"}:
            raise WarehouseError(f"a trajectory has start and actions, got {data!r}")
        actions = data["actions"]
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise WarehouseError("trajectory actions are a list of action names")
        return cls(Pose.from_list(data["start"]), tuple(actions))


@dataclass(frozen=True)
class Case:
    """One MemTransfer case."""

    id: str
    task: Task
    demos: Mapping[str, Trajectory]
    test: Trajectory
    blocked: frozenset[Cell]
    blocked_test: Trajectory

    @property
    def origin(self) -> Pose:
        """The case's original start."""
        return self.demos["original"].start

    def to_dict(self) -> dict[str, object]:
        """The case for JSON."""
        return {"id": self.id, "task": self.task.to_dict(),
                "demos": {name: self.demos[name].to_dict() for name in DEMOS},
                "test": self.test.to_dict(), "blocked": [list(c) for c in sorted(self.blocked)],
                "blocked_test": self.blocked_test.to_dict()}

    @classmethod
    def from_dict(cls, data: object, layout: Layout) -> Case:
        """A case read back from JSON (its task checked against ``layout``).

        Raises:
            WarehouseError: a missing or unknown key or a malformed part.
        """
        keys = {"id", "task", "demos", "test", "blocked", "blocked_test"}
        if not isinstance(data, Mapping) or set(data) != keys:
            raise WarehouseError(f"a case has exactly the keys {sorted(keys)}")
        demos = data["demos"]
        if not isinstance(demos, Mapping) or set(demos) != set(DEMOS):
            raise WarehouseError(f"case {data['id']!r}: demos are {', '.join(DEMOS)}")
        blocked = data["blocked"]
        if not isinstance(blocked, list) or not all(
                isinstance(c, list) and len(c) == 2 and all(isinstance(v, int) for v in c)
                for c in blocked):
            raise WarehouseError(f"case {data['id']!r}: blocked is a list of [x, y] cells")
        return cls(str(data["id"]), Task.from_dict(data["task"], layout),
                   {name: Trajectory.from_dict(demos[name]) for name in DEMOS},
                   Trajectory.from_dict(data["test"]), frozenset((c[0], c[1]) for c in blocked),
                   Trajectory.from_dict(data["blocked_test"]))


def draw_task(layout: Layout, task_type: int, rng: random.Random) -> Task:
    """A task of ``task_type`` on random kinds or categories of ``layout``.

    Raises:
        WarehouseError: an unknown type, or a layout without what the type needs.
    """
    if task_type not in TASK_TYPES:
        raise WarehouseError(f"unknown task type {task_type!r}")
    kinds = sorted({item.kind for item in layout.items})
    several = [k for k in kinds if len(layout.of_kind(k)) >= 2]
    categories = sorted({item.category for item in layout.items
                         if 2 <= len(layout.of_category(item.category)) <= 8})
    if len(kinds) < 2 or not several or not categories:
        raise WarehouseError("the layout needs two kinds, one with two items, and a category "
                             "of two to eight items")

    def ids(kind: str) -> tuple[str, ...]:
        return tuple(item.id for item in layout.of_kind(kind))

    home = "then return to where you started"

    def an(name: str) -> str:
        return f"an {name}" if name[0] in "aeiou" else f"a {name}"

    if task_type in (1, 3, 7, 8):
        a = rng.choice(several if task_type in (3, 8) else kinds)
        if task_type == 1:
            return Task(1, f"Go to {an(a)}.", (Stage("any", (ids(a),)),))
        if task_type == 7:
            return Task(7, f"Go to {an(a)}, {home}.", (Stage("any", (ids(a),)), Stage("origin")))
        each = tuple((i,) for i in ids(a))
        if task_type == 3:
            return Task(3, f"Visit every {a} in the warehouse.", (Stage("all", each),))
        return Task(8, f"Visit every {a} in the warehouse, {home}.",
                    (Stage("all", each), Stage("origin")))
    if task_type in (2, 4):
        c = rng.choice(categories)
        members = tuple(item.id for item in layout.of_category(c))
        if task_type == 2:
            return Task(2, f"Go to any item of the {c} category.", (Stage("any", (members,)),))
        return Task(4, f"Visit every item of the {c} category.",
                    (Stage("all", tuple((i,) for i in members)),))
    a, b = rng.sample(kinds, 2)
    while layout.kinds[a].category == layout.kinds[b].category:
        a, b = rng.sample(kinds, 2)
    first, second = Stage("any", (ids(a),)), Stage("any", (ids(b),))
    if task_type == 5:
        return Task(5, f"Visit {an(a)} and {an(b)}, in either order.",
                    (Stage("all", (ids(a), ids(b))),))
    if task_type == 6:
        return Task(6, f"Visit {an(a)}, then {an(b)}.", (first, second))
    if task_type == 9:
        return Task(9, f"Go to {an(a)}, then {an(b)}, then back to that same {a}.",
                    (first, second, Stage("same", same_as=0)))
    return Task(10, f"Go to {an(a)}, then {an(b)}, {home}.", (first, second, Stage("origin")))


def generate(layout: Layout, seed: int, rules: CaseRules = CaseRules(),
             types: Sequence[int] = tuple(TASK_TYPES)) -> list[Case]:
    """``rules.cases_per_type`` cases of each type, drawn from ``seed`` (the same seed and layout
    give the same cases).

    Raises:
        CaseRuleError: a type for which no case keeping every rule was drawn in
        ``rules.attempts`` tries; the message counts the rules the drawn cases broke.
    """
    cases = []
    for task_type in types:
        taken: set[tuple[str, Pose]] = set()
        for n in range(rules.cases_per_type):
            rng = random.Random(f"memtransfer/{seed}/{task_type}/{n}")
            broken: Counter[str] = Counter()
            for _ in range(rules.attempts):
                task = draw_task(layout, task_type, rng)
                start = _random_pose(layout, rng)
                if (task.instruction, start) in taken:
                    broken["distinct cases"] += 1
                    continue
                try:
                    case = draw_case(layout, f"t{task_type:02d}c{n:02d}", task, start, rng=rng,
                                     rules=rules)
                except CaseRuleError as err:
                    broken[err.rule] += 1
                    continue
                taken.add((task.instruction, start))
                cases.append(case)
                break
            else:
                raise CaseRuleError("no case", f"type {task_type} case {n}: none kept every rule "
                                    f"in {rules.attempts} draws; broken: {dict(broken)}")
    return cases


def _random_pose(layout: Layout, rng: random.Random) -> Pose:
    x, y = rng.choice(layout.floor_cells)
    return Pose(x, y, rng.randrange(4))


def draw_case(layout: Layout, case_id: str, task: Task, start: Pose, *, rng: random.Random,
              rules: CaseRules = CaseRules()) -> Case:
    """The case of ``task`` from ``start``, its other starts and the closed passage drawn from
    ``rng``.

    Raises:
        CaseRuleError: a rule no candidate keeps (``rule`` names it).
    """
    draw = _Drawing(layout, task, rng, rules,
                    {layout.items_by_id[i].front for s in task.stages for i in s.items})
    if start.cell in draw.fronts:
        raise CaseRuleError("original start", "starts in front of a target")
    original = draw.route(start, "original start")
    if len(original) < rules.min_original_steps:
        raise CaseRuleError("original start", f"route of {len(original)} steps is too short")
    demos = {"original": Trajectory(start, tuple(original))}
    opposite = Pose(start.x, start.y, (start.heading + 2) % 4)
    demos["opposite"] = Trajectory(opposite, tuple(draw.route(opposite, "opposite heading")))
    shared = edges(replay(layout, task, start, original).cells)
    demos["nearby"] = draw.nearby(start, shared)
    demos["distant"] = draw.distant(start, shared)
    test = draw.test_start(demos)
    blocked, blocked_route = draw.closure(test, demos)
    case = Case(case_id, task, demos, test, blocked,
                Trajectory(test.start, tuple(blocked_route)))
    broken = violations(layout, case, rules)
    if broken:
        raise CaseRuleError(broken[0].split(":")[0], "; ".join(broken))
    return case


@dataclass(frozen=True)
class _Drawing:
    """What drawing one case's starts and closure works with."""

    layout: Layout
    task: Task
    rng: random.Random
    rules: CaseRules
    fronts: set[Cell]

    def route(self, start: Pose, rule: str, blocked: frozenset[Cell] = frozenset()
              ) -> list[str]:
        try:
            return shortest(self.layout, self.task, start, blocked=blocked,
                            limit=self.rules.max_steps)
        except NoRouteError as err:
            raise CaseRuleError(rule, str(err)) from err

    def share(self, trajectory: Trajectory, original: set[frozenset[Cell]]) -> float:
        mine = edges(replay(self.layout, self.task, trajectory.start, trajectory.actions).cells)
        return len(mine & original) / max(1, len(original))

    def nearby(self, start: Pose, shared: set[frozenset[Cell]]) -> Trajectory:
        layout, rules = self.layout, self.rules
        dx, dy = STEPS[start.heading]
        options = []
        for sign in (1, -1):
            for shift in range(1, rules.nearby_shift[1] + 1):
                cell = (start.x + sign * shift * dx, start.y + sign * shift * dy)
                if not layout.is_floor(cell) or layout.aisle(cell) != layout.aisle(start.cell):
                    break
                if shift >= rules.nearby_shift[0]:
                    options.append(Pose(cell[0], cell[1], start.heading))
        self.rng.shuffle(options)
        for pose in options:
            try:
                route = Trajectory(pose, tuple(self.route(pose, "nearby start")))
            except CaseRuleError:
                continue
            if self.share(route, shared) >= rules.nearby_shared_min:
                return route
        raise CaseRuleError("nearby start", f"no start 2-4 cells along the aisle from {start} "
                            "shares half the original route")

    def distant(self, start: Pose, shared: set[frozenset[Cell]]) -> Trajectory:
        layout, rules = self.layout, self.rules
        cells = [c for c in layout.floor_cells
                 if abs(c[0] - start.x) + abs(c[1] - start.y) >= rules.distant_min_cells
                 and layout.aisle(c) != layout.aisle(start.cell) and c not in self.fronts]
        self.rng.shuffle(cells)
        for cell in cells[:rules.candidates]:
            pose = Pose(cell[0], cell[1], (start.heading + self.rng.choice((1, 3))) % 4)
            try:
                route = Trajectory(pose, tuple(self.route(pose, "distant start")))
            except CaseRuleError:
                continue
            if self.share(route, shared) <= rules.distant_shared_max:
                return route
        raise CaseRuleError("distant start", "no start 6 or more cells away in another aisle "
                            f"from {start} keeps to half the original route")

    def test_start(self, demos: Mapping[str, Trajectory]) -> Trajectory:
        layout, rules = self.layout, self.rules
        used = {d.start.cell for d in demos.values()}
        named = {i for s in self.task.stages for i in s.items}
        length = len(demos["original"].actions)
        low, high = rules.test_length_ratio
        cells = [c for c in layout.floor_cells if c not in used and c not in self.fronts]
        self.rng.shuffle(cells)
        for cell in cells[:rules.candidates * 2]:
            pose = Pose(cell[0], cell[1], self.rng.randrange(4))
            if named.intersection(i.id for i in layout.visible(pose)):
                continue
            try:
                route = self.route(pose, "test start")
            except CaseRuleError:
                continue
            if low * length <= len(route) <= high * length:
                return Trajectory(pose, tuple(route))
        raise CaseRuleError("test start", "no start off the demonstrations' cells, with the "
                            f"targets out of view, has a route of {low}-{high} times {length} "
                            "steps")

    def closure(self, test: Trajectory, demos: Mapping[str, Trajectory]
                ) -> tuple[frozenset[Cell], list[str]]:
        layout, task = self.layout, self.task
        route = replay(layout, task, test.start, test.actions).cells
        demo_cells = [set(replay(layout, task, d.start, d.actions).cells)
                      for d in demos.values()]
        keep = self.fronts | {test.start.cell} | {d.start.cell for d in demos.values()}
        options = []
        for prev, cell in itertools.pairwise(route):
            section = cross_section(layout, cell, (cell[0] - prev[0], cell[1] - prev[1]))
            if len(section) > self.rules.max_cross_section or section & keep:
                continue
            if any(section & cells for cells in demo_cells):
                options.append(section)
        self.rng.shuffle(options)
        for section in options:
            try:
                detour = self.route(test.start, "blocked route", blocked=section)
            except CaseRuleError:
                continue
            if len(detour) > len(test.actions):
                return section, detour
        raise CaseRuleError("blocked route", "no passage on the test route that a "
                            "demonstration crosses can be closed with a longer way left open")


def cross_section(layout: Layout, cell: Cell, along: tuple[int, int]) -> frozenset[Cell]:
    """The floor cells across the aisle at ``cell`` for travel along ``along`` (a unit step)."""
    across = (along[1], along[0])
    section = {cell}
    for sign in (1, -1):
        probe = (cell[0] + sign * across[0], cell[1] + sign * across[1])
        while layout.is_floor(probe):
            section.add(probe)
            probe = (probe[0] + sign * across[0], probe[1] + sign * across[1])
    return frozenset(section)


def violations(layout: Layout, case: Case, rules: CaseRules = CaseRules()) -> list[str]:
    """Every rule ``case`` breaks on ``layout``, each as ``rule: detail`` (empty when none)."""
    task, broken = case.task, []
    runs: dict[str, Replay] = {}
    trajectories = {**case.demos, "test": case.test, "blocked": case.blocked_test}
    for name, trajectory in trajectories.items():
        try:
            runs[name] = replay(layout, task, trajectory.start, trajectory.actions,
                                blocked=case.blocked if name == "blocked" else frozenset())
        except WarehouseError as err:
            return [f"replay: the {name} route cannot run: {err}"]
    for name, run in runs.items():
        if not run.success or run.finished_at != len(run.poses) - 1:
            broken.append(f"replay: the {name} route does not finish the task at its last step")
        if run.bumps:
            broken.append(f"replay: the {name} route bumps into something")
        if len(run.poses) - 1 > rules.max_steps:
            broken.append(f"replay: the {name} route is longer than {rules.max_steps} steps")
    broken += _start_violations(layout, case, runs, rules)
    return broken


def _start_violations(layout: Layout, case: Case, runs: Mapping[str, Replay],
                      rules: CaseRules) -> list[str]:
    task, broken = case.task, []
    original, opposite = case.demos["original"].start, case.demos["opposite"].start
    if opposite != Pose(original.x, original.y, (original.heading + 2) % 4):
        broken.append("opposite heading: not the original cell turned around")
    shared = edges(runs["original"].cells)
    nearby = case.demos["nearby"].start
    shift = abs(nearby.x - original.x) + abs(nearby.y - original.y)
    dx, dy = STEPS[original.heading]
    straight = (nearby.x - original.x) * dy == (nearby.y - original.y) * dx
    if (nearby.heading != original.heading or not straight
            or not rules.nearby_shift[0] <= shift <= rules.nearby_shift[1]
            or layout.aisle(nearby.cell) != layout.aisle(original.cell)):
        broken.append("nearby start: not 2-4 cells along the original aisle with its heading")
    if len(edges(runs["nearby"].cells) & shared) < rules.nearby_shared_min * len(shared):
        broken.append("nearby start: shares less than half of the original route")
    distant = case.demos["distant"].start
    if (abs(distant.x - original.x) + abs(distant.y - original.y) < rules.distant_min_cells
            or layout.aisle(distant.cell) == layout.aisle(original.cell)
            or (distant.heading - original.heading) % 2 != 1):
        broken.append("distant start: not 6 or more cells away in another aisle, turned 90 "
                      "degrees")
    if len(edges(runs["distant"].cells) & shared) > rules.distant_shared_max * len(shared):
        broken.append("distant start: shares more than half of the original route")
    test = case.test.start
    named = {i for s in task.stages for i in s.items}
    if test.cell in {d.start.cell for d in case.demos.values()}:
        broken.append("test start: on a demonstration's start cell")
    if named.intersection(i.id for i in layout.visible(test)):
        broken.append("test start: a target is in the first view")
    low, high = rules.test_length_ratio
    length = len(case.demos["original"].actions)
    if not low * length <= len(case.test.actions) <= high * length:
        broken.append(f"test start: route of {len(case.test.actions)} steps is not {low}-{high} "
                      f"times the original {length}")
    if case.blocked_test.start != test:
        broken.append("blocked route: does not start at the test start")
    if not case.blocked or not set(runs["test"].cells) & case.blocked:
        broken.append("blocked route: the closed passage is not on the test route")
    if len(case.blocked_test.actions) <= len(case.test.actions):
        broken.append("blocked route: closing the passage does not lengthen the test route")
    if not any(set(runs[name].cells) & case.blocked for name in DEMOS):
        broken.append("blocked route: no demonstration crosses the closed passage")
    return broken


def write_cases(path: str | Path, layout: Layout, cases: Sequence[Case], seed: int) -> None:
    """Write cases to a JSON file, a case a line."""
    head = json.dumps({"format": FORMAT, "layout": layout.name, "seed": seed})[:-1]
    body = ",\n".join(json.dumps(case.to_dict()) for case in cases)
    Path(path).write_text(f'{head}, "cases": [\n{body}\n]}}\n', encoding="utf-8")


def read_cases(path: str | Path, layout: Layout) -> list[Case]:
    """The cases of a JSON file written by :func:`write_cases` for ``layout``.

    Raises:
        WarehouseError: unreadable, another format or layout, or a malformed case.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise WarehouseError(f"cannot read cases {path}: {err}") from err
    if not isinstance(data, Mapping) or data.get("format") != FORMAT:
        raise WarehouseError(f"{path} is not a {FORMAT} file")
    if data.get("layout") != layout.name:
        raise WarehouseError(f"{path} holds cases of layout {data.get('layout')!r}, not "
                             f"{layout.name!r}")
    cases = data.get("cases")
    if not isinstance(cases, list):
        raise WarehouseError(f"{path}: cases must be a list")
    return [Case.from_dict(c, layout) for c in cases]
