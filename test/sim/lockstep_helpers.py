"""The lockstep robot the lockstep tests share: reset on a simulator, closed with it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mimir_robot.executor import Outcome
from mimir_robot.requests import PrimitiveRequest, TargetSpec
from mimir_sim.bridge_config import label_map_for, resolve_vocabulary
from mimir_sim.lockstep import LockstepRobot
from mimir_sim.sim import KitchenSim


@contextmanager
def lockstep_on(sim: KitchenSim) -> Iterator[LockstepRobot]:
    """The executor in lockstep with ``sim`` (kitchen vocabulary), reset; the robot and the
    simulator are shut down afterwards."""
    lockstep = LockstepRobot(sim, label_map=label_map_for(resolve_vocabulary("kitchen")))
    lockstep.reset()
    try:
        yield lockstep
    finally:
        lockstep.close()
        sim.shutdown()


def open_from_the_ordinary_stance(sim: KitchenSim, robot: LockstepRobot, fixture: str,
                                  memory_id: str) -> Outcome:
    """Stand where a move to ``fixture`` puts the base (its front at the standoff, facing it)
    and open it as memory holds it under ``memory_id`` (the centre of what the cameras saw,
    its top and front)."""
    lo, hi = (tuple(float(v) for v in corner) for corner in sim.entity_box(fixture))
    middle = (lo[1] + hi[1]) / 2.0
    stance = robot.run(PrimitiveRequest("move_to", TargetSpec(
        position=(lo[0] - robot.profile.face_standoff, middle, 0.0), yaw=0.0)))
    assert stance.success, stance
    remembered = TargetSpec(memory_id, "cabinet", ((lo[0] + hi[0]) / 2.0, middle, hi[2] - 0.1))
    return robot.run(PrimitiveRequest("open", remembered))
