"""The lockstep robot the lockstep tests share: reset on a simulator, closed with it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
