"""Bookkeeping of primitive execution for the bridge: what runs now and how far it got.

The bridge's ``execute_primitive`` action prepares a request with the embodiment, then runs it
while the simulator steps. :class:`ExecutionDesk` keeps the state that needs no message: the
running primitive (for feedback and for refusing to cancel it half-way), the interaction ids,
the phase read from the robot's state, and the joint state of the fixture it acts on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mimir_sim.embodiment import (
    FixtureJointState,
    PreparedPrimitive,
    PrimitiveOutcome,
    PrimitiveRequest,
    SimEmbodiment,
)
from mimir_sim.robot import BASE_JOINTS
from mimir_sim.sim import KitchenSim

#: action feedback is published at most this often while a primitive runs (s of sim time)
FEEDBACK_PERIOD = 0.5


@dataclass
class ActivePrimitive:
    """The primitive being executed.

    Attributes:
        token: the caller's handle of the request (the action's goal handle).
        primitive: primitive name.
        prepared: the checked request.
        interaction_id: id of the interaction window it opens.
        start: simulation time it started (s).
        last_feedback: simulation time of the last feedback (s).
    """

    token: object
    primitive: str
    prepared: PreparedPrimitive
    interaction_id: str
    start: float
    last_feedback: float = -math.inf


class ExecutionDesk:
    """Tracks the running primitive of one simulator and reads its progress from the robot."""

    def __init__(self, sim: KitchenSim, embodiment: SimEmbodiment) -> None:
        self.sim = sim
        self.embodiment = embodiment
        self.active: ActivePrimitive | None = None
        self._interactions = 0
        self._base_dofs = [sim.model.joint(n).dofadr[0] for n in BASE_JOINTS[:2]]

    def begin(
        self, token: object, request: PrimitiveRequest, prepared: PreparedPrimitive
    ) -> ActivePrimitive:
        """Mark a prepared primitive as running from now, with a fresh interaction id."""
        self._interactions += 1
        start = self.sim.time
        interaction_id = f"sim_{request.primitive}_{self._interactions:04d}_{round(start * 1000)}"
        self.active = ActivePrimitive(token, request.primitive, prepared, interaction_id, start)
        return self.active

    def finish(self) -> None:
        """Nothing runs any more."""
        self.active = None

    def run(self, active: ActivePrimitive) -> PrimitiveOutcome:
        """Run the active primitive's controller (the simulator steps meanwhile)."""
        return self.embodiment.run(active.prepared)

    def is_running(self, token: object) -> bool:
        """Whether the request with this handle is the one running now."""
        active = self.active
        return active is not None and active.token is token

    def feedback_due(self, stamp: float) -> ActivePrimitive | None:
        """The running primitive if its next feedback is due at ``stamp`` (then marked sent)."""
        active = self.active
        if active is None or stamp - active.last_feedback < FEEDBACK_PERIOD:
            return None
        active.last_feedback = stamp
        return active

    def target_state(self, active: ActivePrimitive | None) -> FixtureJointState | None:
        """Joint state of the fixture a primitive acts on (``None`` for other primitives)."""
        if active is None:
            return None
        return self.embodiment.target_joint_state(active.prepared)

    def phase(self, primitive: str) -> str:
        """Phase of a running primitive read from the robot's state (not from the controller).

        ``drive`` while the base moves, ``pull`` (open, close) or ``grasp`` while the fingers
        touch something, ``arm`` otherwise.
        """
        base_speed = float(np.linalg.norm(self.sim.data.qvel[self._base_dofs]))
        if base_speed > 0.05:
            return "drive"
        if self.sim.finger_contacts():
            return "pull" if primitive in ("open", "close") else "grasp"
        return "arm"


def describe_run(
    request: PrimitiveRequest, prepared: PreparedPrimitive, outcome: PrimitiveOutcome
) -> str:
    """One log line: the request, what it was bound to, and the outcome."""
    destination = f" -> {prepared.destination}" if prepared.destination else ""
    return (
        f"{request.primitive}({request.target.describe()} -> {prepared.sim_target or 'pose'}"
        f"{destination}): {outcome.outcome} ({outcome.message})"
    )
