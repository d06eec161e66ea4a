"""Policies that act in MemTransfer episodes.

A policy is told how an episode starts (:class:`Brief`) and then picks one action per
observation. Two reference policies check the harness itself, without a model:

- ``oracle`` reads the true map, closed passage included, and follows a shortest route: it
  bounds what any memory could give (every case solved, SPL 1);
- ``no_memory`` ignores memory and the image: it explores the warehouse from its own pose and the
  feedback of its moves (a move that fails marks the cell ahead as not passable), always
  towards the nearest cell it has not stood on, goes back to the start or to an earlier item
  when a stage asks for it, and never turns (the four moves need no heading). It bounds what a
  policy achieves with no past at all.

Neither sends a prompt, so both cost no images or tokens.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol

from mimir.evaluation.memtransfer.protocol import EpisodePlan
from mimir_sim.warehouse.episode import Observation
from mimir_sim.warehouse.layout import MOVES, STEPS, Cell, Layout, Pose, moved
from mimir_sim.warehouse.planning import shortest

_RELATIVE = {turn: action for action, turn in MOVES.items()}


@dataclass(frozen=True)
class Brief:
    """How an episode starts, as a policy may know it: the plan (memory included), the
    warehouse's outer size, and the seed of its run."""

    plan: EpisodePlan
    extent: tuple[int, int]
    seed: int


@dataclass
class Cost:
    """What a policy's prompts held, summed over an episode."""

    prompts: int = 0
    images: int = 0
    tokens: int = 0


class Policy(Protocol):
    """Picks actions in an episode."""

    name: str
    cost: Cost

    def begin(self, brief: Brief) -> None:
        """Prepare for an episode."""

    def act(self, observation: Observation) -> str:
        """The next action."""


class OraclePolicy:
    """Follows the shortest route on the true map (privileged: the harness's upper bound)."""

    name = "oracle"

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.cost = Cost()
        self._route: list[str] = []

    def begin(self, brief: Brief) -> None:
        """Plan the whole route on the true map, closed passage included."""
        plan = brief.plan
        self.cost = Cost()
        self._route = shortest(self.layout, plan.case.task, plan.start, blocked=plan.blocked)
        self._route.reverse()

    def act(self, observation: Observation) -> str:
        """The next action of the route."""
        return self._route.pop() if self._route else "turn_around"


@dataclass
class _Explored:
    origin: Cell
    visited: set[Cell] = field(default_factory=set)
    walls: set[Cell] = field(default_factory=set)
    stage_cells: dict[int, Cell] = field(default_factory=dict)


class NoMemoryPolicy:
    """Explores from its own moves' feedback alone (the harness's lower bound)."""

    name = "no_memory"

    def __init__(self) -> None:
        self.cost = Cost()
        self._rng = random.Random(0)
        self._modes: tuple[str, ...] = ()
        self._same: dict[int, int] = {}
        self._extent = (0, 0)
        self._state = _Explored((0, 0))
        self._last: tuple[Pose, str] | None = None
        self._stages_done = 0

    def begin(self, brief: Brief) -> None:
        """Forget everything: only the stage kinds of the task and the warehouse's size."""
        task = brief.plan.case.task
        self.cost = Cost()
        plan = brief.plan
        self._rng = random.Random(f"{brief.seed}/{plan.case.id}/{plan.start}/"
                                  f"{sorted(plan.blocked)}")
        self._modes = tuple(stage.mode for stage in task.stages)
        self._same = {n: stage.same_as for n, stage in enumerate(task.stages)
                      if stage.mode == "same"}
        self._extent = brief.extent
        self._state = _Explored(brief.plan.start.cell)
        self._last = None
        self._stages_done = 0

    def act(self, observation: Observation) -> str:
        """A move towards the nearest cell not stood on, the start, or an earlier item."""
        state, pose = self._state, observation.pose
        if self._last is not None and "failed" in observation.feedback:
            state.walls.add(moved(*self._last).cell)
        state.visited.add(pose.cell)
        while self._stages_done < observation.stages_done:
            state.stage_cells[self._stages_done] = pose.cell
            self._stages_done += 1
        goals: set[Cell] | None = None
        if observation.stages_done < len(self._modes):
            mode = self._modes[observation.stages_done]
            if mode == "origin":
                goals = {state.origin}
            elif mode == "same":
                goals = {state.stage_cells[self._same[observation.stages_done]]}
        direction = self._towards(pose.cell, goals)
        action = _RELATIVE[(direction - pose.heading) % 4]
        self._last = (pose, action)
        return action

    def _towards(self, start: Cell, goals: set[Cell] | None) -> int:
        """The first step (a heading) of a shortest known-passable path to a goal (an unvisited
        cell when ``goals`` is None); a random passable step when none is reachable."""
        width, height = self._extent
        first: dict[Cell, int] = {start: -1}
        frontier = deque([start])
        found: list[Cell] = []
        while frontier and not found:
            for _ in range(len(frontier)):
                cell = frontier.popleft()
                order = list(range(4))
                self._rng.shuffle(order)
                for heading in order:
                    dx, dy = STEPS[heading]
                    nxt = (cell[0] + dx, cell[1] + dy)
                    if (nxt in first or nxt in self._state.walls
                            or not (0 < nxt[0] < width - 1 and 0 < nxt[1] < height - 1)):
                        continue
                    first[nxt] = heading if cell == start else first[cell]
                    if (nxt in goals) if goals is not None else nxt not in self._state.visited:
                        found.append(nxt)
                    frontier.append(nxt)
        if found:
            return first[self._rng.choice(found)]
        return self._rng.randrange(4)
