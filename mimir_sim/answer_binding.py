"""Binding the entities a robot names to simulated entities, for the judge only.

When the robot answers an instruction it names memory nodes (``cabinet_2``) with their
remembered label and position. The judge needs simulator ids (``cab_2``). An entity binds to the
nearest simulated entity whose label is compatible with the remembered one and whose current box
lies within ``tolerance`` of the remembered position; without a position, to the only compatible
entity. Nothing on the robot side uses this: the executor finds its targets in the cameras.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mimir_robot.requests import TargetSpec, UnknownTargetError
from mimir_sim.entity_labels import LabelMap, labels_compatible
from mimir_sim.sim import KitchenSim


class EntityResolver:
    """Binds remembered entities to simulator ids.

    Args:
        sim: the simulator (read from the simulation thread).
        tolerance: largest distance (m) between a remembered position and an entity's box.
        label_map: maps simulator labels to vocabulary labels for matching.
    """

    def __init__(self, sim: KitchenSim, tolerance: float = 0.6,
                 label_map: LabelMap | None = None) -> None:
        if not tolerance > 0.0:
            raise ValueError(f"tolerance must be positive, got {tolerance}")
        self.sim = sim
        self.tolerance = tolerance
        self.label_map = label_map

    def resolve(self, target: TargetSpec, kinds: Sequence[str] = ("fixture", "object")) -> str:
        """Simulator id of the entity ``target`` names.

        Raises:
            UnknownTargetError: no (or, without a position, no unique) compatible entity.
        """
        scene = self.sim.scene
        candidates = [*(scene.fixtures if "fixture" in kinds else ()),
                      *(scene.objects if "object" in kinds else ())]
        compatible = [eid for eid in candidates
                      if labels_compatible(target.label, scene.entities[eid].label,
                                           self.label_map)]
        what = " or ".join(kinds)
        if target.position is None:
            if target.label and len(compatible) == 1:
                return compatible[0]
            raise UnknownTargetError(
                f"cannot bind {target.describe()} to a simulated {what}: a position is needed "
                f"({len(compatible)} entities carry a compatible label)")
        point = np.asarray(target.position, dtype=np.float64)
        scored = sorted(
            (self.sim.entity_state(eid).distance_to(point),
             float(np.linalg.norm(self.sim.entity_position(eid) - point)), eid)
            for eid in compatible)
        if not scored or scored[0][0] > self.tolerance:
            nearest = f"; nearest compatible is {scored[0][0]:.2f} m away" if scored else ""
            raise UnknownTargetError(
                f"no simulated {what} matches {target.describe()} within "
                f"{self.tolerance:.2f} m{nearest}")
        return scored[0][2]
