"""Memory-free sanity policies, scored on concrete layouts without physics.

A generated layout must not give its answer away: a robot that remembers nothing and only sees
where the fixtures are and where it stands should find a target no more often than chance. The
policies here open fixtures in an order fixed before they look inside anything:

- ``fixed_order``: left to right as seen from the robot (largest ``y`` first);
- ``nearest_first``: the fixture nearest the one it stands at, then the nearest not yet
  opened, and so on (ties go to the left);
- ``random``: a shuffled order from a seeded generator.

For each "finding" instruction (family ``finding`` with an ``object_discovered`` criterion on an
object in an openable fixture) a policy succeeds when the target's fixture comes among its first
``k`` openings and no fixture that a failure criterion names (``open_attempted`` or
``reopen_attempted``; the latter counted strictly, as a memory-free robot tried it before) comes
before it. Under a uniformly shuffled order that has the closed form :func:`chance_level`; a
policy that scores well above it over many generated layouts shows that the generator leaks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import comb

import numpy as np

from mimir_sim.scenario import OPENABLE_TYPES, Scenario

Policy = Callable[[Scenario, str | None, np.random.Generator], tuple[str, ...]]


@dataclass(frozen=True)
class FindingTask:
    """A finding instruction of a concrete layout, reduced to what the abstract judge needs."""

    index: int
    target: str
    home: str
    forbidden: tuple[str, ...]
    start: str | None


def candidates(scenario: Scenario) -> tuple[str, ...]:
    """The fixtures a searching robot may open: every openable fixture."""
    return tuple(f.id for f in scenario.fixtures if f.type in OPENABLE_TYPES)


def finding_tasks(scenario: Scenario) -> list[FindingTask]:
    """The finding instructions of a concrete layout whose target is behind a door."""
    home = {o.id: o.fixture for o in scenario.objects}
    openable = set(candidates(scenario))
    tasks = []
    for index, instr in enumerate(scenario.instructions):
        for move in instr.moves:
            home[move.object] = move.fixture
        if instr.family != "finding":
            continue
        targets = [c.object for c in instr.success if c.type == "object_discovered" and c.object]
        if not targets or home[targets[0]] not in openable:
            continue
        forbidden = tuple(
            c.fixture
            for c in instr.failure
            if c.type in ("open_attempted", "reopen_attempted") and c.fixture is not None
        )
        tasks.append(FindingTask(index, targets[0], home[targets[0]], forbidden,
                                 instr.start_at or scenario.start_at))
    return tasks


def fixed_order(scenario: Scenario, start: str | None, rng: np.random.Generator
                ) -> tuple[str, ...]:
    """Left to right as seen from the robot facing the wall (largest ``y`` first)."""
    del start, rng  # a fixed order looks at neither
    return tuple(sorted(candidates(scenario), key=lambda fid: -scenario.fixture(fid).y))


def nearest_first(scenario: Scenario, start: str | None, rng: np.random.Generator
                  ) -> tuple[str, ...]:
    """Greedy nearest neighbour along the wall from the start fixture (``y = 0`` without one);
    ties go to the left (larger ``y``)."""
    del rng
    here = scenario.fixture(start).y if start is not None else 0.0
    left = set(candidates(scenario))
    order: list[str] = []
    while left:
        nxt = min(left, key=lambda fid: (abs(scenario.fixture(fid).y - here),
                                         -scenario.fixture(fid).y))
        order.append(nxt)
        left.remove(nxt)
        here = scenario.fixture(nxt).y
    return tuple(order)


def random_order(scenario: Scenario, start: str | None, rng: np.random.Generator
                 ) -> tuple[str, ...]:
    """A uniformly shuffled order."""
    del start
    ids = candidates(scenario)
    return tuple(ids[int(i)] for i in rng.permutation(len(ids)))


POLICIES: dict[str, Policy] = {
    "fixed_order": fixed_order,
    "nearest_first": nearest_first,
    "random": random_order,
}


def task_success(order: tuple[str, ...], task: FindingTask, k: int) -> bool:
    """The target's fixture is among the first ``k`` openings and no forbidden fixture is
    opened before it."""
    if task.home not in order:
        return False
    position = order.index(task.home)
    return position < k and not any(f in order[:position] for f in task.forbidden)


def chance_level(task: FindingTask, fixtures: int, k: int) -> float:
    """Probability of :func:`task_success` for a uniformly shuffled order of ``fixtures``.

    The target sits at position ``p`` (1-based) with probability ``1/n``; the ``m`` distinct
    forbidden fixtures (other than the target's) must all come after it, which happens for
    ``C(n - p, m) / C(n - 1, m)`` of the arrangements of the others.
    """
    n = fixtures
    m = len(set(task.forbidden) - {task.home})
    if n < 1 or k < 1:
        raise ValueError(f"need at least one fixture and one opening, got n={n}, k={k}")
    return sum(comb(n - p, m) / comb(n - 1, m) for p in range(1, min(k, n) + 1)) / n


def score(policy: str, scenario: Scenario, k: int, rng: np.random.Generator
          ) -> dict[int, bool]:
    """Success of ``policy`` on every finding instruction of a concrete layout (by index).

    Raises:
        KeyError: unknown policy name.
    """
    choose = POLICIES[policy]
    return {
        task.index: task_success(choose(scenario, task.start, rng), task, k)
        for task in finding_tasks(scenario)
    }


def chance_levels(scenario: Scenario, k: int) -> dict[int, float]:
    """:func:`chance_level` of every finding instruction of a concrete layout (by index)."""
    n = len(candidates(scenario))
    return {task.index: chance_level(task, n, k) for task in finding_tasks(scenario)}
