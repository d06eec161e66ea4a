"""Shortest action sequences on a known warehouse map, and replaying them.

The planner searches breadth first over (pose, task progress), so the sequence it returns is the
shortest that completes every stage: it chooses which instance to reach, and in which order, by
the whole route, not stage by stage. Every action costs one step, a turn as much as a move.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mimir_sim.warehouse.layout import ACTIONS, Cell, Layout, Pose, WarehouseError
from mimir_sim.warehouse.tasks import Progress, Task, advance

State = tuple[Pose, Progress]


class NoRouteError(WarehouseError):
    """No sequence of actions completes the task from the pose (a closed passage cut it off)."""


def shortest(layout: Layout, task: Task, start: Pose, *, origin: Cell | None = None,
             progress: Progress | None = None, blocked: frozenset[Cell] = frozenset(),
             limit: int = 400) -> list[str]:
    """The shortest actions that finish ``task`` from ``start`` (at ``progress``; the episode's
    origin defaults to the start cell).

    Raises:
        NoRouteError: the task cannot be finished within ``limit`` steps.
        WarehouseError: the start is not a free floor cell.
    """
    if not layout.is_floor(start.cell, blocked):
        raise WarehouseError(f"start {start} is not a free floor cell")
    home = start.cell if origin is None else origin
    first = advance(task, layout, progress or Progress(), start.cell, home)
    root: State = (start, first)
    if first.done(task):
        return []
    parent: dict[State, tuple[State, str]] = {}
    seen = {root}
    frontier: deque[tuple[State, int]] = deque([(root, 0)])
    while frontier:
        (pose, prog), depth = frontier.popleft()
        if depth >= limit:
            break
        for action in ACTIONS:
            step = layout.step(pose, action, blocked)
            if step.bumped:
                continue
            nxt = step.pose
            nprog = prog if nxt.cell == pose.cell else advance(task, layout, prog, nxt.cell,
                                                                 home)
            state = (nxt, nprog)
            if state in seen:
                continue
            seen.add(state)
            parent[state] = ((pose, prog), action)
            if nprog.done(task):
                return _unwind(parent, state, root)
            frontier.append((state, depth + 1))
    raise NoRouteError(f"no route finishes the task from {start} within {limit} steps")


def _unwind(parent: dict[State, tuple[State, str]], state: State, root: State) -> list[str]:
    actions: list[str] = []
    while state != root:
        state, action = parent[state]
        actions.append(action)
    return actions[::-1]


@dataclass(frozen=True)
class Replay:
    """What a sequence of actions did: every pose (the start first), the moves a closed cell,
    rack or wall stopped, and whether the task was finished (and after how many actions)."""

    poses: tuple[Pose, ...]
    bumps: tuple[tuple[int, str], ...]
    finished_at: int

    @property
    def success(self) -> bool:
        """Whether the task was finished."""
        return self.finished_at >= 0

    @property
    def cells(self) -> tuple[Cell, ...]:
        """The cells visited in order, without repeats of a cell stood on."""
        cells = [self.poses[0].cell]
        for pose in self.poses[1:]:
            if pose.cell != cells[-1]:
                cells.append(pose.cell)
        return tuple(cells)


def replay(layout: Layout, task: Task, start: Pose, actions: Sequence[str], *,
           blocked: frozenset[Cell] = frozenset()) -> Replay:
    """Run ``actions`` from ``start`` and report what they did (a later action still runs after
    the task is finished; ``finished_at`` counts the actions up to it).

    Raises:
        WarehouseError: an unknown action or a start that is not a free floor cell.
    """
    if not layout.is_floor(start.cell, blocked):
        raise WarehouseError(f"start {start} is not a free floor cell")
    pose = start
    progress = advance(task, layout, Progress(), start.cell, start.cell)
    finished = 0 if progress.done(task) else -1
    poses = [pose]
    bumps = []
    for n, action in enumerate(actions, start=1):
        step = layout.step(pose, action, blocked)
        if step.bumped:
            bumps.append((n, step.bumped))
        elif step.pose.cell != pose.cell:
            progress = advance(task, layout, progress, step.pose.cell, start.cell)
        pose = step.pose
        poses.append(pose)
        if finished < 0 and progress.done(task):
            finished = n
    return Replay(tuple(poses), tuple(bumps), finished)


def edges(cells: Iterable[Cell]) -> set[frozenset[Cell]]:
    """The undirected cell-to-cell edges of a route."""
    seq = list(cells)
    return {frozenset(pair) for pair in itertools.pairwise(seq) if pair[0] != pair[1]}
