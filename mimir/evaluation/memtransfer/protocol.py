"""The conditions of the MemTransfer protocol and what each gives an episode.

A setting is a condition with the demonstrations memory is built from:

- ``original``: the test starts at the case's original start on the unchanged map; memory holds
  one demonstration (``memory_demo``, the original by default: Table IV varies it) or all four;
- ``new-start``: the test starts at the case's test start, the map unchanged;
- ``blocked``: the test start, with the case's passage closed;
- ``mixed``: the test start on the unchanged map, with memory of four histories of which two
  (the nearby and distant demonstrations) are replaced by other tasks' demonstrations, either
  ``irrelevant`` (sharing no pose with the test's reference route) or ``confusable`` (sharing a
  pose and going on differently from it).

The reference length an episode's SPL is measured against is the shortest route of its start on
its map. On the blocked map, the approach is where the unchanged map's test route entered the
closed passage: an agent that gets there followed the old route to the obstacle.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

from mimir.evaluation.memtransfer.names import CONDITIONS, MIXES
from mimir_sim.warehouse.cases import DEMOS, Case, Trajectory
from mimir_sim.warehouse.layout import Cell, Layout, Pose, WarehouseError
from mimir_sim.warehouse.planning import replay
from mimir_sim.warehouse.tasks import Task


@dataclass(frozen=True)
class Setting:
    """A condition and the memory it is tested with."""

    condition: str
    demos: int = 4
    memory_demo: str = "original"
    mix: str = "irrelevant"

    def __post_init__(self) -> None:
        if self.condition not in CONDITIONS:
            raise WarehouseError(f"unknown condition {self.condition!r}; one of {CONDITIONS}")
        if self.demos not in (1, 4):
            raise WarehouseError(f"demos must be 1 or 4, got {self.demos}")
        if self.memory_demo not in DEMOS:
            raise WarehouseError(f"memory_demo must be one of {DEMOS}, got {self.memory_demo!r}")
        if self.mix not in MIXES:
            raise WarehouseError(f"mix must be one of {MIXES}, got {self.mix!r}")
        if self.condition == "mixed" and self.demos != 4:
            raise WarehouseError("the mixed condition replaces two of four demonstrations")

    @property
    def key(self) -> str:
        """A short name: ``new-start/4``, ``original/1:nearby``, ``mixed/4:confusable``."""
        key = f"{self.condition}/{self.demos}"
        if self.demos == 1 and self.memory_demo != "original":
            key += f":{self.memory_demo}"
        if self.condition == "mixed":
            key += f":{self.mix}"
        return key

    @classmethod
    def from_key(cls, key: str) -> Setting:
        """The setting a :attr:`key` names.

        Raises:
            WarehouseError: not a key of a valid setting.
        """
        head, _, tail = key.partition(":")
        condition, _, demos = head.partition("/")
        if not demos.isdigit():
            raise WarehouseError(f"a setting is condition/demos[:variant], got {key!r}")
        if condition == "mixed":
            return cls(condition, int(demos), mix=tail or "irrelevant")
        return cls(condition, int(demos), memory_demo=tail or "original")


#: The settings of Tables III and V and of the mixed-history comparison.
DEFAULT_SETTINGS = (Setting("original", 1), Setting("new-start", 1), Setting("new-start", 4),
                    Setting("blocked", 4), Setting("mixed", 4, mix="irrelevant"),
                    Setting("mixed", 4, mix="confusable"))
#: Table IV: the test at the original start, memory from one demonstration of each start.
START_SETTINGS = tuple(Setting("original", 1, memory_demo=d) for d in DEMOS)


@dataclass(frozen=True)
class History:
    """A demonstration in memory: whose case and task it was, and the trajectory."""

    case_id: str
    demo: str
    task: Task
    trajectory: Trajectory


@dataclass(frozen=True)
class EpisodePlan:
    """What one episode of a case under a setting starts from."""

    case: Case
    setting: Setting
    start: Pose
    blocked: frozenset[Cell]
    reference_steps: int
    histories: tuple[History, ...]
    approach: frozenset[Cell] = frozenset()


def plan_episode(layout: Layout, case: Case, setting: Setting, cases: Sequence[Case]
                 ) -> EpisodePlan:
    """The start, map, reference and memory of ``case`` under ``setting`` (``cases``: every
    case, where the mixed condition finds other tasks' histories).

    Raises:
        WarehouseError: the mixed condition finds too few other histories of its kind.
    """
    own = [History(case.id, name, case.task, case.demos[name]) for name in DEMOS]
    memory = [h for h in own if setting.demos == 4 or h.demo == setting.memory_demo]
    if setting.condition == "original":
        original = case.demos["original"]
        return EpisodePlan(case, setting, original.start, frozenset(), len(original.actions),
                           tuple(memory))
    if setting.condition == "blocked":
        cells = replay(layout, case.task, case.test.start, case.test.actions).cells
        approach = frozenset(a for a, b in itertools.pairwise(cells) if b in case.blocked)
        return EpisodePlan(case, setting, case.test.start, case.blocked,
                           len(case.blocked_test.actions), tuple(memory), approach)
    if setting.condition == "mixed":
        memory = [h for h in own if h.demo in ("original", "opposite")]
        memory += _others(layout, case, setting.mix, cases)
    return EpisodePlan(case, setting, case.test.start, frozenset(), len(case.test.actions),
                       tuple(memory))


_POSES: dict[tuple[Task, Trajectory], tuple[Pose, ...]] = {}


def _poses(layout: Layout, task: Task, trajectory: Trajectory) -> tuple[Pose, ...]:
    key = (task, trajectory)
    if key not in _POSES:
        _POSES[key] = replay(layout, task, trajectory.start, trajectory.actions).poses
    return _POSES[key]


def _others(layout: Layout, case: Case, mix: str, cases: Sequence[Case]) -> list[History]:
    run = replay(layout, case.task, case.test.start, case.test.actions)
    test_poses = set(run.poses)
    following = dict(zip(run.poses, case.test.actions, strict=False))
    found = []
    for other in cases:
        if other.task.type == case.task.type or other.id == case.id:
            continue
        for name in DEMOS:
            demo = other.demos[name]
            poses = _poses(layout, other.task, demo)
            shared = test_poses.intersection(poses)
            if mix == "irrelevant":
                fits = not shared
            else:
                fits = any(pose in following and n < len(demo.actions)
                           and demo.actions[n] != following[pose]
                           for n, pose in enumerate(poses))
            if fits:
                found.append(History(other.id, name, other.task, demo))
    if len(found) < 2:
        raise WarehouseError(f"case {case.id}: fewer than two {mix} histories of other tasks")
    return random.Random(f"{case.id}/{mix}").sample(found, 2)
