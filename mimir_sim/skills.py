"""The robot parts that the skill sets (:class:`~mimir_sim.doors.DoorSkills`,
:class:`~mimir_sim.sim_primitives.Primitives`) act through, built once by the facade."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mimir_sim.controllers import RobotControl
from mimir_sim.fixtures import ArticulatedFixtures
from mimir_sim.grasping import GraspAssist
from mimir_sim.physics import PhysicsWorld
from mimir_sim.recording import Recorder
from mimir_sim.robot import RobotBody


@dataclass(frozen=True)
class RobotParts:
    """World, body, controllers, grasp assist, fixtures, recorder and noise source of one robot."""

    world: PhysicsWorld
    body: RobotBody
    control: RobotControl
    grasp: GraspAssist
    fixtures: ArticulatedFixtures
    recorder: Recorder
    rng: np.random.Generator


class RobotSkills:
    """Base of a skill set: keeps the robot parts it acts through as attributes."""

    def __init__(self, parts: RobotParts) -> None:
        self.world = parts.world
        self.body = parts.body
        self.control = parts.control
        self.grasp = parts.grasp
        self.fixtures = parts.fixtures
        self.recorder = parts.recorder
        self._rng = parts.rng
