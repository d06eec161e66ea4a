"""One MemTransfer episode: the agent's interface to the warehouse.

The agent reads the instruction, its absolute pose, what its last action did and the kinds of
item on the rack faces in front of it, and may ask for its egocentric image (rendered on demand,
so a policy that never looks costs no rendering). A move into a wall, a rack or a closed cell
leaves it in place, says so and costs a step; so does an answer that names no action
(:meth:`Episode.idle`, recorded as an empty action). When the agent reaches what a stage asks
for, the feedback says so and how many stages are done. The episode ends when every stage is done
(success) or after ``max_steps`` actions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from mimir_sim.warehouse.layout import ACTIONS, Cell, Layout, Pose, WarehouseError
from mimir_sim.warehouse.tasks import Progress, Task, advance

BUMPS = {"wall": "a wall is in the way", "rack": "a rack is in the way",
         "obstacle": "the passage is closed by an obstacle"}

Image = npt.NDArray[np.uint8]


@dataclass(frozen=True)
class Observation:
    """What the agent has at one step."""

    instruction: str
    pose: Pose
    step: int
    feedback: str
    in_front: tuple[str, ...]
    stages_done: int
    stages: int
    image: Callable[[], Image] | None = field(default=None, compare=False, repr=False)


class Episode:
    """An episode of ``task`` from ``start`` on ``layout`` with ``blocked`` cells closed.

    ``render`` (a pose and the closed cells to an image) serves :attr:`Observation.image`.

    Raises:
        WarehouseError: the start is not a free floor cell or ``max_steps`` is not positive.
    """

    def __init__(self, layout: Layout, task: Task, start: Pose, *,
                 blocked: frozenset[Cell] = frozenset(), max_steps: int = 200,
                 render: Callable[[Pose, frozenset[Cell]], Image] | None = None) -> None:
        if not layout.is_floor(start.cell, blocked):
            raise WarehouseError(f"start {start} is not a free floor cell")
        if max_steps <= 0:
            raise WarehouseError(f"max_steps must be positive, got {max_steps}")
        self.layout, self.task, self.start, self.blocked = layout, task, start, blocked
        self.max_steps = max_steps
        self._render = render
        self.pose = start
        self.progress = advance(task, layout, Progress(), start.cell, start.cell)
        self.actions: list[str] = []
        self.poses: list[Pose] = [start]
        self.bumps: list[str] = []
        self._feedback = "episode started"

    @property
    def success(self) -> bool:
        """Whether every stage is done."""
        return self.progress.done(self.task)

    @property
    def done(self) -> bool:
        """Whether the episode is over (finished, or out of steps)."""
        return self.success or len(self.actions) >= self.max_steps

    def observe(self) -> Observation:
        """What the agent has now."""
        image = None
        if self._render is not None:
            render, pose, blocked = self._render, self.pose, self.blocked
            image = lambda: render(pose, blocked)  # noqa: E731 - a deferred render
        return Observation(self.task.instruction, self.pose, len(self.actions), self._feedback,
                           tuple(i.kind for i in self.layout.items_at(self.pose.cell)),
                           self.progress.stage, len(self.task.stages), image)

    def step(self, action: str) -> Observation:
        """Take ``action`` and observe.

        Raises:
            WarehouseError: an unknown action, or the episode is over.
        """
        if action not in ACTIONS:
            raise WarehouseError(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
        if self.done:
            raise WarehouseError("the episode is over")
        moved = self.layout.step(self.pose, action, self.blocked)
        before = self.progress.stage
        if moved.bumped:
            self.bumps.append(moved.bumped)
            feedback = f"{action} failed: {BUMPS[moved.bumped]}"
        else:
            feedback = f"{action} done"
            if moved.pose.cell != self.pose.cell:
                self.progress = advance(self.task, self.layout, self.progress, moved.pose.cell,
                                        self.start.cell)
        self.pose = moved.pose
        self.actions.append(action)
        self.poses.append(self.pose)
        if self.progress.stage > before:
            feedback += (f"; stage {self.progress.stage} of {len(self.task.stages)} done"
                         + ("; task complete" if self.success else ""))
        self._feedback = feedback
        return self.observe()

    def idle(self, reason: str) -> Observation:
        """Spend a step without acting (the policy gave no usable action) and say why.

        Raises:
            WarehouseError: the episode is over.
        """
        if self.done:
            raise WarehouseError("the episode is over")
        self.actions.append("")
        self.poses.append(self.pose)
        self._feedback = f"no action taken: {reason}"
        return self.observe()

    def met_closure(self, approach: frozenset[Cell]) -> bool:
        """Whether the agent came up against the closed passage: it tried to enter it, or
        stood on a cell of ``approach`` (where the old route entered it)."""
        return "obstacle" in self.bumps or any(p.cell in approach for p in self.poses)
